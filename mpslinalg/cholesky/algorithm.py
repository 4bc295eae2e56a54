"""The Cholesky family's algorithms, written once over a kernel object (see :mod:`mpslinalg.cholesky`):
the factorization (whole-matrix kernel, or recursive blocked right-looking with panel kernels, the
triangular family's solve and matrix products), ``cholesky_solve``, ``cholesky_inverse``."""

from __future__ import annotations

import math

import torch

from ..oplayer import checks as E
from ..oplayer import functorch_active as _functorch
from .kernels import TUNING, clear_failed, kernels_for, on_kernels


def _trsm(A: torch.Tensor, B: torch.Tensor, *, upper: bool, left: bool) -> torch.Tensor:
    """Triangular solve through the triangular family (its kernels on mps and the emulator)."""
    if _functorch():
        return torch.linalg.solve_triangular(A, B, upper=upper, left=left)
    from ..triangular import trsm

    return trsm(A, B, upper=upper, left=left)


# --------------------------------------------------------------------------------------------------
# The factorization
# --------------------------------------------------------------------------------------------------


def _direct(A: torch.Tensor) -> bool:
    """The ``torch`` backend hands the whole call to the device's ``potrf`` (one call)."""
    if _functorch():
        return True
    if on_kernels(A):
        return False
    return A.shape[-1] <= TUNING.torch_direct_max.get(A.device.type, 2**62)


def cholesky_ex_impl(A: torch.Tensor, upper: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.cholesky_ex`` without checks: ``(L, info)``, fresh contiguous tensors.

    Only the lower (``upper=False``) or upper triangle of ``A`` is read; ``upper=True`` factors
    ``Aᴴ``'s lower triangle and returns ``U = Lᴴ``. ``info`` (int32, batch shape) is the 1-based order
    of the first non-positive (or NaN) leading minor, 0 on success; on the kernels' path a failed
    matrix keeps its first ``info - 1`` columns and has zeros in the others. No host
    synchronisation. Under ``torch.func`` transforms it is ``torch.linalg.cholesky_ex``.
    """
    if _direct(A):
        L, info = torch.linalg.cholesky_ex(A, upper=upper)
        return L.contiguous(), info.contiguous()
    batch, n = A.shape[:-2], A.shape[-1]
    src = A.mH if upper else A
    L = E.resolved(src.tril()).reshape(math.prod(batch), n, n)  # tril copies: the input is never written
    info = torch.zeros(L.shape[0], dtype=torch.int32, device=A.device)
    if L.shape[0] and n:
        potrf(L, info)
    L = L.reshape(*batch, n, n)
    info = info.reshape(batch)
    return (L.mH.contiguous() if upper else L), info


def potrf(L: torch.Tensor, info: torch.Tensor) -> None:
    """Factor the contiguous ``[B, n, n]`` buffer ``L`` (input in its lower triangle, zeros above)
    in place; ``info [B]`` int32, zero on entry.

    Whole-matrix kernel for small ``n``; else LAPACK ``potrf2``'s recursion, right-looking: with
    ``A = [[A11, ·], [A21, A22]]`` split at a multiple of ``nb``, factor ``A11 = L11 L11ᴴ``, solve
    ``L21 L11ᴴ = A21`` (the triangular family), update ``A22 -= L21 L21ᴴ`` (one matrix product, the
    lower and upper halves alike: twice the flops of a ``herk`` on its block, but one GEMM), then
    factor ``A22``; blocks of at most ``nb`` are ``panel`` calls. ``~n³/2`` flops, nearly all in GEMM
    and the solves, ``O(n / nb)`` kernel dispatches.
    """
    kern = kernels_for(L)
    n = L.shape[-1]
    if kern.name == "metal" and n <= TUNING.small_max:
        kern.small(L, info)
        return
    if kern.name == "torch" and n <= TUNING.nb:
        kern.small(L, info)
        return
    nb = TUNING.nb if kern.name == "torch" else min(TUNING.nb, 64)

    def rec(o: int, m: int) -> None:
        if m <= nb:
            kern.panel(L, info, o, m)
            return
        m1 = max(nb, (m // 2) // nb * nb)
        rec(o, m1)
        L11 = L[:, o:o + m1, o:o + m1]
        A21 = L[:, o + m1:o + m, o:o + m1]
        A21.copy_(_trsm(L11.mH, A21, upper=True, left=False))
        A22 = L[:, o + m1:o + m, o + m1:o + m]
        A22.baddbmm_(A21, A21.mH, alpha=-1)
        rec(o + m1, m - m1)

    rec(0, n)
    L.copy_(L.tril())  # the trailing updates wrote the strict upper triangles of the blocks
    clear_failed(L, info)


# --------------------------------------------------------------------------------------------------
# Solves and the inverse
# --------------------------------------------------------------------------------------------------


def cholesky_solve_impl(B: torch.Tensor, L: torch.Tensor, upper: bool) -> torch.Tensor:
    """``torch.cholesky_solve`` without checks: ``X = (L Lᴴ)⁻¹ B`` (``(Uᴴ U)⁻¹ B`` if ``upper``).

    Two triangular solves of the triangular family (``L Y = B``, ``Lᴴ X = Y``); batch dimensions
    broadcast; only the named triangle of ``L`` is read. Fresh contiguous result.
    """
    if _functorch():
        return torch.cholesky_solve(B, L, upper=upper)
    batch = E.broadcast_shapes(B.shape[:-2], L.shape[:-2])
    if math.prod(batch) == 0 or B.shape[-1] == 0 or B.shape[-2] == 0:
        return torch.zeros((*batch, *B.shape[-2:]), dtype=B.dtype, device=B.device)
    # views resolved once (O(n^2) of O(n^3)): a view and its copy take the same solver path, bit for bit
    B, L = E.resolved(B), E.resolved(L)
    if upper:  # A = Uᴴ U
        Y = _trsm(L.mH, B, upper=False, left=True)
        return _trsm(L, Y, upper=True, left=True)
    Y = _trsm(L, B, upper=False, left=True)
    return _trsm(L.mH, Y, upper=True, left=True)


def hermitian_from_lower(X: torch.Tensor) -> torch.Tensor:
    """The Hermitian matrix whose lower triangle is that of ``X`` (real diagonal)."""
    D = X.diagonal(dim1=-2, dim2=-1)
    H = X.tril(-1)
    H = H + H.mH
    return H + torch.diag_embed(D.real.to(X.dtype) if X.is_complex() else D)


def cholesky_inverse_impl(L: torch.Tensor, upper: bool) -> torch.Tensor:
    """``torch.cholesky_inverse`` without checks: ``(L Lᴴ)⁻¹`` (``(Uᴴ U)⁻¹`` if ``upper``).

    LAPACK ``potri``'s two steps: the triangle's inverse ``W = L⁻¹`` (a triangular solve with the
    identity, the triangular family), then ``Wᴴ W`` (one matrix product); the result is made exactly
    Hermitian from its lower triangle (as torch does after ``potri``). Only the named triangle of
    ``L`` is read.
    """
    if _functorch():
        return torch.cholesky_inverse(L, upper=upper)
    n = L.shape[-1]
    if L.numel() == 0:
        return torch.zeros(L.shape, dtype=L.dtype, device=L.device)
    L = E.resolved(L)  # as in cholesky_solve_impl
    eye = torch.eye(n, dtype=L.dtype, device=L.device).expand(L.shape)
    if upper:  # A⁻¹ = U⁻¹ U⁻ᴴ
        W = _trsm(L, eye, upper=True, left=True)
        X = W @ W.mH
    else:  # A⁻¹ = L⁻ᴴ L⁻¹
        W = _trsm(L, eye, upper=False, left=True)
        X = W.mH @ W
    return hermitian_from_lower(X).contiguous()
