// qr.metal - kernels of the QR family (mpslinalg/qr.py), float32 and complex64 (float2).
//
// Two kernels; everything else of blocked Householder QR (the block reflector applied by larfb,
// the thin Q of orgqr, ormqr) is matrix products issued from Python (DESIGN sec. 6):
//
//   qr_small_{f32,c64}  geqr2 of whole M x N matrices (M, N <= 64, M*N + 64 elements <= 32 KiB) in
//                       threadgroup memory, and (want_q != 0) the thin Q [M, min(M, N)] in the same
//                       dispatch; one simdgroup (32 threads) per matrix;
//   qr_panel_{f32,c64}  geqr2 of the panel rows [o, M) x columns [o, o+w) (w <= 32, w <= M - o) of
//                       every matrix in device memory, plus the w x w triangular factor T of its
//                       compact WY form H_o ... H_{o+w-1} = I - V T V^H (LAPACK larft, forward,
//                       columnwise) and V itself (unit lower trapezoidal, explicit zeros and ones)
//                       for the caller's larfb; one threadgroup of 256 threads per matrix.
//
// LAPACK semantics, exactly (geqr2 / larfg / larft):
//   * larfg of [alpha; x]: xnorm = ||x||; if xnorm == 0 and Im(alpha) == 0 then tau = 0, nothing is
//     written (H = I, beta = alpha); else beta = -sign(Re alpha) * ||[alpha; x]|| (real),
//     tau = (beta - alpha) / beta, x <- x / (alpha - beta), alpha <- beta;
//   * H^H = I - conj(tau) v v^H is applied to the columns to the right (zlarf with conj(tau));
//   * norms are scaled by the largest magnitude first, so 1e-30 or 1e30 columns neither underflow
//     nor overflow in float32 (LAPACK's nrm2 does the same by other means).
//
// Layout: A is a contiguous [batch, M, N] row-major buffer (the Python side passes resolved,
// contiguous tensors: Metal ignores strides and conjugate bits); tau is [batch, K] with
// K = min(M, N); T is [batch, w, w] and V is [batch, M - o, w], both written whole (the caller
// allocates them uninitialised). Sizes arrive as 8-byte longs.
#include <metal_stdlib>
#include "scalar.h"
using namespace metal;

// Largest M and N of qr_small, and its threadgroup memory: the tile gets what the tau array
// leaves of 32 KiB (8128 float32 or 4032 complex64 elements; the host checks M * N against it).
constant constexpr int QR_SMALL_MAX = 64;
constant constexpr int QR_SMALL_BYTES = 32768;
// Threads per threadgroup of qr_panel, its simdgroups, and the widest panel.
constant constexpr int QR_PANEL_THREADS = 256;
constant constexpr int QR_PANEL_SIMDS = QR_PANEL_THREADS / SIMD_WIDTH;
constant constexpr int QR_PANEL_MAX_W = 32;

// ---- element helpers, overloaded for float (real) and float2 (complex) ------------------------

inline float qr_re(float a) { return a; }
inline float qr_re(float2 a) { return a.x; }
inline float qr_im(float a) { return 0.0f; }
inline float qr_im(float2 a) { return a.y; }
// |a / s|^2 for a scale s > 0 (the scaled sum of squares of a norm).
inline float qr_sq(float a, float s) { const float t = a / s; return t * t; }
inline float qr_sq(float2 a, float s) { const float x = a.x / s, y = a.y / s; return x * x + y * y; }
inline float qr_simd_sum(float a) { return simd_sum(a); }
inline float2 qr_simd_sum(float2 a) { return float2(simd_sum(a.x), simd_sum(a.y)); }
template <typename T> inline T qr_real(float a);
template <> inline float qr_real<float>(float a) { return a; }
template <> inline float2 qr_real<float2>(float a) { return float2(a, 0.0f); }

// sqrt(a^2 + b^2 + c^2) without overflow or underflow (LAPACK lapy3).
inline float qr_lapy3(float a, float b, float c) {
  const float x = fabs(a), y = fabs(b), z = fabs(c);
  const float w = max(x, max(y, z));
  if (w == 0.0f || isinf(w)) {
    return x + y + z;
  }
  const float p = x / w, q = y / w, r = z / w;
  return w * sqrt(p * p + q * q + r * r);
}

// The reflector of [alpha; x] from the column's norm (larfg, see the header). Every thread of the
// group computes the same values (uniform control flow).
template <typename T>
struct QrReflector {
  bool skip;  // tau = 0, H = I: nothing is written
  T beta;     // real
  T tau;
  T denom;    // alpha - beta: x <- x / denom
};

template <typename T>
inline QrReflector<T> qr_larfg(T alpha, float xnorm) {
  QrReflector<T> h;
  h.skip = xnorm == 0.0f && qr_im(alpha) == 0.0f;
  const float ar = qr_re(alpha);
  const float mag = qr_lapy3(ar, qr_im(alpha), xnorm);
  const float b = ar >= 0.0f ? -mag : mag;
  h.beta = qr_real<T>(b);
  h.tau = h.skip ? s_zero<T>() : s_div(h.beta - alpha, h.beta);
  h.denom = alpha - h.beta;
  return h;
}

// ---- qr_small ------------------------------------------------------------------------------------
//
// Whole-matrix geqr2 in threadgroup memory. Grid: threads = batch * 32, group_size = 32 (one
// simdgroup per matrix). Column j: the norm of the subdiagonal by two simd reductions (largest
// magnitude, then the scaled sum of squares), larfg, x scaled by lanes over rows; then each lane
// applies H^H to its own columns (w_c = v^H a_c, a_c -= conj(tau) v w_c), so no two lanes write
// the same element.
template <typename T>
[[max_total_threads_per_threadgroup(32)]]  // the host launches one simdgroup per matrix
kernel void qr_small(device T* A [[buffer(0)]],
                     device T* tau [[buffer(1)]],
                     device T* Q [[buffer(2)]],
                     constant long& M [[buffer(3)]],
                     constant long& N [[buffer(4)]],
                     constant long& want_q [[buffer(5)]],
                     uint tid [[thread_index_in_threadgroup]],
                     uint b [[threadgroup_position_in_grid]]) {
  threadgroup T s[QR_SMALL_BYTES / sizeof(T) - QR_SMALL_MAX];
  threadgroup T ts[QR_SMALL_MAX];
  const int m = (int)M;
  const int n = (int)N;
  const int k = min(m, n);
  const int t0 = (int)tid;
  device T* a = A + (long)b * M * N;
  for (int t = t0; t < m * n; t += SIMD_WIDTH) {
    s[t] = a[t];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int j = 0; j < k; ++j) {
    float big = 0.0f;
    for (int r = j + 1 + t0; r < m; r += SIMD_WIDTH) {
      big = max(big, s_abs(s[r * n + j]));
    }
    big = simd_max(big);
    float ss = 0.0f;
    if (big > 0.0f && !isinf(big)) {
      for (int r = j + 1 + t0; r < m; r += SIMD_WIDTH) {
        ss += qr_sq(s[r * n + j], big);
      }
    }
    ss = simd_sum(ss);
    const float xnorm = isinf(big) ? big : big * sqrt(ss);
    const T alpha = s[j * n + j];
    const QrReflector<T> h = qr_larfg<T>(alpha, xnorm);
    threadgroup_barrier(mem_flags::mem_threadgroup);  // alpha read by all before it is replaced
    if (!h.skip) {
      for (int r = j + 1 + t0; r < m; r += SIMD_WIDTH) {
        s[r * n + j] = s_div(s[r * n + j], h.denom);
      }
      if (t0 == 0) {
        s[j * n + j] = h.beta;
      }
    }
    if (t0 == 0) {
      tau[(long)b * k + j] = h.tau;
      ts[j] = h.tau;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (!h.skip) {
      const T ct = s_conj(h.tau);
      for (int c = j + 1 + t0; c < n; c += SIMD_WIDTH) {
        T w = s[j * n + c];
        for (int r = j + 1; r < m; ++r) {
          w += s_mul(s_conj(s[r * n + j]), s[r * n + c]);
        }
        const T f = s_mul(ct, w);
        s[j * n + c] -= f;
        for (int r = j + 1; r < m; ++r) {
          s[r * n + c] -= s_mul(s[r * n + j], f);
        }
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  for (int t = t0; t < m * n; t += SIMD_WIDTH) {
    a[t] = s[t];
  }
  if (want_q == 0) {
    return;
  }
  // the thin Q [M, k] (orgqr): column c = H_1 ... H_k e_c, each lane owning whole columns, so no
  // barrier is needed; H_j e_c = e_c for j > c (v_j is zero above row j)
  device T* q = Q + (long)b * M * k;
  for (int c = t0; c < k; c += SIMD_WIDTH) {
    for (int r = 0; r < m; ++r) {
      q[r * k + c] = r == c ? s_one<T>() : s_zero<T>();
    }
    for (int j = c; j >= 0; --j) {
      const T tj = ts[j];
      if (s_is_zero(tj)) {
        continue;
      }
      T w = q[j * k + c];
      for (int r = j + 1; r < m; ++r) {
        w += s_mul(s_conj(s[r * n + j]), q[r * k + c]);
      }
      const T f = s_mul(tj, w);
      q[j * k + c] -= f;
      for (int r = j + 1; r < m; ++r) {
        q[r * k + c] -= s_mul(s[r * n + j], f);
      }
    }
  }
}

// ---- qr_panel ------------------------------------------------------------------------------------
//
// geqr2 of the panel rows [o, M) x columns [o, o+w) of every matrix, in device memory, and its T.
// Grid: threads = batch * 256, group_size = 256. For column j (global column o+j, rows from
// rj = o+j): the norm of the subdiagonal (two reductions over the group), larfg, x scaled; then
// one pass over the rows computes d_c = v^H a_c for every other panel column c: for c > j that
// is larfb's w_c (then a_c -= conj(tau) v d_c), for c < j it is conj(V_c^H v) - exactly what
// larft needs for column j of T: T[i][j] = -tau T[i][i:j] conj(d[i:j]), T[j][j] = tau. Row i of
// T is written only by thread i (its zeros below the diagonal first), so it needs no barrier of
// its own. At the end V is copied out of the panel with its unit diagonal and zeros above.

// Sum of one float/float2 per thread over the group (all threads get the total).
template <typename T>
inline T qr_group_sum(T v, threadgroup T* part, uint tid) {
  v = qr_simd_sum(v);
  if (tid % SIMD_WIDTH == 0) {
    part[tid / SIMD_WIDTH] = v;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  T total = part[0];
  for (int i = 1; i < QR_PANEL_SIMDS; ++i) {
    total += part[i];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);  // part reusable
  return total;
}

template <typename T>
[[max_total_threads_per_threadgroup(256)]]
kernel void qr_panel(device T* A [[buffer(0)]],
                     device T* tau [[buffer(1)]],
                     device T* Tf [[buffer(2)]],
                     device T* Vout [[buffer(3)]],
                     constant long& M [[buffer(4)]],
                     constant long& N [[buffer(5)]],
                     constant long& K [[buffer(6)]],
                     constant long& o [[buffer(7)]],
                     constant long& w [[buffer(8)]],
                     uint tid [[thread_index_in_threadgroup]],
                     uint b [[threadgroup_position_in_grid]]) {
  threadgroup float fpart[QR_PANEL_SIMDS];
  threadgroup T dpart[QR_PANEL_SIMDS * QR_PANEL_MAX_W];
  threadgroup T d[QR_PANEL_MAX_W];
  device T* a = A + (long)b * M * N;
  device T* tf = Tf + (long)b * w * w;
  const int ww = (int)w;
  const long kl = min(M - o, w);
  const uint lane = tid % SIMD_WIDTH, sg = tid / SIMD_WIDTH;
  if ((long)tid < w) {
    for (long l = 0; l < (long)tid; ++l) {
      tf[tid * w + l] = s_zero<T>();
    }
  }
  for (long j = 0; j < kl; ++j) {
    const long col = o + j;
    // 1. norm of the subdiagonal: the largest magnitude, then the scaled sum of squares
    float big = 0.0f;
    for (long r = col + 1 + tid; r < M; r += QR_PANEL_THREADS) {
      big = max(big, s_abs(a[r * N + col]));
    }
    big = simd_max(big);
    if (lane == 0) {
      fpart[sg] = big;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    big = fpart[0];
    for (int i = 1; i < QR_PANEL_SIMDS; ++i) {
      big = max(big, fpart[i]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float ss = 0.0f;
    if (big > 0.0f && !isinf(big)) {
      for (long r = col + 1 + tid; r < M; r += QR_PANEL_THREADS) {
        ss += qr_sq(a[r * N + col], big);
      }
    }
    ss = qr_group_sum(ss, fpart, tid);
    const float xnorm = isinf(big) ? big : big * sqrt(ss);
    const T alpha = a[col * N + col];
    const QrReflector<T> h = qr_larfg<T>(alpha, xnorm);
    threadgroup_barrier(mem_flags::mem_device);  // alpha read by all before it is replaced
    // 2. v = x / (alpha - beta), R's diagonal entry, tau
    if (!h.skip) {
      for (long r = col + 1 + tid; r < M; r += QR_PANEL_THREADS) {
        a[r * N + col] = s_div(a[r * N + col], h.denom);
      }
    }
    if (tid == 0) {
      if (!h.skip) {
        a[col * N + col] = h.beta;
      }
      tau[(long)b * K + col] = h.tau;
    }
    threadgroup_barrier(mem_flags::mem_device);
    // 3. d_c = v^H a_c for every panel column c != j (v_rj = 1 implied)
    T acc[QR_PANEL_MAX_W];
    for (int c = 0; c < ww; ++c) {
      acc[c] = s_zero<T>();
    }
    for (long r = col + tid; r < M; r += QR_PANEL_THREADS) {
      const T vr = r == col ? s_one<T>() : a[r * N + col];
      const T cv = s_conj(vr);
      for (int c = 0; c < ww; ++c) {
        // rows r >= col of a column c < j hold its reflector (below its diagonal): read as is;
        // row col of column c < j is an entry of V_c too (col > o + c)
        if (c != (int)j) {
          acc[c] += s_mul(cv, a[r * N + o + c]);
        }
      }
    }
    for (int c = 0; c < ww; ++c) {
      const T sc = qr_simd_sum(acc[c]);
      if (lane == 0) {
        dpart[sg * QR_PANEL_MAX_W + c] = sc;
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)tid < ww) {
      T total = dpart[tid];
      for (int i = 1; i < QR_PANEL_SIMDS; ++i) {
        total += dpart[i * QR_PANEL_MAX_W + tid];
      }
      d[tid] = total;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // 4. trailing panel columns: a_c -= conj(tau) v d_c (c > j); column j of T
    if (!h.skip) {
      const T ct = s_conj(h.tau);
      for (long r = col + tid; r < M; r += QR_PANEL_THREADS) {
        const T vr = r == col ? s_one<T>() : a[r * N + col];
        for (int c = (int)j + 1; c < ww; ++c) {
          a[r * N + o + c] -= s_mul(vr, s_mul(ct, d[c]));
        }
      }
    }
    if ((long)tid < j) {
      T sum = s_zero<T>();
      for (long l = tid; l < j; ++l) {
        sum += s_mul(tf[tid * w + l], s_conj(d[l]));
      }
      tf[tid * w + j] = -s_mul(h.tau, sum);
    } else if ((long)tid == j) {
      tf[j * w + j] = h.tau;
    }
    threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  }
  // V for larfb: rows [o, M) of the panel, unit diagonal, zeros above it
  device T* v = Vout + (long)b * (M - o) * w;
  for (long t = tid; t < (M - o) * w; t += QR_PANEL_THREADS) {
    const long r = t / w, c = t % w;
    v[t] = r < c ? s_zero<T>() : (r == c ? s_one<T>() : a[(o + r) * N + o + c]);
  }
}

MPSL_INSTANTIATE_DTYPES(qr_small)
MPSL_INSTANTIATE_DTYPES(qr_panel)
