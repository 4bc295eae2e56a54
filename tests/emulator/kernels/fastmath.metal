// Kernels whose results depend on safe math (tests/emulator/test_emulator_language.py): with
// PYTORCH_MPS_FAST_MATH=1 Metal may fold isnan/isinf away, reassociate, and flush denormals.
#include <metal_stdlib>
using namespace metal;

// 1 where x is NaN or infinite, else 0 (folded to 0 when the compiler may assume finite math)
kernel void nonfinite(device const float* x [[buffer(0)]], device int* out [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
    out[i] = (isnan(x[i]) || isinf(x[i])) ? 1 : 0;
}

// the rounding error of a + b (Knuth's TwoSum); reassociation makes it 0
kernel void two_sum_error(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]],
                          device float* err [[buffer(2)]], uint i [[thread_position_in_grid]]) {
    const float s = a[i] + b[i];
    const float bb = s - a[i];
    err[i] = (a[i] - (s - bb)) + (b[i] - bb);
}

// a * s for a subnormal result (flushed to zero with denormals off)
kernel void scale_by(device const float* x [[buffer(0)]], constant float& s [[buffer(1)]],
                     device float* out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
    out[i] = x[i] * s;
}
