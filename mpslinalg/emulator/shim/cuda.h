// cuda.h — force-included before every kernel source compiled for the emulator's cuda target.
//
// clang compiles the (pre-passed) Metal source in CUDA device mode: `-x cuda --cuda-device-only
// -nocudainc -nocudalib`, libdevice linked as builtin bitcode. No CUDA header is included (clang's
// wrapper headers need files CUDA 13 removed, and MSL's `device`/`constant` keywords collide with
// them): everything below uses clang's NVPTX builtins.
//
// Mapping (DESIGN §5b):
//   device       -> NVPTX global address space (a real qualifier, as on the cpu target)
//   threadgroup  -> NVPTX shared address space; every kernel-scope `threadgroup T a[N];` (which the
//                   pre-pass turns into `mpsle_tg_slot(slot, size, align)`) becomes a static
//                   __shared__ array of its own (per slot, size and alignment)
//   constant     -> `const` in the generic space (Metal's constant buffers live in device memory:
//                   NVPTX's constant bank would be the wrong memory); `constant T&` kernel
//                   parameters are passed by value, which are the same bytes as `setBytes`
//   threadgroup_barrier -> __syncthreads (bar.sync 0: it orders device memory too, stronger than
//                   a mem_threadgroup barrier); simdgroup_barrier -> bar.warp.sync
//   simd_*       -> warp shuffles and votes; a simdgroup is a warp because the launcher launches
//                   kernels with barriers/collectives with exact threadgroup shapes
//   simdgroup_matrix -> two elements per lane (simdgroup_matrix.h), bar.warp.sync + shuffles
//   atomics      -> clang __atomic builtins (relaxed), native on sm_70+
//   math         -> libdevice (__nv_*) except sqrt, which stays correctly rounded (sqrt.rn)
#pragma once
// The shim itself uses C++17; the kernel source after it is held to C++14, as MSL is (the compile
// flags make C++17 extensions errors, as on the cpu target).
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wc++17-extensions"

#if !defined(__CUDA__) || !defined(__CUDA_ARCH__)
#error "cuda.h is the device-side shim of the emulator's cuda target (clang -x cuda --cuda-device-only)"
#endif

#define __MPSLE_DEV __attribute__((__device__))
#define __MPSLE_GLOBAL __attribute__((__global__))
#define __MPSLE_SHARED __attribute__((__shared__))

typedef unsigned int uint32_t;
typedef unsigned long uint64_t;

// ---------------------------------------------------------------------------------------------
// libdevice: what msl_types.h spells as C builtins is routed to libdevice's __nv_* functions
// (clang would lower the builtins to libm calls, which do not exist on the device).
// fabs/floor/ceil/trunc/rint/fmin/fmax/copysign/fma/sqrt stay builtins: they map to PTX
// instructions (sqrt.rn.f32 is correctly rounded, like Metal's precise::sqrt).
// ---------------------------------------------------------------------------------------------
#define MPSLE_NV1(f) extern "C" __MPSLE_DEV float __nv_##f(float);
#define MPSLE_NV2(f) extern "C" __MPSLE_DEV float __nv_##f(float, float);
MPSLE_NV1(expf) MPSLE_NV1(exp2f) MPSLE_NV1(logf) MPSLE_NV1(log2f) MPSLE_NV1(log10f)
MPSLE_NV1(sinf) MPSLE_NV1(cosf) MPSLE_NV1(tanf) MPSLE_NV1(asinf) MPSLE_NV1(acosf) MPSLE_NV1(atanf)
MPSLE_NV1(sinhf) MPSLE_NV1(coshf) MPSLE_NV1(tanhf) MPSLE_NV1(asinhf) MPSLE_NV1(acoshf) MPSLE_NV1(atanhf)
MPSLE_NV1(roundf) MPSLE_NV1(cbrtf)
MPSLE_NV2(powf) MPSLE_NV2(atan2f) MPSLE_NV2(fmodf) MPSLE_NV2(hypotf) MPSLE_NV2(fdimf)
#undef MPSLE_NV1
#undef MPSLE_NV2
extern "C" __MPSLE_DEV float __nv_ldexpf(float, int);
extern "C" __MPSLE_DEV float __nv_frexpf(float, int *);
extern "C" __MPSLE_DEV float __nv_modff(float, float *);
#define __builtin_expf __nv_expf
#define __builtin_exp2f __nv_exp2f
#define __builtin_logf __nv_logf
#define __builtin_log2f __nv_log2f
#define __builtin_log10f __nv_log10f
#define __builtin_sinf __nv_sinf
#define __builtin_cosf __nv_cosf
#define __builtin_tanf __nv_tanf
#define __builtin_asinf __nv_asinf
#define __builtin_acosf __nv_acosf
#define __builtin_atanf __nv_atanf
#define __builtin_sinhf __nv_sinhf
#define __builtin_coshf __nv_coshf
#define __builtin_tanhf __nv_tanhf
#define __builtin_asinhf __nv_asinhf
#define __builtin_acoshf __nv_acoshf
#define __builtin_atanhf __nv_atanhf
#define __builtin_roundf __nv_roundf
#define __builtin_cbrtf __nv_cbrtf
#define __builtin_powf __nv_powf
#define __builtin_atan2f __nv_atan2f
#define __builtin_fmodf __nv_fmodf
#define __builtin_hypotf __nv_hypotf
#define __builtin_fdimf __nv_fdimf
#define __builtin_ldexpf __nv_ldexpf
#define __builtin_frexpf(x, e) __nv_frexpf((x), (int *)(e))
#define __builtin_modff(x, p) __nv_modff((x), (float *)(p))

// ---------------------------------------------------------------------------------------------
// address spaces
// ---------------------------------------------------------------------------------------------
#define constant const  // the other keywords are in common.h, as on the cpu target

// Everything from here to the generated launchers is host+device code (no __device__ spelling
// needed in msl_types.h or in the kernel source). The launcher source closes this region.
#pragma clang force_cuda_host_device begin

#include "common.h"  // the other address-space keywords, msl_types.h, what both targets share

// ---------------------------------------------------------------------------------------------
// thread-position values (the same record the cpu target fills; the launcher computes it)
// ---------------------------------------------------------------------------------------------
struct mpsle_tid {
  uint32_t tpig[3], tpitg[3], tgpig[3], tptg[3], dtptg[3], tgpg[3], tpg[3];
  uint32_t tiitg, tiisg, sgiitg, sgptg, dsgptg, tpsg;
};
// launch geometry, passed by value as the kernel's first parameter
struct mpsle_geom {
  uint32_t grid[3];  // threads (dispatchThreads)
  uint32_t req[3];   // requested threadgroup size
  uint32_t goff[3];  // threadgroup offset of this launch (edge groups are launched separately)
  uint32_t exact;    // 1: every CUDA block is exactly one (possibly edge) threadgroup
};

#define MPSLE_SREG(r) ((uint32_t)__nvvm_read_ptx_sreg_##r())

// Fills the record; returns false for a thread outside the grid (only in non-exact launches).
inline bool __mpsle_fill(mpsle_tid *t, const mpsle_geom &g) {
  const uint32_t tid[3] = {MPSLE_SREG(tid_x), MPSLE_SREG(tid_y), MPSLE_SREG(tid_z)};
  const uint32_t bid[3] = {MPSLE_SREG(ctaid_x), MPSLE_SREG(ctaid_y), MPSLE_SREG(ctaid_z)};
  bool inside = true;
  for (int d = 0; d < 3; d++) {
    const uint32_t grp = bid[d] + g.goff[d];
    const uint32_t base = grp * g.req[d];
    const uint32_t left = g.grid[d] - base;
    t->tpitg[d] = tid[d];
    t->tgpig[d] = grp;
    t->tpig[d] = base + tid[d];
    t->tptg[d] = left < g.req[d] ? left : g.req[d];
    t->dtptg[d] = g.req[d];
    t->tgpg[d] = (g.grid[d] + g.req[d] - 1) / g.req[d];
    t->tpg[d] = g.grid[d];
    inside = inside && t->tpig[d] < g.grid[d];
  }
  const uint32_t *a = t->tptg;
  const uint32_t lin = tid[0] + a[0] * (tid[1] + a[1] * tid[2]);
  const uint32_t n = a[0] * a[1] * a[2];
  const uint32_t nreq = g.req[0] * g.req[1] * g.req[2];
  t->tiitg = lin;
  t->tiisg = lin % 32u;
  t->sgiitg = lin / 32u;
  t->sgptg = (n + 31u) / 32u;
  t->dsgptg = (nreq + 31u) / 32u;
  t->tpsg = 32u;
  return inside;
}

// ---------------------------------------------------------------------------------------------
// threadgroup memory: one static __shared__ array per (slot, size, alignment)
// ---------------------------------------------------------------------------------------------
template <int S, unsigned long Z, unsigned long A> __MPSLE_DEV inline void *__mpsle_tg_slot() {
  __MPSLE_SHARED __attribute__((aligned(A < 16 ? 16 : A))) static char buf[Z];
  return buf;
}
#define mpsle_tg_slot(s, z, a) __mpsle_tg_slot<(s), (z), (a)>()

namespace metal {

// lanes of the calling thread's simdgroup (a partial last simdgroup has fewer than 32)
inline unsigned __mpsle_simd_lanes() {
  const unsigned n = MPSLE_SREG(ntid_x) * MPSLE_SREG(ntid_y) * MPSLE_SREG(ntid_z);
  const unsigned lin = MPSLE_SREG(tid_x) + MPSLE_SREG(ntid_x) * (MPSLE_SREG(tid_y) + MPSLE_SREG(ntid_y) * MPSLE_SREG(tid_z));
  const unsigned left = n - (lin & ~31u);
  return left < 32u ? left : 32u;
}
inline unsigned __mpsle_simd_mask(unsigned n) { return n >= 32u ? 0xFFFFFFFFu : (1u << n) - 1u; }
// Every simdgroup of the calling thread's threadgroup is full (its size is a multiple of 32). A
// function of %ntid only, the same for every thread of the group: the fast paths below branch on
// it (a test of this simdgroup's lane count, which depends on %tid, needs one more register).
inline bool __mpsle_full_groups() {
  return ((MPSLE_SREG(ntid_x) * MPSLE_SREG(ntid_y) * MPSLE_SREG(ntid_z)) & 31u) == 0u;
}
inline unsigned __mpsle_lane_id() { return MPSLE_SREG(laneid); }

// Full simdgroups (threadgroups whose size is a multiple of 32) take a fast path in the barrier and
// the reductions: an immediate full mask, which ptxas compiles to the bare instruction. With a mask
// in a register it emits a convergence check per collective (MATCH.ANY, REDUX.OR, VOTEU.ANY, a
// divergent-branch test: 5-6 instructions on sm_90), measured in lu_small's per-column cost.
// Shuffles, broadcasts and votes keep the one path: a second copy of every shuffle grew
// lu_panel_look's code by 18-27% (sm_90), kernels bound by instruction fetch.
inline void threadgroup_barrier(mem_flags) { __syncthreads(); }
inline void simdgroup_barrier(mem_flags) {
  if (__mpsle_full_groups())
    __nvvm_bar_warp_sync(0xFFFFFFFFu);
  else
    __nvvm_bar_warp_sync(__mpsle_simd_mask(__mpsle_simd_lanes()));
}

// ---------------------------------------------------------------------------------------------
// simdgroup collectives (width 32; lanes = consecutive thread indices = the warp's lanes)
// ---------------------------------------------------------------------------------------------
// value of lane `src` (XOR: of lane `own lane ^ src`); every lane of the simdgroup must call; any
// type, moved as 32-bit words
template <bool XOR = false, class T> inline T __mpsle_shfl(unsigned mask, T x, unsigned src) {
  constexpr int W = (sizeof(T) + 3) / 4;
  int w[W] = {};
  __builtin_memcpy(w, &x, sizeof(T));
  for (int k = 0; k < W; k++) {
    if constexpr (XOR)
      w[k] = __nvvm_shfl_sync_bfly_i32(mask, w[k], (int)src, 0x1f);
    else
      w[k] = __nvvm_shfl_sync_idx_i32(mask, w[k], (int)src, 0x1f);
  }
  T r;
  __builtin_memcpy(&r, w, sizeof(T));
  return r;
}

// One redux.sync (sm_80+) for the integer reductions of a full simdgroup: min, max, sum, and, or,
// xor of 32-bit integers are exact in any order, so the result is the butterfly's (a single
// instruction instead of five dependent shuffle rounds). __mpsle_redux_<name> returns false where
// no such instruction exists (other types, products, older GPUs): the butterfly runs.
#define MPSLE_NO_REDUX(name) \
  template <class T> inline bool __mpsle_redux_##name(T, T &) { return false; }
MPSLE_NO_REDUX(simd_sum) MPSLE_NO_REDUX(simd_product) MPSLE_NO_REDUX(simd_min) MPSLE_NO_REDUX(simd_max)
MPSLE_NO_REDUX(simd_and) MPSLE_NO_REDUX(simd_or) MPSLE_NO_REDUX(simd_xor)
#undef MPSLE_NO_REDUX
#if __CUDA_ARCH__ >= 800
#define MPSLE_REDUX(name, T, builtin, A)                                 \
  inline bool __mpsle_redux_##name(T x, T &r) {                          \
    r = (T)builtin((A)x, (int)0xFFFFFFFFu);                              \
    return true;                                                         \
  }
MPSLE_REDUX(simd_sum, int, __nvvm_redux_sync_add, int) MPSLE_REDUX(simd_sum, unsigned, __nvvm_redux_sync_add, int)
MPSLE_REDUX(simd_min, int, __nvvm_redux_sync_min, int) MPSLE_REDUX(simd_min, unsigned, __nvvm_redux_sync_umin, unsigned)
MPSLE_REDUX(simd_max, int, __nvvm_redux_sync_max, int) MPSLE_REDUX(simd_max, unsigned, __nvvm_redux_sync_umax, unsigned)
MPSLE_REDUX(simd_and, int, __nvvm_redux_sync_and, int) MPSLE_REDUX(simd_and, unsigned, __nvvm_redux_sync_and, int)
MPSLE_REDUX(simd_or, int, __nvvm_redux_sync_or, int) MPSLE_REDUX(simd_or, unsigned, __nvvm_redux_sync_or, int)
MPSLE_REDUX(simd_xor, int, __nvvm_redux_sync_xor, int) MPSLE_REDUX(simd_xor, unsigned, __nvvm_redux_sync_xor, int)
#undef MPSLE_REDUX
#endif

// Reductions: redux.sync or a butterfly on full simdgroups (every lane computes the same sums,
// since a + b == b + a exactly), lane order 0, 1, ..., n-1 on partial ones.
#define MPSLE_REDUCE(name, expr)                                   \
  template <class T> inline T name(T x) {                          \
    const bool full = __mpsle_full_groups();                       \
    const unsigned n = full ? 32u : __mpsle_simd_lanes();          \
    const unsigned m = __mpsle_simd_mask(n);                       \
    T a = x;                                                       \
    if (full || n == 32u) {                                        \
      if (__mpsle_redux_##name(x, a)) return a;                    \
      for (unsigned d = 16; d > 0; d >>= 1) {                      \
        T y = __mpsle_shfl<true>(0xFFFFFFFFu, a, d);               \
        a = expr;                                                  \
      }                                                            \
      return a;                                                    \
    }                                                              \
    a = __mpsle_shfl(m, x, 0);                                     \
    for (unsigned i = 1; i < n; i++) {                             \
      T y = __mpsle_shfl(m, x, i);                                 \
      a = expr;                                                    \
    }                                                              \
    return a;                                                      \
  }
MPSLE_SIMD_REDUCTIONS(MPSLE_REDUCE)
#undef MPSLE_REDUCE

// Prefix scans in lane order (as the cpu target): lane i combines lanes 0..i (inclusive).
#define MPSLE_SCAN(name, init, expr, inclusive)                    \
  template <class T> inline T name(T x) {                          \
    const unsigned n = __mpsle_simd_lanes();                       \
    const unsigned m = __mpsle_simd_mask(n);                       \
    const unsigned lane = __mpsle_lane_id();                       \
    const unsigned end = inclusive ? lane + 1 : lane;              \
    T a = T(init);                                                 \
    for (unsigned i = 0; i < n; i++) {                             \
      T y = __mpsle_shfl(m, x, i);                                 \
      if (i < end) a = expr;                                       \
    }                                                              \
    return a;                                                      \
  }
MPSLE_SIMD_SCANS(MPSLE_SCAN)
#undef MPSLE_SCAN

// Shuffles: a source lane outside the simdgroup returns the caller's own value (as the cpu target).
#define MPSLE_SHUF(name, src)                                      \
  template <class T> inline T name(T x, ushort arg) {              \
    const unsigned n = __mpsle_simd_lanes();                       \
    const unsigned lane = __mpsle_lane_id();                       \
    const long s = (src);                                          \
    const bool ok = s >= 0 && s < (long)n;                         \
    T y = __mpsle_shfl(__mpsle_simd_mask(n), x, ok ? (unsigned)s : lane); \
    return ok ? y : x;                                             \
  }
MPSLE_SIMD_SHUFFLES(MPSLE_SHUF)
#undef MPSLE_SHUF
template <class T> inline T simd_broadcast_first(T x) {
  return __mpsle_shfl(__mpsle_simd_mask(__mpsle_simd_lanes()), x, 0);
}

// the first *active* thread of the simdgroup (lowest lane of the active mask)
inline bool simd_is_first() {
  const unsigned m = __nvvm_activemask();
  return __mpsle_lane_id() == (unsigned)__builtin_ctz(m);
}

inline simd_vote simd_ballot(bool p) {
  return simd_vote((unsigned long)__nvvm_vote_ballot_sync(__mpsle_simd_mask(__mpsle_simd_lanes()), p));
}
inline bool simd_any(bool p) { return __nvvm_vote_any_sync(__mpsle_simd_mask(__mpsle_simd_lanes()), p); }
inline bool simd_all(bool p) { return __nvvm_vote_all_sync(__mpsle_simd_mask(__mpsle_simd_lanes()), p); }

// ---------------------------------------------------------------------------------------------
// simdgroup matrices (simdgroup_matrix.h): the warp is the simdgroup. Every operation starts with
// a full-warp bar.warp.sync (all 32 lanes take part, as on Apple; it also orders the lanes'
// memory accesses around it, as the lockstep Apple SIMD group does); a product exchanges the
// factors with shuffles (24 per product and lane for float). A partial simdgroup traps (the cpu
// target names it); argument uniformity is checked on the cpu target only.
// ---------------------------------------------------------------------------------------------
#define MPSLE_SGM_SITE_ARGS
#define MPSLE_SGM_SITE 0u
#define MPSLE_SGM_ACCESS_ON_ARRIVAL 0
#include "simdgroup_matrix.h"

inline unsigned __mpsle_sgm_enter(__mpsle_sgm_op, ulong, ulong, ulong2, bool, unsigned) {
  if (__mpsle_simd_lanes() != 32u) __builtin_trap();
  __nvvm_bar_warp_sync(0xFFFFFFFFu);
  return __mpsle_lane_id();
}
template <class T> struct __mpsle_sgm_shuffled {
  vec<T, 2> ea, eb;
  vec<T, 2> a(unsigned l) const { return __mpsle_shfl(0xFFFFFFFFu, ea, l); }
  vec<T, 2> b(unsigned l) const { return __mpsle_shfl(0xFFFFFFFFu, eb, l); }
};
template <class T> inline vec<T, 2> __mpsle_sgm_multiply(vec<T, 2> a, vec<T, 2> b, const vec<T, 2> *c, unsigned) {
  const unsigned lane = __mpsle_sgm_enter(__mpsle_sgm_load_op, 0, 0, 0, false, 0);
  return __mpsle_sgm_mac<T>(__mpsle_sgm_shuffled<T>{a, b}, lane, c);
}

// ---------------------------------------------------------------------------------------------
// atomics: relaxed read-modify-write on device or threadgroup memory (real concurrency here)
// ---------------------------------------------------------------------------------------------

#define MPSLE_AT_VAL decltype(+obj->__v)
template <class P> inline auto atomic_load_explicit(P obj, memory_order) -> MPSLE_AT_VAL {
  return __atomic_load_n(&obj->__v, __ATOMIC_RELAXED);
}
template <class P, class V> inline void atomic_store_explicit(P obj, V v, memory_order) {
  __atomic_store_n(&obj->__v, (MPSLE_AT_VAL)v, __ATOMIC_RELAXED);
}
template <class P, class V> inline auto atomic_exchange_explicit(P obj, V v, memory_order) -> MPSLE_AT_VAL {
  return __atomic_exchange_n(&obj->__v, (MPSLE_AT_VAL)v, __ATOMIC_RELAXED);
}
#define MPSLE_AT_RMW(name, builtin)                                                       \
  template <class P, class V> inline auto name(P obj, V v, memory_order) -> MPSLE_AT_VAL { \
    return builtin(&obj->__v, (MPSLE_AT_VAL)v, __ATOMIC_RELAXED);                         \
  }
MPSLE_AT_RMW(atomic_fetch_add_explicit, __atomic_fetch_add)
MPSLE_AT_RMW(atomic_fetch_sub_explicit, __atomic_fetch_sub)
MPSLE_AT_RMW(atomic_fetch_and_explicit, __atomic_fetch_and)
MPSLE_AT_RMW(atomic_fetch_or_explicit, __atomic_fetch_or)
MPSLE_AT_RMW(atomic_fetch_xor_explicit, __atomic_fetch_xor)
MPSLE_AT_RMW(atomic_fetch_min_explicit, __atomic_fetch_min)
MPSLE_AT_RMW(atomic_fetch_max_explicit, __atomic_fetch_max)
#undef MPSLE_AT_RMW
template <class P, class E, class V>
inline bool atomic_compare_exchange_weak_explicit(P obj, E expected, V desired, memory_order, memory_order) {
  return __atomic_compare_exchange_n(&obj->__v, expected, (MPSLE_AT_VAL)desired, true, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED);
}
#undef MPSLE_AT_VAL

}  // namespace metal

using namespace metal;
#pragma clang diagnostic pop
