"""The SVD family's algorithm, written once (steps 1-5 of :mod:`mpslinalg.svd`) over a device path.

:func:`svd_tall` runs the preconditioned one-sided Jacobi on a batch ``[B, m, n]``, ``m >= n``.
Every step is written here in torch ops; the device path (:mod:`mpslinalg.svd.paths`, chosen once
per call by :func:`mpslinalg.svd.paths.path_for`) may serve a step with a kernel of its own — the
whole algorithm in one kernel (C, Triton), the preconditioner's QR, the Jacobi iteration (torch
ops, Metal, Triton), the finishing step, the completion of ``V`` — and returns None where it has
none, so the torch-op form below runs. No step here asks which device it is on.
"""

from __future__ import annotations

import math

import torch

from ..oplayer import functorch_active
from ..qr import qr_impl
from .kernels import INFO_NOCONV, INFO_NONFINITE, TUNING, thresholds

__all__ = ["complete", "finish", "ldexp", "plain", "pow2_exponent", "pow2_scale", "real_divide", "svd_tall"]


def plain(x: torch.Tensor) -> torch.Tensor:
    """A fresh contiguous copy of ``x`` with its conjugation materialised, in one pass (``resolve_conj``
    then ``contiguous`` of a transposed view is two); under ``torch.func`` transforms the two ops."""
    if functorch_active():
        return x.resolve_conj().contiguous()
    return torch.empty(x.shape, dtype=x.dtype, device=x.device).copy_(x)


def lapack_smlnum(dtype: torch.dtype) -> float:
    """LAPACK's ``SMLNUM = sqrt(sfmin)/eps`` of ``dtype`` (real or complex); ``BIGNUM = 1/SMLNUM``:
    inside ``[SMLNUM, BIGNUM]`` LAPACK's drivers scale nothing."""
    fi = torch.finfo(dtype)
    return math.sqrt(fi.tiny) / fi.eps


def ldexp(x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """``x·2^e`` for any exponent the family's scalings produce (``|e| <= 3·126``, float32 too).

    ``torch.ldexp`` forms ``2^e`` in ``x``'s dtype first, which overflows for ``e >= 128`` in
    float32 (a subnormal matrix's scale ``2^148``) and loses ``x`` below ``2^-149``; here ``2^e``
    is applied as up to three normal powers of two of the same sign, the largest last, so each
    product is exact until the last one rounds (for ``|e| <= 126`` it is ``x·2^e``'s one product).
    """
    real = x.real.dtype if x.is_complex() else x.dtype
    big = -int(math.log2(torch.finfo(real).tiny))  # 126 for float32: 2^±126 are normal numbers
    e1 = e.clamp(-big, big)
    e2 = (e - e1).clamp(-big, big)
    f1, f2, f3 = (torch.ldexp(torch.ones_like(k, dtype=real), k.to(real)).to(x.dtype) for k in (e1, e2, e - e1 - e2))
    return x * f3 * f2 * f1


def real_divide(x: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """``x / d`` for a real ``d`` (broadcast), component by component when ``x`` is complex: torch's
    complex division (``d`` promoted to complex) is NaN or inf for a subnormal ``d``."""
    if not x.is_complex():
        return x / d
    return torch.view_as_complex(torch.view_as_real(x) / d[..., None])


def pow2_exponent(A: torch.Tensor, dims=(-2, -1)) -> tuple[torch.Tensor, torch.Tensor]:
    """``(e, finite)``: per matrix (reduced over ``dims``) the exponent with ``max |a_ij|·2^-e`` in
    ``[1/2, 1)`` (0 for zero and non-finite matrices), and whether the matrix is finite."""
    amax = A.abs().amax(dim=dims)
    finite = torch.isfinite(amax)
    usable = finite & (amax > 0)
    _, e = torch.frexp(torch.where(usable, amax, torch.ones_like(amax)))
    return torch.where(usable, e, torch.zeros_like(e)), finite


def pow2_scale(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(A·2^-e, e, finite)`` per matrix of ``A [B, m, n]``: max |entry| of the scaled matrix in
    ``[1/2, 1)`` (exact; subnormal and huge inputs alike, :func:`ldexp`)."""
    e, finite = pow2_exponent(A)
    return ldexp(A, -e[:, None, None]), e, finite


def finish(X: torch.Tensor, V: torch.Tensor | None, cperm: torch.Tensor, e: torch.Tensor, finite: torch.Tensor,
           rotated: torch.Tensor):
    """``(S, S_out, info, V_A, Vj)`` from the Jacobi's ``W = X`` and ``V`` by torch ops: the contract of
    :func:`mpslinalg.svd.triton_complete.finish` (CUDA's one launch)."""
    n = X.shape[-1]
    # column norms of the columns scaled by the power of two of their largest entry (exact, no
    # division: a complex division by a subnormal is NaN): a column of ~1e-22 (rank-deficient
    # input) has squares below float32's normal range, and an unscaled norm leaves V = W Σ⁻¹ not unit
    colmax = X.abs().amax(dim=-2)
    tiny_e = int(math.log2(torch.finfo(colmax.dtype).tiny))
    ex = torch.frexp(torch.where(colmax > 0, colmax, torch.ones_like(colmax))).exponent.clamp_min(tiny_e + 1)
    one = torch.ones_like(colmax)
    S = torch.linalg.vector_norm(X * torch.ldexp(one, -ex)[:, None, :].to(X.dtype), dim=-2) * torch.ldexp(one, ex)
    S, order = S.sort(dim=-1, descending=True, stable=True)
    info = torch.where(rotated, INFO_NOCONV, 0).to(torch.int32)
    info = torch.where(finite, info, INFO_NONFINITE).to(torch.int32)
    nan = torch.full_like(S, float("nan"))
    S_out = torch.where(finite[:, None], ldexp(S, e[:, None]), nan)
    if V is None:
        return S, S_out, info, None, None
    W = X.gather(-1, order[:, None, :].expand(-1, n, -1))
    Vj = V.gather(-1, order[:, None, :].expand(-1, n, -1))
    Ux = real_divide(W, torch.where(S > 0, S, torch.ones_like(S))[:, None, :])
    # V_A = Pc Ux: row i of Ux belongs to column cperm[i] of A
    return S, S_out, info, Ux.gather(-2, cperm.argsort(dim=-1)[:, :, None].expand(-1, -1, n)), Vj


def complete(Ux: torch.Tensor, S: torch.Tensor, host_reads: bool, path) -> torch.Tensor:
    """Replace the columns of ``Ux`` whose ``S`` is zero (or negligible) by an orthonormal completion.

    ``S`` is sorted descending, so zero columns are last; Householder QR of ``Ux`` (zero columns
    included) returns, in its first columns, ``±`` the computed ones and, after them, an orthonormal
    basis of their complement. Negligible: ``σ_j <= √tiny·σ₁`` — the squares of such columns
    underflow (float32 columns of ~1e-22 beside ``σ₁ ≈ 1``, from the rounding noise of a
    rank-deficient matrix), so Jacobi cannot orthogonalise them; replacing them moves ``A``'s
    reconstruction by at most ``σ_j``, far below ``u·‖A‖``.
    """
    cut = math.sqrt(torch.finfo(S.dtype).tiny)
    if host_reads and S.shape[0] == 1 and S.is_cpu:  # one CPU matrix: its σ₁ and σ_n as floats (8x8's overhead)
        first, last = S[0, 0].item(), S[0, -1].item()
        if last > cut * first:  # descending: no zero column (NaN compares False: the general test)
            return Ux
    zero = S <= cut * S[..., :1]
    if host_reads and not bool(zero.any()):  # skip the QR when nothing needs completing
        return Ux
    out = path.complete(Ux, zero)
    if out is not None:
        return out
    Qc, _ = qr_impl(Ux, "complete")
    return torch.where(zero[:, None, :], Qc, Ux)


def device_svd(X: torch.Tensor, compute_uv: bool):
    """Orders above the path's Jacobi range: the device's own SVD (LAPACK/cuSOLVER,
    bidiagonalisation) of the preconditioned factor, returned in the Jacobi contract's form
    ``(X V, V, rotated=False)``. Not relatively accurate for graded matrices and, on CUDA, torch
    checks its ``info`` on the host."""
    not_rotated = torch.zeros(X.shape[0], dtype=torch.bool, device=X.device)
    if not compute_uv:
        return torch.diag_embed(torch.linalg.svdvals(X)).to(X.dtype), None, not_rotated
    Ux, S, Vh = torch.linalg.svd(X, full_matrices=False)
    return Ux * S[:, None, :].to(X.dtype), Vh.mH, not_rotated


def svd_tall(A: torch.Tensor, full: bool, compute_uv: bool, path):
    """SVD of a batch ``[B, m, n]`` with ``m >= n >= 1`` on ``path``. Returns ``(U, S, V, info)``
    (``V``, not ``Vh``)."""
    Bn, m, n = A.shape
    rdt = A.real.dtype if A.is_complex() else A.dtype
    sweeps, early = TUNING.sweeps(A.device, rdt, n)
    early = early and not functorch_active()  # early: host reads are free (CPU, no transform)
    whole = path.whole(A, full, compute_uv, sweeps)  # the same algorithm in one kernel
    if whole is not None:
        U, S, V, info, completed = whole
        if compute_uv and not completed:  # the zero-σ columns of V completed here
            V = complete(V, S, early, path)
        return U, S, V, info

    # 1. scaling by a power of two
    As, e, finite = pow2_scale(A)
    As = As.masked_fill(~finite[:, None, None], 0)
    large = path.large(As, e, finite, full, compute_uv)  # a bidiagonalising SVD of As itself
    if large is not None:
        U, S, V = large
        return U, S, V, torch.where(finite, 0, INFO_NONFINITE).to(torch.int32)

    # 2. preconditioning: row sort (max-norm), column sort (2-norm), Householder QR
    rperm = As.abs().amax(-1).argsort(dim=-1, descending=True, stable=True)
    As = As.gather(-2, rperm[:, :, None].expand(-1, -1, n))
    cperm = torch.linalg.vector_norm(As, dim=-2).argsort(dim=-1, descending=True, stable=True)
    As = As.gather(-1, cperm[:, None, :].expand(-1, m, -1))
    qr = path.qr(As, compute_uv)
    if qr is not None:
        Q, R = qr
    elif compute_uv:
        Q, R = qr_impl(As, "complete" if full else "reduced")
    else:
        Q, R = None, qr_impl(As, "r")[1]
    R = R[:, :n, :]

    # 3-4. one-sided Jacobi on X = Rᴴ, padded to an even number of columns
    jacobi_free = path.jacobi_free(n)
    if jacobi_free:
        X, V, rotated = device_svd(R.mH, compute_uv)
    else:
        npad = n + (n % 2)
        X = plain(R.mH) if npad == n else torch.nn.functional.pad(R.mH.resolve_conj(), (0, 1, 0, 1)).contiguous()
        V = None
        if compute_uv and m == n:  # the rotations start from Q: V ends as U_A's columns (no Q V_x after)
            V = (Q if npad == n else torch.nn.functional.pad(Q, (0, 1, 0, 1))).contiguous()  # Q: rotated in place
        elif compute_uv:
            V = torch.eye(npad, dtype=A.dtype, device=A.device).expand(Bn, -1, -1).contiguous()
        tol, ctol = thresholds(npad, rdt)
        X, V, rotated = path.jacobi(X, V, sweeps, tol, ctol, early)
        X, V = X[:, :n, :n], (V[:, :n, :n] if V is not None else None)

    # 5. σ, their order, V = Pc W Σ⁻¹ (completed), U = Prᵀ Q [Vj 0; 0 I]
    out = path.finish(X, V, cperm, e, finite, rotated)
    if out is None:
        out = finish(X, V, cperm, e, finite, rotated)
    S, S_out, info, Vout, Vj = out
    if not compute_uv:
        return None, S_out, None, info
    Vout = complete(Vout, S, early, path)
    # square A after the Jacobi: Vj is Q V_x's sorted columns already
    Un = Vj if m == n and V is not None and not jacobi_free else Q[:, :, :n] @ Vj
    Uq = torch.cat([Un, Q[:, :, n:]], dim=-1) if full else Un
    Uout = Uq.gather(-2, rperm.argsort(dim=-1)[:, :, None].expand(-1, -1, Uq.shape[-1]))
    bad = ~finite[:, None, None]
    return Uout.masked_fill(bad, float("nan")), S_out, Vout.masked_fill(bad, float("nan")), info
