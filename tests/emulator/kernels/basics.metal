// basics.metal -- test kernels for the emulator: complex (float2) arithmetic, the MSL surface
// (vector constructors, conversions, math, select/clamp/mix/fma, as_type, numeric_limits),
// thread-position attributes on 1-D/2-D/3-D grids, templates with host_name, atomics.
#include <metal_stdlib>
using namespace metal;

// ---- complex64 as float2 (x = real, y = imaginary) ----
inline float2 cmul(float2 a, float2 b) { return float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
inline float2 cconj(float2 a) { return float2(a.x, -a.y); }

kernel void complex_ops(device const float2* a [[buffer(0)]], device const float2* b [[buffer(1)]],
                        device float2* prod [[buffer(2)]], device float2* conj_sum [[buffer(3)]],
                        device float* abs1 [[buffer(4)]], uint i [[thread_position_in_grid]]) {
  const float2 x = a[i], y = b[i];
  prod[i] = cmul(x, y);
  conj_sum[i] = cconj(x) + (y.yx * float2(1.0f, 1.0f) - y.yx);  // = conj(a) exactly
  abs1[i] = fabs(x.x) + fabs(x.y);
}

// ---- vector constructors / conversions / math ----
kernel void surface(device float* out [[buffer(0)]], device const float* x [[buffer(1)]],
                    device int* iout [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  const float v = x[i];
  float4 q = float4(float2(v, 2.0f * v), 3.0f, float(i));            // nested constructor
  float3 s = float3(v);                                               // splat
  int2 iv = int2(float2(v * 10.0f, -v * 10.0f));                      // element-wise conversion
  float2 back = static_cast<float2>(iv);
  half h = half(v);
  half2 hh = half2(h, 1.0h);
  float4 (&alias)[1] = *reinterpret_cast<thread float4 (*)[1]>(&q);   // a declaration, not a call
  uint bits = as_type<uint>(v);
  device float* o = out + i * 24;
  o[0] = q.x + q.y + q.z + alias[0].w;                                // v + 2v + 3 + i
  o[1] = s.x + s.y + s.z;                                             // 3v
  o[2] = back.x;                                                      // trunc(10 v)
  o[3] = back.y;
  o[4] = sqrt(fabs(v));
  o[5] = rsqrt(fabs(v) + 1.0f);
  o[6] = exp(v);
  o[7] = log(fabs(v) + 1.0f);
  o[8] = fma(v, v, 1.0f);
  o[9] = clamp(v, -0.5f, 0.5f);
  o[10] = mix(1.0f, 3.0f, 0.25f);                                     // 1.5
  o[11] = select(1.0f, 2.0f, v > 0.0f);                               // v > 0 ? 2 : 1
  o[12] = float(hh.x) + float(hh.y);                                  // half(v) + 1
  o[13] = as_type<float>(bits);                                       // v
  o[14] = numeric_limits<float>::epsilon();
  o[15] = numeric_limits<float>::max();
  o[16] = isinf(INFINITY) && isnan(NAN) ? 1.0f : 0.0f;
  o[17] = M_PI_F;
  o[18] = metal::precise::sqrt(2.0f) * sqrt(2.0f) + fast::fabs(-0.0f); // sqrt(2)^2 rounded
  float4 w = select(float4(0.0f), float4(1.0f), q > float4(0.5f));    // vector select on a mask
  o[19] = w.x + w.y + w.z + w.w;
  o[20] = dot(float3(1.0f, 2.0f, 3.0f), float3(v, v, v));             // 6v
  o[21] = max(float2(v, -v), float2(0.0f)).x + min(v, 0.0f);          // v
  bool2 b2 = bool2(v > 0.0f, v <= 0.0f);
  o[22] = (any(b2) ? 1.0f : 0.0f) + (all(b2) ? 10.0f : 0.0f);         // exactly one is true: 1
  o[23] = copysign(1.0f, v) * trunc(fabs(v) * 4.0f) / 4.0f;
  iout[i] = int(popcount(bits)) + 100 * int(clz(uint(i + 1)));
}

// ---- thread-position attributes ----
kernel void grid_ids(device uint* out [[buffer(0)]],
                     uint3 tpig [[thread_position_in_grid]],
                     uint3 tpitg [[thread_position_in_threadgroup]],
                     uint3 tgpig [[threadgroup_position_in_grid]],
                     uint3 tptg [[threads_per_threadgroup]],
                     uint3 dtptg [[dispatch_threads_per_threadgroup]],
                     uint3 tgpg [[threadgroups_per_grid]],
                     uint3 tpg [[threads_per_grid]],
                     uint tiitg [[thread_index_in_threadgroup]],
                     ushort lane [[thread_index_in_simdgroup]],
                     ushort sg [[simdgroup_index_in_threadgroup]]) {
  const uint lin = tpig.x + tpg.x * (tpig.y + tpg.y * tpig.z);
  device uint* o = out + lin * 24;
  o[0] = tpig.x; o[1] = tpig.y; o[2] = tpig.z;
  o[3] = tpitg.x; o[4] = tpitg.y; o[5] = tpitg.z;
  o[6] = tgpig.x; o[7] = tgpig.y; o[8] = tgpig.z;
  o[9] = tptg.x; o[10] = tptg.y; o[11] = tptg.z;
  o[12] = dtptg.x; o[13] = dtptg.y; o[14] = dtptg.z;
  o[15] = tgpg.x; o[16] = tgpg.y; o[17] = tgpg.z;
  o[18] = tpg.x; o[19] = tpg.y; o[20] = tpg.z;
  o[21] = tiitg; o[22] = lane; o[23] = sg;
}

kernel void grid_2d(device float* out [[buffer(0)]], constant long& ld [[buffer(1)]],
                    uint2 p [[thread_position_in_grid]]) {
  out[p.y * ld + p.x] = float(p.y * 1000 + p.x);
}

// ---- templates reachable by host_name ----
template <typename T, int K = 2>
kernel void scale(device T* x [[buffer(0)]], constant float& a [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  x[i] = x[i] * (a * float(K));
}
template [[host_name("scale_float")]] kernel void scale<float>(device float*, constant float&, uint);
template [[host_name("scale_float2_k3")]] kernel void scale<float2, 3>(device float2*, constant float&, uint);

// ---- atomics (functional) ----
kernel void histogram(device const int* v [[buffer(0)]], device atomic_int* hist [[buffer(1)]],
                      device atomic_uint* total [[buffer(2)]], uint i [[thread_position_in_grid]],
                      uint tid [[thread_index_in_threadgroup]]) {
  threadgroup atomic_int local_count;
  if (tid == 0) atomic_store_explicit(&local_count, 0, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  atomic_fetch_add_explicit(&hist[v[i]], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&local_count, 1, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid == 0)
    atomic_fetch_add_explicit(total, uint(atomic_load_explicit(&local_count, memory_order_relaxed)),
                              memory_order_relaxed);
}
