// triangular.metal - kernels of the triangular-solve family (mpslinalg/triangular.py).
//
// Index maps: every operand is addressed through an array `map = {off, bs, rs, cs}` (element
// offset and batch / row / column strides, signed) bound as one `constant long*` buffer: the
// host passes a Python list (torch.mps.compile_shader binds it as an array of longs). Transposed,
// reversed (negative strides), offset and broadcast (stride 0) views are index maps, not copies;
// Metal ignores tensor strides, so these maps are the only way a view's layout reaches a kernel.
// Indexing: 64-bit for a matrix's base offset, 32-bit inside a matrix (the host checks that every
// in-matrix offset fits in 31 bits; Apple GPUs have no native 64-bit multiply or divide).
#include "scalar.h"
#include <metal_stdlib>  // simdgroup_matrix (trsm_small_mma); scalar.h includes it too

// ---------------------------------------------------------------------------------------------
// trtri_diag: invert every nb x nb diagonal block (nb <= 32) of a batch of triangles in ONE
// dispatch. The rest of a blocked triangular solve is matrix products (torch.matmul).
//
// Contract (identical to the torch-op implementation _trtri_diag_torch):
//   A      the logical n x n triangles, A[i][j] = A[a_map.off + b*a_map.bs + i*rs + j*cs].
//          Only the LOWER triangle of the logical matrix is read (i >= j; i > j when unit): an
//          upper triangle is passed with its row and column strides swapped by the caller.
//   D      output, contiguous [batch, nblk, nb, nb], nblk = ceil(n / nb): block j holds the inverse
//          of A[j*nb:(j+1)*nb, j*nb:(j+1)*nb], lower triangular with explicit zeros above the
//          diagonal; when n % nb != 0 the last block is padded with the identity.
//   Tb     output, same layout: a clean copy of the diagonal block itself (its lower triangle,
//          zeros above, ones on a unit diagonal, identity padding). The solve needs it for the
//          refinement step X = Y + D (R - Tb Y) without reading the other triangle.
//   dims   {n, nb, nblk, flags}; flags bit 0: unit diagonal (taken as 1, never read); bit 1: conj(A).
//   A zero diagonal entry yields inf/nan, as LAPACK's trsm does (no info for this op).
//
// Dispatch: one threadgroup of 32 threads (one simdgroup) per diagonal block:
//   threads = batch * nblk * 32, group_size = 32.
// The block is staged in threadgroup memory (coalesced loads), then thread c computes column c of
// the inverse by forward substitution (solving L y = e_c), which is backward stable column by
// column; the division by the diagonal is a true division (no reciprocal), as in LAPACK's trsv.
// Threadgroup memory: one 32 x 33 tile of T (8.4 KiB for complex64; column c of the inverse is
// private to thread c, so it lives in registers and in D, not in a second shared tile).
// ---------------------------------------------------------------------------------------------
constant constexpr int TRI_MAXNB = 32;
constant constexpr int TRI_LD = 33;  // padded leading dimension of the tiles (no bank conflicts on columns)
constant constexpr int TRI_CHUNK = 8;  // rows solved together in registers (trtri_diag)

template <typename T>
[[max_total_threads_per_threadgroup(32)]]
kernel void trtri_diag(device const T* A [[buffer(0)]],
                       device T* D [[buffer(1)]],
                       device T* Tb [[buffer(2)]],
                       constant long* dims [[buffer(3)]],
                       constant long* a_map [[buffer(4)]],
                       uint group [[threadgroup_position_in_grid]],
                       uint tid [[thread_position_in_threadgroup]]) {
  threadgroup T L[TRI_MAXNB * TRI_LD];  // the diagonal block (lower triangle only is filled)

  const int n = (int)dims[0];
  const int nb = (int)dims[1];
  const uint nblk = (uint)dims[2];
  const bool unit = (dims[3] & 1) != 0;
  const bool conj = (dims[3] & 2) != 0;
  const int rs = (int)a_map[2];
  const int cs = (int)a_map[3];
  const uint b = group / nblk;
  const int r0 = (int)(group % nblk) * nb;
  const int bs = min(n - r0, nb);  // rows of this (possibly partial, last) block
  device const T* Ab = A + a_map[0] + (long)b * a_map[1] + (long)r0 * (a_map[2] + a_map[3]);

  // Stage the lower triangle (strictly lower when unit): consecutive threads, consecutive j.
  for (int i = 0; i < bs; ++i) {
    for (int j = (int)tid; j <= i; j += SIMD_WIDTH) {
      if (j < i || !unit) {
        const T v = Ab[i * rs + j * cs];
        L[i * TRI_LD + j] = conj ? s_conj(v) : v;
      }
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  const int c = (int)tid;
  if (c < nb) {
    const long blk0 = (long)group * nb * nb;  // = (b * nblk + blk) * nb * nb
    device T* Dc = D + blk0 + c;  // column c of the output blocks
    device T* Tc = Tb + blk0 + c;
    if (c < bs) {
      // Forward substitution for column c: y_i = (delta_ic - sum_{c<=k<i} L_ik y_k) / L_ii, rows
      // in chunks of TRI_CHUNK in registers (as trsm_small); finished rows are read back from D,
      // which this thread wrote. Same subtraction order as the plain loop (k = c, c+1, ...).
      for (int i = 0; i < c; ++i) {
        Dc[i * nb] = s_zero<T>();
      }
      for (int i0 = c; i0 < bs; i0 += TRI_CHUNK) {
        T s[TRI_CHUNK];
        int row[TRI_CHUNK];  // tile offset of row i0 + r (rows past bs: row bs - 1, sums discarded)
#pragma unroll
        for (int r = 0; r < TRI_CHUNK; ++r) {
          row[r] = min(i0 + r, bs - 1) * TRI_LD;
          s[r] = (i0 + r == c) ? s_one<T>() : s_zero<T>();
        }
        for (int k = c; k < i0; ++k) {
          const T yk = Dc[k * nb];
#pragma unroll
          for (int r = 0; r < TRI_CHUNK; ++r) {
            s[r] -= s_mul(L[row[r] + k], yk);
          }
        }
#pragma unroll
        for (int r = 0; r < TRI_CHUNK; ++r) {
          if (i0 + r < bs) {
#pragma unroll
            for (int q = 0; q < r; ++q) {
              s[r] -= s_mul(L[row[r] + i0 + q], s[q]);  // s[q] = y[i0 + q] by now
            }
            if (!unit) {
              s[r] = s_div(s[r], L[row[r] + i0 + r]);
            }
            Dc[(i0 + r) * nb] = s[r];
          }
        }
      }
      for (int i = 0; i < nb; ++i) {
        const bool in = i >= c && i < bs;
        if (i >= bs) {
          Dc[i * nb] = s_zero<T>();
        }
        Tc[i * nb] = (i == c && unit) ? s_one<T>() : (in ? L[i * TRI_LD + c] : s_zero<T>());
      }
    } else {
      // Padding column of a partial last block: identity.
      for (int i = 0; i < nb; ++i) {
        Dc[i * nb] = (i == c) ? s_one<T>() : s_zero<T>();
        Tc[i * nb] = (i == c) ? s_one<T>() : s_zero<T>();
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// trsm_small: the whole solve L X = B for n <= 64 in one dispatch (the batched fast path: DeltaNet
// chunks, 4096 x 64x64 systems). Forward substitution, i.e. LAPACK's trsm algorithm: backward
// stable whatever the conditioning, and it reads A and B once and writes X once.
//
// Contract (identical to the blocked torch-op path for these sizes):
//   Logical lower-triangular L (n x n), right-hand sides B and output X (n x k) of nmat systems,
//   each addressed by an index map {off, bs, rs, cs}: L[i][j] = A[off + m*bs + i*rs + j*cs]
//   (i >= j), B[i][c] and X[i][c] likewise. So transposes (right solves), reversals (upper =
//   J lower J, negative strides) and broadcast batches (stride 0) are index maps, not copies.
//   Only i >= j (i > j when unit) entries of L are read. A zero pivot gives inf/nan (as trsm).
//   x_i = (b_i - L_i0 x_0 - L_i1 x_1 - ... - L_i,i-1 x_i-1) / L_ii: LAPACK's order of operations.
//   prm (one argument buffer: one setBytes on Metal, one copy on the cuda target) =
//     {n, k, nmat, flags, ct, spg, ntile, a_map[4], b_map[4], x_map[4]};
//   flags bit 0 unit diagonal (never read), bit 1 conj(A), bit 2 conj(B).
// Dispatch: a threadgroup holds spg systems and ct right-hand-side columns of each (a tile; ntile
//   = ceil(k / ct) tiles per system); thread s * ct + c owns column c of system s, threads past
//   spg * ct only help staging. threads = ceil(nmat / spg) * ntile * group, group_size = group, a
//   multiple of 32, >= spg * ct, <= TRI_SMALL_GROUP; spg * tri_quads(n) <= TRI_SMALL_QUADS, where
//   tri_quads(n) = nq (nq + 1) * 2, nq = 4 ceil(n / 16). NMAX (16, 32, 64) >= n is the variant.
// Why this shape (issue 16): the triangle is staged in threadgroup memory ONCE per group and read
//   by all threads of a system at the same address (a broadcast), four rows at a time (one 16-byte
//   load per four float32 multiply-subtracts); each thread keeps its whole column of x in
//   registers, as NMAX / 16 blocks of 16 rows, so the only memory traffic is reading A and B and
//   writing X. Blocked substitution, right-looking: solve diagonal block J (substitution inside
//   it), then subtract its contribution from every later block I (a 16 x 16 block product). Each
//   x_i still subtracts its terms in the order j = 0, 1, ..., i - 1, and once x_j is final the
//   row updates that use it are independent (instruction-level parallelism). The blocks are
//   separate inline calls with 16-row loops, not one loop over all rows: a fully unrolled loop
//   of NMAX^2 / 2 updates exceeds the compilers' unroll limits, and a register array indexed at
//   run time lives in (slow) stack memory.
// Threadgroup layout: column j of a system keeps rows 4*(j/4) .. 4*nq - 1 as quads of four rows
//   (tri_col_quad(j, nq) is its first quad); rows >= n and rows above the diagonal inside a quad
//   are zeros; columns n .. 4*nq - 1 are never written (they only feed rows >= n, discarded).
// ---------------------------------------------------------------------------------------------
constant constexpr int TRI_SMALL_N = 64;
constant constexpr int TRI_SMALL_QUADS = 544;  // tri_quads(64): 2176 entries, 8.5 / 17 KiB
constant constexpr int TRI_SMALL_GROUP = 128;
constant constexpr int TRI_RB = 16;  // rows per register block

// Four consecutive rows of one column of L: one 16-byte threadgroup load for float32, two for
// complex64. The threadgroup store is an array of float4 (sizeof(T) / 4 per quad);
// quad_get(q, t) is row t of the quad (t a compile-time constant after unrolling).
template <typename T> struct tri_quad;
template <> struct tri_quad<float> { float4 v; };
template <> struct tri_quad<float2> { float4 lo; float4 hi; };

inline float quad_get(tri_quad<float> q, int t) { return q.v[t]; }
inline float2 quad_get(tri_quad<float2> q, int t) {
  const float4 h = t < 2 ? q.lo : q.hi;
  return (t & 1) ? h.zw : h.xy;
}
inline void quad_load(threadgroup const float4* L, int i, thread tri_quad<float>& q) { q.v = L[i]; }
inline void quad_load(threadgroup const float4* L, int i, thread tri_quad<float2>& q) {
  q.lo = L[2 * i];
  q.hi = L[2 * i + 1];
}
inline void quad_store(threadgroup float4* L, int i, float a, float b, float c, float d) {
  L[i] = float4(a, b, c, d);
}
inline void quad_store(threadgroup float4* L, int i, float2 a, float2 b, float2 c, float2 d) {
  L[2 * i] = float4(a.x, a.y, b.x, b.y);
  L[2 * i + 1] = float4(c.x, c.y, d.x, d.y);
}

// First quad of column j of a column-packed triangle with nq quads per full column: columns
// j' < j keep nq - j'/4 quads each.
inline int tri_col_quad(int j, int nq) {
  const int p = j >> 2;
  return 4 * p * nq - 2 * p * (p - 1) + (j & 3) * (nq - p);
}

// Substitution inside diagonal block J: x holds rows 16J .. 16J+15 of the right-hand side minus
// the earlier blocks' contributions; on return the solution, also stored to X (rows < n).
template <typename T, bool UNIT>
__attribute__((always_inline)) inline void trsm_block_solve(thread T (&x)[TRI_RB], threadgroup const float4* Lq, int L0, int nq,
                             int J, int n, device T* Xc, int xrs) {
#pragma unroll
  for (int jj = 0; jj < TRI_RB; ++jj) {
    const int j = J * TRI_RB + jj;
    const int col = L0 + tri_col_quad(j, nq) - (j >> 2) + 4 * J;  // quad q of block J: col + q
#pragma unroll
    for (int q = 0; q < TRI_RB / 4; ++q) {
      if (q < jj / 4) {
        continue;  // constant loop bounds: every loop unrolls, x stays in registers
      }
      tri_quad<T> l;
      quad_load(Lq, col + q, l);
      if (q == jj / 4) {
        if (!UNIT) {
          x[jj] = s_div(x[jj], quad_get(l, jj % 4));
        }
        if (j < n) {
          Xc[j * xrs] = x[jj];
        }
      }
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        if (4 * q + t > jj) {
          x[4 * q + t] -= s_mul(quad_get(l, t), x[jj]);
        }
      }
    }
  }
}

// Block product: rows 16I .. 16I+15 (xi) -= L[block I, block J] * x_J (xj), J < I, column by column.
template <typename T>
__attribute__((always_inline)) inline void trsm_block_update(thread T (&xi)[TRI_RB], thread const T (&xj)[TRI_RB], threadgroup const float4* Lq,
                              int L0, int nq, int I, int J) {
#pragma unroll
  for (int jj = 0; jj < TRI_RB; ++jj) {
    const int j = J * TRI_RB + jj;
    const int col = L0 + tri_col_quad(j, nq) - (j >> 2) + 4 * I;  // quad q of block I: col + q
#pragma unroll
    for (int q = 0; q < TRI_RB / 4; ++q) {
      tri_quad<T> l;
      quad_load(Lq, col + q, l);
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        xi[4 * q + t] -= s_mul(quad_get(l, t), xj[jj]);
      }
    }
  }
}

template <typename T, int NMAX, bool UNIT>
[[max_total_threads_per_threadgroup(128)]]
kernel void trsm_small(device const T* A [[buffer(0)]],
                       device const T* B [[buffer(1)]],
                       device T* X [[buffer(2)]],
                       constant long* prm [[buffer(3)]],
                       uint group [[threadgroup_position_in_grid]],
                       uint tid [[thread_position_in_threadgroup]],
                       uint gsize [[threads_per_threadgroup]]) {
  constexpr int NB = NMAX / TRI_RB;  // register blocks
  static_assert(NMAX % TRI_RB == 0 && NMAX <= TRI_SMALL_N, "trsm_small: NMAX");
  threadgroup float4 Lq[TRI_SMALL_QUADS * (sizeof(T) / 4)];  // float4 words: 1 per quad (f32), 2 (c64)

  const int n = (int)prm[0];
  const int k = (int)prm[1];
  const long nmat = prm[2];
  const bool conj_a = (prm[3] & 2) != 0;
  const bool conj_b = (prm[3] & 4) != 0;
  const int ct = (int)prm[4];
  const int spg = (int)prm[5];
  const uint ntile = (uint)prm[6];
  constant long* a_map = prm + 7;
  constant long* b_map = prm + 11;
  constant long* x_map = prm + 15;
  const long m0 = (long)(group / ntile) * spg;  // first system of this group
  const int tile = (int)(group % ntile);
  const int ars = (int)a_map[2], acs = (int)a_map[3];
  const int nq = 4 * ((n + TRI_RB - 1) / TRI_RB);  // quads per full column: whole 16-row blocks
  const int triq = nq * (nq + 1) * 2;  // quads per system: tri_col_quad(4 * nq, nq)

  // Stage the triangles: quad q of column j holds rows 4q..4q+3 (rows >= n are zeros, never read
  // from A). Consecutive threads take consecutive columns j (coalesced for row-major A). One flat
  // loop over (q, system, j), unrolled so that several items' loads are in flight at once.
  const int work = spg * n;
#pragma unroll 4
  for (int it = (int)tid; it < nq * work; it += (int)gsize) {
    const int q = it / work;
    const int w = it - q * work;
    const int s = spg == 1 ? 0 : w / n;
    const int j = w - s * n;
    if (q < (j >> 2) || m0 + s >= nmat) {
      continue;
    }
    device const T* Am = A + a_map[0] + (m0 + s) * a_map[1] + j * acs;
    T e[4];
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const int i = 4 * q + t;
      e[t] = s_zero<T>();
      if (i < n && (i > j || (i == j && !UNIT))) {
        const T v = Am[i * ars];
        e[t] = conj_a ? s_conj(v) : v;
      }
    }
    quad_store(Lq, s * triq + tri_col_quad(j, nq) + q - (j >> 2), e[0], e[1], e[2], e[3]);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  const int s = (int)tid / ct;
  const int c = tile * ct + (int)tid % ct;
  if (s >= spg || m0 + s >= nmat || c >= k) {
    return;
  }
  const long m = m0 + s;
  const int brs = (int)b_map[2], xrs = (int)x_map[2];
  device const T* Bc = B + b_map[0] + m * b_map[1] + (long)c * b_map[3];
  device T* Xc = X + x_map[0] + m * x_map[1] + (long)c * x_map[3];
  const int L0 = s * triq;  // first quad of this system's triangle

  T x[4][TRI_RB];  // blocks past NB are never touched (compile-time conditions below)
#pragma unroll
  for (int I = 0; I < NB; ++I) {
#pragma unroll
    for (int ii = 0; ii < TRI_RB; ++ii) {
      const int i = I * TRI_RB + ii;
      x[I][ii] = s_zero<T>();
      if (i < n) {
        const T v = Bc[i * brs];
        x[I][ii] = conj_b ? s_conj(v) : v;
      }
    }
  }
  // Blocks at or past n are skipped (uniform branches): block I exists when 16 I < n.
  const bool b1 = NB > 1 && n > TRI_RB, b2 = NB > 2 && n > 2 * TRI_RB, b3 = NB > 3 && n > 3 * TRI_RB;
  trsm_block_solve<T, UNIT>(x[0], Lq, L0, nq, 0, n, Xc, xrs);
  if (b1) trsm_block_update(x[1], x[0], Lq, L0, nq, 1, 0);
  if (b2) trsm_block_update(x[2], x[0], Lq, L0, nq, 2, 0);
  if (b3) trsm_block_update(x[3], x[0], Lq, L0, nq, 3, 0);
  if (b1) trsm_block_solve<T, UNIT>(x[1], Lq, L0, nq, 1, n, Xc, xrs);
  if (b2) trsm_block_update(x[2], x[1], Lq, L0, nq, 2, 1);
  if (b3) trsm_block_update(x[3], x[1], Lq, L0, nq, 3, 1);
  if (b2) trsm_block_solve<T, UNIT>(x[2], Lq, L0, nq, 2, n, Xc, xrs);
  if (b3) trsm_block_update(x[3], x[2], Lq, L0, nq, 3, 2);
  if (b3) trsm_block_solve<T, UNIT>(x[3], Lq, L0, nq, 3, n, Xc, xrs);
}

// ---------------------------------------------------------------------------------------------
// trsm_small_mma: the compile-time variant of trsm_small (float32 only) whose block products run
// on Apple's matrix units (simdgroup_matrix, 8 x 8); host name trsm_small_f32_64_2 (the trailing
// 2: matrix-unit variant), selected by TUNING.small_mma. Same contract, argument buffer and grid
// as trsm_small with ct = 64, spg = 1 and groups of 64 threads (two simdgroups, 32 columns each).
// Threadgroup memory: the lower 8 x 8 tiles of L (row-major, off-diagonal tiles negated so that
// X_I += (-L_IJ) X_J is one multiply-accumulate; 9 KiB) and X (64 rows x 64 columns, 16 KiB).
// Per 8-row block J: each thread solves its column of the diagonal block by substitution (LAPACK's
// order inside the block), then its simdgroup updates every later block of its 32 columns with
// simdgroup_multiply_accumulate. The sums of a block product are formed in the matrix unit's
// order (8 products, then the accumulator), so results differ from sequential substitution in
// the last bits; blocked substitution is backward stable all the same (Higham sec. 13.1). Each
// simdgroup owns its columns: after the staging barrier only simdgroup barriers are needed.
// ---------------------------------------------------------------------------------------------
constant constexpr int TRI_MMA_LDX = 64;  // row stride of X in threadgroup memory

template <int NMAX>
[[max_total_threads_per_threadgroup(64)]]
kernel void trsm_small_mma(device const float* A [[buffer(0)]],
                           device const float* B [[buffer(1)]],
                           device float* X [[buffer(2)]],
                           constant long* prm [[buffer(3)]],
                           uint group [[threadgroup_position_in_grid]],
                           uint tid [[thread_position_in_threadgroup]],
                           uint sg [[simdgroup_index_in_threadgroup]]) {
  static_assert(NMAX == TRI_SMALL_N, "trsm_small_mma: one variant, n <= 64");
  threadgroup float Lt[36 * 64];  // tile (I, J), J <= I < 8, at (I (I + 1) / 2 + J) * 64
  threadgroup float Xs[TRI_SMALL_N * TRI_MMA_LDX];

  const int n = (int)prm[0];
  const int k = (int)prm[1];
  const bool unit = (prm[3] & 1) != 0;
  const uint ntile = (uint)prm[6];
  constant long* a_map = prm + 7;
  constant long* b_map = prm + 11;
  constant long* x_map = prm + 15;
  const long m = (long)(group / ntile);
  const int c = (int)(group % ntile) * 64 + (int)tid;  // this thread's column
  const int nb8 = (n + 7) / 8;  // 8-row blocks
  const int ars = (int)a_map[2], acs = (int)a_map[3];
  device const float* Am = A + a_map[0] + m * a_map[1];

  // Stage the tiles (zeros outside the triangle and past n; the diagonal of a unit triangle is
  // never read) and this thread's column of B (zeros past n and k).
  for (int e = (int)tid; e < nb8 * (nb8 + 1) / 2 * 64; e += 64) {
    const int t = e / 64, r = (e / 8) % 8, cc = e % 8;
    int I = 0;
    while ((I + 1) * (I + 2) / 2 <= t) {
      ++I;
    }
    const int J = t - I * (I + 1) / 2;
    const int i = 8 * I + r, j = 8 * J + cc;
    float v = 0.0f;
    if (i < n && (j < i || (j == i && !unit))) {
      v = Am[i * ars + j * acs];
    }
    Lt[e] = I == J ? v : -v;
  }
  device const float* Bc = B + b_map[0] + m * b_map[1] + (long)c * b_map[3];
  for (int i = 0; i < 8 * nb8; ++i) {
    Xs[i * TRI_MMA_LDX + tid] = (i < n && c < k) ? Bc[i * (int)b_map[2]] : 0.0f;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  device float* Xc = X + x_map[0] + m * x_map[1] + (long)c * x_map[3];
  const int xrs = (int)x_map[2];
  for (int J = 0; J < nb8; ++J) {
    // substitution inside diagonal block J, this thread's column
    threadgroup const float* D = Lt + (J * (J + 1) / 2 + J) * 64;
    float xr[8];
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      xr[r] = Xs[(8 * J + r) * TRI_MMA_LDX + tid];
    }
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      if (!unit) {
        xr[jj] = xr[jj] / D[jj * 8 + jj];
      }
#pragma unroll
      for (int r = 0; r < 8; ++r) {
        if (r > jj) {
          xr[r] -= D[r * 8 + jj] * xr[jj];
        }
      }
    }
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      Xs[(8 * J + r) * TRI_MMA_LDX + tid] = xr[r];
      if (8 * J + r < n && c < k) {
        Xc[(8 * J + r) * xrs] = xr[r];
      }
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);  // the lanes' stores before the matrix loads
    // block products: X_I += (-L_IJ) X_J for the later blocks, this simdgroup's 32 columns
    for (int ct = 0; ct < 4; ++ct) {
      const ulong col = SIMD_WIDTH * sg + 8 * (uint)ct;
      simdgroup_float8x8 xj;
      simdgroup_load(xj, Xs, TRI_MMA_LDX, ulong2(col, ulong(8 * J)));
      for (int I = J + 1; I < nb8; ++I) {
        simdgroup_float8x8 l, acc;
        simdgroup_load(l, Lt + (I * (I + 1) / 2 + J) * 64, 8);
        simdgroup_load(acc, Xs, TRI_MMA_LDX, ulong2(col, ulong(8 * I)));
        simdgroup_multiply_accumulate(acc, l, xj, acc);
        simdgroup_store(acc, Xs, TRI_MMA_LDX, ulong2(col, ulong(8 * I)));
      }
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);  // the matrix stores before the lanes' loads
  }
}

MPSL_INSTANTIATE_DTYPES(trtri_diag)
// trsm_small_<dtype>_<NMAX>_<d>: d = 0 general diagonal, 1 unit diagonal (UNIT, compiled in: no
// branch per column), 2 the matrix-unit variant (either diagonal, float32 only).
#define TRI_INSTANTIATE_SMALL(tag, T, N)                                   \
  MPSL_INSTANTIATE("trsm_small_" tag "_" #N "_0", trsm_small, T, N, false) \
  MPSL_INSTANTIATE("trsm_small_" tag "_" #N "_1", trsm_small, T, N, true)
TRI_INSTANTIATE_SMALL("f32", float, 16)
TRI_INSTANTIATE_SMALL("f32", float, 32)
TRI_INSTANTIATE_SMALL("f32", float, 64)
TRI_INSTANTIATE_SMALL("c64", float2, 16)
TRI_INSTANTIATE_SMALL("c64", float2, 32)
TRI_INSTANTIATE_SMALL("c64", float2, 64)
MPSL_INSTANTIATE("trsm_small_f32_64_2", trsm_small_mma, 64)
