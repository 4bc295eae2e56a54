// complex.h - complex64 arithmetic on float2 (x = real, y = imaginary), shared by all families.
// Included as `#include "complex.h"`; the loader inlines it (torch.mps.compile_shader takes one
// self-contained source). Plain MSL only: no operator overloading on float2 (it would change the
// meaning of `*` for real vectors), named functions instead.
#include <metal_stdlib>
using namespace metal;

inline float2 cmul(float2 a, float2 b) {
  return float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

inline float2 cconj(float2 a) { return float2(a.x, -a.y); }

// LAPACK's cabs1 = |Re| + |Im|: the pivot measure of icamax.
inline float cabs1(float2 a) { return fabs(a.x) + fabs(a.y); }

// a / b with Smith's scaling so |b|^2 never overflows or underflows for representable b.
// Branch-free: Smith's two cases as one with the operands swapped by selects (bit for bit the
// results of the two-branch form), so a SIMD group whose lanes fall into both cases runs one path
// of three divisions, not both (measured: -18% instructions in small_inv_direct_c64_4, ptxas sm_90).
inline float2 cdiv(float2 a, float2 b) {
  const bool s = fabs(b.x) >= fabs(b.y);
  const float p = s ? b.x : b.y, q = s ? b.y : b.x;  // divide by the part of larger magnitude
  const float u = s ? a.x : a.y, v = s ? a.y : a.x;
  const float r = q / p;
  const float d = p + q * r;
  const float t = u * r;
  return float2((u + v * r) / d, (s ? v - t : t - v) / d);
}

// 1 / b (Smith's algorithm).
inline float2 crecip(float2 b) { return cdiv(float2(1.0f, 0.0f), b); }

// |a| (the true modulus) without overflow or underflow of the squares: LAPACK's ABS on complex.
inline float cmodulus(float2 a) {
  float x = fabs(a.x), y = fabs(a.y);
  float m = max(x, y);
  if (m == 0.0f || isinf(m)) {
    return m;
  }
  float s = min(x, y) / m;
  return m * sqrt(1.0f + s * s);
}
