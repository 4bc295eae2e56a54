// lu_small_solve.metal - factor and solve small systems A X = B in one dispatch (metal/lu.h: the
// family's groups and its LAPACK rules; metal/lu_small.h: the register-row LU shared with lu_small).
#include "scalar.h"
#include "lu_small.h"

// ---- lu_small_solve ------------------------------------------------------------------------------
//
// Fused solve of small systems A X = B (n <= W, k <= KC <= 8 right-hand sides: KC registers per
// lane for B; more right-hand sides go through lu_small + getrs) in one dispatch: the rows
// of [A | B] are eliminated exactly as lu_small eliminates A (same pivots, info and sfmin rule; B
// is permuted and updated with its rows), then U X = B' is solved by back substitution, each x_j
// broadcast from the lane holding position j. A zero pivot sets info and the back substitution
// divides by it (inf/NaN, as LAPACK's trsm would). info[b] is written. Grid as lu_small (R = 1).
template <typename T, int W, int KC, int STAGE>
[[max_total_threads_per_threadgroup(64)]]  // = SIMD_WIDTH * LU_SMALL_SIMDGROUPS
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
  threadgroup T tile[STAGE ? LU_SMALL_SIMDGROUPS * SIMD_WIDTH * LU_SMALL_LD : 1];
  threadgroup T bcast[LU_SMALL_SIMDGROUPS * (SIMD_WIDTH / W) * 2 * LU_BC_LEN(W, KC)];
  const int n = (int)N;
  const int k = (int)K;
  const long b0 = (long)(gid / SIMD_WIDTH) * (SIMD_WIDTH / W);
  const int cnt = lu_small_count(batch - b0, SIMD_WIDTH / W);
  const long b = (long)(gid / W);
  const int q = lane / W;
  const int r = lane % W;
  const bool have = q < cnt && r < n;
  threadgroup T* tl = tile + (STAGE ? (int)sg * SIMD_WIDTH * LU_SMALL_LD : 0);
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
  threadgroup T* bc = bcast + ((int)sg * (SIMD_WIDTH / W) + q) * 2 * LU_BC_LEN(W, KC);
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

// Host names lu_small_solve_<dtype>_<W>_<KC>_<STAGE> (mpslinalg/lu/kernels.py picks W and KC from the
// shapes, STAGE from TUNING.small_stage; only the staged variant exists for KC = 8).
#define LU_SMALL_SOLVE_INSTANTIATE(W, KC, S)                                             \
  MPSL_INSTANTIATE("lu_small_solve_f32_" #W "_" #KC "_" #S, lu_small_solve, float, W, KC, S) \
  MPSL_INSTANTIATE("lu_small_solve_c64_" #W "_" #KC "_" #S, lu_small_solve, float2, W, KC, S)

LU_SMALL_SOLVE_INSTANTIATE(8, 1, 0)
LU_SMALL_SOLVE_INSTANTIATE(8, 1, 1)
LU_SMALL_SOLVE_INSTANTIATE(8, 8, 1)
LU_SMALL_SOLVE_INSTANTIATE(16, 1, 0)
LU_SMALL_SOLVE_INSTANTIATE(16, 1, 1)
LU_SMALL_SOLVE_INSTANTIATE(16, 8, 1)
LU_SMALL_SOLVE_INSTANTIATE(32, 1, 0)
LU_SMALL_SOLVE_INSTANTIATE(32, 1, 1)
LU_SMALL_SOLVE_INSTANTIATE(32, 8, 1)
