"""Oracles for the general eigenproblem and the matrix exponential (issue 32), batched, in
float64/complex128 of the rounded input.

``expm``
    SciPy's ``expm`` (Al-Mohy–Higham Padé scaling and squaring) per matrix.
``expm_ratio``
    The scaled forward error of a computed exponential (a LAPACK-style ratio, pass mark 30).
``eig``
    LAPACK ``geev`` (SciPy) per matrix: eigenvalues and unit 2-norm right eigenvectors, and the
    condition number ``κ(V)`` of the eigenvector matrix.
``eig_residual_ratio``, ``eigvals_distance``
    ``‖A v − λ v‖ / (n ‖A‖ u ‖v‖)`` per eigenpair (LAPACK's ``xGET22`` column by column) and the
    distance of two eigenvalue sets under their best matching.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import torch
from scipy.optimize import linear_sum_assignment

from ._common import check_square, check_tensor, wide

__all__ = ["eig", "eig_residual_ratio", "eigvals_distance", "expm", "expm_ratio"]


def _u(dtype: torch.dtype) -> float:
    return 2.0**-53 if dtype in (torch.float64, torch.complex128) else 2.0**-24


def _matrices(A: torch.Tensor) -> tuple[tuple[int, ...], np.ndarray]:
    check_tensor("A", A)
    check_square("A", A)
    batch = tuple(A.shape[:-2])
    n = A.shape[-1]
    return batch, wide(A).numpy().reshape(-1, n, n)


def expm(A: torch.Tensor) -> torch.Tensor:
    """``exp(A)`` per matrix in float64/complex128 (``scipy.linalg.expm``); a matrix with a
    non-finite entry gives NaN.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``.

    Returns
    -------
    torch.Tensor
        ``(..., n, n)`` float64 or complex128.
    """
    batch, a = _matrices(A)
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = sla.expm(a[i]) if np.isfinite(a[i]).all() else np.nan
    return torch.from_numpy(out).reshape(*batch, *a.shape[1:])


def expm_ratio(A: torch.Tensor, E: torch.Tensor, *, kappa: torch.Tensor | float | None = None,
               u: float | None = None) -> torch.Tensor:
    """``‖E − exp(A)‖_F / (n u ‖exp(A)‖_F max(1, κ))`` per matrix (pass below 30).

    Why this is O(1) for a forward-stable exponential: the relative condition number of ``exp`` at
    ``A`` is ``κ_exp = ‖L(A)‖ ‖A‖ / ‖exp A‖`` (``L`` the Fréchet derivative); an algorithm with
    backward error ``O(u)`` in ``A`` (the approximant's design) and ``n u``-sized rounding per
    matrix product has forward error ``≲ c n u κ_exp`` (Higham, *Functions of Matrices*, §10.3).
    ``κ`` defaults to the upper bound ``‖A‖₂ e^{‖A‖₂} / ‖exp A‖₂`` (``‖L(A)‖ ≤ e^{‖A‖}``, Lemma
    10.15); for a normal ``A`` pass its exact value ``‖A‖₂``.

    Parameters
    ----------
    A, E : torch.Tensor
        ``(..., n, n)``: the input and the computed exponential.
    kappa : tensor or float, optional
        The relative condition number to divide by (broadcast over the batch).
    u : float, optional
        Unit roundoff; default that of ``E.dtype``.

    Returns
    -------
    torch.Tensor
        float64 of the batch shape.
    """
    u = _u(E.dtype) if u is None else u
    ref = expm(A)
    Aw = wide(A)
    n = max(A.shape[-1], 1)
    if kappa is None:
        na = torch.linalg.matrix_norm(Aw, 2) if Aw.numel() else Aw.new_zeros(Aw.shape[:-2]).real
        ne = torch.linalg.matrix_norm(ref, 2) if ref.numel() else na
        kappa = na * torch.exp(na) / ne
    kappa = torch.clamp(torch.as_tensor(kappa, dtype=torch.float64), min=1.0)
    err = torch.linalg.matrix_norm(wide(E).to(ref.dtype) - ref)
    den = n * u * torch.linalg.matrix_norm(ref) * kappa
    return torch.where(err == 0, torch.zeros_like(err), err / den)


def eig(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LAPACK ``geev`` per matrix: ``(w, V, kappa_V)``.

    Returns
    -------
    tuple of torch.Tensor
        ``w (..., n)`` complex128 eigenvalues, ``V (..., n, n)`` complex128 unit 2-norm eigenvectors
        (columns), ``kappa_V (...)`` float64, the 2-norm condition number of ``V`` (``inf`` for a
        defective matrix whose computed ``V`` is singular). NaN for a matrix with a non-finite entry.
    """
    batch, a = _matrices(A)
    n = a.shape[-1]
    w = np.empty((a.shape[0], n), dtype=np.complex128)
    V = np.empty((a.shape[0], n, n), dtype=np.complex128)
    kv = np.empty(a.shape[0])
    for i in range(a.shape[0]):
        if not np.isfinite(a[i]).all():
            w[i], V[i], kv[i] = np.nan, np.nan, np.nan
            continue
        w[i], V[i] = sla.eig(a[i], check_finite=False)
        s = np.linalg.svd(V[i], compute_uv=False) if n else np.ones(1)
        kv[i] = s[0] / s[-1] if s[-1] > 0 else np.inf
    return (torch.from_numpy(w).reshape(*batch, n), torch.from_numpy(V).reshape(*batch, n, n),
            torch.from_numpy(kv).reshape(batch))


def eig_residual_ratio(A: torch.Tensor, w: torch.Tensor, V: torch.Tensor, *, u: float | None = None) -> torch.Tensor:
    """``‖A v_j − λ_j v_j‖₂ / (n ‖A‖₁ u ‖v_j‖₂)`` per eigenpair (LAPACK ``xGET22``'s backward error
    of ``A V = V Λ``, per column): ``(..., n)`` float64. A backward-stable ``geev`` leaves
    ``‖A v − λ v‖ ≤ c n u ‖A‖ ‖v‖``."""
    u = _u(w.dtype) if u is None else u
    Aw = wide(A).to(torch.complex128)
    Vw = wide(V).to(torch.complex128)
    ww = wide(w).to(torch.complex128)
    n = max(A.shape[-1], 1)
    res = torch.linalg.vector_norm(Aw @ Vw - Vw * ww[..., None, :], dim=-2)
    norm_a = Aw.abs().sum(-2).amax(-1, keepdim=True) if A.shape[-1] else res.new_zeros(res.shape)
    den = n * u * norm_a * torch.linalg.vector_norm(Vw, dim=-2)
    return torch.where(res == 0, torch.zeros_like(res), res / den)


def eigvals_distance(w: torch.Tensor, w_ref: torch.Tensor) -> torch.Tensor:
    """``|w_i − w_ref_π(i)|`` under the matching ``π`` that minimises the sum of the
    distances (``scipy.optimize.linear_sum_assignment``), per eigenvalue: ``(..., n)`` float64,
    in ``w``'s order. NaN anywhere in a set gives NaN for that set."""
    a = wide(w).to(torch.complex128).numpy()
    b = wide(w_ref).to(torch.complex128).numpy()
    shape = a.shape
    n = shape[-1]
    a, b = a.reshape(-1, n), np.broadcast_to(b, shape).reshape(-1, n)
    out = np.empty(a.shape)
    for i in range(a.shape[0]):
        if not (np.isfinite(a[i]).all() and np.isfinite(b[i]).all()):
            out[i] = np.nan
            continue
        cost = np.abs(a[i][:, None] - b[i][None, :])
        rows, cols = linear_sum_assignment(cost)
        out[i, rows] = cost[rows, cols]
    return torch.from_numpy(out).reshape(shape)
