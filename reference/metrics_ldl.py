"""LAPACK-style test ratios of Bunch–Kaufman (LDL) factorizations (``xSYT01``/``xHET01``), beside
:mod:`reference.metrics` (which re-exports them) to keep each module under 800 lines."""

from __future__ import annotations

import torch

from .metrics import _amax, _colnorms1, _pair, _ratio, _u_of, _wide

__all__ = ["ldl_ratio", "ldl_unpack"]


def ldl_unpack(LD: torch.Tensor, pivots: torch.Tensor, *, hermitian: bool = False):
    """``(perm, L, D)`` of LAPACK's ``sytrf``/``hetrf`` lower output, in float64/complex128, with
    ``P A Pᵀ = L D Lᵀ`` (``Lᴴ`` if ``hermitian``), ``(P A Pᵀ)[i, j] = A[perm[i], perm[j]]``.

    LAPACK stores each column of ``L`` with the interchanges of its own and earlier steps only;
    this applies every later interchange to the earlier columns (the standard form) and builds the
    block diagonal ``D`` (1x1 blocks, 2x2 blocks where ``pivots[k] = pivots[k+1] < 0``). A host
    loop over one matrix at a time: an oracle, not an algorithm.

    Parameters
    ----------
    LD : torch.Tensor
        ``(..., n, n)``.
    pivots : torch.Tensor
        ``(..., n)`` 1-based.
    hermitian : bool

    Returns
    -------
    tuple of torch.Tensor
        ``perm (..., n)`` int64, ``L (..., n, n)`` unit lower, ``D (..., n, n)``.
    """
    LD64 = _wide(LD)
    batch, n = LD64.shape[:-2], LD64.shape[-1]
    flat = LD64.reshape(-1, n, n)
    pv = pivots.reshape(-1, n).to("cpu", torch.int64)
    perms, Ls, Ds = [], [], []
    for b in range(flat.shape[0]):
        A, p = flat[b], pv[b].tolist()
        L = torch.eye(n, dtype=A.dtype)
        D = torch.zeros(n, n, dtype=A.dtype)
        perm = list(range(n))
        k = 0
        while k < n:
            two = p[k] < 0 and k + 1 < n
            kk, kp = k + int(two), abs(p[k]) - 1
            perm[kk], perm[kp] = perm[kp], perm[kk]
            L[[kk, kp], :k] = L[[kp, kk], :k]  # the deferred interchange on the earlier columns
            step = 2 if two else 1
            L[k + step:, k:k + step] = A[k + step:, k:k + step]
            D[k, k] = A[k, k]
            if two:
                D[k + 1, k + 1], D[k + 1, k] = A[k + 1, k + 1], A[k + 1, k]
                D[k, k + 1] = A[k + 1, k].conj() if hermitian else A[k + 1, k]
            k += step
        perms.append(torch.tensor(perm, dtype=torch.int64))
        Ls.append(L)
        Ds.append(D)
    if not Ls:
        return (torch.zeros(*batch, n, dtype=torch.int64), LD64.new_zeros(*batch, n, n),
                LD64.new_zeros(*batch, n, n))
    return (torch.stack(perms).reshape(*batch, n), torch.stack(Ls).reshape(*batch, n, n),
            torch.stack(Ds).reshape(*batch, n, n))


def _symmetric_lower(A: torch.Tensor, hermitian: bool) -> torch.Tensor:
    low = A.tril(-1)
    d = A.diagonal(dim1=-2, dim2=-1)
    d = d.real.to(A.dtype) if hermitian and A.is_complex() else d
    return low + torch.diag_embed(d) + (low.mH if hermitian else low.mT)


def ldl_ratio(A: torch.Tensor, LD: torch.Tensor, pivots: torch.Tensor, *, hermitian: bool = False,
              u: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """LAPACK ``xSYT01``/``xHET01``: ``‖P A Pᵀ − L D Lᴴ‖₁ / (n ‖A‖₁ u)``, and the growth factor.

    ``A`` is the symmetric (Hermitian) matrix of ``A``'s lower triangle, as LAPACK reads it. The
    growth factor ``‖ |L| |D| |L|ᵀ ‖₁ / ‖A‖₁`` is what the backward error bound of Bunch–Kaufman
    carries (``|ΔA| <= p(n) u |L||D||Lᵀ|``, Higham, *Accuracy and Stability*, Thm 11.3): the ratio
    stays below the pass mark when the growth does.

    Returns
    -------
    tuple of torch.Tensor
        ``(ratio, growth)``, float64, the batch shape.
    """
    uu = _u_of(u, LD)
    perm, L, D = ldl_unpack(LD, pivots, hermitian=hermitian)
    (A64,) = _pair(A)
    S = _symmetric_lower(A64, hermitian)
    L, D = L.to(S.dtype), D.to(S.dtype)
    idx = perm[..., :, None].expand(*perm.shape, S.shape[-1])
    PAP = S.gather(-2, idx).gather(-1, perm[..., None, :].expand(*perm.shape[:-1], S.shape[-1], S.shape[-1]))
    Lt = L.mH if hermitian else L.mT
    R = PAP - L @ D @ Lt
    n = S.shape[-1]
    normA = _amax(_colnorms1(S), -1)
    ratio = _ratio(_amax(_colnorms1(R), -1), n * normA * uu)
    growth = _ratio(_amax(_colnorms1(L.abs() @ D.abs() @ L.abs().mT), -1), normA)
    return ratio, growth
