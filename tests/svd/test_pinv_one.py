"""``pinv`` of one small CPU matrix with torch's defaults: one C call (:func:`mpslinalg.svd.c.pinv_one`,
the Jacobi SVD and ``V Σ⁺ Uᴴ`` summed in double; issue 34.7's host overhead).

Bounds: the Moore–Penrose and reference ratios of ``test_pinv`` (its docstring derives them:
first-order perturbation of ``A⁺`` by a backward-stable SVD, ``c·max(m, n)·u·κ`` with ``κ = σ₁/σ_r``
of the kept values, ratio < 30). The same ratios of LAPACK's ``torch.linalg.pinv`` on the same
inputs are the peer (docs/ops/svd.md gives both maxima).
"""

from __future__ import annotations

import importlib

import pytest
import torch
from spectral_data import matrix
from test_pinv import THRESHOLD, mp_ratios

import mpslinalg as LA

spectral = importlib.import_module("mpslinalg.svd.spectral")
svd_c = importlib.import_module("mpslinalg.svd.c")
kernels = importlib.import_module("mpslinalg.svd.kernels")

pytestmark = pytest.mark.skipif(not svd_c.usable(torch.empty(1)), reason="the SVD C kernel needs a C compiler")

DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]
SHAPES = [(8, 8), (5, 3), (3, 5), (1, 1), (1, 6), (6, 1), (16, 16), (12, 4), (4, 12)]


@pytest.fixture
def c_calls(monkeypatch):
    """Shapes served by the C call; torch.linalg.pinv must not run beside it."""
    seen = []
    real = svd_c.pinv_one
    monkeypatch.setattr(svd_c, "pinv_one", lambda A, *a: (seen.append(tuple(A.shape)), real(A, *a))[1])
    torch_pinv = torch.linalg.pinv
    monkeypatch.setattr(torch.linalg, "pinv", lambda *a, **k: (seen.append("torch"), torch_pinv(*a, **k))[1])
    return seen


def _hard(shape, dtype):
    """Well and ill conditioned, rank-deficient, graded and scaled matrices of one shape."""
    k = min(shape)
    cond = 1e4 if dtype in (torch.float32, torch.complex64) else 1e10
    out = [matrix(shape, dtype, cond=c, seed=s) for s, c in enumerate((1.0, 10.0, cond))]
    if k > 2:
        out.append(matrix(shape, dtype, rank=2, cond=10.0, seed=5))
        out.append(matrix(shape, dtype, rank=k - 1, cond=100.0, seed=6))
    g = torch.Generator().manual_seed(9)
    D = torch.logspace(0, -3, shape[1], dtype=torch.float64)  # graded columns, κ(D) = 1e3
    out.append((torch.randn(*shape, generator=g, dtype=torch.float64) * D).to(dtype))
    base = matrix(shape, dtype, cond=100.0, seed=7)
    out += [base * 2.0**60, base * 2.0**-60]  # exact scalings far from 1 (the kernel's power of two)
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_hard_inputs_meet_the_bounds_in_one_c_call(shape, dtype, c_calls):
    for A in _hard(shape, dtype):
        before = A.clone()
        X = LA.pinv(A)
        assert c_calls == [shape] and X.shape == shape[::-1] and X.dtype == dtype and X.is_contiguous()
        assert torch.equal(A, before)
        ratios = mp_ratios(A, X)
        assert max(ratios.values()) < THRESHOLD, ratios
        c_calls.clear()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_non_finite_input_gives_nan_as_the_batched_path(dtype, c_calls):
    for bad in (float("nan"), float("inf"), -float("inf")):
        A = torch.randn(4, 6, dtype=dtype, generator=torch.Generator().manual_seed(2))
        A[1, 2] = bad  # torch raises for NaN and returns a finite wrong answer for inf
        assert bool(LA.pinv(A).isnan().all()) and c_calls == [(4, 6)]
        assert bool(LA.pinv(A[None]).isnan().all())
        c_calls.clear()


@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (1, 1)], ids=str)
def test_zero_matrix_gives_zeros(shape, c_calls):
    X = LA.pinv(torch.zeros(shape, dtype=torch.complex64))
    assert torch.equal(X, torch.zeros(shape[::-1], dtype=torch.complex64)) and c_calls == [shape]


def test_views_are_read_as_the_matrix_they_are(c_calls):
    B = torch.randn(7, 12, dtype=torch.complex64, generator=torch.Generator().manual_seed(3))
    for A in (B[:, ::2], B[:, :7].mT, B[:, :6].conj(), -B[:, :6], B[:5, :6].conj().mT):
        X = LA.pinv(A)
        assert torch.equal(X, LA.pinv(A.resolve_conj().resolve_neg().contiguous()))


def test_larger_matrices_and_other_tolerances_take_lapack(c_calls):
    A = torch.randn(20, 20, generator=torch.Generator().manual_seed(4))
    assert torch.equal(LA.pinv(A), torch.linalg.pinv(A)) and c_calls == ["torch", "torch"]  # PINV_TORCH_MAX
    c_calls.clear()
    A = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    LA.pinv(A, rtol=1e-3)
    LA.pinv(A, atol=0.1)
    LA.pinv(A, hermitian=True)
    LA.pinv(A[None])
    assert all(shape != (5, 5) for shape in c_calls)


def test_no_convergence_takes_the_general_path(monkeypatch, c_calls):
    monkeypatch.setattr(kernels.TUNING, "max_sweeps", 1)  # one sweep: a 16x16 matrix is left rotating
    A = matrix((16, 16), torch.float64, cond=1e3, seed=1)
    assert svd_c.pinv_one(A, 16 * 2.0**-52, 1) is None
    c_calls.clear()
    X = LA.pinv(A)
    assert c_calls == [(16, 16), "torch"]
    assert max(mp_ratios(A, X).values()) < THRESHOLD


def test_gradients_and_transforms_take_the_op(c_calls):
    A = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    LA.pinv(A).sum().backward()
    torch.func.vmap(LA.pinv)(torch.randn(2, 4, 3, dtype=torch.float64))
    assert (4, 3) not in c_calls and A.grad is not None
