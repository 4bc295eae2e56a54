"""The lane kernels of the SVD family's CPU kernel, C text (part of
:data:`mpslinalg.svd.c_source.SVD_C_SOURCE`, between its helpers and its driver; the
algorithm and why lanes: :mod:`mpslinalg.svd.c`).

A batch's matrices run 8 (float32/complex64) or 4 (float64/complex128) at a time, one per SIMD
lane of clang/gcc vector types: ``jacobi_lanes`` (the one-sided Jacobi) and ``lane_geqr2`` /
``lane_apply_q`` (the preconditioning QR and ``U``'s reflector product).
"""

__all__ = ["LANES_C_SOURCE"]

LANES_C_SOURCE = r"""
/* The same one-sided Jacobi on LANES matrices at once, one per SIMD lane (a batch's matrices are
   independent, so every operation is one vector operation over the group: no horizontal sums and
   no chain of dependent divisions and square roots per pair, the cost of the one-matrix kernel
   above). Cyclic by rows, with de Rijk's pivoting from DE_RIJK_LANES by swapping columns inside
   a lane; a lane leaves (no more rotations) after its first sweep without a significant rotation,
   so each matrix's operations do not depend on the others of its group. Storage: column j of
   lane l at XL[((j W + part) n + i) LANES + l] (complex planar), VL the same. sig[l] as jacobi's
   return; live[l] = 0 marks an unused lane. */
#define LANES (sizeof(real) == 4 ? 8 : 4)
#define LMAX 8
/* de Rijk's pivoting in the lanes from this order: a physical column swap in the lane (X and V),
   about one sweep fewer at n = 32 and 1.5 at n = 64 (7-15% faster); at 8x9 the swaps cost more
   than the sweep they save (3.8 against 3.5 us a matrix) */
#define DE_RIJK_LANES 16
#define ALIGNED __attribute__((aligned(64))) /* lane arrays stored as vectors */

/* ||column x of lane l|| (stride LANES), safe from underflow as nrm2 */
static acc lane_nrm2(const real *x, int64_t n, int l) {
  acc s = 0, mx = 0;
  for (int64_t k = 0; k < n * W; ++k) s += (acc)x[k * LANES + l] * (acc)x[k * LANES + l];
  if (s >= 0x1p-900) return sqrt(s);
  for (int64_t k = 0; k < n * W; ++k) mx = fmax(mx, fabs((acc)x[k * LANES + l]));
  if (mx == 0) return 0;
  int e;
  frexp(mx, &e);
  s = 0;
  for (int64_t k = 0; k < n * W; ++k) {
    acc v = ldexp((acc)x[k * LANES + l], -e);
    s += v * v;
  }
  return ldexp(sqrt(s), e);
}

/* One entry of every lane, and its accumulator (vector extensions of clang and gcc: one SIMD
   operation a line whatever the compiler's loop vectoriser decides; unaligned loads allowed) */
typedef real vreal __attribute__((vector_size(sizeof(real) * LANES), aligned(sizeof(real))));
typedef acc vacc __attribute__((vector_size(sizeof(acc) * LANES), aligned(sizeof(acc))));
#define VLOAD(p) (*(const vreal *)(p))
#define WIDE(v) __builtin_convertvector((v), vacc)

/* (gr, gi)[l] = x_pᴴ x_q of lane l, accumulated in acc; two partial sums (even and odd rows) */
static inline void lane_dot(const real *xp, const real *xq, int64_t n, acc *gr, acc *gi) {
  vacc r0 = {0}, r1 = {0}, i0 = {0}, i1 = {0};
  const int64_t im = CPLX ? n * LANES : 0; /* the imaginary parts (planar) */
  int64_t i = 0;
  for (; i + 1 < n; i += 2) {
    const real *x = xp + i * LANES, *y = xq + i * LANES;
    vacc x0 = WIDE(VLOAD(x)), y0 = WIDE(VLOAD(y)), x1 = WIDE(VLOAD(x + LANES)), y1 = WIDE(VLOAD(y + LANES));
    r0 += x0 * y0;
    r1 += x1 * y1;
    if (CPLX) {
      vacc a0 = WIDE(VLOAD(x + im)), b0 = WIDE(VLOAD(y + im)), a1 = WIDE(VLOAD(x + im + LANES)),
           b1 = WIDE(VLOAD(y + im + LANES));
      r0 += a0 * b0;
      r1 += a1 * b1;
      i0 += x0 * b0 - a0 * y0;
      i1 += x1 * b1 - a1 * y1;
    }
  }
  if (i < n) {
    const real *x = xp + i * LANES, *y = xq + i * LANES;
    vacc x0 = WIDE(VLOAD(x)), y0 = WIDE(VLOAD(y));
    r0 += x0 * y0;
    if (CPLX) {
      vacc a0 = WIDE(VLOAD(x + im)), b0 = WIDE(VLOAD(y + im));
      r0 += a0 * b0;
      i0 += x0 * b0 - a0 * y0;
    }
  }
  *(vacc *)gr = r0 + r1;
  *(vacc *)gi = i0 + i1;
}

/* x' = c x - conj(se) y, y' = se x + c y on lane-interleaved planar columns (prot per lane) */
static inline void lane_rot(real *x, real *y, int64_t n, const real *c_, const real *sr_, const real *si_) {
  const vreal c = VLOAD(c_), sr = VLOAD(sr_), si = VLOAD(si_);
  const int64_t im = CPLX ? n * LANES : 0;
  for (int64_t i = 0; i < n * LANES; i += LANES) {
    vreal xr = VLOAD(x + i), yr = VLOAD(y + i);
#if CPLX
    vreal xi = VLOAD(x + im + i), yi = VLOAD(y + im + i);
    *(vreal *)(x + i) = c * xr - (sr * yr + si * yi);
    *(vreal *)(x + im + i) = c * xi - (sr * yi - si * yr);
    *(vreal *)(y + i) = (sr * xr - si * xi) + c * yr;
    *(vreal *)(y + im + i) = (sr * xi + si * xr) + c * yi;
#else
    (void)si;
    *(vreal *)(x + i) = c * xr - sr * yr;
    *(vreal *)(y + i) = sr * xr + c * yr;
#endif
  }
}

static void jacobi_lanes(real *XL, real *VL, int64_t n, int64_t max_sweeps, acc tol, acc ctol,
                         int *live, int *sig, acc *nrm) {
  const int64_t cs = n * W * LANES; /* a column of all lanes */
  for (int l = 0; l < LANES; ++l) sig[l] = 0;
  for (int64_t sweep = 0; sweep < max_sweeps; ++sweep) {
    int any = 0;
    for (int l = 0; l < LANES; ++l) any |= live[l];
    if (!any) break;
    for (int l = 0; l < LANES; ++l) sig[l] = 0;
    for (int64_t j = 0; j < n; ++j) { /* exact norms at the start of every sweep */
      const real *x = XL + j * cs;
      vacc v2 = {0};
      for (int64_t k = 0; k < n * W; ++k) {
        vacc v = WIDE(VLOAD(x + k * LANES));
        v2 += v * v;
      }
      acc s2[LMAX] ALIGNED;
      *(vacc *)s2 = v2;
      for (int l = 0; l < LANES; ++l) nrm[j * LANES + l] = s2[l] >= 0x1p-900 ? sqrt(s2[l]) : lane_nrm2(x, n, l);
    }
    for (int64_t p = 0; p < n - 1; ++p) {
      real *xp = XL + p * cs;
      for (int l = 0; l < LANES && n >= DE_RIJK_LANES; ++l) { /* de Rijk: each lane's largest
                                                              remaining column moves to p */
        int64_t best = p;
        for (int64_t j = p + 1; j < n; ++j)
          if (nrm[j * LANES + l] > nrm[best * LANES + l]) best = j;
        if (best == p) continue;
        acc tn = nrm[p * LANES + l];
        nrm[p * LANES + l] = nrm[best * LANES + l];
        nrm[best * LANES + l] = tn;
        for (int mtx = 0; mtx < (VL ? 2 : 1); ++mtx) { /* the columns of X and V, of lane l only */
          real *x = (mtx ? VL : XL) + p * cs + l, *y = (mtx ? VL : XL) + best * cs + l;
          for (int64_t k = 0; k < n * W; ++k) {
            real tk = x[k * LANES];
            x[k * LANES] = y[k * LANES];
            y[k * LANES] = tk;
          }
        }
      }
      for (int64_t q = p + 1; q < n; ++q) {
        real *xq = XL + q * cs;
        acc gr[LMAX] ALIGNED, gi[LMAX] ALIGNED;
        lane_dot(xp, xq, n, gr, gi);
        acc a[LMAX], b[LMAX], up[LMAX], uq[LMAX];
#pragma omp simd
        for (int l = 0; l < LANES; ++l) a[l] = nrm[p * LANES + l], b[l] = nrm[q * LANES + l], up[l] = 1, uq[l] = 1;
        if (TINY_NRM > 0) /* float64 columns below 2^-450: the dot product of scaled columns */
          for (int l = 0; l < LANES; ++l) {
            if (!(a[l] < TINY_NRM || b[l] < TINY_NRM) || a[l] == 0 || b[l] == 0) continue;
            int ep, eq; /* one scale for both columns, as jacobi */
            frexp(a[l], &ep);
            frexp(b[l], &eq);
            up[l] = uq[l] = ldexp(1.0, ep > eq ? ep : eq);
            a[l] /= up[l], b[l] /= uq[l];
            acc sr = 0, si = 0;
            for (int64_t i = 0; i < n; ++i) {
              acc xr = xp[i * LANES + l] / up[l], yr = xq[i * LANES + l] / uq[l], xi = 0, yi = 0;
              if (CPLX) xi = xp[(n + i) * LANES + l] / up[l], yi = xq[(n + i) * LANES + l] / uq[l];
              sr += xr * yr + xi * yi;
              si += xr * yi - xi * yr;
            }
            gr[l] = sr, gi[l] = CPLX ? si : 0;
          }
        /* the rotations (see jacobi for the formulas), branch-free over the lanes */
        real c[LMAX] ALIGNED, sr[LMAX] ALIGNED, si[LMAX] ALIGNED;
        acc np[LMAX], nq[LMAX];
        int rot[LMAX], nrot = 0;
#pragma omp simd reduction(+:nrot)
        for (int l = 0; l < LANES; ++l) {
          acc ag = CPLX ? sqrt(gr[l] * gr[l] + gi[l] * gi[l]) : fabs(gr[l]), ab = a[l] * b[l];
          int on = live[l] && ab > 0;
          sig[l] |= on && ag > ctol * ab;
          rot[l] = on && ag > tol * ab;
          nrot += rot[l];
          acc D = (b[l] - a[l]) * (b[l] + a[l]), E = 2 * ag, aD = fabs(D);
          acc f = (aD > 0x1p-450 || E > 0x1p-450) ? 1.0 : 0x1p600; /* (D, E) 2^600: squares */
          acc r = sqrt((aD * f) * (aD * f) + (E * f) * (E * f)) / f;
          r = rot[l] ? r : 1;
          acc t = (D >= 0 ? E : -E) / (aD + r);
          acc cl = sqrt(0.5 + 0.5 * (aD / r)), sn = cl * t, agi = rot[l] ? ag : 1;
#if CPLX
          acc srl = sn * (gr[l] / agi), sil = sn * (gi[l] / agi);
#else
          acc srl = gr[l] >= 0 ? sn : -sn, sil = 0;
          (void)agi;
#endif
          c[l] = rot[l] ? (real)cl : 1;
          sr[l] = rot[l] ? (real)srl : 0;
          si[l] = rot[l] ? (real)sil : 0;
          acc p2 = a[l] * a[l] - t * ag, q2 = b[l] * b[l] + t * ag;
          acc sp = sqrt(fmax(p2, 0.0)) * up[l], sq = sqrt(fmax(q2, 0.0)) * uq[l];
          np[l] = p2 > 0.25 * a[l] * a[l] ? sp : -1; /* -1: the update cancels, recompute */
          nq[l] = q2 > 0.25 * b[l] * b[l] ? sq : -1;
        }
        if (!nrot) continue;
        lane_rot(xp, xq, n, c, sr, si);
        if (VL) lane_rot(VL + p * cs, VL + q * cs, n, c, sr, si);
        for (int l = 0; l < LANES; ++l) {
          if (!rot[l]) continue;
          nrm[p * LANES + l] = np[l] >= 0 ? np[l] : lane_nrm2(xp, n, l);
          nrm[q * LANES + l] = nq[l] >= 0 ? nq[l] : lane_nrm2(xq, n, l);
        }
      }
    }
    for (int l = 0; l < LANES; ++l) live[l] &= sig[l];
  }
}

/* Householder QR of the group in lanes (the layout of jacobi_lanes for the m x n matrices: entry
   (i, j), part c, of lane l at [((j m + i) W + c) LANES + l]): house, reflect, geqr2 and apply_q
   with every O(m) loop one vector operation over the lanes (per lane the same formulas; the dot
   products summed in row order). A zero lane (unused, or a non-finite matrix) stays zero. */
static void lane_house(real *x, int64_t len, acc *taur, acc *taui) {
  const int64_t s = W * LANES; /* one entry of every lane */
  vacc q = {0};
  for (int64_t k = 1; k < len; ++k) {
    vacc a = WIDE(VLOAD(x + k * s));
    q += a * a;
    if (CPLX) {
      vacc b = WIDE(VLOAD(x + k * s + LANES));
      q += b * b;
    }
  }
  acc q2[LMAX] ALIGNED, dn[LMAX] ALIGNED, dr[LMAX] ALIGNED, di[LMAX] ALIGNED, d2[LMAX] ALIGNED, beta[LMAX];
  *(vacc *)q2 = q;
  for (int l = 0; l < LANES; ++l) { /* house's scalars, lane by lane */
    acc ar = x[l], ai = CPLX ? x[LANES + l] : 0;
    acc xn = q2[l] >= 0x1p-900 ? sqrt(q2[l]) : lane_nrm2(x + s, len - 1, l);
    taur[l] = taui[l] = 0, dn[l] = dr[l] = d2[l] = 1, di[l] = 0, beta[l] = NAN;
    if (xn == 0 && ai == 0) continue; /* H = I: v = x / 1 (unchanged), x_0 kept */
    acc b = -copysign(hypot(hypot(ar, ai), xn), ar);
    taur[l] = (b - ar) / b;
    taui[l] = -ai / b;
    acc r = ar - b, i = ai, d = fmax(fabs(r), fabs(i));
    dn[l] = d, dr[l] = r / d, di[l] = i / d, d2[l] = dr[l] * dr[l] + di[l] * di[l], beta[l] = b;
  }
  const vacc DN = *(vacc *)dn, DR = *(vacc *)dr, DI = *(vacc *)di, D2 = *(vacc *)d2;
  for (int64_t k = 1; k < len; ++k) { /* v = x / (alpha - beta) */
    real *e = x + k * s;
#if CPLX
    vacc xr = WIDE(VLOAD(e)) / DN, xi = WIDE(VLOAD(e + LANES)) / DN;
    *(vreal *)e = __builtin_convertvector((xr * DR + xi * DI) / D2, vreal);
    *(vreal *)(e + LANES) = __builtin_convertvector((xi * DR - xr * DI) / D2, vreal);
#else
    (void)DI, (void)D2;
    *(vreal *)e = __builtin_convertvector((WIDE(VLOAD(e)) / DN) / DR, vreal);
#endif
  }
  for (int l = 0; l < LANES; ++l) {
    if (isnan(beta[l])) continue;
    x[l] = (real)beta[l];
    if (CPLX) x[LANES + l] = 0;
  }
}

/* a <- (I - t v vᴴ) a in every lane, t = (tr, ti)[l] (reflect's conventions) */
static void lane_reflect(const real *v, const acc *tr, const acc *ti, int64_t len, real *a) {
  const int64_t s = W * LANES;
  vacc wr = WIDE(VLOAD(a)), wi = {0};
  if (CPLX) wi = WIDE(VLOAD(a + LANES));
  for (int64_t k = 1; k < len; ++k) {
    vacc vr = WIDE(VLOAD(v + k * s)), ar = WIDE(VLOAD(a + k * s));
    wr += vr * ar;
    if (CPLX) {
      vacc vi = WIDE(VLOAD(v + k * s + LANES)), ai = WIDE(VLOAD(a + k * s + LANES));
      wr += vi * ai;
      wi += vr * ai - vi * ar;
    }
  }
  const vacc TR = *(const vacc *)tr, TI = *(const vacc *)ti;
  const vreal fr = __builtin_convertvector(TR * wr - TI * wi, vreal);
  const vreal fi = __builtin_convertvector(TR * wi + TI * wr, vreal);
  *(vreal *)a = VLOAD(a) - fr;
  if (CPLX) *(vreal *)(a + LANES) = VLOAD(a + LANES) - fi;
  for (int64_t k = 1; k < len; ++k) { /* in the storage type */
    real *e = a + k * s;
    vreal vr = VLOAD(v + k * s);
#if CPLX
    vreal vi = VLOAD(v + k * s + LANES);
    *(vreal *)e = VLOAD(e) - (fr * vr - fi * vi);
    *(vreal *)(e + LANES) = VLOAD(e + LANES) - (fr * vi + fi * vr);
#else
    *(vreal *)e = VLOAD(e) - fr * vr;
#endif
  }
}

/* geqr2 of the group; tau of column j at tauL[(2 j + part) LANES + l] */
static void lane_geqr2(real *WkL, int64_t m, int64_t n, acc *tauL) {
  for (int64_t j = 0; j < n; ++j) {
    real *x = WkL + (j * m + j) * W * LANES;
    acc *tr = tauL + 2 * j * LANES, *ti = tr + LANES, nti[LMAX] ALIGNED;
    lane_house(x, m - j, tr, ti);
    for (int l = 0; l < LANES; ++l) nti[l] = -ti[l]; /* Hᴴ */
    for (int64_t k = j + 1; k < n; ++k) lane_reflect(x, tr, nti, m - j, WkL + (k * m + j) * W * LANES);
  }
}

/* apply_q of the group: ML <- H_0 ... H_{n-1} ML (m x cols in lanes) */
static void lane_apply_q(const real *WkL, const acc *tauL, int64_t m, int64_t n, real *ML, int64_t cols) {
  for (int64_t j = n - 1; j >= 0; --j)
    for (int64_t k = 0; k < cols; ++k)
      lane_reflect(WkL + (j * m + j) * W * LANES, tauL + 2 * j * LANES, tauL + (2 * j + 1) * LANES, m - j,
                   ML + (k * m + j) * W * LANES);
}

"""
