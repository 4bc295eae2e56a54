// lu_panel.metal - the LU panel kernels in device memory (metal/lu.h: the family's groups and
// its LAPACK rules): lu_panel (one threadgroup per matrix), lu_panel_tall (the same body for a
// tall panel, one threadgroup of up to 1024 threads per matrix, one dispatch) and lu_panel_step
// (a tall panel shared by several threadgroups, one dispatch per column).
#include "scalar.h"
#include "lu.h"

// Threads that share one row in lu_panel's rank-1 update (one simdgroup: consecutive columns).
constant constexpr uint LU_PANEL_LANES = SIMD_WIDTH;
// Rows of lu_panel's rank-1 update each thread loads at once (lu_panel_tall: LU_TALL_UNROLL).
constant constexpr int LU_PANEL_UNROLL = 8;

// ---- lu_panel ------------------------------------------------------------------------------------
//
// Right-looking unblocked LU (LAPACK getf2) of the panel rows [o, M) x columns [o, o + w) of each
// matrix. Row swaps touch only the panel's columns; the caller applies the pivots to the other
// columns with lu_laswp. Grid: threads = batch * G, group_size = G (a power of two,
// 32 <= G <= 256); the threadgroup index is the batch index. The pivot search is a strided scan
// followed by lu_pivot_reduce, both ordered by lu_pivot_beats: the result is the sequential
// scan's. The body (lu_panel_getf2) is shared with lu_panel_tall, the same factorisation by up to
// 1024 threads for a panel of any height; red_v / red_i hold ntg / SIMD_WIDTH entries.
template <typename T, int UNROLL>
inline void lu_panel_getf2(device T* A, device int* piv, device int* info, long M, long N, long K,
                           long o, long w, uint tid, uint ntg, uint b, threadgroup float* red_v,
                           threadgroup int* red_i) {
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
    //    rows at a time; no integer division per element. UNROLL rows per thread at once
    //    (all their loads before any store: one latency per group of rows, not one per row)
    const int lane = (int)(tid % LU_PANEL_LANES);
    const int rstep = (int)(ntg / LU_PANEL_LANES);
    int r = col + 1 + (int)(tid / LU_PANEL_LANES);
    for (; r + (UNROLL - 1) * rstep < m; r += UNROLL * rstep) {
      T l[UNROLL];
      for (int q = 0; q < UNROLL; ++q) {
        l[q] = a[(r + q * rstep) * n + col];
      }
      for (int c = col + 1 + lane; c < cend; c += (int)LU_PANEL_LANES) {
        const T u = a[col * n + c];
        T x[UNROLL];
        for (int q = 0; q < UNROLL; ++q) {
          x[q] = a[(r + q * rstep) * n + c];
        }
        for (int q = 0; q < UNROLL; ++q) {
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
  lu_panel_getf2<T, LU_PANEL_UNROLL>(A, piv, info, M, N, K, o, w, tid, ntg, b, red_v, red_i);
}

// ---- lu_panel_tall -------------------------------------------------------------------------------
//
// A TALL panel (any number of rows) factored in ONE dispatch by ONE threadgroup per matrix: the
// blocked LU's panel on the Metal kernels in one dispatch whatever its height (issue 35;
// docs/ops/lu.md "Algorithm" has the cost model). Partial pivoting needs a decision over the whole
// column before the next column can be eliminated; within a dispatch only the threads of one
// threadgroup can wait for each other (Metal gives no forward-progress guarantee across
// threadgroups, so no inter-group spinning), hence one group owns the whole panel, in device memory
// (a 4096 x 32 complex64 panel is 1 MiB: it stays in the core's cache), each thread looping over
// its rows. Same arithmetic as lu_panel, in the same order (lu_panel_getf2: getf2's right-looking
// rank-1 updates, the pivot by lu_pivot_reduce, LAPACK's sfmin rule), so the same pivots and bits
// as a one-group panel of lu_panel; up to 1024 threads (32 rows of the rank-1 update at a time).
// Grid: threads = batch * G, group_size = G (a power of two, 32 <= G <= LU_TALL_MAX_THREADS).
constant constexpr uint LU_TALL_MAX_THREADS = 1024;
// Rows of the rank-1 update a thread loads at once in lu_panel_tall: 4, not lu_panel's 8, so that
// 1024 threads fit the register file (sm_90 through the cuda target: 64 registers a thread at 1024
// threads; with 8 rows ptxas spilled 216 bytes for complex64). The same operations per entry.
constant constexpr int LU_TALL_UNROLL = 4;

template <typename T>
[[max_total_threads_per_threadgroup(1024)]]  // = LU_TALL_MAX_THREADS
kernel void lu_panel_tall(device T* A [[buffer(0)]],
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
  threadgroup float red_v[LU_TALL_MAX_THREADS / SIMD_WIDTH];
  threadgroup int red_i[LU_TALL_MAX_THREADS / SIMD_WIDTH];
  lu_panel_getf2<T, LU_TALL_UNROLL>(A, piv, info, M, N, K, o, w, tid, ntg, b, red_v, red_i);
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

// ---- instantiations -------------------------------------------------------------------------------

MPSL_INSTANTIATE_DTYPES(lu_panel)
MPSL_INSTANTIATE_DTYPES(lu_panel_tall)
MPSL_INSTANTIATE_DTYPES(lu_panel_step)
