// svd.metal - one-sided Jacobi kernels of the SVD family (mpslinalg/svd/), float32 and
// complex64 (float2).
//
//   svd_jacobi_small_{f32,c64}  the whole Jacobi iteration of an n x n matrix (n even, <= 32) in
//                               threadgroup memory, with its rotations accumulated into V; one
//                               simdgroup per matrix; stops after the first sweep without a
//                               rotation (checked on the GPU: no host sync), at most `sweeps`;
//   svd_jacobi_round_{f32,c64}  one round of the round-robin ordering on matrices of any size in
//                               device memory: one threadgroup per (matrix, column pair), Gram
//                               entries by a tree reduction, then the rotation of both columns
//                               (of X and of V). The host issues n - 1 rounds per sweep.
//
// Ordering (circle method): in round r the players are 0 and 1 + ((j - 1 + r) mod (n - 1)) for
// j = 1..n-1; pair i of the round is (player(i), player(n - 1 - i)), i < n/2. Every pair of
// columns meets once per sweep of n - 1 rounds, and the pairs of a round are disjoint.
//
// Rotation of the pair (p, q) with a = |x_p|^2, b = |x_q|^2, g = x_p^H x_q: rotate only when
// |g| > tol * sqrt(a) * sqrt(b) (square roots taken separately: a * b can overflow or underflow);
// only rotations with |g| > ctol * sqrt(a) * sqrt(b) count against convergence (tol is below the
// dot product's rounding noise, ctol = 2n u above it: noise alone must not look like work left);
// zeta = (b - a) / (2|g|), t = sign(zeta) / (|zeta| + sqrt(1 + zeta^2)) (Rutishauser, the smaller
// angle), c = 1 / sqrt(1 + t^2), e = g / |g| (the complex phase);
//   x_p' = c x_p - conj(c t e) x_q,   x_q' = (c t e) x_p + c x_q.
// NaN never rotates (comparisons with NaN are false); the host zeroes non-finite matrices anyway.
// Underflow: when min(a, b) < SVD_GRAM_MIN the Gram entries are computed again from the columns
// scaled apart, x_p by s_p and x_q by s_q, the powers of two of their largest entries (exact): the
// cosine |g| / (sqrt(a) sqrt(b)) does not change, and zeta = (b~ r - a~ / r) / (2|g~|) with
// r = s_p / s_q (r = 1 otherwise: the same bits). Below 2^-100 a sum of squares may have lost
// digits to the subnormal range (the noise columns of an exactly rank-deficient matrix, ~1e-21
// beside ~1: ones(8, 8)), and such a pair would rotate by noise until the sweep bound (info 2 for
// an accurate result); above it every lost term is below n * 2^-150, far under u sqrt(a) sqrt(b).
// A column whose entries are all below tiny / u = 2^-102 (exponent <= SVD_NOISE_EXPONENT) neither
// rotates nor counts: its digits lie in the subnormal range, rotations cannot orthogonalise it,
// and its sigma is below sqrt(tiny) sigma_1 (X is the factor of a matrix scaled to max |a| >= 1/2):
// the host replaces such noise columns by an orthonormal completion.
//
// Layout: X and V are contiguous [batch, n, n] row-major buffers (the host pads odd orders with a
// zero column, which never rotates); sizes arrive as 8-byte longs, tol as float.
#include "scalar.h"

constant constexpr int SVD_SMALL_MAX = 32;
constant constexpr int SVD_SMALL_LD = 33;  // padded row stride of the tiles (no bank conflicts)
constant constexpr uint SVD_ROUND_MAX_THREADS = 256;
constant constexpr float SVD_GRAM_MIN = 7.8886090522101181e-31f;  // 2^-100
constant constexpr int SVD_NOISE_EXPONENT = -102;                   // 2^-102 = tiny / u

inline float svd_amax(float a) { return fabs(a); }
inline float svd_amax(float2 a) { return fmax(fabs(a.x), fabs(a.y)); }

// e with m * 2^-e in [1/2, 1) (m > 0), at least -125 (2^-e is a normal float); 0 for m = 0.
inline int svd_exponent(float m) {
  if (!(m > 0.0f)) {
    return 0;
  }
  int e;
  frexp(m, e);
  return max(e, -125);
}

inline float svd_abs2(float a) { return a * a; }
inline float svd_abs2(float2 a) { return a.x * a.x + a.y * a.y; }
inline float svd_phase(float g, float ag) { return g / ag; }
inline float2 svd_phase(float2 g, float ag) { return float2(g.x / ag, g.y / ag); }
inline float svd_simd_sum(float a) { return simd_sum(a); }
inline float2 svd_simd_sum(float2 a) { return float2(simd_sum(a.x), simd_sum(a.y)); }
inline float svd_scale(float c, float x) { return c * x; }
inline float2 svd_scale(float c, float2 x) { return float2(c * x.x, c * x.y); }

// Column of the j-th player in round r (n even).
inline int svd_player(int j, int r, int n) { return j == 0 ? 0 : 1 + (j - 1 + r) % (n - 1); }

// The rotation (c, se) of a pair from its Gram entries; false if the pair is already orthogonal
// to working accuracy.
template <typename T>
inline bool svd_rotation(float a, float b, T g, float r, float tol, float ctol, thread float& c,
                         thread T& se, thread bool& significant) {
  const float ag = s_abs(g);
  const float scale = sqrt(a) * sqrt(b);
  significant = ag > ctol * scale;
  if (!(ag > tol * scale)) {
    c = 1.0f;
    se = s_zero<T>();
    return false;
  }
  const float zeta = (b * r - a / r) / (2.0f * ag);  // r = s_p / s_q of the scaled columns
  const float az = fabs(zeta);
  // 1 + zeta^2 overflows above ~1.8e19; there t = 1 / (2|zeta|) to float precision
  float t = az < 1.0e18f ? 1.0f / (az + sqrt(1.0f + az * az)) : 0.5f / az;
  t = zeta >= 0.0f ? t : -t;
  c = 1.0f / sqrt(1.0f + t * t);
  se = svd_scale(c * t, svd_phase(g, ag));
  return true;
}

template <typename T>
inline void svd_rotate(thread T& xp, thread T& xq, float c, T se) {
  const T p = xp, q = xq;
  xp = svd_scale(c, p) - s_mul(s_conj(se), q);
  xq = s_mul(se, p) + svd_scale(c, q);
}

// ---- svd_jacobi_small ------------------------------------------------------------------------
//
// Grid: threads = batch * 32, group_size = 32 (one simdgroup per matrix; thread t < n/2 owns pair
// t of each round). Threadgroup memory: two 32 x 33 tiles, 16.9 KiB for complex64.
// rotated[b] = 1 if matrix b still made a significant rotation in the last sweep run (not
// converged), else 0.
template <typename T>
[[max_total_threads_per_threadgroup(32)]]  // the host launches one simdgroup per matrix
kernel void svd_jacobi_small(device T* X [[buffer(0)]],
                             device T* V [[buffer(1)]],
                             device int* rotated [[buffer(2)]],
                             constant long& N [[buffer(3)]],
                             constant long& SWEEPS [[buffer(4)]],
                             constant float& TOL [[buffer(5)]],
                             constant float& CTOL [[buffer(6)]],
                             constant long& WANT_V [[buffer(7)]],
                             uint tid [[thread_index_in_threadgroup]],
                             uint ntg [[threads_per_threadgroup]],
                             uint b [[threadgroup_position_in_grid]]) {
  threadgroup T x[SVD_SMALL_MAX * SVD_SMALL_LD];
  threadgroup T v[SVD_SMALL_MAX * SVD_SMALL_LD];
  const int n = (int)N;
  const int h = n / 2;
  const int t0 = (int)tid;
  const int nt = (int)ntg;
  const bool want_v = WANT_V != 0;
  device T* xb = X + (long)b * N * N;
  device T* vb = V + (want_v ? (long)b * N * N : 0L);
  for (int e = t0; e < n * n; e += nt) {
    x[(e / n) * SVD_SMALL_LD + e % n] = xb[e];
    if (want_v) {
      v[(e / n) * SVD_SMALL_LD + e % n] = vb[e];
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int last = 0;
  for (long sweep = 0; sweep < SWEEPS; ++sweep) {
    int mine = 0;
    for (int r = 0; r < n - 1; ++r) {
      if (t0 < h) {
        const int p = svd_player(t0, r, n);
        const int q = svd_player(n - 1 - t0, r, n);
        float a = 0.0f, bb = 0.0f;
        T g = s_zero<T>();
        for (int i = 0; i < n; ++i) {
          const T xp = x[i * SVD_SMALL_LD + p], xq = x[i * SVD_SMALL_LD + q];
          a += svd_abs2(xp);
          bb += svd_abs2(xq);
          g += s_mul(s_conj(xp), xq);
        }
        float ratio = 1.0f;
        if (fmin(a, bb) < SVD_GRAM_MIN) {  // digits lost to underflow: the columns scaled apart
          float mp = 0.0f, mq = 0.0f;
          for (int i = 0; i < n; ++i) {
            mp = fmax(mp, svd_amax(x[i * SVD_SMALL_LD + p]));
            mq = fmax(mq, svd_amax(x[i * SVD_SMALL_LD + q]));
          }
          const int ep = svd_exponent(mp), eq = svd_exponent(mq);
          const float sp = ldexp(1.0f, -ep), sq = ldexp(1.0f, -eq);
          ratio = ldexp(1.0f, clamp(eq - ep, -126, 126));
          a = 0.0f;
          bb = 0.0f;
          g = s_zero<T>();
          for (int i = 0; i < n; ++i) {
            const T xp = svd_scale(sp, x[i * SVD_SMALL_LD + p]), xq = svd_scale(sq, x[i * SVD_SMALL_LD + q]);
            a += svd_abs2(xp);
            bb += svd_abs2(xq);
            g += s_mul(s_conj(xp), xq);
          }
          if (min(ep, eq) <= SVD_NOISE_EXPONENT) {
            g = s_zero<T>();  // no rotation, not counted
          }
        }
        float c;
        T se;
        bool significant;
        if (svd_rotation(a, bb, g, ratio, TOL, CTOL, c, se, significant)) {
          mine = significant ? 1 : mine;
          for (int i = 0; i < n; ++i) {
            T xp = x[i * SVD_SMALL_LD + p], xq = x[i * SVD_SMALL_LD + q];
            svd_rotate(xp, xq, c, se);
            x[i * SVD_SMALL_LD + p] = xp;
            x[i * SVD_SMALL_LD + q] = xq;
          }
          if (want_v) {
            for (int i = 0; i < n; ++i) {
              T vp = v[i * SVD_SMALL_LD + p], vq = v[i * SVD_SMALL_LD + q];
              svd_rotate(vp, vq, c, se);
              v[i * SVD_SMALL_LD + p] = vp;
              v[i * SVD_SMALL_LD + q] = vq;
            }
          }
        }
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    last = simd_max(mine);  // uniform across the simdgroup: every thread leaves together
    if (last == 0) {
      break;
    }
  }
  for (int e = t0; e < n * n; e += nt) {
    xb[e] = x[(e / n) * SVD_SMALL_LD + e % n];
    if (want_v) {
      vb[e] = v[(e / n) * SVD_SMALL_LD + e % n];
    }
  }
  if (t0 == 0) {
    rotated[b] = last;
  }
}

// ---- svd_jacobi_round ------------------------------------------------------------------------

constant constexpr int SVD_ROUND_TOTAL = SVD_ROUND_MAX_THREADS / 32;  // slot of the group's totals

// The Gram entries (a, b, g) of the columns p, q of xb scaled by sp, sq, summed over the threadgroup by
// a tree reduction (simdgroup sums, then thread 0 adds the simdgroups' partial sums in order);
// every thread returns the totals. Called by every thread of the group.
template <typename T>
inline void svd_round_gram(device const T* xb, int rows, int n, int p, int q, float sp, float sq, int t0, int nt,
                           uint lane, uint sg, int nsg, threadgroup float* ra, threadgroup float* rb,
                           threadgroup T* rg, thread float& ta, thread float& tb, thread T& tg) {
  float a = 0.0f, bb = 0.0f;
  T g = s_zero<T>();
  for (int i = t0; i < rows; i += nt) {
    const T xp = svd_scale(sp, xb[i * n + p]), xq = svd_scale(sq, xb[i * n + q]);
    a += svd_abs2(xp);
    bb += svd_abs2(xq);
    g += s_mul(s_conj(xp), xq);
  }
  a = simd_sum(a);
  bb = simd_sum(bb);
  g = svd_simd_sum(g);
  if (lane == 0) {
    ra[sg] = a;
    rb[sg] = bb;
    rg[sg] = g;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (t0 == 0) {
    float sa = 0.0f, sb = 0.0f;
    T sgm = s_zero<T>();
    for (int k = 0; k < nsg; ++k) {
      sa += ra[k];
      sb += rb[k];
      sgm += rg[k];
    }
    ra[SVD_ROUND_TOTAL] = sa;
    rb[SVD_ROUND_TOTAL] = sb;
    rg[SVD_ROUND_TOTAL] = sgm;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  ta = ra[SVD_ROUND_TOTAL];
  tb = rb[SVD_ROUND_TOTAL];
  tg = rg[SVD_ROUND_TOTAL];
}

// svd_jacobi_round. Grid: threads = batch * (n/2) * G, group_size = G (a multiple of 32, <= 256); threadgroup
// g = b * (n/2) + i rotates pair i of round ROUND of matrix b. X is [batch, rows, n] (rows may
// exceed n); V is [batch, n, n] when WANT_V. flags[b * (n/2) + i] is set to 1 when the pair
// made a significant rotation (the host zeroes it at the start of a sweep; slot i belongs to one threadgroup per
// dispatch, so there is no race).
template <typename T>
[[max_total_threads_per_threadgroup(256)]]  // = SVD_ROUND_MAX_THREADS
kernel void svd_jacobi_round(device T* X [[buffer(0)]],
                             device T* V [[buffer(1)]],
                             device int* flags [[buffer(2)]],
                             constant long& ROWS [[buffer(3)]],
                             constant long& N [[buffer(4)]],
                             constant long& ROUND [[buffer(5)]],
                             constant float& TOL [[buffer(6)]],
                             constant float& CTOL [[buffer(7)]],
                             constant long& WANT_V [[buffer(8)]],
                             uint tid [[thread_index_in_threadgroup]],
                             uint ntg [[threads_per_threadgroup]],
                             uint grp [[threadgroup_position_in_grid]],
                             uint lane [[thread_index_in_simdgroup]],
                             uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float ra[SVD_ROUND_MAX_THREADS / 32 + 1];
  threadgroup float rb[SVD_ROUND_MAX_THREADS / 32 + 1];
  threadgroup T rg[SVD_ROUND_MAX_THREADS / 32 + 1];
  const int n = (int)N;
  const int rows = (int)ROWS;
  const int h = n / 2;
  const long b = (long)(grp / (uint)h);
  const int pair = (int)(grp % (uint)h);
  const int r = (int)ROUND;
  const int p = svd_player(pair, r, n);
  const int q = svd_player(n - 1 - pair, r, n);
  const int t0 = (int)tid;
  const int nt = (int)ntg;
  const int nsg = (nt + 31) / 32;
  device T* xb = X + b * ROWS * N;
  float ta, tb;
  T tg;
  float ratio = 1.0f;
  svd_round_gram(xb, rows, n, p, q, 1.0f, 1.0f, t0, nt, lane, sg, nsg, ra, rb, rg, ta, tb, tg);
  if (fmin(ta, tb) < SVD_GRAM_MIN) {  // uniform (every thread read the same totals): digits lost
    float mp = 0.0f, mq = 0.0f;       // to underflow, the Gram entries of the columns scaled apart
    for (int i = t0; i < rows; i += nt) {
      mp = fmax(mp, svd_amax(xb[i * n + p]));
      mq = fmax(mq, svd_amax(xb[i * n + q]));
    }
    mp = simd_max(mp);
    mq = simd_max(mq);
    if (lane == 0) {
      ra[sg] = mp;
      rb[sg] = mq;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (t0 == 0) {
      float gp = 0.0f, gq = 0.0f;
      for (int k = 0; k < nsg; ++k) {
        gp = fmax(gp, ra[k]);
        gq = fmax(gq, rb[k]);
      }
      ra[SVD_ROUND_TOTAL] = gp;
      rb[SVD_ROUND_TOTAL] = gq;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const int ep = svd_exponent(ra[SVD_ROUND_TOTAL]), eq = svd_exponent(rb[SVD_ROUND_TOTAL]);
    ratio = ldexp(1.0f, clamp(eq - ep, -126, 126));
    svd_round_gram(xb, rows, n, p, q, ldexp(1.0f, -ep), ldexp(1.0f, -eq), t0, nt, lane, sg, nsg, ra, rb, rg,
                   ta, tb, tg);
    if (min(ep, eq) <= SVD_NOISE_EXPONENT) {
      tg = s_zero<T>();  // no rotation, not counted
    }
  }
  float c;
  T se;
  bool significant;
  if (!svd_rotation(ta, tb, tg, ratio, TOL, CTOL, c, se, significant)) {
    return;  // uniform: every thread of the group computed the same rotation
  }
  for (int i = t0; i < rows; i += nt) {
    T xp = xb[i * n + p], xq = xb[i * n + q];
    svd_rotate(xp, xq, c, se);
    xb[i * n + p] = xp;
    xb[i * n + q] = xq;
  }
  if (WANT_V != 0) {
    device T* vb = V + b * N * N;
    for (int i = t0; i < n; i += nt) {
      T vp = vb[i * n + p], vq = vb[i * n + q];
      svd_rotate(vp, vq, c, se);
      vb[i * n + p] = vp;
      vb[i * n + q] = vq;
    }
  }
  if (t0 == 0 && significant) {
    flags[b * h + pair] = 1;
  }
}

MPSL_INSTANTIATE_DTYPES(svd_jacobi_small)
MPSL_INSTANTIATE_DTYPES(svd_jacobi_round)
