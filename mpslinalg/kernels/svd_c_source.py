"""The C source of the SVD family's CPU kernel (:mod:`mpslinalg.kernels.svd_c` builds it, once per
dtype, and documents the algorithm, the SIMD lanes and the kernel contract).

Apart from the Python module so that each stays readable: the preconditioned one-sided Jacobi
(``svd_jacobi``: the one-matrix kernel ``jacobi``; the lane kernels, ``jacobi_lanes`` and the
group's Householder QR, are :mod:`mpslinalg.kernels.svd_c_lanes`'s text, placed between the two
halves here), the Householder steps it shares with ``lstsq_gelsy``, and ``lstsq_gelsy`` itself. ``REAL``, ``CPLX``
and ``REAL_MAX`` are defined by the builder before this text.
"""

from .svd_c_lanes import LANES_C_SOURCE

__all__ = ["SVD_C_SOURCE"]

_HEAD = r"""

/* The SVD family's one-sided Jacobi (mpslinalg/kernels/svd_c.py): do not edit the cached copy. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef REAL real;  /* storage: float or double; complex entries are interleaved (re, im) */
typedef double acc; /* accumulation: exact products for float32 */
#if CPLX
#define W 2
#else
#define W 1
#endif
/* float64 columns with a norm below this are scaled before their dot product (no underflow) */
#define TINY_NRM (sizeof(real) == 8 ? 0x1p-450 : 0.0)

static inline acc ssq(const real *restrict x, int64_t len) {
  acc s = 0;
#pragma omp simd reduction(+:s)
  for (int64_t k = 0; k < len * W; ++k) s += (acc)x[k] * (acc)x[k];
  return s;
}

/* ||x||, safe from underflow: a tiny sum of squares is redone on x scaled by a power of two */
static acc nrm2(const real *restrict x, int64_t len) {
  acc s = ssq(x, len);
  if (s >= 0x1p-900) return sqrt(s);
  acc mx = 0;
  for (int64_t k = 0; k < len * W; ++k) mx = fmax(mx, fabs((acc)x[k]));
  if (mx == 0) return 0;
  int e;
  frexp(mx, &e);
  s = 0;
  for (int64_t k = 0; k < len * W; ++k) {
    acc v = ldexp((acc)x[k], -e);
    s += v * v;
  }
  return ldexp(sqrt(s), e);
}

/* g = xᴴ y, the entries of x multiplied by sx and those of y by sy (powers of two) */
static inline void dotc(const real *restrict x, const real *restrict y, int64_t len, acc sx, acc sy,
                        acc *gr, acc *gi) {
#if CPLX
  acc sr = 0, si = 0;
#pragma omp simd reduction(+:sr, si)
  for (int64_t k = 0; k < len; ++k) {
    acc xr = x[2 * k] * sx, xi = x[2 * k + 1] * sx, yr = y[2 * k] * sy, yi = y[2 * k + 1] * sy;
    sr += xr * yr + xi * yi;
    si += xr * yi - xi * yr;
  }
  *gr = sr;
  *gi = si;
#else
  acc s = 0;
#pragma omp simd reduction(+:s)
  for (int64_t k = 0; k < len; ++k) s += ((acc)x[k] * sx) * ((acc)y[k] * sy);
  *gr = s;
  *gi = 0;
#endif
}

/* The Jacobi's columns are planar: n real parts, then n imaginary parts (contiguous real vectors:
   the complex loops vectorise as the real ones). pdot: dotc on planar columns. */
static inline void pdot(const real *restrict x, const real *restrict y, int64_t len, acc sx, acc sy,
                        acc *gr, acc *gi) {
#if CPLX
  acc sr = 0, si = 0;
#pragma omp simd reduction(+:sr, si)
  for (int64_t k = 0; k < len; ++k) {
    acc xr = x[k] * sx, xi = x[len + k] * sx, yr = y[k] * sy, yi = y[len + k] * sy;
    sr += xr * yr + xi * yi;
    si += xr * yi - xi * yr;
  }
  *gr = sr;
  *gi = si;
#else
  dotc(x, y, len, sx, sy, gr, gi);
#endif
}

/* x' = c x - conj(se) y, y' = se x + c y on planar columns */
static inline void prot(real *restrict x, real *restrict y, int64_t len, real c, real sr, real si) {
#if CPLX
  real *restrict xi_ = x + len, *restrict yi_ = y + len;
  for (int64_t k = 0; k < len; ++k) {
    real xr = x[k], xi = xi_[k], yr = y[k], yi = yi_[k];
    x[k] = c * xr - (sr * yr + si * yi);
    xi_[k] = c * xi - (sr * yi - si * yr);
    y[k] = (sr * xr - si * xi) + c * yr;
    yi_[k] = (sr * xi + si * xr) + c * yi;
  }
#else
  (void)si;
  for (int64_t k = 0; k < len; ++k) {
    real xk = x[k], yk = y[k];
    x[k] = c * xk - sr * yk;
    y[k] = sr * xk + c * yk;
  }
#endif
}

/* stable descending order of key[0..len) into idx (insertion sort on nearly sorted keys, merge
   by qsort for long row lists) */
static _Thread_local const acc *sort_key; /* per thread: batches run in parallel */
static int by_key_desc(const void *a, const void *b) {
  int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
  if (sort_key[i] > sort_key[j]) return -1;
  if (sort_key[i] < sort_key[j]) return 1;
  return (i > j) - (i < j);
}
static void order_desc(const acc *key, int64_t *idx, int64_t len) {
  for (int64_t i = 0; i < len; ++i) idx[i] = i;
  if (len > 64) { /* qsort with the index as tie-break is stable */
    sort_key = key;
    qsort(idx, (size_t)len, sizeof(int64_t), by_key_desc);
    return;
  }
  for (int64_t i = 1; i < len; ++i) {
    int64_t v = idx[i], j = i;
    while (j > 0 && key[idx[j - 1]] < key[v]) { idx[j] = idx[j - 1]; --j; }
    idx[j] = v;
  }
}

/* xlarfg on the column x[0..len): x = beta e_0 after H, v (v_0 = 1 implicit) below; tau complex
   (0 when H = I) */
static void house(real *x, int64_t len, acc *tau) {
  acc ar = x[0], ai = CPLX ? x[1] : 0;
  acc xn = nrm2(x + W, len - 1); /* scaled where squares would underflow (float64) */
  tau[0] = tau[1] = 0;
  if (xn == 0 && ai == 0) return; /* H = I */
  acc beta = -copysign(hypot(hypot(ar, ai), xn), ar);
  tau[0] = (beta - ar) / beta;
  tau[1] = -ai / beta;
  /* v = x / (alpha - beta), by division: |x_i| <= |alpha - beta|, nothing overflows */
  acc dr = ar - beta, di = ai, dn = fmax(fabs(dr), fabs(di));
  dr /= dn;
  di /= dn;
  acc d2 = dr * dr + di * di;
  for (int64_t i = 1; i < len; ++i) {
#if CPLX
    acc xr = x[2 * i] / dn, xi = x[2 * i + 1] / dn;
    x[2 * i] = (real)((xr * dr + xi * di) / d2);
    x[2 * i + 1] = (real)((xi * dr - xr * di) / d2);
#else
    x[i] = (real)((x[i] / dn) / dr);
#endif
  }
  x[0] = (real)beta;
  if (CPLX) x[1] = 0;
}

/* a[0..len) <- (I - t v vᴴ) a with t = (tr, ti) and the reflector v of house (v_0 = 1): H a for
   t = tau, Hᴴ a for t = conj(tau) */
static void reflect(const real *v, acc tr, acc ti, int64_t len, real *a) {
  acc wr, wi;
  dotc(v + W, a + W, len - 1, 1, 1, &wr, &wi);
  wr += a[0];
  wi += CPLX ? a[1] : 0;
  if (wr == 0 && wi == 0) return;
  const real fr = (real)(tr * wr - ti * wi), fi = (real)(tr * wi + ti * wr); /* t (vᴴ a) */
  a[0] -= fr;
  if (CPLX) a[1] -= fi;
  for (int64_t i = 1; i < len; ++i) { /* in the storage type: full-width vectors */
#if CPLX
    a[2 * i] -= fr * v[2 * i] - fi * v[2 * i + 1];
    a[2 * i + 1] -= fr * v[2 * i + 1] + fi * v[2 * i];
#else
    a[i] -= fr * v[i];
#endif
  }
}

/* reflect on the ncols columns a + k lda (lda counts reals), four at a time: their dot products
   are independent and share the loads of v (reflect alone is a chain: dot product, then update) */
static void reflect_cols(const real *v, acc tr, acc ti, int64_t len, real *a, int64_t lda, int64_t ncols) {
  int64_t k = 0;
  for (; k + 4 <= ncols; k += 4) {
    real *restrict a0 = a + k * lda, *restrict a1 = a0 + lda, *restrict a2 = a1 + lda, *restrict a3 = a2 + lda;
    acc r0 = 0, r1 = 0, r2 = 0, r3 = 0, i0 = 0, i1 = 0, i2 = 0, i3 = 0;
#pragma omp simd reduction(+:r0, r1, r2, r3, i0, i1, i2, i3)
    for (int64_t i = 1; i < len; ++i) {
#if CPLX
      acc vr = v[2 * i], vi = v[2 * i + 1]; /* conj(v_i) a_i */
      r0 += vr * a0[2 * i] + vi * a0[2 * i + 1], i0 += vr * a0[2 * i + 1] - vi * a0[2 * i];
      r1 += vr * a1[2 * i] + vi * a1[2 * i + 1], i1 += vr * a1[2 * i + 1] - vi * a1[2 * i];
      r2 += vr * a2[2 * i] + vi * a2[2 * i + 1], i2 += vr * a2[2 * i + 1] - vi * a2[2 * i];
      r3 += vr * a3[2 * i] + vi * a3[2 * i + 1], i3 += vr * a3[2 * i + 1] - vi * a3[2 * i];
#else
      acc vr = v[i];
      r0 += vr * a0[i], r1 += vr * a1[i], r2 += vr * a2[i], r3 += vr * a3[i];
#endif
    }
    acc wr[4] = {r0 + a0[0], r1 + a1[0], r2 + a2[0], r3 + a3[0]};
    acc wi[4] = {i0 + (CPLX ? a0[W - 1] : 0), i1 + (CPLX ? a1[W - 1] : 0), i2 + (CPLX ? a2[W - 1] : 0),
                 i3 + (CPLX ? a3[W - 1] : 0)};
    real fr[4], fi[4]; /* t (vᴴ a) */
    for (int c = 0; c < 4; ++c) fr[c] = (real)(tr * wr[c] - ti * wi[c]), fi[c] = (real)(tr * wi[c] + ti * wr[c]);
    a0[0] -= fr[0], a1[0] -= fr[1], a2[0] -= fr[2], a3[0] -= fr[3];
    if (CPLX) a0[W - 1] -= fi[0], a1[W - 1] -= fi[1], a2[W - 1] -= fi[2], a3[W - 1] -= fi[3];
    for (int64_t i = 1; i < len; ++i) { /* in the storage type: full-width vectors */
#if CPLX
      real vr = v[2 * i], vi = v[2 * i + 1];
      a0[2 * i] -= fr[0] * vr - fi[0] * vi, a0[2 * i + 1] -= fr[0] * vi + fi[0] * vr;
      a1[2 * i] -= fr[1] * vr - fi[1] * vi, a1[2 * i + 1] -= fr[1] * vi + fi[1] * vr;
      a2[2 * i] -= fr[2] * vr - fi[2] * vi, a2[2 * i + 1] -= fr[2] * vi + fi[2] * vr;
      a3[2 * i] -= fr[3] * vr - fi[3] * vi, a3[2 * i + 1] -= fr[3] * vi + fi[3] * vr;
#else
      real vr = v[i];
      a0[i] -= fr[0] * vr, a1[i] -= fr[1] * vr, a2[i] -= fr[2] * vr, a3[i] -= fr[3] * vr;
#endif
    }
  }
  for (; k < ncols; ++k) reflect(v, tr, ti, len, a + k * lda);
}

/* Householder QR of the column-major m x n Wk in place (xgeqr2, xlarfg conventions): R on and
   above the diagonal (real diagonal), v below it (v_0 = 1 implicit), tau[j] complex. */
static void geqr2(real *Wk, int64_t m, int64_t n, acc *tau) {
  for (int64_t j = 0; j < n; ++j) {
    real *x = Wk + (j * m + j) * W;
    house(x, m - j, tau + 2 * j);
    if (tau[2 * j] == 0 && tau[2 * j + 1] == 0) continue;
    /* A(j:, j+1:) <- Hᴴ A */
    reflect_cols(x, tau[2 * j], -tau[2 * j + 1], m - j, Wk + ((j + 1) * m + j) * W, m * W, n - j - 1);
  }
}

/* M <- H_0 ... H_{n-1} M for the column-major m x cols M (the reflectors of geqr2 in Wk) */
static void apply_q(const real *Wk, const acc *tau, int64_t m, int64_t n, real *M, int64_t cols) {
  for (int64_t j = n - 1; j >= 0; --j) {
    if (tau[2 * j] == 0 && tau[2 * j + 1] == 0) continue;
    reflect_cols(Wk + (j * m + j) * W, tau[2 * j], tau[2 * j + 1], m - j, M + j * W, m * W, cols);
  }
}

/* One-sided Jacobi on the n columns (length n) of X, rotations also applied to V (or NULL).
   Returns 1 if the last sweep run made a rotation above ctol (not converged). */
static int jacobi(real *X, real *V, int64_t n, int64_t max_sweeps, acc tol, acc ctol, acc *nrm,
                  int64_t *col) {
  int sig = 0;
  for (int64_t j = 0; j < n; ++j) col[j] = j;
  for (int64_t sweep = 0; sweep < max_sweeps; ++sweep) {
    sig = 0;
    for (int64_t j = 0; j < n; ++j) nrm[j] = nrm2(X + j * n * W, n);
    for (int64_t p = 0; p < n - 1; ++p) {
      int64_t best = p; /* de Rijk: the largest remaining column next */
      for (int64_t j = p + 1; j < n; ++j)
        if (nrm[col[j]] > nrm[col[best]]) best = j;
      int64_t tmp = col[p];
      col[p] = col[best];
      col[best] = tmp;
      int64_t ip = col[p];
      real *xp = X + ip * n * W;
      for (int64_t q = p + 1; q < n; ++q) {
        int64_t iq = col[q];
        real *xq = X + iq * n * W;
        acc np = nrm[ip], nq = nrm[iq];
        if (np == 0 || nq == 0) continue;
        /* a, b, (gr, gi): the pair's norms and x_pᴴ x_q, of the columns scaled by up⁻¹, uq⁻¹ */
        acc a = np, b = nq, up = 1, uq = 1, gr, gi;
        if (np >= TINY_NRM && nq >= TINY_NRM) { /* a·b >= 2^-900, or float32's exact range */
          pdot(xp, xq, n, 1, 1, &gr, &gi);
        } else { /* both columns scaled by the power of two of the larger one (a rotation of
                    columns scaled apart would be the wrong angle): the products cannot underflow */
          int ep, eq;
          frexp(np, &ep);
          frexp(nq, &eq);
          up = uq = ldexp(1.0, ep > eq ? ep : eq);
          a = np / up;
          b = nq / uq;
          pdot(xp, xq, n, 1 / up, 1 / uq, &gr, &gi);
        }
        acc ag = CPLX ? hypot(gr, gi) : fabs(gr), ab = a * b; /* |cos| of the angle = ag / ab */
        if (ag > ctol * ab) sig = 1;
        if (!(ag > tol * ab)) continue;
        /* Rutishauser's t = sign(ζ)/(|ζ| + √(1 + ζ²)), ζ = D/E, D = ‖x_q‖² − ‖x_p‖², E = 2|x_pᴴ x_q|,
           as t = sign(D) E/(|D| + r), r = √(D² + E²), and c = 1/√(1 + t²) as √((1 + |D|/r)/2)
           (cos²θ = (1 + cos 2θ)/2): no quotient of quotients, and c and t computed side by side */
        acc D = (b - a) * (b + a), E = 2 * ag, aD = fabs(D);
        acc r = (aD > 0x1p-450 || E > 0x1p-450) ? sqrt(aD * aD + E * E) : hypot(aD, E);
        acc t = (D >= 0 ? E : -E) / (aD + r);
        acc c = sqrt(0.5 + 0.5 * (aD / r)), s = c * t;
#if CPLX
        acc sr = s * (gr / ag), si = s * (gi / ag); /* s times the phase of x_pᴴ x_q */
#else
        acc sr = gr >= 0 ? s : -s, si = 0;
#endif
        prot(xp, xq, n, (real)c, (real)sr, (real)si);
        if (V) prot(V + ip * n * W, V + iq * n * W, n, (real)c, (real)sr, (real)si);
        /* ‖x_p'‖² = ‖x_p‖² − t |g|, ‖x_q'‖² = ‖x_q‖² + t |g| (xGESVJ's update); recomputed when
           the update cancels */
        acc p2 = a * a - t * ag, q2 = b * b + t * ag;
        nrm[ip] = p2 > 0.25 * a * a ? sqrt(p2) * up : nrm2(xp, n);
        nrm[iq] = q2 > 0.25 * b * b ? sqrt(q2) * uq : nrm2(xq, n);
      }
    }
    if (!sig) break;
  }
  return sig;
}

"""

_TAIL = r"""
/* v 2^e as one product where 2^e is a normal double (f = pow2_factor(e)), else by ldexp */
static inline acc pow2_factor(int e) { return e > -1000 && e < 1000 ? ldexp(1.0, e) : 0; }
static inline acc times_pow2(acc v, int e, acc f) { return f != 0 ? v * f : ldexp(v, e); }

static void fill_nan(real *p, int64_t len) {
  for (int64_t k = 0; k < len * W; ++k) p[k] = NAN;
}

/* LAPACK's Householder QR, Qᴴ and triangular solve (the LAPACK torch.linalg calls, from the
   process's own library: mpslinalg/lstsq.py finds them), Fortran calling convention */
typedef void (*geqrf_fn)(const int *, const int *, real *, const int *, real *, real *, const int *, int *);
typedef void (*ormqr_fn)(const char *, const char *, const int *, const int *, const int *, const real *,
                         const int *, const real *, real *, const int *, real *, const int *, int *);
typedef void (*trsm_fn)(const char *, const char *, const char *, const char *, const int *, const int *,
                        const real *, const real *, const int *, real *, const int *);
typedef struct { geqrf_fn geqrf; ormqr_fn ormqr; trsm_fn trsm; } lapack_qr;

/* ‖R⁻¹‖_F² of the upper triangle of R (leading dimension m), four columns of R⁻¹ at a time:
   columns j0..j0+3 solve R[:j1, :j1] Z = I[:j1, j0:j1] (j1 = j0 + 4) by back substitution as
   axpys down R's columns, each column of R loaded once for the four (~n³/6 multiply-adds; the
   entries below a column's diagonal stay exactly 0). Non-finite for a zero pivot. z: 4n entries. */
static acc inv_frob2(const real *R, int64_t m, int64_t n, real *restrict z) {
  acc s = 0;
  for (int64_t j0 = 0; j0 < n; j0 += 4) {
    const int64_t j1 = j0 + 4 < n ? j0 + 4 : n, nb = j1 - j0;
    real *restrict z0 = z, *restrict z1 = z + n * W, *restrict z2 = z + 2 * n * W, *restrict z3 = z + 3 * n * W;
    memset(z, 0, sizeof(real) * W * (size_t)(4 * n));
    for (int64_t c = 0; c < nb; ++c) z[(c * n + j0 + c) * W] = 1;
    for (int64_t i = j1 - 1; i >= 0; --i) {
      const real *restrict ri = R + i * m * W; /* column i of R */
      real ar[4] = {0, 0, 0, 0}, ai[4] = {0, 0, 0, 0};
      for (int64_t c = 0; c < 4; ++c) { /* z_c[i] /= r_ii */
        real *zc = z + (c * n + i) * W;
        if (CPLX) {
          real dr = ri[i * W], di = ri[i * W + W - 1], d2 = dr * dr + di * di;
          ar[c] = (zc[0] * dr + zc[W - 1] * di) / d2;
          ai[c] = (zc[W - 1] * dr - zc[0] * di) / d2;
          zc[W - 1] = ai[c];
        } else {
          ar[c] = zc[0] / ri[i];
        }
        zc[0] = ar[c];
      }
      if (CPLX) {
#pragma omp simd
        for (int64_t l = 0; l < i; ++l) {
          real rr = ri[l * W], rim = ri[l * W + W - 1];
          z0[l * W] -= ar[0] * rr - ai[0] * rim, z0[l * W + W - 1] -= ar[0] * rim + ai[0] * rr;
          z1[l * W] -= ar[1] * rr - ai[1] * rim, z1[l * W + W - 1] -= ar[1] * rim + ai[1] * rr;
          z2[l * W] -= ar[2] * rr - ai[2] * rim, z2[l * W + W - 1] -= ar[2] * rim + ai[2] * rr;
          z3[l * W] -= ar[3] * rr - ai[3] * rim, z3[l * W + W - 1] -= ar[3] * rim + ai[3] * rr;
        }
      } else {
#pragma omp simd
        for (int64_t l = 0; l < i; ++l) {
          real r = ri[l];
          z0[l] -= ar[0] * r, z1[l] -= ar[1] * r, z2[l] -= ar[2] * r, z3[l] -= ar[3] * r;
        }
      }
    }
    for (int64_t c = 0; c < nb; ++c) s += ssq(z + c * n * W, j0 + c + 1);
  }
  return s;
}

/* A full-column-rank matrix (m >= n) by LAPACK's unpivoted QR, as xGELS (geqrf, Qᴴ c, R⁻¹ c: the
   same calls and bits), when 1/‖R⁻¹‖_F proves that every pivot of the column-pivoted QR passes the
   rank test (mpslinalg/lstsq.py, _QR_ROUTE_MARGIN, derives the bound). Wk and Cw are A and B
   scaled, column-major (leading dimension m); returns 1 with the solution in Cw[:n], else 0 with
   Wk overwritten and Cw unchanged. z: 4n, tau: n, work: lwork (real entries, W each). */
static int qr_route(const lapack_qr *L, real *Wk, real *Cw, real *z, real *tau, real *work, int lwork,
                    int64_t m, int64_t n, int64_t k, double rcond, double margin) {
  const int M = (int)m, N = (int)n, K = (int)k;
  const real one[2] = {1, 0};
  int info = 0;
  L->geqrf(&M, &N, Wk, &M, tau, work, &lwork, &info);
  if (info != 0) return 0;
  acc nr = 0;
  for (int64_t j = 0; j < n; ++j) nr += ssq(Wk + j * m * W, j + 1);
  if (!(margin * rcond * sqrt(nr) * sqrt(inv_frob2(Wk, m, n, z)) < 1)) return 0; /* NaN fails too */
  L->ormqr("L", CPLX ? "C" : "T", &M, &K, &N, Wk, &M, tau, Cw, &M, work, &lwork, &info);
  if (info != 0) return 0;
  L->trsm("L", "U", "N", "N", &N, &K, one, Wk, &M, Cw, &M);
  return 1;
}

/* The largest finite |x_i| into *mx; 0 if some x_i is not finite. In 32-byte vectors by bit
   masks (clang does not vectorise a float max reduction without fast-math: ~2 cycles an entry). */
static int finite_max(const real *restrict x, int64_t len, real *mx) {
  typedef real vreal __attribute__((vector_size(32)));
  typedef __typeof__((vreal){0} < (vreal){0}) vmask;
  enum { VL = 32 / sizeof(real) };
  const vmask sign = (vmask)(-(vreal){0}); /* -0.0: the sign bits */
  vreal m = {0};
  vmask bad = {0};
  int64_t i = 0;
  for (; i + VL <= len; i += VL) {
    vreal v;
    memcpy(&v, x + i, sizeof v);
    v = (vreal)((vmask)v & ~sign);
    vmask fin = v <= REAL_MAX; /* false for NaN and inf */
    vreal f = (vreal)((vmask)v & fin);
    bad |= ~fin;
    vmask gt = f > m;
    m = (vreal)(((vmask)f & gt) | ((vmask)m & ~gt));
  }
  real mm = 0;
  int ok = 1;
  for (int c = 0; c < VL; ++c) {
    mm = m[c] > mm ? m[c] : mm;
    ok &= bad[c] == 0;
  }
  for (; i < len; ++i) {
    real v = x[i] >= 0 ? x[i] : -x[i]; /* NaN stays NaN */
    int fine = v <= REAL_MAX;
    ok &= fine;
    mm = fine && v > mm ? v : mm;
  }
  *mx = mm;
  return ok;
}

/* the scaled column-major copy Wk of a (m x n, row-major), 8 rows at a time (their cache lines
   stay loaded while the columns are written) */
static void load_scaled(const real *a, real *Wk, int64_t m, int64_t n, int e, acc f) {
  for (int64_t i0 = 0; i0 < m; i0 += 8) {
    int64_t i1 = i0 + 8 < m ? i0 + 8 : m;
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = i0; i < i1; ++i)
        for (int c = 0; c < W; ++c) Wk[(j * m + i) * W + c] = (real)times_pow2(a[(i * n + j) * W + c], e, f);
  }
}

#define ALIGN64(bytes) (((bytes) + 63) & ~(size_t)63)

/* lstsq 'gelsy' (mpslinalg/lstsq.py, the algorithm of its torch-op version): Householder QR with
   column pivoting (largest remaining column norm, first on ties; the norms downdated as LAPACK's
   xLAQP2, recomputed where the downdate cancels, where the torch-op version recomputes them), the
   rank r = leading pivots with |r_jj| > rcond |r_00|, the minimum-norm solution of
   R[:r] y = (Qᴴ B)[:r] through the QR of R[:r]ᴴ = Q2 R2 (y = Q2 R2⁻ᴴ c; at full column rank r = n
   the one solution R⁻¹ c by back substitution), x = P y, on A and B scaled by powers of two; a
   non-finite A gives rank -1 and a NaN solution. With L (not NULL; m >= n) each matrix first tries
   qr_route: LAPACK's unpivoted QR where it provably gives rank n. Work buffers 64-byte aligned
   (LAPACK's bits must not depend on where a buffer lies). */
int lstsq_gelsy(const real *A, const real *B, real *X, int64_t *rank, int64_t m, int64_t n, int64_t k,
                double rcond, const lapack_qr *L, double margin, int64_t b0, int64_t b1) {
  int64_t K = m < n ? m : n;
  int lwork = 0;
  if (L) { /* work space queries: the larger of geqrf's and ormqr's */
    const int M = (int)m, N = (int)n, Kk = (int)k, query = -1;
    real opt[2] = {0, 0};
    int info = 0;
    L->geqrf(&M, &N, NULL, &M, NULL, opt, &query, &info);
    lwork = (int)opt[0];
    L->ormqr("L", CPLX ? "C" : "T", &M, &Kk, &N, NULL, &M, NULL, NULL, &M, opt, &query, &info);
    lwork = (int)opt[0] > lwork ? (int)opt[0] : lwork;
    const int floor_ = 64 * (N > Kk ? N : Kk); /* at least a block of 64: never the unblocked fallback */
    lwork = lwork > floor_ ? lwork : floor_;
  }
  const size_t sr = sizeof(real) * W;
  size_t o_c = ALIGN64(sr * (size_t)(m * n)), o_th = o_c + ALIGN64(sr * (size_t)(m * k)),
         o_y = o_th + ALIGN64(sr * (size_t)(n * (K > 4 ? K : 4))), o_tl = o_y + ALIGN64(sr * (size_t)(n * k)),
         o_wl = o_tl + ALIGN64(sr * (size_t)n), o_tau = o_wl + ALIGN64(sr * (size_t)(L ? lwork : 0));
  size_t bytes = ALIGN64(o_tau + sizeof(acc) * (size_t)(4 * K + 2 + 2 * n) + sizeof(int64_t) * (size_t)n);
  char *work = aligned_alloc(64, bytes);
  if (!work) return -1;
  real *Wk = (real *)work, *Cw = (real *)(work + o_c), *TH = (real *)(work + o_th), *Y = (real *)(work + o_y);
  real *taul = (real *)(work + o_tl), *workl = (real *)(work + o_wl);
  acc *tau = (acc *)(work + o_tau), *tau2 = tau + 2 * K + 2, *vn1 = tau2 + 2 * K, *vn2 = vn1 + n;
  int64_t *perm = (int64_t *)(vn2 + n);
  const acc tol3z = sqrt(sizeof(real) == 4 ? FLT_EPSILON : DBL_EPSILON);
  for (int64_t b = b0; b < b1; ++b) {
    const real *a = A + b * m * n * W, *bb = B + b * m * k * W;
    real *x = X + b * n * k * W;
    real amax, bmax;
    if (!finite_max(a, m * n * W, &amax)) {
      rank[b] = -1;
      fill_nan(x, n * k);
      continue;
    }
    finite_max(bb, m * k * W, &bmax); /* a non-finite b_ij stays one: NaN columns of x */
    /* A 2^-ea and B 2^-eb with max entries in [1/2, 1) (exact, as the torch-op version): squares
       of column norms cannot overflow; x = 2^(eb - ea) y */
    int ea = 0, eb = 0;
    if (amax > 0) frexp(amax, &ea);
    if (bmax > 0) frexp(bmax, &eb);
    const acc fa = pow2_factor(-ea), fb = pow2_factor(-eb), fx = pow2_factor(eb - ea);
    load_scaled(a, Wk, m, n, -ea, fa);
    load_scaled(bb, Cw, m, k, -eb, fb);
    if (L && qr_route(L, Wk, Cw, TH, taul, workl, lwork, m, n, k, rcond, margin)) {
      rank[b] = n;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < k; ++c)
          for (int w = 0; w < W; ++w) x[(i * k + c) * W + w] = (real)times_pow2(Cw[(c * m + i) * W + w], eb - ea, fx);
      continue;
    }
    if (L) load_scaled(a, Wk, m, n, -ea, fa); /* the route declined: start again from A */
    for (int64_t j = 0; j < n; ++j) perm[j] = j;
    for (int64_t c = 0; c < n; ++c) vn1[c] = vn2[c] = nrm2(Wk + c * m * W, m);
    for (int64_t j = 0; j < K; ++j) {
      int64_t best = j; /* the largest remaining column norm, first on ties */
      for (int64_t c = j + 1; c < n; ++c)
        if (vn1[c] > vn1[best]) best = c;
      if (best != j) {
        for (int64_t i = 0; i < m * W; ++i) {
          real t = Wk[j * m * W + i];
          Wk[j * m * W + i] = Wk[best * m * W + i];
          Wk[best * m * W + i] = t;
        }
        int64_t t = perm[j];
        perm[j] = perm[best];
        perm[best] = t;
        vn1[best] = vn1[j], vn2[best] = vn2[j];
      }
      real *v = Wk + (j * m + j) * W;
      house(v, m - j, tau + 2 * j);
      if (tau[2 * j] != 0 || tau[2 * j + 1] != 0) {
        reflect_cols(v, tau[2 * j], -tau[2 * j + 1], m - j, Wk + ((j + 1) * m + j) * W, m * W, n - j - 1);
        reflect_cols(v, tau[2 * j], -tau[2 * j + 1], m - j, Cw + j * W, m * W, k);
      }
      for (int64_t c = j + 1; c < n; ++c) { /* downdate the norms below row j (xLAQP2) */
        if (vn1[c] == 0) continue;
        const real *e = Wk + (c * m + j) * W;
        acc q = (CPLX ? hypot((acc)e[0], (acc)e[W - 1]) : fabs((acc)e[0])) / vn1[c];
        acc t1 = fmax(0.0, (1 - q) * (1 + q)), ratio = vn1[c] / vn2[c];
        if (t1 * ratio * ratio <= tol3z) /* cancellation: recompute */
          vn1[c] = vn2[c] = j + 1 < m ? nrm2(Wk + (c * m + j + 1) * W, m - j - 1) : 0;
        else
          vn1[c] *= sqrt(t1);
      }
    }
#define RABS(j) (CPLX ? hypot((acc)Wk[(j * m + j) * W], (acc)Wk[(j * m + j) * W + W - 1]) : fabs((acc)Wk[j * m + j]))
    acc d0 = RABS(0);
    int64_t r = 0;
    while (r < K && d0 > 0 && RABS(r) > rcond * d0) ++r;
#undef RABS
    rank[b] = r;
    memset(Y, 0, sizeof(real) * W * (size_t)(n * k));
    if (r == n) { /* full column rank: the one solution, R y = c[:n] by back substitution (no Q2) */
      for (int64_t c = 0; c < k; ++c)
        for (int64_t i = n - 1; i >= 0; --i) {
          acc zr = Cw[(c * m + i) * W], zi = CPLX ? Cw[(c * m + i) * W + 1] : 0;
          for (int64_t l = i + 1; l < n; ++l) {
            acc rr = Wk[(l * m + i) * W], ri = CPLX ? Wk[(l * m + i) * W + 1] : 0;
            acc yr = Y[(c * n + l) * W], yi = CPLX ? Y[(c * n + l) * W + 1] : 0;
            zr -= rr * yr - ri * yi;
            zi -= rr * yi + ri * yr;
          }
          acc dr = Wk[(i * m + i) * W], di = CPLX ? Wk[(i * m + i) * W + 1] : 0, d2 = dr * dr + di * di;
          Y[(c * n + i) * W] = (real)((zr * dr + zi * di) / d2);
          if (CPLX) Y[(c * n + i) * W + 1] = (real)((zi * dr - zr * di) / d2);
        }
    } else if (r > 0) {
      memset(TH, 0, sizeof(real) * W * (size_t)(n * r));
      for (int64_t j = 0; j < r; ++j) /* column j of R[:r]ᴴ is row j of R, conjugated */
        for (int64_t i = j; i < n; ++i) {
          TH[(j * n + i) * W] = Wk[(i * m + j) * W];
          if (CPLX) TH[(j * n + i) * W + 1] = -Wk[(i * m + j) * W + 1];
        }
      geqr2(TH, n, r, tau2);
      for (int64_t c = 0; c < k; ++c) /* R2ᴴ z = c[:r] by forward substitution; z in Y[:r] */
        for (int64_t i = 0; i < r; ++i) {
          acc zr = Cw[(c * m + i) * W], zi = CPLX ? Cw[(c * m + i) * W + 1] : 0;
          for (int64_t l = 0; l < i; ++l) { /* (R2ᴴ)_il = conj(R2_li) */
            acc rr = TH[(i * n + l) * W], ri = CPLX ? -TH[(i * n + l) * W + 1] : 0;
            acc yr = Y[(c * n + l) * W], yi = CPLX ? Y[(c * n + l) * W + 1] : 0;
            zr -= rr * yr - ri * yi;
            zi -= rr * yi + ri * yr;
          }
          acc dr = TH[(i * n + i) * W], di = CPLX ? -TH[(i * n + i) * W + 1] : 0, d2 = dr * dr + di * di;
          Y[(c * n + i) * W] = (real)((zr * dr + zi * di) / d2);
          if (CPLX) Y[(c * n + i) * W + 1] = (real)((zi * dr - zr * di) / d2);
        }
      apply_q(TH, tau2, n, r, Y, k);
    }
    for (int64_t i = 0; i < n; ++i) /* x = P y */
      for (int64_t c = 0; c < k; ++c)
        for (int w = 0; w < W; ++w)
          x[(perm[i] * k + c) * W + w] = (real)times_pow2(Y[(c * n + i) * W + w], eb - ea, fx);
  }
  free(work);
  return 0;
}

/* The work space of one matrix */
typedef struct {
  real *Wk, *X, *Vj, *M;
  acc *tau, *nrm, *key;
  int64_t *rperm, *cperm, *col;
  int e; /* the input's scaling 2^-e */
} slot;

/* Step 3's start for slot w, after its QR: X = Rᴴ (lower triangular, column-major: column j of X
   is row j of R, conjugated; planar columns for pdot) and V = I */
static void factor_x(slot *w, int64_t m, int64_t n, int64_t want_uv) {
  real *X = w->X, *Wk = w->Wk;
  memset(X, 0, sizeof(real) * W * (size_t)(n * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = j; i < n; ++i) {
      X[j * n * W + i] = Wk[(i * m + j) * W];
      if (CPLX) X[j * n * W + n + i] = -Wk[(i * m + j) * W + 1];
    }
  if (want_uv) {
    memset(w->Vj, 0, sizeof(real) * W * (size_t)(n * n));
    for (int64_t j = 0; j < n; ++j) w->Vj[j * n * W + j] = 1;
  }
}

/* Steps 1-3 for matrix b: scaled, sorted, and (qr) its QR, X = Rᴴ and V = I in slot w (without qr
   the caller factors the group in lanes). Returns 0 (and writes the NaN outputs, info 1) for a
   non-finite matrix, else 1. */
static int prepare(const real *a, slot *w, int64_t m, int64_t n, int64_t ucols, int64_t want_uv, int qr,
                   real *s_out, real *u_out, real *v_out, int32_t *info_b) {
  /* 1. scale: max |a_ij| into [1/2, 1) by a power of two; non-finite input -> NaN, info 1 */
  acc amax = 0;
  int finite = 1;
  for (int64_t k = 0; k < m * n; ++k) {
    acc v = CPLX ? hypot((acc)a[W * k], (acc)a[W * k + W - 1]) : fabs((acc)a[W * k]);
    if (!(v <= REAL_MAX)) finite = 0;
    amax = fmax(amax, v);
  }
  if (!finite) {
    *info_b = 1;
    for (int64_t j = 0; j < n; ++j) s_out[j] = NAN;
    if (want_uv) {
      fill_nan(u_out, m * ucols);
      fill_nan(v_out, n * n);
    }
    return 0;
  }
  int e = 0;
  if (amax > 0) frexp(amax, &e);
  w->e = e;
  const acc fe = pow2_factor(-e);
  acc *key = w->key;
#define SCALED(v) times_pow2((v), -e, fe)
  /* 2. rows by decreasing max-norm, columns by decreasing 2-norm (stable) */
  for (int64_t i = 0; i < m; ++i) {
    acc r = 0;
    for (int64_t j = 0; j < n; ++j)
      r = fmax(r, CPLX ? hypot((acc)a[(i * n + j) * W], (acc)a[(i * n + j) * W + W - 1])
                       : fabs((acc)a[i * n + j]));
    key[i] = r;
  }
  order_desc(key, w->rperm, m);
  for (int64_t j = 0; j < n; ++j) {
    acc s2 = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int c = 0; c < W; ++c) {
        acc v = SCALED(a[(i * n + j) * W + c]);
        s2 += v * v;
      }
    key[j] = s2;
  }
  order_desc(key, w->cperm, n);
  real *Wk = w->Wk;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i)
      for (int c = 0; c < W; ++c)
        Wk[(j * m + i) * W + c] = (real)SCALED(a[(w->rperm[i] * n + w->cperm[j]) * W + c]);
#undef SCALED
  if (qr) {
    geqr2(Wk, m, n, w->tau);
    factor_x(w, m, n, want_uv);
  }
  return 1;
}

/* Step 5 for the matrix in slot w: sigma, sorted (key, and the order in w->col); with want_uv,
   M = [Vj 0; 0 I] in that order, for U = Prᵀ Q M */
static void finish_sigma(slot *w, int64_t m, int64_t n, int64_t ucols, int64_t want_uv, real *s_out) {
  acc *key = w->key;
  real *X = w->X, *M = w->M;
  for (int64_t j = 0; j < n; ++j) key[j] = nrm2(X + j * n * W, n);
  int64_t *srt = w->col; /* the Jacobi's column order is no longer needed */
  order_desc(key, srt, n);
  for (int64_t j = 0; j < n; ++j) s_out[j] = (real)ldexp(key[srt[j]], w->e);
  if (!want_uv) return;
  memset(M, 0, sizeof(real) * W * (size_t)(m * ucols));
  for (int64_t j = 0; j < n; ++j) {
    const real *src = w->Vj + srt[j] * n * W;
    for (int64_t i = 0; i < n; ++i)
      for (int c = 0; c < W; ++c) M[(j * m + i) * W + c] = src[c * n + i];
  }
  for (int64_t j = n; j < ucols; ++j) M[(j * m + j) * W] = 1;
}

/* The rest of step 5: U = Prᵀ Q M (Q applied here unless q_done: the group did it in lanes),
   V = Pc W Σ⁻¹ */
static void finish_vectors(slot *w, int64_t m, int64_t n, int64_t ucols, int q_done, real *u_out,
                           real *v_out) {
  acc *key = w->key;
  real *X = w->X, *M = w->M;
  int64_t *srt = w->col;
  if (!q_done) apply_q(w->Wk, w->tau, m, n, M, ucols);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ucols; ++j)
      for (int c = 0; c < W; ++c) u_out[(w->rperm[i] * ucols + j) * W + c] = M[(j * m + i) * W + c];
  for (int64_t j = 0; j < n; ++j) {
    acc sg = key[srt[j]];
    const real *x = X + srt[j] * n * W;
    for (int64_t i = 0; i < n; ++i)
      for (int c = 0; c < W; ++c)
        v_out[(w->cperm[i] * n + j) * W + c] = sg > 0 ? (real)((acc)x[c * n + i] / sg) : 0;
  }
}

/* for (g over the group's finite matrices) */
#define EACH_FINITE(g) for (int g = 0; g < G && b + g < b1; ++g) if (finite[g])

int svd_jacobi(const real *A, real *U, real *S, real *V, int32_t *info, int64_t m, int64_t n,
               int64_t ucols, int64_t want_uv, int64_t max_sweeps, double tol, double ctol, int64_t lanes,
               int64_t b0, int64_t b1) {
  const int G = lanes ? LANES : 1; /* matrices a group: the lanes of jacobi_lanes, or one */
  size_t reals = (size_t)W * (size_t)(m * n + 2 * n * n + m * ucols), accs = (size_t)(3 * n + 2 * m),
         ints = (size_t)(2 * n + m);
  /* lanes: X and V (n x n), the QR's Wk (m x n) and U's M (m x ucols), 2 n taus, n norms */
  size_t xl = (size_t)(W * n * n * LANES), wl = (size_t)(W * m * n * LANES), ml = (size_t)(W * m * ucols * LANES);
  size_t lreals = lanes ? 2 * xl + wl + ml : 0, laccs = lanes ? (size_t)(3 * n * LANES) : 0;
  reals += reals & 1; /* the accumulators after the reals stay 8-byte aligned */
  lreals += lreals & 1;
  char *work = malloc(G * (sizeof(real) * reals + sizeof(acc) * accs + sizeof(int64_t) * ints) +
                      sizeof(real) * lreals + sizeof(acc) * laccs);
  if (!work) return -1;
  slot w[LMAX];
  acc *accs0 = (acc *)((real *)work + G * reals);
  int64_t *ints0 = (int64_t *)(accs0 + G * accs);
  real *XL = (real *)(ints0 + G * ints), *VL = XL + xl, *WkL = VL + xl, *ML = WkL + wl;
  acc *nrmL = (acc *)(XL + lreals), *tauL = nrmL + n * LANES;
  for (int g = 0; g < G; ++g) {
    real *r = (real *)work + g * reals;
    acc *d = accs0 + g * accs;
    int64_t *k = ints0 + g * ints;
    w[g] = (slot){r, r + m * n * W, r + m * n * W + n * n * W, r + m * n * W + 2 * n * n * W,
                  d, d + 2 * n, d + 3 * n /* key: max(m, n) */, k, k + m, k + m + n, 0};
  }
#define OUTS(b) S + (b) * n, want_uv ? U + (b) * m * ucols * W : NULL, want_uv ? V + (b) * n * n * W : NULL
  for (int64_t b = b0; b < b1; b += G) {
    int live[LMAX] = {0}, sig[LMAX] = {0}, finite[LMAX] = {0};
    for (int g = 0; g < G && b + g < b1; ++g)
      finite[g] = live[g] = prepare(A + (b + g) * m * n * W, w + g, m, n, ucols, want_uv, !lanes, OUTS(b + g),
                                    info + b + g);
    if (!lanes) {
      if (live[0]) sig[0] = jacobi(w[0].X, want_uv ? w[0].Vj : NULL, n, max_sweeps, tol, ctol, w[0].nrm, w[0].col);
    } else {
      memset(WkL, 0, sizeof(real) * wl); /* the QR in lanes (unused and non-finite lanes: zero) */
      EACH_FINITE(g) for (int64_t k = 0; k < m * n * W; ++k) WkL[k * LANES + g] = w[g].Wk[k];
      lane_geqr2(WkL, m, n, tauL);
      EACH_FINITE(g) {
        for (int64_t k = 0; k < m * n * W; ++k) w[g].Wk[k] = WkL[k * LANES + g];
        factor_x(w + g, m, n, 0);
      }
      memset(XL, 0, sizeof(real) * xl); /* the Jacobi in lanes: X, and V = I */
      EACH_FINITE(g) for (int64_t k = 0; k < n * n * W; ++k) XL[k * LANES + g] = w[g].X[k];
      if (want_uv) { /* entry (j, j), real part, of column j */
        memset(VL, 0, sizeof(real) * xl);
        for (int64_t j = 0; j < n; ++j)
          for (int g = 0; g < G; ++g) VL[((j * W) * n + j) * LANES + g] = 1;
      }
      jacobi_lanes(XL, want_uv ? VL : NULL, n, max_sweeps, tol, ctol, live, sig, nrmL);
      EACH_FINITE(g) for (int64_t k = 0; k < n * n * W; ++k) {
        w[g].X[k] = XL[k * LANES + g];
        if (want_uv) w[g].Vj[k] = VL[k * LANES + g];
      }
    }
    EACH_FINITE(g) {
      info[b + g] = sig[g] ? 2 : 0;
      finish_sigma(w + g, m, n, ucols, want_uv, S + (b + g) * n);
    }
    if (!want_uv) continue;
    if (lanes) { /* U's reflector product in lanes */
      memset(ML, 0, sizeof(real) * ml);
      EACH_FINITE(g) for (int64_t k = 0; k < m * ucols * W; ++k) ML[k * LANES + g] = w[g].M[k];
      lane_apply_q(WkL, tauL, m, n, ML, ucols);
      EACH_FINITE(g) for (int64_t k = 0; k < m * ucols * W; ++k) w[g].M[k] = ML[k * LANES + g];
    }
    EACH_FINITE(g) finish_vectors(w + g, m, n, ucols, lanes != 0, U + (b + g) * m * ucols * W, V + (b + g) * n * n * W);
  }
#undef OUTS
#undef EACH_FINITE
  free(work);
  return 0;
}
"""

SVD_C_SOURCE = _HEAD + LANES_C_SOURCE + _TAIL
