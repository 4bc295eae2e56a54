"""Rank decisions, thresholds and the Jacobi rotation's overflow guard, which the mutation gate
(issue 18, ``scripts/mutations.py``) showed untested. Every expected value is exact: the inputs are
diagonal (their singular values are the diagonal, computed without rounding) or exactly rank
deficient (a zero column stays exactly zero under Householder reflections), and each threshold is
a power of two placed a factor of 2 from the singular value it decides.

* ``spectral-keep-at-threshold``: ``σ > max(atol, rtol·σ₁)`` counts, strictly (torch).
* ``spectral-default-rtol-min-dim``: default ``rtol = eps·max(m, n)``, not ``min``.
* ``spectral-atol-given-keeps-default-rtol``: ``atol > 0`` alone sets ``rtol = 0``.
* ``lstsq-gelsy-rank-at-threshold``: with ``rcond = 0`` an exactly zero pivot is not counted.
* ``lstsq-gelsd-rcond-ge-1``: for gelsd ``rcond >= 1`` means ``u`` (LAPACK ``xLALSD``).
* ``svd-metal-huge-zeta-overflow``: a pair with ``|ζ| > 1.8e19`` (``1 + ζ²`` overflows in float32)
  is still rotated to convergence by ``svd_jacobi_small``.
"""

from __future__ import annotations

import importlib
import math

import pytest
import torch
from helpers import ORDER_IDS, ORDERS, InOrder, require_emulator

import mpslinalg as LA
from mpslinalg.kernels import load_library

svd_kernels = importlib.import_module("mpslinalg.svd.kernels")

EPS32 = torch.finfo(torch.float32).eps  # 2^-23
BACKENDS = ["torch", "emulator"]


def _use(backend):
    if backend == "emulator":
        require_emulator()
    return LA.use_backend(backend)


def _diag(m, n, values):
    A = torch.zeros(m, n)
    for i, v in enumerate(values):
        A[i, i] = v
    return A


@pytest.mark.parametrize("backend", BACKENDS)
def test_singular_value_at_the_threshold_does_not_count(backend):
    A = _diag(3, 3, [4.0, 2.0, 1.0])
    with _use(backend):
        assert int(LA.matrix_rank(A, atol=2.0)) == 1 == int(torch.linalg.matrix_rank(A, atol=2.0))
        assert int(LA.matrix_rank(A, rtol=0.5)) == 1  # 0.5 * 4 = 2: sigma = 2 is dropped
        P = LA.pinv(A, atol=2.0)
    assert torch.equal(P, _diag(3, 3, [0.25, 0.0, 0.0]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_default_rtol_uses_the_larger_dimension(backend):
    """2 x 8, sigma = [1, 4 eps]: the default threshold 8 eps drops 4 eps (2 eps would keep it)."""
    A = _diag(2, 8, [1.0, 4 * EPS32])
    with _use(backend):
        assert int(LA.matrix_rank(A)) == 1 == int(torch.linalg.matrix_rank(A))
        assert int(LA.matrix_rank(A.mT)) == 1
        P = LA.pinv(A)
    assert torch.equal(P, _diag(2, 8, [1.0]).mT)


@pytest.mark.parametrize("backend", BACKENDS)
def test_atol_alone_sets_rtol_to_zero(backend):
    """sigma = [1, 2^-30], atol = 2^-40: rtol is 0 (the default 2 eps = 2^-22 would drop 2^-30)."""
    A = _diag(2, 2, [1.0, 2.0**-30])
    with _use(backend):
        assert int(LA.matrix_rank(A, atol=2.0**-40)) == 2 == int(torch.linalg.matrix_rank(A, atol=2.0**-40))
        assert int(LA.matrix_rank(A, atol=torch.tensor(2.0**-40))) == 2
        assert int(LA.matrix_rank(A)) == 1


def test_gelsy_rcond_zero_does_not_count_an_exact_zero_pivot():
    """A zero column: its pivot is exactly 0 (last after column pivoting), so rank 3 of 4 also with
    rcond = 0 (the family's documented rule ``|r_kk| > rcond |r_11|``, strict), and X is the
    full-rank least-squares solution on the other columns with 0 in the zero column's place.
    (LAPACK's xGELSY tests ``smax rcond <= smin`` instead, so with rcond = 0 it counts the zero
    pivot: torch.linalg.lstsq returns rank 4 and a NaN/inf solution here.) Consistent B = A x*: the
    float32 solution's error is at most 30 m kappa_2 u relative (LAPACK's ratio threshold; the
    residual is 0, so no kappa^2 term)."""
    g = torch.Generator().manual_seed(7)
    A = torch.randn(6, 4, generator=g, dtype=torch.float64)
    A[:, 2] = 0
    xs = torch.tensor([[1.0], [-2.0], [0.0], [0.5]], dtype=torch.float64)
    B = A @ xs
    res = LA.lstsq(A.float(), B.float(), rcond=0.0, driver="gelsy")
    assert int(res.rank) == 3
    assert bool(res.solution.isfinite().all()) and float(res.solution[2, 0]) == 0.0
    kappa = float(torch.linalg.cond(A[:, [0, 1, 3]]))
    err = float((res.solution.double() - xs).abs().max() / xs.abs().max())
    assert err <= 30 * 6 * kappa * 2.0**-24


def test_gelsd_rcond_one_means_the_unit_roundoff():
    """LAPACK xLALSD: rcond <= 0 or >= 1 is replaced by eps: a full-rank well-conditioned A keeps
    its rank (rcond = 1 taken literally would drop every singular value but none is > sigma_1)."""
    A = _diag(4, 3, [3.0, 2.0, 1.0])
    B = torch.ones(4, 1)
    res = LA.lstsq(A, B, rcond=1.0, driver="gelsd")
    assert int(res.rank) == 3 == int(torch.linalg.lstsq(A, B, rcond=1.0, driver="gelsd").rank)
    assert torch.equal(res.solution, torch.tensor([[1 / 3], [0.5], [1.0]]))


@pytest.mark.parametrize("order,seed", ORDERS, ids=ORDER_IDS)
def test_jacobi_rotates_a_pair_whose_zeta_overflows(monkeypatch, order, seed):
    """x_p = e_1, x_q = [2.2e6, 1e13]: |g| = 2.2e6 > tol sqrt(a b) = sqrt(2) 2^-24 1e13 = 8.4e5 (the
    pair must be rotated) and zeta = (b - a) / (2 |g|) = 2.3e19, so 1 + zeta^2 overflows float32.
    Rutishauser's t = 1/(2|zeta|) there; the rotated pair is orthogonal to float32 precision
    (cosine <= (sqrt(n) + 1.01 m) u, as test_svd_kernels.py) and the sweep converges."""
    require_emulator()
    lib = load_library("svd", "cpu")
    monkeypatch.setattr(svd_kernels, "load_library", lambda family, device: InOrder(lib, order, seed))
    X = torch.tensor([[1.0, 2.2e6], [0.0, 1.0e13]])[None]
    n = 2
    tol = math.sqrt(n) * 2.0**-24
    ctol = 2 * n * 2.0**-24  # the library's convergence tolerance (svd.py, kernel contract)
    W, _, rotated = svd_kernels.MetalKernels(X.device, X.dtype).jacobi(X.clone(), None, 30, tol, ctol, True)
    assert not bool(rotated.any())
    W = W[0].double()
    cos = float((W[:, 0] @ W[:, 1]).abs() / (W[:, 0].norm() * W[:, 1].norm()))
    assert cos <= (math.sqrt(n) + 1.01 * 2) * 2.0**-24
