// ldl.metal - the kernel of the LDL family (mpslinalg/ldl/), float32 and complex64 (float2).
//
//   ldl_small_{f32,c64}  Bunch-Kaufman of whole n x n matrices (n * n * sizeof(T) <= 16 KiB: float32
//                        n <= 64, complex64 n <= 45) in threadgroup memory; one threadgroup of 64
//                        threads per matrix. Larger matrices are the blocked lasyf factorization of
//                        mpslinalg/ldl/kernels.py (torch ops and matrix products).
//
// LAPACK semantics, exactly (sytf2 / hetf2, UPLO = 'L'; only the lower triangle is read):
//   * alpha = (1 + sqrt(17)) / 8; absakk = |A(k,k)| as cabs1 (|Re| for Hermitian), colmax and imax
//     the largest cabs1 below the diagonal of column k (first index on ties, i?amax);
//   * max(absakk, colmax) == 0 or absakk NaN: info = k + 1 (the first such k), no interchange, no
//     update, the column is left as it is (Hermitian: its diagonal made real);
//   * else 1x1 without interchange if absakk >= alpha colmax or absakk >= alpha colmax^2 / rowmax
//     (rowmax: the largest off-diagonal cabs1 of row/column imax), 1x1 with interchange k <-> imax
//     if |A(imax,imax)| >= alpha rowmax, else a 2x2 block with interchange k+1 <-> imax;
//   * the interchanges touch only the trailing matrix (columns of L keep earlier rows), written in
//     LAPACK's order of operations (conjugating what crosses the diagonal for Hermitian);
//   * the rank-1 update a_ij -= x_i (r1 x_j) (Hermitian: x_i conj(r1 x_j), real diagonal) with
//     r1 = 1 / A(k,k), then L(:,k) = r1 x; the rank-2 update from sytf2's / hetf2's inverse of the
//     2x2 block (the same expressions, the same order);
//   * pivots 1-based: kp + 1 for a 1x1 block, -(kp + 1) at both columns of a 2x2 block.
//
// Layout: A is a contiguous [batch, n, n] row-major buffer, overwritten with LD (zero above the
// diagonal); piv is [batch, n] int32, info is [batch] int32, both written whole. Sizes arrive as
// 8-byte longs; hermitian != 0 selects hetf2 (complex64 only; float32 ignores it).
#include <metal_stdlib>
#include "scalar.h"
using namespace metal;

// Threads per threadgroup, the tile's bytes (the host checks n * n * sizeof(T) against it) and the
// largest order (the scratch rows of the rank-2 update).
constant constexpr int LDL_SMALL_THREADS = 64;
constant constexpr int LDL_SMALL_BYTES = 16384;
constant constexpr int LDL_SMALL_MAX = 64;
// Bunch and Kaufman's alpha, (1 + sqrt(17)) / 8, rounded to float (LAPACK computes it in the
// working precision).
constant constexpr float LDL_ALPHA = 0.640388203f;

// ---- element helpers, overloaded for float (real) and float2 (complex) ------------------------

inline float ldl_re(float a) { return a; }
inline float ldl_re(float2 a) { return a.x; }
inline float ldl_real_of(float a) { return a; }
inline float2 ldl_real_of(float2 a) { return float2(a.x, 0.0f); }
template <typename T> inline T ldl_from(float a);
template <> inline float ldl_from<float>(float a) { return a; }
template <> inline float2 ldl_from<float2>(float a) { return float2(a, 0.0f); }
template <typename T> inline bool ldl_complex();
template <> inline bool ldl_complex<float>() { return false; }
template <> inline bool ldl_complex<float2>() { return true; }

// The diagonal measure: |Re| for Hermitian (hetf2), cabs1 otherwise (sytf2).
template <typename T>
inline float ldl_absdiag(T a, bool h) {
  return h ? fabs(ldl_re(a)) : s_abs1(a);
}

// The pivot decision of step k (thread 0): writes kp, kstep, zero-column flag and info into ctl.
template <typename T>
inline void ldl_decide(threadgroup T* s, int n, int k, bool h, threadgroup int* ctl) {
  const float absakk = ldl_absdiag(s[k * n + k], h);
  int imax = k;
  float colmax = 0.0f;
  if (k + 1 < n) {
    imax = k + 1;
    colmax = s_abs1(s[(k + 1) * n + k]);
    for (int i = k + 2; i < n; ++i) {
      const float v = s_abs1(s[i * n + k]);
      if (v > colmax) {
        colmax = v;
        imax = i;
      }
    }
  }
  int kp = k;
  int kstep = 1;
  int zero = 0;
  if (max(absakk, colmax) == 0.0f || isnan(absakk)) {
    zero = 1;
    if (ctl[2] == 0) {
      ctl[2] = k + 1;
    }
    if (h) {
      s[k * n + k] = ldl_real_of(s[k * n + k]);
    }
  } else if (!(absakk >= LDL_ALPHA * colmax)) {
    // rowmax: row imax left of the diagonal (A(imax, k:imax-1)), then column imax below it
    float rowmax = s_abs1(s[imax * n + k]);
    for (int j = k + 1; j < imax; ++j) {
      rowmax = max(rowmax, s_abs1(s[imax * n + j]));
    }
    if (imax + 1 < n) {
      float below = s_abs1(s[(imax + 1) * n + imax]);
      for (int i = imax + 2; i < n; ++i) {
        const float v = s_abs1(s[i * n + imax]);
        if (v > below) {
          below = v;
        }
      }
      rowmax = max(rowmax, below);
    }
    if (absakk >= LDL_ALPHA * colmax * (colmax / rowmax)) {
      kp = k;
    } else if (ldl_absdiag(s[imax * n + imax], h) >= LDL_ALPHA * rowmax) {
      kp = imax;
    } else {
      kp = imax;
      kstep = 2;
    }
  }
  ctl[0] = kp;
  ctl[1] = kstep;
  ctl[3] = zero;
}

// Interchange kk <-> kp in the trailing matrix (lower storage), in parallel over disjoint
// elements; thread 0 takes the diagonal and the single entries.
template <typename T>
inline void ldl_swap(threadgroup T* s, int n, int k, int kk, int kp, int kstep, bool h, int t0) {
  for (int r = kp + 1 + t0; r < n; r += LDL_SMALL_THREADS) {
    const T t = s[r * n + kk];
    s[r * n + kk] = s[r * n + kp];
    s[r * n + kp] = t;
  }
  for (int j = kk + 1 + t0; j < kp; j += LDL_SMALL_THREADS) {
    const T t = s[j * n + kk];
    s[j * n + kk] = h ? s_conj(s[kp * n + j]) : s[kp * n + j];
    s[kp * n + j] = h ? s_conj(t) : t;
  }
  if (t0 == 0) {
    if (h) {
      s[kp * n + kk] = s_conj(s[kp * n + kk]);
    }
    const T t = s[kk * n + kk];
    s[kk * n + kk] = h ? ldl_real_of(s[kp * n + kp]) : s[kp * n + kp];
    s[kp * n + kp] = h ? ldl_real_of(t) : t;
    if (kstep == 2) {
      if (h) {
        s[k * n + k] = ldl_real_of(s[k * n + k]);
      }
      const T u = s[(k + 1) * n + k];
      s[(k + 1) * n + k] = s[kp * n + k];
      s[kp * n + k] = u;
    }
  }
}

// ---- ldl_small -----------------------------------------------------------------------------------
//
// Grid: threads = batch * 64, group_size = 64 (one matrix per threadgroup). Each step: thread 0
// decides the pivot (a serial scan of at most two columns: O(n) against the O(n^2) update), the
// group swaps, updates the trailing lower triangle and scales the column(s); every branch below is
// uniform across the group (it reads only ctl and loop counters).
template <typename T>
[[max_total_threads_per_threadgroup(64)]]  // LDL_SMALL_THREADS: the host launches 64 per matrix
kernel void ldl_small(device T* A [[buffer(0)]],
                      device int* piv [[buffer(1)]],
                      device int* info [[buffer(2)]],
                      constant long& N [[buffer(3)]],
                      constant long& hermitian [[buffer(4)]],
                      uint tid [[thread_index_in_threadgroup]],
                      uint b [[threadgroup_position_in_grid]]) {
  threadgroup T s[LDL_SMALL_BYTES / sizeof(T)];
  threadgroup T wk[LDL_SMALL_MAX];
  threadgroup T wkp1[LDL_SMALL_MAX];
  threadgroup int ctl[4];  // kp, kstep, info, zero column
  const int n = (int)N;
  const bool h = hermitian != 0 && ldl_complex<T>();
  const int t0 = (int)tid;
  device T* a = A + (long)b * N * N;
  for (int t = t0; t < n * n; t += LDL_SMALL_THREADS) {
    s[t] = a[t];
  }
  if (t0 == 0) {
    ctl[2] = 0;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int k = 0;
  while (k < n) {
    if (t0 == 0) {
      ldl_decide(s, n, k, h, ctl);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const int kp = ctl[0];
    const int kstep = ctl[1];
    const bool zero = ctl[3] != 0;
    if (t0 == 0) {
      piv[(long)b * N + k] = kstep == 1 ? kp + 1 : -(kp + 1);
      if (kstep == 2) {
        piv[(long)b * N + k + 1] = -(kp + 1);
      }
    }
    if (!zero) {
      const int kk = k + kstep - 1;
      if (kp != kk) {
        ldl_swap(s, n, k, kk, kp, kstep, h, t0);
      } else if (h && t0 == 0) {
        s[k * n + k] = ldl_real_of(s[k * n + k]);
        if (kstep == 2) {
          s[(k + 1) * n + k + 1] = ldl_real_of(s[(k + 1) * n + k + 1]);
        }
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      if (kstep == 1 && k + 1 < n) {
        // rank-1 update of the trailing lower triangle from the unscaled column, then the scaling
        const T r1 = h ? ldl_from<T>(1.0f / ldl_re(s[k * n + k])) : s_div(s_one<T>(), s[k * n + k]);
        const int m = n - k - 1;
        for (int t = t0; t < m * m; t += LDL_SMALL_THREADS) {
          const int i = k + 1 + t / m;
          const int j = k + 1 + t % m;
          if (j <= i) {
            const T xi = s[i * n + k];
            const T xj = s[j * n + k];
            if (h) {
              const T temp = s_mul(ldl_from<T>(-ldl_re(r1)), s_conj(xj));
              s[i * n + j] = i == j ? ldl_from<T>(ldl_re(s[i * n + j]) + ldl_re(s_mul(xi, temp)))
                                    : s[i * n + j] + s_mul(xi, temp);
            } else {
              s[i * n + j] = s[i * n + j] - s_mul(xi, s_mul(r1, xj));
            }
          }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int i = k + 1 + t0; i < n; i += LDL_SMALL_THREADS) {
          s[i * n + k] = s_mul(r1, s[i * n + k]);
        }
      } else if (kstep == 2 && k + 2 < n) {
        // the multipliers of the 2x2 block (sytf2 / hetf2 expressions), then the rank-2 update
        T d11, d22, d21;
        if (h) {
          const T a21 = s[(k + 1) * n + k];
          const float d = s_abs(a21);
          const float e11 = ldl_re(s[(k + 1) * n + k + 1]) / d;
          const float e22 = ldl_re(s[k * n + k]) / d;
          const float tt = 1.0f / (e11 * e22 - 1.0f);
          d11 = ldl_from<T>(e11);
          d22 = ldl_from<T>(e22);
          d21 = s_div(a21, ldl_from<T>(d));
          const T dd = ldl_from<T>(tt / d);
          for (int j = k + 2 + t0; j < n; j += LDL_SMALL_THREADS) {
            const T ajk = s[j * n + k];
            const T ajk1 = s[j * n + k + 1];
            wk[j] = s_mul(dd, s_mul(d11, ajk) - s_mul(d21, ajk1));
            wkp1[j] = s_mul(dd, s_mul(d22, ajk1) - s_mul(s_conj(d21), ajk));
          }
        } else {
          const T a21 = s[(k + 1) * n + k];
          d11 = s_div(s[(k + 1) * n + k + 1], a21);
          d22 = s_div(s[k * n + k], a21);
          const T tt = s_div(s_one<T>(), s_mul(d11, d22) - s_one<T>());
          d21 = s_div(tt, a21);
          for (int j = k + 2 + t0; j < n; j += LDL_SMALL_THREADS) {
            const T ajk = s[j * n + k];
            const T ajk1 = s[j * n + k + 1];
            wk[j] = s_mul(d21, s_mul(d11, ajk) - ajk1);
            wkp1[j] = s_mul(d21, s_mul(d22, ajk1) - ajk);
          }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const int m = n - k - 2;
        for (int t = t0; t < m * m; t += LDL_SMALL_THREADS) {
          const int i = k + 2 + t / m;
          const int j = k + 2 + t % m;
          if (j <= i) {
            const T aik = s[i * n + k];
            const T aik1 = s[i * n + k + 1];
            const T u = h ? s_conj(wk[j]) : wk[j];
            const T v = h ? s_conj(wkp1[j]) : wkp1[j];
            const T r = s[i * n + j] - s_mul(aik, u) - s_mul(aik1, v);
            s[i * n + j] = h && i == j ? ldl_real_of(r) : r;
          }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int j = k + 2 + t0; j < n; j += LDL_SMALL_THREADS) {
          s[j * n + k] = wk[j];
          s[j * n + k + 1] = wkp1[j];
        }
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    k += kstep;
  }
  for (int t = t0; t < n * n; t += LDL_SMALL_THREADS) {
    a[t] = (t % n) <= (t / n) ? s[t] : s_zero<T>();
  }
  if (t0 == 0) {
    info[b] = ctl[2];
  }
}

MPSL_INSTANTIATE_DTYPES(ldl_small)
