// lu_small.metal - whole-matrix LU of small matrices (M, N <= 32) in registers, one row per lane
// (metal/lu.h: the family's groups and its LAPACK rules; metal/lu_small.h: the helpers shared
// with lu_small_solve), and its rolled column loop.
#include "scalar.h"
#include "lu_small.h"

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
  const uint nidx = cand ? ~(uint)(pos * SIMD_WIDTH + s) : 0u;
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
      threadgroup T* prow = FREE ? trow + ((int)(win % SIMD_WIDTH) - s) * LU_SMALL_LD + j : bc + (j & 1) * LU_BC_LEN(32, 0);
      threadgroup T* pext = FREE ? bc + (j & 1) * 2 : prow + 32;
      if (lane == (ushort)(win % SIMD_WIDTH)) {
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
  constexpr int PER = SIMD_WIDTH / W;  // matrices per tile round
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
[[max_total_threads_per_threadgroup(64)]]  // = SIMD_WIDTH * LU_SMALL_SIMDGROUPS
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
  threadgroup T tile[STAGE ? LU_SMALL_SIMDGROUPS * SIMD_WIDTH * LU_SMALL_LD : 1];
  threadgroup T bcast[LU_SMALL_SIMDGROUPS * (SIMD_WIDTH / L) * 2 * LU_BC_LEN(W, 0)];
  const int m = (int)M;
  const int n = (int)N;
  const int k = min(m, n);
  const long b0 = (long)(gid / SIMD_WIDTH) * (SIMD_WIDTH / L);  // the simdgroup's first matrix
  const int cnt = lu_small_count(batch - b0, SIMD_WIDTH / L);
  const long b = (long)(gid / L);
  const int q = lane / L;  // the segment's matrix within the simdgroup
  const int s = lane % L;  // its lane within the segment
  threadgroup T* tl = tile + (STAGE ? (int)sg * SIMD_WIDTH * LU_SMALL_LD : 0);
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
  threadgroup T* bc = bcast + ((int)sg * (SIMD_WIDTH / L) + q) * 2 * LU_BC_LEN(W, 0);
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
