/* cpu_abi.h — the interface between generated kernel code (C++) and cpu_runtime.c (C). */
#ifndef MPSLE_CPU_ABI_H
#define MPSLE_CPU_ABI_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/* Thread-position values of one GPU thread (Metal's attribute names in the comments). */
typedef struct mpsle_tid {
  uint32_t tpig[3];   /* thread_position_in_grid */
  uint32_t tpitg[3];  /* thread_position_in_threadgroup */
  uint32_t tgpig[3];  /* threadgroup_position_in_grid */
  uint32_t tptg[3];   /* threads_per_threadgroup (actual: edge groups are smaller) */
  uint32_t dtptg[3];  /* dispatch_threads_per_threadgroup (requested) */
  uint32_t tgpg[3];   /* threadgroups_per_grid */
  uint32_t tpg[3];    /* threads_per_grid */
  uint32_t tiitg;     /* thread_index_in_threadgroup */
  uint32_t tiisg;     /* thread_index_in_simdgroup */
  uint32_t sgiitg;    /* simdgroup_index_in_threadgroup */
  uint32_t sgptg;     /* simdgroups_per_threadgroup */
  uint32_t dsgptg;    /* dispatch_simdgroups_per_threadgroup */
  uint32_t tpsg;      /* threads_per_simdgroup */
} mpsle_tid;

typedef void (*mpsle_thunk)(void **bufs, const mpsle_tid *t);

typedef struct mpsle_kdesc {
  mpsle_thunk thunk;
  int uses_sync; /* barriers or simdgroup collectives: run threads as fibers */
} mpsle_kdesc;

enum { MPSLE_INORDER = 0, MPSLE_REVERSE = 1, MPSLE_SHUFFLE = 2 };
enum {
  MPSLE_OP_SIMD_BARRIER = 1,
  MPSLE_OP_REDUCE = 2,
  MPSLE_OP_SCAN = 3,
  MPSLE_OP_SHUFFLE = 4,
  MPSLE_OP_VOTE = 5,
  /* simdgroup_matrix operations: need all 32 lanes; load and store need the same arguments
   * (the value passed) on every lane */
  MPSLE_OP_MATRIX_LOAD = 6,
  MPSLE_OP_MATRIX_STORE = 7,
  MPSLE_OP_MATRIX_MULTIPLY = 8
};

void *mpsle_tg_slot(int slot, unsigned long size, unsigned long align);
void mpsle_barrier(unsigned site);
const void *mpsle_collective(const void *val, unsigned size, unsigned site, unsigned op, unsigned *nlanes,
                             unsigned *lane);
void mpsle_kernel_fault(const char *msg);
unsigned mpsle_current_lane(void);
int mpsle_launch(const mpsle_kdesc *k, void **bufs, const uint32_t grid[3], const uint32_t req[3], int order,
                 uint64_t seed, double timeout, char *err, int errlen, uint32_t *where, void **addr);

#ifdef __cplusplus
}
#endif
#endif
