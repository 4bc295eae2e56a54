// lu_swap.metal - LAPACK's row interchanges for the LU family (metal/lu.h: the family's groups):
// lu_laswp (a chain of swaps per column) and lu_laswp_block (one permutation gather, optionally
// with the blocked LU's triangular solve U12 <- L11^{-1} A12).
#include "scalar.h"
#include "lu.h"

// ---- lu_laswp ------------------------------------------------------------------------------------
//
// LAPACK laswp: for i = k1 .. k2-1 (reverse: k2-1 down to k1) swap rows i and piv[i] - 1 of the
// columns [c0, c0 + nc) of each matrix. One thread per (matrix, column): the swaps of one column
// are sequential in that thread, so no barriers are needed. Grid: threads = batch * nc (any
// group size). Pivots outside [1, M] (invalid user pivots) are skipped: never an out-of-bounds
// access; the public ops reject them before (lu_solve's pivot check).
// The host launches groups of at most LU_LASWP_GROUP threads (mpslinalg/lu/kernels.py: swap).
constant constexpr int LU_LASWP_GROUP = 64;

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
[[max_total_threads_per_threadgroup(64)]]  // = LU_LASWP_GROUP
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
constant constexpr int LU_SWAP_PER_THREAD = 2 * LU_SWAP_MAX / (LU_SWAP_THREADS / SIMD_WIDTH);

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
  const int lane = t % SIMD_WIDTH;
  const int sg = t / SIMD_WIDTH;
  const int j = cg * SIMD_WIDTH + lane;
  int c = (int)c0 + j;
  if (c >= (int)skip_lo) {
    c += (int)skip_n;
  }
  const bool have = j < (int)nc;
  const bool right = solve && c >= (int)(skip_lo + skip_n);  // this lane's column gets the TRSM
  T v[LU_SWAP_PER_THREAD];
#pragma unroll
  for (int k = 0; k < LU_SWAP_PER_THREAD; ++k) {
    const int s = sg + k * (LU_SWAP_THREADS / SIMD_WIDTH);
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
    const int s = sg + k * (LU_SWAP_THREADS / SIMD_WIDTH);
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

// ---- instantiations -------------------------------------------------------------------------------

MPSL_INSTANTIATE_DTYPES(lu_laswp)
MPSL_INSTANTIATE("lu_laswp_block_f32", lu_laswp_block, float, 0)
MPSL_INSTANTIATE("lu_laswp_block_c64", lu_laswp_block, float2, 0)
MPSL_INSTANTIATE("lu_laswp_block_f32_1", lu_laswp_block, float, 1)
MPSL_INSTANTIATE("lu_laswp_block_c64_1", lu_laswp_block, float2, 1)
