// small.metal - inverses, determinants and solves of batches of nxn matrices, n = 1...4.
//
// One thread per matrix (per matrix and right-hand-side column for solves), straight-line code,
// float32 (`float`) and complex64 (`float2`, scalar operations of scalar.h). The algorithm is the one of
// mpslinalg/small.py, operation for operation (DESIGN section 6):
//
//   1. power-of-two equilibration (exact: only exponents change), measured with
//      cabs1 = |Re| + |Im|: eliminations scale the columns only, A_s = A C (GEPP is invariant to
//      column scaling: LAPACK's pivots and accuracy on graded inputs); the 2x2 adjugate paths scale
//      rows and columns, A_s = R A C, with exponents computed in integers from the entries' own
//      exponents (a row scaling never pushes an entry into the subnormal range first);
//   2. n = 2 inverse and finite n = 2 determinant: adjugate / det with det = ad - bc in doubled
//      precision (fma TwoProduct, TwoSum: Ogita-Rump-Oishi Dot2);
//      otherwise: Gaussian elimination with partial pivoting (largest cabs1, smallest index on
//      ties, like LAPACK i?amax), then LAPACK getri (inv(U), X L = inv(U), column interchanges);
//   3. unscale exactly: inv(A) = C inv(A_s) (R), x = C solve(A_s, b), det = mant * 2^expo.
//
// Non-finite input: inverse and solution all NaN; det/slogdet what LU arithmetic gives.
//
// info (int32): 1-based index of the first exactly-zero pivot, 0 if none (LAPACK's rule).
//
// Kernels (host names; T = f32 | c64, N = 1...4, V = staged | direct), all matrices row-major and
// contiguous, every buffer 16-byte aligned (the host copies a misaligned input):
//   small_inv_V_T_N   (A[batch][N][N], X[batch][N][N], info[batch], long batch)
//   small_det_V_T_N   (A[batch][N][N], mant[batch], expo[batch] int32, info[batch], long batch)
//       det(A) = mant * 2^expo with cabs1(mant) in [2^-N, 2^N) (or mant = 0 / Inf / NaN),
//       from the factorization of A^T (torch's: LAPACK reads the row-major storage as A^T).
//   Both: threads = batch rounded up to a multiple of 64, group_size = 64. The two load variants
//   compute the same thing with the same arithmetic (inv_in_registers, det_in_registers):
//     staged: the group's 64 matrices pass through threadgroup memory (<= 8 KiB, two barriers),
//             so that global loads and stores are coalesced;
//     direct: each thread loads its own matrix with float4 / float2 accesses where its size
//             allows; small_inv's 3x3 and 4x4 results leave through the simdgroup's own slice of
//             threadgroup memory (coalesced stores, a simdgroup barrier only, no threadgroup
//             barrier), 2x2 ones as whole float4 stores per thread; small_det's outputs are one
//             word per thread (coalesced as they are).
//   Which one a device uses is mpslinalg.small.TUNING.load (docs/ops/small.md says why).
//   small_solve_T_N (A[batch][N][N], B[batch][N][k], X[batch][N][k], info[batch], long batch,
//       long k)  threads = batch * max(k, 1) (one per right-hand-side column), no barriers; A read
//       with the direct variant's accesses.
#include "scalar.h"

// Threads per threadgroup of small_inv / small_det (the host always launches groups of this size).
constant constexpr uint SMALL_GROUP = 64;

// True when every entry is finite (scalar.h's element-wise rule). A matrix with an Inf or NaN
// entry gets an all-NaN inverse or solution: LAPACK's elimination spreads the NaN to nearly every
// entry, and a finite-looking number there would hide bad input (same rule as mpslinalg/small.py).
template <typename T, int N>
inline bool all_finite(thread const T (&a)[N][N]) {
  bool fin = true;
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) fin = fin && s_isfinite(a[i][j]);
  return fin;
}

// Number of floats per scalar (1 for float, 2 for complex).
inline constexpr int s_words(float) { return 1; }
inline constexpr int s_words(float2) { return 2; }

// ---------------------------------------------------------------------------------------------
// Powers of two by bit manipulation (exact).
// ---------------------------------------------------------------------------------------------

// e with 2^e <= m < 2^(e+1) for normal m >= 0, clamped to [-126, 126] (zero/subnormal: -126,
// Inf/NaN: 126).
inline int exponent_of(float m) {
  int biased = (as_type<int>(m) >> 23) & 255;
  return clamp(biased - 127, -126, 126);
}

// 2^e exactly (e clamped to [-126, 126], so the result is a normal number).
inline float pow2(int e) { return as_type<float>((clamp(e, -126, 126) + 127) << 23); }

// x * 2^t exactly for t in [-126, 378]: up to three powers of two of one sign, so nothing
// overflows or underflows on the way unless the result does (two-sided scaling needs ~3 * 126).
template <typename T>
inline T scale_exp(T x, int t) {
  int t1 = clamp(t, -126, 126);
  int rest = t - t1;
  int t2 = clamp(rest, 0, 126);
  return ((x * pow2(t1)) * pow2(t2)) * pow2(rest - t2);
}

// max that propagates NaN (torch.maximum; Metal's max is fmax): the same scaling as the program.
inline float max_nan(float a, float b) { return (a != a || a > b) ? a : b; }

// ---------------------------------------------------------------------------------------------
// Doubled-precision dot products: sum of s_i * a_i * b_i (Dot2 with fma TwoProduct).
// ---------------------------------------------------------------------------------------------
struct Dot2 {
  float s;
  float c;
};

inline Dot2 dot2_start(float a, float b) {
  float p = a * b;
  Dot2 d;
  d.s = p;
  d.c = fma(a, b, -p);
  return d;
}

inline Dot2 dot2_add(Dot2 d, float a, float b) {
  float p = a * b;
  float e = fma(a, b, -p);
  float t = d.s + p;
  float bb = t - d.s;
  float q = (d.s - (t - bb)) + (p - bb);
  d.s = t;
  d.c = d.c + (q + e);
  return d;
}

inline float dot2_end(Dot2 d) { return d.s + d.c; }

// a d - b c in doubled precision.
inline float det2_accurate(float a, float b, float c, float d) {
  return dot2_end(dot2_add(dot2_start(a, d), -b, c));
}

inline float2 det2_accurate(float2 a, float2 b, float2 c, float2 d) {
  // Re = ar dr - ai di - br cr + bi ci;  Im = ar di + ai dr - br ci - bi cr
  Dot2 re = dot2_start(a.x, d.x);
  re = dot2_add(re, -a.y, d.y);
  re = dot2_add(re, -b.x, c.x);
  re = dot2_add(re, b.y, c.y);
  Dot2 im = dot2_start(a.x, d.y);
  im = dot2_add(im, a.y, d.x);
  im = dot2_add(im, -b.x, c.y);
  im = dot2_add(im, -b.y, c.x);
  return float2(dot2_end(re), dot2_end(im));
}

// ---------------------------------------------------------------------------------------------
// The algorithm on a matrix held in registers.
// ---------------------------------------------------------------------------------------------

// A_s = A C in place (columns only, for the eliminations); ec receives the exponents, c_j = 2^-ec_j.
template <typename T, int N>
inline void equilibrate_columns(thread T (&a)[N][N], thread int (&ec)[N]) {
  for (int j = 0; j < N; ++j) {
    float m = s_abs1(a[0][j]);
    for (int i = 1; i < N; ++i) m = max_nan(m, s_abs1(a[i][j]));
    ec[j] = exponent_of(m);
    float c = pow2(-ec[j]);
    for (int i = 0; i < N; ++i) a[i][j] = a[i][j] * c;
  }
}

// A_s = R A C in place (the 2x2 adjugate paths): er from the row maxima, ec from the maxima of the
// integer exponents of R A (never from scaled values: those may have underflowed).
template <typename T, int N>
inline void equilibrate_two_sided(thread T (&a)[N][N], thread int (&er)[N], thread int (&ec)[N]) {
  int rel[N][N];
  for (int i = 0; i < N; ++i) {
    float m = s_abs1(a[i][0]);
    for (int j = 1; j < N; ++j) m = max_nan(m, s_abs1(a[i][j]));
    er[i] = exponent_of(m);
    for (int j = 0; j < N; ++j) rel[i][j] = exponent_of(s_abs1(a[i][j])) - er[i];
  }
  for (int j = 0; j < N; ++j) {
    ec[j] = rel[0][j];
    for (int i = 1; i < N; ++i) ec[j] = max(ec[j], rel[i][j]);
  }
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) a[i][j] = scale_exp(a[i][j], -er[i] - ec[j]);
}

// x and y exchanged where c holds, as two selects (branch-free: the lanes of a SIMD group pivot
// differently; measured fewer instructions than a predicated three-move swap, ptxas sm_90).
template <typename T>
inline void swap_if(bool c, thread T &x, thread T &y) {
  const T t = x;
  x = c ? y : t;
  y = c ? t : y;
}

// LAPACK getf2 (unrolled by the compiler): P A = L U in place, piv[k] = row swapped with row k,
// odd = parity of the permutation, return value = info.
template <typename T, int N>
inline int factor(thread T (&a)[N][N], thread int (&piv)[N], thread bool &odd) {
  int info = 0;
  odd = false;
  #pragma unroll
  for (int k = 0; k < N; ++k) {
    float best = s_abs1(a[k][k]);
    int p = k;
    for (int i = k + 1; i < N; ++i) {
      float v = s_abs1(a[i][k]);
      if (v > best) {
        best = v;
        p = i;
      }
    }
    piv[k] = p;
    // Swap rows k and p. The loop over the candidate rows keeps every array index a compile-time
    // constant once unrolled, so the matrix stays in registers: indexing a[p][j] with the run-time
    // p would put it in (slow) thread-local memory - measured on the H200 through the emulator's
    // cuda target, 27% -> 59% of copy bandwidth for 4x4 float (docs/emulator-cuda.md).
    for (int i = k + 1; i < N; ++i) {
      for (int j = 0; j < N; ++j) swap_if(i == p, a[k][j], a[i][j]);
      odd = odd != (i == p);
    }
    T pk = a[k][k];
    bool zero = s_is_zero(pk);
    if (zero && info == 0) info = k + 1;
    for (int i = k + 1; i < N; ++i) {
      // getf2 leaves the (all-zero) column unscaled when the pivot is zero
      T l = zero ? a[i][k] : s_div(a[i][k], pk);
      a[i][k] = l;
      for (int j = k + 1; j < N; ++j) a[i][j] = a[i][j] - s_mul(l, a[k][j]);
    }
  }
  return info;
}

// LAPACK getri (unblocked), in place on the factors: a = inv(P^T L U). In place (one matrix and
// one work column in registers instead of three matrices) keeps the register count down; the
// arithmetic is operation for operation that of _getri in mpslinalg/small.py.
template <typename T, int N>
inline void getri(thread T (&a)[N][N], thread const int (&piv)[N]) {
  // trti2: the upper triangle becomes inv(U), column by column. Row i of column j reads entries
  // k >= i of the same column, which ascending i has not overwritten yet.
  #pragma unroll
  for (int j = 0; j < N; ++j) {
    T yjj = s_div(s_one<T>(), a[j][j]);
    T ajj = -yjj;
    for (int i = 0; i < j; ++i) {
      T acc = s_mul(a[i][i], a[i][j]);
      for (int k = i + 1; k < j; ++k) acc = acc + s_mul(a[i][k], a[k][j]);
      a[i][j] = s_mul(acc, ajj);
    }
    a[j][j] = yjj;
  }
  // X L = inv(U), last column first (work = column j of L)
  #pragma unroll
  for (int j = N - 1; j >= 0; --j) {
    T work[N];
    for (int i = j + 1; i < N; ++i) {
      work[i] = a[i][j];
      a[i][j] = s_zero<T>();
    }
    for (int i = 0; i < N; ++i) {
      T acc = a[i][j];
      for (int k = j + 1; k < N; ++k) acc = acc - s_mul(a[i][k], work[k]);
      a[i][j] = acc;
    }
  }
  // column interchanges in reverse order
  #pragma unroll
  for (int j = N - 2; j >= 0; --j) {
    int p = piv[j];
    for (int q = j + 1; q < N; ++q)  // compile-time column indices (see factor)
      for (int i = 0; i < N; ++i) swap_if(q == p, a[i][j], a[i][q]);
  }
}

// a := inv(a) by the adjugate with a doubled-precision determinant (n = 2, a two-sided
// equilibrated); returns info (1: first column zero, 2: det exactly zero).
template <typename T, int N>
inline int invert_adjugate(thread T (&a)[N][N]) {
  T p = a[0][0], q = a[0][N - 1], r = a[N - 1][0], s = a[N - 1][N - 1];
  T d = det2_accurate(p, q, r, s);
  a[0][0] = s_div(s, d);
  a[0][N - 1] = -s_div(q, d);
  a[N - 1][0] = -s_div(r, d);
  a[N - 1][N - 1] = s_div(p, d);
  if (s_is_zero(p) && s_is_zero(r)) return 1;
  return s_is_zero(d) ? 2 : 0;
}

// a := inv(a) by elimination (a column-equilibrated); returns info.
template <typename T, int N>
inline int invert_eliminate(thread T (&a)[N][N]) {
  if (N == 1) {
    bool zero = s_is_zero(a[0][0]);
    a[0][0] = s_div(s_one<T>(), a[0][0]);
    return zero ? 1 : 0;
  }
  int piv[N];
  bool odd;
  int info = factor(a, piv, odd);
  getri(a, piv);
  return info;
}

// det = m * 2^e from pivots: each pivot's power of two goes to the integer exponent first.
template <typename T>
inline void mant_expo_push(thread T &m, thread int &e, T pk, bool first) {
  int g = exponent_of(s_abs1(pk));
  T f = pk * pow2(-g);
  e += g;
  m = first ? f : s_mul(m, f);
}

// ---------------------------------------------------------------------------------------------
// One matrix in registers: the contracts of small_inv and small_det (both load variants call these)
// ---------------------------------------------------------------------------------------------

// a := inv(a) in place; returns info (the contract of small_inv; all-NaN for non-finite input).
template <typename T, int N>
inline int inv_in_registers(thread T (&a)[N][N]) {
  const bool fin = all_finite(a);
  int er[N], ec[N];
  int inf;
  if (N == 2) {  // inv(A) = C inv(A_s) R, exponents up to ~3 * 126
    equilibrate_two_sided(a, er, ec);
    inf = invert_adjugate(a);
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j) a[i][j] = scale_exp(a[i][j], -ec[i] - er[j]);
  } else {  // inv(A) = C inv(A_s)
    equilibrate_columns(a, ec);
    inf = invert_eliminate(a);
    for (int i = 0; i < N; ++i) {
      float c = pow2(-ec[i]);
      for (int j = 0; j < N; ++j) a[i][j] = a[i][j] * c;
    }
  }
  if (!fin) {  // a branch, not a select per entry: finite input (the rule) skips it whole
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j) a[i][j] = s_nan<T>();
  }
  return inf;
}

// det(A) = m * 2^e with A loaded as stored (row-major); returns info (the contract of small_det).
// Factors A^T, as torch's det does: LAPACK reads the row-major storage as A^T.
template <typename T, int N>
inline int det_in_registers(thread T (&a)[N][N], thread T &m, thread int &e) {
  for (int i = 0; i < N; ++i)  // transpose in place (register renaming after unrolling)
    for (int j = i + 1; j < N; ++j) {
      T t = a[i][j];
      a[i][j] = a[j][i];
      a[j][i] = t;
    }
  // elimination on the column-scaled matrix (Inf/NaN entries: what LU arithmetic gives)
  T a2[N][N];  // the input again, for the 2x2 doubled-precision path
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) a2[i][j] = a[i][j];
  int ec[N];
  equilibrate_columns(a, ec);
  e = 0;
  for (int j = 0; j < N; ++j) e += ec[j];
  int piv[N];
  bool odd;
  int inf = factor(a, piv, odd);
  m = s_one<T>();
  for (int k = 0; k < N; ++k) mant_expo_push(m, e, a[k][k], k == 0);
  if (odd) m = -m;
  if (N == 2 && all_finite(a2)) {  // finite 2x2: ad - bc in doubled precision instead
    int er2[N], ec2[N];
    equilibrate_two_sided(a2, er2, ec2);
    T p = a2[0][0], r = a2[N - 1][0];
    T d = det2_accurate(p, a2[0][N - 1], r, a2[N - 1][N - 1]);
    inf = (s_is_zero(p) && s_is_zero(r)) ? 1 : (s_is_zero(d) ? 2 : 0);
    e = 0;
    for (int i = 0; i < N; ++i) e += er2[i] + ec2[i];
    mant_expo_push(m, e, d, true);
  }
  return inf;
}

// ---------------------------------------------------------------------------------------------
// Load variant "staged": a threadgroup's matrices through threadgroup memory, so that global loads
// and stores are coalesced (consecutive threads touch consecutive words); two barriers per group.
// ---------------------------------------------------------------------------------------------

// Largest staging tile: SMALL_GROUP complex 4x4 matrices = 64 * 16 * 2 floats = 8 KiB.
constant constexpr uint SMALL_TILE_FLOATS = SMALL_GROUP * 16 * 2;

inline void tile_load(device const float *src, long total_floats, long base, threadgroup float *tile,
                     uint count, uint lid, uint group) {
  for (uint i = lid; i < count; i += group) {
    long g = base + long(i);
    tile[i] = g < total_floats ? src[g] : 0.0f;
  }
}

inline void tile_store(device float *dst, long total_floats, long base, threadgroup const float *tile,
                      uint count, uint lid, uint group) {
  for (uint i = lid; i < count; i += group) {
    long g = base + long(i);
    if (g < total_floats) dst[g] = tile[i];
  }
}

// A simdgroup's run of `count` floats from its tile slice to dst[base ...], stopping at
// total_floats: whole float4s while they fit, then the tail word by word. base and the slice are
// 16-byte aligned (a simdgroup's first matrix is a multiple of 32 matrices in): a quarter of the
// scalar loop's load / store / bound-check instructions per word (small_inv_direct, complex 4x4:
// ~350 of its ~1500 instructions per thread went to the scalar copy-out, ptxas sm_90).
inline void tile_store_vec4(device float *dst, long total_floats, long base, threadgroup const float *slice,
                            uint count, uint lane, uint width) {
  const long rest = total_floats - base;
  const uint n = rest < long(count) ? uint(max(rest, 0l)) : count;  // floats this run stores
  device float4 *d4 = reinterpret_cast<device float4 *>(dst + base);
  threadgroup const float4 *t4 = reinterpret_cast<threadgroup const float4 *>(slice);
  for (uint i = lane; i < n / 4; i += width) d4[i] = t4[i];
  for (uint i = (n / 4) * 4 + lane; i < n; i += width) dst[base + long(i)] = slice[i];
}

inline float tile_get(threadgroup const float *t, int i, float) { return t[i]; }
inline float2 tile_get(threadgroup const float *t, int i, float2) { return float2(t[2 * i], t[2 * i + 1]); }
inline void tile_put(threadgroup float *t, int i, float v) { t[i] = v; }
inline void tile_put(threadgroup float *t, int i, float2 v) {
  t[2 * i] = v.x;
  t[2 * i + 1] = v.y;
}

// ---------------------------------------------------------------------------------------------
// Load variant "direct": each thread reads its own matrix with the widest vector accesses its
// size allows, no barriers. The host passes 16-byte aligned buffers (mpslinalg/small/program.py),
// so a matrix whose size is a multiple of 16 (8) bytes starts 16 (8) byte aligned: float 2x2 and
// 4x4, complex 2x2 and 4x4 use float4 loads, complex 1x1 and 3x3 float2, float 1x1 and 3x3
// (36 bytes) scalar ones. (Per-thread loads are fine: a thread's next loads hit the lines its
// first one brought into the cache - small_det_direct reaches copy bandwidth on the H200. Per-
// thread stores are not, see small_inv_direct.)
// ---------------------------------------------------------------------------------------------

// Matrix m of A (row-major N x N floats) into a.
template <int N>
inline void direct_load(device const float *A, long m, thread float (&a)[N][N]) {
  device const float *p = A + m * (N * N);
  if ((N * N) % 4 == 0) {
    device const float4 *q = reinterpret_cast<device const float4 *>(p);
    for (int v = 0; v < N * N / 4; ++v) {
      float4 x = q[v];
      a[(4 * v) / N][(4 * v) % N] = x.x;
      a[(4 * v + 1) / N][(4 * v + 1) % N] = x.y;
      a[(4 * v + 2) / N][(4 * v + 2) % N] = x.z;
      a[(4 * v + 3) / N][(4 * v + 3) % N] = x.w;
    }
  } else {
    for (int w = 0; w < N * N; ++w) a[w / N][w % N] = p[w];
  }
}

// Matrix m of A (row-major N x N complex) into a: two entries per float4 where N * N is even.
template <int N>
inline void direct_load(device const float2 *A, long m, thread float2 (&a)[N][N]) {
  device const float2 *p = A + m * (N * N);
  if ((N * N) % 2 == 0) {
    device const float4 *q = reinterpret_cast<device const float4 *>(p);
    for (int v = 0; v < N * N / 2; ++v) {
      float4 x = q[v];
      a[(2 * v) / N][(2 * v) % N] = x.xy;
      a[(2 * v + 1) / N][(2 * v + 1) % N] = x.zw;
    }
  } else {
    for (int w = 0; w < N * N; ++w) a[w / N][w % N] = p[w];
  }
}

// Floats 4v..4v+3 of a row-major matrix in registers (the direct inverse's 2x2 stores).
template <int N>
inline float4 tile_pack4(thread const float (&a)[N][N], int v) {
  return float4(a[(4 * v) / N][(4 * v) % N], a[(4 * v + 1) / N][(4 * v + 1) % N],
                a[(4 * v + 2) / N][(4 * v + 2) % N], a[(4 * v + 3) / N][(4 * v + 3) % N]);
}
template <int N>
inline float4 tile_pack4(thread const float2 (&a)[N][N], int v) {
  return float4(a[(2 * v) / N][(2 * v) % N], a[(2 * v + 1) / N][(2 * v + 1) % N]);
}

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

template <typename T, int N>
[[max_total_threads_per_threadgroup(64)]]  // = SMALL_GROUP
kernel void small_inv_staged(device const T *A [[buffer(0)]], device T *X [[buffer(1)]],
                             device int *info [[buffer(2)]], constant long &batch [[buffer(3)]],
                             uint tid [[thread_position_in_grid]],
                             uint lid [[thread_position_in_threadgroup]],
                             uint gid [[threadgroup_position_in_grid]],
                             uint group [[threads_per_threadgroup]]) {
  threadgroup float tile[SMALL_TILE_FLOATS];
  T zero = s_zero<T>();
  const int W = s_words(zero);
  const uint per = uint(N * N * W);           // floats per matrix
  const uint count = min(group, SMALL_GROUP) * per;
  const long total = batch * long(per);
  const long base = long(gid) * long(SMALL_GROUP) * long(per);

  tile_load(reinterpret_cast<device const float *>(A), total, base, tile, count, lid, group);
  threadgroup_barrier(mem_flags::mem_threadgroup);

  T a[N][N];
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) a[i][j] = tile_get(tile, int(lid) * N * N + i * N + j, zero);
  const int inf = inv_in_registers(a);  // padding threads (tid >= batch) invert zeros: harmless
  if (long(tid) < batch) info[tid] = inf;

  // each thread overwrites only its own matrix's words: no barrier needed before this
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) tile_put(tile, int(lid) * N * N + i * N + j, a[i][j]);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  tile_store(reinterpret_cast<device float *>(X), total, base, tile, count, lid, group);
}

template <typename T, int N>
[[max_total_threads_per_threadgroup(64)]]  // = SMALL_GROUP
kernel void small_inv_direct(device const T *A [[buffer(0)]], device T *X [[buffer(1)]],
                             device int *info [[buffer(2)]], constant long &batch [[buffer(3)]],
                             uint tid [[thread_position_in_grid]],
                             uint lid [[thread_position_in_threadgroup]],
                             uint lane [[thread_index_in_simdgroup]],
                             uint width [[threads_per_simdgroup]]) {
  // Stores go through this simdgroup's own slice of the tile (its matrices' slots): per-thread
  // stores with a 36-128 byte stride write partial sectors (measured on the H200: 31% of copy
  // bandwidth for f32 3x3, 71% for f32 4x4), the simdgroup's coalesced copy-out does not. Only a
  // simdgroup barrier: no thread waits for the rest of its threadgroup.
  threadgroup float4 tile4[SMALL_TILE_FLOATS / 4];  // float4: 16-byte aligned slices
  threadgroup float *tile = reinterpret_cast<threadgroup float *>(tile4);
  T zero = s_zero<T>();
  const int per = N * N * s_words(zero);  // floats per matrix
  T a[N][N];
  const bool live = long(tid) < batch;
  if (live) {
    direct_load(A, long(tid), a);
  } else {  // padding threads: zeros (they still take part in the simdgroup's copy-out)
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j) a[i][j] = zero;
  }
  const int inf = inv_in_registers(a);
  if (live) info[tid] = inf;
  if (N == 2) {  // 16 / 32 bytes: whole float4 stores per thread measured faster (H200: 83% / 90%
    // of copy bandwidth, 66% / 74% through the slice)
    if (live) {
      device float4 *q = reinterpret_cast<device float4 *>(X) + long(tid) * (N * N * s_words(zero) / 4);
      for (int v = 0; v < N * N * s_words(zero) / 4; ++v) q[v] = tile_pack4(a, v);
    }
    return;
  }

  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) tile_put(tile, int(lid) * N * N + i * N + j, a[i][j]);
  simdgroup_barrier(mem_flags::mem_threadgroup);
  // the simdgroup's matrices are consecutive (lanes are consecutive threads): one contiguous run
  const uint first = lid - lane;
  tile_store_vec4(reinterpret_cast<device float *>(X), batch * long(per), (long(tid) - long(lane)) * long(per),
                  tile + first * uint(per), width * uint(per), lane, width);
}

template <typename T, int N>
[[max_total_threads_per_threadgroup(64)]]  // = SMALL_GROUP
kernel void small_det_staged(device const T *A [[buffer(0)]], device T *mant [[buffer(1)]],
                             device int *expo [[buffer(2)]], device int *info [[buffer(3)]],
                             constant long &batch [[buffer(4)]], uint tid [[thread_position_in_grid]],
                             uint lid [[thread_position_in_threadgroup]],
                             uint gid [[threadgroup_position_in_grid]],
                             uint group [[threads_per_threadgroup]]) {
  threadgroup float tile[SMALL_TILE_FLOATS];
  T zero = s_zero<T>();
  const int W = s_words(zero);
  const uint per = uint(N * N * W);
  const uint count = min(group, SMALL_GROUP) * per;
  const long total = batch * long(per);
  const long base = long(gid) * long(SMALL_GROUP) * long(per);

  tile_load(reinterpret_cast<device const float *>(A), total, base, tile, count, lid, group);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (long(tid) >= batch) return;  // after the last barrier

  T a[N][N];
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) a[i][j] = tile_get(tile, int(lid) * N * N + i * N + j, zero);
  T m;
  int e;
  info[tid] = det_in_registers(a, m, e);
  mant[tid] = m;
  expo[tid] = e;
}

template <typename T, int N>
[[max_total_threads_per_threadgroup(64)]]  // = SMALL_GROUP
kernel void small_det_direct(device const T *A [[buffer(0)]], device T *mant [[buffer(1)]],
                             device int *expo [[buffer(2)]], device int *info [[buffer(3)]],
                             constant long &batch [[buffer(4)]], uint tid [[thread_position_in_grid]]) {
  if (long(tid) >= batch) return;
  T a[N][N];
  direct_load(A, long(tid), a);
  T m;
  int e;
  info[tid] = det_in_registers(a, m, e);
  mant[tid] = m;
  expo[tid] = e;
}

// One thread per (matrix, right-hand-side column); A read with the direct variant's accesses.
template <typename T, int N>
[[max_total_threads_per_threadgroup(64)]]  // = SMALL_GROUP
kernel void small_solve(device const T *A [[buffer(0)]], device const T *B [[buffer(1)]],
                        device T *X [[buffer(2)]], device int *info [[buffer(3)]],
                        constant long &batch [[buffer(4)]], constant long &k [[buffer(5)]],
                        uint tid [[thread_position_in_grid]]) {
  const long kk = k > 0 ? k : 1;
  const long mat = long(tid) / kk;
  const long col = long(tid) - mat * kk;
  if (mat >= batch) return;

  T a[N][N];
  direct_load(A, mat, a);

  const bool fin = all_finite(a);
  int ec[N];
  equilibrate_columns(a, ec);
  int piv[N];
  bool odd;
  int inf = factor(a, piv, odd);
  if (col == 0) info[mat] = inf;
  if (k == 0) return;

  T b[N];
  for (int i = 0; i < N; ++i) b[i] = B[(mat * N + i) * k + col];
  #pragma unroll
  for (int i = 0; i < N - 1; ++i) {  // laswp, compile-time indices (see factor)
    int p = piv[i];
    for (int q = i + 1; q < N; ++q) swap_if(q == p, b[i], b[q]);
  }
  #pragma unroll
  for (int j = 0; j < N; ++j)  // L y = b
    for (int i = j + 1; i < N; ++i) b[i] = b[i] - s_mul(a[i][j], b[j]);
  #pragma unroll
  for (int i = N - 1; i >= 0; --i) {  // U x = y
    T acc = b[i];
    for (int j = i + 1; j < N; ++j) acc = acc - s_mul(a[i][j], b[j]);
    b[i] = s_div(acc, a[i][i]);
  }
  for (int i = 0; i < N; ++i) X[(mat * N + i) * k + col] = fin ? b[i] * pow2(-ec[i]) : s_nan<T>();
}

// Instantiations: host names <kernel>_<f32|c64>_<N> (scalar.h's idiom; kernel_name() on the host),
// the load variant part of the kernel's name (small_inv_staged, small_inv_direct, ...).
#define SMALL_INSTANTIATE_T(tag, T, N)                                          \
  MPSL_INSTANTIATE("small_inv_staged_" tag "_" #N, small_inv_staged, T, N)  \
  MPSL_INSTANTIATE("small_inv_direct_" tag "_" #N, small_inv_direct, T, N)  \
  MPSL_INSTANTIATE("small_det_staged_" tag "_" #N, small_det_staged, T, N)  \
  MPSL_INSTANTIATE("small_det_direct_" tag "_" #N, small_det_direct, T, N)  \
  MPSL_INSTANTIATE("small_solve_" tag "_" #N, small_solve, T, N)
#define SMALL_INSTANTIATE(N) SMALL_INSTANTIATE_T("f32", float, N) SMALL_INSTANTIATE_T("c64", float2, N)
SMALL_INSTANTIATE(1)
SMALL_INSTANTIATE(2)
SMALL_INSTANTIATE(3)
SMALL_INSTANTIATE(4)
