"""lstsq's ``gelsy`` driver on the CPU, C text (part of
:data:`mpslinalg.svd.c_source.SVD_C_SOURCE`, between its shared helpers and its SVD driver;
:mod:`mpslinalg.svd.c` builds it and calls ``lstsq_gelsy`` for :func:`mpslinalg.lstsq`).

Column-pivoted Householder QR with LAPACK's rank test and the minimum-norm solution through the QR
of ``R[:r]ᴴ`` (the algorithm of lstsq's torch-op version), and ``qr_route``: a tall matrix that
``1/‖R⁻¹‖_F`` proves to be of full column rank by LAPACK's unpivoted QR, as ``xGELS``
(``mpslinalg/lstsq.py``, ``_QR_ROUTE_MARGIN``, derives the bound). It uses the Householder helpers
(``ssq``, ``apply_q``, ...) of the text before it.
"""

__all__ = ["GELSY_C_SOURCE"]

GELSY_C_SOURCE = r"""
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
"""
