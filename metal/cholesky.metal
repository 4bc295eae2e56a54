// cholesky.metal - kernels of the Cholesky family (mpslinalg/cholesky/), float32 and complex64 (float2).
//
// Two kernels; everything else of the blocked factorization (the triangular solve of the panel
// below a diagonal block, the Hermitian trailing update) is the triangular family's solve and
// matrix products issued from Python (DESIGN sec. 6):
//
//   cholesky_small_{f32,c64}_<NMAX>  potf2 of whole n x n matrices (n <= NMAX <= 64) in threadgroup
//                                    memory, several matrices per threadgroup (one simdgroup each,
//                                    CHOL_PER(NMAX, T) of them), and the clean-up of the result
//                                    (zeros above the diagonal and in the columns of a failed
//                                    matrix from its failing order on) in the same dispatch;
//   cholesky_panel_{f32,c64}         potf2 of the diagonal block rows/columns [o, o + w) (w <= 64)
//                                    of every matrix of a [batch, n, n] buffer, in place; one
//                                    threadgroup of CHOL_PANEL_THREADS threads per matrix.
//
// LAPACK semantics (potf2): the pivot of column j is d = Re(a_jj) (after the updates of the
// columns before it; the imaginary part of the diagonal is never read); d > 0 gives l_jj = sqrt(d)
// and l_rj = a_rj / l_jj below it; d <= 0 or NaN fails at order j + 1 (info, 1-based). A failed
// pivot is replaced by 1 and the factorization goes on, so every thread runs the same columns and
// barriers whatever the data (no early exit: a barrier must be reached by every thread); the
// columns from the failing one on are garbage and the host (or cholesky_small itself) clears them.
// Only the lower triangle of the input is read. Division by the pivot, not multiplication by its
// reciprocal (1 / l_jj overflows for a subnormal l_jj).
//
// Layout: A is a contiguous [batch, n, n] row-major buffer (the Python side passes resolved,
// contiguous tensors: Metal ignores strides and conjugate bits); info is int32 [batch]. Sizes
// arrive as 8-byte longs.
#include <metal_stdlib>
#include "scalar.h"
using namespace metal;

// Threads per simdgroup (one matrix of cholesky_small each) and per cholesky_panel threadgroup.
constant constexpr int CHOL_SIMD = 32;
constant constexpr int CHOL_PANEL_THREADS = 256;
// Widest diagonal block of cholesky_panel (its threadgroup tile: 16 KiB float32, 32 KiB complex64).
constant constexpr int CHOL_PANEL_MAX = 64;
// cholesky_small: matrices per threadgroup, as many as fit in 16 KiB (at most 8, at least 1). The
// host computes the same number (mpslinalg.cholesky.kernels.small_per_group).
constant constexpr int CHOL_SMALL_BYTES = 16384;
constant constexpr int CHOL_SMALL_MAX_PER = 8;
#define CHOL_PER(NMAX, T) \
  (CHOL_SMALL_BYTES / (int)((NMAX) * (NMAX) * sizeof(T)) < 1 ? 1 \
   : (CHOL_SMALL_BYTES / (int)((NMAX) * (NMAX) * sizeof(T)) > CHOL_SMALL_MAX_PER ? CHOL_SMALL_MAX_PER \
      : CHOL_SMALL_BYTES / (int)((NMAX) * (NMAX) * sizeof(T))))

// ---- element helpers, overloaded for float (real) and float2 (complex) ------------------------

inline float chol_re(float a) { return a; }
inline float chol_re(float2 a) { return a.x; }
// a / p for a real p > 0: one correctly rounded division per component (exact complex scaling).
inline float chol_scale(float a, float p) { return a / p; }
inline float2 chol_scale(float2 a, float p) { return float2(a.x / p, a.y / p); }
template <typename T> inline T chol_real(float a);
template <> inline float chol_real<float>(float a) { return a; }
template <> inline float2 chol_real<float2>(float a) { return float2(a, 0.0f); }

// ---- the shared body: potf2 of a w x w block in threadgroup memory --------------------------------
//
// s holds the block row-major with row stride w (only its lower triangle is read and written). A
// team of `team` threads (index t in [0, team)) factors it; every thread of the threadgroup calls
// this with the same w, so all reach the same barriers (teams of one threadgroup share them).
// Returns the 1-based order of the first failed pivot, 0 if none (the same value in every thread:
// each reads the same pivots).
//
// Column j, two barriers: (1) every thread reads d = s[j][j] (written by the previous column's
// update, visible after its barrier) and scales its rows of column j by sqrt(d); the diagonal
// itself is written in phase (2), which does not read it; (2) the trailing lower triangle
// s[r][c] -= l_rj conj(l_cj) (j < c <= r), its elements dealt round the team over the square
// (r, c) index space (one integer division per element; half of the indices are above the
// diagonal and skipped).
template <typename T>
inline int chol_potf2_tg(threadgroup T* s, int w, int t, int team) {
  int info = 0;
  for (int j = 0; j < w; ++j) {
    const float d = chol_re(s[j * w + j]);
    const bool ok = d > 0.0f;  // false for NaN: a NaN pivot fails like a non-positive one
    if (!ok && info == 0) {
      info = j + 1;
    }
    const float p = ok ? sqrt(d) : 1.0f;
    for (int r = j + 1 + t; r < w; r += team) {
      s[r * w + j] = chol_scale(s[r * w + j], p);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);  // column j scaled before the update reads it
    if (t == 0) {
      s[j * w + j] = chol_real<T>(p);
    }
    const int m = w - j - 1;
    for (int e = t; e < m * m; e += team) {
      const int r = j + 1 + e / m;
      const int c = j + 1 + e % m;
      if (c <= r) {
        s[r * w + c] -= s_mul(s[r * w + j], s_conj(s[c * w + j]));
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);  // the next pivot is final before it is read
  }
  return info;
}

// ---- cholesky_small -----------------------------------------------------------------------------
//
// Whole matrices in threadgroup memory. Grid: threads = groups * PER * 32, group_size = PER * 32
// with PER = CHOL_PER(NMAX, T); simdgroup g of threadgroup q holds matrix q * PER + g (slots past
// the batch compute on their tile but neither read nor write device memory). In: the lower
// triangle of each matrix (the strict upper triangle is never read). Out: L with zeros above the
// diagonal and, for a matrix that failed at order k, zeros in columns k-1 .. n-1 (its first k - 1
// columns are those of the factor); info[b] = k (0: success).
template <typename T, int NMAX>
[[max_total_threads_per_threadgroup(256)]]  // = CHOL_SMALL_MAX_PER * CHOL_SIMD
kernel void cholesky_small(device T* A [[buffer(0)]],
                           device int* info [[buffer(1)]],
                           constant long& N [[buffer(2)]],
                           constant long& batch [[buffer(3)]],
                           uint tid [[thread_index_in_threadgroup]],
                           uint q [[threadgroup_position_in_grid]]) {
  constexpr int PER = CHOL_PER(NMAX, T);
  threadgroup T s[PER * NMAX * NMAX];
  const int n = (int)N;
  const int slot = (int)tid / CHOL_SIMD;
  const int t = (int)tid % CHOL_SIMD;
  const long b = (long)q * PER + slot;
  const bool live = b < batch;
  threadgroup T* m = s + slot * NMAX * NMAX;
  device T* a = A + b * N * N;
  if (live) {
    for (int e = t; e < n * n; e += CHOL_SIMD) {
      const int r = e / n;
      const int c = e % n;
      m[e] = c <= r ? a[e] : s_zero<T>();
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const int k = chol_potf2_tg(m, n, t, CHOL_SIMD);
  if (live) {
    const int keep = k == 0 ? n : k - 1;  // columns that hold the factor
    for (int e = t; e < n * n; e += CHOL_SIMD) {
      const int r = e / n;
      const int c = e % n;
      a[e] = (c <= r && c < keep) ? m[e] : s_zero<T>();
    }
    if (t == 0) {
      info[b] = k;
    }
  }
}

// ---- cholesky_panel -----------------------------------------------------------------------------
//
// potf2 of the diagonal block [o, o + w) x [o, o + w) of matrix b = the threadgroup index, in
// place. Grid: threads = batch * CHOL_PANEL_THREADS, group_size = CHOL_PANEL_THREADS. Only the
// block's lower triangle is read and written. info[b] = o + k if the block fails first at its order
// k and info[b] was 0 (an earlier failure of the same matrix is kept).
template <typename T>
[[max_total_threads_per_threadgroup(256)]]  // = CHOL_PANEL_THREADS
kernel void cholesky_panel(device T* A [[buffer(0)]],
                           device int* info [[buffer(1)]],
                           constant long& N [[buffer(2)]],
                           constant long& o [[buffer(3)]],
                           constant long& w [[buffer(4)]],
                           uint tid [[thread_index_in_threadgroup]],
                           uint ntg [[threads_per_threadgroup]],
                           uint b [[threadgroup_position_in_grid]]) {
  threadgroup T s[CHOL_PANEL_MAX * CHOL_PANEL_MAX];
  const int ww = (int)w;
  const int t = (int)tid;
  const int team = (int)ntg;
  device T* a = A + (long)b * N * N + o * N + o;  // the block's first element, row stride N
  for (int e = t; e < ww * ww; e += team) {
    const int r = e / ww;
    const int c = e % ww;
    if (c <= r) {
      s[e] = a[(long)r * N + c];
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const int k = chol_potf2_tg(s, ww, t, team);
  for (int e = t; e < ww * ww; e += team) {
    const int r = e / ww;
    const int c = e % ww;
    if (c <= r) {
      a[(long)r * N + c] = s[e];
    }
  }
  if (t == 0 && k > 0 && info[b] == 0) {
    info[b] = (int)o + k;
  }
}

#define CHOL_SMALL(NMAX)                                                   \
  MPSL_INSTANTIATE("cholesky_small_f32_" #NMAX, cholesky_small, float, NMAX) \
  MPSL_INSTANTIATE("cholesky_small_c64_" #NMAX, cholesky_small, float2, NMAX)
CHOL_SMALL(8)
CHOL_SMALL(16)
CHOL_SMALL(32)
CHOL_SMALL(64)
MPSL_INSTANTIATE_DTYPES(cholesky_panel)
