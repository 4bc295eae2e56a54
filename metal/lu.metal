// lu.metal — kernels of the LU family (mpslinalg/lu.py), float32 and complex64 (float2).
//
// Three kernels; everything else in the LU algorithm (TRSM, GEMM updates) is matrix products
// issued from Python (DESIGN §6):
//
//   lu_panel_{f32,c64}   factor the m x w panel A[o:M, o:o+w] of every matrix in the batch in place
//                        (one threadgroup per matrix, in device memory, any M);
//   lu_small_{f32,c64}   factor whole matrices with M, N <= 32 in threadgroup memory
//                        (one threadgroup per matrix; RANSAC 9x9, VMC 32x32);
//   lu_laswp_{f32,c64}   apply the row interchanges piv[k1:k2] to the columns [c0, c0 + nc) of
//                        every matrix, forward or reverse (one thread per column, no barriers);
//   lu_small_solve_{f32,c64}  factor and solve A X = B for n, k <= 32 in one dispatch (RANSAC).
//
// LAPACK semantics, exactly (getf2 / getrf2):
//   * the pivot of column j is the FIRST row of largest |Re| + |Im| (icamax) among rows j..M-1;
//   * pivots are 1-based absolute row indices, int32;
//   * a zero pivot column is not scaled (no division by zero, no NaN from it); info (zero-initialised
//     by the caller) becomes the 1-based index of the first zero pivot; elimination continues;
//   * below the diagonal: multiply by 1/pivot when |pivot| >= the smallest normal float, else
//     divide by the pivot (LAPACK's sfmin rule); a complex inf pivot gives NaN multipliers (lu_recip).
//
// Layout: A is a contiguous [batch, M, N] row-major buffer (the Python side passes resolved,
// contiguous tensors: Metal ignores strides and conjugate bits); piv is [batch, K] int32 with
// K = min(M, N) (lu_laswp: K = number of pivots per matrix); info is [batch] int32.
// Sizes arrive as 8-byte longs (torch.mps.compile_shader binds a Python int as long).
#include <metal_stdlib>
#include "complex.h"
using namespace metal;

// Smallest normal float32 (LAPACK's slamch('S') for float32).
constant constexpr float LU_SFMIN = 1.17549435e-38f;
// Threads per threadgroup of lu_panel: a power of two, at least LU_PANEL_LANES and at most this
// (the reduction arrays' size).
constant constexpr uint LU_PANEL_MAX_THREADS = 256;
// Threads that share one row in lu_panel's rank-1 update (one simdgroup: consecutive columns).
constant constexpr uint LU_PANEL_LANES = 32;
// Largest matrix order of lu_small, and the padded row stride of its threadgroup tile.
constant constexpr int LU_SMALL_MAX = 32;
constant constexpr int LU_SMALL_LD = 33;
// Row stride of lu_small_solve's augmented tile [A | B] (n + k <= 64 columns, padded).
constant constexpr int LU_SOLVE_LD = 65;

// ---- element helpers, overloaded for float (real) and float2 (complex) ------------------------

inline float lu_abs1(float a) { return fabs(a); }
inline float lu_abs1(float2 a) { return cabs1(a); }
inline float lu_abs(float a) { return fabs(a); }
inline float lu_abs(float2 a) { return cmodulus(a); }
inline float lu_mul(float a, float b) { return a * b; }
inline float2 lu_mul(float2 a, float2 b) { return cmul(a, b); }
inline float lu_div(float a, float b) { return a / b; }
inline float2 lu_div(float2 a, float2 b) { return cdiv(a, b); }
inline float lu_recip(float a) { return 1.0f / a; }
// Complex: a non-finite pivot gives NaN multipliers, as LAPACK's complex getf2 does in practice
// (MKL/OpenBLAS form 1/p from |p|^2, so 1/(inf + 0i) = inf/inf = NaN, and the NaN then spreads
// through the trailing matrix). Robust division (crecip) alone would give 1/inf = 0 and a finite,
// plausible-looking factorisation of a matrix holding inf (DESIGN §7: NaN where LAPACK's is NaN).
inline float2 lu_recip(float2 a) {
  return (isfinite(a.x) && isfinite(a.y)) ? crecip(a) : float2(NAN, NAN);
}
inline bool lu_is_zero(float a) { return a == 0.0f; }
inline bool lu_is_zero(float2 a) { return a.x == 0.0f && a.y == 0.0f; }

// ---- lu_panel ------------------------------------------------------------------------------------
//
// Right-looking unblocked LU (LAPACK getf2) of the panel rows [o, M) x columns [o, o + w) of each
// matrix. Row swaps touch only the panel's columns; the caller applies the pivots to the other
// columns with lu_laswp. Grid: threads = batch * G, group_size = G (a power of two, 32 <= G <= 256); the
// threadgroup index is the batch index. The pivot search is a strided scan (strict '>', so each
// thread keeps its first maximum) followed by a tree reduction that prefers the smaller row on
// ties: the result is LAPACK's icamax.
template <typename T>
kernel void lu_panel(device T* A [[buffer(0)]],
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
  threadgroup float red_v[LU_PANEL_MAX_THREADS];
  threadgroup int red_i[LU_PANEL_MAX_THREADS];
  device T* a = A + (long)b * M * N;
  const long kl = min(M - o, w);
  const long cend = o + w;
  for (long j = 0; j < kl; ++j) {
    const long col = o + j;
    // 1. pivot search over rows col..M-1 (sentinel row M: nothing found, e.g. all NaN)
    float best = -1.0f;
    int bi = (int)M;
    for (long r = col + (long)tid; r < M; r += (long)ntg) {
      const float v = lu_abs1(a[r * N + col]);
      if (v > best) {
        best = v;
        bi = (int)r;
      }
    }
    red_v[tid] = best;
    red_i[tid] = bi;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint s = ntg / 2; s > 0; s >>= 1) {
      if (tid < s) {
        const float v2 = red_v[tid + s];
        const int i2 = red_i[tid + s];
        if (v2 > red_v[tid] || (v2 == red_v[tid] && i2 < red_i[tid])) {
          red_v[tid] = v2;
          red_i[tid] = i2;
        }
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    const long p = (red_i[0] >= (int)M) ? col : (long)red_i[0];
    const T pivot = a[p * N + col];
    // everyone has read red_*[0] and the pivot before anything is overwritten
    threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
    if (tid == 0) {
      piv[(long)b * K + col] = (int)(p + 1);
    }
    if (!lu_is_zero(pivot)) {  // uniform over the threadgroup: every thread read the same pivot
      // 2. swap rows col and p inside the panel
      if (p != col) {
        for (long c = o + (long)tid; c < cend; c += (long)ntg) {
          const T t = a[col * N + c];
          a[col * N + c] = a[p * N + c];
          a[p * N + c] = t;
        }
      }
      threadgroup_barrier(mem_flags::mem_device);
      // 3. scale the column below the diagonal (LAPACK's sfmin rule)
      const bool use_recip = lu_abs(pivot) >= LU_SFMIN;
      const T rp = lu_recip(pivot);
      for (long r = col + 1 + (long)tid; r < M; r += (long)ntg) {
        a[r * N + col] = use_recip ? lu_mul(a[r * N + col], rp) : lu_div(a[r * N + col], pivot);
      }
    } else if (tid == 0 && info[b] == 0) {
      info[b] = (int)(col + 1);
    }
    threadgroup_barrier(mem_flags::mem_device);
    // 4. rank-1 update of the trailing panel rows col+1..M-1, columns col+1..cend-1: the group is
    //    LU_PANEL_LANES consecutive threads per row (consecutive columns: coalesced), ntg / lanes
    //    rows at a time; no integer division per element
    const long lane = (long)(tid % LU_PANEL_LANES);
    const long rstep = (long)(ntg / LU_PANEL_LANES);
    for (long r = col + 1 + (long)(tid / LU_PANEL_LANES); r < M; r += rstep) {
      const T l = a[r * N + col];
      for (long c = col + 1 + lane; c < cend; c += (long)LU_PANEL_LANES) {
        a[r * N + c] -= lu_mul(l, a[col * N + c]);
      }
    }
    threadgroup_barrier(mem_flags::mem_device);
  }
}

// ---- lu_small ------------------------------------------------------------------------------------
//
// Whole-matrix LU of M x N matrices with M, N <= 32, in threadgroup memory (8.4 KiB for complex64).
// Grid: threads = batch * G, group_size = G (any G >= 1; 32 = one simdgroup is the intended size).
// Thread 0 does the pivot search with LAPACK's own scan (start at the diagonal, strict '>'), so the
// pivot is icamax's even for NaN input; the swap, scaling and update are spread over the group.
// Whole rows are swapped (LAPACK getf2), so no lu_laswp is needed afterwards.
template <typename T>
kernel void lu_small(device T* A [[buffer(0)]],
                     device int* piv [[buffer(1)]],
                     device int* info [[buffer(2)]],
                     constant long& M [[buffer(3)]],
                     constant long& N [[buffer(4)]],
                     uint tid [[thread_index_in_threadgroup]],
                     uint ntg [[threads_per_threadgroup]],
                     uint b [[threadgroup_position_in_grid]]) {
  threadgroup T s[LU_SMALL_MAX * LU_SMALL_LD];
  threadgroup int sp[1];
  const int m = (int)M;
  const int n = (int)N;
  const int k = min(m, n);
  const int nt = (int)ntg;
  const int t0 = (int)tid;
  device T* a = A + (long)b * M * N;
  for (int t = t0; t < m * n; t += nt) {
    s[(t / n) * LU_SMALL_LD + t % n] = a[t];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int j = 0; j < k; ++j) {
    if (t0 == 0) {
      int p = j;
      float best = lu_abs1(s[j * LU_SMALL_LD + j]);
      for (int r = j + 1; r < m; ++r) {
        const float v = lu_abs1(s[r * LU_SMALL_LD + j]);
        if (v > best) {
          best = v;
          p = r;
        }
      }
      sp[0] = p;
      piv[(long)b * k + j] = p + 1;
      if (lu_is_zero(s[p * LU_SMALL_LD + j]) && info[b] == 0) {
        info[b] = j + 1;
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const int p = sp[0];
    const T pivot = s[p * LU_SMALL_LD + j];
    threadgroup_barrier(mem_flags::mem_threadgroup);  // all have read the pivot before the swap
    if (!lu_is_zero(pivot)) {
      if (p != j) {
        for (int c = t0; c < n; c += nt) {
          const T t = s[j * LU_SMALL_LD + c];
          s[j * LU_SMALL_LD + c] = s[p * LU_SMALL_LD + c];
          s[p * LU_SMALL_LD + c] = t;
        }
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      const bool use_recip = lu_abs(pivot) >= LU_SFMIN;
      const T rp = lu_recip(pivot);
      for (int r = j + 1 + t0; r < m; r += nt) {
        const T x = s[r * LU_SMALL_LD + j];
        s[r * LU_SMALL_LD + j] = use_recip ? lu_mul(x, rp) : lu_div(x, pivot);
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int r = j + 1 + t0; r < m; r += nt) {  // one row per thread (row stride 33: no bank conflicts)
      const T l = s[r * LU_SMALL_LD + j];
      for (int c = j + 1; c < n; ++c) {
        s[r * LU_SMALL_LD + c] -= lu_mul(l, s[j * LU_SMALL_LD + c]);
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  for (int t = t0; t < m * n; t += nt) {
    a[t] = s[(t / n) * LU_SMALL_LD + t % n];
  }
}

// ---- lu_small_solve ------------------------------------------------------------------------------
//
// Fused solve of small systems A X = B (n <= 32, k <= 32 right-hand sides) in one dispatch: the
// augmented tile [A | B] (16.6 KiB for complex64) is eliminated exactly as lu_small eliminates A
// (same pivots, info and sfmin rule; whole rows of the tile are swapped, so B is permuted with A),
// then U X = B' is solved by back substitution in threadgroup memory and X is written to Xout.
// A zero pivot sets info and the back substitution divides by it (inf/NaN, as LAPACK's trsm would).
// Grid: threads = batch * G, group_size = G (32 intended).
template <typename T>
kernel void lu_small_solve(device const T* A [[buffer(0)]],
                           device const T* B [[buffer(1)]],
                           device T* Xout [[buffer(2)]],
                           device int* info [[buffer(3)]],
                           constant long& N [[buffer(4)]],
                           constant long& K [[buffer(5)]],
                           uint tid [[thread_index_in_threadgroup]],
                           uint ntg [[threads_per_threadgroup]],
                           uint b [[threadgroup_position_in_grid]]) {
  threadgroup T s[LU_SMALL_MAX * LU_SOLVE_LD];
  threadgroup int sp[1];
  const int n = (int)N;
  const int k = (int)K;
  const int w = n + k;
  const int nt = (int)ntg;
  const int t0 = (int)tid;
  device const T* a = A + (long)b * N * N;
  device const T* rhs = B + (long)b * N * K;
  for (int t = t0; t < n * n; t += nt) {
    s[(t / n) * LU_SOLVE_LD + t % n] = a[t];
  }
  for (int t = t0; t < n * k; t += nt) {
    s[(t / k) * LU_SOLVE_LD + n + t % k] = rhs[t];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int j = 0; j < n; ++j) {
    if (t0 == 0) {
      int p = j;
      float best = lu_abs1(s[j * LU_SOLVE_LD + j]);
      for (int r = j + 1; r < n; ++r) {
        const float v = lu_abs1(s[r * LU_SOLVE_LD + j]);
        if (v > best) {
          best = v;
          p = r;
        }
      }
      sp[0] = p;
      if (lu_is_zero(s[p * LU_SOLVE_LD + j]) && info[b] == 0) {
        info[b] = j + 1;
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const int p = sp[0];
    const T pivot = s[p * LU_SOLVE_LD + j];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (!lu_is_zero(pivot)) {
      if (p != j) {
        for (int c = t0; c < w; c += nt) {
          const T t = s[j * LU_SOLVE_LD + c];
          s[j * LU_SOLVE_LD + c] = s[p * LU_SOLVE_LD + c];
          s[p * LU_SOLVE_LD + c] = t;
        }
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      const bool use_recip = lu_abs(pivot) >= LU_SFMIN;
      const T rp = lu_recip(pivot);
      for (int r = j + 1 + t0; r < n; r += nt) {
        const T x = s[r * LU_SOLVE_LD + j];
        s[r * LU_SOLVE_LD + j] = use_recip ? lu_mul(x, rp) : lu_div(x, pivot);
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int r = j + 1 + t0; r < n; r += nt) {  // one row per thread
      const T l = s[r * LU_SOLVE_LD + j];
      for (int c = j + 1; c < w; ++c) {
        s[r * LU_SOLVE_LD + c] -= lu_mul(l, s[j * LU_SOLVE_LD + c]);
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  // back substitution U X = B' (columns n..n+k-1 of the tile), one right-hand side per thread
  for (int c = t0; c < k; c += nt) {
    for (int j = n - 1; j >= 0; --j) {
      const T x = lu_div(s[j * LU_SOLVE_LD + n + c], s[j * LU_SOLVE_LD + j]);
      s[j * LU_SOLVE_LD + n + c] = x;
      for (int i = 0; i < j; ++i) {
        s[i * LU_SOLVE_LD + n + c] -= lu_mul(s[i * LU_SOLVE_LD + j], x);
      }
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  device T* xo = Xout + (long)b * N * K;
  for (int t = t0; t < n * k; t += nt) {
    xo[t] = s[(t / k) * LU_SOLVE_LD + n + t % k];
  }
}

// ---- lu_laswp ------------------------------------------------------------------------------------
//
// LAPACK laswp: for i = k1 .. k2-1 (reverse: k2-1 down to k1) swap rows i and piv[i] - 1 of the
// columns [c0, c0 + nc) of each matrix. One thread per (matrix, column): the swaps of one column
// are sequential in that thread, so no barriers are needed. Grid: threads = batch * nc (any
// group size). Pivots outside [0, M) are ignored (never an out-of-bounds access).
template <typename T>
kernel void lu_laswp(device T* A [[buffer(0)]],
                     device const int* piv [[buffer(1)]],
                     constant long& M [[buffer(2)]],
                     constant long& N [[buffer(3)]],
                     constant long& K [[buffer(4)]],
                     constant long& k1 [[buffer(5)]],
                     constant long& k2 [[buffer(6)]],
                     constant long& c0 [[buffer(7)]],
                     constant long& nc [[buffer(8)]],
                     constant long& reverse [[buffer(9)]],
                     constant long& batch [[buffer(10)]],
                     uint gid [[thread_position_in_grid]]) {
  const long b = (long)gid / nc;
  const long c = c0 + (long)gid % nc;
  if (b >= batch) {
    return;
  }
  device T* a = A + b * M * N;
  device const int* pb = piv + b * K;
  for (long step = 0; step < k2 - k1; ++step) {
    const long i = reverse != 0 ? k2 - 1 - step : k1 + step;
    const long q = (long)pb[i] - 1;
    if (q != i && q >= 0 && q < M) {
      const T t = a[i * N + c];
      a[i * N + c] = a[q * N + c];
      a[q * N + c] = t;
    }
  }
}

// ---- instantiations --------------------------------------------------------------------------------
// Explicit instantiations repeat the parameter attributes (Metal binds by them).

#define LU_INSTANTIATE(T, PANEL, SMALL, LASWP, SOLVE)                                                                    \
  template [[host_name(PANEL)]] kernel void lu_panel<T>(                                \
      device T* A [[buffer(0)]], device int* piv [[buffer(1)]], device int* info [[buffer(2)]],   \
      constant long& M [[buffer(3)]], constant long& N [[buffer(4)]],                              \
      constant long& K [[buffer(5)]], constant long& o [[buffer(6)]],                              \
      constant long& w [[buffer(7)]], uint tid [[thread_index_in_threadgroup]],                    \
      uint ntg [[threads_per_threadgroup]], uint b [[threadgroup_position_in_grid]]);             \
  template [[host_name(SMALL)]] kernel void lu_small<T>(                                \
      device T* A [[buffer(0)]], device int* piv [[buffer(1)]], device int* info [[buffer(2)]],   \
      constant long& M [[buffer(3)]], constant long& N [[buffer(4)]],                              \
      uint tid [[thread_index_in_threadgroup]], uint ntg [[threads_per_threadgroup]],              \
      uint b [[threadgroup_position_in_grid]]);                                                    \
  template [[host_name(LASWP)]] kernel void lu_laswp<T>(                                \
      device T* A [[buffer(0)]], device const int* piv [[buffer(1)]],                              \
      constant long& M [[buffer(2)]], constant long& N [[buffer(3)]],                              \
      constant long& K [[buffer(4)]], constant long& k1 [[buffer(5)]],                             \
      constant long& k2 [[buffer(6)]], constant long& c0 [[buffer(7)]],                            \
      constant long& nc [[buffer(8)]], constant long& reverse [[buffer(9)]],                       \
      constant long& batch [[buffer(10)]], uint gid [[thread_position_in_grid]]);             \
  template [[host_name(SOLVE)]] kernel void lu_small_solve<T>(                                    \
      device const T* A [[buffer(0)]], device const T* B [[buffer(1)]],                            \
      device T* Xout [[buffer(2)]], device int* info [[buffer(3)]],                                \
      constant long& N [[buffer(4)]], constant long& K [[buffer(5)]],                              \
      uint tid [[thread_index_in_threadgroup]], uint ntg [[threads_per_threadgroup]],              \
      uint b [[threadgroup_position_in_grid]]);

LU_INSTANTIATE(float, "lu_panel_f32", "lu_small_f32", "lu_laswp_f32", "lu_small_solve_f32")
LU_INSTANTIATE(float2, "lu_panel_c64", "lu_small_c64", "lu_laswp_c64", "lu_small_solve_c64")
