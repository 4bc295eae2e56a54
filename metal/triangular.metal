// triangular.metal — kernels of the triangular-solve family (mpslinalg/triangular.py).
//
// trtri_diag: invert every nb x nb diagonal block (nb <= 32) of a batch of triangles in ONE
// dispatch. The rest of a triangular solve is matrix products (torch.matmul), see triangular.py.
//
// Contract (identical to the torch-op implementation _trtri_diag_torch):
//   A      the logical n x n triangles, addressed as A[b*a_bs + i*a_rs + j*a_cs] (element strides,
//          so transposed and offset views need no copy; Metal ignores tensor strides).
//          Only the LOWER triangle of the logical matrix is read (i >= j; i > j when unit): an
//          upper triangle is passed with its row and column strides swapped by the caller.
//   D      output, contiguous [batch, nblk, nb, nb], nblk = ceil(n / nb): block j holds the inverse
//          of A[j*nb:(j+1)*nb, j*nb:(j+1)*nb], lower triangular with explicit zeros above the
//          diagonal; when n % nb != 0 the last block is padded with the identity.
//   Tb     output, same layout: a clean copy of the diagonal block itself (its lower triangle,
//          zeros above, ones on a unit diagonal, identity padding). The solve needs it for the
//          refinement step X = Y + D (R - Tb Y) without reading the other triangle.
//   flags  bit 0: unit diagonal (taken as 1, never read); bit 1: use conj(A).
//   A zero diagonal entry yields inf/nan, as LAPACK's trsm does (no info for this op).
//
// Dispatch: one threadgroup of 32 threads (one simdgroup) per diagonal block:
//   threads = batch * nblk * 32, group_size = 32.
// The block is staged in threadgroup memory (coalesced loads), then thread c computes column c of
// the inverse by forward substitution (solving L y = e_c), which is backward stable column by
// column; the division by the diagonal is a true division (no reciprocal), as in LAPACK's trsv.
// Threadgroup memory: two 32 x 33 tiles of T (17 KiB for complex64), below the 32 KiB limit.
#include "complex.h"

// Scalar helpers overloaded for float (real) and float2 (complex64 = interleaved re, im).
inline float tri_mul(float a, float b) { return a * b; }
inline float2 tri_mul(float2 a, float2 b) { return cmul(a, b); }
inline float tri_div(float a, float b) { return a / b; }
inline float2 tri_div(float2 a, float2 b) { return cdiv(a, b); }
inline float tri_conj(float a) { return a; }
inline float2 tri_conj(float2 a) { return cconj(a); }
template <typename T> inline T tri_zero();
template <> inline float tri_zero<float>() { return 0.0f; }
template <> inline float2 tri_zero<float2>() { return float2(0.0f, 0.0f); }
template <typename T> inline T tri_one();
template <> inline float tri_one<float>() { return 1.0f; }
template <> inline float2 tri_one<float2>() { return float2(1.0f, 0.0f); }

#define TRI_MAXNB 32
#define TRI_LD 33      // padded leading dimension of the tiles (avoids bank conflicts on columns)
#define TRI_TILE 1056  // TRI_MAXNB * TRI_LD

template <typename T>
kernel void trtri_diag(device const T* A [[buffer(0)]],
                       device T* D [[buffer(1)]],
                       device T* Tb [[buffer(2)]],
                       constant long& n [[buffer(3)]],
                       constant long& nb [[buffer(4)]],
                       constant long& nblk [[buffer(5)]],
                       constant long& a_bs [[buffer(6)]],
                       constant long& a_rs [[buffer(7)]],
                       constant long& a_cs [[buffer(8)]],
                       constant long& flags [[buffer(9)]],
                       uint group [[threadgroup_position_in_grid]],
                       uint tid [[thread_position_in_threadgroup]]) {
  threadgroup T L[TRI_TILE];  // the diagonal block (lower triangle only is filled)
  threadgroup T Y[TRI_TILE];  // its inverse; column c is owned by thread c

  const bool unit = (flags & 1) != 0;
  const bool conj = (flags & 2) != 0;
  const long b = long(group) / nblk;
  const long blk = long(group) % nblk;
  const long r0 = blk * nb;
  const long bs = (n - r0 < nb) ? (n - r0) : nb;  // rows of this (possibly partial, last) block
  device const T* Ab = A + b * a_bs + r0 * (a_rs + a_cs);

  // Stage the lower triangle (strictly lower when unit) into threadgroup memory.
  for (long idx = tid; idx < bs * bs; idx += 32) {
    const long i = idx / bs;
    const long j = idx % bs;
    if (j < i || (j == i && !unit)) {
      T v = Ab[i * a_rs + j * a_cs];
      L[i * TRI_LD + j] = conj ? tri_conj(v) : v;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  const long c = long(tid);
  if (c < nb) {
    device T* Dc = D + (b * nblk + blk) * nb * nb + c;  // column c of the output blocks
    device T* Tc = Tb + (b * nblk + blk) * nb * nb + c;
    if (c < bs) {
      // Forward substitution for column c: y_i = (delta_ic - sum_{c<=k<i} L_ik y_k) / L_ii.
      for (long i = c; i < bs; ++i) {
        T s = (i == c) ? tri_one<T>() : tri_zero<T>();
        for (long k = c; k < i; ++k) {
          s -= tri_mul(L[i * TRI_LD + k], Y[k * TRI_LD + c]);
        }
        Y[i * TRI_LD + c] = unit ? s : tri_div(s, L[i * TRI_LD + i]);
      }
      for (long i = 0; i < nb; ++i) {
        const bool in = i >= c && i < bs;
        Dc[i * nb] = in ? Y[i * TRI_LD + c] : tri_zero<T>();
        Tc[i * nb] = (i == c && unit) ? tri_one<T>() : (in ? L[i * TRI_LD + c] : tri_zero<T>());
      }
    } else {
      // Padding column of a partial last block: identity.
      for (long i = 0; i < nb; ++i) {
        Dc[i * nb] = (i == c) ? tri_one<T>() : tri_zero<T>();
        Tc[i * nb] = (i == c) ? tri_one<T>() : tri_zero<T>();
      }
    }
  }
}

// Explicit instantiations (attributes repeated, as PyTorch's own Metal kernels do).
#define TRI_INSTANTIATE(NAME, T)                                                         \
  template [[host_name(NAME)]] kernel void trtri_diag<T>(                                \
      device const T* A [[buffer(0)]], device T* D [[buffer(1)]], device T* Tb [[buffer(2)]], \
      constant long& n [[buffer(3)]], constant long& nb [[buffer(4)]],                   \
      constant long& nblk [[buffer(5)]], constant long& a_bs [[buffer(6)]],              \
      constant long& a_rs [[buffer(7)]], constant long& a_cs [[buffer(8)]],              \
      constant long& flags [[buffer(9)]], uint group [[threadgroup_position_in_grid]],  \
      uint tid [[thread_position_in_threadgroup]]);

TRI_INSTANTIATE("trtri_diag_float", float)
TRI_INSTANTIATE("trtri_diag_complex64", float2)


// ---------------------------------------------------------------------------------------------
// trsm_small: the whole solve L X = B for n <= 64 in one dispatch (the batched fast path: DeltaNet
// chunks, 4096 x 64x64 systems). Forward substitution, i.e. LAPACK's trsm algorithm: backward
// stable whatever the conditioning, and it reads A, B once and writes X once (bandwidth bound).
//
// Contract (identical to the blocked torch-op path for these sizes):
//   Logical lower-triangular L (n x n), right-hand sides B and output X (n x k) are addressed by
//   element offsets and signed strides:  L[i][j] = A[a_off + m*a_bs + i*a_rs + j*a_cs] (i >= j),
//   B[i][c] = B[b_off + m*b_bs + i*b_rs + c*b_cs], X likewise with x_*. So transposes (right
//   solves), reversals (upper = J lower J, negative strides) and broadcast batches (stride 0) are
//   index maps, not copies. flags: bit 0 unit diagonal (never read), bit 1 conj(A), bit 2 conj(B).
//   Only i >= j (i > j when unit) entries of L are read. A zero pivot gives inf/nan (as trsm).
// Dispatch: one 32-thread threadgroup per (matrix m, tile of 32 right-hand sides);
//   threads = nmat * ntile * 32, group_size = 32, ntile = ceil(k / 32). Thread c of the tile owns
//   column c: its x lives in a thread array, L in threadgroup memory packed by rows
//   (i(i+1)/2 + j: 2080 entries, 16.3 KiB for complex64).
// ---------------------------------------------------------------------------------------------
#define TRI_SMALL_N 64
#define TRI_PACKED 2080  // TRI_SMALL_N (TRI_SMALL_N + 1) / 2

template <typename T>
kernel void trsm_small(device const T* A [[buffer(0)]],
                       device const T* B [[buffer(1)]],
                       device T* X [[buffer(2)]],
                       constant long& n [[buffer(3)]],
                       constant long& k [[buffer(4)]],
                       constant long& ntile [[buffer(5)]],
                       constant long& a_off [[buffer(6)]],
                       constant long& a_bs [[buffer(7)]],
                       constant long& a_rs [[buffer(8)]],
                       constant long& a_cs [[buffer(9)]],
                       constant long& b_off [[buffer(10)]],
                       constant long& b_bs [[buffer(11)]],
                       constant long& b_rs [[buffer(12)]],
                       constant long& b_cs [[buffer(13)]],
                       constant long& x_off [[buffer(14)]],
                       constant long& x_bs [[buffer(15)]],
                       constant long& x_rs [[buffer(16)]],
                       constant long& x_cs [[buffer(17)]],
                       constant long& flags [[buffer(18)]],
                       uint group [[threadgroup_position_in_grid]],
                       uint tid [[thread_position_in_threadgroup]]) {
  threadgroup T Lp[TRI_PACKED];  // packed lower triangle of L

  const bool unit = (flags & 1) != 0;
  const bool conj_a = (flags & 2) != 0;
  const bool conj_b = (flags & 4) != 0;
  const long m = long(group) / ntile;
  const long c = (long(group) % ntile) * 32 + long(tid);
  device const T* Am = A + a_off + m * a_bs;

  // Stage the triangle: consecutive threads read consecutive j (coalesced for row-major A).
  for (long i = 0; i < n; ++i) {
    for (long j = long(tid); j <= i; j += 32) {
      if (j < i || !unit) {
        T v = Am[i * a_rs + j * a_cs];
        Lp[i * (i + 1) / 2 + j] = conj_a ? tri_conj(v) : v;
      }
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (c >= k) {
    return;
  }

  device const T* Bc = B + b_off + m * b_bs + c * b_cs;
  device T* Xc = X + x_off + m * x_bs + c * x_cs;
  T x[TRI_SMALL_N];
  for (long i = 0; i < n; ++i) {
    T s = Bc[i * b_rs];
    if (conj_b) {
      s = tri_conj(s);
    }
    threadgroup const T* Li = Lp + i * (i + 1) / 2;
    for (long j = 0; j < i; ++j) {
      s -= tri_mul(Li[j], x[j]);
    }
    x[i] = unit ? s : tri_div(s, Li[i]);
    Xc[i * x_rs] = x[i];
  }
}

#define TRI_SMALL_INSTANTIATE(NAME, T)                                                     \
  template [[host_name(NAME)]] kernel void trsm_small<T>(                                  \
      device const T* A [[buffer(0)]], device const T* B [[buffer(1)]],                    \
      device T* X [[buffer(2)]], constant long& n [[buffer(3)]],                           \
      constant long& k [[buffer(4)]], constant long& ntile [[buffer(5)]],                  \
      constant long& a_off [[buffer(6)]], constant long& a_bs [[buffer(7)]],               \
      constant long& a_rs [[buffer(8)]], constant long& a_cs [[buffer(9)]],                \
      constant long& b_off [[buffer(10)]], constant long& b_bs [[buffer(11)]],             \
      constant long& b_rs [[buffer(12)]], constant long& b_cs [[buffer(13)]],              \
      constant long& x_off [[buffer(14)]], constant long& x_bs [[buffer(15)]],             \
      constant long& x_rs [[buffer(16)]], constant long& x_cs [[buffer(17)]],              \
      constant long& flags [[buffer(18)]], uint group [[threadgroup_position_in_grid]],   \
      uint tid [[thread_position_in_threadgroup]]);

TRI_SMALL_INSTANTIATE("trsm_small_float", float)
TRI_SMALL_INSTANTIATE("trsm_small_complex64", float2)
