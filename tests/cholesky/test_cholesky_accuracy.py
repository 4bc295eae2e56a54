"""Accuracy of the Cholesky family on every implementation path (``path`` fixture), with the bounds
derived next to each test. u = 2^-24 (float32/complex64), 2^-53 (float64/complex128).

* **Factorization** (LAPACK ``xPOT01``): ``‖A − L Lᴴ‖₁/(n ‖A‖₁ u) < 30`` (``TESTING/ctest.in``).
  Higham (2002) Thm 10.3 gives ``‖ΔA‖ <= γ_{n+1} ‖|L||Lᴴ|‖ <= γ_{n+1} n ‖A‖`` for any order of the
  inner products (blocked with conventional GEMM and substitution solves included, §10.1.3).
* **Componentwise, scale invariant**: ``|A − L Lᴴ|_ij <= γ/(1−γ) √(a_ii a_jj)`` with
  ``γ = γ_{n+1} = (n+1)u/(1−(n+1)u)`` (same theorem with Cauchy-Schwarz:
  ``reference.metrics.cholesky_componentwise``). Complex arithmetic: a complex product errs by at
  most ``√2 γ₂`` (Higham Lemma 3.5), so ``γ_{√2 (n+2)}`` there. This is what graded and 1e±30-scaled
  matrices must meet: the bound does not depend on the scaling of rows and columns.
* **Solve** (``xPOT02``): ``‖B − AX‖₁/(‖A‖₁‖X‖₁u) < 30`` (Higham Thm 10.4: backward stable,
  ``|ΔA| <= γ_{3n+1}|L||Lᴴ|``).
* **Inverse** (``xPOT03``): ``‖I − X A‖₁/(n ‖A‖₁‖X‖₁ u) < 30`` (``potri``: a backward-stable
  triangle inverse and one product; Higham §14.2).
* **Failure**: a matrix built to fail at order ``k`` (leading minors of order ``< k`` are those of a
  well-conditioned matrix, the pivot at ``k`` is ``-l_kk² < 0`` exactly) gives ``info = k``; its
  first ``k − 1`` columns factor the leading ``k − 1`` rows and columns (the ``xPOT01`` ratio of that
  block < 30).
"""

from __future__ import annotations

import math

import pytest
import torch

import mpslinalg as LA
from reference import matrices, metrics

DTYPES = [torch.float32, torch.complex64]
DID = ["float32", "complex64"]
HOST = [torch.float64, torch.complex128]


def _gamma(n: int, dtype: torch.dtype) -> float:
    u = metrics.unit_roundoff(dtype)
    k = math.sqrt(2) * (n + 2) if dtype.is_complex else n + 1
    g = k * u / (1 - k * u)
    return g / (1 - g)


def _dtypes(path):
    return DTYPES + ([] if path == "emulator" else HOST)


def _check(A, L, info, upper=False):
    assert info.dtype == torch.int32 and info.shape == A.shape[:-2]
    assert torch.equal(info, torch.zeros_like(info))
    assert float(metrics.cholesky_ratio(A, L, upper=upper).max()) < metrics.PASS_RATIO
    n = A.shape[-1]
    assert float(metrics.cholesky_componentwise(A, L, upper=upper).max()) <= _gamma(n, L.dtype)
    # the factor's structure: triangular, real positive diagonal
    T = L.mH if upper else L
    assert torch.equal(T.triu(1), torch.zeros_like(T))
    d = T.diagonal(dim1=-2, dim2=-1)
    if d.is_complex():
        assert torch.equal(d.imag, torch.zeros_like(d.imag))
    assert bool((d.real > 0).all())


@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
def test_random_positive_definite(path, upper):
    for dtype in _dtypes(path):
        for n, batch in [(1, (3,)), (7, (2, 3)), (16, (4,)), (33, (2,)), (70, (2,))]:
            A = matrices.positive_definite(n, 1e3, batch=batch, dtype=dtype, seed=n)
            L, info = LA.cholesky_ex(A, upper=upper)
            _check(A, L, info, upper)


def test_graded_and_extreme_scales(path):
    """D H D with D spanning 12 decades (diagonal 1 ... 1e-24), and the whole matrix at 1e±30:
    the componentwise bound holds unchanged (module docstring)."""
    for dtype in _dtypes(path)[:2]:
        n = 40
        wide = torch.complex128 if dtype.is_complex else torch.float64
        H = matrices.positive_definite(n, 10.0, batch=(2,), dtype=wide, seed=3)
        d = 10.0 ** (-12 * torch.arange(n, dtype=torch.float64) / (n - 1))
        A = (d[:, None] * H * d[None, :]).to(dtype)
        L, info = LA.cholesky_ex(A)
        _check(A, L, info)
        for scale in (1e-30, 1e30):
            As = matrices.scaled(matrices.positive_definite(n, 1e2, batch=(2,), dtype=dtype, seed=4), scale)
            L, info = LA.cholesky_ex(As)
            _check(As, L, info)


def test_near_singular(path):
    """κ = 1e5 must factor (20 n^{3/2} κ u < 1, Higham Thm 10.7). At κ = 1/u the factorization may
    or may not complete in float32; either it does and meets the bounds, or info = k > 0 and the
    first k - 1 columns factor the leading block."""
    for dtype in DTYPES:
        A = matrices.positive_definite(24, 1e5, batch=(3,), dtype=dtype, seed=5)
        _check(A, *LA.cholesky_ex(A))
        A = matrices.positive_definite(24, 1 / metrics.unit_roundoff(dtype), "cluster", batch=(4,), dtype=dtype,
                                       seed=6)
        L, info = LA.cholesky_ex(A)
        for b in range(4):
            k = int(info[b])
            if k == 0:
                assert float(metrics.cholesky_ratio(A[b], L[b])) < metrics.PASS_RATIO
            else:
                m = k - 1
                assert float(metrics.cholesky_ratio(A[b, :m, :m], L[b, :m, :m])) < metrics.PASS_RATIO


def _failing(n: int, k: int, dtype, seed: int) -> torch.Tensor:
    """A Hermitian matrix whose leading minors are positive below order k and not at k:
    A = L0 L0ᴴ with A[k-1, k-1] lowered by 2 l_kk² (the pivot there becomes -l_kk² exactly)."""
    wide = torch.complex128 if dtype.is_complex else torch.float64
    L0 = torch.linalg.cholesky(matrices.positive_definite(n, 10.0, dtype=wide, seed=seed))
    A = L0 @ L0.mH
    A[k - 1, k - 1] -= 2 * L0[k - 1, k - 1] ** 2
    return A.to(dtype)


@pytest.mark.parametrize("n", [5, 20, 45])
def test_indefinite_info_is_the_failing_order(path, n):
    for dtype in _dtypes(path):
        ks = [1, n // 2 + 1, n]
        A = torch.stack([_failing(n, k, dtype, seed=n + k) for k in ks]
                        + [matrices.positive_definite(n, 10.0, dtype=dtype, seed=1)])
        L, info = LA.cholesky_ex(A)  # no exception under _ex
        assert info.tolist() == [*ks, 0]
        _check(A[3:], L[3:], info[3:])
        for b, k in enumerate(ks):
            m = k - 1
            if m:
                assert float(metrics.cholesky_ratio(A[b, :m, :m], L[b, :m, :m])) < metrics.PASS_RATIO
            if path != "torch":  # mpslinalg's kernels clear the columns past the failure
                assert torch.equal(L[b, :, m:], torch.zeros_like(L[b, :, m:]))
        with pytest.raises(torch.linalg.LinAlgError, match=rf"\(Batch element 1\).*order {ks[1]} "):
            LA.cholesky(A[[3, 1]])


def test_nan_and_inf(path):
    """NaN fails like a non-positive pivot (LAPACK potrf's disnan test): the same info as torch's
    LAPACK call, no hang, no exception under _ex. An inf diagonal entry never hangs or disturbs the
    other matrices of the batch; its own info is not compared (LAPACK itself is inconsistent there:
    MKL's potrf of an 8 x 8 block with a_00 = inf returns info 2 and NaN, of the 20 x 20 info 0)."""
    for dtype in DTYPES:
        n = 20
        A = matrices.positive_definite(n, 10.0, batch=(5,), dtype=dtype, seed=8)
        A[0, 6, 6] = float("nan")          # NaN pivot at order 7
        A[1, 11, 3] = float("nan")         # NaN below the diagonal: the pivot of order 12 is NaN
        A[2, 3, 11] = float("nan")         # in the unread triangle: no effect
        A[3, 0, 0] = float("inf")
        L, info = LA.cholesky_ex(A)
        _, info_torch = torch.linalg.cholesky_ex(A)
        assert info.tolist()[:3] == [7, 12, 0] and torch.equal(info[:3], info_torch[:3])
        assert 0 <= int(info[3]) <= n
        _check(A[2], L[2], info[2])
        _check(A[4], L[4], info[4])
        assert bool(torch.isfinite(L[0, :, :6]).all()) and bool(torch.isfinite(L[1, :, :3]).all())


def test_only_the_named_triangle_is_read(path):
    """Garbage (NaN included) in the other triangle and an imaginary part on the diagonal change
    nothing: the factor is bit for bit that of the clean Hermitian matrix."""
    for dtype in _dtypes(path):
        A = matrices.positive_definite(24, 100.0, batch=(2,), dtype=dtype, seed=9)
        for upper in (False, True):
            unread = torch.ones(24, 24, dtype=torch.bool).triu(1)
            dirty = A.masked_fill(unread.mT if upper else unread, float("nan"))
            if dtype.is_complex:
                dirty = dirty + 1j * torch.diag_embed(torch.arange(1.0, 25.0).to(dtype)).expand_as(A)
            clean, _ = LA.cholesky_ex(A, upper=upper)
            got, info = LA.cholesky_ex(dirty, upper=upper)
            assert torch.equal(got, clean) and not bool(info.any())


@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
def test_cholesky_solve_backward_error(path, upper):
    for dtype in _dtypes(path):
        for n, k in [(1, 1), (9, 3), (40, 5)]:
            A = matrices.positive_definite(n, 1e4, batch=(3,), dtype=dtype, seed=10 + n)
            B = matrices.random(n, k, batch=(3,), dtype=dtype, seed=11 + n)
            F = LA.cholesky(A, upper=upper)
            X = LA.cholesky_solve(B, F, upper=upper)
            assert X.shape == B.shape and X.dtype == dtype
            assert float(metrics.solve_ratio(A, X, B).max()) < metrics.PASS_RATIO


@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
def test_cholesky_inverse_ratio(path, upper):
    for dtype in _dtypes(path):
        for n in (1, 12, 40):
            A = matrices.positive_definite(n, 1e4, batch=(2,), dtype=dtype, seed=20 + n)
            X = LA.cholesky_inverse(LA.cholesky(A, upper=upper), upper=upper)
            assert torch.equal(X, X.mH)  # exactly Hermitian, as torch's
            assert float(metrics.inverse_ratio(A, X).max()) < metrics.PASS_RATIO
