/* cpu_runtime.c — the execution engine of the emulator's CPU target.
 *
 * Compiled once per compiler/flags (cached as an object file) and linked into every kernel
 * library, so each library has its own copy of this state (it is hidden-visibility).
 *
 * Model (DESIGN §5):
 *   - threadgroups run one after another, in the order asked for (inorder / reverse / shuffle);
 *   - a kernel without barriers or simdgroup collectives runs each thread as a plain call;
 *   - otherwise every GPU thread of the group is a fiber with its own small stack (guard page
 *     below it); fibers yield at threadgroup_barrier / simdgroup_barrier / simd_* collectives;
 *   - a tiny hand-written x86-64 context switch is used; elsewhere (or with -DMPSLE_UCONTEXT)
 *     the portable ucontext fallback;
 *   - threadgroup memory lives in one 32 KiB arena per launch, poisoned (0xFF bytes = NaN for
 *     float, -1 for integers) at the start of every threadgroup;
 *   - SIGSEGV/SIGBUS/SIGILL/SIGFPE inside a kernel (out-of-bounds trap, bad pointer, integer
 *     division by zero) jump back to the launcher, which returns an error code and a message
 *     naming the threadgroup and the thread. The Python process survives;
 *   - a launch has a wall-clock limit: a POSIX timer (Linux) sends MPSLE_TIMEOUT_SIG to the
 *     launching thread, and SIGINT (Ctrl-C) is caught during the launch; both jump back to the
 *     launcher like a fault (RC_TIMEOUT / RC_INTERRUPT), so a kernel that never terminates cannot
 *     hang the process. Kernel code runs no locks or allocations, so abandoning it is safe.
 */
#define _GNU_SOURCE
#if defined(__APPLE__)
#define _XOPEN_SOURCE 700 /* ucontext on macOS */
#define _DARWIN_C_SOURCE
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#define MPSLE_HAVE_TIMER 1
#ifndef sigev_notify_thread_id /* older glibc */
#define sigev_notify_thread_id _sigev_un._tid
#endif
#endif
#if !(defined(__x86_64__) && defined(__ELF__)) && !defined(MPSLE_UCONTEXT)
#define MPSLE_UCONTEXT 1
#endif
#ifdef MPSLE_UCONTEXT
#include <ucontext.h>
#endif

#include "cpu_abi.h"

/* ThreadSanitizer mode (-DMPSLE_TSAN, kernel TU built with -fsanitize=thread, run in a subprocess
 * with the TSan runtime preloaded): every GPU thread is a TSan fiber (aliased modulo TSAN_FIBERS:
 * TSan's shadow memory loses races beyond a few hundred concurrent threads), fiber switches carry
 * no synchronisation, and barriers / simdgroup collectives are release+acquire on a sync object
 * per generation, so TSan reports exactly the accesses that no barrier orders. */
#ifdef MPSLE_TSAN
#include <stdlib.h>
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
enum { TSAN_FIBERS = 200 };
static void *tsan_sched, *tsan_fib[TSAN_FIBERS];
/* GPU thread -> TSan fiber: i % TSAN_FIBERS (tsan_alias_div == 0) or i / tsan_alias_div. For a
 * group of n <= TSAN_FIBERS^2 threads, a second pass with div = ceil(n / TSAN_FIBERS) separates
 * every pair of threads the first pass aliased (they differ by a multiple of TSAN_FIBERS >= div). */
static int tsan_alias_div;
__attribute__((visibility("default"))) void mpsle_tsan_set_alias(int div) { tsan_alias_div = div; }
static inline int tsan_fiber_of(int i) { return tsan_alias_div ? (i / tsan_alias_div) % TSAN_FIBERS : i % TSAN_FIBERS; }
static char tsan_bar_sync[2], tsan_simd_sync[32][2], tsan_group_sync, tsan_end_sync;
#define TSAN(x) x
#define TSAN_ON 1
#else
#define TSAN(x)
#define TSAN_ON 0
#endif

#define HIDDEN __attribute__((visibility("hidden")))
#define EXPORT __attribute__((visibility("default")))

enum { MAXT = 1024, SIMD = 32, TG_BYTES = 32768, MAXSLOTS = 256, STACK = 128 * 1024 };
enum { RUNNABLE = 0, AT_BARRIER = 1, AT_SIMD = 2, DONE = 3 };
enum { RC_OK = 0, RC_FAULT = 1, RC_TGMEM = 2, RC_USAGE = 3, RC_TIMEOUT = 4, RC_INTERRUPT = 5 };
/* a real-time signal nobody else in a Python process uses (SIGALRM belongs to pytest-timeout) */
#define MPSLE_TIMEOUT_SIG (SIGRTMIN + 7)

/* ----------------------------------------------------------------------------------------- */
/* context switch                                                                              */
/* ----------------------------------------------------------------------------------------- */
#ifndef MPSLE_UCONTEXT
/* void mpsle_swap(void **save_sp, void *to_sp): saves the callee-saved registers on the current
 * stack, stores the stack pointer in *save_sp, switches to to_sp and pops its registers. */
__asm__(".text\n"
        ".p2align 4\n"
        ".type mpsle_swap,@function\n"
        "mpsle_swap:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size mpsle_swap, .-mpsle_swap\n"
        /* first activation of a fiber: r12 = argument, r13 = entry function */
        ".p2align 4\n"
        ".type mpsle_trampoline,@function\n"
        "mpsle_trampoline:\n"
        "  movq %r12, %rdi\n"
        "  callq *%r13\n"
        "  ud2\n"
        ".size mpsle_trampoline, .-mpsle_trampoline\n");
void mpsle_swap(void **save_sp, void *to_sp) HIDDEN;
void mpsle_trampoline(void) HIDDEN;
#endif

typedef struct {
#ifdef MPSLE_UCONTEXT
  ucontext_t uc;
#else
  void *sp;
#endif
  int state;
  unsigned site;
} fiber_t;

static fiber_t F[MAXT];
static mpsle_tid T[MAXT];
static char *stacks;            /* MAXT slots of (guard page + STACK) */
static size_t page;
#ifdef MPSLE_UCONTEXT
static ucontext_t sched_uc;
#else
static void *sched_sp;
#endif

/* launch state */
static mpsle_thunk cur_fn;
static void **cur_bufs;
static int cur = -1;            /* running fiber, -1 in the scheduler / plain mode */
static int nthreads;            /* threads in the current group */
static int live;
static unsigned bar_arrived, bar_site;
static int restart_round; /* a barrier released the group: start the next phase from the top */
static int simd_arrived[MAXT / SIMD];
static unsigned simd_site[MAXT / SIMD], simd_op[MAXT / SIMD], simd_gen[MAXT / SIMD];
static int simd_first[MAXT / SIMD]; /* the lane that arrived first at the pending collective */
static unsigned char simd_buf[2][MAXT][32] __attribute__((aligned(32)));
static unsigned char tg_arena[TG_BYTES + 64] __attribute__((aligned(64)));
static unsigned char *tg_mem = tg_arena; /* TSan mode: a fresh allocation per group */
static unsigned bar_gen;
static long tg_off[MAXSLOTS];
static size_t tg_used;
static uint32_t cur_group[3], cur_thread[3];
static int cur_linear = -1;

/* fault reporting */
static sigjmp_buf fault_jmp;
static char *err_buf;
static int err_len;
static volatile sig_atomic_t fault_sig;
static void *volatile fault_addr;
static volatile sig_atomic_t in_kernel;
static pthread_t launch_thread;
static struct sigaction old_int_sa;
static int launch_on_main;                   /* the launching thread is the process's main thread */
static volatile sig_atomic_t sigint_chained; /* this launch's Ctrl-C already went to Python */

static void fault_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fault_msg(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err_buf, (size_t)err_len, fmt, ap);
  va_end(ap);
}

static void raise_fault(int rc) __attribute__((noreturn));
static void raise_fault(int rc) { siglongjmp(fault_jmp, rc); }

static inline void set_current(int linear) { cur_linear = linear; }

/* ----------------------------------------------------------------------------------------- */
/* fibers                                                                                      */
/* ----------------------------------------------------------------------------------------- */
static int ensure_stacks(void) {
  if (stacks) return 0;
  page = (size_t)sysconf(_SC_PAGESIZE);
  size_t slot = STACK + page;
  char *p = mmap(NULL, slot * MAXT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return -1;
  for (int i = 0; i < MAXT; i++) mprotect(p + i * slot, page, PROT_NONE);
  stacks = p;
  return 0;
}

static inline void to_scheduler(int i) {
  TSAN(__tsan_switch_to_fiber(tsan_sched, 1));
#ifdef MPSLE_UCONTEXT
  swapcontext(&F[i].uc, &sched_uc);
#else
  mpsle_swap(&F[i].sp, sched_sp);
#endif
}

static void fiber_main(void *arg) {
  int i = (int)(intptr_t)arg;
  for (;;) {
    TSAN(__tsan_acquire(&tsan_group_sync));
    cur_fn(cur_bufs, &T[i]);
    TSAN(__tsan_release(&tsan_end_sync));
    F[i].state = DONE;
    live--;
    to_scheduler(i);
  }
}

#ifdef MPSLE_UCONTEXT
static void fiber_entry_uc(unsigned lo, unsigned hi) {
  fiber_main((void *)(intptr_t)(((uintptr_t)hi << 32) | lo));
}
#endif

static void fiber_init(int i) {
  /* stagger the stack tops so that the fibers' hot frames do not all map to the same cache sets */
  char *top = stacks + (size_t)(i + 1) * (STACK + page) - (size_t)((i * 832) % 16384);
  F[i].state = RUNNABLE;
#ifdef MPSLE_UCONTEXT
  getcontext(&F[i].uc);
  F[i].uc.uc_stack.ss_sp = top - STACK;
  F[i].uc.uc_stack.ss_size = STACK;
  F[i].uc.uc_link = NULL;
  makecontext(&F[i].uc, (void (*)(void))fiber_entry_uc, 2, (unsigned)i, 0u);
#else
  /* frame popped by mpsle_swap: r15 r14 r13 r12 rbx rbp, then ret -> trampoline; the slot after
   * the return address leaves rsp 16-byte aligned at the trampoline's call. */
  void **sp = (void **)(top - 72);
  sp[0] = 0;                          /* r15 */
  sp[1] = 0;                          /* r14 */
  sp[2] = (void *)fiber_main;         /* r13 */
  sp[3] = (void *)(intptr_t)i;        /* r12 */
  sp[4] = 0;                          /* rbx */
  sp[5] = 0;                          /* rbp */
  sp[6] = (void *)mpsle_trampoline;   /* return address */
  F[i].sp = sp;
#endif
}

static inline void run_fiber(int i) {
  cur = i;
  set_current(i);
  TSAN(__tsan_switch_to_fiber(tsan_fib[tsan_fiber_of(i)], 1));
#ifdef MPSLE_UCONTEXT
  swapcontext(&sched_uc, &F[i].uc);
#else
  mpsle_swap(&sched_sp, F[i].sp);
#endif
  cur = -1;
}

/* ----------------------------------------------------------------------------------------- */
/* order                                                                                       */
/* ----------------------------------------------------------------------------------------- */
static uint64_t rng;
static inline uint64_t next_rand(void) {  /* splitmix64 */
  uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void make_order(int *perm, int n, int order) {
  for (int k = 0; k < n; k++) perm[k] = (order == MPSLE_REVERSE) ? n - 1 - k : k;
  if (order == MPSLE_SHUFFLE)
    for (int k = n - 1; k > 0; k--) {
      int j = (int)(next_rand() % (uint64_t)(k + 1));
      int t = perm[k];
      perm[k] = perm[j];
      perm[j] = t;
    }
}

/* ----------------------------------------------------------------------------------------- */
/* services called from kernel code (declared in cpu.h)                                        */
/* ----------------------------------------------------------------------------------------- */
#define SITE_LINE(s) ((s) >> 12)
#define SITE_COL(s) ((s)&0xFFFu)

static const char *op_name(unsigned op) {
  switch (op) {
  case MPSLE_OP_SIMD_BARRIER: return "simdgroup_barrier";
  case MPSLE_OP_REDUCE: return "a simd reduction (simd_sum/max/...)";
  case MPSLE_OP_SCAN: return "a simd prefix operation";
  case MPSLE_OP_SHUFFLE: return "a simd shuffle/broadcast";
  case MPSLE_OP_VOTE: return "a simd vote (ballot/any/all)";
  case MPSLE_OP_MATRIX_LOAD: return "simdgroup_load";
  case MPSLE_OP_MATRIX_STORE: return "simdgroup_store";
  case MPSLE_OP_MATRIX_MULTIPLY: return "simdgroup_multiply(_accumulate)";
  default: return "a simdgroup operation";
  }
}

EXPORT void *mpsle_tg_slot(int slot, unsigned long size, unsigned long align) {
  if (slot < 0 || slot >= MAXSLOTS) {
    fault_msg("too many threadgroup declarations (emulator limit %d)", MAXSLOTS);
    raise_fault(RC_USAGE);
  }
  if (tg_off[slot] < 0) {
    if (align < 1) align = 1;
    size_t off = (tg_used + align - 1) / align * align;
    if (off + size > TG_BYTES) {
      fault_msg("threadgroup memory of this kernel exceeds the 32 KiB limit of Apple GPUs "
                "(%lu bytes needed after %lu already declared)", (unsigned long)size,
                (unsigned long)tg_used);
      raise_fault(RC_TGMEM);
    }
    tg_off[slot] = (long)off;
    tg_used = off + size; /* (already poisoned: the whole arena at launch start, tg_used bytes at
                             every group start) */
  }
  return tg_mem + tg_off[slot];
}

EXPORT void mpsle_barrier(unsigned site) {
  int i = cur;
  if (i < 0) {
    fault_msg("threadgroup_barrier (line %u) reached through a call the emulator cannot follow (a "
              "function pointer?): this kernel was found barrier-free from its direct calls, so its "
              "threads do not run as fibers; call functions that use barriers directly",
              SITE_LINE(site));
    raise_fault(RC_FAULT);
  }
  if (bar_arrived == 0) {
    bar_site = site;
  } else if (bar_site != site) {
    fault_msg("threads of one threadgroup reached different threadgroup_barrier calls (line %u col %u "
              "and line %u col %u): barriers must be reached by all threads in uniform control flow",
              SITE_LINE(bar_site), SITE_COL(bar_site), SITE_LINE(site), SITE_COL(site));
    raise_fault(RC_FAULT);
  }
  F[i].site = site;
  F[i].state = AT_BARRIER;
  const unsigned gen = bar_gen;
  TSAN(__tsan_release(&tsan_bar_sync[gen & 1]));
  (void)gen;
  if (++bar_arrived == (unsigned)nthreads) {
    /* last to arrive: release everybody (itself included) and yield, so that the next phase
     * starts again from the beginning of the order (in-order really is in order) */
    bar_arrived = 0;
    bar_gen++;
    restart_round = 1;
    for (int k = 0; k < nthreads; k++)
      if (F[k].state == AT_BARRIER) F[k].state = RUNNABLE;
  }
  to_scheduler(i);
  set_current(i);
  TSAN(__tsan_acquire(&tsan_bar_sync[gen & 1]));
}

EXPORT const void *mpsle_collective(const void *val, unsigned size, unsigned site, unsigned op,
                                    unsigned *nlanes, unsigned *lane) {
  int i = cur;
  if (i < 0) {
    fault_msg("%s (line %u) reached through a call the emulator cannot follow (a function pointer?): "
              "this kernel was found free of simdgroup operations from its direct calls, so its threads "
              "do not run as fibers; call functions that use them directly",
              op_name(op), SITE_LINE(site));
    raise_fault(RC_FAULT);
  }
  int s = i / SIMD;
  int first = s * SIMD;
  int n = nthreads - first < SIMD ? nthreads - first : SIMD;
  unsigned g = simd_gen[s] & 1u;
  if (size > 32) size = 32;
  if (size) memcpy(simd_buf[g][i], val, size);
  if (op >= MPSLE_OP_MATRIX_LOAD && n != SIMD) {
    /* MSL 2.4: the operations run cooperatively on the simdgroup; lanes of a partial simdgroup
     * are inactive, yet each lane holds part of the matrix: undefined on Apple GPUs */
    fault_msg("%s (line %u col %u) in simdgroup %d of only %d threads: simdgroup_matrix operations "
              "need a full simdgroup of 32 threads, each lane holds two of the 64 elements (the "
              "threadgroup has %d threads; make it a multiple of 32, edge threadgroups included)",
              op_name(op), SITE_LINE(site), SITE_COL(site), s, n, nthreads);
    raise_fault(RC_FAULT);
  }
  if (simd_arrived[s] == 0) {
    simd_site[s] = site;
    simd_op[s] = op;
    simd_first[s] = i;
  } else if (simd_site[s] == site && (op == MPSLE_OP_MATRIX_LOAD || op == MPSLE_OP_MATRIX_STORE) &&
             memcmp(simd_buf[g][i], simd_buf[g][simd_first[s]], size) != 0) {
    fault_msg("lanes %d and %d of simdgroup %d passed different arguments to %s at line %u col %u: "
              "the pointer, elements_per_row, matrix_origin and transpose_matrix of a simdgroup_matrix "
              "load or store must be the same on every lane (one operation for the whole simdgroup)",
              simd_first[s] - first, i - first, s, op_name(op), SITE_LINE(site), SITE_COL(site));
    raise_fault(RC_FAULT);
  } else if (simd_site[s] != site) {
    fault_msg("lanes of simdgroup %d reached different simdgroup operations: %s at line %u col %u "
              "and %s at line %u col %u (collectives must be reached by all lanes of a simdgroup at "
              "the same call site)",
              s, op_name(simd_op[s]), SITE_LINE(simd_site[s]), SITE_COL(simd_site[s]), op_name(op),
              SITE_LINE(site), SITE_COL(site));
    raise_fault(RC_FAULT);
  }
  F[i].site = site;
  *nlanes = (unsigned)n;
  *lane = (unsigned)(i - first);
  TSAN(__tsan_release(&tsan_simd_sync[s][g]));
  F[i].state = AT_SIMD;
  if (++simd_arrived[s] == n) {
    simd_arrived[s] = 0;
    simd_gen[s]++;
    for (int k = first; k < first + n; k++)
      if (F[k].state == AT_SIMD) F[k].state = RUNNABLE;
    /* a simdgroup_matrix operation: the next phase starts again from the top of the order, so
     * the released simdgroup may run ahead of threads that have not reached this point yet (a
     * simdgroup that races ahead to restage a tile the others still read: the missing barrier
     * of a tiled loop shows in the reversed and shuffled orders) */
    if (op >= MPSLE_OP_MATRIX_LOAD) restart_round = 1;
  }
  to_scheduler(i);
  set_current(i);
  TSAN(__tsan_acquire(&tsan_simd_sync[s][g]));
  return simd_buf[g][first];
}

/* threadgroup memory the last launch declared (torch's static_thread_group_memory_length) */
EXPORT unsigned long mpsle_last_tg_bytes(void) { return (unsigned long)tg_used; }

EXPORT unsigned mpsle_current_lane(void) { return cur_linear >= 0 ? T[cur_linear].tiisg : 0u; }

EXPORT void mpsle_kernel_fault(const char *msg) {
  fault_msg("%s", msg);
  raise_fault(RC_FAULT);
}

/* ----------------------------------------------------------------------------------------- */
/* signals                                                                                     */
/* ----------------------------------------------------------------------------------------- */
/* whatever handled SIGINT before the launch (Python's handler: it sets a flag the main thread
 * turns into KeyboardInterrupt) */
static void chain_sigint(int sig, siginfo_t *si, void *uc) {
  if (old_int_sa.sa_flags & SA_SIGINFO) {
    if (old_int_sa.sa_sigaction) old_int_sa.sa_sigaction(sig, si, uc);
  } else if (old_int_sa.sa_handler != SIG_IGN && old_int_sa.sa_handler != SIG_DFL) {
    old_int_sa.sa_handler(sig);
  }
}

static void on_signal(int sig, siginfo_t *si, void *uc) {
  if (sig == MPSLE_TIMEOUT_SIG || sig == SIGINT) {
    if (sig == SIGINT && in_kernel && !launch_on_main && !sigint_chained) {
      /* a launch in a worker thread: the main thread gets its KeyboardInterrupt as well */
      sigint_chained = 1;
      chain_sigint(sig, si, uc);
    }
    if (in_kernel && pthread_equal(pthread_self(), launch_thread))
      siglongjmp(fault_jmp, sig == SIGINT ? RC_INTERRUPT : RC_TIMEOUT);
    if (sig == MPSLE_TIMEOUT_SIG) return; /* a late expiry after the launch ended */
    if (in_kernel) { /* Ctrl-C landed on another thread: hand it to the launching thread */
      pthread_kill(launch_thread, SIGINT);
      return;
    }
    chain_sigint(sig, si, uc); /* between launches */
    return;
  }
  if (!in_kernel) { /* not ours: restore default and re-raise */
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  fault_sig = sig;
  fault_addr = si->si_addr;
  siglongjmp(fault_jmp, 100 + sig);
}

enum { NSIGS = 6 };
static int SIGS[NSIGS] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGINT, 0 /* MPSLE_TIMEOUT_SIG */};

/* ----------------------------------------------------------------------------------------- */
/* launch                                                                                      */
/* ----------------------------------------------------------------------------------------- */
static void fill_tid(mpsle_tid *t, const uint32_t grid[3], const uint32_t req[3], const uint32_t act[3],
                     const uint32_t ngroups[3], const uint32_t g[3], uint32_t lx, uint32_t ly, uint32_t lz) {
  uint32_t l[3] = {lx, ly, lz};
  for (int d = 0; d < 3; d++) {
    t->tpitg[d] = l[d];
    t->tgpig[d] = g[d];
    t->tpig[d] = g[d] * req[d] + l[d];
    t->tptg[d] = act[d];
    t->dtptg[d] = req[d];
    t->tgpg[d] = ngroups[d];
    t->tpg[d] = grid[d];
  }
  uint32_t lin = lx + act[0] * (ly + act[1] * lz);
  uint32_t n = act[0] * act[1] * act[2];
  uint32_t nreq = req[0] * req[1] * req[2];
  t->tiitg = lin;
  t->tiisg = lin % SIMD;
  t->sgiitg = lin / SIMD;
  t->sgptg = (n + SIMD - 1) / SIMD;
  t->dsgptg = (nreq + SIMD - 1) / SIMD;
  t->tpsg = SIMD;
}

static int perm_threads[MAXT];

static uint64_t gcd_u64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

EXPORT int mpsle_launch(const mpsle_kdesc *k, void **bufs, const uint32_t grid_in[3], const uint32_t req_in[3],
                        int order, uint64_t seed, double timeout, char *err, int errlen, uint32_t *where,
                        void **addr) {
  uint32_t grid[3], req[3], ngroups[3];
  for (int d = 0; d < 3; d++) {
    grid[d] = grid_in[d];
    req[d] = req_in[d] ? req_in[d] : 1;
    ngroups[d] = (grid[d] + req[d] - 1) / req[d];
  }
  err_buf = err;
  err_len = errlen;
  err[0] = 0;
  uint64_t total_groups = (uint64_t)ngroups[0] * ngroups[1] * ngroups[2];
  if (total_groups == 0) return RC_OK;
  if ((uint64_t)req[0] * req[1] * req[2] > MAXT) {
    snprintf(err, (size_t)errlen, "threadgroup size %u x %u x %u exceeds %d threads", req[0], req[1], req[2], MAXT);
    return RC_USAGE;
  }
  const int use_fibers = k->uses_sync || TSAN_ON; /* TSan: every GPU thread its own fiber */
  if (use_fibers && ensure_stacks() != 0) {
    snprintf(err, (size_t)errlen, "could not allocate fiber stacks");
    return RC_USAGE;
  }
  cur_fn = k->thunk;
  cur_bufs = bufs;
  rng = seed * 0x2545F4914F6CDD1Dull + 0x9E3779B97F4A7C15ull;
  for (int s = 0; s < MAXSLOTS; s++) tg_off[s] = -1;
  tg_used = 0;
  memset(tg_arena, 0xFF, sizeof tg_arena);
#ifdef MPSLE_TSAN
  tsan_sched = __tsan_get_current_fiber();
  for (int f = 0; f < TSAN_FIBERS; f++)
    if (!tsan_fib[f]) tsan_fib[f] = __tsan_create_fiber(0);
#endif

  /* signal handlers on an alternate stack (the faulting stack may be a fiber's guard page) */
  static char altstack[64 * 1024];
  stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0}, old_ss;
  sigaltstack(&ss, &old_ss);
  struct sigaction sa, old_sa[NSIGS];
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  SIGS[NSIGS - 1] = MPSLE_TIMEOUT_SIG;
  launch_thread = pthread_self();
#if defined(__linux__)
  launch_on_main = getpid() == (pid_t)syscall(SYS_gettid);
#else
  launch_on_main = 1;
#endif
  sigint_chained = 0;
  for (int s = 0; s < NSIGS; s++) sigaction(SIGS[s], &sa, &old_sa[s]);
  old_int_sa = old_sa[4];
  /* the wall-clock limit: a timer that signals this thread (not the process) */
#ifdef MPSLE_HAVE_TIMER
  /* one timer per thread, created on its first limited launch and re-armed after (creating and
   * deleting a POSIX timer per launch cost ~30 us); a disarmed timer never fires */
  static __thread timer_t timer;
  static __thread int timer_made;
  int have_timer = 0;
  struct itimerspec its;
  memset(&its, 0, sizeof its);
  its.it_value.tv_sec = (time_t)timeout;
  its.it_value.tv_nsec = (long)((timeout - (double)(time_t)timeout) * 1e9);
  if (timeout > 0 && its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
  if (timeout > 0) {
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = MPSLE_TIMEOUT_SIG;
    sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
    if (!timer_made && timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0) timer_made = 1;
    have_timer = timer_made;
  }
#else
  (void)timeout;
#endif

  int rc = RC_OK;
  uint32_t gid[3] = {0, 0, 0};
  cur = -1;
  cur_linear = -1;
  memset(cur_group, 0, sizeof cur_group);
  memset(cur_thread, 0, sizeof cur_thread);
  int jr = sigsetjmp(fault_jmp, 1);
  if (jr != 0) {
    in_kernel = 0;
    TSAN(__tsan_switch_to_fiber(tsan_sched, 1));
    if (jr == RC_TIMEOUT)
      snprintf(err, (size_t)errlen, "did not finish within %g s", timeout);
    if (jr == RC_INTERRUPT) snprintf(err, (size_t)errlen, "interrupted (SIGINT)");
    if (jr >= 100) {
      int sig = jr - 100;
      const char *what = sig == SIGILL   ? "trap (out-of-bounds index into a fixed-size array, or __builtin_trap)"
                         : sig == SIGFPE ? "arithmetic fault (integer division by zero or overflow)"
                         : sig == SIGBUS ? "bus error (misaligned or invalid memory access)"
                                         : "invalid memory access (segmentation fault)";
      char *p = (char *)fault_addr;
      if (stacks && p >= stacks && p < stacks + (size_t)MAXT * (STACK + page) &&
          (size_t)(p - stacks) % (STACK + page) < page)
        what = "stack overflow of a GPU thread (local arrays too large?)";
      snprintf(err, (size_t)errlen, "%s", what);
      *addr = (void *)p;
    }
    rc = jr >= 100 ? RC_FAULT : jr;
    where[0] = cur_group[0];
    where[1] = cur_group[1];
    where[2] = cur_group[2];
    if (cur_linear >= 0) memcpy(cur_thread, T[cur_linear].tpitg, sizeof cur_thread);
    where[3] = cur_thread[0];
    where[4] = cur_thread[1];
    where[5] = cur_thread[2];
    where[6] = cur_linear < 0 ? 0 : 1;
    goto done;
  }
  in_kernel = 1;
#ifdef MPSLE_HAVE_TIMER
  if (have_timer) timer_settime(timer, 0, &its, NULL); /* armed only now: an early expiry is not lost */
#endif

  /* group order: linear group ids visited as asked */
  {
    uint64_t ng = total_groups;
    for (uint64_t q = 0; q < ng; q++) {
      uint64_t lin = q;
      if (order == MPSLE_REVERSE) lin = ng - 1 - q;
      else if (order == MPSLE_SHUFFLE) {
        /* a random bijection of [0, ng): multiplicative + additive mod ng with an odd multiplier
         * coprime to ng, drawn per launch */
        static uint64_t a, b;
        if (q == 0) {
          do { a = (next_rand() % ng) | 1u; } while (ng > 1 && gcd_u64(a, ng) != 1);
          b = next_rand() % ng;
        }
        lin = (a * q + b) % ng;
      }
      gid[0] = (uint32_t)(lin % ngroups[0]);
      gid[1] = (uint32_t)((lin / ngroups[0]) % ngroups[1]);
      gid[2] = (uint32_t)(lin / ((uint64_t)ngroups[0] * ngroups[1]));
      memcpy(cur_group, gid, sizeof gid);
      uint32_t act[3];
      for (int d = 0; d < 3; d++) {
        uint32_t rem = grid[d] - gid[d] * req[d];
        act[d] = rem < req[d] ? rem : req[d];
      }
      int n = (int)(act[0] * act[1] * act[2]);
#ifdef MPSLE_TSAN
      if (tg_mem != tg_arena) free(tg_mem);
      tg_mem = malloc(TG_BYTES + 64); /* fresh shadow memory: no false races across groups */
      memset(tg_mem, 0xFF, TG_BYTES);
      __tsan_release(&tsan_group_sync);
#else
      if (tg_used) memset(tg_mem, 0xFF, tg_used); /* poison threadgroup memory */
#endif
      nthreads = n;
      for (int lz = 0, i = 0; lz < (int)act[2]; lz++)
        for (int ly = 0; ly < (int)act[1]; ly++)
          for (int lx = 0; lx < (int)act[0]; lx++, i++)
            fill_tid(&T[i], grid, req, act, ngroups, gid, (uint32_t)lx, (uint32_t)ly, (uint32_t)lz);
      if (!use_fibers) {
        make_order(perm_threads, n, order);
        for (int j = 0; j < n; j++) {
          int i = perm_threads[j];
          set_current(i);
          cur_fn(bufs, &T[i]);
        }
        continue;
      }
      /* fibers */
      for (int i = 0; i < n; i++) fiber_init(i);
      for (int s = 0; s < (n + SIMD - 1) / SIMD; s++) simd_arrived[s] = 0, simd_gen[s] = 0;
      bar_arrived = 0;
      live = n;
      while (live > 0) {
        make_order(perm_threads, n, order);
        restart_round = 0;
        for (int j = 0; j < n && !restart_round; j++) {
          int i = perm_threads[j];
          if (F[i].state == RUNNABLE) {
            run_fiber(i);
          }
        }
        if (live == 0) break;
        int runnable = 0;
        for (int i = 0; i < n; i++) runnable |= F[i].state == RUNNABLE;
        if (runnable) continue;
        /* deadlock: diagnose */
        int at_bar = -1, done = -1, at_simd = -1;
        for (int i = 0; i < n; i++) {
          if (F[i].state == AT_BARRIER && at_bar < 0) at_bar = i;
          if (F[i].state == DONE && done < 0) done = i;
          if (F[i].state == AT_SIMD && at_simd < 0) at_simd = i;
        }
        if (at_simd >= 0) {
          int s = at_simd / SIMD;
          int other = -1;
          for (int k2 = s * SIMD; k2 < s * SIMD + SIMD && k2 < n; k2++)
            if (F[k2].state != AT_SIMD) { other = k2; break; }
          set_current(other >= 0 ? other : at_simd);
          fault_msg("simdgroup divergence: lane %d of simdgroup %d waits at %s (line %u col %u) but "
                    "lane %d %s; every lane of a simdgroup must reach the same collective",
                    at_simd % SIMD, s, op_name(simd_op[s]), SITE_LINE(F[at_simd].site), SITE_COL(F[at_simd].site),
                    other % SIMD,
                    other >= 0 && F[other].state == DONE ? "finished the kernel" : "waits at a threadgroup_barrier");
          raise_fault(RC_FAULT);
        }
        set_current(done >= 0 ? done : 0);
        fault_msg("barrier divergence: thread %d waits at threadgroup_barrier (line %u col %u) but thread %d "
                  "finished the kernel without reaching it (a barrier must be reached by every thread "
                  "of the threadgroup; on a GPU this hangs or is undefined)",
                  at_bar, at_bar >= 0 ? SITE_LINE(F[at_bar].site) : 0, at_bar >= 0 ? SITE_COL(F[at_bar].site) : 0,
                  done);
        raise_fault(RC_FAULT);
      }
    }
  }
  in_kernel = 0;
  TSAN(__tsan_acquire(&tsan_end_sync));
done:
  in_kernel = 0;
#ifdef MPSLE_TSAN
  if (tg_mem != tg_arena) free(tg_mem);
  tg_mem = tg_arena;
#endif
#ifdef MPSLE_HAVE_TIMER
  /* disarm; a signal the timer sent before this is delivered on return from timer_settime,
   * while our handler (which ignores it outside a kernel) is still installed */
  if (have_timer) {
    struct itimerspec off;
    memset(&off, 0, sizeof off);
    timer_settime(timer, 0, &off, NULL);
  }
#endif
  for (int s = 0; s < NSIGS; s++) sigaction(SIGS[s], &old_sa[s], NULL);
  sigaltstack(&old_ss, NULL);
  cur = -1;
  return rc;
}

/* ----------------------------------------------------------------------------------------- */
/* float -> bfloat conversion (round to nearest even), which clang lowers to a libcall that     */
/* libgcc does not provide                                                                     */
/* ----------------------------------------------------------------------------------------- */
HIDDEN __bf16 __truncsfbf2(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint16_t h;
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    h = (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN, sign kept */
  } else {
    u += 0x7FFFu + ((u >> 16) & 1u);
    h = (uint16_t)(u >> 16);
  }
  __bf16 r;
  memcpy(&r, &h, 2);
  return r;
}
