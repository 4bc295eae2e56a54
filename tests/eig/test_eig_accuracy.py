"""eig/eigvals against LAPACK's geev in float64, with derived bounds (issue 32).

* residual: ``‖A v − λ v‖ / (n ‖A‖₁ u ‖v‖) < 100`` per eigenpair (``reference.spectra.eig_residual_ratio``:
  a backward-stable Schur form and a back-substitution whose divisors are perturbed by at most
  ``ulp |λ|`` leave ``c n u ‖A‖``; the issue's mark is 100);
* unit columns: ``|‖v‖ − 1| <= (n + 6) u`` (the computed 2-norm is within ``(n/2 + 1) u`` of the
  true one, the division adds ``u``, the phase factor's complex product ``2√2 u``, the check's own norm
  ``n/2 u``);
* eigenvalues: ``|λ − λ₆₄| <= 30 κ(V) n u ‖A‖₁`` after the best matching (Bauer–Fike for the
  backward error ``n u ‖A‖`` of the Schur form: ``|δλ| <= κ(V) ‖δA‖``; 30 is LAPACK's pass mark).
"""

from __future__ import annotations

import pytest
import torch
from helpers import gaussian

import mpslinalg
from reference import metrics, spectra

ALL = [torch.float32, torch.complex64, torch.float64, torch.complex128]
RESIDUAL_MARK = 100.0


def _u(dtype):
    return metrics.unit_roundoff(dtype)


def check_eig(A, L, V, *, bound_values=True):
    n = A.shape[-1]
    u = _u(A.dtype)
    assert L.dtype == V.dtype and L.dtype.is_complex
    r = spectra.eig_residual_ratio(A, L, V)
    assert r.max() < RESIDUAL_MARK, r.max()
    norms = torch.linalg.vector_norm(V.to(torch.complex128), dim=-2)
    assert ((norms - 1).abs() <= (n + 6) * u).all(), (norms - 1).abs().max()
    if bound_values:
        check_values(A, L)


def check_values(A, L):
    n = A.shape[-1]
    w, _, kv = spectra.eig(A)
    norm = A.to(torch.complex128).abs().sum(-2).amax(-1)
    bound = metrics.PASS_RATIO * kv * n * _u(A.dtype) * norm
    d = spectra.eigvals_distance(L, w)
    assert (d <= bound[..., None]).all(), (d / bound[..., None]).max()


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 17])
def test_random(backend, dtype, n):
    A = gaussian((6, n, n), dtype, 100 + n)
    L, V = mpslinalg.eig(A)
    check_eig(A, L, V)
    assert torch.equal(mpslinalg.eigvals(A), L)  # the same Schur form and order


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_real_input_gives_exact_conjugate_pairs(dtype):
    A = gaussian((8, 9, 9), dtype, 7)
    L, V = mpslinalg.eig(A)
    check_eig(A, L, V)
    cplx = L.imag != 0
    # a pair is (p + iq, p - iq), q > 0 first, adjacent, and its vectors are conjugates
    first = cplx & (L.imag > 0)
    idx = first.nonzero()
    for b, i in idx.tolist():
        assert L[b, i + 1] == L[b, i].conj()
        assert torch.equal(V[b, :, i + 1], V[b, :, i].conj())
    assert int(first.sum()) * 2 == int(cplx.sum())
    real = ~cplx
    assert torch.equal(V.imag * real[:, None, :], torch.zeros_like(V.imag))  # real λ: real vector


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_rotations(dtype):
    # planar rotations by θ (eigenvalues e^{±iθ}) in a random orthonormal frame: normal, κ(V) = 1
    g = torch.Generator().manual_seed(3)
    theta = torch.rand(16, generator=g, dtype=torch.float64) * 3
    R = torch.zeros(16, 4, 4, dtype=torch.float64)
    R[:, 0, 0] = R[:, 1, 1] = torch.cos(theta)
    R[:, 0, 1], R[:, 1, 0] = -torch.sin(theta), torch.sin(theta)
    R[:, 2, 2], R[:, 3, 3] = 1.0, -1.0
    Q, _ = torch.linalg.qr(torch.randn(16, 4, 4, generator=g, dtype=torch.float64))
    A = (Q @ R @ Q.mT).to(dtype)
    L, V = mpslinalg.eig(A)
    check_eig(A, L, V)
    assert ((L.abs() - 1).abs() <= metrics.PASS_RATIO * 4 * _u(dtype) * 4).all()  # |λ| = 1 within the bound


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_triangular_and_diagonal_are_exact(dtype):
    # the diagonal of a triangular matrix is its spectrum: no QR step changes it (every row deflates
    # at once: the entries left of the diagonal are exact zeros), so the eigenvalues are exact
    d = gaussian((4, 6), dtype, 9)
    for A in (torch.diag_embed(d), torch.diag_embed(d) + gaussian((4, 6, 6), dtype, 10).triu(1)):
        L, V = mpslinalg.eig(A)
        assert torch.equal(L, d.to(L.dtype)), (L, d)
        check_eig(A, L, V, bound_values=False)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_defective_and_repeated(dtype):
    # a Jordan block J_5(2) (defective: one eigenvector) and 2 I + N rotated by an orthogonal Q:
    # eigenvalues are sensitive as δ^(1/5); the backward error of the Schur form is ~u‖A‖, so the
    # computed eigenvalues lie within (30 n u ‖A‖)^(1/k) of 2, k the largest Jordan block; the
    # residual bound still holds per pair (no crash, no NaN)
    n = 5
    J = 2 * torch.eye(n, dtype=torch.float64) + torch.diag(torch.ones(n - 1, dtype=torch.float64), 1)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=torch.Generator().manual_seed(2), dtype=torch.float64))
    for A, k in ((J, n), (Q @ J @ Q.T, n), (Q @ torch.diag(torch.tensor([2.0, 2, 2, -1, -1],
                                                                            dtype=torch.float64)) @ Q.T, 1)):
        A = A.to(dtype)
        L, V = mpslinalg.eig(A)
        assert torch.isfinite(L).all() and torch.isfinite(V).all()
        r = spectra.eig_residual_ratio(A, L, V)
        assert r.max() < RESIDUAL_MARK
        w, _, _ = spectra.eig(A)
        norm = A.to(torch.complex128).abs().sum(-2).amax()
        tol = (metrics.PASS_RATIO * n * _u(dtype) * norm) ** (1.0 / k) * (2 if k > 1 else 1)
        assert (spectra.eigvals_distance(L, torch.tensor([2.0] * n if k > 1 else [2.0, 2, 2, -1, -1],
                                                         dtype=torch.complex128)) <= max(tol, _u(dtype)**0.5 * 4)).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=str)
@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_extreme_scales(dtype, scale):
    # A and s A have the same eigenvectors and s-times the eigenvalues: the bounds scale with ‖A‖
    # (the power-of-two scaling keeps H^2 of the double shift in range)
    A = gaussian((4, 6, 6), dtype, 12) * scale
    L, V = mpslinalg.eig(A)
    check_eig(A, L, V)


def test_nan_raises_like_torch_and_eig_ex_reports():
    A = gaussian((3, 4, 4), torch.float32, 13)
    A[1, 0, 2] = float("nan")
    with pytest.raises(RuntimeError, match="should not contain infs or NaNs"):
        mpslinalg.eig(A)
    with pytest.raises(RuntimeError, match="should not contain infs or NaNs"):
        mpslinalg.eigvals(A)
    L, V, info = mpslinalg.eig_ex(A)
    assert info.tolist() == [0, 5, 0]
    assert torch.isnan(L[1]).all() and torch.isnan(V[1]).all()
    check_eig(A[[0, 2]], L[[0, 2]], V[[0, 2]])
