// scalar.h - the scalar operations every family writes its kernels with, overloaded for float32
// (`float`) and complex64 (`float2`, x = real, y = imaginary; primitives in complex.h).
// Included as `#include "scalar.h"`; the loader inlines it. Never use `*` or `/` on float2 values
// directly: on vectors those are element-wise, not complex.
//
// Also here: the safe-math pragmas (every family file includes this header first) and the one
// instantiation idiom, MPSL_INSTANTIATE / MPSL_INSTANTIATE_DTYPES (host names
// `<kernel>_<dtype>[_<param>]`, dtype tags f32 / c64; mpslinalg.kernels.kernel_name builds the
// same names on the host).
#include <metal_stdlib>
#include "complex.h"
using namespace metal;

// PYTORCH_MPS_FAST_MATH=1 compiles every compile_shader library with fast math: isfinite/isnan
// may fold away, divisions may become reciprocal products, sums may be re-associated. Pin safe
// math and no FMA contraction for our kernels. The pragmas exist from MSL 3.2 on (the language of
// MTLCompileOptions.mathMode, macOS 15); under an older language version torch's compile options
// rule, and mpslinalg warns once when fast math is requested (kernels/loader.py).
#if defined(__METAL_VERSION__) && __METAL_VERSION__ >= 320
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
#endif

// ---- arithmetic ------------------------------------------------------------------------------

inline float s_mul(float a, float b) { return a * b; }
inline float2 s_mul(float2 a, float2 b) { return cmul(a, b); }
// True division (Smith's algorithm for complex: no overflow of |b|^2).
inline float s_div(float a, float b) { return a / b; }
inline float2 s_div(float2 a, float2 b) { return cdiv(a, b); }
inline float s_conj(float a) { return a; }
inline float2 s_conj(float2 a) { return cconj(a); }

// ---- magnitudes and predicates -----------------------------------------------------------------

// LAPACK's cabs1 = |Re| + |Im| (the pivot measure of i?amax); |a| for real.
inline float s_abs1(float a) { return fabs(a); }
inline float s_abs1(float2 a) { return cabs1(a); }
// The true modulus without overflow of the squares (LAPACK's ABS on complex).
inline float s_abs(float a) { return fabs(a); }
inline float s_abs(float2 a) { return cmodulus(a); }
inline bool s_is_zero(float a) { return a == 0.0f; }
inline bool s_is_zero(float2 a) { return a.x == 0.0f && a.y == 0.0f; }
// The one finiteness rule for entries: element-wise. (isfinite(|Re| + |Im|) would call the finite
// 2e38 + 2e38i non-finite: the sum overflows.)
inline bool s_isfinite(float a) { return isfinite(a); }
inline bool s_isfinite(float2 a) { return isfinite(a.x) && isfinite(a.y); }

// ---- constants -------------------------------------------------------------------------------

template <typename T> inline T s_zero();
template <> inline float s_zero<float>() { return 0.0f; }
template <> inline float2 s_zero<float2>() { return float2(0.0f, 0.0f); }
template <typename T> inline T s_one();
template <> inline float s_one<float>() { return 1.0f; }
template <> inline float2 s_one<float2>() { return float2(1.0f, 0.0f); }
template <typename T> inline T s_nan();
template <> inline float s_nan<float>() { return NAN; }
template <> inline float2 s_nan<float2>() { return float2(NAN, NAN); }

// Smallest normal float32 (LAPACK's slamch('S')): below it, 1 / x overflows for some x.
constant constexpr float S_SFMIN = 1.17549435e-38f;

// Threads per simdgroup on Apple GPUs (and the emulator's targets: a cuda warp): the width every
// simd_* collective, lane index and per-simdgroup share in the kernels' index math is written with.
constant constexpr int SIMD_WIDTH = 32;

// ---- instantiation ---------------------------------------------------------------------------
// MLX's idiom: the explicit instantiation's type is the template's own (decltype), so parameters
// and their [[buffer(i)]] / position attributes are written once, in the definition.
//   MPSL_INSTANTIATE("small_inv_f32_3", small_inv, float, 3)
//   MPSL_INSTANTIATE_DTYPES(lu_panel)  ->  lu_panel_f32 (float), lu_panel_c64 (float2)
#define MPSL_INSTANTIATE(host, func, ...) \
  template [[host_name(host)]] [[kernel]] decltype(func<__VA_ARGS__>) func<__VA_ARGS__>;
#define MPSL_INSTANTIATE_DTYPES(func)          \
  MPSL_INSTANTIATE(#func "_f32", func, float) \
  MPSL_INSTANTIATE(#func "_c64", func, float2)
