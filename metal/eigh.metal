// eigh.metal - the batched cyclic two-sided Jacobi of the eigh family (mpslinalg/eigh/), float32
// and complex64 (float2).
//
//   eigh_jacobi_{f32,c64}  the Hermitian eigenproblem of whole n x n matrices (n even; float32
//                          n <= 64, complex64 n <= 58: the tile fits EIGH_TILE_BYTES of threadgroup
//                          memory), one threadgroup of EIGH_THREADS threads per matrix. H is read
//                          into the tile, rotated to diagonal form, written back whole; the same
//                          rotations are applied to the columns of V (device memory) when want_v.
//
//   eigh_small_{f32,c64}   the same Jacobi for n <= 4 (the 3x3 covariances of point-cloud
//                          normals), one thread per matrix, the matrix and V in registers (the
//                          loops over the fixed bound 4 are unrolled (#pragma unroll): constant
//                          indices, no local-memory stack; sm_90: 72/127 registers), cyclic row
//                          ordering (0,1),(0,2),...,(n-2,n-1), the same rotation and stopping
//                          rule; no threadgroup memory, no barriers. Grid: threads >= batch.
//
// Ordering: round-robin (circle method) with player n-1 fixed: round r (0 <= r < n-1) pairs
// (r, n-1) and ((r+k) mod (n-1), (r-k) mod (n-1)) for k = 1 .. n/2-1; every pair meets once a sweep.
//
// Rotation (Rutishauser, complex phase split off): for the block [[a, b], [conj b, d]] with
// |b| > tol*sqrt|a|*sqrt|d| and |b| > FLT_MIN (Demmel-Veselic's relative stopping rule),
// zeta = (d - a) / (2|b|), t = sign(zeta) / (|zeta| + hypot(1, zeta)), c = 1/sqrt(1+t^2), s = t c,
// w = b/|b|, J = [[c, s w], [-s conj(w), c]]: rows p, q <- J^H (rows), columns p, q <- (columns) J,
// and the block set exactly to diag(a - t|b|, d + t|b|). A pair above ctol counts as "still
// rotating"; a matrix stops after its first sweep without one (no host read: the whole iteration is
// this one dispatch), or after `sweeps` sweeps; rotated[b] = 1 if it still rotated in the last.
//
// A round is three phases, each ended by a barrier: the n/2 rotations (one thread per pair,
// parameters into threadgroup arrays); the row updates (work items (pair, column)); the column
// updates of H and V (work items (row, pair)). Disjoint pairs: no two work items of a phase touch
// the same element. Layout: H, V contiguous [batch, n, n] row-major (the host passes resolved,
// contiguous tensors); sizes arrive as 8-byte longs, tolerances as floats.
#include <metal_stdlib>
#include "scalar.h"
using namespace metal;

constant constexpr int EIGH_THREADS = 64;
constant constexpr int EIGH_MAX_PAIRS = 32;
constant constexpr int EIGH_TILE_BYTES = 28672;

inline float eigh_re(float a) { return a; }
inline float eigh_re(float2 a) { return a.x; }
// a * x for real a (no complex product needed).
inline float eigh_scale(float a, float x) { return a * x; }
inline float2 eigh_scale(float a, float2 x) { return float2(a * x.x, a * x.y); }
template <typename T> inline T eigh_real(float a);
template <> inline float eigh_real<float>(float a) { return a; }
template <> inline float2 eigh_real<float2>(float a) { return float2(a, 0.0f); }

// The pairs (p, q) of round r: pair 0 is (r, n-1), pair k the circle's k-th chord.
inline void eigh_pair(int n, int r, int k, thread int& p, thread int& q) {
  const int m = n - 1;
  if (k == 0) {
    p = r;
    q = m;
  } else {
    p = (r + k) % m;
    q = (r - k + m) % m;
  }
}

template <typename T>
[[max_total_threads_per_threadgroup(64)]]  // EIGH_THREADS: the host launches 64 threads per matrix
kernel void eigh_jacobi(device T* H [[buffer(0)]],
                        device T* V [[buffer(1)]],
                        device int* rotated [[buffer(2)]],
                        constant long& N [[buffer(3)]],
                        constant long& sweeps [[buffer(4)]],
                        constant long& want_v [[buffer(5)]],
                        constant float& tol [[buffer(6)]],
                        constant float& ctol [[buffer(7)]],
                        uint tid [[thread_index_in_threadgroup]],
                        uint b [[threadgroup_position_in_grid]]) {
  threadgroup T tile[EIGH_TILE_BYTES / sizeof(T)];
  threadgroup float pc[EIGH_MAX_PAIRS];   // c
  threadgroup T psw[EIGH_MAX_PAIRS];      // s * w
  threadgroup float pa[EIGH_MAX_PAIRS];   // new a_pp
  threadgroup float pd[EIGH_MAX_PAIRS];   // new a_qq
  threadgroup T pb[EIGH_MAX_PAIRS];       // new a_pq (0 if rotated)
  threadgroup int pbig[EIGH_MAX_PAIRS];   // this sweep rotated pair k above ctol
  threadgroup int any_big;
  const int n = (int)N;
  const int h = n / 2;
  const int t0 = (int)tid;
  const bool vec = want_v != 0;
  device T* hm = H + (long)b * N * N;
  device T* vm = V + (vec ? (long)b * N * N : 0);
  for (int t = t0; t < n * n; t += EIGH_THREADS) {
    tile[t] = hm[t];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int last_big = 0;
  for (long sweep = 0; sweep < sweeps; ++sweep) {
    if (t0 < h) {
      pbig[t0] = 0;
    }
    for (int r = 0; r < n - 1; ++r) {
      // phase 1: the rotations of the round's disjoint pairs
      if (t0 < h) {
        int p, q;
        eigh_pair(n, r, t0, p, q);
        const float a = eigh_re(tile[p * n + p]);
        const float d = eigh_re(tile[q * n + q]);
        const T bpq = tile[p * n + q];
        const float ab = s_abs(bpq);
        const float thr = sqrt(fabs(a)) * sqrt(fabs(d));  // apart: the product may under/overflow
        const bool rot = ab > tol * thr && ab > FLT_MIN;
        if (ab > ctol * thr && ab > FLT_MIN) {
          pbig[t0] = 1;
        }
        float c = 1.0f, t = 0.0f;
        T sw = s_zero<T>();
        if (rot) {
          const float zeta = (d - a) / (2.0f * ab);
          const float sign = zeta >= 0.0f ? 1.0f : -1.0f;
          t = sign / (fabs(zeta) + hypot(1.0f, zeta));
          c = 1.0f / sqrt(1.0f + t * t);
          sw = eigh_scale(t * c / ab, bpq);  // s * (b / |b|)
        }
        pc[t0] = c;
        psw[t0] = sw;
        pa[t0] = a - t * ab;
        pd[t0] = d + t * ab;
        pb[t0] = rot ? s_zero<T>() : bpq;
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      // phase 2: rows p, q <- J^H [rows p; q] (work item: pair k, column j)
      for (int item = t0; item < h * n; item += EIGH_THREADS) {
        const int k = item / n, j = item % n;
        int p, q;
        eigh_pair(n, r, k, p, q);
        const float c = pc[k];
        const T sw = psw[k];
        const T x = tile[p * n + j], y = tile[q * n + j];
        tile[p * n + j] = eigh_scale(c, x) - s_mul(sw, y);
        tile[q * n + j] = s_mul(s_conj(sw), x) + eigh_scale(c, y);
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      // phase 3: columns p, q <- [cols p, q] J of H and V (work item: row i, pair k); the 2x2
      // block itself is set exactly (Rutishauser's update)
      for (int item = t0; item < n * h; item += EIGH_THREADS) {
        const int i = item / h, k = item % h;
        int p, q;
        eigh_pair(n, r, k, p, q);
        const float c = pc[k];
        const T sw = psw[k];
        if (i == p) {
          tile[p * n + p] = eigh_real<T>(pa[k]);
          tile[p * n + q] = pb[k];
        } else if (i == q) {
          tile[q * n + q] = eigh_real<T>(pd[k]);
          tile[q * n + p] = s_conj(pb[k]);
        } else {
          const T x = tile[i * n + p], y = tile[i * n + q];
          tile[i * n + p] = eigh_scale(c, x) - s_mul(s_conj(sw), y);
          tile[i * n + q] = s_mul(sw, x) + eigh_scale(c, y);
        }
        if (vec) {
          const T x = vm[i * n + p], y = vm[i * n + q];
          vm[i * n + p] = eigh_scale(c, x) - s_mul(s_conj(sw), y);
          vm[i * n + q] = s_mul(sw, x) + eigh_scale(c, y);
        }
      }
      threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
    }
    // did any pair of this sweep still rotate above ctol? (thread 0 reduces; all read after a barrier)
    if (t0 == 0) {
      int any = 0;
      for (int k = 0; k < h; ++k) {
        any |= pbig[k];
      }
      any_big = any;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    last_big = any_big;
    threadgroup_barrier(mem_flags::mem_threadgroup);  // any_big and pbig are rewritten next sweep
    if (last_big == 0) {
      break;
    }
  }
  for (int t = t0; t < n * n; t += EIGH_THREADS) {
    hm[t] = tile[t];
  }
  if (t0 == 0) {
    rotated[b] = last_big;
  }
}

MPSL_INSTANTIATE_DTYPES(eigh_jacobi)

// ---------------------------------------------------------------------------------------------
// n <= 4: one thread per matrix
// ---------------------------------------------------------------------------------------------

constant constexpr int EIGH_SMALL_MAX = 4;

template <typename T>
kernel void eigh_small(device T* H [[buffer(0)]],
                       device T* V [[buffer(1)]],
                       device int* rotated [[buffer(2)]],
                       constant long& N [[buffer(3)]],
                       constant long& batch [[buffer(4)]],
                       constant long& sweeps [[buffer(5)]],
                       constant long& want_v [[buffer(6)]],
                       constant float& tol [[buffer(7)]],
                       constant float& ctol [[buffer(8)]],
                       uint b [[thread_position_in_grid]]) {
  if ((long)b >= batch) {
    return;
  }
  const int n = (int)N;
  const bool vec = want_v != 0;
  device T* hm = H + (long)b * N * N;
  T a[EIGH_SMALL_MAX][EIGH_SMALL_MAX];
  T v[EIGH_SMALL_MAX][EIGH_SMALL_MAX];
  #pragma unroll
  for (int i = 0; i < EIGH_SMALL_MAX; ++i) {
    #pragma unroll
    for (int j = 0; j < EIGH_SMALL_MAX; ++j) {
      a[i][j] = (i < n && j < n) ? hm[i * n + j] : s_zero<T>();  // padding: never rotated (|b| = 0)
      v[i][j] = eigh_real<T>(i == j ? 1.0f : 0.0f);
    }
  }
  int last_big = 0;
  for (long sweep = 0; sweep < sweeps; ++sweep) {
    int big = 0;
    #pragma unroll
    for (int p = 0; p < EIGH_SMALL_MAX - 1; ++p) {
      #pragma unroll
      for (int q = p + 1; q < EIGH_SMALL_MAX; ++q) {
        if (q >= n) {
          continue;
        }
        const float ap = eigh_re(a[p][p]);
        const float dq = eigh_re(a[q][q]);
        const T bpq = a[p][q];
        const float ab = s_abs(bpq);
        const float thr = sqrt(fabs(ap)) * sqrt(fabs(dq));
        if (ab > ctol * thr && ab > FLT_MIN) {
          big = 1;
        }
        if (!(ab > tol * thr && ab > FLT_MIN)) {
          continue;
        }
        const float zeta = (dq - ap) / (2.0f * ab);
        const float sign = zeta >= 0.0f ? 1.0f : -1.0f;
        const float t = sign / (fabs(zeta) + hypot(1.0f, zeta));
        const float c = 1.0f / sqrt(1.0f + t * t);
        const T sw = eigh_scale(t * c / ab, bpq);  // s * (b / |b|)
        #pragma unroll
        for (int j = 0; j < EIGH_SMALL_MAX; ++j) {  // rows p, q <- J^H [rows p; q]
          const T x = a[p][j], y = a[q][j];
          a[p][j] = eigh_scale(c, x) - s_mul(sw, y);
          a[q][j] = s_mul(s_conj(sw), x) + eigh_scale(c, y);
        }
        #pragma unroll
        for (int i = 0; i < EIGH_SMALL_MAX; ++i) {  // columns p, q <- [cols p, q] J, of H and V
          const T x = a[i][p], y = a[i][q];
          a[i][p] = eigh_scale(c, x) - s_mul(s_conj(sw), y);
          a[i][q] = s_mul(sw, x) + eigh_scale(c, y);
          const T vx = v[i][p], vy = v[i][q];
          v[i][p] = eigh_scale(c, vx) - s_mul(s_conj(sw), vy);
          v[i][q] = s_mul(sw, vx) + eigh_scale(c, vy);
        }
        a[p][p] = eigh_real<T>(ap - t * ab);  // the block exactly (Rutishauser's update)
        a[q][q] = eigh_real<T>(dq + t * ab);
        a[p][q] = s_zero<T>();
        a[q][p] = s_zero<T>();
      }
    }
    last_big = big;
    if (big == 0) {
      break;
    }
  }
  device T* vm = V + (vec ? (long)b * N * N : 0);
  #pragma unroll
  for (int i = 0; i < EIGH_SMALL_MAX; ++i) {
    #pragma unroll
    for (int j = 0; j < EIGH_SMALL_MAX; ++j) {
      if (i < n && j < n) {
        hm[i * n + j] = a[i][j];
        if (vec) {
          vm[i * n + j] = v[i][j];
        }
      }
    }
  }
  rotated[b] = last_big;
}

MPSL_INSTANTIATE_DTYPES(eigh_small)
