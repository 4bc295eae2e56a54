// lu_look.metal - the LU panel kernels that hold the panel in registers (metal/lu.h: the family's
// groups and its LAPACK rules): lu_panel_look (a tall panel, KL columns per dispatch, with
// look-ahead) and lu_panel_regs (a whole panel in one threadgroup), both over lu_look_column.
#include "scalar.h"
#include "lu.h"
#include <metal_stdlib>  // simdgroup_matrix (lu_panel_look's look_mma variant); scalar.h includes it too

// ---- lu_panel_look -------------------------------------------------------------------------------
//
// KL columns of a tall panel per dispatch, still exactly LAPACK's partial pivoting: every group
// repeats the small LU of ALL active rows restricted to the KL columns (the pivot search needs
// every row, and repeating it costs (rows x KL^2) flops per group, far less than a dispatch), so the
// groups agree on the KL pivots without talking to each other; then each group applies the KL
// steps to its own rows. Groups may read any row, so the panel is double-buffered: the dispatch
// reads Sin and writes Sout ([B, M, ls] buffers holding the panel's w columns; cm = 1: [B, ls, M],
// column-major, TUNING.panel_colmajor), rows whose final
// position is known (the KL pivot rows; every row in the last dispatch) go straight to A. Each
// thread holds SLOTS / KL active rows x KL columns in registers, twice as many for float32 (the
// host picks KL so that the active rows fit: M - o - s <= ntg * slots / KL; SLOTS = 32 or 64, the
// register budget, a tuning choice: 64 complex values a thread fit the H200's 255 registers, and
// a tall panel's few groups leave most of a GPU's cores idle anyway). Same arithmetic, in the same order,
// as getf2, so the factors equal lu_panel's; same NaN, zero-pivot, info and sfmin rules.
// Dispatch for columns [s, s + kc) (relative to o, kc <= KL); grid: threads = B * G * ntg,
// group_size = ntg (a power of two, 32..256); group g owns positions [o + g*R, o + (g+1)*R).
// The panel's first dispatch (phase 1) reads A itself instead of a copy in Sin, so it writes every
// row to Sout, the final ones included (A's rows are still being read); the second dispatch (phase
// 2) then moves the rows made final by the first, positions [o, o + s), from its Sin to A. A panel
// done in one dispatch is copied to Sin first (phase 0: it writes A while reading).
// VAR = 1, MMA (float32, KL = 8 or 16 only): the trailing rows' update, own rows x KL times KL x w, as
// 8 x 8 products on Apple's matrix units (simdgroup_matrix) into a threadgroup tile, then
// subtracted (LAPACK's order: the product, then A - product) instead of KL sequential
// multiply-subtracts per entry; a tuning variant (TUNING.look_mma), see docs/ops/lu.md.
// VAR = 2, ROLL: the small LU's column loop rolled, one body for every column (lu_look_column;
// TUNING.look_roll): the unrolled kernels are 80-250 KB of sm_90 code, streamed through the
// instruction cache once a dispatch (the H200's stalls on instruction fetch: 35%).
constant constexpr int LU_LOOK_MAX_ROWS = 64;  // R: rows (positions) per group
constant constexpr int LU_LOOK_MAX_W = 64;     // panel width

// P (rows x LU_LOOK_MAX_W) = X (rows x kl, row stride kl) @ U (kl x LU_LOOK_MAX_W) for the row
// tiles < ntr and the column tiles >= ct0, one 8 x 8 tile per simdgroup at a time (float only;
// the float2 overload is never called: lu_panel_look's MMA variant exists for float32 only).
inline void lu_look_mma(threadgroup float* P, threadgroup const float* X, threadgroup const float* U, int kl,
                        int ntr, int ct0, int sg, int nsg) {
  const int nct = LU_LOOK_MAX_W / 8 - ct0;
  for (int tile = sg; tile < ntr * nct; tile += nsg) {  // uniform over the simdgroup
    const int I = tile / nct;
    const int J = ct0 + tile % nct;
    simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    for (int kt = 0; kt < kl; kt += 8) {
      simdgroup_float8x8 xa;
      simdgroup_float8x8 ub;
      simdgroup_load(xa, X, ulong(kl), ulong2(ulong(kt), ulong(8 * I)));
      simdgroup_load(ub, U, ulong(LU_LOOK_MAX_W), ulong2(ulong(8 * J), ulong(kt)));
      simdgroup_multiply_accumulate(acc, xa, ub, acc);
    }
    simdgroup_store(acc, P, ulong(LU_LOOK_MAX_W), ulong2(ulong(8 * J), ulong(8 * I)));
  }
}
inline void lu_look_mma(threadgroup float2*, threadgroup const float2*, threadgroup const float2*, int, int, int,
                        int, int) {}
inline float lu_look_sub(float v, threadgroup const float* P, int idx) { return v - P[idx]; }
inline float2 lu_look_sub(float2 v, threadgroup const float2*, int) { return v; }

// Step j of lu_panel_look's small LU (position cs + j, j < nk; threads hold RPT rows x KL columns
// in x, their positions in pos): the pivot and its row in two barriers (each simdgroup's best
// candidate by butterflies, whose lane publishes it with its row's KL entries; one threadgroup
// round picks the winner, the sequential scan's: lu_pivot_beats is a total order), the
// interchange, the scaling and the rank-1 update of the rows below. ROLL = false: column j is
// x[i * KL + j] (the caller unrolls j); ROLL = true: column j is x[i * KL], and every row rotates
// its KL entries one place left, the finished column (its L entry, or U's for pivot rows) going to
// the end, so after KL steps (steps j >= nk only rotate) x is back in column order and every step
// runs the same code. Same arithmetic in the same order either way. Always inlined: a call keeps x
// in local memory (clang did not inline the larger instances; H200 round 1: 1.6x slower at n = 4096).
template <typename T, int KL, int RPT, bool ROLL>
__attribute__((always_inline)) inline void lu_look_column(thread T (&x)[RPT * KL], thread int (&pos)[RPT], int j,
                                                          int nk, int cs, int m, int t, int nt,
                                                          threadgroup float* red_v, threadgroup int* red_i,
                                                          threadgroup T* red_row, bool writer, device int* pv,
                                                          thread int& first_zero) {
  if (j >= nk) {
    if (ROLL) {
#pragma unroll
      for (int i = 0; i < RPT; ++i) {
        const T head = x[i * KL];
#pragma unroll
        for (int q = 0; q < KL - 1; ++q) {
          x[i * KL + q] = x[i * KL + q + 1];
        }
        x[i * KL + KL - 1] = head;
      }
    }
    return;
  }
  const int jx = ROLL ? 0 : j;  // column j's place in a row of x
  const int cj = cs + j;
  float best = -1.0f;
  int bi = m;
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    if (pos[i] >= cj) {
      const float v = s_abs1(x[i * KL + jx]);
      if (lu_pivot_beats(v, pos[i], best, bi)) {
        best = v;
        bi = pos[i];
      }
    }
  }
  lu_pivot_simd(best, bi);
  threadgroup_barrier(mem_flags::mem_threadgroup);  // the previous column's reads are done
  const int sg = t / SIMD_WIDTH;
  if (t % SIMD_WIDTH == 0) {
    red_v[sg] = best;
    red_i[sg] = bi;
  }
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    if (pos[i] == bi) {  // this simdgroup's best row is this lane's
#pragma unroll
      for (int q = 0; q < KL; ++q) {
        red_row[sg * KL + q] = x[i * KL + q];
      }
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  best = red_v[0];
  bi = red_i[0];
  int ws = 0;
  for (int q = 1; q < nt / SIMD_WIDTH; ++q) {
    if (lu_pivot_beats(red_v[q], red_i[q], best, bi)) {
      best = red_v[q];
      bi = red_i[q];
      ws = q;
    }
  }
  const int p = (bi >= m) ? cj : bi;  // bi < m: position cj < m is always a candidate
  threadgroup const T* pslice = red_row + ws * KL;  // the pivot row's KL entries (ROLL: from column j)
  const T pivot = pslice[jx];
  const bool nonzero = !s_is_zero(pivot);
  if (writer && t == 0) {
    pv[cj] = p + 1;
  }
  if (!nonzero && first_zero < 0) {
    first_zero = cj;
  }
  const bool recip = lu_use_recip(pivot);
  const T rp = lu_recip(pivot);
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    if (nonzero && p != cj) {  // the interchange of positions cj and p
      if (pos[i] == p) {
        pos[i] = cj;
      } else if (pos[i] == cj) {
        pos[i] = p;
      }
    }
    if (ROLL) {
      const bool below = pos[i] > cj;
      T l = x[i * KL];
      if (below && nonzero) {
        l = lu_scale(l, pivot, rp, recip);
      }
#pragma unroll
      for (int q = 0; q < KL - 1; ++q) {  // entries KL - 1 - j and on are earlier columns' L
        const T y = x[i * KL + q + 1];
        x[i * KL + q] = (below && q < KL - 1 - j) ? y - s_mul(l, pslice[q + 1]) : y;
      }
      x[i * KL + KL - 1] = l;
    } else if (pos[i] > cj) {
      T l = x[i * KL + j];
      if (nonzero) {
        l = lu_scale(l, pivot, rp, recip);
      }
      x[i * KL + j] = l;
#pragma unroll
      // a constant trip count (q > j tested inside), which clang unrolls before the j loop,
      // except complex64 k = 16, which spills so and not from j + 1 (sm_90, docs/evidence/lu.md)
      for (int q = (sizeof(T) == 4 || KL < 16) ? 0 : j + 1; q < KL; ++q) {
        if (q > j) {
          x[i * KL + q] -= s_mul(l, pslice[q]);
        }
      }
    }
  }
}

template <typename T, int KL, int SLOTS, int VAR>
[[max_total_threads_per_threadgroup(256)]]  // = LU_PANEL_MAX_THREADS
kernel void lu_panel_look(device T* A [[buffer(0)]],
                          device const T* Sin [[buffer(1)]],
                          device T* Sout [[buffer(2)]],
                          device int* piv [[buffer(3)]],
                          device int* info [[buffer(4)]],
                          constant long& M [[buffer(5)]],
                          constant long& N [[buffer(6)]],
                          constant long& K [[buffer(7)]],
                          constant long& o [[buffer(8)]],
                          constant long& w [[buffer(9)]],
                          constant long& ls [[buffer(10)]],
                          constant long& s [[buffer(11)]],
                          constant long& kc [[buffer(12)]],
                          constant long& G [[buffer(13)]],
                          constant long& R [[buffer(14)]],
                          constant long& last [[buffer(15)]],
                          constant long& phase [[buffer(16)]],
                          constant long& cm [[buffer(17)]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint ntg [[threads_per_threadgroup]],
                          uint tg [[threadgroup_position_in_grid]]) {
  constexpr int RPT = SLOTS * (sizeof(T) == 4 ? 2 : 1) / KL;  // active rows per thread
  constexpr bool MMA = VAR == 1;   // the trailing update on the matrix units
  constexpr bool ROLL = VAR == 2;  // the small LU's column loop rolled (lu_look_column)
  threadgroup float red_v[LU_PANEL_MAX_THREADS];
  threadgroup int red_i[LU_PANEL_MAX_THREADS];
  threadgroup T red_row[LU_PANEL_MAX_THREADS / SIMD_WIDTH * KL];  // each simdgroup's best row's KL entries
  threadgroup T pl[KL * KL];                   // the KL pivot rows' final KL entries
  threadgroup int porig[KL];                   // ... and their rows in Sin
  threadgroup T ub[KL * LU_LOOK_MAX_W];        // the KL rows of U beyond column s + kc
  threadgroup T own_x[LU_LOOK_MAX_ROWS * KL];  // the group's positions: their KL entries
  threadgroup T prod[MMA ? LU_LOOK_MAX_ROWS * LU_LOOK_MAX_W : 1];  // MMA: own_x @ ub
  threadgroup int own_src[LU_LOOK_MAX_ROWS];   // ... and their rows in Sin
  const int ng = (int)G;
  const int b = (int)(tg / (uint)ng);
  const int g = (int)(tg % (uint)ng);
  const int m = (int)M;
  const int n = (int)N;
  const int c0 = (int)o;
  const int nw = (int)w;
  const int s0 = (int)s;
  const int nk = (int)kc;
  const int cs = c0 + s0;  // first position of this dispatch
  const int t = (int)tid;
  const int nt = (int)ntg;
  const int rlo = c0 + g * (int)R;
  const int rhi = min(m, rlo + (int)R);
  device T* a = A + (long)b * M * N;
  const bool from_a = phase == 1;
  device const T* sin = from_a ? A + (long)b * M * N + c0 : Sin + (long)b * M * ls;
  // element (row r, column c) of the buffers at r * sr + c * sc: row-major [M, ls] or, cm != 0,
  // column-major [ls, M] (a warp's loads of one column are then one coalesced transaction)
  const int sr = cm != 0 ? 1 : (int)ls;
  const int sc = cm != 0 ? m : 1;
  const int ri = from_a ? n : sr;  // sin's strides (A itself is row-major)
  const int ci = from_a ? 1 : sc;
  device T* sout = Sout + (long)b * M * ls;
  if (phase == 2) {  // the first dispatch's final rows [c0, cs), from Sin to A (nobody reads them)
    for (int e = t; e < max(0, min(rhi, cs) - rlo) * (int)w; e += nt) {
      const int q = rlo + e / (int)w;
      const int c = e % (int)w;
      a[q * n + c0 + c] = sin[q * ri + c * ci];
    }
  }
  if (rhi <= cs) {
    return;  // every position of this group is final already (uniform over the group)
  }
  // 1. the small LU of every active row (positions >= cs) on columns [s, s + kc), in registers
  T x[RPT * KL];
  int pos[RPT];  // current position of the row held (-1: none); its row in Sin is cs + t + i * nt
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int r = cs + t + i * nt;
    pos[i] = r < m ? r : -1;
#pragma unroll
    for (int j = 0; j < KL; ++j) {
      x[i * KL + j] = (r < m && j < nk) ? sin[r * ri + (s0 + j) * ci] : s_zero<T>();
    }
  }
  const bool writer = rlo <= cs;  // the group owning position cs writes piv and info
  int first_zero = -1;
  device int* pv = piv + (long)b * K;
  if (ROLL) {
    // one loop body for every column (the registers rotate one column a step), small enough to
    // stay in the instruction cache; the unrolled form streams tens of KiB of code a dispatch
#pragma unroll 1
    for (int j = 0; j < KL; ++j) {
      lu_look_column<T, KL, RPT, true>(x, pos, j, nk, cs, m, t, nt, red_v, red_i, red_row, writer, pv, first_zero);
    }
  } else {
#pragma unroll
    for (int j = 0; j < KL; ++j) {
      lu_look_column<T, KL, RPT, false>(x, pos, j, nk, cs, m, t, nt, red_v, red_i, red_row, writer, pv, first_zero);
    }
  }
  if (writer && t == 0 && first_zero >= 0 && info[b] == 0) {
    info[b] = first_zero + 1;
  }
  // 2. publish the pivot rows' and the group's own rows' entries
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int q = pos[i];
    if (q >= cs && q < cs + nk) {
#pragma unroll
      for (int j = 0; j < KL; ++j) {
        pl[(q - cs) * KL + j] = x[i * KL + j];
      }
      porig[q - cs] = cs + t + i * nt;
    }
    if (q >= rlo && q < rhi) {
#pragma unroll
      for (int j = 0; j < KL; ++j) {
        own_x[(q - rlo) * KL + j] = (MMA && j >= nk) ? s_zero<T>() : x[i * KL + j];  // MMA: k-padding
      }
      own_src[q - rlo] = cs + t + i * nt;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  // 3. the pivot rows of U beyond the KL columns: U_j = Sin[porig_j] - sum_{i<j} l_ji U_i, in order
  //    (a thread's column in registers: its KL loads at once, no threadgroup round trip per term)
  const int cb = s0 + nk;  // first column beyond
  for (int c = cb + t; c < nw; c += nt) {
    T u[KL];
#pragma unroll
    for (int j = 0; j < KL; ++j) {
      u[j] = j < nk ? sin[porig[j] * ri + c * ci] : s_zero<T>();
    }
#pragma unroll
    for (int j = 0; j < KL; ++j) {
      if (j < nk) {
#pragma unroll
        for (int i = 0; i < j; ++i) {
          u[j] -= s_mul(pl[j * KL + i], u[i]);
        }
        ub[j * LU_LOOK_MAX_W + c] = u[j];
      }
    }
  }
  if (MMA) {  // the product's k-padding rows of ub are zero (own_x's padding columns are too)
    for (int e = t; e < (KL - nk) * LU_LOOK_MAX_W; e += nt) {
      ub[nk * LU_LOOK_MAX_W + e] = s_zero<T>();
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (MMA) {
    lu_look_mma(prod, own_x, ub, KL, (rhi - rlo + 7) / 8, cb / 8, t / SIMD_WIDTH, nt / SIMD_WIDTH);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  // 4. the group's positions >= cs: every column, to A (final rows) or to Sout (rows still active);
  //    consecutive threads take consecutive columns of a row (A, row-major buffers) or consecutive
  //    rows of a column (column-major buffers, unless every row goes to A)
  const int qlo = max(rlo, cs);
  const int nq = rhi - qlo;
  const bool by_rows = cm != 0 && last == 0;
  for (int e = t; e < nq * nw; e += nt) {
    const int q = qlo + (by_rows ? e % nq : e / nw);
    const int c = by_rows ? e / nq : e % nw;
    const int k = q - rlo;
    const int src = own_src[k];
    T v;
    if (c < s0) {
      v = sin[src * ri + c * ci];  // L entries of earlier columns move with the row
    } else if (c < cb) {
      v = own_x[k * KL + (c - s0)];
    } else if (q < cs + nk) {
      v = ub[(q - cs) * LU_LOOK_MAX_W + c];
    } else {
      v = sin[src * ri + c * ci];
      if (MMA) {
        v = lu_look_sub(v, prod, k * LU_LOOK_MAX_W + c);
      } else {
#pragma unroll
        for (int j = 0; j < KL; ++j) {
          if (j < nk) {
            v -= s_mul(own_x[k * KL + j], ub[j * LU_LOOK_MAX_W + c]);
          }
        }
      }
    }
    if ((q < cs + nk && !from_a) || last != 0) {
      a[q * n + c0 + c] = v;
    } else {
      sout[q * sr + c * sc] = v;
    }
  }
}

// ---- lu_panel_regs -------------------------------------------------------------------------------
//
// The panel contract (rows [o, M) x columns [o, o + w), w <= LU_REGS_W) by ONE threadgroup per
// matrix with the whole panel in registers: thread t holds the rows o + t + i * ntg (i < RPT,
// RPT = SLOTS / LU_REGS_W rows, twice as many for float32; the host checks M - o <= ntg * RPT),
// and the small LU runs as lu_panel_look's rolled column loop (lu_look_column: two barriers a
// column, no device-memory round trip) before each row is written to its final position. Same
// pivots, arithmetic, NaN, zero-pivot, info and sfmin rules as lu_panel. Grid: threads = B * ntg,
// group_size = ntg (a power of two, 32..256).
constant constexpr int LU_REGS_W = 32;

template <typename T, int SLOTS>
[[max_total_threads_per_threadgroup(256)]]  // = LU_PANEL_MAX_THREADS
kernel void lu_panel_regs(device T* A [[buffer(0)]],
                          device int* piv [[buffer(1)]],
                          device int* info [[buffer(2)]],
                          constant long& M [[buffer(3)]],
                          constant long& N [[buffer(4)]],
                          constant long& K [[buffer(5)]],
                          constant long& o [[buffer(6)]],
                          constant long& w [[buffer(7)]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint ntg [[threads_per_threadgroup]],
                          uint b [[threadgroup_position_in_grid]]) {
  constexpr int RPT = SLOTS * (sizeof(T) == 4 ? 2 : 1) / LU_REGS_W;
  threadgroup float red_v[LU_PANEL_MAX_THREADS];
  threadgroup int red_i[LU_PANEL_MAX_THREADS];
  threadgroup T red_row[LU_PANEL_MAX_THREADS / SIMD_WIDTH * LU_REGS_W];
  const int m = (int)M;
  const int n = (int)N;
  const int c0 = (int)o;
  const int nw = (int)w;
  const int t = (int)tid;
  const int nt = (int)ntg;
  device T* a = A + (long)b * M * N + c0;  // 64-bit base offset; 32-bit inside the matrix
  T x[RPT * LU_REGS_W];
  int pos[RPT];  // current position of the row held (-1: none)
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int r = c0 + t + i * nt;
    pos[i] = r < m ? r : -1;
#pragma unroll
    for (int j = 0; j < LU_REGS_W; ++j) {
      x[i * LU_REGS_W + j] = (r < m && j < nw) ? a[r * n + j] : s_zero<T>();
    }
  }
  int first_zero = -1;
  const int kl = min(m - c0, nw);
#pragma unroll 1
  for (int j = 0; j < LU_REGS_W; ++j) {
    lu_look_column<T, LU_REGS_W, RPT, true>(x, pos, j, kl, c0, m, t, nt, red_v, red_i, red_row, true,
                                            piv + (long)b * K, first_zero);
  }
  if (t == 0 && first_zero >= 0 && info[b] == 0) {
    info[b] = first_zero + 1;
  }
  threadgroup_barrier(mem_flags::mem_device);  // every row of the panel is read before any is written
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    if (pos[i] >= 0) {
#pragma unroll
      for (int j = 0; j < LU_REGS_W; ++j) {
        if (j < nw) {
          a[pos[i] * n + j] = x[i * LU_REGS_W + j];
        }
      }
    }
  }
}

// ---- instantiations -------------------------------------------------------------------------------

MPSL_INSTANTIATE("lu_panel_regs_f32_32", lu_panel_regs, float, 32)
MPSL_INSTANTIATE("lu_panel_regs_c64_32", lu_panel_regs, float2, 32)
#define LU_INSTANTIATE_LOOK(KL, SLOTS)                                                         \
  MPSL_INSTANTIATE("lu_panel_look_f32_" #KL "_" #SLOTS, lu_panel_look, float, KL, SLOTS, 0)   \
  MPSL_INSTANTIATE("lu_panel_look_c64_" #KL "_" #SLOTS, lu_panel_look, float2, KL, SLOTS, 0)
LU_INSTANTIATE_LOOK(2, 32)
LU_INSTANTIATE_LOOK(4, 32)
LU_INSTANTIATE_LOOK(8, 32)
LU_INSTANTIATE_LOOK(16, 32)
MPSL_INSTANTIATE("lu_panel_look_f32_8_32_1", lu_panel_look, float, 8, 32, 1)
MPSL_INSTANTIATE("lu_panel_look_f32_16_32_1", lu_panel_look, float, 16, 32, 1)
#define LU_INSTANTIATE_LOOK_ROLL(KL, SLOTS)                                                              \
  MPSL_INSTANTIATE("lu_panel_look_f32_" #KL "_" #SLOTS "_2", lu_panel_look, float, KL, SLOTS, 2)   \
  MPSL_INSTANTIATE("lu_panel_look_c64_" #KL "_" #SLOTS "_2", lu_panel_look, float2, KL, SLOTS, 2)
LU_INSTANTIATE_LOOK_ROLL(2, 32)
LU_INSTANTIATE_LOOK_ROLL(4, 32)
LU_INSTANTIATE_LOOK_ROLL(8, 32)
LU_INSTANTIATE_LOOK_ROLL(16, 32)
