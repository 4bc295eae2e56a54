// lu.metal - kernels of the LU family (mpslinalg/lu.py), float32 and complex64 (float2).
//
// Four kernels; everything else in the LU algorithm (TRSM, GEMM updates) is matrix products
// issued from Python (docs/design.md, LU):
//
//   lu_panel_{f32,c64}   factor the m x w panel A[o:M, o:o+w] of every matrix in the batch in place
//                        (one threadgroup per matrix, in device memory, any M);
//   lu_small_{f32,c64}   factor whole matrices with M, N <= 32 in threadgroup memory
//                        (one threadgroup per matrix; RANSAC 9x9, VMC 32x32);
//   lu_laswp_{f32,c64}   apply the row interchanges piv[k1:k2] to the columns [c0, c0 + nc) of
//                        every matrix, forward or reverse (one thread per column, no barriers);
//   lu_small_solve_{f32,c64}  factor and solve A X = B for n, k <= 32 in one dispatch (RANSAC).
//
// LAPACK semantics (getf2 / getrf2):
//   * the pivot of column j is the FIRST row of largest |Re| + |Im| (i?amax) among rows j..M-1;
//     a NaN entry beats every number (the first NaN wins), as torch's CPU LAPACK (MKL) does for
//     n >= 17 and as propagating NaN requires: a skipped NaN could leave a finite-looking factor
//     of a matrix holding NaN (see lu_pivot_beats);
//   * pivots are 1-based absolute row indices, int32;
//   * a zero pivot column is not scaled (no division by zero, no NaN from it); info (zero-initialised
//     by the caller) becomes the 1-based index of the first zero pivot; elimination continues;
//   * below the diagonal: multiply by 1/pivot when |pivot| >= the smallest normal float, else
//     divide by the pivot (LAPACK's sfmin rule); a complex inf pivot gives NaN multipliers (lu_recip).
//
// Layout: A is a contiguous [batch, M, N] row-major buffer (the Python side passes resolved,
// contiguous tensors: Metal ignores strides and conjugate bits); piv is [batch, K] int32 with
// K = min(M, N) (lu_laswp: K = number of pivots per matrix); info is [batch] int32.
// Sizes arrive as 8-byte longs (torch.mps.compile_shader binds a Python int as long). Indexing:
// 64-bit only for a matrix's base offset; inside a matrix 32-bit (the host checks M * N < 2^31),
// Apple GPUs have no native 64-bit multiply or divide.
#include "scalar.h"

// Threads per threadgroup of lu_panel: a power of two in [LU_PANEL_LANES, LU_PANEL_MAX_THREADS]
// (the reduction arrays' size; the host checks TUNING.panel_threads against both).
constant constexpr uint LU_PANEL_MAX_THREADS = 256;
// Threads that share one row in lu_panel's rank-1 update (one simdgroup: consecutive columns).
constant constexpr uint LU_PANEL_LANES = 32;
// Largest matrix order of lu_small, and the padded row stride of its threadgroup tile.
constant constexpr int LU_SMALL_MAX = 32;
constant constexpr int LU_SMALL_LD = 33;
// Row stride of lu_small_solve's augmented tile [A | B] (n + k <= 64 columns, padded).
constant constexpr int LU_SOLVE_LD = 65;

// ---- LU-specific scalar rules --------------------------------------------------------------------

// The reciprocal of a pivot. Complex: a non-finite pivot gives NaN multipliers, as LAPACK's
// complex getf2 does in practice (MKL/OpenBLAS form 1/p from |p|^2, so 1/(inf + 0i) = inf/inf =
// NaN, and the NaN then spreads through the trailing matrix). Robust division (crecip) alone would
// give 1/inf = 0 and a finite, plausible-looking factorisation of a matrix holding inf.
inline float lu_recip(float a) { return 1.0f / a; }
inline float2 lu_recip(float2 a) { return s_isfinite(a) ? crecip(a) : s_nan<float2>(); }

// x / pivot by LAPACK's sfmin rule: times the reciprocal rp when |pivot| >= the smallest normal,
// else a true division (1 / pivot would overflow for a subnormal pivot).
template <typename T>
inline T lu_scale(T x, T pivot, T rp, bool use_recip) {
  return use_recip ? s_mul(x, rp) : s_div(x, pivot);
}

// Pivot order: does candidate (v = |Re| + |Im| of row i) beat the best so far (bv of row bi)?
// NaN beats every number; between equals, or two NaNs, the smaller row wins.
inline bool lu_pivot_beats(float v, int i, float bv, int bi) {
  const bool vn = isnan(v), bn = isnan(bv);
  if (vn != bn) {
    return vn;
  }
  return vn ? i < bi : (v > bv || (v == bv && i < bi));
}

// Threadgroup-wide winner of every thread's candidate (v, i) by lu_pivot_beats (a total order:
// the result is the sequential scan's), left in red_v[0], red_i[0]; ntg a power of two.
inline void lu_pivot_reduce(threadgroup float* red_v, threadgroup int* red_i, float v, int i, uint tid,
                            uint ntg) {
  red_v[tid] = v;
  red_i[tid] = i;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint s = ntg / 2; s > 0; s >>= 1) {
    if (tid < s) {
      const float v2 = red_v[tid + s];
      const int i2 = red_i[tid + s];
      if (lu_pivot_beats(v2, i2, red_v[tid], red_i[tid])) {
        red_v[tid] = v2;
        red_i[tid] = i2;
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
}

// ---- lu_panel ------------------------------------------------------------------------------------
//
// Right-looking unblocked LU (LAPACK getf2) of the panel rows [o, M) x columns [o, o + w) of each
// matrix. Row swaps touch only the panel's columns; the caller applies the pivots to the other
// columns with lu_laswp. Grid: threads = batch * G, group_size = G (a power of two,
// 32 <= G <= 256); the threadgroup index is the batch index. The pivot search is a strided scan
// followed by a tree reduction, both ordered by lu_pivot_beats: the result is the sequential
// scan's.
template <typename T>
[[max_total_threads_per_threadgroup(256)]]  // = LU_PANEL_MAX_THREADS
kernel void lu_panel(device T* A [[buffer(0)]],
                     device int* piv [[buffer(1)]],
                     device int* info [[buffer(2)]],
                     constant long& M [[buffer(3)]],
                     constant long& N [[buffer(4)]],
                     constant long& K [[buffer(5)]],
                     constant long& o [[buffer(6)]],
                     constant long& w [[buffer(7)]],
                     uint tid [[thread_index_in_threadgroup]],
                     uint ntg [[threads_per_threadgroup]],
                     uint b [[threadgroup_position_in_grid]]) {
  threadgroup float red_v[LU_PANEL_MAX_THREADS];
  threadgroup int red_i[LU_PANEL_MAX_THREADS];
  device T* a = A + (long)b * M * N;  // 64-bit base offset; 32-bit inside the matrix
  const int m = (int)M;
  const int n = (int)N;
  const int c0 = (int)o;
  const int cend = c0 + (int)w;
  const int kl = min(m - c0, (int)w);
  const int t = (int)tid;
  const int nt = (int)ntg;
  for (int j = 0; j < kl; ++j) {
    const int col = c0 + j;
    // 1. pivot search over rows col..m-1 (sentinel row m: nothing found)
    float best = -1.0f;
    int bi = m;
    for (int r = col + t; r < m; r += nt) {
      const float v = s_abs1(a[r * n + col]);
      if (lu_pivot_beats(v, r, best, bi)) {
        best = v;
        bi = r;
      }
    }
    lu_pivot_reduce(red_v, red_i, best, bi, tid, ntg);
    const int p = (red_i[0] >= m) ? col : red_i[0];
    const T pivot = a[p * n + col];
    // everyone has read red_*[0] and the pivot before anything is overwritten
    threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
    if (tid == 0) {
      piv[(long)b * K + col] = p + 1;
    }
    if (!s_is_zero(pivot)) {  // uniform over the threadgroup: every thread read the same pivot
      // 2. swap rows col and p inside the panel
      if (p != col) {
        for (int c = c0 + t; c < cend; c += nt) {
          const T x = a[col * n + c];
          a[col * n + c] = a[p * n + c];
          a[p * n + c] = x;
        }
      }
      threadgroup_barrier(mem_flags::mem_device);
      // 3. scale the column below the diagonal (LAPACK's sfmin rule)
      const bool use_recip = s_abs(pivot) >= S_SFMIN;
      const T rp = lu_recip(pivot);
      for (int r = col + 1 + t; r < m; r += nt) {
        a[r * n + col] = lu_scale(a[r * n + col], pivot, rp, use_recip);
      }
    } else if (tid == 0 && info[b] == 0) {
      info[b] = col + 1;
    }
    threadgroup_barrier(mem_flags::mem_device);
    // 4. rank-1 update of the trailing panel rows col+1..m-1, columns col+1..cend-1: the group is
    //    LU_PANEL_LANES consecutive threads per row (consecutive columns: coalesced), nt / lanes
    //    rows at a time; no integer division per element
    const int lane = (int)(tid % LU_PANEL_LANES);
    const int rstep = (int)(ntg / LU_PANEL_LANES);
    for (int r = col + 1 + (int)(tid / LU_PANEL_LANES); r < m; r += rstep) {
      const T l = a[r * n + col];
      for (int c = col + 1 + lane; c < cend; c += (int)LU_PANEL_LANES) {
        a[r * n + c] -= s_mul(l, a[col * n + c]);
      }
    }
    threadgroup_barrier(mem_flags::mem_device);
  }
}

// ---- lu_panel_step -------------------------------------------------------------------------------
//
// One column step of getf2 on a TALL panel (rows [o, M) x columns [o, o + w)) shared by G
// threadgroups per matrix: group g owns the rows [o + g*R, o + (g+1)*R). Partial pivoting needs the
// whole column's maximum before the next column can be eliminated, and threadgroups cannot wait
// for each other inside a dispatch, so the host issues w + 1 dispatches per panel, step = 0 .. w'
// (w' = min(M - o, w)); dispatch `step` does
//   A. (step > 0) finish column col = o + step - 1: every group reduces the G candidates of the
//      previous dispatch itself (same total order: the sequential scan's pivot, no atomics), takes
//      the pivot row and the old diagonal row from the candidate buffer (so no group reads rows
//      another group is writing), swaps them into its own rows, scales and does the rank-1 update
//      of its rows; group 0 writes piv and info;
//   B. (step < w') search column col + 1 in its own rows and publish its best candidate (value,
//      row, and that row's w panel entries), and the diagonal row's entries if it owns it.
// Candidate buffers alternate between two slots by step parity (read slot != written slot).
// Same rules as lu_panel: first largest |Re| + |Im| (NaN first), zero pivot: no swap, no scaling,
// info; sfmin rule. Buffers (per matrix b): cand_v/cand_i [B, 2, G], cand_rows [B, 2, G + 1, w].
// Grid: threads = B * G * ntg, group_size = ntg (a power of two, 32 <= ntg <= 256).
template <typename T>
[[max_total_threads_per_threadgroup(256)]]  // = LU_PANEL_MAX_THREADS
kernel void lu_panel_step(device T* A [[buffer(0)]],
                          device int* piv [[buffer(1)]],
                          device int* info [[buffer(2)]],
                          device float* cand_v [[buffer(3)]],
                          device int* cand_i [[buffer(4)]],
                          device T* cand_rows [[buffer(5)]],
                          constant long& M [[buffer(6)]],
                          constant long& N [[buffer(7)]],
                          constant long& K [[buffer(8)]],
                          constant long& o [[buffer(9)]],
                          constant long& w [[buffer(10)]],
                          constant long& step [[buffer(11)]],
                          constant long& G [[buffer(12)]],
                          constant long& R [[buffer(13)]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint ntg [[threads_per_threadgroup]],
                          uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float red_v[LU_PANEL_MAX_THREADS];
  threadgroup int red_i[LU_PANEL_MAX_THREADS];
  threadgroup T lmul[LU_PANEL_MAX_THREADS];  // multipliers of the rows of one chunk
  const int ng = (int)G;
  const int b = (int)(tg / (uint)ng);
  const int g = (int)(tg % (uint)ng);
  device T* a = A + (long)b * M * N;
  const int m = (int)M;
  const int n = (int)N;
  const int c0 = (int)o;
  const int nw = (int)w;
  const int kl = min(m - c0, nw);
  const int st = (int)step;
  const int t = (int)tid;
  const int nt = (int)ntg;
  const int rlo = c0 + g * (int)R;
  const int rhi = min(m, rlo + (int)R);
  device float* cv = cand_v + (long)b * 2 * ng;
  device int* ci = cand_i + (long)b * 2 * ng;
  device T* crow = cand_rows + (long)b * 2 * (ng + 1) * nw;
  if (st > 0) {
    const int jc = st - 1;  // the column finished, relative to o
    const int col = c0 + jc;
    const int slot = jc & 1;
    float best = -1.0f;
    int bi = m;
    for (int q = t; q < ng; q += nt) {
      if (lu_pivot_beats(cv[slot * ng + q], ci[slot * ng + q], best, bi)) {
        best = cv[slot * ng + q];
        bi = ci[slot * ng + q];
      }
    }
    lu_pivot_reduce(red_v, red_i, best, bi, tid, ntg);
    const int p = (red_i[0] >= m) ? col : red_i[0];
    device const T* prow = crow + (long)(slot * (ng + 1) + (p - c0) / (int)R) * nw;
    device const T* drow = crow + (long)(slot * (ng + 1) + ng) * nw;
    const T pivot = prow[jc];
    const bool nonzero = !s_is_zero(pivot);
    const bool swap = nonzero && p != col;
    device const T* urow = swap ? prow : drow;  // row col of U
    if (g == 0 && t == 0) {
      piv[(long)b * K + col] = p + 1;
      if (!nonzero && info[b] == 0) {
        info[b] = 1 + col;
      }
    }
    if (swap && rlo <= col && col < rhi) {
      for (int c = t; c < nw; c += nt) {
        a[col * n + c0 + c] = prow[c];
      }
    }
    const bool recip = s_abs(pivot) >= S_SFMIN;
    const T rp = lu_recip(pivot);
    const int lane = (int)(tid % LU_PANEL_LANES);
    const int rsub = (int)(tid / LU_PANEL_LANES);
    const int rstep = (int)(ntg / LU_PANEL_LANES);
    // rows below col in chunks of nt (a uniform trip count: the barriers are reached by all)
    for (int r0 = max(rlo, col + 1); r0 < rhi; r0 += nt) {
      const int cnt = min(nt, rhi - r0);
      if (t < cnt) {
        const int r = r0 + t;
        T l = (swap && r == p) ? drow[jc] : a[r * n + col];
        if (nonzero) {
          l = lu_scale(l, pivot, rp, recip);
        }
        lmul[t] = l;
        a[r * n + col] = l;
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      for (int q = rsub; q < cnt; q += rstep) {
        const int r = r0 + q;
        const T l = lmul[q];
        if (swap && r == p) {  // the old diagonal row moves here: its L part, then its update
          for (int c = lane; c < jc; c += (int)LU_PANEL_LANES) {
            a[r * n + c0 + c] = drow[c];
          }
          for (int c = jc + 1 + lane; c < nw; c += (int)LU_PANEL_LANES) {
            a[r * n + c0 + c] = drow[c] - s_mul(l, urow[c]);
          }
        } else {
          for (int c = jc + 1 + lane; c < nw; c += (int)LU_PANEL_LANES) {
            a[r * n + c0 + c] -= s_mul(l, urow[c]);
          }
        }
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);  // lmul is rewritten by the next chunk
    }
    // the updated column col + 1 is read by other threads of the group below: device-memory
    // ordering (the chunk barriers above already order execution; the emulator cannot check this)
    threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
  }
  if (st < kl) {
    const int col = c0 + st;
    const int slot = st & 1;
    float best = -1.0f;
    int bi = m;
    for (int r = max(rlo, col) + t; r < rhi; r += nt) {
      const float v = s_abs1(a[r * n + col]);
      if (lu_pivot_beats(v, r, best, bi)) {
        best = v;
        bi = r;
      }
    }
    lu_pivot_reduce(red_v, red_i, best, bi, tid, ntg);
    const int win = red_i[0];
    if (t == 0) {
      cv[slot * ng + g] = red_v[0];
      ci[slot * ng + g] = win;
    }
    device T* out = crow + (long)(slot * (ng + 1) + g) * nw;
    device T* dout = crow + (long)(slot * (ng + 1) + ng) * nw;
    for (int c = t; c < nw; c += nt) {
      if (win < m) {
        out[c] = a[win * n + c0 + c];
      }
      if (rlo <= col && col < rhi) {
        dout[c] = a[col * n + c0 + c];
      }
    }
  }
}

// ---- elimination in threadgroup memory (lu_small, lu_small_solve) -------------------------------
//
// getf2 on the rows [0, m) of a tile with row stride LD whose first `width` columns are eliminated
// as whole rows (lu_small: the matrix; lu_small_solve: [A | B], so B is permuted with A), pivots
// from the first k columns. Thread 0 does the pivot search with the sequential scan (start at the
// diagonal, lu_pivot_beats); the swap, scaling and update are spread over the group. Writes the
// pivots to piv (when not null) and the first zero pivot to *info.
template <typename T, int LD>
inline void lu_tile_getf2(threadgroup T* s, threadgroup int* sp, int m, int width, int k,
                          device int* piv, device int* info, int t0, int nt) {
  for (int j = 0; j < k; ++j) {
    if (t0 == 0) {
      int p = j;
      float best = s_abs1(s[j * LD + j]);
      for (int r = j + 1; r < m; ++r) {
        const float v = s_abs1(s[r * LD + j]);
        if (lu_pivot_beats(v, r, best, p)) {
          best = v;
          p = r;
        }
      }
      sp[0] = p;
      if (piv) {
        piv[j] = p + 1;
      }
      if (s_is_zero(s[p * LD + j]) && *info == 0) {
        *info = j + 1;
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const int p = sp[0];
    const T pivot = s[p * LD + j];
    threadgroup_barrier(mem_flags::mem_threadgroup);  // all have read the pivot before the swap
    if (!s_is_zero(pivot)) {
      if (p != j) {
        for (int c = t0; c < width; c += nt) {
          const T x = s[j * LD + c];
          s[j * LD + c] = s[p * LD + c];
          s[p * LD + c] = x;
        }
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      const bool use_recip = s_abs(pivot) >= S_SFMIN;
      const T rp = lu_recip(pivot);
      for (int r = j + 1 + t0; r < m; r += nt) {
        s[r * LD + j] = lu_scale(s[r * LD + j], pivot, rp, use_recip);
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int r = j + 1 + t0; r < m; r += nt) {  // one row per thread (odd row stride: no bank conflicts)
      const T l = s[r * LD + j];
      for (int c = j + 1; c < width; ++c) {
        s[r * LD + c] -= s_mul(l, s[j * LD + c]);
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
}

// ---- lu_small ------------------------------------------------------------------------------------
//
// Whole-matrix LU of M x N matrices with M, N <= 32, in threadgroup memory (8.4 KiB for complex64).
// Grid: threads = batch * 32, group_size = 32 (one simdgroup per matrix).
// Whole rows are swapped (LAPACK getf2), so no lu_laswp is needed afterwards.
template <typename T>
[[max_total_threads_per_threadgroup(32)]]  // the host launches one simdgroup per matrix
kernel void lu_small(device T* A [[buffer(0)]],
                     device int* piv [[buffer(1)]],
                     device int* info [[buffer(2)]],
                     constant long& M [[buffer(3)]],
                     constant long& N [[buffer(4)]],
                     uint tid [[thread_index_in_threadgroup]],
                     uint ntg [[threads_per_threadgroup]],
                     uint b [[threadgroup_position_in_grid]]) {
  threadgroup T s[LU_SMALL_MAX * LU_SMALL_LD];
  threadgroup int sp[1];
  const int m = (int)M;
  const int n = (int)N;
  const int k = min(m, n);
  const int nt = (int)ntg;
  const int t0 = (int)tid;
  device T* a = A + (long)b * M * N;
  for (int t = t0; t < m * n; t += nt) {
    s[(t / n) * LU_SMALL_LD + t % n] = a[t];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  lu_tile_getf2<T, LU_SMALL_LD>(s, sp, m, n, k, piv + (long)b * k, info + b, t0, nt);
  for (int t = t0; t < m * n; t += nt) {
    a[t] = s[(t / n) * LU_SMALL_LD + t % n];
  }
}

// ---- lu_small_solve ------------------------------------------------------------------------------
//
// Fused solve of small systems A X = B (n <= 32, k <= 32 right-hand sides) in one dispatch: the
// augmented tile [A | B] (16.6 KiB for complex64) is eliminated exactly as lu_small eliminates A
// (same pivots, info and sfmin rule; whole rows of the tile are swapped, so B is permuted with A),
// then U X = B' is solved by back substitution in threadgroup memory and X is written to Xout.
// A zero pivot sets info and the back substitution divides by it (inf/NaN, as LAPACK's trsm would).
// Grid: threads = batch * 32, group_size = 32.
template <typename T>
[[max_total_threads_per_threadgroup(32)]]
kernel void lu_small_solve(device const T* A [[buffer(0)]],
                           device const T* B [[buffer(1)]],
                           device T* Xout [[buffer(2)]],
                           device int* info [[buffer(3)]],
                           constant long& N [[buffer(4)]],
                           constant long& K [[buffer(5)]],
                           uint tid [[thread_index_in_threadgroup]],
                           uint ntg [[threads_per_threadgroup]],
                           uint b [[threadgroup_position_in_grid]]) {
  threadgroup T s[LU_SMALL_MAX * LU_SOLVE_LD];
  threadgroup int sp[1];
  const int n = (int)N;
  const int k = (int)K;
  const int nt = (int)ntg;
  const int t0 = (int)tid;
  device const T* a = A + (long)b * N * N;
  device const T* rhs = B + (long)b * N * K;
  for (int t = t0; t < n * n; t += nt) {
    s[(t / n) * LU_SOLVE_LD + t % n] = a[t];
  }
  for (int t = t0; t < n * k; t += nt) {
    s[(t / k) * LU_SOLVE_LD + n + t % k] = rhs[t];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  lu_tile_getf2<T, LU_SOLVE_LD>(s, sp, n, n + k, n, (device int*)nullptr, info + b, t0, nt);
  // back substitution U X = B' (columns n..n+k-1 of the tile), one right-hand side per thread
  for (int c = t0; c < k; c += nt) {
    for (int j = n - 1; j >= 0; --j) {
      const T x = s_div(s[j * LU_SOLVE_LD + n + c], s[j * LU_SOLVE_LD + j]);
      s[j * LU_SOLVE_LD + n + c] = x;
      for (int i = 0; i < j; ++i) {
        s[i * LU_SOLVE_LD + n + c] -= s_mul(s[i * LU_SOLVE_LD + j], x);
      }
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  device T* xo = Xout + (long)b * N * K;
  for (int t = t0; t < n * k; t += nt) {
    xo[t] = s[(t / k) * LU_SOLVE_LD + n + t % k];
  }
}

// ---- lu_laswp ------------------------------------------------------------------------------------
//
// LAPACK laswp: for i = k1 .. k2-1 (reverse: k2-1 down to k1) swap rows i and piv[i] - 1 of the
// columns [c0, c0 + nc) of each matrix. One thread per (matrix, column): the swaps of one column
// are sequential in that thread, so no barriers are needed. Grid: threads = batch * nc (any
// group size). Pivots outside [1, M] (invalid user pivots) are skipped: never an out-of-bounds
// access; the public ops reject them before (lu_solve's pivot check).
// The interchanges piv[lo .. lo+cnt-1] of one column c (in reverse order if reverse != 0).
template <typename T>
inline void lu_swap_column(device T* a, device const int* pb, int m, int n, int c, int lo, int cnt,
                           long reverse) {
  for (int step = 0; step < cnt; ++step) {
    const int i = reverse != 0 ? lo + cnt - 1 - step : lo + step;
    const int q = pb[i] - 1;
    if (q != i && q >= 0 && q < m) {
      const T x = a[i * n + c];
      a[i * n + c] = a[q * n + c];
      a[q * n + c] = x;
    }
  }
}

template <typename T>
kernel void lu_laswp(device T* A [[buffer(0)]],
                     device const int* piv [[buffer(1)]],
                     constant long& M [[buffer(2)]],
                     constant long& N [[buffer(3)]],
                     constant long& K [[buffer(4)]],
                     constant long& k1 [[buffer(5)]],
                     constant long& k2 [[buffer(6)]],
                     constant long& c0 [[buffer(7)]],
                     constant long& nc [[buffer(8)]],
                     constant long& reverse [[buffer(9)]],
                     constant long& batch [[buffer(10)]],
                     uint gid [[thread_position_in_grid]]) {
  const uint b = gid / (uint)nc;
  if (b >= (uint)batch) {
    return;
  }
  const int c = (int)c0 + (int)(gid % (uint)nc);
  lu_swap_column(A + (long)b * M * N, piv + (long)b * K, (int)M, (int)N, c, (int)k1, (int)(k2 - k1), reverse);
}

// ---- lu_laswp_left -------------------------------------------------------------------------------
//
// The left-hand interchanges of the blocked LU (getrf), all at the end in one dispatch: column c of
// block c / nb receives the pivots of every later block, piv[(c / nb + 1) * nb .. K), in order
// (what LAPACK's per-block laswp on the columns to the left of each panel does: those columns are
// never read again by the factorization). Grid: threads = batch * nc, nc = the columns of all
// blocks but the last (any group size).
template <typename T>
kernel void lu_laswp_left(device T* A [[buffer(0)]],
                          device const int* piv [[buffer(1)]],
                          constant long& M [[buffer(2)]],
                          constant long& N [[buffer(3)]],
                          constant long& K [[buffer(4)]],
                          constant long& nb [[buffer(5)]],
                          constant long& nc [[buffer(6)]],
                          constant long& batch [[buffer(7)]],
                          uint gid [[thread_position_in_grid]]) {
  const uint b = gid / (uint)nc;
  if (b >= (uint)batch) {
    return;
  }
  const int c = (int)(gid % (uint)nc);
  const int lo = (c / (int)nb + 1) * (int)nb;
  lu_swap_column(A + (long)b * M * N, piv + (long)b * K, (int)M, (int)N, c, lo, (int)K - lo, 0);
}

// ---- instantiations ------------------------------------------------------------------------------

MPSL_INSTANTIATE_DTYPES(lu_panel)
MPSL_INSTANTIATE_DTYPES(lu_panel_step)
MPSL_INSTANTIATE_DTYPES(lu_small)
MPSL_INSTANTIATE_DTYPES(lu_small_solve)
MPSL_INSTANTIATE_DTYPES(lu_laswp)
MPSL_INSTANTIATE_DTYPES(lu_laswp_left)
