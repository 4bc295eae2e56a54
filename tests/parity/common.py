"""Shared test matrices and derived pass marks of the ``torch.linalg`` parity tests (``tests/parity/``).

The tests call only ``mpslinalg.<op>`` (black-box) and compare with the ``torch.linalg`` op of
the same name on the CPU, on every backend (``backend`` fixture: ``torch``, ``emulator``, ``metal``
on a Mac). This module holds what they share: the matrix generators and the bounds below.

Numerical pass marks (derived, never tuned; ``u`` = unit roundoff of the dtype, 2^-24 for
float32/complex64, 2^-53 for float64/complex128):

* Test matrices are ``A = U diag(s) Vᴴ`` with Haar-like ``U``, ``V`` (QR of Gaussians, float64) and
  ``s`` geometric from 1 to ``1/κ``, so ``κ₂(A) = κ`` up to the rounding of ``A`` to the dtype.
* **Solutions** (``solve``, ``lu_solve``, ``solve_triangular``, columns of ``inv``): LAPACK's
  backward-error ratio ``‖B − AX‖/(‖A‖‖X‖u)`` is below 30 for both torch and us
  (``TESTING/ctest.in``), so each forward error is ``≤ 30 κ u`` (``‖x − x̂‖ ≤ ‖A⁻¹‖‖r‖``), and the
  two results differ by ``≤ 2·30·κ·u`` relative, in the 2-norm; Frobenius norms over ``k`` columns
  add at most a factor ``√n`` (norm equivalence, ``k ≤ n`` here): ``SOLVE_C = 60 √n``.
* **Determinants**: ``d det / det = tr(A⁻¹ dA)``, so a backward error ``‖ΔA‖ ≤ 30 n u ‖A‖``
  (LAPACK's LU ratio ``‖PA − LU‖/(n‖A‖u) < 30``) moves ``det`` by at most ``n · κ · 30 n u``
  relative (``|tr M| ≤ n‖M‖₂``); two results differ by twice that: ``60 n² κ u``. The same bounds
  the absolute error of ``logabsdet`` and of ``sign``.
* **LU factors**: pivots are compared for equality (Gaussian input has no ties: with probability
  one no two candidates have equal ``|Re| + |Im|``), factors through LAPACK's ratio
  ``‖PA − LU‖/(n‖A‖u) < 30``.
* **Gradients** (float64): each backward is a few solves with ``A`` or ``Aᴴ`` (condition ``κ``)
  and one product with ``A⁻¹``-like factors; a first-order bound for the difference of two
  backward-stable evaluations is ``2 · 30 √n · κ² u`` relative (``κ`` per solve with ``A``, two
  solves in a row for ``inv``/``solve``/``lu_solve``): ``GRAD_C = 60 √n κ²``.
"""

from __future__ import annotations

import math

import torch

ALL_DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]
DTYPE_IDS = ["f32", "f64", "c64", "c128"]
KAPPA = 10.0


def _u(dtype: torch.dtype) -> float:
    return 2.0**-24 if dtype in (torch.float32, torch.complex64) else 2.0**-53


def _real(dtype: torch.dtype) -> torch.dtype:
    return {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(dtype, dtype)


def _gauss(shape, dtype, g):
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if dtype.is_complex:
        x = torch.complex(x, torch.randn(shape, generator=g, dtype=torch.float64)) / math.sqrt(2)
    return x


def _mat(batch, n, dtype, seed, kappa=KAPPA):
    """``U diag(s) Vᴴ``, ``κ₂ = kappa`` (see this module's docstring)."""
    g = torch.Generator().manual_seed(seed)
    cdt = torch.complex128 if dtype.is_complex else torch.float64
    U = torch.linalg.qr(_gauss((*batch, n, n), dtype, g).to(cdt))[0]
    V = torch.linalg.qr(_gauss((*batch, n, n), dtype, g).to(cdt))[0]
    s = torch.logspace(0, -math.log10(kappa), n, dtype=torch.float64) if n > 1 else torch.ones(n, dtype=torch.float64)
    return ((U * s.to(cdt)) @ V.mH).to(dtype)


def _rhs(shape, dtype, seed):
    return _gauss(shape, dtype, torch.Generator().manual_seed(seed)).to(dtype)


def _rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    """Largest relative Frobenius difference over the batch (trailing two dims are the matrix)."""
    x, ref = x.cpu().to(torch.complex128), ref.cpu().to(torch.complex128)
    if ref.numel() == 0:
        return 0.0
    if ref.ndim < 2:
        return float((x - ref).abs().max() / ref.abs().max().clamp_min(1e-300))
    d = torch.linalg.matrix_norm(x - ref)
    r = torch.linalg.matrix_norm(ref).clamp_min(1e-300)
    return float((d / r).max())


def _solve_bound(n, dtype, kappa=KAPPA):
    return 60 * math.sqrt(max(n, 1)) * kappa * _u(dtype)


def _det_bound(n, dtype, kappa=KAPPA):
    return 60 * n * n * kappa * _u(dtype)


def _lu_ratio(A, P, L, U):
    """LAPACK's ``‖PᵀA − LU‖₁ / (n ‖A‖₁ u)`` per batch element, max (torch: ``A = P L U``)."""
    A64 = A.cpu().to(torch.complex128)
    R = A64 - P.cpu().to(torch.complex128) @ L.cpu().to(torch.complex128) @ U.cpu().to(torch.complex128)
    n = max(A.shape[-1], A.shape[-2], 1)
    nrm = torch.linalg.matrix_norm(A64, ord=1).clamp_min(1e-300)
    return float((torch.linalg.matrix_norm(R, ord=1) / (n * nrm * _u(A.dtype))).max())
