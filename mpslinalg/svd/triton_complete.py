"""CUDA (Triton) completion of ``V``'s zero-σ columns for the SVD family (:func:`mpslinalg.svd._complete`).

The rule is :func:`mpslinalg.svd._complete`'s: the columns ``j`` of ``Ux [B, n, n]`` with
``σ_j <= √tiny·σ_1`` are replaced by the same columns of the ``Q`` of a Householder QR of ``Ux``.
Without a host read the torch-op route factorises every matrix of the batch (a complex64 64x64 QR
costs about as much as the QR preconditioner); here one launch runs the QR family's Triton
``geqr2`` + ``orgqr`` (:func:`mpslinalg.qr.qr_small_kernel`, called as a function)
only in the programs whose matrix has such a column, and the others do nothing.

Imported lazily by :mod:`mpslinalg.svd` on CUDA (and under ``TRITON_INTERPRET=1`` in the tests).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..kernels.triton_prims import cload as _cload
from ..kernels.triton_prims import cstore as _cstore
from ..kernels.triton_prims import pow2 as _pow2
from ..qr import qr_small_kernel as _qr_small_kernel
from ..qr import square_qr_fits as fits
from .triton_rot import UNIFORM, _pow2i

__all__ = ["complete", "complete_inplace", "finish", "fits"]


@triton.jit
def _complete_kernel(A, TAU, Q, NEED, M, N, K, COMPLEX: tl.constexpr, MP: tl.constexpr, NP: tl.constexpr):
    if tl.load(NEED + tl.program_id(0)) != 0:
        _qr_small_kernel(A, TAU, Q, A, M, N, K, COMPLEX=COMPLEX, WANT_Q=True, WANT_X=False, MP=MP, NP=NP)


def complete(Ux: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
    """``Ux`` with the columns flagged in ``zero`` taken from the ``Q`` of its Householder QR.

    Parameters
    ----------
    Ux : torch.Tensor
        ``[B, n, n]`` float32/complex64 (:func:`fits`); not modified.
    zero : torch.Tensor
        ``[B, n]`` bool: the columns to replace (``σ_j`` negligible).

    Returns
    -------
    torch.Tensor
        A new ``[B, n, n]`` tensor; matrices without a flagged column are ``Ux``'s, untouched by the
        QR (their programs return at once).
    """
    Bn, m, n = Ux.shape
    if not fits(m, n):
        raise ValueError(f"svd_triton_complete.complete: {m} x {n} matrices do not fit the QR kernel")
    need = zero.any(-1).to(torch.int32)
    QR = Ux.resolve_conj().contiguous().clone()  # the kernel factorises in place
    tau = QR.new_empty(Bn, min(m, n))
    Q = torch.empty_like(QR)  # written only where needed; torch.where below reads it only there
    if Bn > 0:
        cplx = QR.is_complex()
        view = torch.view_as_real if cplx else (lambda t: t)
        mp, np_ = _pow2(m), _pow2(n)
        warps = 1 if mp * np_ <= 256 else (4 if mp * np_ <= 2048 else 8)  # as geqrf_small
        _complete_kernel[(Bn,)](view(QR), view(tau), view(Q), need, m, n, min(m, n), COMPLEX=cplx, MP=mp,
                                NP=np_, num_warps=warps, **UNIFORM)
    return torch.where(zero[:, None, :], Q, Ux)


@triton.jit
def _complete_inplace_kernel(V, S, WORK, TAU, QW, n, COMPLEX: tl.constexpr, NP: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    CW: tl.constexpr = 2 if COMPLEX else 1
    rows = tl.arange(0, NP)
    cols = tl.arange(0, NP)
    s = tl.load(S + b * n + cols, mask=cols < n, other=0.0)
    zero = (cols < n) & (s <= tl.load(S + b * n) * 1.0842021724855044e-19)  # sqrt(tiny) sigma_1; NaN: none
    if tl.sum(zero.to(tl.int32), axis=0) > 0:
        inside = (rows[:, None] < n) & (cols[None, :] < n)
        off = b * n * n * CW + (rows[:, None] * n + cols[None, :]) * CW
        vr, vi = _cload(V, off, inside, COMPLEX)
        _cstore(WORK, off, vr, vi, inside, COMPLEX)
        tl.debug_barrier()
        _qr_small_kernel(WORK, TAU, QW, WORK, n, n, n, COMPLEX=COMPLEX, WANT_Q=True, WANT_X=False, MP=NP, NP=NP)
        tl.debug_barrier()
        flagged = inside & zero[None, :]
        qr, qi = _cload(QW, off, flagged, COMPLEX)
        _cstore(V, off, qr, qi, flagged, COMPLEX)


def complete_inplace(V: torch.Tensor, S: torch.Tensor) -> None:
    """:func:`mpslinalg.svd._complete`'s rule in one launch, in place: the columns ``j`` of the square
    ``V [B, n, n]`` (contiguous, :func:`fits`) with ``S[:, j] <= √tiny · S[:, 0]`` replaced by the same
    columns of the ``Q`` of a Householder QR of ``V`` (the QR family's kernel, as :func:`complete`, run
    only by the programs whose matrix has such a column; NaN ``S``: none)."""
    Bn, m, n = V.shape
    if m != n or not fits(m, n) or not V.is_contiguous():
        raise ValueError(f"complete_inplace: expected contiguous square V fitting the QR kernel, got {tuple(V.shape)}")
    if Bn == 0:
        return
    cplx = V.is_complex()
    view = torch.view_as_real if cplx else (lambda t: t)
    work, qw = torch.empty_like(V), torch.empty_like(V)
    np_ = _pow2(n)
    warps = 1 if np_ * np_ <= 256 else (4 if np_ * np_ <= 2048 else 8)  # as geqrf_small
    _complete_inplace_kernel[(Bn,)](view(V), S.contiguous(), view(work), view(V.new_empty(Bn, n)), view(qw), n,
                                    COMPLEX=cplx, NP=np_, num_warps=warps, **UNIFORM)


# --------------------------------------------------------------------------------------------------
# After the Jacobi: column norms, descending order, V_A's rows and V's columns in place (one launch)
# --------------------------------------------------------------------------------------------------


@triton.jit
def _finish_kernel(X, V, CPERM, RPERM, EXP, FIN, ROT, S_OUT, S_RAW, VOUT, VJ, INFO, n,
                   COMPLEX: tl.constexpr, WANT_UV: tl.constexpr, ROWS_BACK: tl.constexpr, NP: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    CW: tl.constexpr = 2 if COMPLEX else 1
    rows = tl.arange(0, NP)
    cols = tl.arange(0, NP)
    live = cols < n
    inside = (rows[:, None] < n) & live[None, :]
    off = (b * n * n + rows[:, None] * n + cols[None, :]) * CW
    xr, xi = _cload(X, off, inside, COMPLEX)
    # sigma_j = ||x_j 2^-k|| 2^k, 2^k <= max |re|, |im| < 2^(k+1): no square under- or overflows,
    # and scaling by a power of two is exact (one multiply an element, no division)
    m = tl.max(tl.maximum(tl.abs(xr), tl.abs(xi)), axis=0)
    k = ((m.to(tl.int32, bitcast=True) >> 23) & 255) - 127  # subnormal or zero m: k = -127, 2^127 scales
    sc = _pow2i(-k)
    yr = xr * sc[None, :]
    yi = xi * sc[None, :]
    s = tl.math.div_rn(tl.sqrt_rn(tl.sum(yr * yr + yi * yi, axis=0)), sc)
    s = tl.where(live, s, -1.0)  # padding ranks last
    # stable descending rank: columns before j with a larger or equal sigma, after j with a larger one
    before = rows[:, None] < cols[None, :]
    ahead = (s[:, None] > s[None, :]) | ((s[:, None] == s[None, :]) & before)
    rank = tl.sum(ahead.to(tl.int32), axis=0)
    fin = tl.load(FIN + b) != 0
    e = tl.load(EXP + b)
    half = e // 2
    scaled = s * _pow2i(half) * _pow2i(e - half)
    tl.store(S_RAW + b * n + rank, s, mask=live)
    tl.store(S_OUT + b * n + rank, tl.where(fin, scaled, float("nan")), mask=live)
    rot = tl.load(ROT + b) != 0
    tl.store(INFO + b, tl.where(fin, tl.where(rot, 2, 0), 1))
    if WANT_UV:
        cperm = tl.load(CPERM + b * n + rows, mask=rows < n, other=0)
        dst = (b * n * n + cperm[:, None] * n + rank[None, :]) * CW  # V_A[cperm[i], rank[j]] = W[i, j] / s_j
        rs = tl.math.div_rn(1.0, tl.where(s > 0.0, s, 1.0))  # one division a column (torch: one an element)
        if ROWS_BACK:  # the outputs of svd_impl: NaN for a non-finite input
            rs = tl.where(fin, rs, float("nan"))
        _cstore(VOUT, dst, xr * rs[None, :], xi * rs[None, :], inside, COMPLEX)
        urow = rows
        if ROWS_BACK:  # U_A = Prᵀ Vj: row i of Vj is row rperm[i] of U_A
            urow = tl.load(RPERM + b * n + rows, mask=rows < n, other=0)
        vdst = (b * n * n + urow[:, None] * n + rank[None, :]) * CW  # Vj[:, rank[j]] = V[:, j]
        vr, vi = _cload(V, off, inside, COMPLEX)
        if ROWS_BACK:
            vr = tl.where(fin, vr, float("nan"))
            vi = tl.where(fin, vi, float("nan"))
        _cstore(VJ, vdst, vr, vi, inside, COMPLEX)


def finish(X: torch.Tensor, V: torch.Tensor | None, cperm: torch.Tensor, e: torch.Tensor, finite: torch.Tensor,
           rotated: torch.Tensor, rperm: torch.Tensor | None = None):
    """Step 5 of :mod:`mpslinalg.svd` after the Jacobi, in one launch (the torch-op route: ~10 passes).

    Parameters
    ----------
    X : torch.Tensor
        ``[B, n, n]`` contiguous float32/complex64: the rotated columns ``W = Rᴴ V``.
    V : torch.Tensor or None
        ``[B, n, n]`` contiguous: the Jacobi's accumulated rotations (None: singular values only).
    cperm : torch.Tensor
        ``[B, n]`` int64: the column sort of the preconditioner (row ``i`` of ``W Σ⁻¹`` is row
        ``cperm[i]`` of ``V_A``).
    e, finite, rotated : torch.Tensor
        ``[B]``: the power-of-two exponents, the input was finite, still rotating in the last sweep.
    rperm : torch.Tensor, optional
        ``[B, n]`` int64, the preconditioner's row sort: then ``Vj`` is returned as ``U_A = Prᵀ Vj``
        (row ``i`` of ``Vj`` is row ``rperm[i]`` of ``U_A``: for square ``A`` whose rotations started
        from ``Q``) and ``V_A`` and ``U_A`` are NaN for a non-finite input.

    Returns
    -------
    (S, S_out, info, V_A, Vj)
        ``S [B, n]`` the singular values of the scaled matrix, descending (stable), ``S_out`` scaled
        back (NaN for non-finite input), ``info`` int32 (0, 1 non-finite, 2 not converged), and with
        ``V``: ``V_A = Pc W Σ⁻¹`` (columns sorted; zero ones left for the completion; not NaN for
        non-finite input, whose ``W`` the caller zeroed: it masks the outputs) and ``Vj`` =
        ``V``'s columns sorted (``U = Q Vj`` then; with ``rperm``: ``U_A``).
    """
    Bn, n, _ = X.shape
    rdt = torch.float32
    S = torch.empty(Bn, n, dtype=rdt, device=X.device)
    S_out = torch.empty_like(S)
    info = torch.empty(Bn, dtype=torch.int32, device=X.device)
    want = V is not None
    Vout = torch.empty_like(X) if want else None
    Vj = torch.empty_like(X) if want else None
    if Bn > 0:
        cplx = X.is_complex()
        view = torch.view_as_real if cplx else (lambda t: t)
        x = view(X)
        np_ = _pow2(n)
        # sm_90 offline: c64 64x64 at 4 warps 255 registers + 384 bytes of spills, at 8 none (208)
        tile = np_ * np_ * (2 if cplx else 1)
        warps = 8 if tile >= 8192 else (4 if tile >= 2048 else (2 if tile >= 512 else 1))
        _finish_kernel[(Bn,)](x, view(V) if want else x, cperm.contiguous(),
                              (cperm if rperm is None else rperm).contiguous(), e.to(torch.int32).contiguous(),
                              finite.to(torch.int32).contiguous(), rotated.to(torch.int32).contiguous(), S_out, S,
                              view(Vout) if want else x, view(Vj) if want else x, info, n, COMPLEX=cplx,
                              WANT_UV=want, ROWS_BACK=rperm is not None, NP=np_, num_warps=warps, **UNIFORM)
    return S, S_out, info, Vout, Vj
