// Spin-waits on device memory (tests/emulator/test_emulator_timeout.py). Metal kernels spin on
// flags (atomics); the emulator must keep such loops, not optimise them away, and must give up on
// one that never ends (KernelTimeout) instead of hanging the process.
#include <metal_stdlib>
using namespace metal;

// waits until someone (here: a host thread) sets flag, then copies data: the wait reads device
// memory on every turn, so data is what was written before the flag
kernel void spin_atomic(device atomic_int* flag [[buffer(0)]],
                        device const int* data [[buffer(1)]],
                        device int* out [[buffer(2)]],
                        uint i [[thread_position_in_grid]]) {
    while (atomic_load_explicit(flag, memory_order_relaxed) == 0) {
    }
    out[i] = data[0] + int(i);
}

// the same wait with plain loads (a data race in Metal's memory model): C++ may assume the loop
// ends and delete it; the emulator keeps it, so with the flag never set it must time out
kernel void spin_plain(device const int* flag [[buffer(0)]],
                       device int* out [[buffer(1)]],
                       uint i [[thread_position_in_grid]]) {
    while (flag[0] == 0) {
    }
    out[i] = 1;
}

// an endless loop after a barrier (threads as fibers)
kernel void spin_after_barrier(device int* out [[buffer(0)]],
                               uint i [[thread_position_in_grid]]) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = 0; k != 1u; k += 2u) {
    }
    out[i] = 1;
}
