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
inline float2 cdiv(float2 a, float2 b) {
  if (fabs(b.x) >= fabs(b.y)) {
    float r = b.y / b.x;
    float d = b.x + b.y * r;
    return float2((a.x + a.y * r) / d, (a.y - a.x * r) / d);
  }
  float r = b.x / b.y;
  float d = b.x * r + b.y;
  return float2((a.x * r + a.y) / d, (a.y * r - a.x) / d);
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
