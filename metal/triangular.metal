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
constant constexpr int TRI_CHUNK = 8;  // rows solved together in registers (trtri_diag, trsm_small)

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
    for (int j = (int)tid; j <= i; j += 32) {
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
// stable whatever the conditioning, and it reads A, B once and writes X once (bandwidth bound).
//
// Contract (identical to the blocked torch-op path for these sizes):
//   Logical lower-triangular L (n x n), right-hand sides B and output X (n x k), each addressed by
//   its index map {off, bs, rs, cs}: L[i][j] = A[a_map.off + m*a_map.bs + i*rs + j*cs] (i >= j),
//   B[i][c] and X[i][c] likewise. So transposes (right solves), reversals (upper = J lower J,
//   negative strides) and broadcast batches (stride 0) are index maps, not copies.
//   dims {n, k, ntile, flags}; flags bit 0 unit diagonal (never read), bit 1 conj(A), bit 2 conj(B).
//   Only i >= j (i > j when unit) entries of L are read. A zero pivot gives inf/nan (as trsm).
// Dispatch: one 32-thread threadgroup per (matrix m, tile of 32 right-hand sides);
//   threads = nmat * ntile * 32, group_size = 32, ntile = ceil(k / 32). Thread c of the tile owns
//   column c: L lives in threadgroup memory packed by rows (i(i+1)/2 + j: 2080 entries, 16.3 KiB
//   for complex64), x in registers TRI_CHUNK rows at a time and then in X itself.
// ---------------------------------------------------------------------------------------------
constant constexpr int TRI_SMALL_N = 64;
constant constexpr int TRI_PACKED = TRI_SMALL_N * (TRI_SMALL_N + 1) / 2;

template <typename T>
[[max_total_threads_per_threadgroup(32)]]
kernel void trsm_small(device const T* A [[buffer(0)]],
                       device const T* B [[buffer(1)]],
                       device T* X [[buffer(2)]],
                       constant long* dims [[buffer(3)]],
                       constant long* a_map [[buffer(4)]],
                       constant long* b_map [[buffer(5)]],
                       constant long* x_map [[buffer(6)]],
                       uint group [[threadgroup_position_in_grid]],
                       uint tid [[thread_position_in_threadgroup]]) {
  threadgroup T Lp[TRI_PACKED];  // packed lower triangle of L

  const int n = (int)dims[0];
  const int k = (int)dims[1];
  const uint ntile = (uint)dims[2];
  const bool unit = (dims[3] & 1) != 0;
  const bool conj_a = (dims[3] & 2) != 0;
  const bool conj_b = (dims[3] & 4) != 0;
  const long m = (long)(group / ntile);
  const int c = (int)(group % ntile) * 32 + (int)tid;
  const int ars = (int)a_map[2], acs = (int)a_map[3];
  device const T* Am = A + a_map[0] + m * a_map[1];

  // Stage the triangle: consecutive threads read consecutive j (coalesced for row-major A).
  for (int i = 0; i < n; ++i) {
    for (int j = (int)tid; j <= i; j += 32) {
      if (j < i || !unit) {
        const T v = Am[i * ars + j * acs];
        Lp[i * (i + 1) / 2 + j] = conj_a ? s_conj(v) : v;
      }
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (c >= k) {
    return;
  }

  const int brs = (int)b_map[2], xrs = (int)x_map[2];
  device const T* Bc = B + b_map[0] + m * b_map[1] + (long)c * b_map[3];
  device T* Xc = X + x_map[0] + m * x_map[1] + (long)c * x_map[3];
  // Rows in chunks of TRI_CHUNK: the chunk's partial sums live in registers (every index below is a
  // compile-time constant after unrolling; a run-time-indexed T x[64] would live in stack memory).
  // Finished rows are read back from X, which this thread wrote: once per chunk, not once per row.
  // The subtraction order is the sequential one (j = 0, 1, ..., i-1), as LAPACK's trsm.
  for (int i0 = 0; i0 < n; i0 += TRI_CHUNK) {
    T s[TRI_CHUNK];
    int row[TRI_CHUNK];  // packed offset of row i0 + r (rows past n: row n - 1, sums discarded)
#pragma unroll
    for (int r = 0; r < TRI_CHUNK; ++r) {
      const int i = min(i0 + r, n - 1);
      row[r] = i * (i + 1) / 2;
      const T bi = Bc[i * brs];
      s[r] = conj_b ? s_conj(bi) : bi;
    }
    for (int j = 0; j < i0; ++j) {
      const T xj = Xc[j * xrs];
#pragma unroll
      for (int r = 0; r < TRI_CHUNK; ++r) {
        s[r] -= s_mul(Lp[row[r] + j], xj);
      }
    }
#pragma unroll
    for (int r = 0; r < TRI_CHUNK; ++r) {
      if (i0 + r < n) {
#pragma unroll
        for (int q = 0; q < r; ++q) {
          s[r] -= s_mul(Lp[row[r] + i0 + q], s[q]);  // s[q] = x[i0 + q] by now
        }
        if (!unit) {
          s[r] = s_div(s[r], Lp[row[r] + i0 + r]);
        }
        Xc[(i0 + r) * xrs] = s[r];
      }
    }
  }
}

MPSL_INSTANTIATE_DTYPES(trtri_diag)
MPSL_INSTANTIATE_DTYPES(trsm_small)
