// binding.metal -- test kernels for the emulator's argument binding (torch.mps.compile_shader's
// rules: argument i <-> [[buffer(i)]], storage offset honoured, strides ignored, Python int ->
// 8-byte long, float -> float, lists -> arrays).
#include <metal_stdlib>
using namespace metal;

kernel void fill(device float* out [[buffer(0)]], constant float& value [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) {
  out[i] = value;
}

kernel void iota_long(device long* out [[buffer(0)]], constant long& start [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
  out[i] = start + long(i);
}

kernel void add_int(device int* out [[buffer(0)]], constant int& k [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  out[i] += k;
}

kernel void half_scale(device half* out [[buffer(0)]], constant half& s [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  out[i] = out[i] * s;
}

// lists: dims as an array of longs, weights as an array of floats
kernel void weighted(device float* out [[buffer(0)]], constant long* dims [[buffer(1)]],
                     constant float* w [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  out[i] = float(dims[0] * 100 + dims[1] * 10 + dims[2]) + w[0] + w[1];
}

// implicit buffer order (no [[buffer]] attributes), vectorised loads of a float32 tensor
kernel void sum4(device const float4* x, device float* out, uint i [[thread_position_in_grid]]) {
  float4 v = x[i];
  out[i] = v.x + v.y + v.z + v.w;
}

// buffer indices out of order
kernel void swapped(device float* b [[buffer(1)]], device const float* a [[buffer(0)]],
                    uint i [[thread_position_in_grid]]) {
  b[i] = 2.0f * a[i];
}

// barriers at two different call sites reached by different threads
kernel void split_barriers(device float* x [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  if (tid < 2) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
  } else {
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  x[tid] = 1.0f;
}
