"""CUDA (Triton) kernel for batches of small Householder QRs (``M, N <= 64``, or up to 256 x 32):
one launch.

Imported lazily by :mod:`mpslinalg.qr` (Triton ships with CUDA builds of torch; without it this
module is never imported).

Why: ``torch.linalg.qr`` on CUDA is a loop over the batch (H200, torch 2.11: 4096 x 32x32 float32
takes 334 ms, 100000 x 3x4 takes 6.1 s), and a Householder loop in torch ops vectorised over the
batch still issues ~15 launches per column.

Algorithm: one program per matrix holds the whole ``M x N`` tile in registers (real and imaginary
parts as two tiles for complex64) and runs LAPACK ``geqr2`` column by column — ``larfg`` with the
norm scaled by the column's largest magnitude (no under/overflow of the squares at 1e-30/1e30),
``beta`` real, ``tau = 0`` for an already-zero column —, then, when asked, forms the thin ``Q``
(``orgqr``: backward accumulation ``Q <- (I - tau_j v_j v_jᴴ) Q`` from ``Q = I``) in the same
program. Writes the packed ``QR`` (LAPACK's layout), ``tau`` and optionally ``Q``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..kernels.triton_prims import pow2 as _pow2

__all__ = ["fits", "geqrf_small", "lapack_signs", "square_qr_into"]

MAX_N = 64
#: Largest tile (padded to powers of two) one program holds: 256 x 32 or 128 x 64.
MAX_TILE = 8192


def fits(M: int, N: int) -> bool:
    """Whether ``M x N`` matrices fit one program of the kernel."""
    return N <= MAX_N and M <= 256 and _pow2(M) * _pow2(N) <= MAX_TILE


@triton.jit
def _sum_sum_max_sum(a1, b1, c1, d1, a2, b2, c2, d2):
    return a1 + a2, b1 + b2, tl.maximum(c1, c2), d1 + d2


@triton.jit
def _larfg(xr, xi, rows, j, COMPLEX: tl.constexpr, JOINT: tl.constexpr):
    """LAPACK ``clarfg`` of the column ``x`` (a vector over ``rows``) at row ``j``: returns ``(vr, vi,
    dr, di, tr, ti)``, the reflector ``v`` below ``j`` (zero at and above ``j``; its unit entry at ``j``
    implied), the new entry at ``j`` (``beta``, real; ``alpha`` itself when ``tau = 0``) and ``tau``.
    The norm is scaled by the column's largest magnitude (no under/overflow of the squares at 1e+-30);
    ``tau = 0`` when ``x`` below ``j`` is zero and ``alpha`` is real. ``JOINT``: ``alpha``, the largest
    magnitude and the unscaled sum of squares in one reduction, the scaled sum (a second one) only
    where the largest magnitude is outside ``[2^-40, 2^40]`` (inside, 64 squares neither overflow nor
    lose more than ``64 · 2^-150`` to underflow, ``2^-70`` of the sum)."""
    below = rows > j
    at = rows == j
    br = tl.where(below, xr, 0.0)
    bi = tl.where(below, xi, 0.0)
    if JOINT:
        ar, ai, big, ss = tl.reduce((tl.where(at, xr, 0.0), tl.where(at, xi, 0.0),
                                     tl.maximum(tl.abs(br), tl.abs(bi)), br * br + bi * bi), 0, _sum_sum_max_sum)
        xnorm = tl.sqrt(ss)
        if (big < 9.094947017729282e-13) | (big > 1099511627776.0):
            ok = (big > 0.0) & (big < float("inf"))
            sb = tl.where(ok, big, 1.0)
            xnorm = tl.where(ok, big * tl.sqrt(tl.sum((br / sb) * (br / sb) + (bi / sb) * (bi / sb), axis=0)), big)
    else:
        ar = tl.sum(tl.where(at, xr, 0.0), axis=0)
        ai = tl.sum(tl.where(at, xi, 0.0), axis=0)
        big = tl.max(tl.maximum(tl.abs(br), tl.abs(bi)), axis=0)
        ok = (big > 0.0) & (big < float("inf"))
        sb = tl.where(ok, big, 1.0)
        ss = tl.sum((br / sb) * (br / sb) + (bi / sb) * (bi / sb), axis=0)
        xnorm = tl.where(ok, big * tl.sqrt(ss), big)
    # lapy3(ar, ai, xnorm)
    wmax = tl.maximum(tl.maximum(tl.abs(ar), tl.abs(ai)), xnorm)
    ws = tl.where((wmax > 0.0) & (wmax < float("inf")), wmax, 1.0)
    mag = ws * tl.sqrt((ar / ws) * (ar / ws) + (ai / ws) * (ai / ws) + (xnorm / ws) * (xnorm / ws))
    mag = tl.where((wmax > 0.0) & (wmax < float("inf")), mag, tl.abs(ar) + tl.abs(ai) + xnorm)
    skip = (xnorm == 0.0) & (ai == 0.0)
    beta = tl.where(ar >= 0.0, -mag, mag)
    sbeta = tl.where(skip, 1.0, beta)
    tr = tl.where(skip, 0.0, (beta - ar) / sbeta)
    ti = tl.where(skip, 0.0, -ai / sbeta)
    # v = x / (alpha - beta), with the denominator scaled (its squared modulus may underflow)
    dr = ar - beta
    di = ai
    ds = tl.maximum(tl.abs(dr), tl.abs(di))
    ds = tl.where(skip | (ds == 0.0), 1.0, ds)
    dr = dr / ds
    di = di / ds
    dq = (dr * dr + di * di) * ds
    dq = tl.where(skip, 1.0, dq)
    if COMPLEX:
        vr = (br * dr + bi * di) / dq
        vi = (bi * dr - br * di) / dq
    else:
        vr = br / tl.where(skip, 1.0, dr * ds)
        vi = tl.zeros_like(br)
    vr = tl.where(skip, br, vr)
    vi = tl.where(skip, bi, vi)
    return vr, vi, tl.where(skip, ar, beta), tl.where(skip, ai, 0.0), tr, ti


@triton.jit
def _qr_small_kernel(A, TAU, Q, X, M, N, K,
                     COMPLEX: tl.constexpr, WANT_Q: tl.constexpr, WANT_X: tl.constexpr, MP: tl.constexpr,
                     NP: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, MP)
    cols = tl.arange(0, NP)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    CW: tl.constexpr = 2 if COMPLEX else 1  # floats per element
    base = A + b * M * N * CW
    offs = (rows[:, None] * N + cols[None, :]) * CW
    Ar = tl.load(base + offs, mask=inside, other=0.0)
    Ai = tl.zeros([MP, NP], dtype=tl.float32)
    if COMPLEX:
        Ai = tl.load(base + offs + 1, mask=inside, other=0.0)
    taur = tl.zeros([NP], dtype=tl.float32)
    taui = tl.zeros([NP], dtype=tl.float32)
    for j in range(0, K):
        colj = cols[None, :] == j
        xr = tl.sum(tl.where(colj, Ar, 0.0), axis=1)  # column j
        xi = tl.sum(tl.where(colj, Ai, 0.0), axis=1)
        below = rows > j
        at = rows == j
        vr, vi, dgr, dgi, tr, ti = _larfg(xr, xi, rows, j, COMPLEX, False)
        vr1 = tl.where(at, 1.0, vr)  # v with its implied unit entry
        # apply Hᴴ = I - conj(tau) v vᴴ to the columns right of j: w = vᴴ A, A -= v (conj(tau) w)
        wr = tl.sum(vr1[:, None] * Ar + vi[:, None] * Ai, axis=0)
        wi = tl.sum(vr1[:, None] * Ai - vi[:, None] * Ar, axis=0)
        fr = tr * wr + ti * wi
        fi = tr * wi - ti * wr
        right = cols[None, :] > j
        Ar = tl.where(right, Ar - (vr1[:, None] * fr[None, :] - vi[:, None] * fi[None, :]), Ar)
        Ai = tl.where(right, Ai - (vr1[:, None] * fi[None, :] + vi[:, None] * fr[None, :]), Ai)
        # column j <- [R entries above; beta; v]
        newr = tl.where(below, vr, tl.where(at, dgr, xr))
        newi = tl.where(below, vi, tl.where(at, dgi, xi))
        Ar = tl.where(colj, newr[:, None], Ar)
        Ai = tl.where(colj, newi[:, None], Ai)
        taur = tl.where(cols == j, tr, taur)
        taui = tl.where(cols == j, ti, taui)
    tl.store(base + offs, Ar, mask=inside)
    if COMPLEX:
        tl.store(base + offs + 1, Ai, mask=inside)
    if WANT_X:  # square: X = Rᴴ (the SVD's Jacobi input), from the tile still in registers
        upper = inside & (rows[:, None] <= cols[None, :])
        tl.store(X + b * M * N * CW + offs, tl.trans(tl.where(upper, Ar, 0.0)), mask=inside)
        if COMPLEX:
            tl.store(X + b * M * N * CW + offs + 1, -tl.trans(tl.where(upper, Ai, 0.0)), mask=inside)
    kin = cols < K
    tl.store(TAU + (b * K + cols) * CW, taur, mask=kin)
    if COMPLEX:
        tl.store(TAU + (b * K + cols) * CW + 1, taui, mask=kin)
    if WANT_Q:
        # thin Q (M x K): Q = H_1 ... H_K I, accumulated from the last reflector
        Qr = tl.where((rows[:, None] == cols[None, :]) & (cols[None, :] < K), 1.0, 0.0)
        Qi = tl.zeros([MP, NP], dtype=tl.float32)
        for jj in range(0, K):
            j = K - 1 - jj
            colj = cols[None, :] == j
            vr = tl.sum(tl.where(colj, Ar, 0.0), axis=1)
            vi = tl.sum(tl.where(colj, Ai, 0.0), axis=1)
            vr = tl.where(rows > j, vr, tl.where(rows == j, 1.0, 0.0))
            vi = tl.where(rows > j, vi, 0.0)
            tr = tl.sum(tl.where(cols == j, taur, 0.0), axis=0)
            ti = tl.sum(tl.where(cols == j, taui, 0.0), axis=0)
            hr = tl.sum(vr[:, None] * Qr + vi[:, None] * Qi, axis=0)  # vᴴ Q
            hi = tl.sum(vr[:, None] * Qi - vi[:, None] * Qr, axis=0)
            gr = tr * hr - ti * hi  # tau vᴴ Q
            gi = tr * hi + ti * hr
            Qr = Qr - (vr[:, None] * gr[None, :] - vi[:, None] * gi[None, :])
            Qi = Qi - (vr[:, None] * gi[None, :] + vi[:, None] * gr[None, :])
        qin = (rows[:, None] < M) & (cols[None, :] < K)
        qoffs = (b * M * K + rows[:, None] * K + cols[None, :]) * CW
        tl.store(Q + qoffs, Qr, mask=qin)
        if COMPLEX:
            tl.store(Q + qoffs + 1, Qi, mask=qin)


def geqrf_small(A: torch.Tensor, tau: torch.Tensor, Q: torch.Tensor | None = None) -> None:
    """``geqr2`` of every matrix of the contiguous ``[B, M, N]`` float32/complex64 buffer ``A``
    in place (:func:`fits`); writes ``tau [B, min(M, N)]`` and, if given, the thin
    ``Q [B, M, min(M, N)]`` (contiguous)."""
    Bn, M, N = A.shape
    K = min(M, N)
    if not fits(M, N):
        raise ValueError(f"geqrf_small: {M} x {N} matrices do not fit one program (N <= {MAX_N}, M <= 256, "
                         f"padded tile <= {MAX_TILE} elements)")
    if Bn == 0 or K == 0:
        return
    cplx = A.is_complex()
    ar = torch.view_as_real(A) if cplx else A
    tr = torch.view_as_real(tau) if cplx else tau
    qr = (torch.view_as_real(Q) if cplx else Q) if Q is not None else ar
    mp, np_ = _pow2(M), _pow2(N)
    warps = 1 if mp * np_ <= 256 else (4 if mp * np_ <= 2048 else 8)
    _qr_small_kernel[(Bn,)](ar, tr, qr, ar, M, N, K, COMPLEX=cplx, WANT_Q=Q is not None, WANT_X=False, MP=mp, NP=np_,
                            num_warps=warps)


@triton.jit
def _signs_kernel(Q, S, N, COMPLEX: tl.constexpr, NP: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, NP)
    cols = tl.arange(0, NP)
    inside = (rows[:, None] < N) & (cols[None, :] < N)
    CW: tl.constexpr = 2 if COMPLEX else 1
    offs = (b * N * N + rows[:, None] * N + cols[None, :]) * CW
    Ur = tl.load(Q + offs, mask=inside, other=0.0)
    Ui = tl.zeros([NP, NP], dtype=tl.float32)
    if COMPLEX:
        Ui = tl.load(Q + offs + 1, mask=inside, other=0.0)
    s = tl.zeros([NP], dtype=tl.float32)
    for j in range(0, N):
        at = (rows[:, None] == j) & (cols[None, :] == j)
        pr = tl.sum(tl.sum(tl.where(at, Ur, 0.0), axis=1), axis=0)
        pi = tl.sum(tl.sum(tl.where(at, Ui, 0.0), axis=1), axis=0)
        sj = tl.where(pr >= 0.0, -1.0, 1.0)
        s = tl.where(cols == j, sj, s)
        dr = pr - sj  # |d| >= 1
        dq = dr * dr + pi * pi
        colj = cols[None, :] == j
        cr = tl.sum(tl.where(colj, Ur, 0.0), axis=1)  # column j
        ci = tl.sum(tl.where(colj, Ui, 0.0), axis=1)
        lr = tl.where(rows > j, (cr * dr + ci * pi) / dq, 0.0)  # l = c / d
        li = tl.where(rows > j, (ci * dr - cr * pi) / dq, 0.0)
        rowj = rows[:, None] == j
        ur = tl.sum(tl.where(rowj, Ur, 0.0), axis=0)  # row j
        ui = tl.sum(tl.where(rowj, Ui, 0.0), axis=0)
        ur = tl.where(cols > j, ur, 0.0)
        ui = tl.where(cols > j, ui, 0.0)
        Ur = Ur - (lr[:, None] * ur[None, :] - li[:, None] * ui[None, :])
        Ui = Ui - (lr[:, None] * ui[None, :] + li[:, None] * ur[None, :])
    tl.store(S + b * N + cols, s, mask=cols < N)


def lapack_signs(Q1: torch.Tensor) -> torch.Tensor:
    """``S [B, n]`` (float32 ``±1``) of the modified LU of ``Q₁ - S`` (see :mod:`mpslinalg.qr.tsqr`)
    for ``Q₁ [B, n, n]`` float32/complex64, ``n <= 64``: one program per matrix."""
    Bn, n, _ = Q1.shape
    S = torch.empty(Bn, n, dtype=torch.float32, device=Q1.device)
    if Bn == 0 or n == 0:
        return S
    cplx = Q1.is_complex()
    q = _resolved(Q1)
    qv = torch.view_as_real(q) if cplx else q
    _signs_kernel[(Bn,)](qv, S, n, COMPLEX=cplx, NP=_pow2(n), num_warps=4)
    return S


def _resolved(x: torch.Tensor) -> torch.Tensor:
    return x.resolve_conj().resolve_neg().contiguous()


#: Launch options of :func:`square_qr_into` above 2048-element tiles, with ``Q`` and for ``R`` only.
QR_OPTS_Q = {"num_warps": 4}
QR_OPTS_R = {"num_warps": 8, "maxnreg": 128}


def square_qr_into(As: torch.Tensor, tau: torch.Tensor, Q: torch.Tensor | None, X: torch.Tensor | None) -> None:
    """The SVD preconditioner's QR launch (:func:`mpslinalg.kernels.svd_cuda.square_qr`,
    :mod:`mpslinalg.kernels.svd_triton_square`): ``As [B, n, n]`` (contiguous, :func:`fits`) factorised
    in place, ``tau [B, n]`` written, and where given ``Q`` and ``X = Rᴴ`` (contiguous, ``As``'s shape)."""
    Bn, m, n = As.shape
    cplx = As.is_complex()
    view = torch.view_as_real if cplx else (lambda t: t)
    mp, np_ = _pow2(m), _pow2(n)
    if mp * np_ > 2048:
        opts = dict(QR_OPTS_Q if Q is not None else QR_OPTS_R)
    else:
        opts = {"num_warps": 1 if mp * np_ <= 256 else 4}  # as geqrf_small
    if Bn > 0:
        a = view(As)
        _qr_small_kernel[(Bn,)](a, view(tau), a if Q is None else view(Q), a if X is None else view(X), m, n, n,
                                COMPLEX=cplx, WANT_Q=Q is not None, WANT_X=X is not None, MP=mp, NP=np_, **opts)
