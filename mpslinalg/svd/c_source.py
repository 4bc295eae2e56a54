"""The C source of the SVD family's CPU kernel (:mod:`mpslinalg.svd.c` builds it, once per
dtype, and documents the algorithm, the SIMD lanes and the kernel contract).

Apart from the Python module so that each stays readable: the preconditioned one-sided Jacobi
(``svd_jacobi``: the one-matrix kernel ``jacobi``) and the Householder steps it shares with
``lstsq_gelsy``. Two parts are other modules' text, placed between this one's: the lane kernels
(``jacobi_lanes`` and the group's Householder QR, :mod:`mpslinalg.svd.c_lanes_source`) after the
helpers, and ``lstsq_gelsy`` (:mod:`mpslinalg.svd.c_gelsy_source`) before the SVD driver.
``REAL``, ``CPLX`` and ``REAL_MAX`` are defined by the builder before this text.
"""

from .c_gelsy_source import GELSY_C_SOURCE
from .c_lanes_source import LANES_C_SOURCE

__all__ = ["SVD_C_SOURCE"]

_HEAD = r"""

/* The SVD family's one-sided Jacobi (mpslinalg/svd/c.py): do not edit the cached copy. */
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

_SHARED_HELPERS = r"""
/* v 2^e as one product where 2^e is a normal double (f = pow2_factor(e)), else by ldexp */
static inline acc pow2_factor(int e) { return e > -1000 && e < 1000 ? ldexp(1.0, e) : 0; }
static inline acc times_pow2(acc v, int e, acc f) { return f != 0 ? v * f : ldexp(v, e); }

static void fill_nan(real *p, int64_t len) {
  for (int64_t k = 0; k < len * W; ++k) p[k] = NAN;
}
"""

_SVD_DRIVER = r"""
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

/* svd_jacobi_one: svd_jacobi of one matrix (mpslinalg.svd.c.svd_one) with its status as the return
   value: -1 no work space, 0 done, 1 non-finite, 2 not converged, 3 (want_uv) σ_n <= cut·σ_1, a
   column of V for the caller to complete (algorithm.complete's test, in double; NaN: also 3). */
int svd_jacobi_one(const real *A, real *U, real *S, real *V, int64_t m, int64_t n, int64_t ucols,
                   int64_t want_uv, int64_t max_sweeps, double tol, double ctol, double cut) {
  int32_t info = 0;
  int status = svd_jacobi(A, U, S, V, &info, m, n, ucols, want_uv, max_sweeps, tol, ctol, 0, 0, 1);
  if (status || info) return status ? status : info;
  return want_uv && !((acc)S[n - 1] > cut * (acc)S[0]) ? 3 : 0;
}

/* pinv_jacobi: P = A⁺ (n x m) of one contiguous m x n matrix A (mpslinalg.svd.c.pinv_one). The
   tall X = A (m >= n) or X = Aᴴ (copied here) is svd_jacobi's, X = U Σ Vᴴ, X⁺ = V Σ⁺ Uᴴ keeping
   σ_k > rtol·σ_0 (compared in double, as torch.linalg.pinv), summed in acc, and A⁺ = X⁺ or (X⁺)ᴴ.
   The columns of V that svd's caller completes (σ_k <= √tiny·σ_0) are always below the cut. info
   is svd_jacobi's: 1 (non-finite A) leaves P NaN, 2 (no convergence) leaves P unwritten. Returns
   0, or -1 when the work space cannot be allocated. */
int pinv_jacobi(const real *A, real *P, int32_t *info, int64_t m, int64_t n, int64_t max_sweeps, double tol,
                double ctol, double rtol) {
  const int wide = m < n;
  const int64_t mt = wide ? n : m, nt = wide ? m : n;
  acc *r = malloc(sizeof(acc) * (size_t)nt); /* 1/σ_k of the kept k */
  real *U = malloc(sizeof(real) * (size_t)(W * (mt * nt + nt * nt + (wide ? mt * nt : 0)) + nt));
  if (!r || !U) {
    free(r);
    free(U);
    return -1;
  }
  real *V = U + mt * nt * W, *X = V + nt * nt * W, *S = X + (wide ? mt * nt * W : 0);
  if (wide) /* X = Aᴴ: X[i, j] = conj(A[j, i]) */
    for (int64_t i = 0; i < mt; ++i)
      for (int64_t j = 0; j < nt; ++j) {
        X[(i * nt + j) * W] = A[(j * n + i) * W];
#if CPLX
        X[(i * nt + j) * W + 1] = -A[(j * n + i) * W + 1];
#endif
      }
  int status = svd_jacobi(wide ? X : A, U, S, V, info, mt, nt, nt, 1, max_sweeps, tol, ctol, 0, 0, 1);
  if (!status && *info == 1) fill_nan(P, m * n);
  if (!status && *info == 0) {
    int64_t keep = 0;
    while (keep < nt && (acc)S[keep] > rtol * (acc)S[0]) r[keep] = 1 / (acc)S[keep], ++keep;
    /* row i of P: not wide, sum_k V[i, k] r_k conj(U[j, k]); wide, sum_k U[i, k] r_k conj(V[j, k])
       (both factors have nt columns) */
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        const real *x = (wide ? U : V) + i * nt * W, *y = (wide ? V : U) + j * nt * W;
        acc re = 0, im = 0;
        for (int64_t k = 0; k < keep; ++k) {
#if CPLX
          re += r[k] * ((acc)x[2 * k] * y[2 * k] + (acc)x[2 * k + 1] * y[2 * k + 1]);
          im += r[k] * ((acc)x[2 * k + 1] * y[2 * k] - (acc)x[2 * k] * y[2 * k + 1]);
#else
          re += r[k] * ((acc)x[k] * y[k]);
#endif
        }
        P[(i * m + j) * W] = (real)re;
#if CPLX
        P[(i * m + j) * W + 1] = (real)im;
#endif
        (void)im;
      }
  }
  free(r);
  free(U);
  return status;
}
"""

# the lstsq text sits between the shared helpers and the SVD driver, as it did in one file (the C
# text, and so the compiled library, is unchanged by the split)
SVD_C_SOURCE = _HEAD + LANES_C_SOURCE + _SHARED_HELPERS + GELSY_C_SOURCE + _SVD_DRIVER
