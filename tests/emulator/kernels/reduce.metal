// reduce.metal -- test kernels for the emulator: a threadgroup reduction with barriers and
// simdgroup collectives, prefix sums, shuffles, broadcast, ballot.
#include <metal_stdlib>
using namespace metal;

// Sum and max of each block of group_size values (group_size a multiple of 32, <= 1024):
// simd_sum / simd_max per simdgroup, partials through threadgroup memory, barrier, then
// simdgroup 0 reduces the partials.
kernel void block_reduce(device const float* x [[buffer(0)]], device float* sums [[buffer(1)]],
                         device float* maxs [[buffer(2)]], uint i [[thread_position_in_grid]],
                         uint g [[threadgroup_position_in_grid]], uint lane [[thread_index_in_simdgroup]],
                         uint sg [[simdgroup_index_in_threadgroup]], uint nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float part_sum[32];
  threadgroup float part_max[32];
  const float v = x[i];
  const float s = simd_sum(v);
  const float m = simd_max(v);
  if (lane == 0) {
    part_sum[sg] = s;
    part_max[sg] = m;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    float ps = lane < nsg ? part_sum[lane] : 0.0f;
    float pm = lane < nsg ? part_max[lane] : -INFINITY;
    ps = simd_sum(ps);
    pm = simd_max(pm);
    if (lane == 0) {
      sums[g] = ps;
      maxs[g] = pm;
    }
  }
}

// Per simdgroup: inclusive/exclusive prefix sums, shuffle_down by 1, broadcast of lane 5,
// ballot of (value > 0), shuffle_xor 1, sum by a shuffle_down tree.
kernel void simd_ops(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                     device ulong* ballots [[buffer(2)]], uint i [[thread_position_in_grid]],
                     uint lane [[thread_index_in_simdgroup]]) {
  const float v = x[i];
  device float* o = out + i * 6;
  o[0] = simd_prefix_inclusive_sum(v);
  o[1] = simd_prefix_exclusive_sum(v);
  o[2] = simd_shuffle_down(v, 1);
  o[3] = simd_broadcast(v, 5);
  o[4] = simd_shuffle_xor(v, 1);
  float t = v;
  for (ushort d = 16; d > 0; d >>= 1) t += simd_shuffle_down(t, d);
  o[5] = simd_broadcast_first(t);
  simd_vote vote = simd_ballot(v > 0.0f);
  if (lane == 0) ballots[i / 32] = static_cast<ulong>(simd_vote::vote_t(vote));
}

// A race only between threads t and t + 200 (groups of 256): thread t < 56 reads the slot that
// thread t + 200 writes, with no barrier in between. (Used to check the ThreadSanitizer mode's
// second aliasing pass: in the first pass, t and t + 200 share one TSan fiber.)
kernel void aliased_race(device float* x [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float s[256];
  s[tid] = float(tid);
  x[tid] = tid < 56 ? s[tid + 200] : s[tid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
}

// The remaining simdgroup operations on integer lanes, one simdgroup per 32 threads.
kernel void simd_more(device int* out [[buffer(0)]], uint i [[thread_position_in_grid]],
                      uint lane [[thread_index_in_simdgroup]]) {
  const int v = int(lane) + 1;
  device int* o = out + i * 12;
  o[0] = simd_and(v | 0x100);                       // 0x100 (bit 8 in all, low bits differ)
  o[1] = simd_or(1 << (lane % 31));                 // bits 0..30
  o[2] = simd_xor(v);                               // 1 ^ 2 ^ ... ^ 32
  o[3] = simd_min(v * (lane == 7 ? -1 : 1));        // -8
  o[4] = simd_product(lane < 4 ? v : 1);            // 1 * 2 * 3 * 4
  o[5] = simd_prefix_inclusive_product(lane < 5 ? 2 : 1);
  o[6] = simd_any(lane == 5) ? 1 : 0;
  o[7] = simd_all(lane < 31) ? 1 : 0;               // lane 31 says no
  o[8] = simd_shuffle_up(v, 2);                     // lanes 0, 1 keep their own value
  o[9] = simd_shuffle_rotate_down(v, 3);
  o[10] = simd_shuffle_rotate_up(v, 1);
  o[11] = simd_is_first() ? 1 : 0;
}
