"""Householder TSQR for tall-skinny ``qr`` (``m >> n``, reduced mode): unconditionally stable.

Tree (Demmel, Grigori, Hoemmen, Langou 2012): split the rows into leaves of ``L`` rows, QR of all
leaves as one batched small QR (``qr_plain``: the whole-matrix kernel), stack the ``n x n`` ``R``
factors and recurse until one leaf is left; ``Q`` is the product of the levels' ``Q`` factors,
applied top-down as one batched matrix product per level. Every factorization is Householder, so
orthogonality holds at any condition number (CholeskyQR fails near κ ≈ 1e4 in float32).

LAPACK's signs: a QR of ``A`` with a real, non-zero diagonal of ``R`` determines the Householder
vectors of ``geqrf(A)`` (they depend on each column's direction only). Reconstructing them from the
orthonormal ``Q`` (Ballard et al., "Reconstructing Householder vectors from TSQR", 2014) is an LU
without pivoting of ``Q₁ - S`` (``Q₁`` the first ``n`` rows) where ``S_jj = -sign(Re u_jj)`` is
chosen on the fly from the pivot ``u_jj`` — exactly ``larfg``'s ``beta`` of that column. Then
``geqrf``'s ``R = S R_tsqr`` and ``Q = Q_tsqr S``: the result equals ``torch.linalg.qr`` up to
rounding, signs included (for full-rank input; a rank-deficient ``A`` has no unique ``Q``).
"""

from __future__ import annotations

import math

import torch

from ..oplayer import checks as E


def _signs_torch(Q1: torch.Tensor) -> torch.Tensor:
    """``S`` (real, ``±1``, ``[B, n]``) of the modified LU of ``Q₁ - S``, vectorised over the batch."""
    U = Q1.clone()
    n = U.shape[-1]
    rdt = U.real.dtype if U.is_complex() else U.dtype
    s = torch.empty(U.shape[:-1], dtype=rdt, device=U.device)
    for j in range(n):
        p = U[:, j, j]
        sj = torch.where((p.real if p.is_complex() else p) >= 0, -1.0, 1.0).to(rdt)
        s[:, j] = sj
        d = p - sj  # |d| >= 1: no breakdown, no pivoting needed
        if j + 1 < n:
            lcol = U[:, j + 1:, j] / d[:, None]
            U[:, j + 1:, j + 1:] -= lcol[:, :, None] * U[:, j, None, j + 1:]
    return s


def _leaf_rows(M: int, N: int, limit: int) -> int:
    """Rows per leaf: a divisor of ``M`` in ``[2N, limit]`` when one exists (no padding copy),
    else ``limit``."""
    for L in range(limit, 2 * N - 1, -1):
        if M % L == 0:
            return L
    return limit


def _tsqr3(A3: torch.Tensor, limit: int, leaf_qr) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Q [B, M, N], R [B, N, N])`` of the contiguous ``A3`` (signs of the tree, real diagonal)."""
    B, M, N = A3.shape
    if M <= limit:
        return leaf_qr(A3)
    L = _leaf_rows(M, N, limit)
    P = -(-M // L)
    X = A3
    if P * L != M:  # zero rows at the end: their Householder entries are 0, Q's rows there are 0
        X = torch.cat([A3, A3.new_zeros(B, P * L - M, N)], dim=1)
    Q1, R1 = leaf_qr(X.reshape(B * P, L, N))
    Q2, R = _tsqr3(R1.reshape(B, P * N, N), limit, leaf_qr)
    Q = torch.matmul(Q1, Q2.reshape(B * P, N, N)).reshape(B, P * L, N)
    return (Q[:, :M] if P * L != M else Q), R


def tsqr(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Reduced ``(Q, R)`` of tall-skinny ``A [..., M, N]`` with LAPACK's signs (module docstring)."""
    from .algorithm import qr_plain, tsqr_leaf_limit

    batch = A.shape[:-2]
    M, N = A.shape[-2], A.shape[-1]
    A3 = E.resolved(A).reshape(math.prod(batch), M, N)
    if A3.shape[0] == 0:
        return qr_plain(A, "reduced")
    limit = tsqr_leaf_limit(A3)

    def leaf_qr(X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return qr_plain(X, "reduced")

    Q, R = _tsqr3(A3, limit, leaf_qr)
    S = _signs(Q[:, :N, :])
    R = R * S[:, :, None].to(R.dtype)
    Q = Q * S[:, None, :].to(Q.dtype)
    return Q.reshape(*batch, M, N), R.reshape(*batch, N, N)


def _signs(Q1: torch.Tensor) -> torch.Tensor:
    from .kernels import _triton_ok

    if _triton_ok(Q1):
        from .triton import lapack_signs

        return lapack_signs(Q1)
    return _signs_torch(Q1)
