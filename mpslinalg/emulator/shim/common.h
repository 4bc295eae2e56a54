// common.h — the part of the Metal surface that the cpu and cuda shims define alike.
//
// Included by cpu.h and cuda.h after each has defined `constant` (the one address-space keyword
// they spell differently); defines the other address-space keywords, includes msl_types.h, and
// declares the thread-position conversion, barrier flags, simd_vote, the atomic types and the
// lists of simdgroup collectives that each shim instantiates with its own implementation.
#pragma once

#define device __attribute__((opencl_global))
#define threadgroup __attribute__((opencl_local))
#define thread
#define threadgroup_imageblock __attribute__((opencl_local))
#define METAL_FUNC inline

#include "msl_types.h"

// thread-position attributes: the generated launcher converts the runtime's uint[3] to the
// declared type (uint, ushort, uint2, uint3, ...)
template <class T> inline T __mpsle_attr(const uint32_t *v) {
  if constexpr (__mpsle_vt<T>::is_vec) {
    T r;
    for (int i = 0; i < __mpsle_vt<T>::n; i++) r[i] = (typename __mpsle_vt<T>::elem)v[i];
    return r;
  } else {
    return (T)v[0];
  }
}

// Simdgroup collectives, as X-macro lists: a shim defines MPSLE_REDUCE(name, expr) (combine the
// running value `a` with lane value `y`), MPSLE_SCAN(name, init, expr, inclusive) and
// MPSLE_SHUF(name, src) (source lane from the caller's `lane`, argument `arg` and simdgroup
// width `n`), then expands the list.
#define MPSLE_SIMD_REDUCTIONS(X) \
  X(simd_sum, a + y)             \
  X(simd_product, a * y)         \
  X(simd_min, min(a, y))         \
  X(simd_max, max(a, y))         \
  X(simd_and, a & y)             \
  X(simd_or, a | y)              \
  X(simd_xor, a ^ y)
#define MPSLE_SIMD_SCANS(X)                           \
  X(simd_prefix_inclusive_sum, 0, a + y, true)        \
  X(simd_prefix_exclusive_sum, 0, a + y, false)       \
  X(simd_prefix_inclusive_product, 1, a * y, true)    \
  X(simd_prefix_exclusive_product, 1, a * y, false)
#define MPSLE_SIMD_SHUFFLES(X)                                  \
  X(simd_shuffle, (long)arg)                                    \
  X(simd_broadcast, (long)arg)                                  \
  X(simd_shuffle_down, (long)lane + arg)                        \
  X(simd_shuffle_up, (long)lane - (long)arg)                    \
  X(simd_shuffle_xor, (long)(lane ^ arg))                       \
  X(simd_shuffle_rotate_down, (long)((lane + arg) % n))         \
  X(simd_shuffle_rotate_up, (long)((lane + n - arg % n) % n))

namespace metal {

enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4, mem_threadgroup_imageblock = 8 };
inline constexpr mem_flags operator|(mem_flags a, mem_flags b) { return (mem_flags)((int)a | (int)b); }

struct simd_vote {
  typedef unsigned long vote_t;
  vote_t v;
  explicit simd_vote(vote_t x = 0) : v(x) {}
  explicit operator vote_t() const { return v; }
  bool all() const { return v == 0xFFFFFFFFul; }
  bool any() const { return v != 0; }
};

enum memory_order { memory_order_relaxed, memory_order_acquire, memory_order_release, memory_order_acq_rel, memory_order_seq_cst };
template <class T> struct atomic {
  T __v;
};
typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<float> atomic_float;
typedef atomic<bool> atomic_bool;
typedef atomic<ulong> atomic_ulong;
typedef atomic<long> atomic_long;

}  // namespace metal
