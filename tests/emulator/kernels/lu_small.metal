// lu_small.metal -- test kernel for the emulator: LU with partial pivoting of a batch of n x n
// matrices (n <= 16), one threadgroup of 16 x 16 threads per matrix, the matrix in threadgroup
// memory. Pivot = largest |a_ik| (smallest index on ties, as LAPACK's isamax), found with
// simd_max / simd_min by simdgroup 0. Four barriers per column plus one after the load: 65 for
// n = 16. `info` = first k (1-based) with an exactly zero pivot, 0 otherwise (no division by 0).
#include <metal_stdlib>
using namespace metal;

constant constexpr uint NB = 16;

kernel void lu16(device float* A [[buffer(0)]],          // (batch, n, n) row-major, overwritten by L\U
                 device int* ipiv [[buffer(1)]],         // (batch, n), 0-based row interchanges
                 device int* info [[buffer(2)]],         // (batch,)
                 constant long& n [[buffer(3)]],
                 uint2 lid [[thread_position_in_threadgroup]],
                 uint tid [[thread_index_in_threadgroup]],
                 uint2 gid [[threadgroup_position_in_grid]]) {
  threadgroup float a[NB][NB];
  threadgroup uint piv_s;
  const uint row = lid.y, col = lid.x;
  const uint N = uint(n);
  device float* M = A + gid.y * N * N;
  if (row < N && col < N) a[row][col] = M[row * N + col];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int first_zero = 0;
  for (uint k = 0; k < N; ++k) {
    if (tid < 32) {  // simdgroup 0 searches the pivot (uniform per simdgroup)
      float v = (tid >= k && tid < N) ? fabs(a[tid][k]) : -1.0f;
      float m = simd_max(v);
      uint cand = (v == m) ? tid : 0xFFFFu;
      uint p = simd_min(cand);
      if (tid == 0) piv_s = p;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const uint p = piv_s;
    if (row == k && col < N && p != k) {
      float t = a[k][col];
      a[k][col] = a[p][col];
      a[p][col] = t;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const float pivot = a[k][k];
    if (pivot == 0.0f && first_zero == 0) first_zero = int(k) + 1;
    if (row > k && row < N && col == k && pivot != 0.0f) a[row][k] = a[row][k] / pivot;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (row > k && row < N && col > k && col < N) a[row][col] -= a[row][k] * a[k][col];
    if (tid == 0) ipiv[gid.y * N + k] = int(p);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (row < N && col < N) M[row * N + col] = a[row][col];
  if (tid == 0) info[gid.y] = first_zero;
}

// The same kernel with the barrier after the row swap removed (planted race): a thread may read
// a[k][k] / a[k][col] before the swap of row k has been written.
kernel void lu16_missing_barrier(device float* A [[buffer(0)]], device int* ipiv [[buffer(1)]],
                                 device int* info [[buffer(2)]], constant long& n [[buffer(3)]],
                                 uint2 lid [[thread_position_in_threadgroup]],
                                 uint tid [[thread_index_in_threadgroup]],
                                 uint2 gid [[threadgroup_position_in_grid]]) {
  threadgroup float a[NB][NB];
  threadgroup uint piv_s;
  const uint row = lid.y, col = lid.x;
  const uint N = uint(n);
  device float* M = A + gid.y * N * N;
  if (row < N && col < N) a[row][col] = M[row * N + col];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int first_zero = 0;
  for (uint k = 0; k < N; ++k) {
    if (tid < 32) {
      float v = (tid >= k && tid < N) ? fabs(a[tid][k]) : -1.0f;
      float m = simd_max(v);
      uint cand = (v == m) ? tid : 0xFFFFu;
      uint p = simd_min(cand);
      if (tid == 0) piv_s = p;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const uint p = piv_s;
    if (row == k && col < N && p != k) {
      float t = a[k][col];
      a[k][col] = a[p][col];
      a[p][col] = t;
    }
    // (missing threadgroup_barrier here)
    const float pivot = a[k][k];
    if (pivot == 0.0f && first_zero == 0) first_zero = int(k) + 1;
    if (row > k && row < N && col == k && pivot != 0.0f) a[row][k] = a[row][k] / pivot;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (row > k && row < N && col > k && col < N) a[row][col] -= a[row][k] * a[k][col];
    if (tid == 0) ipiv[gid.y * N + k] = int(p);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (row < N && col < N) M[row * N + col] = a[row][col];
  if (tid == 0) info[gid.y] = first_zero;
}
