"""mpslinalg.matrix_rank, matrix_norm and cond against references with known singular values,
torch's argument rules, shapes, errors and gradients.

Bounds (threshold 30, u = 2^-24 for float32/complex64, 2^-53 for float64/complex128)
-----------------------------------------------------------------------------------
* Singular-value orders (``2``, ``-2``, ``'nuc'``): a backward-stable SVD has
  ``|σᵢ − σᵢ*| <= c·max(m,n)·u·σ₁`` (Weyl), so ``|‖A‖ − ‖A‖*| / (max(m,n)·u·σ₁·k) < 30`` with
  ``k = min(m,n)`` terms for ``'nuc'`` (1 otherwise).
* The other orders are sums of ``m·n`` absolute values: ``c·(m+n)·u·‖A‖`` (the float64 value of the
  same data is the reference).
* ``cond`` (``σ₁/σₙ``, or ``‖A‖‖A⁻¹‖`` with a backward-stable inverse): relative error
  ``<= c·max(m,n)·u·κ`` (the smallest singular value, or ``A⁻¹``, carries relative error ``κ·u``).
"""

from __future__ import annotations

import math

import pytest
import torch
from spectral_data import matrix as _matrix

import mpslinalg as LA
from reference import lapack as ref
from reference.metrics import unit_roundoff

THRESHOLD = 30.0
HOST = [torch.float32, torch.float64, torch.complex64, torch.complex128]
ORDS = ["fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf]


def _wide(A):
    return A.to(torch.complex128 if A.is_complex() else torch.float64)


# --------------------------------------------------------------------------------------------------
# matrix_rank
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", HOST, ids=str)
@pytest.mark.parametrize("shape", [(3, 7, 5), (3, 5, 7), (2, 6, 6)], ids=str)
def test_matrix_rank_of_constructed_ranks(shape, dtype):
    for rank in range(0, min(shape[-2:]) + 1):
        A = _matrix(shape, dtype, rank=rank, cond=10.0, seed=rank)
        assert LA.matrix_rank(A).tolist() == [rank] * shape[0]


def test_matrix_rank_tolerances_follow_torch():
    A = _matrix((2, 5, 5), torch.float64, cond=1e8, seed=1)  # σ = 1, 1e-2, …, 1e-8
    H = (A + A.mH) / 2
    cases = [{}, {"rtol": 1e-3}, {"atol": 1e-5}, {"atol": 1e-5, "rtol": 1e-1}, {"atol": torch.tensor([1e-3, 1e-7])},
             {"rtol": torch.tensor(1e-5)}, {"hermitian": True}, {"hermitian": True, "atol": 1e-3}]
    for kw in cases:
        M = H if kw.get("hermitian") else A
        assert torch.equal(LA.matrix_rank(M, **kw), torch.linalg.matrix_rank(M, **kw)), kw
    # deprecated positional tol = atol (rtol = 0)
    assert torch.equal(LA.matrix_rank(A, 1e-5), torch.linalg.matrix_rank(A, 1e-5))
    assert torch.equal(LA.matrix_rank(A, tol=1e-5), torch.linalg.matrix_rank(A, tol=1e-5))


def test_matrix_rank_shapes_out_and_errors():
    for shape in [(0, 3), (3, 0), (2, 0, 0)]:
        A = torch.zeros(shape)
        assert torch.equal(LA.matrix_rank(A), torch.linalg.matrix_rank(A))
    out = torch.empty(0, dtype=torch.int64)
    A = _matrix((2, 4, 3), torch.float32, rank=2)
    assert LA.matrix_rank(A, out=out) is out and out.tolist() == [2, 2]
    with pytest.raises(RuntimeError, match="square"):
        LA.matrix_rank(torch.randn(3, 4), hermitian=True)
    with pytest.raises(TypeError, match="tol cannot be combined"):
        LA.matrix_rank(A, 1e-3, atol=1e-3)
    with pytest.raises(TypeError, match="complex type"):
        LA.matrix_rank(A, rtol=torch.tensor(1j))


# --------------------------------------------------------------------------------------------------
# matrix_norm
# --------------------------------------------------------------------------------------------------


def _norm_ratio(A, value, ord_):
    m, n = A.shape[-2:]
    u = unit_roundoff(A.dtype)
    exact = torch.linalg.matrix_norm(_wide(A), ord_)
    s1 = ref.svdvals(A)[..., 0]
    if ord_ in ("nuc", 2, -2):
        scale = max(m, n) * u * s1 * (min(m, n) if ord_ == "nuc" else 1)
    else:
        scale = (m + n) * u * torch.linalg.matrix_norm(_wide(A), ord_).clamp_min(s1)
    return ((value.double() - exact).abs() / scale).max().item()


@pytest.mark.parametrize("dtype", HOST, ids=str)
@pytest.mark.parametrize("ord_", ORDS, ids=str)
def test_matrix_norm_every_order(ord_, dtype):
    A = _matrix((3, 6, 4), dtype, cond=1e3, seed=2) * 3.0
    value = LA.matrix_norm(A, ord_)
    assert value.shape == (3,) and value.dtype == (A.real.dtype if A.is_complex() else A.dtype)
    assert _norm_ratio(A, value, ord_) < THRESHOLD


@pytest.mark.parametrize("ord_", ORDS, ids=str)
def test_matrix_norm_every_backend(backend, backend_device, gpu_dtype, ord_):
    A = _matrix((2, 5, 4), gpu_dtype, cond=100.0, seed=3)
    value = LA.matrix_norm(A.to(backend_device), ord_).cpu()
    assert _norm_ratio(A, value, ord_) < THRESHOLD


def test_matrix_norm_dim_keepdim_dtype_as_torch():
    A = torch.randn(3, 4, 5, dtype=torch.float64)
    for ord_ in ORDS:
        for dim, keepdim in [((0, 2), True), ((2, 0), False), ((-1, 1), True), ((1, -1), False)]:
            ours = LA.matrix_norm(A, ord_, dim, keepdim)
            theirs = torch.linalg.matrix_norm(A, ord_, dim, keepdim)
            assert ours.shape == theirs.shape, (ord_, dim, keepdim)
            torch.testing.assert_close(ours, theirs)
    x = torch.randn(3, 3)
    assert LA.matrix_norm(x, dtype=torch.float64).dtype == torch.float64
    assert LA.matrix_norm(x.to(torch.complex64), dtype=torch.complex128).dtype == torch.float64
    out = torch.empty(0)
    assert LA.matrix_norm(x, 2, out=out) is out


@pytest.mark.parametrize("ord_", ["fro", "nuc", 2, 1, math.inf], ids=str)
def test_matrix_norm_empty_as_torch(ord_):
    for shape in [(2, 0, 3), (2, 3, 0)]:
        A = torch.zeros(shape)
        torch.testing.assert_close(LA.matrix_norm(A, ord_), torch.linalg.matrix_norm(A, ord_))


def test_matrix_norm_errors():
    A = torch.randn(3, 3)
    for bad in [3, 0, "abc", True]:
        with pytest.raises(RuntimeError, match="not supported"):
            LA.matrix_norm(A, bad)
    with pytest.raises(RuntimeError, match="dims must be different"):
        LA.matrix_norm(A, dim=(0, 0))
    with pytest.raises(IndexError, match="out of range"):
        LA.matrix_norm(A, dim=(0, 2))
    with pytest.raises(RuntimeError, match="should be complex"):
        LA.matrix_norm(A.to(torch.complex64), dtype=torch.float32)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        LA.matrix_norm(torch.randn(3))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
@pytest.mark.parametrize("ord_", ORDS, ids=str)
def test_matrix_norm_gradcheck(ord_, dtype):
    # distinct singular values and distinct row/column sums: every order is differentiable here
    A = (_matrix((2, 4, 3), dtype, cond=5.0, seed=4) + 0.1).requires_grad_()
    torch.autograd.gradcheck(lambda x: LA.matrix_norm(x, ord_), (A,))


# --------------------------------------------------------------------------------------------------
# cond
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", HOST, ids=str)
@pytest.mark.parametrize("p", [None, *ORDS], ids=str)
def test_cond_every_order(p, dtype):
    kappa = 1e2
    A = _matrix((3, 5, 5), dtype, cond=kappa, seed=5)
    value = LA.cond(A, p)
    exact = torch.linalg.cond(_wide(A), p)
    u = unit_roundoff(dtype)
    assert value.shape == (3,)
    assert ((value.double() - exact).abs() / (exact * 5 * u * kappa)).max().item() < THRESHOLD


@pytest.mark.parametrize("p", [None, 2, -2], ids=str)
def test_cond_rectangular(p):
    A = _matrix((2, 7, 4), torch.float64, cond=1e3, seed=6)
    torch.testing.assert_close(LA.cond(A, p), torch.linalg.cond(A, p))
    torch.testing.assert_close(LA.cond(A.mT, p), torch.linalg.cond(A.mT, p))


def test_cond_singular_empty_and_errors():
    S = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    for p in [None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf]:
        torch.testing.assert_close(LA.cond(S, p), torch.linalg.cond(S, p), equal_nan=True)
        torch.testing.assert_close(LA.cond(torch.zeros(2, 0, 0), p), torch.linalg.cond(torch.zeros(2, 0, 0), p))
    with pytest.raises(RuntimeError, match="square"):
        LA.cond(torch.randn(3, 4), 1)
    with pytest.raises(RuntimeError, match="invalid norm type"):
        LA.cond(torch.randn(3, 3), 3)
    out = torch.empty(0)
    assert LA.cond(torch.randn(3, 3), out=out) is out


def test_cond_every_backend(backend, backend_device, gpu_dtype):
    A = _matrix((2, 4, 4), gpu_dtype, cond=10.0, seed=7)
    for p in [None, -2, "fro", 1]:
        value = LA.cond(A.to(backend_device), p).cpu().double()
        exact = torch.linalg.cond(_wide(A), p)
        assert ((value - exact).abs() / (exact * 4 * unit_roundoff(gpu_dtype) * 10.0)).max().item() < THRESHOLD


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
@pytest.mark.parametrize("p", [None, -2, "fro", 1], ids=str)
def test_cond_gradcheck(p, dtype):
    A = (_matrix((2, 3, 3), dtype, cond=5.0, seed=8) + 0.1).requires_grad_()
    torch.autograd.gradcheck(lambda x: LA.cond(x, p), (A,))
