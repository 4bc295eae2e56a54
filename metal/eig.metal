// eig.metal - the eig family's kernel (mpslinalg/eig/kernels.py), float32 and complex64 (float2).
//
//   eig_schur_small_{f32,c64}  the Schur form A = Z T Z^H of whole n x n matrices (n <= 64, n*n + 128
//                              elements <= 32 KiB) in threadgroup memory: Householder reduction to
//                              Hessenberg form (LAPACK gehd2), then the shifted QR iteration of
//                              LAPACK's lahqr (wantt: the full Schur form; wantz: Z accumulated);
//                              one simdgroup (32 threads) per matrix.
//
// The contract is that of mpslinalg/eig/kernels.py's `schur`: input already scaled and balanced;
// T upper triangular (complex) or quasi-triangular (real: 2x2 blocks where T[i+1][i] != 0, left as
// lahqr leaves them, without lanv2's standardisation; every entry below the quasi-diagonal exactly
// zero); Z unitary (written only when want_z != 0); m[b] the number of leading eigenvalues that did
// not converge (lahqr's info: rows [0, m) still active when the budget ran out; 0 on success).
//
// Iteration (lahqr, 0-based, active window [l, i]): the smallest l whose subdiagonal entry passes
// lahqr's deflation test (|h| <= smlnum, or |h| <= ulp (|h_k-1,k-1| + |h_kk|) and the Ahues-Tisseur
// refinement) is set to zero; a 1x1 (and, for real input, a 2x2) block at the bottom is converged;
// otherwise one implicit step: real input Francis' double shift (3-element reflectors; the shifts
// are the trailing 2x2's eigenvalues, both set to the one nearer h_ii when they are real), complex
// input Wilkinson's single shift (2-element reflectors); the step starts at the lowest m >= l with
// two consecutive small subdiagonals; exceptional shifts after 10 and 20 steps without deflation;
// at most 30 max(10, n) steps per eigenvalue (lahqr's itmax).
//
// Threads: every lane computes the same scalars (reflectors, shifts, tests) from threadgroup memory,
// so control flow is uniform; the reflector updates are spread over lanes (by columns for the left
// update, by rows for the right one); lane r % 32 owns row r of Z in device memory for the whole
// kernel (no barrier needed for Z). Writes of values another lane may still read are separated by a
// barrier. Sizes arrive as 8-byte longs; A and T may alias (T is written at the end only).
#include <metal_stdlib>
#include "scalar.h"
using namespace metal;

constant constexpr int EIG_MAX = 64;          // largest n
constant constexpr int EIG_BYTES = 32768;     // threadgroup memory of the tile and the reflector
constant constexpr int EIG_LANES = 32;

inline float eig_re(float a) { return a; }
inline float eig_re(float2 a) { return a.x; }
inline float eig_im(float a) { return 0.0f; }
inline float eig_im(float2 a) { return a.y; }
template <typename T> inline T eig_real(float a);
template <> inline float eig_real<float>(float a) { return a; }
template <> inline float2 eig_real<float2>(float a) { return float2(a, 0.0f); }
inline float eig_simd_max(float a) { return simd_max(a); }
inline float eig_simd_sum(float a) { return simd_sum(a); }
// The principal square root (real: of |a|, only the complex instantiation uses its sign).
inline float eig_sqrt(float a) { return sqrt(fabs(a)); }
inline float2 eig_sqrt(float2 a) {
  const float r = cmodulus(a);
  if (r == 0.0f) {
    return float2(0.0f, 0.0f);
  }
  const float t = sqrt(0.5f * (r + fabs(a.x)));
  return a.x >= 0.0f ? float2(t, a.y / (2.0f * t)) : float2(fabs(a.y) / (2.0f * t), copysign(t, a.y));
}
inline float eig_sq(float a, float s) { const float t = a / s; return t * t; }
inline float eig_sq(float2 a, float s) { const float x = a.x / s, y = a.y / s; return x * x + y * y; }

// sqrt(a^2 + b^2 + c^2) without overflow or underflow (LAPACK lapy3).
inline float eig_lapy3(float a, float b, float c) {
  const float x = fabs(a), y = fabs(b), z = fabs(c);
  const float w = max(x, max(y, z));
  if (w == 0.0f || isinf(w)) {
    return x + y + z;
  }
  const float p = x / w, q = y / w, r = z / w;
  return w * sqrt(p * p + q * q + r * r);
}

// LAPACK larfg of [alpha; x] given ||x||: P = I - tau v v^H with v = [1; x / denom] and
// P^H [alpha; x] = [beta; 0] (beta real); tau = 0 (P = I, beta = alpha) when there is nothing to
// annihilate.
template <typename T>
struct EigReflector {
  bool skip;
  T beta;
  T tau;
  T denom;
};

template <typename T>
inline EigReflector<T> eig_larfg(T alpha, float xnorm) {
  EigReflector<T> h;
  h.skip = xnorm == 0.0f && eig_im(alpha) == 0.0f;
  const float ar = eig_re(alpha);
  const float mag = eig_lapy3(ar, eig_im(alpha), xnorm);
  h.beta = h.skip ? alpha : eig_real<T>(ar >= 0.0f ? -mag : mag);
  h.tau = h.skip ? s_zero<T>() : s_div(h.beta - alpha, h.beta);
  h.denom = h.skip ? s_one<T>() : alpha - h.beta;
  return h;
}

// ---- Hessenberg reduction (gehd2) ---------------------------------------------------------------
// Column k: the norm of h[k+2:, k] (simd reductions), larfg, v into vs; then H <- P^H H on the
// columns k+1.. (lanes over columns; lane 0 writes column k: beta and exact zeros), then H <- H P
// on every row (lanes over rows) and Z <- Z P (each lane its own rows).
template <typename T>
inline void eig_hessenberg(threadgroup T* h, threadgroup T* vs, device T* z, int n, bool want_z, int t0) {
  for (int k = 0; k + 2 < n; ++k) {
    float big = 0.0f;
    for (int r = k + 2 + t0; r < n; r += EIG_LANES) {
      big = max(big, s_abs(h[r * n + k]));
    }
    big = eig_simd_max(big);
    float ss = 0.0f;
    if (big > 0.0f && !isinf(big)) {
      for (int r = k + 2 + t0; r < n; r += EIG_LANES) {
        ss += eig_sq(h[r * n + k], big);
      }
    }
    ss = eig_simd_sum(ss);
    const float xnorm = isinf(big) ? big : big * sqrt(ss);
    const EigReflector<T> p = eig_larfg<T>(h[(k + 1) * n + k], xnorm);
    if (p.skip) {
      continue;  // uniform: every lane skips (column k is already reduced)
    }
    for (int r = k + 2 + t0; r < n; r += EIG_LANES) {
      vs[r] = s_div(h[r * n + k], p.denom);
    }
    if (t0 == 0) {
      vs[k + 1] = s_one<T>();
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);  // vs complete; column k read by all
    const T ct = s_conj(p.tau);
    for (int c = k + 1 + t0; c < n; c += EIG_LANES) {
      T w = s_zero<T>();
      for (int r = k + 1; r < n; ++r) {
        w += s_mul(s_conj(vs[r]), h[r * n + c]);
      }
      const T f = s_mul(ct, w);
      for (int r = k + 1; r < n; ++r) {
        h[r * n + c] -= s_mul(vs[r], f);
      }
    }
    if (t0 == 0) {
      h[(k + 1) * n + k] = p.beta;
      for (int r = k + 2; r < n; ++r) {
        h[r * n + k] = s_zero<T>();
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int r = t0; r < n; r += EIG_LANES) {
      T w = s_zero<T>();
      for (int c = k + 1; c < n; ++c) {
        w += s_mul(h[r * n + c], vs[c]);
      }
      const T f = s_mul(w, p.tau);
      for (int c = k + 1; c < n; ++c) {
        h[r * n + c] -= s_mul(f, s_conj(vs[c]));
      }
      if (want_z) {
        T wz = s_zero<T>();
        for (int c = k + 1; c < n; ++c) {
          wz += s_mul(z[r * n + c], vs[c]);
        }
        const T fz = s_mul(wz, p.tau);
        for (int c = k + 1; c < n; ++c) {
          z[r * n + c] -= s_mul(fz, s_conj(vs[c]));
        }
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);  // vs and H reused by column k+1
  }
}

// ---- one bulge-chasing step --------------------------------------------------------------------
// The reflector P (nr = 2 or 3 entries: v = [1, v1, v2], tau) at rows/columns k.. of the window
// [l, i] of the full matrix (wantt: columns up to n-1, rows from 0): H <- P^H H on rows k..k+nr-1,
// columns k..n-1 (lanes over columns), then H <- H P on columns k..k+nr-1, rows 0..min(k+3, i)
// (lanes over rows) and Z <- Z P. Column k-1 (the bulge the reflector came from) is written by lane
// 0 in the second phase (no lane reads it then): beta and exact zeros when k > mstart, else
// lahqr's h[k][k-1] (1 - conj(tau)) when mstart > l.
template <typename T>
inline void eig_chase(threadgroup T* h, device T* z, int n, bool want_z, int t0, int k, int nr, int i,
                      int l, int mstart, EigReflector<T> p, T v1, T v2) {
  const T ct = s_conj(p.tau);
  for (int c = k + t0; c < n; c += EIG_LANES) {
    T w = h[k * n + c] + s_mul(s_conj(v1), h[(k + 1) * n + c]);
    if (nr == 3) {
      w += s_mul(s_conj(v2), h[(k + 2) * n + c]);
    }
    const T f = s_mul(ct, w);
    h[k * n + c] -= f;
    h[(k + 1) * n + c] -= s_mul(v1, f);
    if (nr == 3) {
      h[(k + 2) * n + c] -= s_mul(v2, f);
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (t0 == 0 && k > l) {
    if (k > mstart) {
      h[k * n + k - 1] = p.beta;
      h[(k + 1) * n + k - 1] = s_zero<T>();
      if (nr == 3) {
        h[(k + 2) * n + k - 1] = s_zero<T>();
      }
    } else if (mstart > l) {
      h[k * n + k - 1] = s_mul(h[k * n + k - 1], s_one<T>() - ct);
    }
  }
  const int rlast = min(k + 3, i);
  for (int r = t0; r <= rlast; r += EIG_LANES) {
    T w = h[r * n + k] + s_mul(h[r * n + k + 1], v1);
    if (nr == 3) {
      w += s_mul(h[r * n + k + 2], v2);
    }
    const T f = s_mul(w, p.tau);
    h[r * n + k] -= f;
    h[r * n + k + 1] -= s_mul(f, s_conj(v1));
    if (nr == 3) {
      h[r * n + k + 2] -= s_mul(f, s_conj(v2));
    }
  }
  if (want_z) {
    for (int r = t0; r < n; r += EIG_LANES) {
      T w = z[r * n + k] + s_mul(z[r * n + k + 1], v1);
      if (nr == 3) {
        w += s_mul(z[r * n + k + 2], v2);
      }
      const T f = s_mul(w, p.tau);
      z[r * n + k] -= f;
      z[r * n + k + 1] -= s_mul(f, s_conj(v1));
      if (nr == 3) {
        z[r * n + k + 2] -= s_mul(f, s_conj(v2));
      }
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
}

// The reflector of [a; b; c] (nr = 3) or [a; b] (nr = 2): v1 = b / denom, v2 = c / denom.
template <typename T>
inline EigReflector<T> eig_reflector(T a, T b, T c, int nr, thread T& v1, thread T& v2) {
  const float xnorm = nr == 3 ? eig_lapy3(s_abs(b), s_abs(c), 0.0f) : s_abs(b);
  const EigReflector<T> p = eig_larfg<T>(a, xnorm);
  v1 = s_div(b, p.denom);
  v2 = nr == 3 ? s_div(c, p.denom) : s_zero<T>();
  return p;
}

// lahqr's deflation search: the largest k in (l, i] whose subdiagonal entry is negligible, else l.
template <typename T>
inline int eig_small_subdiagonal(threadgroup const T* h, int n, int l, int i, float ulp, float smlnum) {
  int k = i;
  for (; k > l; --k) {
    const float sub = s_abs1(h[k * n + k - 1]);
    if (sub <= smlnum) {
      break;
    }
    float tst = s_abs1(h[(k - 1) * n + k - 1]) + s_abs1(h[k * n + k]);
    if (tst == 0.0f) {
      if (k - 2 >= l) {
        tst += fabs(eig_re(h[(k - 1) * n + k - 2]));
      }
      if (k + 1 <= i) {
        tst += fabs(eig_re(h[(k + 1) * n + k]));
      }
    }
    if (sub <= ulp * tst) {  // Ahues & Tisseur's conservative refinement
      const float up = s_abs1(h[(k - 1) * n + k]);
      const float ab = max(sub, up), ba = min(sub, up);
      const float dd = s_abs1(h[(k - 1) * n + k - 1] - h[k * n + k]);
      const float aa = max(s_abs1(h[k * n + k]), dd), bb = min(s_abs1(h[k * n + k]), dd);
      const float s = aa + ab;
      if (ba * (ab / s) <= max(smlnum, ulp * (bb * (aa / s)))) {
        break;
      }
    }
  }
  return k;
}

// ---- the kernel -------------------------------------------------------------------------------
template <typename T>
[[max_total_threads_per_threadgroup(32)]]  // the host launches one simdgroup per matrix
kernel void eig_schur_small(device const T* A [[buffer(0)]],
                            device T* Tout [[buffer(1)]],
                            device T* Z [[buffer(2)]],
                            device int* m_out [[buffer(3)]],
                            constant long& N [[buffer(4)]],
                            constant long& want_z_arg [[buffer(5)]],
                            uint tid [[thread_index_in_threadgroup]],
                            uint b [[threadgroup_position_in_grid]]) {
  threadgroup T h[EIG_BYTES / sizeof(T) - 2 * EIG_MAX];
  threadgroup T vs[EIG_MAX];
  const int n = (int)N;
  const bool want_z = want_z_arg != 0;
  const int t0 = (int)tid;
  const bool real = sizeof(T) == sizeof(float);
  device const T* a = A + (long)b * N * N;
  device T* z = Z + (long)b * N * N;
  for (int t = t0; t < n * n; t += EIG_LANES) {
    h[t] = a[t];
  }
  if (want_z) {
    for (int r = t0; r < n; r += EIG_LANES) {
      for (int c = 0; c < n; ++c) {
        z[r * n + c] = r == c ? s_one<T>() : s_zero<T>();
      }
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  eig_hessenberg<T>(h, vs, z, n, want_z, t0);
  const float ulp = 5.96046448e-08f;  // slamch('P') = 2^-24
  const float smlnum = S_SFMIN * ((float)max(n, 1) / ulp);
  const int itmax = 30 * max(10, n);
  int info = 0;
  int i = n - 1;
  while (i >= 0) {
    int l = 0;
    bool converged = false;
    for (int its = 0; its <= itmax; ++its) {
      l = eig_small_subdiagonal<T>(h, n, 0, i, ulp, smlnum);
      threadgroup_barrier(mem_flags::mem_threadgroup);  // every lane has read before the write
      if (l > 0) {
        if (t0 == 0) {
          h[l * n + l - 1] = s_zero<T>();
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
      }
      if (l >= i - (real ? 1 : 0)) {
        converged = true;
        break;
      }
      // shifts: real input lahqr's double shift (rt1, rt2) from the trailing 2x2, complex input
      // Wilkinson's sigma; exceptional shifts after 10 and 20 steps without deflation
      float rt1r = 0.0f, rt1i = 0.0f, rt2r = 0.0f, rt2i = 0.0f;
      T sigma = s_zero<T>();
      const bool exc = its == 10 || its == 20;
      const int e = its == 10 ? l : i;  // lahqr: the top of the window at 10, its bottom at 20
      if (real) {
        float h11, h12, h21, h22;
        if (exc) {
          const float es = its == 10 ? fabs(eig_re(h[(l + 1) * n + l])) + fabs(eig_re(h[(l + 2) * n + l + 1]))
                                     : fabs(eig_re(h[i * n + i - 1])) + fabs(eig_re(h[(i - 1) * n + i - 2]));
          h11 = 0.75f * es + eig_re(h[e * n + e]);
          h12 = -0.4375f * es;
          h21 = es;
          h22 = h11;
        } else {
          h11 = eig_re(h[(i - 1) * n + i - 1]);
          h12 = eig_re(h[(i - 1) * n + i]);
          h21 = eig_re(h[i * n + i - 1]);
          h22 = eig_re(h[i * n + i]);
        }
        const float s = fabs(h11) + fabs(h12) + fabs(h21) + fabs(h22);
        if (s != 0.0f) {
          h11 /= s;
          h12 /= s;
          h21 /= s;
          h22 /= s;
          const float tr = 0.5f * (h11 + h22);
          const float det = (h11 - tr) * (h22 - tr) - h12 * h21;
          const float rtdisc = sqrt(fabs(det));
          if (det >= 0.0f) {  // a complex pair
            rt1r = tr * s;
            rt2r = rt1r;
            rt1i = rtdisc * s;
            rt2i = -rt1i;
          } else {  // two real shifts: both the one nearer h22
            const float r1 = tr + rtdisc, r2 = tr - rtdisc;
            rt1r = (fabs(r1 - h22) <= fabs(r2 - h22) ? r1 : r2) * s;
            rt2r = rt1r;
          }
        }
      } else if (exc) {
        const int f = its == 10 ? l + 1 : i;  // zlahqr: 0.75 |h(l+1, l)| or 0.75 |h(i, i-1)|
        sigma = h[e * n + e] + eig_real<T>(0.75f * s_abs1(h[f * n + f - 1]));
      } else {
        // Wilkinson: the eigenvalue of the trailing 2x2 nearer h_ii, scaled by s against overflow
        const T g11 = h[(i - 1) * n + i - 1], g12 = h[(i - 1) * n + i];
        const T g21 = h[i * n + i - 1], g22 = h[i * n + i];
        const float s = s_abs1(g11) + s_abs1(g12) + s_abs1(g21) + s_abs1(g22);
        sigma = g22;
        if (s != 0.0f) {
          const T rs = eig_real<T>(1.0f / s);
          const T p = s_mul(eig_real<T>(0.5f), s_mul(g11 - g22, rs));
          const T bc = s_mul(s_mul(g12, rs), s_mul(g21, rs));
          T disc = eig_sqrt(s_mul(p, p) + bc);
          if (eig_re(p) * eig_re(disc) + eig_im(p) * eig_im(disc) < 0.0f) {
            disc = -disc;
          }
          const T den = p + disc;
          if (!s_is_zero(den)) {
            sigma -= s_mul(s_div(bc, den), eig_real<T>(s));
          }
        }
      }
      // the lowest mstart >= l with two consecutive small subdiagonals, and the first column of
      // the shifted matrix (scaled) there
      int mstart = i - (real ? 2 : 1);
      T x0 = s_zero<T>(), x1 = s_zero<T>(), x2 = s_zero<T>();
      for (; mstart >= l; --mstart) {
        const int q = mstart;
        if (real) {
          const float h21s0 = eig_re(h[(q + 1) * n + q]);
          const float sc = fabs(eig_re(h[q * n + q]) - rt2r) + fabs(rt2i) + fabs(h21s0);
          const float h21s = h21s0 / sc;
          const float hqq = eig_re(h[q * n + q]);
          float v1 = h21s * eig_re(h[q * n + q + 1]) + (hqq - rt1r) * ((hqq - rt2r) / sc) - rt1i * (rt2i / sc);
          float v2 = h21s * (hqq + eig_re(h[(q + 1) * n + q + 1]) - rt1r - rt2r);
          float v3 = h21s * eig_re(h[(q + 2) * n + q + 1]);
          const float sv = fabs(v1) + fabs(v2) + fabs(v3);
          v1 /= sv;
          v2 /= sv;
          v3 /= sv;
          x0 = eig_real<T>(v1);
          x1 = eig_real<T>(v2);
          x2 = eig_real<T>(v3);
          if (q == l) {
            break;
          }
          const float h00 = fabs(eig_re(h[q * n + q - 1])) * (fabs(v2) + fabs(v3));
          const float h01 = fabs(v1) * (fabs(eig_re(h[(q - 1) * n + q - 1])) + fabs(hqq) +
                                        fabs(eig_re(h[(q + 1) * n + q + 1])));
          if (h00 <= ulp * h01) {
            break;
          }
        } else {
          const T hqq = h[q * n + q];
          T h11s = hqq - sigma;
          T h21c = h[(q + 1) * n + q];
          const float sc = s_abs1(h11s) + s_abs1(h21c);
          if (sc > 0.0f) {
            h11s = s_div(h11s, eig_real<T>(sc));
            h21c = s_div(h21c, eig_real<T>(sc));
          }
          x0 = h11s;
          x1 = h21c;
          if (q == l) {
            break;
          }
          const float h10 = s_abs1(h[q * n + q - 1]);
          if (h10 * s_abs1(h21c) <= ulp * (s_abs1(h11s) * (s_abs1(hqq) + s_abs1(h[(q + 1) * n + q + 1])))) {
            break;
          }
        }
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);  // the search's reads before the chase writes
      for (int k = mstart; k < i; ++k) {
        const int nr = real ? min(3, i - k + 1) : 2;
        if (k > mstart) {
          x0 = h[k * n + k - 1];
          x1 = h[(k + 1) * n + k - 1];
          x2 = nr == 3 ? h[(k + 2) * n + k - 1] : s_zero<T>();
        }
        T v1, v2;
        const EigReflector<T> p = eig_reflector<T>(x0, x1, x2, nr, v1, v2);
        eig_chase<T>(h, z, n, want_z, t0, k, nr, i, l, mstart, p, v1, v2);
      }
    }
    if (!converged) {
      info = i + 1;
      break;
    }
    i = l - 1;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  device T* tout = Tout + (long)b * N * N;
  for (int t = t0; t < n * n; t += EIG_LANES) {
    tout[t] = h[t];
  }
  if (t0 == 0) {
    m_out[b] = info;
  }
}

MPSL_INSTANTIATE_DTYPES(eig_schur_small)
