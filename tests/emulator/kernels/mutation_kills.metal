// Kernels of tests/emulator/test_mutation_kills_emulator.py (issue 18's mutation gate): emulator
// runtime behaviours no other test kernel reaches.
#include <metal_stdlib>
using namespace metal;

// Group 0 writes all of sh, the other groups all but sh[0]: their sh[0] is uninitialised and must
// read as the poison (NaN), not as group 0's 1.0 left in the arena.
kernel void uninit_tg_later_group(device float* x [[buffer(0)]],
                                  uint tid [[thread_index_in_threadgroup]],
                                  uint g [[threadgroup_position_in_grid]],
                                  uint gid [[thread_position_in_grid]]) {
  threadgroup float sh[32];
  if (g == 0 || tid > 0) {
    sh[tid] = 1.0f;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  x[gid] = sh[0];
}

// Every thread fills a local array of 129 KiB, lowest address first: more than a fiber's 128 KiB
// stack, so the first thread to run writes into the guard page below its stack and must fault with
// the stack-overflow message (without guard pages it would silently overwrite its neighbour's stack).
kernel void deep_stack(device float* x [[buffer(0)]],
                       constant long& n [[buffer(1)]],
                       uint tid [[thread_index_in_threadgroup]]) {
  float big[129 * 256];
  for (int i = 0; i < (int)n; ++i) {
    big[i] = x[i % 32] + (float)tid;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);  // the threads are fibers
  x[tid] = big[(int)n - 1];
}

// Phase 2 (after the barrier) records the order the threads ran in. Simdgroup 0 passes two
// collectives before the barrier, simdgroup 1 one, so simdgroup 0 reaches the barrier a scheduler
// round later: the thread that completes the barrier (31) is not the last of the order, and
// 'inorder' must still run phase 2 from thread 0 (64 threads).
kernel void order_after_collective(device atomic_int* counter [[buffer(0)]],
                                   device int* seq [[buffer(1)]],
                                   uint tid [[thread_index_in_threadgroup]]) {
  float v = simd_sum(1.0f);
  if (tid < 32) {
    v += simd_sum(1.0f);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const int k = atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
  seq[k] = int(tid) + (v == (tid < 32 ? 64.0f : 32.0f) ? 0 : 1000);
}
