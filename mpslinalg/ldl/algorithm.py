"""The LDL family's algorithms, written once over a kernel object (:mod:`mpslinalg.ldl.kernels`):
Bunch–Kaufman ``sytrf``/``hetrf`` (lower) and the solve ``sytrs``/``hetrs`` from its factors."""

from __future__ import annotations

import math

import torch

from ..oplayer import functorch_active as _functorch
from .kernels import TUNING, _op, _swap_rows, factor_torch, kernels_for, small_fits


def ldl_factor_impl(A: torch.Tensor, hermitian: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch.linalg.ldl_factor_ex`` without checks: ``(LD, pivots, info)`` of ``A (*, n, n)``.

    Matrices that fit ``ldl_small``'s tile are one Metal dispatch on the kernel backends; all others
    (and every matrix on the ``torch`` backend) take the blocked torch-op factorization (one panel
    up to :attr:`Tuning.small_max`). No host synchronisation.
    """
    batch, n = A.shape[:-2], A.shape[-1]
    if _functorch():  # vmap: torch's kernel has a batching rule, ours write in place
        LD, piv, info = torch.linalg.ldl_factor_ex(A, hermitian=hermitian)
        return LD, piv, info
    B = math.prod(batch)
    X = A.reshape(B, n, n)
    kern = kernels_for(A)
    if kern.name == "metal" and small_fits(n, A.dtype):
        LD = X.resolve_conj().resolve_neg().contiguous().clone()
        piv = torch.empty(B, n, dtype=torch.int32, device=A.device)
        info = torch.empty(B, dtype=torch.int32, device=A.device)
        kern.small(LD, piv, info, hermitian)
    elif B == 0 or n == 0:
        LD = X.new_zeros(B, n, n)
        piv = torch.zeros(B, n, dtype=torch.int32, device=A.device)
        info = torch.zeros(B, dtype=torch.int32, device=A.device)
    else:
        LD, piv, info = factor_torch(X, hermitian, TUNING.nb)
    return LD.reshape(*batch, n, n), piv.reshape(*batch, n), info.reshape(batch)


def ldl_solve_impl(LD: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, hermitian: bool) -> torch.Tensor:
    """``torch.linalg.ldl_solve`` without checks: ``X`` with ``A X = B`` from LAPACK's ``(LD, pivots)``.

    LAPACK ``sytrs``/``hetrs`` (lower): ``L D Y = P B`` column by column (the interchange of each
    step, then its rank-1 or rank-2 update of the rows below, then the 1x1 or 2x2 block of ``D``),
    then ``Lᴴ`` backwards with the interchanges undone, vectorised over the batch and the
    right-hand sides (the batch in lockstep, as the factorization). ``LD``'s batch broadcasts with
    ``B``'s.
    """
    n, nrhs = LD.shape[-1], B.shape[-1]
    batch = torch.broadcast_shapes(LD.shape[:-2], B.shape[:-2])
    if _functorch():
        return torch.linalg.ldl_solve(LD, pivots, B, hermitian=hermitian)
    Bt = math.prod(batch)
    L = LD.expand(*batch, n, n).reshape(Bt, n, n)
    piv = pivots.expand(*batch, n).reshape(Bt, n).long()
    X = B.expand(*batch, n, nrhs).reshape(Bt, n, nrhs).clone()
    if Bt == 0 or n == 0 or nrhs == 0:
        return X.reshape(*batch, n, nrhs)
    herm = hermitian and LD.is_complex()
    second = _forward(L, piv, X, herm)
    _backward(L, piv, X, herm, second)
    return X.reshape(*batch, n, nrhs)


def _diag_2x2(L: torch.Tensor, k: int, herm: bool):
    """``(akm1k, akm1, ak, denom)`` of the 2x2 block of ``D`` at ``(k, k+1)`` (``sytrs``/``hetrs``)."""
    akm1k = L[:, k + 1, k]
    akm1 = L[:, k, k] / _op(akm1k, herm)
    ak = L[:, k + 1, k + 1] / akm1k
    return akm1k, akm1, ak, akm1 * ak - 1


def _forward(L: torch.Tensor, piv: torch.Tensor, X: torch.Tensor, herm: bool) -> torch.Tensor:
    """``X <- D⁻¹ L⁻¹ P X`` in place (``sytrs``'s first loop); returns ``second [B, n]``: the
    columns that are the second of a 2x2 block."""
    Bt, n, _ = X.shape
    skip = torch.zeros(Bt, dtype=torch.bool, device=X.device)
    seconds = []
    for k in range(n):
        seconds.append(skip)
        act = ~skip
        two = act & (piv[:, k] < 0) if k + 1 < n else torch.zeros_like(act)
        kk = k + two.long()
        kp = torch.where(act, piv[:, k].abs() - 1, kk)
        _swap_rows(X, kk, kp, 1)
        if k + 1 < n:
            ck = L[:, k + 1:, k].clone()
            ck[:, 0] = torch.where(two, 0, ck[:, 0])
            ck = torch.where(act[:, None], ck, 0)
            X[:, k + 1:] -= ck[..., None] * X[:, k:k + 1]
            if k + 2 < n:
                ck1 = torch.where(two[:, None], L[:, k + 2:, k + 1], 0)
                X[:, k + 2:] -= ck1[..., None] * X[:, k + 1:k + 2]
        d = L[:, k, k]
        r1 = 1 / (d.real if herm else d)
        one = X[:, k] * r1[:, None]
        X[:, k] = torch.where((act & ~two)[:, None], one, X[:, k])
        if k + 1 < n:
            akm1k, akm1, ak, denom = _diag_2x2(L, k, herm)
            bkm1 = X[:, k] / _op(akm1k, herm)[:, None]
            bk = X[:, k + 1] / akm1k[:, None]
            new_k = (ak[:, None] * bkm1 - bk) / denom[:, None]
            new_k1 = (akm1[:, None] * bk - bkm1) / denom[:, None]
            X[:, k] = torch.where(two[:, None], new_k, X[:, k])
            X[:, k + 1] = torch.where(two[:, None], new_k1, X[:, k + 1])
        skip = two
    return torch.stack(seconds, dim=-1)


def _backward(L: torch.Tensor, piv: torch.Tensor, X: torch.Tensor, herm: bool, second: torch.Tensor) -> None:
    """``X <- Pᵀ L⁻ᴴ X`` in place (``sytrs``'s second loop, ``k = n-1 .. 0``)."""
    Bt, n, _ = X.shape
    for k in range(n - 1, -1, -1):
        two = second[:, k]  # block (k-1, k)
        first = second[:, k + 1] if k + 1 < n else torch.zeros_like(two)  # handled at k+1
        act = ~first
        if k + 1 < n:
            tail = X[:, k + 1:]
            dk = (_op(L[:, k + 1:, k], herm)[..., None] * tail).sum(1)
            X[:, k] = torch.where(act[:, None], X[:, k] - dk, X[:, k])
            if k > 0:
                dk1 = (_op(L[:, k + 1:, k - 1], herm)[..., None] * tail).sum(1)
                X[:, k - 1] = torch.where(two[:, None], X[:, k - 1] - dk1, X[:, k - 1])
        kp = torch.where(act, piv[:, k].abs() - 1, torch.full_like(piv[:, k], k))
        _swap_rows(X, torch.full_like(kp, k), kp, 1)

