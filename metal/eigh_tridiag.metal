// eigh_tridiag.metal - the tridiagonal eigensolver of the eigh family (mpslinalg/eigh/): implicit QL
// with Wilkinson shifts (EISPACK tql2, LAPACK steqr's QL branch); the tridiagonal is float32, the
// matrix Z the rotations are applied to float32 (f32) or complex64 (c64: float2, real rotations).
//
//   eigh_tridiag_ql_{f32,c64}  the eigenvalues of the real symmetric tridiagonals diag(d) + offdiag(e)
//                        (d [batch, n], e [batch, n] with e[i] coupling i and i+1, e[n-1] = 0; both
//                        overwritten: d by the eigenvalues, unsorted) and, when want_z, Z <- Z Q
//                        (Z [batch, n, n], row-major); one threadgroup of EIGH_QL_THREADS
//                        threads per matrix; cs [batch, 2n] is the rotations' scratch.
//
// Work split: thread 0 runs the scalar QL (deflation test, shift, one bulge chase) and writes the
// chase's rotations (c_i, s_i), i = m-1 down to l, to cs; after a barrier every thread applies that
// sequence to its own rows of Z (rows are independent: no two threads touch one element), then a
// barrier releases thread 0 for the next chase. Thread 0's decisions reach the group through
// threadgroup variables, so the loop is uniform across the group.
//
// Deflation (steqr's relative test): e[m] is negligible when |e[m]| <= eps*sqrt|d[m]|*sqrt|d[m+1]|
// or |e[m]| <= FLT_MIN (the host scales the matrix to max |entry| ~ 1). An eigenvalue that takes more
// than `iterations` chases is left where it is and the matrix reported in failed[b] (LAPACK's info).
#include <metal_stdlib>
#include "scalar.h"
using namespace metal;

constant constexpr int EIGH_QL_THREADS = 64;

// One bulge chase of the QL iteration on rows/columns l .. m of the tridiagonal (tql2/tqli), its
// rotations stored at c[i], s[i]. Returns the last rotation index applied (l if the chase ran to the
// end; a larger index when it stopped early on an exactly zero r, as tqli).
inline int eigh_ql_chase(device float* d, device float* e, device float* c, device float* s, int l, int m) {
  float g = (d[l + 1] - d[l]) / (2.0f * e[l]);
  float r = hypot(g, 1.0f);
  g = d[m] - d[l] + e[l] / (g + (g >= 0.0f ? fabs(r) : -fabs(r)));
  float sn = 1.0f, cs = 1.0f, p = 0.0f;
  int i = m - 1;
  for (; i >= l; --i) {
    const float f = sn * e[i];
    const float bb = cs * e[i];
    r = hypot(f, g);
    e[i + 1] = r;
    if (r == 0.0f) {  // the chase decoupled early: undo the shift's partial effect and restart
      d[i + 1] -= p;
      e[m] = 0.0f;
      return i + 1;
    }
    sn = f / r;
    cs = g / r;
    g = d[i + 1] - p;
    r = (d[i] - g) * sn + 2.0f * cs * bb;
    p = sn * r;
    d[i + 1] = g + p;
    g = cs * r - bb;
    c[i] = cs;
    s[i] = sn;
  }
  d[l] -= p;
  e[l] = g;
  e[m] = 0.0f;
  return l;
}

// c * x for real c.
inline float eigh_ql_scale(float c, float x) { return c * x; }
inline float2 eigh_ql_scale(float c, float2 x) { return float2(c * x.x, c * x.y); }

template <typename T>
[[max_total_threads_per_threadgroup(64)]]  // EIGH_QL_THREADS: the host launches 64 threads per matrix
kernel void eigh_tridiag_ql(device float* D [[buffer(0)]],
                            device float* Eo [[buffer(1)]],
                            device T* Z [[buffer(2)]],
                            device int* failed [[buffer(3)]],
                            device float* CS [[buffer(4)]],
                            constant long& N [[buffer(5)]],
                            constant long& want_z [[buffer(6)]],
                            constant long& iterations [[buffer(7)]],
                            uint tid [[thread_index_in_threadgroup]],
                            uint b [[threadgroup_position_in_grid]]) {
  threadgroup int go;     // 1: a chase's rotations are in cs; 0: all eigenvalues done
  threadgroup int lo;     // the chase applied rotations hi-1 down to lo
  threadgroup int hi;
  const int n = (int)N;
  const int t0 = (int)tid;
  device float* d = D + (long)b * N;
  device float* e = Eo + (long)b * N;
  device float* c = CS + (long)b * 2 * N;
  device float* s = c + N;
  device T* z = Z + (want_z != 0 ? (long)b * N * N : 0);
  const float eps = FLT_EPSILON * 0.5f;
  // thread 0's state across chases
  int l = 0, iter = 0, bad = 0;
  while (true) {
    if (t0 == 0) {
      int found = 0;
      while (l < n && found == 0) {
        int m = l;
        for (; m < n - 1; ++m) {
          const float em = fabs(e[m]);
          if (em <= eps * sqrt(fabs(d[m])) * sqrt(fabs(d[m + 1])) || em <= FLT_MIN) {
            break;
          }
        }
        if (m == l) {
          ++l;
          iter = 0;
        } else if (iter >= (int)iterations) {
          bad = 1;  // leave this eigenvalue unconverged; go on with the next
          ++l;
          iter = 0;
        } else {
          ++iter;
          lo = eigh_ql_chase(d, e, c, s, l, m);
          hi = m;
          found = 1;
        }
      }
      go = found;
    }
    threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
    if (go == 0) {
      break;
    }
    if (want_z != 0) {
      const int first = hi - 1, last = lo;
      for (int k = t0; k < n; k += EIGH_QL_THREADS) {
        device T* row = z + (long)k * N;
        for (int i = first; i >= last; --i) {
          const T f = row[i + 1];
          const T x = row[i];
          row[i + 1] = eigh_ql_scale(s[i], x) + eigh_ql_scale(c[i], f);
          row[i] = eigh_ql_scale(c[i], x) - eigh_ql_scale(s[i], f);
        }
      }
    }
    threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  }
  if (t0 == 0) {
    failed[b] = bad;
  }
}

MPSL_INSTANTIATE_DTYPES(eigh_tridiag_ql)
