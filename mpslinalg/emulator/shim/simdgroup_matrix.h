// simdgroup_matrix.h — Apple's SIMD-group matrices (<metal_simdgroup_matrix>, MSL §2.4 and §6.7),
// the part both targets share: the type, where each lane keeps its elements, construction, and
// each lane's share of a load, a store and a product.
//
// Included by cpu.h and cuda.h inside namespace metal, after each has defined `__mpsle_lane_id()`
// (the calling thread's index in its simdgroup) and the macros MPSLE_SGM_SITE_ARGS (trailing
// call-site parameters, with a leading comma, or nothing), MPSLE_SGM_SITE (their value) and
// MPSLE_SGM_ACCESS_ON_ARRIVAL (below). Each shim then defines the two collective steps declared
// below with its own rendezvous: cpu.h through mpsle_collective (the mechanism of simd_shuffle and
// simd_sum, which also checks participation and argument uniformity), cuda.h with the warp
// (bar.warp.sync, shuffles).
//
// Layout: an 8x8 matrix is spread over the 32 lanes, two elements each; lane l holds row
// r = 4*(l>>4 & 1) + (l>>1 & 3) at columns c and c + 1, c = 4*(l>>3 & 1) + 2*(l & 1). This is the
// layout of Apple's hardware as MLX's steel kernels rely on it through thread_elements() (their
// BaseMMAFrag::get_coord); MSL itself leaves the mapping unspecified, so a kernel may rely on it
// only through thread_elements().
#pragma once

inline unsigned __mpsle_sgm_row(unsigned l) { return 4u * ((l >> 4) & 1u) + ((l >> 1) & 3u); }
inline unsigned __mpsle_sgm_col(unsigned l) { return 4u * ((l >> 3) & 1u) + 2u * (l & 1u); }
// the lane holding element (r, c) (in slot c & 1)
inline unsigned __mpsle_sgm_lane(unsigned r, unsigned c) {
  return ((r >> 2) << 4) | ((c >> 2) << 3) | ((r & 3u) << 1) | ((c >> 1) & 1u);
}

template <class T, int Cols, int Rows> struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "simdgroup_matrix: Metal has only 8x8 SIMD-group matrices");
  static_assert(__mpsle_same<T, float>::value || __mpsle_same<T, half>::value || __mpsle_same<T, bfloat>::value,
                "simdgroup_matrix: the element type must be float, half or bfloat");
  typedef vec<T, 2> __elements;
  __elements __e;
  // An uninitialised matrix reads as NaN (as poisoned threadgroup memory does): a product that
  // uses one before it was loaded or filled shows up in the result.
  simdgroup_matrix() : __e(__elements(T(__builtin_nanf("")))) {}
  // MSL: "Creates a diagonal matrix with the given value."
  explicit simdgroup_matrix(T dval) {
    const unsigned l = __mpsle_lane_id(), r = __mpsle_sgm_row(l), c = __mpsle_sgm_col(l);
    __e[0] = r == c ? dval : T(0);
    __e[1] = r == c + 1 ? dval : T(0);
  }
  // This lane's two elements (row and columns as in the layout above).
  thread __elements &thread_elements() { return __e; }
  const thread __elements &thread_elements() const { return __e; }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

// MSL: "Initializes a SIMD-group matrix filled with the given value." (lane-local: no exchange)
template <class T, int Cols, int Rows> inline simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(const T value) {
  simdgroup_matrix<T, Cols, Rows> m;
  m.__e = vec<T, 2>(value);
  return m;
}

// `a * b` is MSL too; the emulator finds a kernel's collectives by the names it calls, so an
// operator would escape that: say what to write instead.
template <class T, int C, int R, int K>
simdgroup_matrix<T, C, R> operator*(const thread simdgroup_matrix<T, K, R> &, const thread simdgroup_matrix<T, C, K> &) {
  static_assert(sizeof(T) == 0, "simdgroup_matrix operator* is not emulated: write simdgroup_multiply(d, a, b)");
  return {};
}

// This lane's share of a load / store: element (r, c) of the matrix is
// p[(origin.y + r) * elements_per_row + origin.x + c], or with transpose_matrix
// p[(origin.y + c) * elements_per_row + origin.x + r] (origin.x counts columns and origin.y rows
// of the memory layout, before the transposition: MLX's and llama.cpp's call forms rely on this).
template <class T, class P> inline void __mpsle_sgm_load_lane(vec<T, 2> &e, P src, ulong epr, ulong2 o, bool tr, unsigned l) {
  const ulong r = __mpsle_sgm_row(l), c = __mpsle_sgm_col(l);
  for (ulong k = 0; k < 2; k++) e[k] = tr ? src[(o.y + c + k) * epr + o.x + r] : src[(o.y + r) * epr + o.x + c + k];
}
template <class T, class P> inline void __mpsle_sgm_store_lane(vec<T, 2> e, P dst, ulong epr, ulong2 o, bool tr, unsigned l) {
  const ulong r = __mpsle_sgm_row(l), c = __mpsle_sgm_col(l);
  for (ulong k = 0; k < 2; k++) {
    if (tr)
      dst[(o.y + c + k) * epr + o.x + r] = e[k];
    else
      dst[(o.y + r) * epr + o.x + c + k] = e[k];
  }
}

// This lane's two elements of a*b (+ c): `f.a(l)` / `f.b(l)` return lane l's elements of a / b
// (the cpu target reads them from the gathered simdgroup, the cuda target shuffles them).
// Rounding: float arithmetic (half and bfloat products are exact in float), the eight products
// summed in k order, then c added, each operation rounded (no FMA); Apple's matrix unit may
// round differently, hence tests bound the error instead of comparing bits.
template <class T, class F> inline vec<T, 2> __mpsle_sgm_mac(const F &f, unsigned l, const vec<T, 2> *c) {
  const unsigned r = __mpsle_sgm_row(l), j = __mpsle_sgm_col(l);
  float s0 = 0.0f, s1 = 0.0f;
  for (unsigned k = 0; k < 8; k += 2) {
    const vec<T, 2> ar = f.a(__mpsle_sgm_lane(r, k));   // A(r, k), A(r, k + 1)
    const vec<T, 2> b0 = f.b(__mpsle_sgm_lane(k, j));   // B(k, j), B(k, j + 1)
    const vec<T, 2> b1 = f.b(__mpsle_sgm_lane(k + 1, j));
    const float a0 = (float)ar[0], a1 = (float)ar[1];
    if (k == 0) {  // start from the first product, not 0 (-0 stays -0)
      s0 = a0 * (float)b0[0];
      s1 = a0 * (float)b0[1];
    } else {
      s0 += a0 * (float)b0[0];
      s1 += a0 * (float)b0[1];
    }
    s0 += a1 * (float)b1[0];
    s1 += a1 * (float)b1[1];
  }
  if (c) {
    s0 += (float)(*c)[0];
    s1 += (float)(*c)[1];
  }
  vec<T, 2> d;
  d[0] = (T)s0;
  d[1] = (T)s1;
  return d;
}

// ---------------------------------------------------------------------------------------------
// the collective steps each shim defines after including this header
// ---------------------------------------------------------------------------------------------
enum __mpsle_sgm_op { __mpsle_sgm_load_op, __mpsle_sgm_store_op };
// every lane of the simdgroup arrives (with the arguments of a load or store); returns its lane
inline unsigned __mpsle_sgm_enter(__mpsle_sgm_op op, ulong p, ulong epr, ulong2 o, bool tr, unsigned site);
// this lane's share of a*b (+ *c when c is not null), from every lane's elements of a and b
template <class T> inline vec<T, 2> __mpsle_sgm_multiply(vec<T, 2> a, vec<T, 2> b, const vec<T, 2> *c, unsigned site);

// ---------------------------------------------------------------------------------------------
// MSL §6.7: simdgroup_load / simdgroup_store (device and threadgroup memory), simdgroup_multiply,
// simdgroup_multiply_accumulate
// ---------------------------------------------------------------------------------------------
// MPSLE_SGM_ACCESS_ON_ARRIVAL (set by the shim): 1 = a lane reads or writes its elements when it
// reaches the operation, before the others (cpu target: as simd_* read their operand, so memory
// that other threads store without a barrier in between is read unwritten (poison) in some
// order); 0 = after the whole simdgroup arrived (cuda target: the warp is synchronised first).
#define MPSLE_SGM_MEMORY(space)                                                                           \
  template <class T, int C, int R>                                                                        \
  inline void simdgroup_load(thread simdgroup_matrix<T, C, R> &d, const space T *src, ulong elements_per_row = C, \
                             ulong2 matrix_origin = 0, bool transpose_matrix = false MPSLE_SGM_SITE_ARGS) { \
    if (MPSLE_SGM_ACCESS_ON_ARRIVAL)                                                                      \
      __mpsle_sgm_load_lane<T>(d.__e, src, elements_per_row, matrix_origin, transpose_matrix, __mpsle_lane_id()); \
    const unsigned l = __mpsle_sgm_enter(__mpsle_sgm_load_op, (ulong)src, elements_per_row, matrix_origin, \
                                         transpose_matrix, MPSLE_SGM_SITE);                               \
    if (!MPSLE_SGM_ACCESS_ON_ARRIVAL)                                                                     \
      __mpsle_sgm_load_lane<T>(d.__e, src, elements_per_row, matrix_origin, transpose_matrix, l);         \
  }                                                                                                       \
  template <class T, int C, int R>                                                                        \
  inline void simdgroup_store(const thread simdgroup_matrix<T, C, R> &a, space T *dst, ulong elements_per_row = C, \
                              ulong2 matrix_origin = 0, bool transpose_matrix = false MPSLE_SGM_SITE_ARGS) { \
    if (MPSLE_SGM_ACCESS_ON_ARRIVAL)                                                                      \
      __mpsle_sgm_store_lane<T>(a.__e, dst, elements_per_row, matrix_origin, transpose_matrix, __mpsle_lane_id()); \
    const unsigned l = __mpsle_sgm_enter(__mpsle_sgm_store_op, (ulong)dst, elements_per_row, matrix_origin, \
                                         transpose_matrix, MPSLE_SGM_SITE);                               \
    if (!MPSLE_SGM_ACCESS_ON_ARRIVAL)                                                                     \
      __mpsle_sgm_store_lane<T>(a.__e, dst, elements_per_row, matrix_origin, transpose_matrix, l);        \
  }
MPSLE_SGM_MEMORY(device)
MPSLE_SGM_MEMORY(threadgroup)
#undef MPSLE_SGM_MEMORY

template <class T, int C, int R, int K>
inline void simdgroup_multiply(thread simdgroup_matrix<T, C, R> &d, const thread simdgroup_matrix<T, K, R> &a,
                               const thread simdgroup_matrix<T, C, K> &b MPSLE_SGM_SITE_ARGS) {
  d.__e = __mpsle_sgm_multiply<T>(a.__e, b.__e, nullptr, MPSLE_SGM_SITE);
}
template <class T, int C, int R, int K>
inline void simdgroup_multiply_accumulate(thread simdgroup_matrix<T, C, R> &d, const thread simdgroup_matrix<T, K, R> &a,
                                          const thread simdgroup_matrix<T, C, K> &b,
                                          const thread simdgroup_matrix<T, C, R> &c MPSLE_SGM_SITE_ARGS) {
  const vec<T, 2> ce = c.__e;  // before d is written: d may be c
  d.__e = __mpsle_sgm_multiply<T>(a.__e, b.__e, &ce, MPSLE_SGM_SITE);
}
