// cpu.h — force-included before every kernel source compiled for the emulator's CPU target.
//
// Address spaces are clang's OpenCL address-space attributes, so passing a `device float*` where
// a `thread float*` is expected is a compile error, as in Metal. Barriers and simdgroup
// collectives call into cpu_runtime.c, which runs the GPU threads of a threadgroup as fibers;
// every call site passes its line and column (the pre-pass keeps #line markers) so divergence is
// reported at the .metal line. Atomics are plain read-modify-write: fibers are never preempted.
#pragma once
// The shim itself uses C++17 (if constexpr, fold expressions); the kernel source after it is held
// to C++14, as MSL is (the compile flags make C++17 extensions errors).
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wc++17-extensions"
#include "cpu_abi.h"

#define constant __attribute__((opencl_constant))
#define __METAL_VERSION__ 310

#include "common.h"  // the other address-space keywords, msl_types.h, what both targets share

#define MPSLE_SITE (__mpsle_line << 12 | (__mpsle_col & 0xFFFu))
#define MPSLE_SITE_ARGS unsigned __mpsle_line = __builtin_LINE(), unsigned __mpsle_col = __builtin_COLUMN()

namespace metal {

inline void threadgroup_barrier(mem_flags, MPSLE_SITE_ARGS) { mpsle_barrier(MPSLE_SITE); }
inline void simdgroup_barrier(mem_flags, MPSLE_SITE_ARGS) {
  unsigned n, lane;
  mpsle_collective(nullptr, 0, MPSLE_SITE, MPSLE_OP_SIMD_BARRIER, &n, &lane);
}

// ---------------------------------------------------------------------------------------------
// simdgroup collectives (width 32, lanes = consecutive thread indices in the threadgroup)
// ---------------------------------------------------------------------------------------------
template <class T> inline T __mpsle_lane(const void *base, unsigned i) {
  T v;
  __builtin_memcpy(&v, (const unsigned char *)base + 32u * i, sizeof(T));
  return v;
}
template <class T> inline const void *__mpsle_gather(T x, unsigned site, unsigned op, unsigned &n, unsigned &lane) {
  static_assert(sizeof(T) <= 32, "simdgroup operation on a value larger than 32 bytes");
  return mpsle_collective(&x, sizeof(T), site, op, &n, &lane);
}

#define MPSLE_REDUCE(name, expr)                                            \
  template <class T> inline T name(T x, MPSLE_SITE_ARGS) {                  \
    unsigned n, lane;                                                       \
    const void *b = __mpsle_gather(x, MPSLE_SITE, MPSLE_OP_REDUCE, n, lane); \
    T a = __mpsle_lane<T>(b, 0);                                            \
    for (unsigned i = 1; i < n; i++) {                                      \
      T y = __mpsle_lane<T>(b, i);                                          \
      a = expr;                                                             \
    }                                                                       \
    return a;                                                               \
  }
MPSLE_SIMD_REDUCTIONS(MPSLE_REDUCE)
#undef MPSLE_REDUCE

#define MPSLE_SCAN(name, init, expr, inclusive)                           \
  template <class T> inline T name(T x, MPSLE_SITE_ARGS) {                \
    unsigned n, lane;                                                     \
    const void *b = __mpsle_gather(x, MPSLE_SITE, MPSLE_OP_SCAN, n, lane); \
    T a = T(init);                                                        \
    unsigned end = inclusive ? lane + 1 : lane;                           \
    for (unsigned i = 0; i < end; i++) {                                  \
      T y = __mpsle_lane<T>(b, i);                                        \
      a = expr;                                                           \
    }                                                                     \
    return a;                                                             \
  }
MPSLE_SIMD_SCANS(MPSLE_SCAN)
#undef MPSLE_SCAN

#define MPSLE_SHUF(name, src)                                                    \
  template <class T> inline T name(T x, ushort arg, MPSLE_SITE_ARGS) {           \
    unsigned n, lane;                                                            \
    const void *b = __mpsle_gather(x, MPSLE_SITE, MPSLE_OP_SHUFFLE, n, lane);    \
    long s = (src);                                                              \
    return (s >= 0 && s < (long)n) ? __mpsle_lane<T>(b, (unsigned)s) : x;        \
  }
MPSLE_SIMD_SHUFFLES(MPSLE_SHUF)
#undef MPSLE_SHUF
template <class T> inline T simd_broadcast_first(T x, MPSLE_SITE_ARGS) {
  unsigned n, lane;
  const void *b = __mpsle_gather(x, MPSLE_SITE, MPSLE_OP_SHUFFLE, n, lane);
  return __mpsle_lane<T>(b, 0);
}

// every lane of a simdgroup is active in the emulator (collectives must be uniform per simdgroup)
inline bool simd_is_first() { return mpsle_current_lane() == 0; }

inline simd_vote simd_ballot(bool p, MPSLE_SITE_ARGS) {
  unsigned n, lane;
  const void *b = __mpsle_gather(p, MPSLE_SITE, MPSLE_OP_VOTE, n, lane);
  unsigned long m = 0;
  for (unsigned i = 0; i < n; i++) m |= (unsigned long)__mpsle_lane<bool>(b, i) << i;
  return simd_vote(m);
}
inline bool simd_any(bool p, MPSLE_SITE_ARGS) {
  unsigned n, lane;
  const void *b = __mpsle_gather(p, MPSLE_SITE, MPSLE_OP_VOTE, n, lane);
  for (unsigned i = 0; i < n; i++)
    if (__mpsle_lane<bool>(b, i)) return true;
  return false;
}
inline bool simd_all(bool p, MPSLE_SITE_ARGS) {
  unsigned n, lane;
  const void *b = __mpsle_gather(p, MPSLE_SITE, MPSLE_OP_VOTE, n, lane);
  for (unsigned i = 0; i < n; i++)
    if (!__mpsle_lane<bool>(b, i)) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// simdgroup matrices (simdgroup_matrix.h): load, store and multiply are collectives of
// mpsle_collective, which checks a full simdgroup, the same call site on every lane and, for
// load/store, the same arguments, and restarts the thread order at the release. A lane reads or
// writes memory when it arrives (unbarriered stores of other threads are missed in some order).
// ---------------------------------------------------------------------------------------------
inline unsigned __mpsle_lane_id() { return mpsle_current_lane(); }
#define MPSLE_SGM_SITE_ARGS , MPSLE_SITE_ARGS
#define MPSLE_SGM_SITE MPSLE_SITE
#define MPSLE_SGM_ACCESS_ON_ARRIVAL 1
#include "simdgroup_matrix.h"

// arrive with the arguments every lane must agree on (32 bytes: transpose_matrix is the top bit of
// elements_per_row); returns the caller's lane
inline unsigned __mpsle_sgm_enter(__mpsle_sgm_op op, ulong p, ulong epr, ulong2 o, bool tr, unsigned site) {
  const ulong args[4] = {p, epr ^ ((ulong)tr << 63), o.x, o.y};
  unsigned n, lane;
  mpsle_collective(args, sizeof args, site, op == __mpsle_sgm_load_op ? MPSLE_OP_MATRIX_LOAD : MPSLE_OP_MATRIX_STORE,
                   &n, &lane);
  return lane;
}
// a product gathers both factors of every lane (16 bytes for float); each lane computes its share
template <class T> struct __mpsle_sgm_pair {
  vec<T, 2> a, b;
};
template <class T> struct __mpsle_sgm_gathered {
  const void *buf;
  vec<T, 2> a(unsigned l) const { return __mpsle_lane<__mpsle_sgm_pair<T>>(buf, l).a; }
  vec<T, 2> b(unsigned l) const { return __mpsle_lane<__mpsle_sgm_pair<T>>(buf, l).b; }
};
template <class T> inline vec<T, 2> __mpsle_sgm_multiply(vec<T, 2> a, vec<T, 2> b, const vec<T, 2> *c, unsigned site) {
  const __mpsle_sgm_pair<T> mine = {a, b};
  unsigned n, lane;
  const void *buf = mpsle_collective(&mine, sizeof mine, site, MPSLE_OP_MATRIX_MULTIPLY, &n, &lane);
  return __mpsle_sgm_mac<T>(__mpsle_sgm_gathered<T>{buf}, lane, c);
}

// ---------------------------------------------------------------------------------------------
// atomics (functional; memory order is not emulated)
// ---------------------------------------------------------------------------------------------

// Implemented with relaxed __atomic builtins (so that the ThreadSanitizer mode sees atomics, not
// races); read-modify-writes as compare-exchange loops, which work for int, uint and float alike.
#define MPSLE_AT_VAL decltype(+obj->__v)
#define MPSLE_AT_PTR(obj) ((MPSLE_AT_VAL *)&(obj)->__v)
template <class P> inline auto atomic_load_explicit(P obj, memory_order) -> MPSLE_AT_VAL {
  MPSLE_AT_VAL r;
  __atomic_load(MPSLE_AT_PTR(obj), &r, __ATOMIC_RELAXED);
  return r;
}
template <class P, class V> inline void atomic_store_explicit(P obj, V v, memory_order) {
  MPSLE_AT_VAL x = (MPSLE_AT_VAL)v;
  __atomic_store(MPSLE_AT_PTR(obj), &x, __ATOMIC_RELAXED);
}
#define MPSLE_AT_RMW(name, expr)                                                                  \
  template <class P, class V> inline auto name(P obj, V v, memory_order) -> MPSLE_AT_VAL {         \
    MPSLE_AT_VAL old, nv;                                                                         \
    __atomic_load(MPSLE_AT_PTR(obj), &old, __ATOMIC_RELAXED);                                     \
    do {                                                                                          \
      nv = (MPSLE_AT_VAL)(expr);                                                                  \
    } while (!__atomic_compare_exchange(MPSLE_AT_PTR(obj), &old, &nv, true, __ATOMIC_RELAXED,     \
                                        __ATOMIC_RELAXED));                                       \
    return old;                                                                                   \
  }
MPSLE_AT_RMW(atomic_exchange_explicit, v)
MPSLE_AT_RMW(atomic_fetch_add_explicit, old + v)
MPSLE_AT_RMW(atomic_fetch_sub_explicit, old - v)
MPSLE_AT_RMW(atomic_fetch_and_explicit, old & v)
MPSLE_AT_RMW(atomic_fetch_or_explicit, old | v)
MPSLE_AT_RMW(atomic_fetch_xor_explicit, old ^ v)
MPSLE_AT_RMW(atomic_fetch_min_explicit, (MPSLE_AT_VAL)v < old ? (MPSLE_AT_VAL)v : old)
MPSLE_AT_RMW(atomic_fetch_max_explicit, old < (MPSLE_AT_VAL)v ? (MPSLE_AT_VAL)v : old)
#undef MPSLE_AT_RMW
template <class P, class E, class V>
inline bool atomic_compare_exchange_weak_explicit(P obj, E expected, V desired, memory_order, memory_order) {
  MPSLE_AT_VAL exp = *expected, des = (MPSLE_AT_VAL)desired;
  const bool ok =
      __atomic_compare_exchange(MPSLE_AT_PTR(obj), &exp, &des, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  if (!ok) *expected = exp;
  return ok;
}
#undef MPSLE_AT_PTR
#undef MPSLE_AT_VAL

}  // namespace metal

using namespace metal;
#pragma clang diagnostic pop
