// lu_small.h - the register-row LU that lu_small (lu_small.metal) and lu_small_solve
// (lu_small_solve.metal) share: staging tiles, the pivot bids and publication, one elimination
// step per row, and the unrolled getf2 over a simdgroup's rows (lu_regs_getf2).
#include "scalar.h"
#include "lu.h"

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
  const int dR = SIMD_WIDTH / w, dc = SIMD_WIDTH % w;
  for (int t = lane; t < rows * w; t += SIMD_WIDTH) {
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
  const int dR = SIMD_WIDTH / w, dc = SIMD_WIDTH % w;
  for (int t = lane; t < rows * w; t += SIMD_WIDTH) {
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
    v[i] = src[lane + SIMD_WIDTH * i];
  }
#pragma unroll
  for (int i = 0; i < W; ++i) {
    tl[(i * (SIMD_WIDTH / W) + lane / W) * LU_SMALL_LD + lane % W] = v[i];
  }
}
template <typename T, int W>
__attribute__((always_inline)) inline void lu_stage_out_full(device T* dst, threadgroup const T* tl, int lane) {
#pragma unroll
  for (int i = 0; i < W; ++i) {
    dst[lane + SIMD_WIDTH * i] = tl[(i * (SIMD_WIDTH / W) + lane / W) * LU_SMALL_LD + lane % W];
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
  const uint ni = cand ? ~(uint)(pos * SIMD_WIDTH + s) : 0u;
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
    if (L == SIMD_WIDTH) {  // the whole simdgroup: two of its own reductions (hardware ones on Apple GPUs)
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
