"""matrix_exp against float64 references, with derived bounds (issue 32).

Ratios: ``reference.spectra.expm_ratio`` = ``‖E − exp A‖_F / (n u ‖exp A‖_F max(1, κ))``, pass mark
30 (LAPACK's ``ctest.in``); its docstring derives why a forward-stable exponential keeps it O(1).
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import gaussian

import mpslinalg
from mpslinalg.matrix_exp import DEGREES, THETAS, taylor_approximant
from reference import metrics, spectra

ALL = [torch.float32, torch.complex64, torch.float64, torch.complex128]


@pytest.mark.parametrize("m", DEGREES)
def test_approximants_match_the_taylor_series_to_their_degree(m):
    # T_m(N) of the (m+2)x(m+2) shift N has (0, k) entry = the coefficient of A^k (N^k has its one
    # nonzero there). Each coefficient is a sum of at most ~8 products of the stored constants, so
    # it is 1/k! to within 8 u (float64); A^(m+1) is outside the approximant's degree.
    N = torch.diag(torch.ones(m + 1, dtype=torch.float64), 1)
    T = taylor_approximant(N, m)
    for k in range(m + 1):
        assert abs(T[0, k].item() * math.factorial(k) - 1) <= 8 * 2.0**-53, (m, k)


def test_degree_8_is_exact_where_torch_2_13_is_not():
    # the x7 coefficient of T8 (mpslinalg/matrix_exp/algorithm.py): a 1-norm of 0.045 is served by
    # degree 8 in float64 (θ_4 = 3.4e-4 < 0.045 <= θ_8 = 0.0499), whose backward error is below u
    A = gaussian((6, 6), torch.float64, 3)
    A = A / A.abs().sum(-2).max() * 0.045
    assert spectra.expm_ratio(A, mpslinalg.matrix_exp(A), kappa=None) < metrics.PASS_RATIO


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("scale", [1e-8, 1e-4, 0.03, 0.5, 1.4, 3.0, 8.0])
def test_random_matrices_every_degree(backend, dtype, scale):
    # 1-norms across every θ interval of both precisions; κ from the general bound ‖A‖e^‖A‖/‖e^A‖
    A = gaussian((6, 8, 8), dtype, 11) / 8
    A = A / A.abs().sum(-2).amax(-1)[:, None, None] * scale * torch.linspace(0.5, 1.0, 6)[:, None, None]
    E = mpslinalg.matrix_exp(A)
    assert E.dtype == dtype and E.shape == A.shape
    r = spectra.expm_ratio(A, E)
    assert r.max() < metrics.PASS_RATIO, r


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("radius", [20.0, 300.0])
def test_large_norm_normal_matrices(dtype, radius):
    # normal A = Q diag(λ) Qᴴ: κ_exp(A) = ‖A‖₂ exactly (Higham, Functions of Matrices, Thm 10.16);
    # Re λ <= 0 keeps exp(A) finite, |λ| up to the radius needs s = 3..7 squarings
    n = 8
    complex_ = dtype.is_complex
    g = torch.Generator().manual_seed(5)
    if complex_:
        Q, _ = torch.linalg.qr(torch.randn(n, n, dtype=torch.complex128, generator=g))
        lam = torch.complex(-torch.rand(n, generator=g, dtype=torch.float64),
                            2 * torch.rand(n, generator=g, dtype=torch.float64) - 1) * radius
        A = Q @ torch.diag(lam) @ Q.mH
    else:  # a real normal matrix: rotation-scaling 2x2 blocks a I + b J conjugated by an orthogonal Q
        Q, _ = torch.linalg.qr(torch.randn(n, n, dtype=torch.float64, generator=g))
        D = torch.zeros(n, n, dtype=torch.float64)
        for i in range(0, n, 2):
            a, b = -torch.rand(1, generator=g).item() * radius, (2 * torch.rand(1, generator=g).item() - 1) * radius
            D[i:i + 2, i:i + 2] = torch.tensor([[a, -b], [b, a]])
        A = Q @ D @ Q.T
    A = A.to(dtype)
    E = mpslinalg.matrix_exp(A)
    kappa = torch.linalg.matrix_norm(A.to(torch.complex128), 2)
    assert spectra.expm_ratio(A, E, kappa=kappa) < metrics.PASS_RATIO


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("scale", [0.1, 2.0, 50.0])
def test_skew_symmetric_gives_orthogonal(backend, dtype, scale):
    # exp(S) of a skew-symmetric S is orthogonal. The approximant leaves ‖QᵀQ − I‖ ~ c n u, and each
    # of the s squarings at most doubles the departure (plus n u): ~ 2^s c n u with 2^s <= 2‖S‖₁/θ_18
    # < ‖S‖₁. So ‖QᵀQ − I‖_F / (n u max(1, ‖S‖₁)) is O(1): pass below 30.
    n = 10
    X = gaussian((4, n, n), dtype, 21)
    S = (X - X.mT) * scale / n
    Q = mpslinalg.matrix_exp(S)
    departure = torch.linalg.matrix_norm(Q.mT.double() @ Q.double() - torch.eye(n, dtype=torch.float64))
    norm1 = S.double().abs().sum(-2).amax(-1).clamp_min(1.0)
    u = metrics.unit_roundoff(dtype)
    assert (departure / (n * u * norm1)).max() < metrics.PASS_RATIO


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_nilpotent_is_its_finite_series(dtype):
    # strictly upper triangular N (N^n = 0): exp N = sum_{k<n} N^k / k! exactly; the computed result
    # is strictly upper triangular plus I, the diagonal exactly one and the lower part exactly zero
    # (products of strictly upper triangular matrices keep exact zeros); entries above: expm_ratio
    n = 7
    N = gaussian((3, n, n), dtype, 31).triu(1)
    E = mpslinalg.matrix_exp(N)
    assert torch.equal(E.tril(-1), torch.zeros_like(E.tril(-1)))
    assert torch.equal(torch.diagonal(E, dim1=-2, dim2=-1), torch.ones(3, n, dtype=dtype))
    series = sum(torch.linalg.matrix_power(N.to(torch.complex128), k) / math.factorial(k) for k in range(n))
    # expm_ratio's denominator against the exact series (κ: its general bound ‖N‖e^‖N‖/‖e^N‖)
    norm_n = torch.linalg.matrix_norm(N.to(torch.complex128), 2)
    kappa = (norm_n * torch.exp(norm_n) / torch.linalg.matrix_norm(series, 2)).clamp_min(1)
    err = torch.linalg.matrix_norm(E.to(torch.complex128) - series)
    ratio = err / (n * metrics.unit_roundoff(dtype) * torch.linalg.matrix_norm(series) * kappa)
    assert ratio.max() < metrics.PASS_RATIO, ratio


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_diagonal_is_elementwise_exp(dtype):
    # exp(diag d) = diag(e^d): off-diagonal entries stay exactly zero; each diagonal entry is
    # T_18(d / 2^s) (~u relative) squared s times, s from the whole matrix's 1-norm max|d|; a squaring
    # doubles the relative error and adds u (e_k = 2 e_(k-1) + u), so e_s ~ 2^s c u with c ~ 3 and
    # 2^s <= 2 max|d| / θ_18: |ê − e^d| / e^d <= 30 u max(1, 2 max|d| / θ_18)
    d = torch.tensor([-30.0, -3.0, -1e-3, 0.0, 1e-6, 0.7, 5.0, 40.0], dtype=torch.float64)
    if dtype.is_complex:
        d = torch.complex(d, torch.linspace(-3, 3, 8, dtype=torch.float64))
    A = torch.diag_embed(d).to(dtype)
    E = mpslinalg.matrix_exp(A)
    off = E - torch.diag_embed(torch.diagonal(E))
    assert torch.equal(off, torch.zeros_like(off))
    ref = torch.exp(d.to(torch.complex128 if dtype.is_complex else torch.float64))
    rel = (torch.diagonal(E).to(ref.dtype) - ref).abs() / ref.abs()
    theta = THETAS["double" if dtype in (torch.float64, torch.complex128) else "single"][-1]
    growth = max(1.0, 2 * d.abs().max().item() / theta)
    assert (rel <= metrics.PASS_RATIO * metrics.unit_roundoff(dtype) * growth).all(), rel


def test_batch_of_mixed_norms_equals_each_alone():
    # one batch evaluates every matrix at the batch's degree with masked squarings: each result must
    # still be an accurate exponential of its own matrix (ratio below 30), whatever its neighbours.
    # The last member is skew-symmetric with ‖A‖₂ = 40 (normal: κ = ‖A‖₂ exactly), needing s = 6..7
    scales = [1e-9, 1e-3, 0.2, 1.0, 6.0]
    A = [gaussian((5, 5), torch.float32, 40 + i) * s / 5 for i, s in enumerate(scales)]
    X = gaussian((5, 5), torch.float64, 49)
    S = X - X.T
    A.append((S / torch.linalg.matrix_norm(S, 2) * 40).float())
    A = torch.stack(A)
    E = mpslinalg.matrix_exp(A)
    alone = torch.stack([mpslinalg.matrix_exp(a) for a in A])
    for out in (E, alone):
        assert spectra.expm_ratio(A[:5], out[:5]).max() < metrics.PASS_RATIO
        assert spectra.expm_ratio(A[5], out[5], kappa=40.0) < metrics.PASS_RATIO


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_nan_gives_nan_and_spares_the_batch(dtype):
    A = gaussian((3, 4, 4), dtype, 50)
    A[1, 2, 3] = float("nan")
    E = mpslinalg.matrix_exp(A)
    assert torch.isnan(E[1]).all()
    assert spectra.expm_ratio(A[[0, 2]], E[[0, 2]]).max() < metrics.PASS_RATIO
