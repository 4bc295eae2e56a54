// surface2.metal -- more of the MSL surface for the emulator's tests: half/bfloat/integer vectors,
// bool vectors, vector simdgroup collectives, struct parameters, namespaces,
// program-scope constant arrays.
#include <metal_stdlib>
using namespace metal;

constant float kTable[4] = {0.5f, 1.5f, 2.5f, 3.5f};

struct Params {
  long n;
  float scale;
  uint flags;
};

namespace detail {
inline half2 hmul(half2 a, half2 b) { return a * b; }
}  // namespace detail

kernel void vectors(device float* out [[buffer(0)]], device const float4* x [[buffer(1)]],
                    uint i [[thread_position_in_grid]]) {
  const float4 v = x[i];
  half4 h = half4(v);                              // element-wise conversion to half
  half2 hp = detail::hmul(h.xy, half2(2.0h));      // exact: doubling
  int4 iv = int4(v * 4.0f);                        // truncation toward zero
  uint4 uv = uint4(abs(iv));
  uchar4 c = uchar4(uv & 0xFFu);
  bool4 pos = v > float4(0.0f);
  float4 sel = select(float4(-1.0f), float4(1.0f), pos);
  int2 sh = int2(iv.xy << 1) >> 1;                 // shifts on integer vectors
  ushort2 us = ushort2(uv.zw);
  float4 cl = clamp(v, -1.0f, 1.0f);               // vector, scalar bounds
  uint2 bits = as_type<uint2>(v.xy);
  device float* o = out + i * 20;
  o[0] = float(hp.x);
  o[1] = float(hp.y);
  o[2] = float(iv.x);
  o[3] = float(iv.w);
  o[4] = float(c.y);
  o[5] = sel.x + 2.0f * sel.y + 4.0f * sel.z + 8.0f * sel.w;
  o[6] = float(sh.x);
  o[7] = float(us.y);
  o[8] = cl.x;
  o[9] = cl.w;
  o[10] = as_type<float>(bits.y);
  o[11] = kTable[i % 4];
  o[12] = all(pos) ? 1.0f : 0.0f;
  o[13] = any(!pos) ? 1.0f : 0.0f;
  o[14] = float(bfloat(v.x));                      // bfloat rounding
  o[15] = length(v.xy * v.xy);
  o[16] = float(numeric_limits<half>::max());
  o[17] = float(half(v.z) * half(0.5h));
  o[18] = fmax(v.x, NAN);                          // NaN ignored by fmax
  o[19] = float(min(int2(3, -7), int2(-1, 4)).y);  // -7
}

kernel void vector_collectives(device float2* out [[buffer(0)]], device const float2* x [[buffer(1)]],
                               uint i [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {
  const float2 v = x[i];
  const float2 s = simd_sum(v);
  const float2 r = simd_shuffle(v, ushort(31 - lane));
  const int mx = simd_max(int(lane) * (lane % 2 == 0 ? 1 : -1));
  out[2 * i] = s;
  out[2 * i + 1] = r + float2(float(mx), 0.0f);
}

kernel void with_struct(device float* out [[buffer(0)]], constant Params& p [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
  if (long(i) < p.n) out[i] = p.scale * float(i) + float(p.flags);
}

namespace ns {
kernel void in_namespace(device int* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = int(i) * 3; }
}  // namespace ns

kernel void extras(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  size_t n = 3;
  ptrdiff_t d = -1;
  o[0] = fract(-1.25f);                       // 0.75
  o[1] = max3(1.0f, 5.0f, 2.0f);              // 5
  o[2] = float(median3(3, 1, 2));             // 2
  o[3] = fmin3(2.0f, NAN, 1.0f);              // 1 (NaN ignored)
  o[4] = float(n) + float(d);                 // 2
  float2 f = fract(float2(2.5f, -0.5f));
  o[5] = f.x + f.y;                           // 1
  float c;
  o[6] = sincos(0.0f, c) + c;                 // 0 + 1
  o[7] = float(simd_vote::vote_t(0)) + float(uint(as_type<uint>(1.0f) >> 23));   // 127
}
