// instantiate.metal - the one instantiation idiom of metal/scalar.h (MPSL_INSTANTIATE: MLX's
// decltype form, host names <kernel>_<f32|c64>[_<param>]) as the emulator must read it: the
// parameter list and its attributes come from the template definition only. Compiled by
// tests/test_metal_sources.py with metal/scalar.h inlined by the library's own loader.
#include "scalar.h"

// y[j] = a * x[j] + y[j] (complex product for c64): buffers and an index map array bound from a Python list, a thread position: every kind of parameter a family kernel has.
template <typename T>
kernel void axpy(device const T* x [[buffer(0)]],
                 device T* y [[buffer(1)]],
                 device const T* a [[buffer(2)]],
                 constant long* map [[buffer(3)]],
                 uint i [[thread_position_in_grid]]) {
  const int j = (int)map[0] + (int)i * (int)map[1];  // {offset, stride}
  y[j] = s_mul(a[0], x[j]) + y[j];
}

// out[i] = x[i] * P for a non-type template parameter (the small family's matrix order).
template <typename T, int P>
kernel void scale(device const T* x [[buffer(0)]],
                  device T* out [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
  out[i] = s_mul(x[i], s_one<T>() * float(P));
}

MPSL_INSTANTIATE_DTYPES(axpy)
MPSL_INSTANTIATE("scale_f32_3", scale, float, 3)
MPSL_INSTANTIATE("scale_c64_5", scale, float2, 5)
