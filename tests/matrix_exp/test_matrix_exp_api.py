"""matrix_exp's semantics (torch.linalg.matrix_exp's): shapes, errors, views, routing, autograd."""

from __future__ import annotations

import pytest
import torch
from helpers import gaussian

import mpslinalg
from mpslinalg import routing
from reference import metrics, spectra


def test_errors_name_the_argument():
    with pytest.raises(RuntimeError, match="square"):
        mpslinalg.matrix_exp(torch.randn(2, 3))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        mpslinalg.matrix_exp(torch.randn(3))
    with pytest.raises(TypeError, match="floating point or complex"):
        mpslinalg.matrix_exp(torch.ones(3, 3, dtype=torch.int64))
    with pytest.raises(TypeError, match="torch.Tensor"):
        mpslinalg.matrix_exp([[1.0]])


@pytest.mark.parametrize("shape", [(0, 0), (3, 0, 0), (0, 4, 4), (2, 0, 3, 3)])
def test_empty(shape):
    A = torch.randn(shape)
    E = mpslinalg.matrix_exp(A)
    assert E.shape == A.shape and E.dtype == A.dtype


def test_order_one_is_scalar_exp():
    A = torch.randn(5, 1, 1, dtype=torch.complex64)
    assert torch.equal(mpslinalg.matrix_exp(A), A.exp())


def test_batch_dims_views_and_input_untouched():
    A = gaussian((2, 3, 5, 5), torch.complex64, 1)
    keep = A.clone()
    E = mpslinalg.matrix_exp(A)
    assert E.shape == A.shape and torch.equal(A, keep)
    assert spectra.expm_ratio(A, E).max() < metrics.PASS_RATIO
    # transposed, conjugated and strided views give exp of the view
    for V in (A.mT, A.conj(), A.mH, A[:, ::2]):
        assert spectra.expm_ratio(V, mpslinalg.matrix_exp(V)).max() < metrics.PASS_RATIO


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
def test_gradcheck_and_forward_mode(dtype):
    A = (gaussian((2, 3, 3), dtype, 3) * 0.7).requires_grad_()
    assert torch.autograd.gradcheck(mpslinalg.matrix_exp, (A,), check_forward_ad=True, fast_mode=True)
    assert torch.autograd.gradgradcheck(mpslinalg.matrix_exp, (A,), fast_mode=True)


def test_gradient_at_large_norm_uses_squaring():
    # a norm above θ_18 (squarings in the forward and in the 2n x 2n exponential of the backward)
    A = (gaussian((4, 4), torch.float64, 4) * 3).requires_grad_()
    assert torch.autograd.gradcheck(mpslinalg.matrix_exp, (A,), check_forward_ad=True, fast_mode=True)


def test_gradient_matches_torch():
    A = gaussian((3, 6, 6), torch.float64, 5).requires_grad_()
    G = gaussian((3, 6, 6), torch.float64, 6)
    (g,) = torch.autograd.grad(mpslinalg.matrix_exp(A), A, G)
    (g0,) = torch.autograd.grad(torch.linalg.matrix_exp(A), A, G)
    assert torch.allclose(g, g0, rtol=1e-10, atol=1e-12)


def test_torch_func():
    A = gaussian((3, 4, 4), torch.float64, 7)
    assert torch.allclose(torch.func.vmap(mpslinalg.matrix_exp)(A), torch.linalg.matrix_exp(A))
    for jac in (torch.func.jacrev, torch.func.jacfwd):
        assert torch.allclose(jac(mpslinalg.matrix_exp)(A[0]), jac(torch.linalg.matrix_exp)(A[0]))
    g = torch.func.grad(lambda x: mpslinalg.matrix_exp(x).sum())(A[0])
    g0 = torch.func.grad(lambda x: torch.linalg.matrix_exp(x).sum())(A[0])
    assert torch.allclose(g, g0)


def test_compile_fullgraph_and_meta():
    A = torch.randn(3, 4, 4)
    f = torch.compile(mpslinalg.matrix_exp, fullgraph=True, backend="aot_eager")
    assert spectra.expm_ratio(A, f(A)).max() < metrics.PASS_RATIO
    M = mpslinalg.matrix_exp(torch.empty(2, 5, 5, device="meta"))
    assert M.shape == (2, 5, 5) and M.is_meta


def test_routed_by_enable():
    A = gaussian((4, 5, 5), torch.float32, 8)
    with mpslinalg.enabled(devices="cpu", ops=("matrix_exp",), when="always"):
        E = torch.linalg.matrix_exp(A)
        E2 = torch.matrix_exp(A)
        assert routing.stats()["matrix_exp"]["ours"] == 2  # torch.matrix_exp calls linalg_matrix_exp
    assert torch.allclose(E, mpslinalg.matrix_exp(A)) and torch.allclose(E2, E)


def test_outside_the_table_is_torch_exactly(routing_table):
    A = torch.randn(6, 6)
    assert torch.equal(mpslinalg.matrix_exp(A), torch.linalg.matrix_exp(A))


@pytest.mark.cuda
def test_cuda_matches():
    A = gaussian((64, 16, 16), torch.float32, 9).cuda()
    with routing.ours_always():
        E = mpslinalg.matrix_exp(A)
    assert spectra.expm_ratio(A.cpu(), E.cpu()).max() < metrics.PASS_RATIO
