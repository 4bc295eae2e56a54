"""CUDA (Triton) blocked Householder QR of batches of square matrices up to 64 x 64 (one launch), for
the SVD's preconditioner (:func:`mpslinalg.kernels.svd_cuda.square_qr`).

Why: :func:`mpslinalg.qr.triton._qr_small_kernel` holds the whole tile in registers and, per
column, extracts it with a full-tile masked sum and applies a full-tile rank-1 update (and the thin
``Q`` costs a second such loop): O(n) full-tile passes with cross-warp reductions (H200, complex64
4096 x 64x64: 7.4 ms with ``Q``, 4.6 ms ``R`` only).

Algorithm (LAPACK ``geqrf`` with ``geqr2`` panels, ``larft``, ``larfb``; one program per matrix):

* the matrix lives in the caller's workspace (global memory; L1/L2-resident while the program runs);
* per panel of ``NB`` columns: load the ``[MP, NB]`` panel, factor it column by column
  (:func:`mpslinalg.qr.triton._larfg`: LAPACK's ``clarfg``, ``beta`` real, ``tau = 0`` for an
  already-zero column, the scaled norm), store it; form ``T`` (``H_k ... H_{k+NB-1} = I - V T Vᴴ``,
  ``larft`` forward/columnwise from ``G = Vᴴ V``); update the trailing columns
  ``A2 <- A2 - V (Tᴴ (Vᴴ A2))`` and, with ``Q``, ``Q <- Q - ((Q V) T) Vᴴ`` (``Q`` starts as ``I`` and
  stays in registers) - every product a ``tl.dot`` with ``input_precision="ieee"`` (float32 FMAs,
  never TF32: accuracy is the contract), complex as four real products;
* the programs' threads exchange the workspace through global memory, so a barrier separates a
  store from the next load of the same columns.

Outputs: the packed ``QR`` (LAPACK's layout) in the workspace, ``tau``, and when asked ``Q`` (square
only) and ``X = Rᴴ`` (the conjugate transpose of the upper triangle, the Jacobi's input).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..kernels.triton_prims import cload as _cload
from ..kernels.triton_prims import cstore as _cstore
from ..kernels.triton_prims import pow2 as _pow2
from .triton import _larfg

__all__ = ["CHUNKED", "JOINT_REDUCE", "NB", "NUM_WARPS", "fits", "geqrf_square"]

#: Largest order; panel width (``tl.dot`` needs all sizes >= 16); warps per program.
MAX_N = 64
NB = 16
NUM_WARPS = 4
#: The panel's reductions joined (column re/im in one, clarfg's alpha/max/sum of squares in one, vᴴ P in
#: one: 3 a column instead of 8), the scaled sum of squares only outside [2^-40, 2^40]; off until measured.
JOINT_REDUCE = False
#: The products of inner size ``n`` summed over chunks of ``NB`` rows loaded from global memory
#: (:func:`_geqrf_chunked`; ``Q`` accumulates in its output): no operand spills; off until measured.
CHUNKED = False


def fits(n: int) -> bool:
    """Whether ``n x n`` matrices fit one program of the blocked kernel."""
    return 1 <= n <= MAX_N


@triton.jit
def _cdot(ar, ai, br, bi, CONJ_A: tl.constexpr):
    """``(A B)`` or, with ``CONJ_A``, ``(Aᴴ B)`` of complex tiles as four real ``ieee`` products
    (``A`` is passed already transposed for ``Aᴴ``: only its conjugation is applied here)."""
    rr = tl.dot(ar, br, input_precision="ieee")
    ii = tl.dot(ai, bi, input_precision="ieee")
    ri = tl.dot(ar, bi, input_precision="ieee")
    ir = tl.dot(ai, br, input_precision="ieee")
    if CONJ_A:
        return rr + ii, ri - ir
    return rr - ii, ri + ir


@triton.jit
def _sum2(a1, b1, a2, b2):
    return a1 + a2, b1 + b2


@triton.jit
def _panel(base, tau_base, k, N, COMPLEX: tl.constexpr, NP: tl.constexpr, NB: tl.constexpr, JOINT: tl.constexpr):
    """``geqr2`` of the panel of columns ``k .. k+NB`` (all ``NP`` rows) of the matrix at ``base``: stores
    the factored panel and its ``tau``; returns ``(Pr, Pi, taur, taui)``."""
    CW: tl.constexpr = 2 if COMPLEX else 1  # floats per element
    rows = tl.arange(0, NP)
    pc = tl.arange(0, NB)  # panel columns
    pcol = k + pc
    pin = (rows[:, None] < N) & (pcol[None, :] < N)
    poffs = (rows[:, None] * N + pcol[None, :]) * CW
    Pr = tl.load(base + poffs, mask=pin, other=0.0)
    Pi = tl.zeros([NP, NB], dtype=tl.float32)
    if COMPLEX:
        Pi = tl.load(base + poffs + 1, mask=pin, other=0.0)
    taur = tl.zeros([NB], dtype=tl.float32)
    taui = tl.zeros([NB], dtype=tl.float32)
    for c in range(0, NB):
        j = k + c
        colc = pc[None, :] == c
        if JOINT:  # re and im in one reduction each time
            xr, xi = tl.reduce((tl.where(colc, Pr, 0.0), tl.where(colc, Pi, 0.0)), 1, _sum2)  # column j
        else:
            xr = tl.sum(tl.where(colc, Pr, 0.0), axis=1)
            xi = tl.sum(tl.where(colc, Pi, 0.0), axis=1)
        below = rows > j
        at = rows == j
        vr, vi, dgr, dgi, tr, ti = _larfg(xr, xi, rows, j, COMPLEX, JOINT)
        vr1 = tl.where(at, 1.0, vr)
        # Hᴴ = I - conj(tau) v vᴴ on the panel's columns right of c
        if JOINT:
            wr, wi = tl.reduce((vr1[:, None] * Pr + vi[:, None] * Pi, vr1[:, None] * Pi - vi[:, None] * Pr), 0, _sum2)
        else:
            wr = tl.sum(vr1[:, None] * Pr + vi[:, None] * Pi, axis=0)
            wi = tl.sum(vr1[:, None] * Pi - vi[:, None] * Pr, axis=0)
        fr = tr * wr + ti * wi
        fi = tr * wi - ti * wr
        right = pc[None, :] > c
        Pr = tl.where(right, Pr - (vr1[:, None] * fr[None, :] - vi[:, None] * fi[None, :]), Pr)
        Pi = tl.where(right, Pi - (vr1[:, None] * fi[None, :] + vi[:, None] * fr[None, :]), Pi)
        Pr = tl.where(colc, tl.where(below, vr, tl.where(at, dgr, xr))[:, None], Pr)
        Pi = tl.where(colc, tl.where(below, vi, tl.where(at, dgi, xi))[:, None], Pi)
        taur = tl.where(pc == c, tr, taur)
        taui = tl.where(pc == c, ti, taui)
    tl.store(base + poffs, Pr, mask=pin)
    if COMPLEX:
        tl.store(base + poffs + 1, Pi, mask=pin)
    pk = pcol < N
    tl.store(tau_base + pcol * CW, taur, mask=pk)
    if COMPLEX:
        tl.store(tau_base + pcol * CW + 1, taui, mask=pk)
    return Pr, Pi, taur, taui


@triton.jit
def _larft(Gr, Gi, taur, taui, NB: tl.constexpr):
    """``T`` of ``H_1 ... H_NB = I - V T Vᴴ`` from ``G = Vᴴ V`` and ``tau`` (LAPACK ``larft``, forward,
    columnwise): ``T[:c, c] = -tau_c T[:c, :c] G[:c, c]``, ``T[c, c] = tau_c``."""
    pc = tl.arange(0, NB)
    pr = tl.arange(0, NB)
    Tr = tl.zeros([NB, NB], dtype=tl.float32)
    Ti = tl.zeros([NB, NB], dtype=tl.float32)
    for c in range(0, NB):
        colc = pc[None, :] == c
        gr = tl.where(pr < c, tl.sum(tl.where(colc, Gr, 0.0), axis=1), 0.0)
        gi = tl.where(pr < c, tl.sum(tl.where(colc, Gi, 0.0), axis=1), 0.0)
        hr = tl.sum(Tr * gr[None, :] - Ti * gi[None, :], axis=1)  # T g
        hi = tl.sum(Tr * gi[None, :] + Ti * gr[None, :], axis=1)
        tr = tl.sum(tl.where(pc == c, taur, 0.0), axis=0)
        ti = tl.sum(tl.where(pc == c, taui, 0.0), axis=0)
        tcr = tl.where(pr == c, tr, -(tr * hr - ti * hi))
        tci = tl.where(pr == c, ti, -(tr * hi + ti * hr))
        Tr = tl.where(colc, tcr[:, None], Tr)
        Ti = tl.where(colc, tci[:, None], Ti)
    return Tr, Ti


@triton.jit
def _vchunk(base, r0, k, N, COMPLEX: tl.constexpr, RC: tl.constexpr, NB: tl.constexpr):
    """Rows ``r0 .. r0+RC`` of the panel's ``V`` (columns ``k .. k+NB``; unit diagonal, zero above) from
    the stored factorisation."""
    CW: tl.constexpr = 2 if COMPLEX else 1
    rr = r0 + tl.arange(0, RC)
    pcol = k + tl.arange(0, NB)
    below = (rr[:, None] > pcol[None, :]) & (rr[:, None] < N) & (pcol[None, :] < N)
    off = (rr[:, None] * N + pcol[None, :]) * CW
    vr = tl.where(rr[:, None] == pcol[None, :], 1.0, tl.load(base + off, mask=below, other=0.0))
    vi = tl.zeros([RC, NB], dtype=tl.float32)
    if COMPLEX:
        vi = tl.load(base + off + 1, mask=below, other=0.0)
    return vr, vi


@triton.jit
def _geqrf_tile(base, tau_base, N, COMPLEX: tl.constexpr, WANT_Q: tl.constexpr, NP: tl.constexpr,
                NB: tl.constexpr, JOINT: tl.constexpr):
    """The blocked ``geqrf`` of the ``N x N`` matrix at ``base`` (in place; ``tau`` at ``tau_base``) by
    the calling program, its products on register tiles; returns ``Q`` as an ``[NP, NP]`` tile pair
    (zeros without ``WANT_Q``)."""
    CW: tl.constexpr = 2 if COMPLEX else 1  # floats per element
    rows = tl.arange(0, NP)
    cols = tl.arange(0, NP)
    offs = (rows[:, None] * N + cols[None, :]) * CW
    Qr = tl.zeros([NP, NP], dtype=tl.float32)
    Qi = tl.zeros([NP, NP], dtype=tl.float32)
    if WANT_Q:
        Qr = tl.where((rows[:, None] == cols[None, :]), 1.0, 0.0)
    for k in range(0, N, NB):
        tl.debug_barrier()  # the previous trailing update's stores are visible
        Pr, Pi, taur, taui = _panel(base, tau_base, k, N, COMPLEX, NP, NB, JOINT)
        # V: the panel's reflectors with their unit entries (zero above)
        pcol = k + tl.arange(0, NB)
        Vr = tl.where(rows[:, None] > pcol[None, :], Pr, tl.where(rows[:, None] == pcol[None, :], 1.0, 0.0))
        Vi = tl.where(rows[:, None] > pcol[None, :], Pi, 0.0)
        Gr, Gi = _cdot(tl.trans(Vr), tl.trans(Vi), Vr, Vi, True)
        Tr, Ti = _larft(Gr, Gi, taur, taui, NB)
        if k + NB < N:  # trailing columns: A2 <- (I - V T Vᴴ)ᴴ A2 = A2 - V (Tᴴ (Vᴴ A2))
            tin = (rows[:, None] < N) & (cols[None, :] >= k + NB) & (cols[None, :] < N)
            A2r = tl.load(base + offs, mask=tin, other=0.0)
            A2i = tl.zeros([NP, NP], dtype=tl.float32)
            if COMPLEX:
                A2i = tl.load(base + offs + 1, mask=tin, other=0.0)
            Wr, Wi = _cdot(tl.trans(Vr), tl.trans(Vi), A2r, A2i, True)
            Yr, Yi = _cdot(tl.trans(Tr), tl.trans(Ti), Wr, Wi, True)
            Dr, Di = _cdot(Vr, Vi, Yr, Yi, False)
            tl.store(base + offs, A2r - Dr, mask=tin)
            if COMPLEX:
                tl.store(base + offs + 1, A2i - Di, mask=tin)
        if WANT_Q:  # Q <- Q (I - V T Vᴴ)
            Zr, Zi = _cdot(Qr, Qi, Vr, Vi, False)
            Zr, Zi = _cdot(Zr, Zi, Tr, Ti, False)
            Dr, Di = _cdot(Zr, Zi, tl.trans(Vr), -tl.trans(Vi), False)
            Qr = Qr - Dr
            Qi = Qi - Di
    return Qr, Qi


@triton.jit
def _geqrf_chunked(base, tau_base, qbase, N, COMPLEX: tl.constexpr, WANT_Q: tl.constexpr, NP: tl.constexpr,
                   NB: tl.constexpr, JOINT: tl.constexpr):
    """:func:`_geqrf_tile` with every product of inner size ``NP`` summed over row chunks of ``NB`` loaded
    from global memory (``V``, the trailing columns and ``Q``, which accumulates at ``qbase``): each
    ``tl.dot`` has inner size ``NB``, so its operands stay in registers (round 1: the inner-size-64
    products of :func:`_geqrf_tile` spilled 8.7 KB a thread at 4 warps)."""
    CW: tl.constexpr = 2 if COMPLEX else 1
    rows = tl.arange(0, NP)
    cols = tl.arange(0, NP)
    cr = tl.arange(0, NB)  # rows / columns of a chunk
    inside = (rows[:, None] < N) & (cols[None, :] < N)
    offs = (rows[:, None] * N + cols[None, :]) * CW
    if WANT_Q:
        _cstore(qbase, offs, tl.where(rows[:, None] == cols[None, :], 1.0, 0.0), tl.zeros([NP, NP], dtype=tl.float32),
                inside, COMPLEX)
    for k in range(0, N, NB):
        tl.debug_barrier()  # the previous panel's stores (trailing columns, Q) are visible
        Pr, Pi, taur, taui = _panel(base, tau_base, k, N, COMPLEX, NP, NB, JOINT)
        tl.debug_barrier()  # the panel's V is read back in chunks
        Gr = tl.zeros([NB, NB], dtype=tl.float32)
        Gi = tl.zeros([NB, NB], dtype=tl.float32)
        for r0 in range(k, N, NB):  # V is zero above row k
            vr, vi = _vchunk(base, r0, k, N, COMPLEX, NB, NB)
            gr, gi = _cdot(tl.trans(vr), tl.trans(vi), vr, vi, True)
            Gr += gr
            Gi += gi
        Tr, Ti = _larft(Gr, Gi, taur, taui, NB)
        if k + NB < N:  # A2 <- A2 - V (Tᴴ (Vᴴ A2)) on the trailing columns
            Wr = tl.zeros([NB, NP], dtype=tl.float32)
            Wi = tl.zeros([NB, NP], dtype=tl.float32)
            for r0 in range(k, N, NB):
                vr, vi = _vchunk(base, r0, k, N, COMPLEX, NB, NB)
                rr = r0 + cr
                cin = (rr[:, None] < N) & (cols[None, :] >= k + NB) & (cols[None, :] < N)
                ar, ai = _cload(base, (rr[:, None] * N + cols[None, :]) * CW, cin, COMPLEX)
                wr, wi = _cdot(tl.trans(vr), tl.trans(vi), ar, ai, True)
                Wr += wr
                Wi += wi
            Yr, Yi = _cdot(tl.trans(Tr), tl.trans(Ti), Wr, Wi, True)
            tl.debug_barrier()  # every chunk read before any is written
            for r0 in range(k, N, NB):
                vr, vi = _vchunk(base, r0, k, N, COMPLEX, NB, NB)
                rr = r0 + cr
                cin = (rr[:, None] < N) & (cols[None, :] >= k + NB) & (cols[None, :] < N)
                coff = (rr[:, None] * N + cols[None, :]) * CW
                ar, ai = _cload(base, coff, cin, COMPLEX)
                dr, di = _cdot(vr, vi, Yr, Yi, False)
                _cstore(base, coff, ar - dr, ai - di, cin, COMPLEX)
        if WANT_Q:  # Q <- Q - ((Q V) T) Vᴴ
            Zr = tl.zeros([NP, NB], dtype=tl.float32)
            Zi = tl.zeros([NP, NB], dtype=tl.float32)
            for r0 in range(k, N, NB):
                vr, vi = _vchunk(base, r0, k, N, COMPLEX, NB, NB)
                cc = r0 + cr
                qin = (rows[:, None] < N) & (cc[None, :] < N)
                qr, qi = _cload(qbase, (rows[:, None] * N + cc[None, :]) * CW, qin, COMPLEX)
                zr, zi = _cdot(qr, qi, vr, vi, False)
                Zr += zr
                Zi += zi
            Zr, Zi = _cdot(Zr, Zi, Tr, Ti, False)
            Vr, Vi = _vchunk(base, 0, k, N, COMPLEX, NP, NB)
            Dr, Di = _cdot(Zr, Zi, tl.trans(Vr), -tl.trans(Vi), False)
            tl.debug_barrier()  # every chunk of Q read before Q is written
            qr, qi = _cload(qbase, offs, inside, COMPLEX)
            _cstore(qbase, offs, qr - Dr, qi - Di, inside, COMPLEX)


@triton.jit
def _qr_blocked_kernel(A, TAU, Q, X, N, COMPLEX: tl.constexpr, WANT_Q: tl.constexpr, WANT_X: tl.constexpr,
                       NP: tl.constexpr, NB: tl.constexpr, JOINT: tl.constexpr, CHUNKED: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    CW: tl.constexpr = 2 if COMPLEX else 1  # floats per element
    rows = tl.arange(0, NP)
    cols = tl.arange(0, NP)
    base = A + b * N * N * CW
    inside = (rows[:, None] < N) & (cols[None, :] < N)
    offs = (rows[:, None] * N + cols[None, :]) * CW
    if CHUNKED:
        _geqrf_chunked(base, TAU + b * N * CW, Q + b * N * N * CW, N, COMPLEX, WANT_Q, NP, NB, JOINT)
    else:
        Qr, Qi = _geqrf_tile(base, TAU + b * N * CW, N, COMPLEX, WANT_Q, NP, NB, JOINT)
        if WANT_Q:
            tl.store(Q + b * N * N * CW + offs, Qr, mask=inside)
            if COMPLEX:
                tl.store(Q + b * N * N * CW + offs + 1, Qi, mask=inside)
    if WANT_X:  # X = Rᴴ: X[i, j] = conj(R[j, i]) for i >= j
        tl.debug_barrier()
        Rr = tl.load(base + offs, mask=inside & (rows[:, None] <= cols[None, :]), other=0.0)
        xoffs = b * N * N * CW + offs
        tl.store(X + xoffs, tl.trans(Rr), mask=inside)
        if COMPLEX:
            Ri = tl.load(base + offs + 1, mask=inside & (rows[:, None] <= cols[None, :]), other=0.0)
            tl.store(X + xoffs + 1, -tl.trans(Ri), mask=inside)


def geqrf_square(A: torch.Tensor, tau: torch.Tensor, Q: torch.Tensor | None = None, X: torch.Tensor | None = None,
                 num_warps: int | None = None) -> None:
    """Blocked ``geqrf`` of every matrix of the contiguous square ``[B, n, n]`` float32/complex64
    buffer ``A`` in place (:func:`fits`).

    Parameters
    ----------
    A : torch.Tensor
        ``[B, n, n]`` contiguous; overwritten by the packed ``QR`` (LAPACK's layout).
    tau : torch.Tensor
        ``[B, n]`` contiguous, same dtype: written.
    Q : torch.Tensor, optional
        ``[B, n, n]`` contiguous: written with the unitary factor.
    X : torch.Tensor, optional
        ``[B, n, n]`` contiguous, not ``A``: written with ``Rᴴ`` (zero above the diagonal).
    num_warps : int, optional
        Warps per program (default :data:`NUM_WARPS`).
    """
    Bn, m, n = A.shape
    if m != n or not fits(n):
        raise ValueError(f"geqrf_square: expected square matrices of order 1 to {MAX_N}, got {m} x {n}")
    for name, t in (("A", A), ("tau", tau), ("Q", Q), ("X", X)):
        if t is not None and not t.is_contiguous():
            raise ValueError(f"geqrf_square: {name} must be contiguous")
    if Bn == 0:
        return
    cplx = A.is_complex()
    view = torch.view_as_real if cplx else (lambda t: t)
    a = view(A)
    _qr_blocked_kernel[(Bn,)](a, view(tau), view(Q) if Q is not None else a, view(X) if X is not None else a, n,
                              COMPLEX=cplx, WANT_Q=Q is not None, WANT_X=X is not None, NP=max(_pow2(n), NB),
                              NB=NB, JOINT=JOINT_REDUCE, CHUNKED=CHUNKED, num_warps=num_warps or NUM_WARPS)
