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

// ---- two-stage reduction, stage 2: band -> tridiagonal (LAPACK sb2st/hb2st bulge chasing) ----------
//
//   eigh_band_tridiag_{f32,c64}  A [batch, n, n]: a Hermitian band matrix of bandwidth nb (both
//                        triangles stored, dense row-major; overwritten), reduced to the real
//                        symmetric tridiagonal D [batch, n], E [batch, n] (E[i] couples i and i+1,
//                        E[n-1] = 0) by Householder reflectors H = I - tau v v^H (v[0] = 1), all
//                        recorded: V [batch, n, S, nb], TAU [batch, n, S] (sweep j, step k; S =
//                        ceil((n-1)/nb)). One threadgroup of EIGH_BAND_THREADS threads per matrix.
//   eigh_band_q2_{f32,c64}       Z [batch, n, n] <- Q2 Z, Q2 = H_(0,0) H_(0,1) ... (every reflector of
//                        eigh_band_tridiag in its order), one thread per column of Z: no barriers.
//
// Why Householder bulge chasing, not sbtrd's Givens rotations: one reflector of length nb clears a
// whole column of the bulge, so a sweep is ~(n-j)/nb steps of O(nb^2) work with three barriers each
// (~n^2/(2 nb) steps in all) instead of ~n^2 rotations with a barrier each; the threads share each
// step's work (columns, then rows) and the reflectors are stored for a back-transformation that is
// parallel over Z's columns.
//
// Sweep j (Lang's algorithm, hb2st's order): step 0 reflects rows j+1 .. j+nb to clear column j
// below its subdiagonal; applied from the right it fills the block rows j+nb+1 .. j+2nb of columns
// j+1 .. j+nb, whose first column step 1 clears with rows j+nb+1 .. j+2nb, and so on down the band.
// Only the first column of each bulge is cleared; the rest is cleared by the next sweeps (the matrix
// reaches bandwidth 2nb - 1 in between), and the rows p .. p+L-1 a step reflects have no nonzeros
// farther than nb left of p or right of p+L-1 (the band before them, the bulge after them), so
// each reflector is applied to columns (rows) p - nb .. p+L-1+nb only: O(nb^2) work a step. The
// kernel test holds this against the dense twin (a reach of nb - 1 fails it). Column c, just
// cleared, is written exactly (beta, zeros). larfg's real beta makes the tridiagonal real for
// complex input (the length-1 reflector at the end of a chase included: hetrd's phase scaling).
// The host scales the matrix to max |a_ij| ~ 1 (no overflow in the norms).
constant constexpr int EIGH_BAND_THREADS = 64;
constant constexpr int EIGH_BAND_MAXNB = 64;

inline float eigh_re(float a) { return a; }
inline float eigh_re(float2 a) { return a.x; }
inline float eigh_im(float a) { return 0.0f; }
inline float eigh_im(float2 a) { return a.y; }
inline float eigh_to(float x, float dummy) { return x; }
inline float2 eigh_to(float x, float2 dummy) { return float2(x, 0.0f); }

template <typename T>
[[max_total_threads_per_threadgroup(64)]]  // EIGH_BAND_THREADS: the host launches 64 threads per matrix
kernel void eigh_band_tridiag(device T* A [[buffer(0)]],
                              device float* D [[buffer(1)]],
                              device float* Eo [[buffer(2)]],
                              device T* V [[buffer(3)]],
                              device T* TAU [[buffer(4)]],
                              constant long& N [[buffer(5)]],
                              constant long& NB [[buffer(6)]],
                              constant long& S [[buffer(7)]],
                              uint tid [[thread_index_in_threadgroup]],
                              uint b [[threadgroup_position_in_grid]]) {
  threadgroup T vs[EIGH_BAND_MAXNB];  // the step's reflector
  threadgroup T tg_tau;
  const int n = (int)N;
  const int nb = (int)NB;
  const int t0 = (int)tid;
  const int reach = nb;  // see the header: a step's rows have no nonzeros farther out
  device T* a = A + (long)b * N * N;
  device T* vrec = V + (long)b * N * S * NB;
  device T* trec = TAU + (long)b * N * S;
  const T zero = s_zero<T>();
  for (int j = 0; j + 1 < n; ++j) {
    int c = j;
    int k = 0;
    for (int p = j + 1; p < n; p += nb, ++k) {
      const int L = min(nb, n - p);
      if (t0 == 0) {
        // larfg on x = a[p .. p+L-1, c]: beta real, H^H x = beta e1
        const T alpha = a[(long)p * N + c];
        float big = 0.0f;
        for (int i = 1; i < L; ++i) {
          big = max(big, s_abs(a[(long)(p + i) * N + c]));
        }
        float ss = 0.0f;
        if (big > 0.0f) {
          for (int i = 1; i < L; ++i) {
            const T y = a[(long)(p + i) * N + c];
            const float yr = eigh_re(y) / big, yi = eigh_im(y) / big;
            ss += yr * yr + yi * yi;
          }
        }
        const float xnorm = big * sqrt(ss);
        T tau = zero;
        float beta = eigh_re(alpha);
        vs[0] = s_one<T>();
        if (xnorm != 0.0f || eigh_im(alpha) != 0.0f) {
          const float mag = hypot(s_abs(alpha), xnorm);
          beta = eigh_re(alpha) >= 0.0f ? -mag : mag;
          const T bt = eigh_to(beta, zero);
          tau = s_div(bt - alpha, bt);
          const T denom = alpha - bt;
          for (int i = 1; i < L; ++i) {
            vs[i] = s_div(a[(long)(p + i) * N + c], denom);
          }
        } else {
          for (int i = 1; i < L; ++i) {
            vs[i] = zero;
          }
        }
        for (int i = 0; i < L; ++i) {
          vrec[((long)j * S + k) * NB + i] = vs[i];
        }
        trec[(long)j * S + k] = tau;
        tg_tau = tau;
        const T bt = eigh_to(beta, zero);
        a[(long)p * N + c] = bt;
        a[(long)c * N + p] = bt;
        for (int i = 1; i < L; ++i) {
          a[(long)(p + i) * N + c] = zero;
          a[(long)c * N + p + i] = zero;
        }
      }
      threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
      const T tau = tg_tau;
      if (!s_is_zero(tau)) {
        const int lo = max(0, p - reach), hi = min(n, p + L + reach);
        const T tauc = s_conj(tau);
        // from the left, H^H: rows p .. p+L-1, one column per thread (column c is done)
        for (int col = lo + t0; col < hi; col += EIGH_BAND_THREADS) {
          if (col == c) {
            continue;
          }
          T s = zero;
          for (int i = 0; i < L; ++i) {
            s += s_mul(s_conj(vs[i]), a[(long)(p + i) * N + col]);
          }
          s = s_mul(tauc, s);
          for (int i = 0; i < L; ++i) {
            a[(long)(p + i) * N + col] -= s_mul(s, vs[i]);
          }
        }
        threadgroup_barrier(mem_flags::mem_device);
        // from the right, H: columns p .. p+L-1, one row per thread (row c is done)
        for (int row = lo + t0; row < hi; row += EIGH_BAND_THREADS) {
          if (row == c) {
            continue;
          }
          device T* ar = a + (long)row * N + p;
          T s = zero;
          for (int i = 0; i < L; ++i) {
            s += s_mul(ar[i], vs[i]);
          }
          s = s_mul(tau, s);
          for (int i = 0; i < L; ++i) {
            ar[i] -= s_mul(s, s_conj(vs[i]));
          }
        }
      }
      threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
      c = p;
    }
  }
  device float* d = D + (long)b * N;
  device float* e = Eo + (long)b * N;
  for (int i = t0; i < n; i += EIGH_BAND_THREADS) {
    d[i] = eigh_re(a[(long)i * N + i]);
    e[i] = i + 1 < n ? eigh_re(a[(long)(i + 1) * N + i]) : 0.0f;
  }
}

template <typename T>
[[max_total_threads_per_threadgroup(64)]]  // the host launches groups of 64 (no barriers)
kernel void eigh_band_q2(device const T* V [[buffer(0)]],
                         device const T* TAU [[buffer(1)]],
                         device T* Z [[buffer(2)]],
                         constant long& N [[buffer(3)]],
                         constant long& NB [[buffer(4)]],
                         constant long& S [[buffer(5)]],
                         constant long& NCOLS [[buffer(6)]],
                         uint gid [[thread_position_in_grid]]) {
  const int n = (int)N;
  const int nb = (int)NB;
  const long b = (long)gid / NCOLS;
  const int col = (int)((long)gid % NCOLS);
  if (col >= n) {
    return;
  }
  device const T* vrec = V + b * N * S * NB;
  device const T* trec = TAU + b * N * S;
  device T* z = Z + b * N * N + col;
  // Q2 Z applies the last reflector first
  for (int j = n - 2; j >= 0; --j) {
    const int steps = (n - 1 - j + nb - 1) / nb;
    for (int k = steps - 1; k >= 0; --k) {
      const T tau = trec[(long)j * S + k];
      if (s_is_zero(tau)) {
        continue;
      }
      const int p = j + 1 + k * nb;
      const int L = min(nb, n - p);
      device const T* v = vrec + ((long)j * S + k) * NB;
      T s = s_zero<T>();
      for (int i = 0; i < L; ++i) {
        s += s_mul(s_conj(v[i]), z[(long)(p + i) * N]);
      }
      s = s_mul(tau, s);
      for (int i = 0; i < L; ++i) {
        z[(long)(p + i) * N] -= s_mul(s, v[i]);
      }
    }
  }
}

MPSL_INSTANTIATE_DTYPES(eigh_band_tridiag)
MPSL_INSTANTIATE_DTYPES(eigh_band_q2)
