// faults.metal -- test kernels for the emulator's safety net: each one is wrong on purpose.
#include <metal_stdlib>
using namespace metal;

// out-of-bounds index into a thread-local array (traps: -fsanitize=array-bounds)
kernel void oob_local(device float* x [[buffer(0)]], constant long& k [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  float loc[4] = {0.0f, 1.0f, 2.0f, 3.0f};
  x[i] = loc[i + uint(k)];
}

// out-of-bounds write into threadgroup memory (thread 8 and up of the group)
kernel void oob_threadgroup(device float* x [[buffer(0)]], uint tid [[thread_index_in_threadgroup]],
                            uint i [[thread_position_in_grid]]) {
  threadgroup float sh[8];
  sh[tid] = x[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  x[i] = sh[0];
}

// writes far outside any buffer: segmentation fault
kernel void wild_write(device float* x [[buffer(0)]], constant long& off [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  if (i == 3) x[off] = 1.0f;
}

// integer division by zero
kernel void div_zero(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[i] = 100 / x[i];
}

// one past the end of the buffer: caught only with guard=True
kernel void past_end(device float* x [[buffer(0)]], constant long& n [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  x[i] = x[i] + x[uint(n)];
}

// thread 5 writes k elements before the start of the buffer: caught only with guard=True
kernel void before_start(device float* x [[buffer(0)]], constant long& k [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  if (i == 5) x[long(i) - k] = 1.0f;
}

// a barrier reached through a function pointer: the kernel looks barrier-free from its direct calls
inline void sync_helper() { threadgroup_barrier(mem_flags::mem_threadgroup); }
kernel void barrier_via_pointer(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  void (*f)() = sync_helper;
  f();
  x[i] = 1.0f;
}

// thread 3 returns before the barrier the others wait at
kernel void barrier_divergence(device float* x [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float sh[64];
  if (tid == 3) return;
  sh[tid] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  x[tid] = sh[0];
}

// half of the simdgroup at one collective, half at another
kernel void simd_divergence(device float* x [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
  float v = x[lane];
  if (lane < 16) v = simd_sum(v);
  else v = simd_max(v);
  x[lane] = v;
}

// reads threadgroup memory nobody wrote: sees the poison (NaN)
kernel void uninit_tg(device float* x [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float sh[32];
  if (tid > 0) sh[tid] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  x[tid] = sh[0];
}

// lane 5 leaves before the collective the rest of its simdgroup waits at
kernel void simd_lane_exit(device float* x [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
  if (lane == 5) return;
  x[lane] = simd_sum(x[lane]);
}
