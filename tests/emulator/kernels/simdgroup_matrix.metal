// simdgroup_matrix (MSL 2.4 / 6.7) test kernels: 8x8 and 32x32 products from device and
// threadgroup memory with elements_per_row != 8, matrix_origin offsets and transposition, the lane
// layout through thread_elements(), and the misuses the emulator must report.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

// Operand descriptor (a list of Python ints, 8-byte longs): {elements_per_row, origin.x (column),
// origin.y (row), transpose_matrix, elements between the batch's matrices}.
template <typename T>
inline void load_operand(thread simdgroup_matrix<T, 8, 8> &m, device const T *p, constant long *d, uint b) {
  simdgroup_load(m, p + b * d[4], ulong(d[0]), ulong2(d[1], d[2]), d[3] != 0);
}

// C = A @ B + C for one 8x8 product per threadgroup (one simdgroup); operand i's descriptor is
// desc[5 * i ... 5 * i + 4]. accumulate == 0: C = A @ B (C is not read).
template <typename T>
kernel void gemm8(device const T *A [[buffer(0)]], device const T *B [[buffer(1)]], device T *C [[buffer(2)]],
                  constant long *desc [[buffer(3)]], constant long &accumulate [[buffer(4)]],
                  uint g [[threadgroup_position_in_grid]]) {
  simdgroup_matrix<T, 8, 8> a, b, c;
  load_operand(a, A, desc, g);
  load_operand(b, B, desc + 5, g);
  if (accumulate != 0) {
    load_operand(c, C, desc + 10, g);
    simdgroup_multiply_accumulate(c, a, b, c);
  } else {
    simdgroup_multiply(c, a, b);
  }
  simdgroup_store(c, C + g * desc[14], ulong(desc[10]), ulong2(desc[11], desc[12]), desc[13] != 0);
}
template [[host_name("gemm8_f32")]] kernel void gemm8<float>(device const float *, device const float *,
                                                             device float *, constant long *, constant long &, uint);
template [[host_name("gemm8_f16")]] kernel void gemm8<half>(device const half *, device const half *, device half *,
                                                            constant long *, constant long &, uint);
template [[host_name("gemm8_bf16")]] kernel void gemm8<bfloat>(device const bfloat *, device const bfloat *,
                                                               device bfloat *, constant long *, constant long &, uint);

// C (32x32, row stride ldc) = A (32x32, lda) @ B + C per threadgroup of 4 simdgroups (128
// threads); A and B staged in threadgroup memory with rows of 36 (elements_per_row 36, origins
// step through the tiles). p = {lda, ldb, ldc, b_transposed, barrier, batch stride of A, B, C}:
// b_transposed: the buffer holds B^T (loaded with transpose_matrix); barrier: 0 leaves out the
// barrier between staging and use (a planted bug the reverse and shuffled orders expose).
constant int TPAD = 36;
kernel void gemm32_tg(device const float *A [[buffer(0)]], device const float *B [[buffer(1)]],
                      device float *C [[buffer(2)]], constant long *p [[buffer(3)]],
                      uint g [[threadgroup_position_in_grid]], uint t [[thread_index_in_threadgroup]],
                      uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float sA[32 * TPAD];
  threadgroup float sB[32 * TPAD];
  device const float *a = A + g * p[5];
  device const float *b = B + g * p[6];
  device float *c = C + g * p[7];
  simdgroup_float8x8 acc[4];
  for (uint j = 0; j < 4; j++) simdgroup_load(acc[j], c, ulong(p[2]), ulong2(8 * j, 8 * sg));
  for (uint i = t; i < 32 * 32; i += 128) {
    const uint r = i / 32, k = i % 32;
    sA[r * TPAD + k] = a[r * p[0] + k];
    sB[r * TPAD + k] = b[r * p[1] + k];
  }
  if (p[4] != 0) threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint k = 0; k < 32; k += 8) {
    simdgroup_float8x8 x;
    simdgroup_load(x, sA, TPAD, ulong2(k, 8 * sg));
    for (uint j = 0; j < 4; j++) {
      simdgroup_float8x8 y;
      if (p[3] != 0)
        simdgroup_load(y, sB, TPAD, ulong2(k, 8 * j), true);  // B(k.., 8j..) = (B^T)(8j.., k..)^T
      else
        simdgroup_load(y, sB, TPAD, ulong2(8 * j, k));
      simdgroup_multiply_accumulate(acc[j], x, y, acc[j]);
    }
  }
  for (uint j = 0; j < 4; j++) simdgroup_store(acc[j], c, ulong(p[2]), ulong2(8 * j, 8 * sg));
}

// C (32x32, ldc 32) += A (32xK, lda K) @ B (Kx32, ldb 32), K a multiple of 8, one k-step of 8 at a
// time through the same threadgroup tiles (the shape of a tiled loop). p = {K, barrier after the
// staging, barrier after the use}: leaving out either is a planted bug (read before written /
// restaged while another simdgroup still reads).
kernel void gemm_kloop(device const float *A [[buffer(0)]], device const float *B [[buffer(1)]],
                       device float *C [[buffer(2)]], constant long *p [[buffer(3)]],
                       uint t [[thread_index_in_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float sA[32 * 12];  // 32 rows x 8 columns of A, rows of 12
  threadgroup float sB[8 * 36];   // 8 rows x 32 columns of B, rows of 36
  simdgroup_float8x8 acc[4];
  for (uint j = 0; j < 4; j++) simdgroup_load(acc[j], C, 32, ulong2(8 * j, 8 * sg));
  for (long k = 0; k < p[0]; k += 8) {
    for (uint i = t; i < 256; i += 128) {
      sA[(i / 8) * 12 + i % 8] = A[(i / 8) * p[0] + k + i % 8];
      sB[(i / 32) * 36 + i % 32] = B[(k + i / 32) * 32 + i % 32];
    }
    if (p[1] != 0) threadgroup_barrier(mem_flags::mem_threadgroup);
    simdgroup_float8x8 x;
    simdgroup_load(x, sA, 12, ulong2(0, 8 * sg));
    for (uint j = 0; j < 4; j++) {
      simdgroup_float8x8 y;
      simdgroup_load(y, sB, 36, ulong2(8 * j, 0));
      simdgroup_multiply_accumulate(acc[j], x, y, acc[j]);
    }
    if (p[2] != 0) threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  for (uint j = 0; j < 4; j++) simdgroup_store(acc[j], C, 32, ulong2(8 * j, 8 * sg));
}

// The same product and staging without simdgroup_matrix (the baseline the benchmark compares
// with): thread t computes row t / 4, columns 8 (t % 4) .. + 7, k in order. p as gemm32_tg's
// (b_transposed must be 0).
kernel void gemm32_scalar(device const float *A [[buffer(0)]], device const float *B [[buffer(1)]],
                          device float *C [[buffer(2)]], constant long *p [[buffer(3)]],
                          uint g [[threadgroup_position_in_grid]], uint t [[thread_index_in_threadgroup]]) {
  threadgroup float sA[32 * TPAD];
  threadgroup float sB[32 * TPAD];
  device const float *a = A + g * p[5];
  device const float *b = B + g * p[6];
  device float *c = C + g * p[7];
  for (uint i = t; i < 32 * 32; i += 128) {
    const uint r = i / 32, k = i % 32;
    sA[r * TPAD + k] = a[r * p[0] + k];
    sB[r * TPAD + k] = b[r * p[1] + k];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const uint r = t / 4, c0 = 8 * (t % 4);
  float acc[8];
  for (uint j = 0; j < 8; j++) acc[j] = 0.0f;
  for (uint k = 0; k < 32; k++) {
    const float x = sA[r * TPAD + k];
    for (uint j = 0; j < 8; j++) acc[j] += x * sB[k * TPAD + c0 + j];
  }
  for (uint j = 0; j < 8; j++) c[r * p[2] + c0 + j] += acc[j];
}

// The same product straight from device memory: each simdgroup walks matrix_origin over A's
// rows 8*sg.. and B's columns; the result goes through threadgroup memory (stored there, then
// loaded back transposed and stored transposed to C: two transpositions are the identity).
// p = {lda, ldb, ldc, batch stride of A, B, C}.
kernel void gemm32_dev(device const float *A [[buffer(0)]], device const float *B [[buffer(1)]],
                       device float *C [[buffer(2)]], constant long *p [[buffer(3)]],
                       uint g [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float sC[4][8 * 12];
  device const float *a = A + g * p[3];
  device const float *b = B + g * p[4];
  device float *c = C + g * p[5];
  for (uint j = 0; j < 4; j++) {
    simdgroup_float8x8 acc;
    simdgroup_load(acc, c, ulong(p[2]), ulong2(8 * j, 8 * sg));
    for (uint k = 0; k < 32; k += 8) {
      simdgroup_float8x8 x, y;
      simdgroup_load(x, a, ulong(p[0]), ulong2(k, 8 * sg));
      simdgroup_load(y, b, ulong(p[1]), ulong2(8 * j, k));
      simdgroup_multiply_accumulate(acc, x, y, acc);
    }
    simdgroup_store(acc, sC[sg], 12);  // this simdgroup's own slice: no barrier needed
    simdgroup_float8x8 back;
    simdgroup_load(back, sC[sg], 12, 0, true);  // back = acc^T
    simdgroup_store(back, c, ulong(p[2]), ulong2(8 * j, 8 * sg), true);
  }
}

// Layout and construction: out[6 * lane ...] = this lane's thread_elements() of M (loaded), of a
// diagonal matrix (simdgroup_matrix(T dval)) and of a filled one; then every lane sets its two
// elements through thread_elements() to 100 + 8r + c, (r, c) from MLX's coordinate formula, and
// the store writes the matrix to mat: mat[r][c] == 100 + 8r + c iff the layout is that one.
kernel void layout(device const float *M [[buffer(0)]], device float *out [[buffer(1)]],
                   device float *mat [[buffer(2)]], uint lane [[thread_index_in_simdgroup]]) {
  simdgroup_float8x8 m;
  simdgroup_load(m, M);
  const simdgroup_float8x8 diag(3.0f);
  const simdgroup_float8x8 fill = make_filled_simdgroup_matrix<float, 8, 8>(5.0f);
  out[6 * lane + 0] = m.thread_elements()[0];
  out[6 * lane + 1] = m.thread_elements()[1];
  out[6 * lane + 2] = diag.thread_elements()[0];
  out[6 * lane + 3] = diag.thread_elements()[1];
  out[6 * lane + 4] = fill.thread_elements()[0];
  out[6 * lane + 5] = fill.thread_elements()[1];
  // MLX's BaseMMAFrag::get_coord: the (row, column) of this lane's first element
  const uint qid = lane / 4;
  const uint r = (qid & 4) + (lane / 2) % 4;
  const uint c = (qid & 2) * 2 + (lane % 2) * 2;
  simdgroup_float8x8 w;
  w.thread_elements() = float2(100.0f + 8 * r + c, 101.0f + 8 * r + c);
  simdgroup_store(w, mat);
}

// An uninitialised matrix in a product: the result is NaN (the emulator's poison), not zero.
kernel void uninit(device const float *A [[buffer(0)]], device float *C [[buffer(1)]]) {
  simdgroup_float8x8 a, b, c;
  simdgroup_load(a, A);
  simdgroup_multiply(c, a, b);
  simdgroup_store(c, C);
}

// ---------------------------------------------------------------------------------------------
// misuses (each a kernel fault in the emulator; undefined on an Apple GPU)
// ---------------------------------------------------------------------------------------------
// only half of the simdgroup loads
kernel void partial_load(device float *x [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
  simdgroup_float8x8 m = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  if (lane < 16) simdgroup_load(m, x);
  simdgroup_store(m, x);
}

// every lane passes its own pointer (a per-thread address computed where a per-simdgroup one was meant)
kernel void lane_pointer(device float *x [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
  simdgroup_float8x8 m;
  simdgroup_load(m, x + lane);
  simdgroup_store(m, x);
}

// a matrix operation in a threadgroup whose threads do not fill the simdgroup (called with 16)
kernel void small_group(device float *x [[buffer(0)]]) {
  simdgroup_float8x8 m;
  simdgroup_load(m, x);
  simdgroup_store(m, x);
}

// a load whose last row lies past the end of the buffer (origin.y = row0)
kernel void load_rows(device const float *x [[buffer(0)]], device float *y [[buffer(1)]],
                      constant long &row0 [[buffer(2)]]) {
  simdgroup_float8x8 m;
  simdgroup_load(m, x, 8, ulong2(0, row0));
  simdgroup_store(m, y);
}
