// msl_types.h — the Metal Shading Language surface, target-neutral part (DESIGN §5).
//
// Scalar and vector types (clang ext_vector_type, so swizzles and operators work), vector
// constructors and conversions (the pre-pass rewrites `float2(a, b)` into `__mpsle_vec<float2>(a,
// b)` and `static_cast<float2>(v)` into `__mpsle_cvt<float2>(v)`), bool vectors, as_type,
// numeric_limits, the metal:: math library (precise and fast namespaces), select/clamp/mix/fma,
// geometric functions and the usual constants.
//
// Included after the target has defined the address-space keywords (device, constant,
// threadgroup, thread). Plain C++17 with clang builtins only: no system headers.
#pragma once

typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;
typedef _Float16 half;
typedef __bf16 bfloat;
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;

#define MPSLE_VEC_TYPES(T)                                  \
  typedef T T##2 __attribute__((ext_vector_type(2)));       \
  typedef T T##3 __attribute__((ext_vector_type(3)));       \
  typedef T T##4 __attribute__((ext_vector_type(4)));
MPSLE_VEC_TYPES(float)
MPSLE_VEC_TYPES(half)
MPSLE_VEC_TYPES(bfloat)
MPSLE_VEC_TYPES(int)
MPSLE_VEC_TYPES(uint)
MPSLE_VEC_TYPES(short)
MPSLE_VEC_TYPES(ushort)
MPSLE_VEC_TYPES(char)
MPSLE_VEC_TYPES(uchar)
MPSLE_VEC_TYPES(long)
MPSLE_VEC_TYPES(ulong)
#undef MPSLE_VEC_TYPES

// ---------------------------------------------------------------------------------------------
// traits
// ---------------------------------------------------------------------------------------------
template <class T> struct __mpsle_vt {
  using elem = T;
  static constexpr int n = 1;
  static constexpr bool is_vec = false;
};
template <class E, int N> struct __mpsle_vt<E __attribute__((ext_vector_type(N)))> {
  using elem = E;
  static constexpr int n = N;
  static constexpr bool is_vec = true;
};
template <class T> struct __mpsle_vt<const T> : __mpsle_vt<T> {};
template <class T> struct __mpsle_vt<volatile T> : __mpsle_vt<T> {};
template <class E, int N> using __mpsle_vec_t = E __attribute__((ext_vector_type(N)));

template <class A, class B> struct __mpsle_same { static constexpr bool value = false; };
template <class A> struct __mpsle_same<A, A> { static constexpr bool value = true; };
template <bool C, class T = void> struct __mpsle_enable_if {};
template <class T> struct __mpsle_enable_if<true, T> { using type = T; };

template <class T> struct __mpsle_is_float {
  static constexpr bool value = __mpsle_same<T, float>::value || __mpsle_same<T, half>::value ||
                                __mpsle_same<T, bfloat>::value || __mpsle_same<T, double>::value;
};

// ---------------------------------------------------------------------------------------------
// bool vectors: a small struct (clang's vector comparisons yield -1/0 integer masks)
// ---------------------------------------------------------------------------------------------
template <int N> struct __mpsle_boolv {
  bool v[N];
  __mpsle_boolv() = default;
  __mpsle_boolv(bool b) {
    for (int i = 0; i < N; i++) v[i] = b;
  }
  template <class M, class = typename __mpsle_enable_if<__mpsle_vt<M>::is_vec && __mpsle_vt<M>::n == N>::type>
  __mpsle_boolv(M m) {
    for (int i = 0; i < N; i++) v[i] = m[i] != 0;
  }
  bool &operator[](int i) { return v[i]; }
  bool operator[](int i) const { return v[i]; }
  bool &x() { return v[0]; }
  __mpsle_boolv operator!() const {
    __mpsle_boolv r;
    for (int i = 0; i < N; i++) r.v[i] = !v[i];
    return r;
  }
  friend __mpsle_boolv operator&&(__mpsle_boolv a, __mpsle_boolv b) {
    for (int i = 0; i < N; i++) a.v[i] = a.v[i] && b.v[i];
    return a;
  }
  friend __mpsle_boolv operator||(__mpsle_boolv a, __mpsle_boolv b) {
    for (int i = 0; i < N; i++) a.v[i] = a.v[i] || b.v[i];
    return a;
  }
  friend __mpsle_boolv operator==(__mpsle_boolv a, __mpsle_boolv b) {
    for (int i = 0; i < N; i++) a.v[i] = a.v[i] == b.v[i];
    return a;
  }
};
template <int N> struct __mpsle_vt<__mpsle_boolv<N>> {
  using elem = bool;
  static constexpr int n = N;
  static constexpr bool is_vec = true;
};
typedef __mpsle_boolv<2> bool2;
typedef __mpsle_boolv<3> bool3;
typedef __mpsle_boolv<4> bool4;

// ---------------------------------------------------------------------------------------------
// vector constructors and conversions
// ---------------------------------------------------------------------------------------------
template <class V, class A> inline void __mpsle_put(V &r, int &k, A a) {
  using E = typename __mpsle_vt<V>::elem;
  if constexpr (__mpsle_vt<A>::is_vec) {
    for (int i = 0; i < __mpsle_vt<A>::n; i++) r[k++] = (E)a[i];
  } else {
    r[k++] = (E)a;
  }
}
template <class V, class... A> inline V __mpsle_vec(A... a) {
  using E = typename __mpsle_vt<V>::elem;
  constexpr int N = __mpsle_vt<V>::n;
  if constexpr (sizeof...(A) == 0) {
    return V((E)0);
  } else if constexpr (sizeof...(A) == 1 && !(__mpsle_vt<A>::is_vec && ...)) {
    return V((E)(a)...);  // splat
  } else {
    static_assert(((__mpsle_vt<A>::n) + ...) == N, "vector constructor: wrong number of components");
    V r;
    int k = 0;
    (__mpsle_put(r, k, a), ...);
    return r;
  }
}
template <class V, class A> inline V __mpsle_cvt(A a) {
  if constexpr (__mpsle_vt<A>::is_vec && __mpsle_vt<V>::is_vec) {
    static_assert(__mpsle_vt<A>::n == __mpsle_vt<V>::n, "static_cast between vectors of different length");
    return __mpsle_vec<V>(a);
  } else if constexpr (__mpsle_vt<V>::is_vec) {
    return __mpsle_vec<V>(a);
  } else {
    return static_cast<V>(a);
  }
}

namespace metal {

// metal::vec<T, n>: the vector type of n elements of T (floatN == vec<float, N>)
template <class T, int N> using vec = __mpsle_vec_t<T, N>;

template <class T, class U> inline T as_type(U u) {
  static_assert(sizeof(T) == sizeof(U), "as_type: source and destination sizes differ");
  return __builtin_bit_cast(T, u);
}

// ---------------------------------------------------------------------------------------------
// numeric_limits
// ---------------------------------------------------------------------------------------------
template <class T> struct numeric_limits;
#define MPSLE_LIMITS(T, MIN, MAX, LOWEST, EPS, INF, NAN_, DENORM, DIG, SIGNED, INTEGER) \
  template <> struct numeric_limits<T> {                                              \
    static constexpr bool is_specialized = true;                                       \
    static constexpr bool is_signed = SIGNED;                                          \
    static constexpr bool is_integer = INTEGER;                                        \
    static constexpr int digits = DIG;                                                 \
    static constexpr T min() { return MIN; }                                           \
    static constexpr T max() { return MAX; }                                           \
    static constexpr T lowest() { return LOWEST; }                                     \
    static constexpr T epsilon() { return EPS; }                                       \
    static constexpr T infinity() { return INF; }                                      \
    static constexpr T quiet_NaN() { return NAN_; }                                    \
    static constexpr T denorm_min() { return DENORM; }                                 \
  };
MPSLE_LIMITS(float, __FLT_MIN__, __FLT_MAX__, -__FLT_MAX__, __FLT_EPSILON__, __builtin_inff(), __builtin_nanf(""),
             __FLT_DENORM_MIN__, 24, true, false)
MPSLE_LIMITS(half, (half)6.103515625e-05f, (half)65504.0f, (half)-65504.0f, (half)0.0009765625f,
             (half)__builtin_inff(), (half)__builtin_nanf(""), (half)5.9604644775390625e-08f, 11, true, false)
MPSLE_LIMITS(int, (-2147483647 - 1), 2147483647, (-2147483647 - 1), 0, 0, 0, 0, 31, true, true)
MPSLE_LIMITS(uint, 0u, 4294967295u, 0u, 0u, 0u, 0u, 0u, 32, false, true)
MPSLE_LIMITS(short, (short)-32768, (short)32767, (short)-32768, 0, 0, 0, 0, 15, true, true)
MPSLE_LIMITS(ushort, (ushort)0, (ushort)65535, (ushort)0, 0, 0, 0, 0, 16, false, true)
MPSLE_LIMITS(char, (char)-128, (char)127, (char)-128, 0, 0, 0, 0, 7, true, true)
MPSLE_LIMITS(uchar, (uchar)0, (uchar)255, (uchar)0, 0, 0, 0, 0, 8, false, true)
MPSLE_LIMITS(long, (-9223372036854775807L - 1), 9223372036854775807L, (-9223372036854775807L - 1), 0, 0, 0, 0, 63,
             true, true)
MPSLE_LIMITS(ulong, 0ul, 18446744073709551615ul, 0ul, 0ul, 0ul, 0ul, 0ul, 64, false, true)
#undef MPSLE_LIMITS

// ---------------------------------------------------------------------------------------------
// math: scalar float implementations (correctly rounded sqrt; libm for the rest), half and
// bfloat computed in float; vectors element-wise.
// ---------------------------------------------------------------------------------------------
#define MPSLE_MAP1(name)                                                        \
  template <class T, class = typename __mpsle_enable_if<__mpsle_vt<T>::is_vec>::type> \
  inline T name(T x) {                                                           \
    T r;                                                                         \
    for (int i = 0; i < __mpsle_vt<T>::n; i++) r[i] = name(x[i]);                \
    return r;                                                                    \
  }
#define MPSLE_MAP2(name)                                                        \
  template <class T, class = typename __mpsle_enable_if<__mpsle_vt<T>::is_vec>::type> \
  inline T name(T x, T y) {                                                      \
    T r;                                                                         \
    for (int i = 0; i < __mpsle_vt<T>::n; i++) r[i] = name(x[i], y[i]);          \
    return r;                                                                    \
  }
#define MPSLE_MAP3(name)                                                        \
  template <class T, class = typename __mpsle_enable_if<__mpsle_vt<T>::is_vec>::type> \
  inline T name(T x, T y, T z) {                                                 \
    T r;                                                                         \
    for (int i = 0; i < __mpsle_vt<T>::n; i++) r[i] = name(x[i], y[i], z[i]);    \
    return r;                                                                    \
  }
#define MPSLE_F1(name, builtin)                                                  \
  inline float name(float x) { return builtin(x); }                             \
  inline half name(half x) { return (half)builtin((float)x); }                  \
  inline bfloat name(bfloat x) { return (bfloat)builtin((float)x); }            \
  MPSLE_MAP1(name)
#define MPSLE_F2(name, builtin)                                                  \
  inline float name(float x, float y) { return builtin(x, y); }                 \
  inline half name(half x, half y) { return (half)builtin((float)x, (float)y); } \
  inline bfloat name(bfloat x, bfloat y) { return (bfloat)builtin((float)x, (float)y); } \
  MPSLE_MAP2(name)

inline float __rsqrt(float x) { return 1.0f / __builtin_sqrtf(x); }
inline float __sign(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : (x == x ? x : 0.0f); }
inline float __rint(float x) { return __builtin_rintf(x); }
inline float __exp10(float x) { return __builtin_powf(10.0f, x); }
inline float __saturate(float x) { return __builtin_fminf(__builtin_fmaxf(x, 0.0f), 1.0f); }
inline float __divide(float x, float y) { return x / y; }
inline float __powr(float x, float y) { return __builtin_powf(x, y); }

MPSLE_F1(sqrt, __builtin_sqrtf)
MPSLE_F1(rsqrt, __rsqrt)
MPSLE_F1(fabs, __builtin_fabsf)
MPSLE_F1(exp, __builtin_expf)
MPSLE_F1(exp2, __builtin_exp2f)
MPSLE_F1(exp10, __exp10)
MPSLE_F1(log, __builtin_logf)
MPSLE_F1(log2, __builtin_log2f)
MPSLE_F1(log10, __builtin_log10f)
MPSLE_F1(sin, __builtin_sinf)
MPSLE_F1(cos, __builtin_cosf)
MPSLE_F1(tan, __builtin_tanf)
MPSLE_F1(asin, __builtin_asinf)
MPSLE_F1(acos, __builtin_acosf)
MPSLE_F1(atan, __builtin_atanf)
MPSLE_F1(sinh, __builtin_sinhf)
MPSLE_F1(cosh, __builtin_coshf)
MPSLE_F1(tanh, __builtin_tanhf)
MPSLE_F1(asinh, __builtin_asinhf)
MPSLE_F1(acosh, __builtin_acoshf)
MPSLE_F1(atanh, __builtin_atanhf)
MPSLE_F1(floor, __builtin_floorf)
MPSLE_F1(ceil, __builtin_ceilf)
MPSLE_F1(round, __builtin_roundf)
MPSLE_F1(trunc, __builtin_truncf)
MPSLE_F1(rint, __rint)
MPSLE_F1(cbrt, __builtin_cbrtf)
MPSLE_F1(sign, __sign)
MPSLE_F1(saturate, __saturate)
MPSLE_F2(pow, __builtin_powf)
MPSLE_F2(powr, __powr)
MPSLE_F2(atan2, __builtin_atan2f)
MPSLE_F2(fmod, __builtin_fmodf)
MPSLE_F2(fmin, __builtin_fminf)
MPSLE_F2(fmax, __builtin_fmaxf)
MPSLE_F2(copysign, __builtin_copysignf)
MPSLE_F2(hypot, __builtin_hypotf)
MPSLE_F2(divide, __divide)
MPSLE_F2(fdim, __builtin_fdimf)

inline float __fract(float x) { return __builtin_fminf(x - __builtin_floorf(x), 0x1.fffffep-1f); }
MPSLE_F1(fract, __fract)

inline float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline half fma(half a, half b, half c) { return (half)__builtin_fmaf((float)a, (float)b, (float)c); }
MPSLE_MAP3(fma)

// abs / min / max / clamp for every scalar type; vectors element-wise
inline float abs(float x) { return __builtin_fabsf(x); }
inline half abs(half x) { return (half)__builtin_fabsf((float)x); }
inline int abs(int x) { return x < 0 ? -x : x; }
inline uint abs(uint x) { return x; }
inline long abs(long x) { return x < 0 ? -x : x; }
inline short abs(short x) { return x < 0 ? (short)-x : x; }
inline char abs(char x) { return x < 0 ? (char)-x : x; }
MPSLE_MAP1(abs)
#define MPSLE_MINMAX(T)                                             \
  inline T min(T a, T b) { return b < a ? b : a; }                 \
  inline T max(T a, T b) { return a < b ? b : a; }                 \
  inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
inline float min(float a, float b) { return __builtin_fminf(a, b); }
inline float max(float a, float b) { return __builtin_fmaxf(a, b); }
inline float clamp(float x, float lo, float hi) { return __builtin_fminf(__builtin_fmaxf(x, lo), hi); }
inline half min(half a, half b) { return (half)__builtin_fminf((float)a, (float)b); }
inline half max(half a, half b) { return (half)__builtin_fmaxf((float)a, (float)b); }
inline half clamp(half x, half lo, half hi) { return min(max(x, lo), hi); }
MPSLE_MINMAX(int)
MPSLE_MINMAX(uint)
MPSLE_MINMAX(long)
MPSLE_MINMAX(ulong)
MPSLE_MINMAX(short)
MPSLE_MINMAX(ushort)
MPSLE_MINMAX(char)
MPSLE_MINMAX(uchar)
#undef MPSLE_MINMAX
MPSLE_MAP2(min)
MPSLE_MAP2(max)
MPSLE_MAP3(clamp)
template <class T, class = typename __mpsle_enable_if<__mpsle_vt<T>::is_vec>::type>
inline T min(T a, typename __mpsle_vt<T>::elem b) { return min(a, T(b)); }
template <class T, class = typename __mpsle_enable_if<__mpsle_vt<T>::is_vec>::type>
inline T max(T a, typename __mpsle_vt<T>::elem b) { return max(a, T(b)); }
template <class T, class = typename __mpsle_enable_if<__mpsle_vt<T>::is_vec>::type>
inline T clamp(T x, typename __mpsle_vt<T>::elem lo, typename __mpsle_vt<T>::elem hi) {
  return clamp(x, T(lo), T(hi));
}

template <class T> inline T max3(T a, T b, T c) { return max(max(a, b), c); }
template <class T> inline T min3(T a, T b, T c) { return min(min(a, b), c); }
template <class T> inline T median3(T a, T b, T c) { return max(min(a, b), min(max(a, b), c)); }
template <class T> inline T fmax3(T a, T b, T c) { return fmax(fmax(a, b), c); }
template <class T> inline T fmin3(T a, T b, T c) { return fmin(fmin(a, b), c); }

template <class T> inline T mix(T x, T y, T a) { return x + (y - x) * a; }
template <class T, class = typename __mpsle_enable_if<__mpsle_vt<T>::is_vec>::type>
inline T mix(T x, T y, typename __mpsle_vt<T>::elem a) { return x + (y - x) * a; }
template <class T> inline T step(T edge, T x) {
  if constexpr (__mpsle_vt<T>::is_vec) {
    T r;
    for (int i = 0; i < __mpsle_vt<T>::n; i++) r[i] = x[i] < edge[i] ? 0 : 1;
    return r;
  } else {
    return x < edge ? T(0) : T(1);
  }
}
template <class T> inline T smoothstep(T e0, T e1, T x) {
  T t = clamp((x - e0) / (e1 - e0), T(0), T(1));
  return t * t * (T(3) - T(2) * t);
}

template <class T> inline T sincos(T x, thread T &c) {
  c = cos(x);
  return sin(x);
}

// classification
inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isnan(half x) { return __builtin_isnan((float)x); }
inline bool isinf(float x) { return __builtin_isinf(x); }
inline bool isinf(half x) { return __builtin_isinf((float)x); }
inline bool isfinite(float x) { return __builtin_isfinite(x); }
inline bool isfinite(half x) { return __builtin_isfinite((float)x); }
inline bool isnormal(float x) { return __builtin_isnormal(x); }
inline bool signbit(float x) { return __builtin_signbit(x); }
#define MPSLE_CLASSV(name)                                                          \
  template <class T, class = typename __mpsle_enable_if<__mpsle_vt<T>::is_vec>::type> \
  inline __mpsle_boolv<__mpsle_vt<T>::n> name(T x) {                                 \
    __mpsle_boolv<__mpsle_vt<T>::n> r;                                               \
    for (int i = 0; i < __mpsle_vt<T>::n; i++) r.v[i] = name(x[i]);                  \
    return r;                                                                        \
  }
MPSLE_CLASSV(isnan)
MPSLE_CLASSV(isinf)
MPSLE_CLASSV(isfinite)
MPSLE_CLASSV(signbit)
#undef MPSLE_CLASSV

inline float ldexp(float x, int k) { return __builtin_ldexpf(x, k); }
inline float frexp(float x, thread int &e) { return __builtin_frexpf(x, &e); }
inline float modf(float x, thread float &ip) { return __builtin_modff(x, &ip); }

// relational on masks / bool vectors
inline bool all(bool b) { return b; }
inline bool any(bool b) { return b; }
template <int N> inline bool all(__mpsle_boolv<N> b) {
  for (int i = 0; i < N; i++)
    if (!b.v[i]) return false;
  return true;
}
template <int N> inline bool any(__mpsle_boolv<N> b) {
  for (int i = 0; i < N; i++)
    if (b.v[i]) return true;
  return false;
}
template <class M, class = typename __mpsle_enable_if<__mpsle_vt<M>::is_vec>::type> inline bool all(M m) {
  for (int i = 0; i < __mpsle_vt<M>::n; i++)
    if (!m[i]) return false;
  return true;
}
template <class M, class = typename __mpsle_enable_if<__mpsle_vt<M>::is_vec>::type> inline bool any(M m) {
  for (int i = 0; i < __mpsle_vt<M>::n; i++)
    if (m[i]) return true;
  return false;
}
// select(a, b, c): c ? b : a (element-wise for vectors)
template <class T> inline T select(T a, T b, bool c) { return c ? b : a; }
template <class T, class C, class = typename __mpsle_enable_if<__mpsle_vt<T>::is_vec && __mpsle_vt<C>::is_vec>::type>
inline T select(T a, T b, C c) {
  T r;
  for (int i = 0; i < __mpsle_vt<T>::n; i++) r[i] = c[i] ? b[i] : a[i];
  return r;
}

// geometric
template <class T> inline typename __mpsle_vt<T>::elem dot(T a, T b) {
  typename __mpsle_vt<T>::elem s = 0;
  for (int i = 0; i < __mpsle_vt<T>::n; i++) s += a[i] * b[i];
  return s;
}
template <class T> inline typename __mpsle_vt<T>::elem length_squared(T a) { return dot(a, a); }
template <class T> inline typename __mpsle_vt<T>::elem length(T a) { return sqrt(dot(a, a)); }
template <class T> inline typename __mpsle_vt<T>::elem distance(T a, T b) { return length(a - b); }
template <class T> inline T normalize(T a) { return a * rsqrt(dot(a, a)); }
inline float3 cross(float3 a, float3 b) {
  return __mpsle_vec<float3>(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}

// integer
template <class T> inline T popcount(T x) { return (T)__builtin_popcountll((unsigned long long)x & (~0ull >> (64 - 8 * sizeof(T)))); }
inline uint clz(uint x) { return x ? (uint)__builtin_clz(x) : 32u; }
inline int clz(int x) { return (int)clz((uint)x); }
inline uint ctz(uint x) { return x ? (uint)__builtin_ctz(x) : 32u; }
inline int ctz(int x) { return (int)ctz((uint)x); }
inline uint mulhi(uint a, uint b) { return (uint)(((unsigned long long)a * b) >> 32); }
inline int mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline uint absdiff(int a, int b) { return a > b ? (uint)(a - b) : (uint)(b - a); }

namespace precise {
using namespace ::metal;
}
namespace fast {
using namespace ::metal;
}

}  // namespace metal

// ---------------------------------------------------------------------------------------------
// constants
// ---------------------------------------------------------------------------------------------
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define HUGE_VALF __builtin_huge_valf()
#define MAXFLOAT __FLT_MAX__
#define FLT_MAX __FLT_MAX__
#define FLT_MIN __FLT_MIN__
#define FLT_EPSILON __FLT_EPSILON__
#define FLT_MANT_DIG 24
#define FLT_MAX_EXP 128
#define FLT_MIN_EXP (-125)
#define INT_MAX 2147483647
#define INT_MIN (-2147483647 - 1)
#define UINT_MAX 4294967295u
#define HALF_MAX ((half)65504.0f)
#define HALF_MIN ((half)6.103515625e-05f)
#define HALF_EPSILON ((half)0.0009765625f)
#define M_E_F 2.71828182845904523536f
#define M_LOG2E_F 1.44269504088896340736f
#define M_LOG10E_F 0.434294481903251827651f
#define M_LN2_F 0.693147180559945309417f
#define M_LN10_F 2.30258509299404568402f
#define M_PI_F 3.14159265358979323846f
#define M_PI_2_F 1.57079632679489661923f
#define M_PI_4_F 0.785398163397448309616f
#define M_1_PI_F 0.318309886183790671538f
#define M_2_PI_F 0.636619772367581343076f
#define M_2_SQRTPI_F 1.12837916709551257390f
#define M_SQRT2_F 1.41421356237309504880f
#define M_SQRT1_2_F 0.707106781186547524401f
#define M_PI_H ((half)3.14159265358979323846f)
