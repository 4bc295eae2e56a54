// lu.metal - kernels of the LU family (mpslinalg/lu.py), float32 and complex64 (float2).
//
// The kernels (lu_panel_step and lu_panel_look: at their definitions); everything else in the LU algorithm (TRSM, GEMM updates) is matrix products
// issued from Python (docs/design.md, LU):
//
//   lu_panel_{f32,c64}   factor the m x w panel A[o:M, o:o+w] of every matrix in the batch in place
//                        (one threadgroup per matrix, in device memory, any M);
//   lu_small_{f32,c64}_W_S  factor whole matrices with M, N <= W (8, 16, 32) in registers, 32 / W
//                        matrices per simdgroup (RANSAC 9x9, VMC 32x32); lu_small_f32_32_S_2: two
//                        rows per lane, two 32x32 matrices per simdgroup (TUNING.small_rows);
//   lu_laswp_{f32,c64}   apply the row interchanges piv[k1:k2] to the columns [c0, c0 + nc) of
//                        every matrix, forward or reverse (one thread per column, no barriers);
//   lu_laswp_block_{f32,c64}  the same for at most 64 interchanges as one permutation gather, on
//                        the columns left and right of a panel (the blocked LU's per block);
//   lu_small_solve_{f32,c64}_W_KC_S  factor and solve A X = B for n <= W, k <= KC (1, 8) in one
//                        dispatch, as lu_small (RANSAC).
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
#include <metal_stdlib>  // simdgroup_matrix (lu_panel_look's look_mma variant); scalar.h includes it too

// Threads per threadgroup of lu_panel: a power of two in [LU_PANEL_LANES, LU_PANEL_MAX_THREADS]
// (the reduction arrays' size; the host checks TUNING.panel_threads against both).
constant constexpr uint LU_PANEL_MAX_THREADS = 256;
// Threads that share one row in lu_panel's rank-1 update (one simdgroup: consecutive columns).
constant constexpr uint LU_PANEL_LANES = 32;
// Rows of lu_panel's rank-1 update each thread loads at once.
constant constexpr int LU_PANEL_UNROLL = 8;

// ---- LU-specific scalar rules --------------------------------------------------------------------

// The reciprocal of a pivot. Complex: a non-finite pivot gives NaN multipliers, as LAPACK's
// complex getf2 does in practice (MKL/OpenBLAS form 1/p from |p|^2, so 1/(inf + 0i) = inf/inf =
// NaN, and the NaN then spreads through the trailing matrix). Robust division (crecip) alone would
// give 1/inf = 0 and a finite, plausible-looking factorisation of a matrix holding inf.
inline float lu_recip(float a) { return 1.0f / a; }
inline float2 lu_recip(float2 a) { return s_isfinite(a) ? crecip(a) : s_nan<float2>(); }

// The sfmin rule's test |pivot| >= S_SFMIN. Complex: the modulus (a division and a square root)
// only when max(|Re|, |Im|) < S_SFMIN; above, cmodulus(a) >= that max, so the answer is the same.
inline bool lu_use_recip(float a) { return fabs(a) >= S_SFMIN; }
inline bool lu_use_recip(float2 a) { return max(fabs(a.x), fabs(a.y)) >= S_SFMIN || cmodulus(a) >= S_SFMIN; }

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

// The simdgroup's winner by butterflies (every lane ends with it; no barrier).
inline void lu_pivot_simd(thread float& v, thread int& i) {
  for (ushort d = 16; d > 0; d >>= 1) {
    const float v2 = simd_shuffle_xor(v, d);
    const int i2 = simd_shuffle_xor(i, d);
    if (lu_pivot_beats(v2, i2, v, i)) {
      v = v2;
      i = i2;
    }
  }
}

// Threadgroup-wide winner of every thread's candidate (v, i) by lu_pivot_beats (a total order: the
// result is the sequential scan's), by simdgroup butterflies (no barrier) and one threadgroup
// round: every thread ends with the winner in (v, i). red_v / red_i need ntg / 32 entries; the leading barrier lets a
// caller reduce again right after a previous reduction.
inline void lu_pivot_reduce(threadgroup float* red_v, threadgroup int* red_i, thread float& v,
                                 thread int& i, uint tid, uint ntg) {
  lu_pivot_simd(v, i);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid % 32 == 0) {
    red_v[tid / 32] = v;
    red_i[tid / 32] = i;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  v = red_v[0];
  i = red_i[0];
  for (uint q = 1; q < ntg / 32; ++q) {
    if (lu_pivot_beats(red_v[q], red_i[q], v, i)) {
      v = red_v[q];
      i = red_i[q];
    }
  }
}

// ---- lu_panel ------------------------------------------------------------------------------------
//
// Right-looking unblocked LU (LAPACK getf2) of the panel rows [o, M) x columns [o, o + w) of each
// matrix. Row swaps touch only the panel's columns; the caller applies the pivots to the other
// columns with lu_laswp. Grid: threads = batch * G, group_size = G (a power of two,
// 32 <= G <= 256); the threadgroup index is the batch index. The pivot search is a strided scan
// followed by lu_pivot_reduce, both ordered by lu_pivot_beats: the result is the sequential
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
    const int p = (bi >= m) ? col : bi;
    const T pivot = a[p * n + col];
    // everyone has read red_* and the pivot before anything is overwritten
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
    //    rows at a time; no integer division per element. LU_PANEL_UNROLL rows per thread at once
    //    (all their loads before any store: one latency per group of rows, not one per row)
    const int lane = (int)(tid % LU_PANEL_LANES);
    const int rstep = (int)(ntg / LU_PANEL_LANES);
    int r = col + 1 + (int)(tid / LU_PANEL_LANES);
    for (; r + (LU_PANEL_UNROLL - 1) * rstep < m; r += LU_PANEL_UNROLL * rstep) {
      T l[LU_PANEL_UNROLL];
      for (int q = 0; q < LU_PANEL_UNROLL; ++q) {
        l[q] = a[(r + q * rstep) * n + col];
      }
      for (int c = col + 1 + lane; c < cend; c += (int)LU_PANEL_LANES) {
        const T u = a[col * n + c];
        T x[LU_PANEL_UNROLL];
        for (int q = 0; q < LU_PANEL_UNROLL; ++q) {
          x[q] = a[(r + q * rstep) * n + c];
        }
        for (int q = 0; q < LU_PANEL_UNROLL; ++q) {
          a[(r + q * rstep) * n + c] = x[q] - s_mul(l[q], u);
        }
      }
    }
    for (; r < m; r += rstep) {
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
// for each other inside a dispatch, so the host issues w' + 1 dispatches per panel, step = 0 .. w'
// (w' = min(M - o, w)); dispatch `step` does
//   A. (step > 0) finish column col = o + step - 1: every group reduces the G candidates of the
//      previous dispatch itself (same total order: the sequential scan's pivot, no atomics), takes
//      the pivot row and the old diagonal row from the candidate buffer (so no group reads rows
//      another group is writing), swaps them into its own rows, scales and does the rank-1 update
//      of its rows; group 0 writes piv and info;
//   B. (step < w') search column col + 1 in its own rows and publish its best candidate (value,
//      row, and that row's w panel entries), and the diagonal row's entries if it owns it.
// Candidate buffers alternate between two slots by step parity (read slot != written slot).
// Latency, not bandwidth, bounds a step: each thread loads its share of the group's block (element
// e = tid + k * ntg, k < LU_STEP_MAX_E, held in registers) together with the candidates, so a step
// costs two dependent rounds of loads (candidates + block, then the pivot row), not one per row.
// Same rules as lu_panel: first largest |Re| + |Im| (NaN first), zero pivot: no swap, no scaling,
// info; sfmin rule. Buffers (per matrix b): cand_v/cand_i [B, 2, G], cand_rows [B, 2, G + 1, w].
// Grid: threads = B * G * ntg, group_size = ntg (a power of two, 32 <= ntg <= 256); the host checks
// R * w <= ntg * LU_STEP_MAX_E and R <= LU_STEP_MAX_ROWS.
constant constexpr int LU_STEP_MAX_E = 16;
constant constexpr int LU_STEP_MAX_ROWS = 256;

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
  threadgroup T lmul[LU_STEP_MAX_ROWS];  // the multipliers of the group's rows
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
  const int ne = (rhi - rlo) * nw;  // elements of the group's block
  device float* cv = cand_v + (long)b * 2 * ng;
  device int* ci = cand_i + (long)b * 2 * ng;
  device T* crow = cand_rows + (long)b * 2 * (ng + 1) * nw;
  const int jc = st - 1;  // the column finished in phase A, relative to o (-1: none)
  const int col = c0 + jc;
  const int cmin = max(jc, 0);  // columns [0, cmin) of rows below col do not change in this step
  // the block's rows below col, columns >= cmin, into registers (all loads issued at once)
  // element k: row er[k] (absolute; -1 past the block's end), column ec[k] (relative to o),
  // stepped without a division per element
  T v[LU_STEP_MAX_E];
  int er[LU_STEP_MAX_E];
  int ec[LU_STEP_MAX_E];
  {
    const int dr = nt / nw;
    const int dc = nt % nw;
    int r = rlo + t / nw;
    int c = t % nw;
#pragma unroll
    for (int k = 0; k < LU_STEP_MAX_E; ++k) {
      const bool in = t + k * nt < ne;
      er[k] = in ? r : -1;
      ec[k] = c;
      v[k] = (in && r > col && c >= cmin) ? a[r * n + c0 + c] : s_zero<T>();
      r += dr;
      c += dc;
      if (c >= nw) {
        c -= nw;
        r += 1;
      }
    }
  }
  // phase A: the pivot of column col, then the swap, scaling and rank-1 update of the group's rows
  bool swap = false;
  int p = col;
  device const T* drow = crow;
  if (st > 0) {
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
    p = (bi >= m) ? col : bi;
    device const T* prow = crow + (long)(slot * (ng + 1) + (p - c0) / (int)R) * nw;
    drow = crow + (long)(slot * (ng + 1) + ng) * nw;
    const T pivot = prow[jc];
    const bool nonzero = !s_is_zero(pivot);
    swap = nonzero && p != col;
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
    // the multipliers: column jc of rows below col
#pragma unroll
    for (int k = 0; k < LU_STEP_MAX_E; ++k) {
      const int r = er[k];
      if (r > col && ec[k] == jc) {
        T l = (swap && r == p) ? drow[jc] : v[k];
        if (nonzero) {
          l = lu_scale(l, pivot, rp, recip);
        }
        v[k] = l;
        lmul[r - rlo] = l;
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
#pragma unroll
    for (int k = 0; k < LU_STEP_MAX_E; ++k) {
      const int r = er[k];
      const int c = ec[k];
      if (r > col && c > jc) {
        v[k] = ((swap && r == p) ? drow[c] : v[k]) - s_mul(lmul[r - rlo], urow[c]);
      }
    }
  }
  // phase B: the group's candidate for column o + st (rows >= o + st, updated values in v)
  if (st < kl) {
    const int cs = c0 + st;
    const int slot = st & 1;
    float best = -1.0f;
    int bi = m;
#pragma unroll
    for (int k = 0; k < LU_STEP_MAX_E; ++k) {
      const int r = er[k];
      if (r >= cs && ec[k] == st) {
        const float x = s_abs1(v[k]);
        if (lu_pivot_beats(x, r, best, bi)) {
          best = x;
          bi = r;
        }
      }
    }
    lu_pivot_reduce(red_v, red_i, best, bi, tid, ntg);
    const int win = bi;
    if (t == 0) {
      cv[slot * ng + g] = best;
      ci[slot * ng + g] = win;
    }
    // publish the winner's and the diagonal row's w entries: columns >= cmin from the registers,
    // the unchanged columns < cmin from A (or from the old diagonal row where it moves this step)
    device T* out = crow + (long)(slot * (ng + 1) + g) * nw;
    device T* dout = crow + (long)(slot * (ng + 1) + ng) * nw;
    const bool owns_diag = rlo <= cs && cs < rhi;
#pragma unroll
    for (int k = 0; k < LU_STEP_MAX_E; ++k) {
      const int r = er[k];
      const int c = ec[k];
      if (r >= 0 && c >= cmin) {
        if (r == win) {
          out[c] = v[k];
        }
        if (r == cs) {
          dout[c] = v[k];
        }
      }
    }
    for (int c = t; c < cmin; c += nt) {
      if (win < m) {
        out[c] = (swap && win == p) ? drow[c] : a[win * n + c0 + c];
      }
      if (owns_diag) {
        dout[c] = (swap && cs == p) ? drow[c] : a[cs * n + c0 + c];
      }
    }
  }
  // the group's changed entries back to A (rows below col; the swapped-in row's L part)
  if (st > 0) {
#pragma unroll
    for (int k = 0; k < LU_STEP_MAX_E; ++k) {
      const int r = er[k];
      const int c = ec[k];
      if (r > col) {
        if (c >= jc) {
          a[r * n + c0 + c] = v[k];
        } else if (swap && r == p) {
          a[r * n + c0 + c] = drow[c];
        }
      }
    }
  }
}

// ---- lu_panel_look -------------------------------------------------------------------------------
//
// KL columns of a tall panel per dispatch, still exactly LAPACK's partial pivoting: every group
// repeats the small LU of ALL active rows restricted to the KL columns (the pivot search needs
// every row, and repeating it costs (rows x KL^2) flops per group, far less than a dispatch), so the
// groups agree on the KL pivots without talking to each other; then each group applies the KL
// steps to its own rows. Groups may read any row, so the panel is double-buffered: the dispatch
// reads Sin and writes Sout ([B, M, ls] buffers holding the panel's w columns; cm = 1: [B, ls, M],
// column-major, TUNING.panel_colmajor), rows whose final
// position is known (the KL pivot rows; every row in the last dispatch) go straight to A. Each
// thread holds SLOTS / KL active rows x KL columns in registers, twice as many for float32 (the
// host picks KL so that the active rows fit: M - o - s <= ntg * slots / KL; SLOTS = 32 or 64, the
// register budget, a tuning choice: 64 complex values a thread fit the H200's 255 registers, and
// a tall panel's few groups leave most of a GPU's cores idle anyway). Same arithmetic, in the same order,
// as getf2, so the factors equal lu_panel's; same NaN, zero-pivot, info and sfmin rules.
// Dispatch for columns [s, s + kc) (relative to o, kc <= KL); grid: threads = B * G * ntg,
// group_size = ntg (a power of two, 32..256); group g owns positions [o + g*R, o + (g+1)*R).
// The panel's first dispatch (phase 1) reads A itself instead of a copy in Sin, so it writes every
// row to Sout, the final ones included (A's rows are still being read); the second dispatch (phase
// 2) then moves the rows made final by the first, positions [o, o + s), from its Sin to A. A panel
// done in one dispatch is copied to Sin first (phase 0: it writes A while reading).
// VAR = 1, MMA (float32, KL = 8 or 16 only): the trailing rows' update, own rows x KL times KL x w, as
// 8 x 8 products on Apple's matrix units (simdgroup_matrix) into a threadgroup tile, then
// subtracted (LAPACK's order: the product, then A - product) instead of KL sequential
// multiply-subtracts per entry; a tuning variant (TUNING.look_mma), see docs/ops/lu.md.
// VAR = 2, ROLL: the small LU's column loop rolled, one body for every column (lu_look_column;
// TUNING.look_roll): the unrolled kernels are 80-250 KB of sm_90 code, streamed through the
// instruction cache once a dispatch (the H200's stalls on instruction fetch: 35%).
constant constexpr int LU_LOOK_MAX_ROWS = 64;  // R: rows (positions) per group
constant constexpr int LU_LOOK_MAX_W = 64;     // panel width

// P (rows x LU_LOOK_MAX_W) = X (rows x kl, row stride kl) @ U (kl x LU_LOOK_MAX_W) for the row
// tiles < ntr and the column tiles >= ct0, one 8 x 8 tile per simdgroup at a time (float only;
// the float2 overload is never called: lu_panel_look's MMA variant exists for float32 only).
inline void lu_look_mma(threadgroup float* P, threadgroup const float* X, threadgroup const float* U, int kl,
                        int ntr, int ct0, int sg, int nsg) {
  const int nct = LU_LOOK_MAX_W / 8 - ct0;
  for (int tile = sg; tile < ntr * nct; tile += nsg) {  // uniform over the simdgroup
    const int I = tile / nct;
    const int J = ct0 + tile % nct;
    simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    for (int kt = 0; kt < kl; kt += 8) {
      simdgroup_float8x8 xa;
      simdgroup_float8x8 ub;
      simdgroup_load(xa, X, ulong(kl), ulong2(ulong(kt), ulong(8 * I)));
      simdgroup_load(ub, U, ulong(LU_LOOK_MAX_W), ulong2(ulong(8 * J), ulong(kt)));
      simdgroup_multiply_accumulate(acc, xa, ub, acc);
    }
    simdgroup_store(acc, P, ulong(LU_LOOK_MAX_W), ulong2(ulong(8 * J), ulong(8 * I)));
  }
}
inline void lu_look_mma(threadgroup float2*, threadgroup const float2*, threadgroup const float2*, int, int, int,
                        int, int) {}
inline float lu_look_sub(float v, threadgroup const float* P, int idx) { return v - P[idx]; }
inline float2 lu_look_sub(float2 v, threadgroup const float2*, int) { return v; }

// Step j of lu_panel_look's small LU (position cs + j, j < nk; threads hold RPT rows x KL columns
// in x, their positions in pos): the pivot and its row in two barriers (each simdgroup's best
// candidate by butterflies, whose lane publishes it with its row's KL entries; one threadgroup
// round picks the winner, the sequential scan's: lu_pivot_beats is a total order), the
// interchange, the scaling and the rank-1 update of the rows below. ROLL = false: column j is
// x[i * KL + j] (the caller unrolls j); ROLL = true: column j is x[i * KL], and every row rotates
// its KL entries one place left, the finished column (its L entry, or U's for pivot rows) going to
// the end, so after KL steps (steps j >= nk only rotate) x is back in column order and every step
// runs the same code. Same arithmetic in the same order either way. Always inlined: a call keeps x
// in local memory (clang did not inline the larger instances; H200 round 1: 1.6x slower at n = 4096).
template <typename T, int KL, int RPT, bool ROLL>
__attribute__((always_inline)) inline void lu_look_column(thread T (&x)[RPT * KL], thread int (&pos)[RPT], int j,
                                                          int nk, int cs, int m, int t, int nt,
                                                          threadgroup float* red_v, threadgroup int* red_i,
                                                          threadgroup T* red_row, bool writer, device int* pv,
                                                          thread int& first_zero) {
  if (j >= nk) {
    if (ROLL) {
#pragma unroll
      for (int i = 0; i < RPT; ++i) {
        const T head = x[i * KL];
#pragma unroll
        for (int q = 0; q < KL - 1; ++q) {
          x[i * KL + q] = x[i * KL + q + 1];
        }
        x[i * KL + KL - 1] = head;
      }
    }
    return;
  }
  const int jx = ROLL ? 0 : j;  // column j's place in a row of x
  const int cj = cs + j;
  float best = -1.0f;
  int bi = m;
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    if (pos[i] >= cj) {
      const float v = s_abs1(x[i * KL + jx]);
      if (lu_pivot_beats(v, pos[i], best, bi)) {
        best = v;
        bi = pos[i];
      }
    }
  }
  lu_pivot_simd(best, bi);
  threadgroup_barrier(mem_flags::mem_threadgroup);  // the previous column's reads are done
  const int sg = t / 32;
  if (t % 32 == 0) {
    red_v[sg] = best;
    red_i[sg] = bi;
  }
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    if (pos[i] == bi) {  // this simdgroup's best row is this lane's
#pragma unroll
      for (int q = 0; q < KL; ++q) {
        red_row[sg * KL + q] = x[i * KL + q];
      }
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  best = red_v[0];
  bi = red_i[0];
  int ws = 0;
  for (int q = 1; q < nt / 32; ++q) {
    if (lu_pivot_beats(red_v[q], red_i[q], best, bi)) {
      best = red_v[q];
      bi = red_i[q];
      ws = q;
    }
  }
  const int p = (bi >= m) ? cj : bi;  // bi < m: position cj < m is always a candidate
  threadgroup const T* pslice = red_row + ws * KL;  // the pivot row's KL entries (ROLL: from column j)
  const T pivot = pslice[jx];
  const bool nonzero = !s_is_zero(pivot);
  if (writer && t == 0) {
    pv[cj] = p + 1;
  }
  if (!nonzero && first_zero < 0) {
    first_zero = cj;
  }
  const bool recip = lu_use_recip(pivot);
  const T rp = lu_recip(pivot);
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    if (nonzero && p != cj) {  // the interchange of positions cj and p
      if (pos[i] == p) {
        pos[i] = cj;
      } else if (pos[i] == cj) {
        pos[i] = p;
      }
    }
    if (ROLL) {
      const bool below = pos[i] > cj;
      T l = x[i * KL];
      if (below && nonzero) {
        l = lu_scale(l, pivot, rp, recip);
      }
#pragma unroll
      for (int q = 0; q < KL - 1; ++q) {  // entries KL - 1 - j and on are earlier columns' L
        const T y = x[i * KL + q + 1];
        x[i * KL + q] = (below && q < KL - 1 - j) ? y - s_mul(l, pslice[q + 1]) : y;
      }
      x[i * KL + KL - 1] = l;
    } else if (pos[i] > cj) {
      T l = x[i * KL + j];
      if (nonzero) {
        l = lu_scale(l, pivot, rp, recip);
      }
      x[i * KL + j] = l;
#pragma unroll
      // a constant trip count (q > j tested inside), which clang unrolls before the j loop,
      // except complex64 k = 16, which spills so and not from j + 1 (sm_90, docs/ops/lu.md)
      for (int q = (sizeof(T) == 4 || KL < 16) ? 0 : j + 1; q < KL; ++q) {
        if (q > j) {
          x[i * KL + q] -= s_mul(l, pslice[q]);
        }
      }
    }
  }
}

template <typename T, int KL, int SLOTS, int VAR>
[[max_total_threads_per_threadgroup(256)]]  // = LU_PANEL_MAX_THREADS
kernel void lu_panel_look(device T* A [[buffer(0)]],
                          device const T* Sin [[buffer(1)]],
                          device T* Sout [[buffer(2)]],
                          device int* piv [[buffer(3)]],
                          device int* info [[buffer(4)]],
                          constant long& M [[buffer(5)]],
                          constant long& N [[buffer(6)]],
                          constant long& K [[buffer(7)]],
                          constant long& o [[buffer(8)]],
                          constant long& w [[buffer(9)]],
                          constant long& ls [[buffer(10)]],
                          constant long& s [[buffer(11)]],
                          constant long& kc [[buffer(12)]],
                          constant long& G [[buffer(13)]],
                          constant long& R [[buffer(14)]],
                          constant long& last [[buffer(15)]],
                          constant long& phase [[buffer(16)]],
                          constant long& cm [[buffer(17)]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint ntg [[threads_per_threadgroup]],
                          uint tg [[threadgroup_position_in_grid]]) {
  constexpr int RPT = SLOTS * (sizeof(T) == 4 ? 2 : 1) / KL;  // active rows per thread
  constexpr bool MMA = VAR == 1;   // the trailing update on the matrix units
  constexpr bool ROLL = VAR == 2;  // the small LU's column loop rolled (lu_look_column)
  threadgroup float red_v[LU_PANEL_MAX_THREADS];
  threadgroup int red_i[LU_PANEL_MAX_THREADS];
  threadgroup T red_row[LU_PANEL_MAX_THREADS / 32 * KL];  // each simdgroup's best row's KL entries
  threadgroup T pl[KL * KL];                   // the KL pivot rows' final KL entries
  threadgroup int porig[KL];                   // ... and their rows in Sin
  threadgroup T ub[KL * LU_LOOK_MAX_W];        // the KL rows of U beyond column s + kc
  threadgroup T own_x[LU_LOOK_MAX_ROWS * KL];  // the group's positions: their KL entries
  threadgroup T prod[MMA ? LU_LOOK_MAX_ROWS * LU_LOOK_MAX_W : 1];  // MMA: own_x @ ub
  threadgroup int own_src[LU_LOOK_MAX_ROWS];   // ... and their rows in Sin
  const int ng = (int)G;
  const int b = (int)(tg / (uint)ng);
  const int g = (int)(tg % (uint)ng);
  const int m = (int)M;
  const int n = (int)N;
  const int c0 = (int)o;
  const int nw = (int)w;
  const int s0 = (int)s;
  const int nk = (int)kc;
  const int cs = c0 + s0;  // first position of this dispatch
  const int t = (int)tid;
  const int nt = (int)ntg;
  const int rlo = c0 + g * (int)R;
  const int rhi = min(m, rlo + (int)R);
  device T* a = A + (long)b * M * N;
  const bool from_a = phase == 1;
  device const T* sin = from_a ? A + (long)b * M * N + c0 : Sin + (long)b * M * ls;
  // element (row r, column c) of the buffers at r * sr + c * sc: row-major [M, ls] or, cm != 0,
  // column-major [ls, M] (a warp's loads of one column are then one coalesced transaction)
  const int sr = cm != 0 ? 1 : (int)ls;
  const int sc = cm != 0 ? m : 1;
  const int ri = from_a ? n : sr;  // sin's strides (A itself is row-major)
  const int ci = from_a ? 1 : sc;
  device T* sout = Sout + (long)b * M * ls;
  if (phase == 2) {  // the first dispatch's final rows [c0, cs), from Sin to A (nobody reads them)
    for (int e = t; e < max(0, min(rhi, cs) - rlo) * (int)w; e += nt) {
      const int q = rlo + e / (int)w;
      const int c = e % (int)w;
      a[q * n + c0 + c] = sin[q * ri + c * ci];
    }
  }
  if (rhi <= cs) {
    return;  // every position of this group is final already (uniform over the group)
  }
  // 1. the small LU of every active row (positions >= cs) on columns [s, s + kc), in registers
  T x[RPT * KL];
  int pos[RPT];  // current position of the row held (-1: none); its row in Sin is cs + t + i * nt
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int r = cs + t + i * nt;
    pos[i] = r < m ? r : -1;
#pragma unroll
    for (int j = 0; j < KL; ++j) {
      x[i * KL + j] = (r < m && j < nk) ? sin[r * ri + (s0 + j) * ci] : s_zero<T>();
    }
  }
  const bool writer = rlo <= cs;  // the group owning position cs writes piv and info
  int first_zero = -1;
  device int* pv = piv + (long)b * K;
  if (ROLL) {
    // one loop body for every column (the registers rotate one column a step), small enough to
    // stay in the instruction cache; the unrolled form streams tens of KiB of code a dispatch
#pragma unroll 1
    for (int j = 0; j < KL; ++j) {
      lu_look_column<T, KL, RPT, true>(x, pos, j, nk, cs, m, t, nt, red_v, red_i, red_row, writer, pv, first_zero);
    }
  } else {
#pragma unroll
    for (int j = 0; j < KL; ++j) {
      lu_look_column<T, KL, RPT, false>(x, pos, j, nk, cs, m, t, nt, red_v, red_i, red_row, writer, pv, first_zero);
    }
  }
  if (writer && t == 0 && first_zero >= 0 && info[b] == 0) {
    info[b] = first_zero + 1;
  }
  // 2. publish the pivot rows' and the group's own rows' entries
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int q = pos[i];
    if (q >= cs && q < cs + nk) {
#pragma unroll
      for (int j = 0; j < KL; ++j) {
        pl[(q - cs) * KL + j] = x[i * KL + j];
      }
      porig[q - cs] = cs + t + i * nt;
    }
    if (q >= rlo && q < rhi) {
#pragma unroll
      for (int j = 0; j < KL; ++j) {
        own_x[(q - rlo) * KL + j] = (MMA && j >= nk) ? s_zero<T>() : x[i * KL + j];  // MMA: k-padding
      }
      own_src[q - rlo] = cs + t + i * nt;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  // 3. the pivot rows of U beyond the KL columns: U_j = Sin[porig_j] - sum_{i<j} l_ji U_i, in order
  //    (a thread's column in registers: its KL loads at once, no threadgroup round trip per term)
  const int cb = s0 + nk;  // first column beyond
  for (int c = cb + t; c < nw; c += nt) {
    T u[KL];
#pragma unroll
    for (int j = 0; j < KL; ++j) {
      u[j] = j < nk ? sin[porig[j] * ri + c * ci] : s_zero<T>();
    }
#pragma unroll
    for (int j = 0; j < KL; ++j) {
      if (j < nk) {
#pragma unroll
        for (int i = 0; i < j; ++i) {
          u[j] -= s_mul(pl[j * KL + i], u[i]);
        }
        ub[j * LU_LOOK_MAX_W + c] = u[j];
      }
    }
  }
  if (MMA) {  // the product's k-padding rows of ub are zero (own_x's padding columns are too)
    for (int e = t; e < (KL - nk) * LU_LOOK_MAX_W; e += nt) {
      ub[nk * LU_LOOK_MAX_W + e] = s_zero<T>();
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (MMA) {
    lu_look_mma(prod, own_x, ub, KL, (rhi - rlo + 7) / 8, cb / 8, t / 32, nt / 32);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  // 4. the group's positions >= cs: every column, to A (final rows) or to Sout (rows still active);
  //    consecutive threads take consecutive columns of a row (A, row-major buffers) or consecutive
  //    rows of a column (column-major buffers, unless every row goes to A)
  const int qlo = max(rlo, cs);
  const int nq = rhi - qlo;
  const bool by_rows = cm != 0 && last == 0;
  for (int e = t; e < nq * nw; e += nt) {
    const int q = qlo + (by_rows ? e % nq : e / nw);
    const int c = by_rows ? e / nq : e % nw;
    const int k = q - rlo;
    const int src = own_src[k];
    T v;
    if (c < s0) {
      v = sin[src * ri + c * ci];  // L entries of earlier columns move with the row
    } else if (c < cb) {
      v = own_x[k * KL + (c - s0)];
    } else if (q < cs + nk) {
      v = ub[(q - cs) * LU_LOOK_MAX_W + c];
    } else {
      v = sin[src * ri + c * ci];
      if (MMA) {
        v = lu_look_sub(v, prod, k * LU_LOOK_MAX_W + c);
      } else {
#pragma unroll
        for (int j = 0; j < KL; ++j) {
          if (j < nk) {
            v -= s_mul(own_x[k * KL + j], ub[j * LU_LOOK_MAX_W + c]);
          }
        }
      }
    }
    if ((q < cs + nk && !from_a) || last != 0) {
      a[q * n + c0 + c] = v;
    } else {
      sout[q * sr + c * sc] = v;
    }
  }
}

// ---- lu_panel_regs -------------------------------------------------------------------------------
//
// The panel contract (rows [o, M) x columns [o, o + w), w <= LU_REGS_W) by ONE threadgroup per
// matrix with the whole panel in registers: thread t holds the rows o + t + i * ntg (i < RPT,
// RPT = SLOTS / LU_REGS_W rows, twice as many for float32; the host checks M - o <= ntg * RPT),
// and the small LU runs as lu_panel_look's rolled column loop (lu_look_column: two barriers a
// column, no device-memory round trip) before each row is written to its final position. Same
// pivots, arithmetic, NaN, zero-pivot, info and sfmin rules as lu_panel. Grid: threads = B * ntg,
// group_size = ntg (a power of two, 32..256).
constant constexpr int LU_REGS_W = 32;

template <typename T, int SLOTS>
[[max_total_threads_per_threadgroup(256)]]  // = LU_PANEL_MAX_THREADS
kernel void lu_panel_regs(device T* A [[buffer(0)]],
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
  constexpr int RPT = SLOTS * (sizeof(T) == 4 ? 2 : 1) / LU_REGS_W;
  threadgroup float red_v[LU_PANEL_MAX_THREADS];
  threadgroup int red_i[LU_PANEL_MAX_THREADS];
  threadgroup T red_row[LU_PANEL_MAX_THREADS / 32 * LU_REGS_W];
  const int m = (int)M;
  const int n = (int)N;
  const int c0 = (int)o;
  const int nw = (int)w;
  const int t = (int)tid;
  const int nt = (int)ntg;
  device T* a = A + (long)b * M * N + c0;  // 64-bit base offset; 32-bit inside the matrix
  T x[RPT * LU_REGS_W];
  int pos[RPT];  // current position of the row held (-1: none)
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int r = c0 + t + i * nt;
    pos[i] = r < m ? r : -1;
#pragma unroll
    for (int j = 0; j < LU_REGS_W; ++j) {
      x[i * LU_REGS_W + j] = (r < m && j < nw) ? a[r * n + j] : s_zero<T>();
    }
  }
  int first_zero = -1;
  const int kl = min(m - c0, nw);
#pragma unroll 1
  for (int j = 0; j < LU_REGS_W; ++j) {
    lu_look_column<T, LU_REGS_W, RPT, true>(x, pos, j, kl, c0, m, t, nt, red_v, red_i, red_row, true,
                                            piv + (long)b * K, first_zero);
  }
  if (t == 0 && first_zero >= 0 && info[b] == 0) {
    info[b] = first_zero + 1;
  }
  threadgroup_barrier(mem_flags::mem_device);  // every row of the panel is read before any is written
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    if (pos[i] >= 0) {
#pragma unroll
      for (int j = 0; j < LU_REGS_W; ++j) {
        if (j < nw) {
          a[pos[i] * n + j] = x[i * LU_REGS_W + j];
        }
      }
    }
  }
}

// ---- small LU in registers (lu_small, lu_small_solve) --------------------------------------------
//
// W lanes per matrix (W = 8, 16 or 32: 32 / W matrices per simdgroup); lane r of a segment holds
// row r of its matrix in registers (W columns, zero padded) and never gives it away. LAPACK's
// interchange of rows j and p becomes an exchange of two *positions*: every lane tracks the
// position `pos` its row has after the interchanges so far, so a swap moves no data. Per column j:
// the pivot search finds the largest pivot key, then the smallest position holding it (W = 32:
// simd_max then simd_min; W < 32: one simd_shuffle_xor butterfly of (key, position) pairs inside
// the segment), the pivot row's lane
// publishes it in a small threadgroup buffer of the segment (one simdgroup barrier per column,
// no threadgroup barrier), and every row below the pivot scales and updates itself. The
// arithmetic is the sequential getf2's, operation for operation (same pivots, multipliers and
// updates as LAPACK's order of operations without FMA contraction).
//
// Grid: threads = ceil(batch * W / G) * G with G = 32 * LU_SMALL_SIMDGROUPS threads per group (whole
// simdgroups; lanes of matrices past the batch compute on zeros and store nothing). STAGE = 1
// moves device memory through a threadgroup tile (LU_SMALL_LD-strided rows, one region per
// simdgroup, ordered by simdgroup barriers) so that loads and stores are coalesced; STAGE = 0
// reads and writes each lane's row directly (strided across the lanes).

// Threadgroup shape of lu_small / lu_small_solve, and the staging tile's row stride (odd: the
// lanes read distinct rows without bank conflicts; 32 + 7 columns: the rolled loop's FREE variant
// stores a register window of up to 7 junk columns past a row's end; complex64: 22 KB a group, so
// 10 groups of 2 simdgroups still fit an H200 SM's 228 KB).
constant constexpr int LU_SMALL_SIMDGROUPS = 2;
constant constexpr int LU_SMALL_LD = 39;

// Matrices of this simdgroup present in the batch (rem = batch - its first matrix).
inline int lu_small_count(long rem, int per) { return rem <= 0 ? 0 : (rem < per ? (int)rem : per); }

// Pivot key of |Re| + |Im| (>= 0 or NaN): unsigned order = LAPACK's pivot order (lu_pivot_beats):
// the bits of a non-negative float grow with its value, every NaN maps to 0x7FC00000 above inf.
inline uint lu_pivot_key(float v) { return isnan(v) ? 0x7FC00000u : as_type<uint>(v); }

// The pivot of a whole simdgroup: the winning lane's ~nidx-coded row with the largest key, the first
// row on ties (i?amax), from two of the simdgroup's own reductions (hardware ones on Apple GPUs):
// best = simd_max(key), passed in so that a caller can start it before other work.
// A lane without a candidate passes nidx = 0; the result is ~0u when no lane has one.
__attribute__((always_inline)) inline uint lu_simd_pivot(uint key, uint nidx, uint best) {
  return simd_min((nidx != 0u && key == best) ? ~nidx : ~0u);
}

// Butterfly over the W aligned lanes of a segment: the lexicographic maximum of (x.x, x.y), which
// every lane gets (a total order over distinct pairs: the same winner whatever the lane order).
// One reduction of pairs instead of a max and then a min: half the dependent shuffle steps.
template <int W>
inline uint2 lu_seg_argmax(uint2 x) {
#pragma unroll
  for (ushort d = W / 2; d > 0; d >>= 1) {
    const uint2 y = simd_shuffle_xor(x, d);
    if (y.x > x.x || (y.x == x.x && y.y > x.y)) {
      x = y;
    }
  }
  return x;
}

// Copy `rows` consecutive rows of width w (row-major, contiguous: the simdgroup's matrices) from
// device memory into the tile (row R at tl[R * LU_SMALL_LD]) and back: consecutive lanes touch
// consecutive addresses; the (row, column) index advances by 32 without a division per element.
template <typename T>
inline void lu_stage_in(threadgroup T* tl, device const T* src, int rows, int w, int lane) {
  int R = lane / w, c = lane % w;
  const int dR = 32 / w, dc = 32 % w;
  for (int t = lane; t < rows * w; t += 32) {
    tl[R * LU_SMALL_LD + c] = src[t];
    R += dR;
    c += dc;
    if (c >= w) {
      c -= w;
      ++R;
    }
  }
}
template <typename T>
inline void lu_stage_out(device T* dst, threadgroup const T* tl, int rows, int w, int lane) {
  int R = lane / w, c = lane % w;
  const int dR = 32 / w, dc = 32 % w;
  for (int t = lane; t < rows * w; t += 32) {
    dst[t] = tl[R * LU_SMALL_LD + c];
    R += dR;
    c += dc;
    if (c >= w) {
      c -= w;
      ++R;
    }
  }
}

// The same for a full tile (32 * W elements: 32 / W matrices of W x W), fully unrolled: every
// load is in flight before the first store, and no index arithmetic per element (the loop above
// waits for each group of loads and spends ~8 instructions per element on its indices).
template <typename T, int W>
__attribute__((always_inline)) inline void lu_stage_in_full(threadgroup T* tl, device const T* src, int lane) {
  T v[W];
#pragma unroll
  for (int i = 0; i < W; ++i) {
    v[i] = src[lane + 32 * i];
  }
#pragma unroll
  for (int i = 0; i < W; ++i) {
    tl[(i * (32 / W) + lane / W) * LU_SMALL_LD + lane % W] = v[i];
  }
}
template <typename T, int W>
__attribute__((always_inline)) inline void lu_stage_out_full(device T* dst, threadgroup const T* tl, int lane) {
#pragma unroll
  for (int i = 0; i < W; ++i) {
    dst[lane + 32 * i] = tl[(i * (32 / W) + lane / W) * LU_SMALL_LD + lane % W];
  }
}

// One lane's row (width w <= C) into registers: from the tile row R (STAGE) or from device memory.
// These helpers and lu_regs_getf2 are forced inline: a call would pass the register rows through
// local memory (clang left lu_regs_getf2 out of line at W = 32).
template <typename T, int C>
__attribute__((always_inline)) inline void lu_row_in(thread T (&x)[C], bool have, threadgroup const T* tl, int R,
                                                    device const T* row, int w, bool staged) {
#pragma unroll
  for (int c = 0; c < C; ++c) {
    x[c] = (have && c < w) ? (staged ? tl[R * LU_SMALL_LD + c] : row[c]) : s_zero<T>();
  }
}
template <typename T, int C>
__attribute__((always_inline)) inline void lu_row_out(thread const T (&x)[C], bool have, threadgroup T* tl, int R,
                                                     device T* row, int w, bool staged) {
  if (have) {
#pragma unroll
    for (int c = 0; c < C; ++c) {
      if (c < w) {
        if (staged) {
          tl[R * LU_SMALL_LD + c] = x[c];
        } else {
          row[c] = x[c];
        }
      }
    }
  }
}

// getf2 of the segment's matrix, rows in registers. The segment is L = W / R lanes (R = 1 or 2);
// lane s of it holds row s of its m x n matrix in a0 and, for R = 2, row s + L in a1 (W columns,
// zero padded; rows past m are not candidates), their right-hand sides in x0 / x1 (KC registers,
// zero padded; updated with the row, as the columns of [A | B]). Returns the first zero pivot
// (1-based; 0: none), sets pos[k] to row k's final position, my_piv[k] to the 1-based pivot of step
// s + k * L (rows < min(m, n)), and wl_of[j] to the lane holding position j after step j (R = 1).
// bc: the segment's two broadcast rows (2 * LU_BC_LEN(W, KC) elements of threadgroup memory): the
// pivot row's lane publishes its row there with 1 / pivot and the sfmin test (computed once, by
// that lane), and the other lanes read it (two plain accesses per element where a simd_shuffle
// costs several instructions on the cuda proxy); two buffers, alternating by column, need one
// simdgroup barrier per column (a lane overwrites buffer j % 2 at column j only after the barrier
// of column j - 1, which every lane passes after its reads of column j - 2).
// R = 2 halves the work per matrix that does not depend on its size (pivot search, publication,
// barrier, reciprocal: per column and simdgroup) by giving a simdgroup two 32 x 32 matrices instead
// of one; each row's arithmetic is the same, operation for operation. The two rows are separate
// arrays: clang keeps an array of more than 32 elements in memory (SROA's slice limit).
// Elements of one broadcast row: W columns, KC right-hand sides, the reciprocal, the sfmin flag.
#define LU_BC_LEN(W, KC) ((W) + (KC) + 2 + ((KC) == 0))
// Registers of a lane's right-hand sides: KC (lu_small has KC = 0 and passes one unused register).
#define LU_RHS_LEN(KC) ((KC) > 0 ? (KC) : 1)

// Row k's bid for the pivot of column j: the pair (key, ~(position * 32 + s)), or (0, 0) when the
// row is not a candidate; kept if it beats (key, nidx) in lexicographic order.
template <typename T, int W>
__attribute__((always_inline)) inline void lu_row_bid(thread const T (&a)[W], int pos, int s, int j, int m,
                                                      thread uint& key, thread uint& nidx) {
  const bool cand = pos >= j && pos < m;
  const uint kk = cand ? lu_pivot_key(s_abs1(a[j])) : 0u;
  const uint ni = cand ? ~(uint)(pos * 32 + s) : 0u;
  if (kk > key || (kk == key && ni > nidx)) {
    key = kk;
    nidx = ni;
  }
}

// The pivot row's lane: its row from column j, its right-hand sides, 1 / pivot (rp, computed
// before) and the sfmin flag.
template <typename T, int W, int KC>
__attribute__((always_inline)) inline void lu_row_publish(thread const T (&a)[W], thread const T (&x)[LU_RHS_LEN(KC)],
                                                          int j, T rp, threadgroup T* prow) {
#pragma unroll
  for (int c = j; c < W; ++c) {
    prow[c] = a[c];
  }
#pragma unroll
  for (int c = 0; c < KC; ++c) {
    prow[W + c] = x[c];
  }
  prow[W + KC] = rp;
  prow[W + KC + 1] = lu_use_recip(a[j]) ? s_one<T>() : s_zero<T>();
}

// a - l * u rounded once per operation (FMA = 0: getf2's operations, as the sequential reference),
// or with fused multiply-adds (FMA = 1: one rounding per real product-sum; complex: four fma
// instead of four products and four sums).
template <int FMA>
inline float lu_sub_mul(float a, float l, float u) { return FMA ? fma(-l, u, a) : a - l * u; }
template <int FMA>
inline float2 lu_sub_mul(float2 a, float2 l, float2 u) {
  return FMA ? float2(fma(-l.x, u.x, fma(l.y, u.y, a.x)), fma(-l.x, u.y, fma(-l.y, u.x, a.y)))
             : a - cmul(l, u);
}

// Step j for one row (original index r) once the pivot row (position p) is published: its pivot
// record, the interchange of positions j and p, the scaling below the pivot (LAPACK's sfmin rule)
// and the rank-1 update. The padding columns (n..W-1, k..KC-1: zeros at the start) are updated
// too, unguarded: they are never a pivot column and never stored, and a guard per column costs
// more than the product it skips when n = W.
template <typename T, int W, int KC, int FMA>
__attribute__((always_inline)) inline void lu_row_step(thread T (&a)[W], thread T (&x)[LU_RHS_LEN(KC)], thread int& pos,
                                                       thread int& my_piv, int r, int j, int p, int m, T pivot,
                                                       threadgroup const T* prow) {
  if (r == j) {
    my_piv = p + 1;
  }
  if (pos == j) {
    pos = p;
  } else if (pos == p) {
    pos = j;
  }
  const bool below = pos > j && pos < m;
  if (below && !s_is_zero(pivot)) {
    a[j] = lu_scale(a[j], pivot, prow[W + KC], !s_is_zero(prow[W + KC + 1]));
  }
  if (below) {
#pragma unroll
    for (int c = j + 1; c < W; ++c) {
      a[c] = lu_sub_mul<FMA>(a[c], a[j], prow[c]);
    }
#pragma unroll
    for (int c = 0; c < KC; ++c) {
      x[c] = lu_sub_mul<FMA>(x[c], a[j], prow[W + c]);
    }
  }
}

template <typename T, int W, int KC, int R, int FMA>
__attribute__((always_inline)) inline int lu_regs_getf2(thread T (&a0)[W], thread T (&x0)[LU_RHS_LEN(KC)],
                                                        thread T (&a1)[W], thread T (&x1)[LU_RHS_LEN(KC)], int m,
                                                        int n, int s, ushort lane,
                                                        thread int (&pos)[R], thread int (&my_piv)[R],
                                                        thread ushort (&wl_of)[W], threadgroup T* bc) {
  constexpr int L = W / R;  // lanes per matrix
  const ushort base = lane & (ushort)~(L - 1);
  const int kmin = min(m, n);
  int info = 0;
#pragma unroll
  for (int k = 0; k < R; ++k) {
    pos[k] = s + k * L;
    my_piv[k] = 0;
  }
#pragma unroll
  for (int j = 0; j < W; ++j) {
    if (j >= kmin) {
      continue;  // uniform: m, n are the dispatch's (no break: the loop must unroll fully)
    }
    // 1. pivot: the largest key among positions j..m-1, then the smallest position holding it
    //    (the lane's own best row first when R = 2, then the segment's)
    uint key = 0u, nidx = 0u;
    lu_row_bid(a0, pos[0], s, j, m, key, nidx);
    const uint nidx0 = nidx;
    if (R == 2) {
      lu_row_bid(a1, pos[R - 1], s, j, m, key, nidx);
    }
    // 1 / pivot of the lane's own bid, by every lane while the reduction runs (off the column's
    // critical path; the pivot lane publishes its own: the same operations on the same value). A
    // lane without a candidate row takes 1 (no slow path of the reciprocal).
    const bool second = R == 2 && nidx != nidx0;
    const T mine = nidx == 0u ? s_one<T>() : (second ? a1[j] : a0[j]);
    const T rp = lu_recip(mine);
    uint win;
    if (L == 32) {  // the whole simdgroup: two of its own reductions (hardware ones on Apple GPUs)
      win = lu_simd_pivot(key, nidx, simd_max(key));
    } else {
      win = ~lu_seg_argmax<L>(uint2(key, nidx)).y;
    }
    const int p = (int)(win >> 5);
    const ushort wl = base + (ushort)(win & 31u);
    wl_of[j] = wl;
    threadgroup T* prow = bc + (j & 1) * LU_BC_LEN(W, KC);
    if (lane == wl) {  // 2. publish the pivot row
      if (!second) {
        lu_row_publish<T, W, KC>(a0, x0, j, rp, prow);
      } else {
        lu_row_publish<T, W, KC>(a1, x1, j, rp, prow);
      }
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    const T pivot = prow[j];
    if (s_is_zero(pivot) && info == 0) {
      info = j + 1;  // a zero pivot means a zero column: p == j, nothing is swapped or scaled
    }
    // 3. interchange, scale, update
    lu_row_step<T, W, KC, FMA>(a0, x0, pos[0], my_piv[0], s, j, p, m, pivot, prow);
    if (R == 2) {
      lu_row_step<T, W, KC, FMA>(a1, x1, pos[R - 1], my_piv[R - 1], s + L, j, p, m, pivot, prow);
    }
  }
  return info;
}

// ---- lu_small's column loop rolled (OPT bit 2; W = 32, one row per lane) -------------------------
//
// One loop body per phase instead of 32 unrolled columns: complex64's unrolled kernel is ~300 KB of
// sm_90 code, each instruction run once per matrix, and the H200 stalled 42% of its cycles on
// instruction fetch. The row rotates one place left per step inside a window of WR registers:
// column j is always a[0], the finished entry (the row's multiplier, or U's diagonal for the pivot
// row) goes to a[WR - 1]. The phases (WR = 32, 24, 16, 8 for columns 0-7, 8-15, 16-23, 24-31)
// keep a step's work near the columns it has left; after them column c sits in register
// lu_roll_reg(c) (blocks of 8 in reverse order). Step j updates the real columns a[1 .. 31 - j]
// of the rows below the pivot (the entries rotated in behind them stay): the same operations as
// lu_row_step; steps past min(m, n) only rotate.
// Variants (OPT bits besides 1 = fma; 4 and 8 keep the operations on the real columns):
//   4 (FREE, STAGE = 1): finished values leave the registers for the lane's own row of the staging
//     tile (free after the load; the rows go back to device memory from there): a row below the
//     pivot stores its multiplier each step, the pivot row publishes its U row straight into its
//     tile row (columns j .. j + WR - 1: up to 7 junk columns past the row's end, in the stride's
//     padding) and is done. No register then holds anything a later step must keep, so every lane
//     updates its whole window unguarded: no per-element test and select, and no register moves
//     (a guarded rotation costs a move per register per step);
//   8 (LOOK): step j updates column j + 1 first and starts that column's pivot search (the two
//     simdgroup reductions) before the rest of its update, which then hides their latency; the
//     winner and the lane's reciprocal carry over to step j + 1;
//   16 (RCP1, complex): 1 / pivot with one division instead of three (lu_recip_1div): not the
//     unrolled loop's bits, LAPACK's contract (pivots, info, backward error) as the fma variant.
inline constexpr int lu_roll_reg(int c) { return (3 - c / 8) * 8 + c % 8; }

// 1 / b with one division (OPT bit 16, complex): conj(b') / |b'|^2 for b' = b 2^-e, e the exponent
// of max(|Re b|, |Im b|) (an exact scaling: |b'|^2 in [1, 8) neither overflows nor underflows),
// then times 2^-e. Relative error a few u, like Smith's three divisions (lu_recip), so not its
// bits; non-finite b gives NaN as lu_recip. Only used for |b| >= the smallest normal (lu_use_recip:
// smaller pivots are divided by), where 2^-e is a normal number (clamped at 2^-126 for e = 127).
inline float lu_recip_1div(float a) { return lu_recip(a); }
inline float2 lu_recip_1div(float2 a) {
  const uint eb = min(as_type<uint>(max(fabs(a.x), fabs(a.y))) & 0x7F800000u, 0x7E800000u);
  const float k = as_type<float>(0x7F000000u - eb);
  const float x = a.x * k, y = a.y * k;
  const float id = 1.0f / fma(x, x, y * y);
  return s_isfinite(a) ? float2(x * id * k, -y * id * k) : s_nan<float2>();
}

// Row `pos`'s bid for the pivot of column j (value v), as lu_row_bid: the winner's code in win
// (lu_simd_pivot) and the lane's 1 / v in rp, computed while the reductions run (the largest key's
// reduction is started first; the pivot lane publishes its own rp; a lane without a candidate takes
// 1: no slow path of the reciprocal). RCP1: lu_recip_1div.
template <typename T, bool RCP1>
__attribute__((always_inline)) inline void lu_roll_bid(T v, int pos, int s, int j, int m, thread uint& win,
                                                       thread T& rp) {
  const bool cand = pos >= j && pos < m;
  const uint key = cand ? lu_pivot_key(s_abs1(v)) : 0u;
  const uint nidx = cand ? ~(uint)(pos * 32 + s) : 0u;
  const uint best = simd_max(key);
  rp = RCP1 ? lu_recip_1div(cand ? v : s_one<T>()) : lu_recip(cand ? v : s_one<T>());
  win = lu_simd_pivot(key, nidx, best);
}

template <typename T, int WR, int OPT>
__attribute__((always_inline)) inline void lu_roll_phase(thread T (&a)[32], int j0, int kmin, int m, int s,
                                                         ushort lane, thread int& pos, thread int& my_piv,
                                                         thread int& info, threadgroup T* bc,
                                                         threadgroup T* trow, thread uint& win, thread T& rp) {
  constexpr int FMA = OPT & 1;
  constexpr bool FREE = (OPT & 4) != 0;
  constexpr bool LOOK = (OPT & 8) != 0;
  constexpr bool RCP1 = (OPT & 16) != 0;
#pragma unroll 1
  for (int j = j0; j < j0 + 8; ++j) {
    const T head = a[0];
    if (FREE && j >= kmin) {  // uniform: no step left, every finished value is in the tile
      break;
    }
    if (j < kmin) {  // uniform
      if (!LOOK) {
        lu_roll_bid<T, RCP1>(head, pos, s, j, m, win, rp);
      }
      const int p = (int)(win >> 5);
      // the pivot row from column j (FREE: in its lane's tile row), then 1 / pivot and the sfmin flag
      threadgroup T* prow = FREE ? trow + ((int)(win & 31u) - s) * LU_SMALL_LD + j : bc + (j & 1) * LU_BC_LEN(32, 0);
      threadgroup T* pext = FREE ? bc + (j & 1) * 2 : prow + 32;
      if (lane == (ushort)(win & 31u)) {
#pragma unroll
        for (int c = 0; c < WR; ++c) {
          prow[c] = a[c];
        }
        pext[0] = rp;
        pext[1] = lu_use_recip(head) ? s_one<T>() : s_zero<T>();
      }
      simdgroup_barrier(mem_flags::mem_threadgroup);
      const T pivot = prow[0];
      if (s_is_zero(pivot) && info == 0) {
        info = j + 1;
      }
      if (s == j) {
        my_piv = p + 1;
      }
      if (pos == j) {
        pos = p;
      } else if (pos == p) {
        pos = j;
      }
      const bool below = pos > j && pos < m;
      T l = head;
      if (below && !s_is_zero(pivot)) {
        l = lu_scale(head, pivot, pext[0], !s_is_zero(pext[1]));
      }
      if (FREE && below) {
        trow[j] = l;
      }
      constexpr int c0 = LOOK ? 2 : 1;  // LOOK: column j + 1 (c = 1) done first, below
      if (LOOK) {
        a[0] = ((below || FREE) && (FREE || 1 < 32 - j)) ? lu_sub_mul<FMA>(a[1], l, prow[1]) : a[1];
        lu_roll_bid<T, RCP1>(a[0], pos, s, j + 1, m, win, rp);
      }
#pragma unroll
      for (int c = c0; c < WR; ++c) {
        a[c - 1] = ((below || FREE) && (FREE || c < 32 - j)) ? lu_sub_mul<FMA>(a[c], l, prow[c]) : a[c];
      }
      a[WR - 1] = l;
    } else {
#pragma unroll
      for (int c = 1; c < WR; ++c) {
        a[c - 1] = a[c];
      }
      a[WR - 1] = head;
    }
  }
}

// The whole rolled factorization of a lane's row (the four phases, then column order again: from
// the registers, or FREE from the lane's tile row trow); tmp: scratch registers. Returns info.
// Chosen by overload on lu_roll_tag: the other overload (no rolled loop, or W < 32) is never called.
template <bool ROLL, int OPT>
struct lu_roll_tag {};
template <typename T, int W, int OPT>
__attribute__((always_inline)) inline int lu_roll_getf2(thread T (&)[W], thread T (&)[W], int, int, int, ushort,
                                                        thread int&, thread int&, threadgroup T*, threadgroup T*,
                                                        lu_roll_tag<false, OPT>) {
  return 0;
}
template <typename T, int OPT>
__attribute__((always_inline)) inline int lu_roll_getf2(thread T (&a)[32], thread T (&tmp)[32], int k, int m, int s,
                                                        ushort lane, thread int& pos, thread int& my_piv,
                                                        threadgroup T* bc, threadgroup T* trow,
                                                        lu_roll_tag<true, OPT>) {
  int info = 0;
  my_piv = 0;
  uint win = 0u;
  T rp = s_one<T>();
  if ((OPT & 8) != 0 && k > 0) {
    lu_roll_bid<T, (OPT & 16) != 0>(a[0], pos, s, 0, m, win, rp);  // LOOK: column 0's search (later ones run a step early)
  }
  lu_roll_phase<T, 32, OPT>(a, 0, k, m, s, lane, pos, my_piv, info, bc, trow, win, rp);
  lu_roll_phase<T, 24, OPT>(a, 8, k, m, s, lane, pos, my_piv, info, bc, trow, win, rp);
  lu_roll_phase<T, 16, OPT>(a, 16, k, m, s, lane, pos, my_piv, info, bc, trow, win, rp);
  lu_roll_phase<T, 8, OPT>(a, 24, k, m, s, lane, pos, my_piv, info, bc, trow, win, rp);
  if ((OPT & 4) != 0) {
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      a[c] = trow[c];
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);  // every lane's read of its row before the tile's next writes
    return info;
  }
#pragma unroll
  for (int c = 0; c < 32; ++c) {
    tmp[c] = a[lu_roll_reg(c)];  // back in column order (a register renaming)
  }
#pragma unroll
  for (int c = 0; c < 32; ++c) {
    a[c] = tmp[c];
  }
  return info;
}

// Rows between device memory and registers for a simdgroup of lu_small: its matrices b0 .. b0 +
// cnt - 1 (contiguous, m x w each); lane (q, s) holds row s (x0) and, R = 2, row s + L (x1) of
// matrix b0 + q. STAGE: through the simdgroup's 32-row tile, 32 / W matrices at a time (R rounds),
// consecutive lanes on consecutive addresses; else each lane's rows directly. dir: 0 in, 1 out
// (out: row k is stored at position pos[k]).
template <typename T, int W, int R, int STAGE>
__attribute__((always_inline)) inline void lu_rows_move(thread T (&x0)[W], thread T (&x1)[W], int dir,
                                                        threadgroup T* tl, device T* first, int cnt, int m, int w,
                                                        int q, int s, thread const int (&pos)[R], ushort lane) {
  constexpr int L = W / R;
  constexpr int PER = 32 / W;  // matrices per tile round
#pragma unroll
  for (int t = 0; t < R; ++t) {
    const int lo = t * PER;  // this round's first matrix
    const int n_r = min(cnt - lo, PER);
    if (n_r <= 0) {
      continue;  // uniform over the simdgroup
    }
    const bool full = n_r == PER && m == W && w == W;  // uniform over the simdgroup
    if (STAGE && dir == 0) {
      if (full) {
        lu_stage_in_full<T, W>(tl, first + (long)lo * m * w, (int)lane);
      } else {
        lu_stage_in(tl, first + (long)lo * m * w, n_r * m, w, (int)lane);
      }
      simdgroup_barrier(mem_flags::mem_threadgroup);
    }
    const bool mine = q >= lo && q < lo + n_r;
#pragma unroll
    for (int k = 0; k < R; ++k) {
      const int r = dir == 0 ? s + k * L : pos[k];
      const bool have = mine && (s + k * L) < m;
      device T* row = first + ((long)q * m + r) * w;
      const int tr = (q - lo) * m + r;
      if (dir == 0) {
        if (mine || t == 0) {  // round 0 also zeroes the rows no round loads
          lu_row_in(k == 0 ? x0 : x1, have, tl, tr, row, w, STAGE != 0);
        }
      } else {
        lu_row_out(k == 0 ? x0 : x1, have, tl, tr, row, w, STAGE != 0);
      }
    }
    if (STAGE) {
      simdgroup_barrier(mem_flags::mem_threadgroup);  // the tile's reads before its next writes
      if (dir == 1) {
        if (full) {
          lu_stage_out_full<T, W>(first + (long)lo * m * w, tl, (int)lane);
        } else {
          lu_stage_out(first + (long)lo * m * w, tl, n_r * m, w, (int)lane);
        }
        simdgroup_barrier(mem_flags::mem_threadgroup);
      }
    }
  }
}

// ---- lu_small ------------------------------------------------------------------------------------
//
// Whole-matrix LU of M x N matrices with M, N <= W (LAPACK getf2: whole rows are interchanged, so
// no lu_laswp is needed afterwards), R rows per lane (32 * R / W matrices per simdgroup). info[b]
// is written: 0 or the first zero pivot (1-based).
// OPT: bit 1 fused multiply-adds in the update (lu_sub_mul), bit 2 the rolled column loop
// (lu_roll_phase; W = 32, R = 1), with bit 4 its finished values through the tile (STAGE = 1),
// bit 8 its look-ahead pivot search, bit 16 its one-division reciprocal.
template <typename T, int W, int STAGE, int R, int OPT>
[[max_total_threads_per_threadgroup(64)]]  // = 32 * LU_SMALL_SIMDGROUPS
kernel void lu_small(device T* A [[buffer(0)]],
                     device int* piv [[buffer(1)]],
                     device int* info [[buffer(2)]],
                     constant long& M [[buffer(3)]],
                     constant long& N [[buffer(4)]],
                     constant long& batch [[buffer(5)]],
                     uint gid [[thread_position_in_grid]],
                     ushort lane [[thread_index_in_simdgroup]],
                     ushort sg [[simdgroup_index_in_threadgroup]]) {
  constexpr int L = W / R;  // lanes per matrix
  threadgroup T tile[STAGE ? LU_SMALL_SIMDGROUPS * 32 * LU_SMALL_LD : 1];
  threadgroup T bcast[LU_SMALL_SIMDGROUPS * (32 / L) * 2 * LU_BC_LEN(W, 0)];
  const int m = (int)M;
  const int n = (int)N;
  const int k = min(m, n);
  const long b0 = (long)(gid / 32) * (32 / L);  // the simdgroup's first matrix
  const int cnt = lu_small_count(batch - b0, 32 / L);
  const long b = (long)(gid / L);
  const int q = lane / L;  // the segment's matrix within the simdgroup
  const int s = lane % L;  // its lane within the segment
  threadgroup T* tl = tile + (STAGE ? (int)sg * 32 * LU_SMALL_LD : 0);
  T a0[W];
  T a1[W];  // R = 2 only (unused, optimised away, when R = 1)
  T none0[1] = {s_zero<T>()};  // lu_small has no right-hand sides (KC = 0: one unused register)
  T none1[1] = {s_zero<T>()};
  int pos[R];
  int my_piv[R];
  ushort wl_of[W];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    pos[i] = s + i * L;
  }
  lu_rows_move<T, W, R, STAGE>(a0, a1, 0, tl, A + b0 * M * N, cnt, m, n, q, s, pos, lane);
  threadgroup T* bc = bcast + ((int)sg * (32 / L) + q) * 2 * LU_BC_LEN(W, 0);
  static_assert(!(OPT & 2) || (W == 32 && R == 1), "the rolled column loop: 32 lanes, one row per lane");
  static_assert(!(OPT & 28) || ((OPT & 2) && (STAGE || !(OPT & 4))), "FREE, LOOK, RCP1: rolled; FREE: staged");
  threadgroup T* trow = tl + (STAGE ? s * LU_SMALL_LD : 0);  // the lane's tile row (FREE)
  const int inf = (OPT & 2) ? lu_roll_getf2(a0, a1, k, m, s, lane, pos[0], my_piv[0], bc, trow,
                                            lu_roll_tag<(OPT & 2) != 0 && W == 32 && R == 1, OPT>())
                            : lu_regs_getf2<T, W, 0, R, OPT & 1>(a0, none0, a1, none1, m, n, s, lane, pos, my_piv,
                                                                 wl_of, bc);
  lu_rows_move<T, W, R, STAGE>(a0, a1, 1, tl, A + b0 * M * N, cnt, m, n, q, s, pos, lane);
#pragma unroll
  for (int i = 0; i < R; ++i) {
    if (q < cnt && s + i * L < k) {
      piv[b * k + s + i * L] = my_piv[i];
    }
  }
  if (q < cnt && s == 0) {
    info[b] = inf;
  }
}

// ---- lu_small_solve ------------------------------------------------------------------------------
//
// Fused solve of small systems A X = B (n <= W, k <= KC <= 8 right-hand sides: KC registers per
// lane for B; more right-hand sides go through lu_small + getrs) in one dispatch: the rows
// of [A | B] are eliminated exactly as lu_small eliminates A (same pivots, info and sfmin rule; B
// is permuted and updated with its rows), then U X = B' is solved by back substitution, each x_j
// broadcast from the lane holding position j. A zero pivot sets info and the back substitution
// divides by it (inf/NaN, as LAPACK's trsm would). info[b] is written. Grid as lu_small (R = 1).
template <typename T, int W, int KC, int STAGE>
[[max_total_threads_per_threadgroup(64)]]  // = 32 * LU_SMALL_SIMDGROUPS
kernel void lu_small_solve(device const T* A [[buffer(0)]],
                           device const T* B [[buffer(1)]],
                           device T* Xout [[buffer(2)]],
                           device int* info [[buffer(3)]],
                           constant long& N [[buffer(4)]],
                           constant long& K [[buffer(5)]],
                           constant long& batch [[buffer(6)]],
                           uint gid [[thread_position_in_grid]],
                           ushort lane [[thread_index_in_simdgroup]],
                           ushort sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup T tile[STAGE ? LU_SMALL_SIMDGROUPS * 32 * LU_SMALL_LD : 1];
  threadgroup T bcast[LU_SMALL_SIMDGROUPS * (32 / W) * 2 * LU_BC_LEN(W, KC)];
  const int n = (int)N;
  const int k = (int)K;
  const long b0 = (long)(gid / 32) * (32 / W);
  const int cnt = lu_small_count(batch - b0, 32 / W);
  const long b = (long)(gid / W);
  const int q = lane / W;
  const int r = lane % W;
  const bool have = q < cnt && r < n;
  threadgroup T* tl = tile + (STAGE ? (int)sg * 32 * LU_SMALL_LD : 0);
  T a[W];
  T x[KC];
  T a_unused[W];  // lu_regs_getf2's second row (R = 2 only): never touched
  T x_unused[KC];
  ushort wl_of[W];
  if (STAGE) {
    lu_stage_in(tl, A + b0 * N * N, cnt * n, n, (int)lane);
    simdgroup_barrier(mem_flags::mem_threadgroup);
  }
  lu_row_in(a, have, tl, q * n + r, A + b * N * N + r * n, n, STAGE != 0);
  if (STAGE) {
    simdgroup_barrier(mem_flags::mem_threadgroup);
    lu_stage_in(tl, B + b0 * N * K, cnt * n, k, (int)lane);
    simdgroup_barrier(mem_flags::mem_threadgroup);
  }
  lu_row_in(x, have, tl, q * n + r, B + b * N * K + r * k, k, STAGE != 0);
  if (STAGE) {
    simdgroup_barrier(mem_flags::mem_threadgroup);
  }
  int pos[1];
  int my_piv[1];
  threadgroup T* bc = bcast + ((int)sg * (32 / W) + q) * 2 * LU_BC_LEN(W, KC);
  const int inf = lu_regs_getf2<T, W, KC, 1, 0>(a, x, a_unused, x_unused, n, n, r, lane, pos, my_piv, wl_of, bc);
  // back substitution U X = B': x_j = b'_j / u_jj from the lane at position j, then rows above
#pragma unroll
  for (int j = W - 1; j >= 0; --j) {
    if (j < n) {
      const ushort wl = wl_of[j];
      const T d = simd_shuffle(a[j], wl);
#pragma unroll
      for (int c = 0; c < KC; ++c) {
        if (c < k) {
          const T xj = s_div(simd_shuffle(x[c], wl), d);
          if (pos[0] == j) {
            x[c] = xj;
          } else if (pos[0] < j) {
            x[c] -= s_mul(a[j], xj);
          }
        }
      }
    }
  }
  lu_row_out(x, have, tl, q * n + pos[0], Xout + b * N * K + pos[0] * k, k, STAGE != 0);
  if (STAGE) {
    simdgroup_barrier(mem_flags::mem_threadgroup);
    lu_stage_out(Xout + b0 * N * K, tl, cnt * n, k, (int)lane);
  }
  if (q < cnt && r == 0) {
    info[b] = inf;
  }
}

// Host names lu_small_<dtype>_<W>_<STAGE> and lu_small_solve_<dtype>_<W>_<KC>_<STAGE>
// (mpslinalg/lu/kernels.py picks W and KC from the shapes, STAGE from TUNING.small_stage; the
// other STAGE is instantiated for the shapes benchmarks/bench_lu_small.py compares).
#define LU_SMALL_INSTANTIATE(W, S)                                            \
  MPSL_INSTANTIATE("lu_small_f32_" #W "_" #S, lu_small, float, W, S, 1, 0)    \
  MPSL_INSTANTIATE("lu_small_c64_" #W "_" #S, lu_small, float2, W, S, 1, 0)
// Host names lu_small_<dtype>_<W>_<S>_1_<OPT> (one row per lane): OPT bits 1 fma, 2 rolled, 4 rolled
// with the finished values through the tile (FREE), 8 rolled with the look-ahead pivot search, 16
// rolled with the one-division reciprocal.
#define LU_SMALL_INSTANTIATE_OPT(W, S, OPT)                                                \
  MPSL_INSTANTIATE("lu_small_f32_" #W "_" #S "_1_" #OPT, lu_small, float, W, S, 1, OPT)    \
  MPSL_INSTANTIATE("lu_small_c64_" #W "_" #S "_1_" #OPT, lu_small, float2, W, S, 1, OPT)
// The one-division reciprocal (OPT bit 16) exists for complex64 only (float32's is one division).
#define LU_SMALL_INSTANTIATE_RCP1(W, S, OPT) \
  MPSL_INSTANTIATE("lu_small_c64_" #W "_" #S "_1_" #OPT, lu_small, float2, W, S, 1, OPT)
// Two rows per lane: float32 only (a complex64 lane would hold 128 floats of matrix: past the
// register file, and clang keeps the rows in memory when it cannot unroll the columns).
#define LU_SMALL_INSTANTIATE_ROWS(W, S, R) \
  MPSL_INSTANTIATE("lu_small_f32_" #W "_" #S "_" #R, lu_small, float, W, S, R, 0)
#define LU_SMALL_SOLVE_INSTANTIATE(W, KC, S)                                             \
  MPSL_INSTANTIATE("lu_small_solve_f32_" #W "_" #KC "_" #S, lu_small_solve, float, W, KC, S) \
  MPSL_INSTANTIATE("lu_small_solve_c64_" #W "_" #KC "_" #S, lu_small_solve, float2, W, KC, S)

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

// ---- lu_laswp_block ------------------------------------------------------------------------------
//
// The interchanges piv[k1 .. k1+cnt) (cnt <= LU_SWAP_MAX; reverse != 0: applied last to first) as
// ONE permutation gather instead of a chain of swaps: they move at most 2 * cnt rows, the
// positions k1 .. k1+cnt-1 and the distinct targets outside them ("slots"). Every thread of a group
// computes the final source row of some slots by running the interchanges backwards over a row
// index (no data moves), then the group loads every moved entry of its columns into registers,
// waits at one barrier, and stores them at their new rows: independent loads (a swap chain's
// loads wait for the previous swap's stores, ~one memory round trip per interchange), and one
// dispatch for the columns on both sides of a panel. Columns: j = 0 .. nc-1 of each matrix map to
// c = c0 + j, plus skip_n when c0 + j >= skip_lo (the blocked LU's columns left and right of the
// panel [skip_lo, skip_lo + skip_n)). Grid: threads = batch * ngc * LU_SWAP_THREADS, group_size =
// LU_SWAP_THREADS, ngc = ceil(nc / 32): a group owns 32 columns (one per lane, coalesced) of one
// matrix, its simdgroups split the slots. Groups own disjoint columns, so the one barrier orders
// every read before every write. Pivots outside [1, M] are skipped, as in lu_laswp.
// TRSM = 1 (lu_laswp_block_<dt>_1; cnt <= LU_SWAP_TRSM_MAX, forward only): the columns right of
// the skipped panel (c >= skip_lo + skip_n) also get the blocked LU's U12 <- L11^{-1} A12, L11 the unit lower
// triangle of A[k1 .. k1+cnt) x [k1 .. k1+cnt) (the factored panel, which no group writes): their
// rows k1 .. k1+cnt-1 after the interchanges are read by simdgroup 0 (one column a lane) into
// registers, solved by forward substitution (column order, x[r] -= L[r][i] x[i] for r > i, as
// LAPACK's trsm; a rolled loop, the registers rotating one row a step) with L11 staged in
// threadgroup memory, and written once; the other simdgroups skip those rows.
constant constexpr int LU_SWAP_MAX = 64;
constant constexpr int LU_SWAP_TRSM_MAX = 32;
constant constexpr int LU_SWAP_THREADS = 256;
constant constexpr int LU_SWAP_PER_THREAD = 2 * LU_SWAP_MAX / (LU_SWAP_THREADS / 32);

template <typename T, int TRSM>
[[max_total_threads_per_threadgroup(256)]]  // = LU_SWAP_THREADS
kernel void lu_laswp_block(device T* A [[buffer(0)]],
                           device const int* piv [[buffer(1)]],
                           constant long& M [[buffer(2)]],
                           constant long& N [[buffer(3)]],
                           constant long& K [[buffer(4)]],
                           constant long& k1 [[buffer(5)]],
                           constant long& cnt [[buffer(6)]],
                           constant long& c0 [[buffer(7)]],
                           constant long& nc [[buffer(8)]],
                           constant long& skip_lo [[buffer(9)]],
                           constant long& skip_n [[buffer(10)]],
                           constant long& reverse [[buffer(11)]],
                           constant long& ngc [[buffer(12)]],
                           uint tid [[thread_index_in_threadgroup]],
                           uint tg [[threadgroup_position_in_grid]]) {
  threadgroup T lt[TRSM ? LU_SWAP_TRSM_MAX * LU_SWAP_TRSM_MAX : 1];  // TRSM: L11 (row-major, stride TRSM_MAX)
  threadgroup int q_of[LU_SWAP_MAX];        // the target row of interchange i (-1: none)
  threadgroup int dst[2 * LU_SWAP_MAX];     // slot -> the row it writes (-1: unused slot)
  threadgroup int src[2 * LU_SWAP_MAX];     // slot -> the row its entry comes from
  const int b = (int)(tg / (uint)ngc);
  const int cg = (int)(tg % (uint)ngc);
  const int m = (int)M;
  const int n = (int)N;
  const int lo = (int)k1;
  const int nk = (int)cnt;
  const int t = (int)tid;
  device const int* pb = piv + (long)b * K;
  for (int i = t; i < nk; i += LU_SWAP_THREADS) {
    const int q = pb[lo + i] - 1;
    q_of[i] = (q != lo + i && q >= 0 && q < m) ? q : -1;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int s = t; s < 2 * nk; s += LU_SWAP_THREADS) {
    int x = lo + s;  // slots 0 .. nk-1: the positions lo .. lo+nk-1
    bool used = true;
    if (s >= nk) {  // slot nk + i: the target of interchange i, where it is outside and first seen
      const int i = s - nk;
      x = q_of[i];
      used = x >= 0 && (x < lo || x >= lo + nk);
      for (int j = 0; j < i && used; ++j) {
        used = q_of[j] != x;
      }
    }
    // what row ends at x: the interchanges in the opposite order of their application
    int y = x;
    for (int step = 0; step < nk && used; ++step) {
      const int i = reverse != 0 ? step : nk - 1 - step;
      const int q = q_of[i];
      if (q >= 0) {
        y = (y == lo + i) ? q : ((y == q) ? lo + i : y);
      }
    }
    dst[s] = (used && y != x) ? x : -1;  // an entry that stays where it is is not moved
    src[s] = y;
  }
  device T* a = A + (long)b * M * N;
  constexpr bool solve = TRSM != 0;  // the host checks nk <= LU_SWAP_TRSM_MAX
  if (solve) {
    for (int e = t; e < nk * nk; e += LU_SWAP_THREADS) {
      const int r = e / nk;
      const int i = e % nk;
      lt[r * LU_SWAP_TRSM_MAX + i] = a[(lo + r) * n + lo + i];
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const int lane = t % 32;
  const int sg = t / 32;
  const int j = cg * 32 + lane;
  int c = (int)c0 + j;
  if (c >= (int)skip_lo) {
    c += (int)skip_n;
  }
  const bool have = j < (int)nc;
  const bool right = solve && c >= (int)(skip_lo + skip_n);  // this lane's column gets the TRSM
  T v[LU_SWAP_PER_THREAD];
#pragma unroll
  for (int k = 0; k < LU_SWAP_PER_THREAD; ++k) {
    const int s = sg + k * (LU_SWAP_THREADS / 32);
    v[k] = (have && s < 2 * nk && dst[s] >= 0 && !(right && s < nk)) ? a[src[s] * n + c] : s_zero<T>();
  }
  T x[LU_SWAP_TRSM_MAX];  // simdgroup 0, right columns: rows lo .. lo+nk-1 after the interchanges
  if (solve && sg == 0) {
#pragma unroll
    for (int i = 0; i < LU_SWAP_TRSM_MAX; ++i) {
      x[i] = (have && right && i < nk) ? a[src[i] * n + c] : s_zero<T>();
    }
  }
  threadgroup_barrier(mem_flags::mem_device);  // every read of the group's columns before any write
#pragma unroll
  for (int k = 0; k < LU_SWAP_PER_THREAD; ++k) {
    const int s = sg + k * (LU_SWAP_THREADS / 32);
    if (have && s < 2 * nk && dst[s] >= 0 && !(right && s < nk)) {
      a[dst[s] * n + c] = v[k];
    }
  }
  if (solve && sg == 0 && have && right) {
#pragma unroll 1
    for (int i = 0; i < LU_SWAP_TRSM_MAX; ++i) {  // x[0] is row i, final; rows i+1.. lose L[r][i] x_i
      const T head = x[0];
#pragma unroll
      for (int q = 0; q < LU_SWAP_TRSM_MAX - 1; ++q) {
        const int r = min(i + 1 + q, LU_SWAP_TRSM_MAX - 1);
        x[q] = (i + 1 + q < nk) ? x[q + 1] - s_mul(lt[r * LU_SWAP_TRSM_MAX + i], head) : x[q + 1];
      }
      x[LU_SWAP_TRSM_MAX - 1] = head;
    }
#pragma unroll
    for (int i = 0; i < LU_SWAP_TRSM_MAX; ++i) {
      if (i < nk) {
        a[(lo + i) * n + c] = x[i];
      }
    }
  }
}

// ---- instantiations ------------------------------------------------------------------------------

MPSL_INSTANTIATE_DTYPES(lu_panel)
MPSL_INSTANTIATE_DTYPES(lu_panel_step)
MPSL_INSTANTIATE("lu_panel_regs_f32_32", lu_panel_regs, float, 32)
MPSL_INSTANTIATE("lu_panel_regs_c64_32", lu_panel_regs, float2, 32)
#define LU_INSTANTIATE_LOOK(KL, SLOTS)                                                         \
  MPSL_INSTANTIATE("lu_panel_look_f32_" #KL "_" #SLOTS, lu_panel_look, float, KL, SLOTS, 0)   \
  MPSL_INSTANTIATE("lu_panel_look_c64_" #KL "_" #SLOTS, lu_panel_look, float2, KL, SLOTS, 0)
LU_INSTANTIATE_LOOK(2, 32)
LU_INSTANTIATE_LOOK(4, 32)
LU_INSTANTIATE_LOOK(8, 32)
LU_INSTANTIATE_LOOK(16, 32)
MPSL_INSTANTIATE("lu_panel_look_f32_8_32_1", lu_panel_look, float, 8, 32, 1)
MPSL_INSTANTIATE("lu_panel_look_f32_16_32_1", lu_panel_look, float, 16, 32, 1)
#define LU_INSTANTIATE_LOOK_ROLL(KL, SLOTS)                                                              \
  MPSL_INSTANTIATE("lu_panel_look_f32_" #KL "_" #SLOTS "_2", lu_panel_look, float, KL, SLOTS, 2)   \
  MPSL_INSTANTIATE("lu_panel_look_c64_" #KL "_" #SLOTS "_2", lu_panel_look, float2, KL, SLOTS, 2)
LU_INSTANTIATE_LOOK_ROLL(2, 32)
LU_INSTANTIATE_LOOK_ROLL(4, 32)
LU_INSTANTIATE_LOOK_ROLL(8, 32)
LU_INSTANTIATE_LOOK_ROLL(16, 32)
LU_SMALL_INSTANTIATE(8, 0)
LU_SMALL_INSTANTIATE(8, 1)
LU_SMALL_INSTANTIATE(16, 0)
LU_SMALL_INSTANTIATE(16, 1)
LU_SMALL_INSTANTIATE(32, 0)
LU_SMALL_INSTANTIATE(32, 1)
LU_SMALL_INSTANTIATE_OPT(32, 1, 1)
LU_SMALL_INSTANTIATE_OPT(32, 1, 2)
LU_SMALL_INSTANTIATE_OPT(32, 1, 3)
LU_SMALL_INSTANTIATE_OPT(32, 1, 6)
LU_SMALL_INSTANTIATE_OPT(32, 1, 7)
LU_SMALL_INSTANTIATE_OPT(32, 1, 10)
LU_SMALL_INSTANTIATE_OPT(32, 1, 11)
LU_SMALL_INSTANTIATE_OPT(32, 1, 14)
LU_SMALL_INSTANTIATE_OPT(32, 1, 15)
LU_SMALL_INSTANTIATE_RCP1(32, 1, 18)
LU_SMALL_INSTANTIATE_RCP1(32, 1, 19)
LU_SMALL_INSTANTIATE_RCP1(32, 1, 22)
LU_SMALL_INSTANTIATE_RCP1(32, 1, 23)
LU_SMALL_INSTANTIATE_RCP1(32, 1, 26)
LU_SMALL_INSTANTIATE_RCP1(32, 1, 27)
LU_SMALL_INSTANTIATE_RCP1(32, 1, 30)
LU_SMALL_INSTANTIATE_RCP1(32, 1, 31)
LU_SMALL_INSTANTIATE_ROWS(32, 0, 2)
LU_SMALL_INSTANTIATE_ROWS(32, 1, 2)
LU_SMALL_SOLVE_INSTANTIATE(8, 1, 0)
LU_SMALL_SOLVE_INSTANTIATE(8, 1, 1)
LU_SMALL_SOLVE_INSTANTIATE(8, 8, 1)
LU_SMALL_SOLVE_INSTANTIATE(16, 1, 0)
LU_SMALL_SOLVE_INSTANTIATE(16, 1, 1)
LU_SMALL_SOLVE_INSTANTIATE(16, 8, 1)
LU_SMALL_SOLVE_INSTANTIATE(32, 1, 0)
LU_SMALL_SOLVE_INSTANTIATE(32, 1, 1)
LU_SMALL_SOLVE_INSTANTIATE(32, 8, 1)
MPSL_INSTANTIATE_DTYPES(lu_laswp)
MPSL_INSTANTIATE("lu_laswp_block_f32", lu_laswp_block, float, 0)
MPSL_INSTANTIATE("lu_laswp_block_c64", lu_laswp_block, float2, 0)
MPSL_INSTANTIATE("lu_laswp_block_f32_1", lu_laswp_block, float, 1)
MPSL_INSTANTIATE("lu_laswp_block_c64_1", lu_laswp_block, float2, 1)
