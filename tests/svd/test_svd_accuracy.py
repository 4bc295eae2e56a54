"""Accuracy of ``svd``/``svdvals`` against LAPACK's test ratios and mpmath, on every backend.

Bounds (``u = 2^-24`` float32, ``2^-53`` float64):

* LAPACK ``xDRVBD`` ratios ``‖A − UΣVᴴ‖₁/(max(m,n)‖A‖₁u)``, ``‖I − UᴴU‖₁/(m u)``,
  ``‖I − VᴴV‖₁/(n u)`` below 50, the bound of issue 12 (LAPACK's own threshold is 30; the issue
  allows 50 for the accumulated rotations of Jacobi). ``S`` non-negative and non-increasing.
* Graded matrices ``A = D₁ B D₂`` (diagonal ``D``, Gaussian ``B``): rounding ``A`` entrywise moves
  every ``σ_i`` by a *relative* ``<= κ(B)·u·√n`` (Demmel & Veselić 1992), and QR-preconditioned
  one-sided Jacobi is backward stable in that row/column-scaled sense with an ``O(n)`` constant
  (Drmač & Veselić 2008, ``xGEJSV``: the row-sorted Householder QR contributes a row-wise backward
  error ``O(m n u)`` [Cox & Higham], the Jacobi rotations ``O(n)`` per sweep). Hence the test
  ``|σ̂_i − σ_i|/σ_i <= 30 · n · κ(B) · u`` for **every** ``i``, down to ``σ_min/σ_max ≈ 1e-7``
  (float32) and ``1e-18`` (float64). ``κ(B)`` is computed from the known grading. That the bound
  discriminates is checked too: the Gram-matrix eigensolver (``√eig(AᴴA)``) violates it.
* Scaling by ``2^k`` is exact, so ``svd(2^k A)`` must equal ``2^k svd(A)`` to rounding: we compare
  ``A·1e±30`` with ``A`` at the LAPACK ratios and ``S`` to ``30 n u`` relative to ``σ₁``.
"""

from __future__ import annotations

import importlib
import math

import pytest
import torch

import mpslinalg as LA
from reference import matrices, metrics
from reference import mp as ref_mp

svd_mod = importlib.import_module("mpslinalg.svd")

RATIO = 50.0


def _dtypes(backend):
    if backend == "torch":
        return [torch.float32, torch.complex64, torch.float64, torch.complex128]
    return [torch.float32, torch.complex64]


def _ratios(A, U, S, Vh):
    r = metrics.svd_ratios(A, U, S, Vh)
    return [float(x.max()) for x in r]


SHAPES = [(3, 3), (8, 9), (9, 9), (32, 32), (40, 7), (7, 40), (1, 5), (5, 1)]


@pytest.mark.parametrize("full", [True, False], ids=["full", "reduced"])
def test_lapack_ratios(backend, backend_device, full):
    for dtype in _dtypes(backend):
        for m, n in SHAPES:
            A = matrices.with_condition(n, 1e3, m=m, batch=(3,), dtype=dtype, seed=m * 31 + n)
            A = A.to(backend_device)
            A0 = A.clone()
            U, S, Vh = LA.svd(A, full_matrices=full)
            assert torch.equal(A, A0)  # inputs never modified
            k = min(m, n)
            assert U.shape == (3, m, m if full else k) and Vh.shape == (3, n if full else k, n)
            recon, uo, vo, order = _ratios(A.cpu(), U.cpu(), S.cpu(), Vh.cpu())
            assert recon < RATIO and uo < RATIO and vo < RATIO and order == 0, (dtype, m, n)
            Sv = LA.svdvals(A)
            assert float((Sv - S).abs().max()) <= 30 * k * metrics.unit_roundoff(S.dtype) * float(S.max())


def test_large_order_route():
    """Above ``TUNING.jacobi_max`` the torch backend takes the device's SVD of the preconditioned
    factor; the LAPACK ratios hold there too."""
    n = svd_mod.TUNING.jacobi_max["cpu"] + 3
    for dtype in (torch.float32, torch.complex128):
        A = matrices.with_condition(n, 1e3, m=n + 5, batch=(1,), dtype=dtype, seed=n)
        for full in (True, False):
            U, S, Vh = LA.svd(A, full_matrices=full)
            recon, uo, vo, order = _ratios(A, U, S, Vh)
            assert recon < RATIO and uo < RATIO and vo < RATIO and order == 0


def _grading(k: int, decades: float) -> torch.Tensor:
    """``matrices.graded``'s diagonal: ``10**(−decades·j/(k−1))``."""
    return 10.0 ** (-decades * torch.arange(k, dtype=torch.float64) / (k - 1))


def _graded(m, n, decades, side, dtype, seed):
    A = matrices.graded(n, m=m, decades=decades, side=side, base="gaussian", batch=(4,), dtype=dtype,
                        seed=seed)
    half = decades / 2 if side == "both" else decades
    dr = _grading(m, half) if side in ("rows", "both") else torch.ones(m, dtype=torch.float64)
    dc = _grading(n, half) if side in ("cols", "both") else torch.ones(n, dtype=torch.float64)
    A64 = A.to(torch.complex128 if dtype.is_complex else torch.float64)
    kappa_B = torch.linalg.cond(A64 / dr[:, None] / dc)
    return A, kappa_B


# (side, m, n). The κ(B) theorem needs B square, or the grading on the side of B's full rank
# (A = B D₂ tall, A = D₁ B wide): for a two-sided grading of a *rectangular* B, an entrywise
# relative perturbation of size u alone moves σ_min by ~120 κ(B) u (measured with mpmath, 6 x 12,
# 36 decades), so no algorithm can meet a κ(B) bound there and it is not tested.
GRADED = [("both", 8, 8), ("both", 16, 16), ("rows", 8, 8), ("cols", 8, 8), ("cols", 12, 6),
          ("rows", 6, 12)]


@pytest.mark.parametrize("side,m,n", GRADED, ids=[f"{s}{m}x{n}" for s, m, n in GRADED])
def test_graded_relative_accuracy(backend, backend_device, side, m, n):
    for dtype in _dtypes(backend):
        real = dtype.to_real() if dtype.is_complex else dtype
        target = 7.0 if real == torch.float32 else 18.0
        A, kappa_B = _graded(m, n, target, side, dtype, seed=m + n)
        S_ref = ref_mp.svdvals(A, dps=30)
        assert float((S_ref[:, -1] / S_ref[:, 0]).min()) < 10 ** (-target + 1)  # really graded
        S = LA.svdvals(A.to(backend_device)).cpu().double()
        rel = ((S - S_ref).abs() / S_ref).amax(-1)
        bound = 30 * n * kappa_B * metrics.unit_roundoff(real)
        assert bool((rel <= bound).all()), (dtype, (rel / bound).max())


def test_graded_bound_rejects_gram_eigensolver():
    """The bound above is sharp enough to fail the Gram-matrix method (squares κ)."""
    A, kappa_B = _graded(8, 8, 7.0, "both", torch.float32, seed=16)
    S_ref = ref_mp.svdvals(A, dps=30)
    S_gram = torch.linalg.eigvalsh(A.mH @ A).clamp_min(0).sqrt().flip(-1).double()
    rel = ((S_gram - S_ref).abs() / S_ref).amax(-1)
    assert bool((rel > 30 * 8 * kappa_B * metrics.unit_roundoff(torch.float32)).any())


@pytest.mark.parametrize("scale", [1e30, 1e-30], ids=["1e30", "1e-30"])
def test_extreme_scales(backend, backend_device, scale):
    for dtype in (torch.float32, torch.complex64):
        A = matrices.with_condition(5, 1e2, m=6, batch=(2,), dtype=dtype, seed=7).to(backend_device)
        As = A * scale
        U, S, Vh = LA.svd(As, full_matrices=False)
        assert bool(torch.isfinite(S).all()) and bool((S > 0).all())
        recon, uo, vo, order = _ratios(As.cpu(), U.cpu(), S.cpu(), Vh.cpu())
        assert recon < RATIO and uo < RATIO and vo < RATIO and order == 0
        S1 = LA.svdvals(A)
        assert float(((S / scale - S1).abs() / S1[..., :1]).max()) <= 30 * 6 * metrics.unit_roundoff(torch.float32)


@pytest.mark.parametrize("m,n", [(6, 4), (4, 6), (5, 5)])
def test_rank_deficient_and_zero_full_matrices(backend, backend_device, m, n):
    for dtype in (torch.float32, torch.complex64):
        A = matrices.rank_deficient(m, n, 2, batch=(2,), dtype=dtype, seed=m * n).to(backend_device)
        Z = torch.zeros(m, n, dtype=dtype, device=backend_device)
        C = torch.zeros(m, n, dtype=dtype, device=backend_device)
        C[:, 0] = 1.0  # rank one with exactly zero columns
        for X in (A, Z, C):
            U, S, Vh = LA.svd(X, full_matrices=True)
            recon, uo, vo, order = _ratios(X.cpu(), U.cpu(), S.cpu(), Vh.cpu())
            assert recon < RATIO and uo < RATIO and vo < RATIO and order == 0
        assert bool((LA.svdvals(Z) == 0).all())  # exactly zero
        S = LA.svdvals(C)
        assert bool((S[1:] == 0).all())
        assert abs(float(S[0]) - math.sqrt(m)) <= 4 * m * metrics.unit_roundoff(torch.float32)


def test_nonfinite_input(backend, backend_device):
    A = torch.randn(3, 5, 4, device=backend_device)
    A[1, 2, 3] = float("nan")
    A[2, 0, 0] = float("inf")
    U, S, Vh, info = LA.svd_ex(A)
    assert info.tolist() == [0, 1, 1]
    assert bool(torch.isnan(S[1:]).all()) and bool(torch.isnan(U[1:]).all()) and bool(torch.isnan(Vh[1:]).all())
    assert bool(torch.isfinite(S[0]).all())
    with pytest.raises(torch.linalg.LinAlgError, match=r"\(Batch element 1\): The algorithm failed to "
                       "converge because the input matrix contained non-finite values"):
        LA.svd(A)
    with pytest.raises(torch.linalg.LinAlgError, match="non-finite"):
        LA.svdvals(A)


def test_sweep_bound_is_reported(monkeypatch):
    """With too few sweeps allowed, ``svd_ex`` reports ``info = 2`` and ``svd`` raises torch's
    error; the outputs stay finite."""
    monkeypatch.setattr(svd_mod.TUNING, "sweeps", lambda device, dtype, n=32: (1, False))
    A = torch.randn(2, 12, 12)
    U, S, Vh, info = LA.svd_ex(A)
    assert info.tolist() == [2, 2] and bool(torch.isfinite(S).all())
    with pytest.raises(torch.linalg.LinAlgError, match=r"ill-conditioned .* \(error code: 2\)"):
        LA.svd(A)


@pytest.mark.parametrize("shape", [(4000, 3, 3), (1000, 8, 9), (200, 32, 32)])
def test_gpu_sweep_bound_suffices(monkeypatch, shape):
    """Random batches converge within the fixed GPU sweep count (``info == 0`` everywhere). With
    the former tolerance ``√n·u`` (below the dot products' rounding noise) two matrices of a
    10000 x 3x3 batch rotated forever."""
    gpu = svd_mod.TUNING.sweeps
    monkeypatch.setattr(svd_mod.TUNING, "sweeps",
                        lambda device, dtype, n=32: gpu(torch.device("cuda"), dtype, n))
    A = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    assert int((LA.svd_ex(A).info != 0).sum()) == 0
