"""Accuracy of eigh/eigvalsh on every backend, with derived bounds.

* Backward error and orthogonality: LAPACK's ``xHET21`` ratios ``‖H − VΛVᴴ‖₁/(n‖H‖₁u)`` and
  ``‖I − VᴴV‖₁/(n u)`` below the pass mark 30 (``reference.metrics.PASS_RATIO``; u = 2⁻²⁴ for
  float32/complex64, 2⁻⁵³ for float64/complex128). Jacobi and Householder+QL are backward
  stable (each rotation or reflector exact to O(u)), so both ratios are O(1) in theory.
* Relative accuracy (Demmel & Veselić 1992): for positive-definite ``A = D M D`` (``M`` unit
  diagonal) Jacobi with the relative stopping rule computes every eigenvalue with relative error
  ``O(n u κ(M))``, however graded ``D``. The test's bound is ``n·u·κ₂(M)`` (the first-order bound of
  an entrywise ``u`` perturbation, ``reference.matrices.graded_hpd``); the reference is mpmath on
  the rounded input (``reference.mp.eigvalsh``, relatively accurate), so rounding the input costs
  nothing. An absolutely accurate solver (torch.linalg's tridiagonal methods) fails it by ~1e8.
* Eigenvalue error of random matrices (Weyl): ``|λ̂_i − λ_i| ≤ ‖ΔH‖₂ ≤ 30 n u ‖H‖₁`` given the
  backward error above; checked against float64 LAPACK.
"""

from __future__ import annotations

import pytest
import torch

import mpslinalg
from reference import lapack, matrices, metrics, mp

DTYPES = [torch.float32, torch.complex64]
DID = ["float32", "complex64"]
WIDE = {torch.float32: torch.float64, torch.complex64: torch.complex128}


def _hermitian(n, batch, dtype, seed):
    A = matrices.random(n, batch=batch, dtype=dtype, seed=seed)
    return A + A.mH


def _check_ratios(A, w, V, upper=False):
    recon, orth = metrics.eigh_ratios(A, w, V, upper=upper)
    assert float(recon.max()) < metrics.PASS_RATIO, float(recon.max())
    assert float(orth.max()) < metrics.PASS_RATIO, float(orth.max())
    assert bool((w[..., 1:] >= w[..., :-1]).all()), "eigenvalues not ascending"


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 16, 33])
def test_jacobi_ratios(backend, backend_device, dtype, n):
    A = _hermitian(n, (3,), dtype, seed=n)
    w, V = mpslinalg.eigh(A.to(backend_device))
    _check_ratios(A, w.cpu(), V.cpu())
    ref = torch.linalg.eigvalsh(A.to(WIDE[dtype]))
    weyl = metrics.PASS_RATIO * n * metrics.unit_roundoff(dtype) * metrics.norm1(A.to(WIDE[dtype]))
    assert bool(((w.cpu().double() - ref).abs().amax(-1) <= weyl).all())


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_largest_jacobi_order(backend, backend_device, dtype):
    """The largest order the Metal Jacobi holds (float32 64, complex64 58) and the torch bound."""
    n = 64 if dtype == torch.float32 else 58
    A = _hermitian(n, (2,), dtype, seed=7)
    w, V = mpslinalg.eigh(A.to(backend_device))
    _check_ratios(A, w.cpu(), V.cpu())


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("upper", [False, True], ids=["L", "U"])
def test_tridiagonal_path(backend, backend_device, dtype, upper):
    """n above the Jacobi bound: Householder tridiagonalisation (two panels of nb = 32 and a
    remainder), QL, back-transformation."""
    n = 75
    A = _hermitian(n, (2,), dtype, seed=3)
    w, V = mpslinalg.eigh(A.to(backend_device), UPLO="U" if upper else "L")
    _check_ratios(A, w.cpu(), V.cpu(), upper=upper)
    w2 = mpslinalg.eigvalsh(A.to(backend_device), UPLO="U" if upper else "L")
    ref = torch.linalg.eigvalsh(A.to(WIDE[dtype]))
    weyl = metrics.PASS_RATIO * n * metrics.unit_roundoff(dtype) * metrics.norm1(A.to(WIDE[dtype]))
    assert bool(((w2.cpu().double() - ref).abs().amax(-1) <= weyl).all())


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=["float64", "complex128"])
@pytest.mark.parametrize("n", [3, 20, 70])
def test_double_precision(dtype, n):
    A = _hermitian(n, (2,), dtype, seed=n)
    w, V = mpslinalg.eigh(A)
    _check_ratios(A, w, V)


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("n", [3, 8, 16])
def test_graded_relative_accuracy(backend, backend_device, dtype, n):
    """Eigenvalues spanning 24 decades, each to relative error n·u·κ(M) (module docstring)."""
    A, kappa = matrices.graded_hpd(n, decades=24, batch=(2,), dtype=dtype, seed=n)
    ref = mp.eigvalsh(A, dps=30)
    w = mpslinalg.eigvalsh(A.to(backend_device)).cpu().double()
    rel = ((w - ref).abs() / ref.abs()).amax(-1)
    bound = n * metrics.unit_roundoff(dtype) * kappa
    assert bool((rel <= bound).all()), (rel / bound).tolist()


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_clustered_and_repeated(backend, backend_device, dtype):
    """Q diag(λ) Qᴴ with a triple eigenvalue, a cluster 1 + k·1e-6 and ±1: the ratios hold and
    the eigenvalues are within the Weyl bound of the exact ones."""
    n = 12
    lam = torch.tensor([-1.0, 2.0, 2.0, 2.0] + [1 + k * 1e-6 for k in range(6)] + [1.0, 5.0], dtype=torch.float64)
    Q = matrices.haar(n, batch=(2,), dtype=WIDE[dtype], seed=5)
    A = ((Q * lam.to(Q.dtype)) @ Q.mH).to(dtype)
    w, V = mpslinalg.eigh(A.to(backend_device))
    _check_ratios(A, w.cpu(), V.cpu())
    ref = torch.linalg.eigvalsh(A.to(WIDE[dtype]))  # exact for the rounded input, to 1e-15
    weyl = metrics.PASS_RATIO * n * metrics.unit_roundoff(dtype) * metrics.norm1(A.to(WIDE[dtype]))
    assert bool(((w.cpu().double() - ref).abs().amax(-1) <= weyl).all())


@pytest.mark.parametrize("scale", [2.0**-100, 2.0**100, 1e-30, 1e30], ids=["2^-100", "2^100", "1e-30", "1e30"])
@pytest.mark.parametrize("n", [3, 70])
def test_extreme_scaling(backend, backend_device, scale, n):
    """float32 matrices scaled to 1e±30: the power-of-two scaling keeps every square in range, so
    the ratios are those of the unscaled matrix; a power-of-two scale gives the same eigenvectors
    and exactly scaled eigenvalues."""
    A = _hermitian(n, (2,), torch.float32, seed=11)
    As = matrices.scaled(A, scale)
    w, V = mpslinalg.eigh(As.to(backend_device))
    assert bool(torch.isfinite(w).all() and torch.isfinite(V).all())
    _check_ratios(As, w.cpu(), V.cpu())
    if scale in (2.0**-100, 2.0**100):
        w1, V1 = mpslinalg.eigh(A.to(backend_device))
        torch.testing.assert_close(w.cpu(), w1.cpu() * scale, rtol=0, atol=0)
        torch.testing.assert_close(V.cpu(), V1.cpu(), rtol=0, atol=0)


def test_zero_and_diagonal(backend, backend_device):
    """Exact cases: the zero matrix (eigenvalues 0, V = I) and a diagonal matrix (sorted exactly)."""
    Z = torch.zeros(2, 5, 5, device=backend_device)
    w, V = mpslinalg.eigh(Z)
    assert bool((w == 0).all())
    assert metrics.orthogonality_ratio(V.cpu()).max() < metrics.PASS_RATIO
    d = torch.tensor([3.0, -1.0, 2.0, 0.5, -7.0])
    w, V = mpslinalg.eigh(torch.diag(d).to(backend_device))
    assert w.cpu().tolist() == sorted(d.tolist())


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES + [torch.float64], ids=DID + ["float64"])
@pytest.mark.parametrize("n", [6, 24, 48])
def test_graded_sweep_slow(dtype, n):
    """A wider graded sweep (torch backend): up to 30 decades in float32, 200 in float64. The bound
    needs no underflow: the rounding errors of the smallest entries, ~10^-decades·u, must stay
    normal (float32: 10^-30·2^-24 ≈ 6e-38 > FLT_MIN; at 36 decades the smallest eigenvalue of one
    matrix in two lost its relative accuracy to gradual underflow)."""
    for decades in ((8, 20, 30) if dtype != torch.float64 else (8, 60, 200)):
        A, kappa = matrices.graded_hpd(n, decades=decades, batch=(2,), dtype=dtype, seed=decades)
        ref = mp.eigvalsh(A, dps=30)
        w = mpslinalg.eigvalsh(A).double()
        rel = ((w - ref).abs() / ref.abs()).amax(-1)
        assert bool((rel <= n * metrics.unit_roundoff(dtype) * kappa).all())


def test_lapack_reference_agrees():
    """The float64 LAPACK reference itself agrees with mpmath on a small case (the oracles check
    each other)."""
    A = _hermitian(6, (), torch.float64, seed=2)
    ref = mp.eigvalsh(A, dps=30)
    w = lapack.svdvals(A)  # |λ| sorted descending = singular values of a Hermitian matrix
    torch.testing.assert_close(w, ref.abs().sort(descending=True).values, rtol=1e-13, atol=0)
