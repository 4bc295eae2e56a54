"""SciPy/LAPACK references of the orthogonal factorizations (``qr``, ``svd``, ``svdvals``, ``cond``,
``pinv``, ``lstsq``) with ``torch.linalg``'s conventions.

The conventions (float64/complex128 of the rounded input, batching, shapes) are those of
:mod:`reference.lapack`, which re-exports every name here: import them from there. A batch
element with a NaN or inf entry gives NaN outputs, instead of LAPACK's undefined behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla
import torch

from ._common import all_finite as _finite
from ._common import check_square as _square
from ._common import check_tensor as _check
from ._common import flat_batch as _flat
from ._common import is_vector_rhs as _is_vector_rhs
from ._common import wide as _wide
from ._common import wide_dtype as _wide_dtype

__all__ = ["LstsqResult", "cond", "lstsq", "pinv", "qr", "svd", "svdvals"]


def _map(
    A: torch.Tensor,
    fn: Callable[[np.ndarray], tuple[np.ndarray, ...]],
    shapes: tuple[tuple[int, ...], ...],
    dtypes: tuple[np.dtype, ...],
) -> tuple[torch.Tensor, ...]:
    """Apply ``fn`` to each matrix of ``A`` (widened); outputs of given core shapes/dtypes.
    A matrix with a non-finite entry yields NaN outputs."""
    batch = tuple(A.shape[:-2])
    a = _flat(_wide(A), batch, 2)
    outs = [np.empty((a.shape[0], *s), dtype=d) for s, d in zip(shapes, dtypes)]
    for i in range(a.shape[0]):
        if not _finite(a[i]):
            for o in outs:
                o[i] = np.nan
            continue
        res = fn(a[i])
        for o, r in zip(outs, res):
            o[i] = r
    return tuple(torch.from_numpy(o).reshape(*batch, *o.shape[1:]) for o in outs)


def qr(A: torch.Tensor, mode: str = "reduced") -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.qr`` in float64/complex128 (``xGEQRF`` + ``xORGQR``/``xUNGQR``).

    LAPACK's Householder conventions, as torch's CPU path: ``R``'s diagonal is real for real input
    and may be negative.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.
    mode : {"reduced", "complete", "r"}
        As in torch; ``"r"`` returns an empty ``Q``.

    Returns
    -------
    Q, R : torch.Tensor
        float64/complex128.
    """
    _check("A", A)
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    m, n = A.shape[-2:]
    k = min(m, n)
    if m == 0 or n == 0:
        return torch.linalg.qr(_wide(A), mode=mode)
    dt = np.complex128 if A.is_complex() else np.float64
    if mode == "r":
        (R,) = _map(A, lambda a: (sla.qr(a, mode="r", check_finite=False)[0][:k],), ((k, n),), (dt,))
        return torch.empty(0, dtype=R.dtype), R
    full = mode == "complete"
    qc = m if full else k
    return _map(
        A,
        lambda a: tuple(sla.qr(a, mode="full" if full else "economic", check_finite=False)),
        ((m, qc), (qc, n)),
        (dt, dt),
    )


def svd(A: torch.Tensor, full_matrices: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch.linalg.svd`` in float64/complex128 (LAPACK ``xGESVD``, the QR-iteration driver,
    chosen over ``xGESDD`` for robustness).

    Singular values are accurate to ``≈ max(m,n)·2**-53·σ₁`` **absolutely**; small ones relative
    to ``σ₁`` lose accuracy (use :func:`reference.mp.svdvals` for relative accuracy).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.
    full_matrices : bool
        As in torch (default ``True``).

    Returns
    -------
    U, S, Vh : torch.Tensor
        ``U`` ``(..., m, m|k)``, ``S`` float64 ``(..., k)`` non-increasing, ``Vh`` ``(..., n|k, n)``.
    """
    _check("A", A)
    m, n = A.shape[-2:]
    k = min(m, n)
    if m == 0 or n == 0:
        return torch.linalg.svd(_wide(A), full_matrices=full_matrices)
    dt = np.complex128 if A.is_complex() else np.float64
    uc, vr = (m, n) if full_matrices else (k, k)
    return _map(
        A,
        lambda a: tuple(sla.svd(a, full_matrices=full_matrices, check_finite=False, lapack_driver="gesvd")),
        ((m, uc), (k,), (vr, n)),
        (dt, np.float64, dt),
    )


def svdvals(A: torch.Tensor) -> torch.Tensor:
    """``torch.linalg.svdvals`` in float64 (``xGESVD`` without vectors).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.

    Returns
    -------
    torch.Tensor
        float64 ``(..., min(m, n))``, non-increasing; absolutely accurate (see :func:`svd`).
    """
    _check("A", A)
    m, n = A.shape[-2:]
    k = min(m, n)
    if k == 0:
        return torch.linalg.svdvals(_wide(A))
    (S,) = _map(
        A,
        lambda a: (sla.svd(a, compute_uv=False, check_finite=False, lapack_driver="gesvd"),),
        ((k,),),
        (np.float64,),
    )
    return S


def cond(A: torch.Tensor) -> torch.Tensor:
    """2-norm condition number ``σ₁/σₙ`` in float64 (``inf`` if ``σₙ = 0``).

    Only reliable while ``κ ≲ 1e14``: beyond that ``σₙ`` is rounding noise (use
    :func:`reference.mp.cond`).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.

    Returns
    -------
    torch.Tensor
        float64 ``(...)``.
    """
    S = svdvals(A)
    return S[..., 0] / S[..., -1]


def _default_rtol(A: torch.Tensor) -> float:
    # torch.linalg.pinv / lstsq default: eps of A's dtype (finfo.eps, not u) times max(m, n)
    return torch.finfo(A.dtype).eps * max(A.shape[-2], A.shape[-1])


def pinv(
    A: torch.Tensor,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    hermitian: bool = False,
) -> torch.Tensor:
    """``torch.linalg.pinv`` in float64/complex128 via :func:`svd` (or ``eigh`` if
    ``hermitian``).

    Singular values ``σ > max(atol, rtol·σ₁)`` are inverted, the rest dropped. The default tolerance
    follows torch **for the input's dtype** (``rtol = finfo(A.dtype).eps·max(m, n)`` when neither
    ``atol`` nor ``rtol`` is given, 0 when only ``atol`` is), so that the reference drops the same
    singular values as a float32 computation would.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.
    atol, rtol : float, optional
        Absolute and relative cut-offs.
    hermitian : bool
        Use ``eigh`` of the (lower triangle of the) Hermitian ``A``.

    Returns
    -------
    torch.Tensor
        float64/complex128 ``(..., n, m)``.
    """
    _check("A", A)
    if rtol is None:
        rtol = _default_rtol(A) if (atol is None or atol == 0) else 0.0
    atol = 0.0 if atol is None else float(atol)
    m, n = A.shape[-2:]
    if m == 0 or n == 0:
        return torch.linalg.pinv(_wide(A))
    if hermitian:
        _square("A", A)
        dt = np.complex128 if A.is_complex() else np.float64

        def f(a: np.ndarray) -> tuple[np.ndarray]:
            w, v = np.linalg.eigh(a)  # reads the lower triangle, as torch does
            cut = max(atol, rtol * np.abs(w).max())
            keep = np.abs(w) > cut
            winv = np.where(keep, 1.0 / np.where(keep, w, 1.0), 0.0)
            return ((v * winv) @ v.conj().T,)

        return _map(A, f, ((n, n),), (dt,))[0]
    U, S, Vh = svd(A, full_matrices=False)
    cut = torch.maximum(torch.tensor(atol, dtype=torch.float64), rtol * S[..., :1])
    keep = S > cut
    Sinv = torch.where(keep, 1.0 / torch.where(keep, S, torch.ones_like(S)), torch.zeros_like(S))
    return (Vh.mH * Sinv.unsqueeze(-2).to(Vh.dtype)) @ U.mH


class LstsqResult(NamedTuple):
    """Result of :func:`lstsq` (the fields of ``torch.linalg.lstsq``)."""

    solution: torch.Tensor
    residuals: torch.Tensor
    rank: torch.Tensor
    singular_values: torch.Tensor


def lstsq(A: torch.Tensor, B: torch.Tensor, rcond: float | None = None) -> LstsqResult:
    """Minimum-norm least-squares solution of ``min ‖AX − B‖₂`` in float64/complex128, via the SVD.

    Singular values ``σ ≤ rcond·σ₁`` are treated as zero; default ``rcond`` follows torch **for the
    input's dtype** (``finfo(A.dtype).eps·max(m, n)``). For full-rank ``A`` this is the unique
    solution every ``torch.linalg.lstsq`` driver returns; for rank-deficient ``A`` it is the
    minimum-norm one (drivers ``gelsy``, ``gelsd``, ``gelss``).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.
    B : torch.Tensor
        ``(..., m, k)`` or ``(..., m)`` (torch's vector rule).
    rcond : float, optional
        Relative cut-off.

    Returns
    -------
    LstsqResult
        ``solution`` ``(..., n, k)``; ``residuals`` = squared 2-norms of the residual columns
        ``(..., k)`` if ``m > n`` and every matrix has rank ``n``, else empty; ``rank`` int64
        ``(...)``; ``singular_values`` float64 ``(..., min(m, n))``. (torch fills ``residuals``,
        ``rank`` and ``singular_values`` only for some drivers; the reference always does.)
    """
    _check("A", A)
    _check("B", B, 1)
    vec = _is_vector_rhs(A, B)
    Bm = B.unsqueeze(-1) if vec else B
    m, n = A.shape[-2:]
    if Bm.shape[-2] != m:
        raise ValueError(f"B must have {m} rows to match A of shape {tuple(A.shape)}, got {tuple(B.shape)}")
    if rcond is None:
        rcond = _default_rtol(A)
    dt = _wide_dtype(A, B)
    U, S, Vh = svd(_wide(A, dt), full_matrices=False)
    keep = S > rcond * S[..., :1] if S.shape[-1] else torch.zeros_like(S, dtype=torch.bool)
    Sinv = torch.where(keep, 1.0 / torch.where(keep, S, torch.ones_like(S)), torch.zeros_like(S))
    Bw = _wide(Bm, dt)
    X = Vh.mH @ (Sinv.unsqueeze(-1).to(dt) * (U.mH @ Bw))
    rank = keep.sum(-1)
    if m > n and bool((rank == n).all()):
        res = ((Bw - _wide(A, dt) @ X).abs() ** 2).sum(-2)
    else:
        res = torch.empty(0, dtype=torch.float64)
    if vec:
        X = X.squeeze(-1)
        if res.numel():
            res = res.squeeze(-1)
    return LstsqResult(X, res, rank, S)
