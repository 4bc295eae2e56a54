"""eig/eigvals/eig_ex semantics (torch.linalg's): shapes, errors, views, out=, routing, autograd."""

from __future__ import annotations

import pytest
import torch
from helpers import NoHostSync, gaussian

import mpslinalg
from mpslinalg import routing
from reference import spectra


def _phase_free(V):
    """``V`` with each column's phase fixed by its first entry (a function of the eigenspace only)."""
    top = V[..., :1, :]
    return V * (top.conj() / top.abs())


def test_errors():
    with pytest.raises(RuntimeError, match="square"):
        mpslinalg.eig(torch.randn(3, 4))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        mpslinalg.eigvals(torch.randn(4))
    with pytest.raises(TypeError, match="floating point or complex"):
        mpslinalg.eig(torch.ones(3, 3, dtype=torch.int32))
    with pytest.raises(TypeError, match="must be bool"):
        mpslinalg.eig_ex(torch.randn(3, 3), check_errors=1)


@pytest.mark.parametrize("shape", [(0, 0), (4, 0, 0), (0, 3, 3)])
def test_empty(shape):
    A = torch.randn(shape)
    L, V = mpslinalg.eig(A)
    assert L.shape == shape[:-1] and V.shape == shape and L.dtype == torch.complex64
    assert mpslinalg.eigvals(A).shape == shape[:-1]
    assert mpslinalg.eig_ex(A).info.shape == shape[:-2]


def test_batch_dims_views_and_input_untouched():
    A = gaussian((2, 3, 5, 5), torch.complex64, 1)
    keep = A.clone()
    L, V = mpslinalg.eig(A)
    assert L.shape == (2, 3, 5) and V.shape == (2, 3, 5, 5) and torch.equal(A, keep)
    assert spectra.eig_residual_ratio(A, L, V).max() < 100
    for view in (A.mT, A.conj(), A.mH, A[:, ::2]):
        Lv, Vv = mpslinalg.eig(view)
        assert spectra.eig_residual_ratio(view, Lv, Vv).max() < 100


def test_out():
    A = gaussian((3, 4, 4), torch.float32, 2)
    L0, V0 = mpslinalg.eig(A)
    L, V = torch.empty(0, dtype=torch.complex64), torch.empty(0, dtype=torch.complex64)
    res = mpslinalg.eig(A, out=(L, V))
    assert res.eigenvalues is L and torch.equal(L, L0) and torch.equal(V, V0)
    w = torch.empty(3, 4, dtype=torch.complex64)
    assert mpslinalg.eigvals(A, out=w) is w and torch.equal(w, L0)
    with pytest.raises(RuntimeError, match="dtype"):
        mpslinalg.eigvals(A, out=torch.empty(3, 4))
    info = torch.empty(3, dtype=torch.int32)
    assert mpslinalg.eig_ex(A, out=(L, V, info)).info is info


def test_eig_ex_has_no_host_sync_and_reports():
    A = gaussian((4, 6, 6), torch.float32, 3)
    A[2, 1, 1] = float("inf")
    with NoHostSync():
        L, V, info = mpslinalg.eig_ex(A)
    assert info.tolist() == [0, 0, 7, 0]
    assert spectra.eig_residual_ratio(A[[0, 1, 3]], L[[0, 1, 3]], V[[0, 1, 3]]).max() < 100
    with pytest.raises(RuntimeError, match="should not contain infs or NaNs"):
        mpslinalg.eig_ex(A, check_errors=True)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
def test_gradcheck(dtype):
    A = gaussian((2, 4, 4), dtype, 4).requires_grad_()

    def f(x):
        L, V = mpslinalg.eig(x)
        return L, _phase_free(V)

    assert torch.autograd.gradcheck(f, (A,), check_forward_ad=True, fast_mode=True)
    assert torch.autograd.gradcheck(mpslinalg.eigvals, (A,), check_forward_ad=True, fast_mode=True)
    assert torch.autograd.gradgradcheck(f, (A,), fast_mode=True)


def test_gradient_matches_torch():
    # an order- and phase-invariant loss: the same gradient whatever the order of the eigenvalues
    A = gaussian((3, 5, 5), torch.float64, 5).requires_grad_()

    def loss(eig_fn, x):
        L, V = eig_fn(x)
        return (L.abs() ** 3).sum() + (V.abs() ** 4 * L.real[..., None, :]).sum()

    (g,) = torch.autograd.grad(loss(mpslinalg.eig, A), A)
    (g0,) = torch.autograd.grad(loss(torch.linalg.eig, A), A)
    assert torch.allclose(g, g0, rtol=1e-8, atol=1e-10)


def test_phase_dependent_loss_raises_torch_message():
    A = gaussian((4, 4), torch.float64, 6).requires_grad_()
    _, V = mpslinalg.eig(A)
    with pytest.raises(RuntimeError, match=r"linalg_eig_backward: The eigenvectors in the complex case are "
                                           r"specified up to multiplication by e\^\{i phi\}"):
        V.imag.sum().backward()


def test_torch_func():
    A = gaussian((3, 4, 4), torch.float64, 7)
    # vmap runs our op once on the batch (the declaration's ranks): the same values as the batched
    # call, and the spectrum within test_eig_accuracy's bound of LAPACK's (the order may differ)
    from test_eig_accuracy import check_values

    w = torch.func.vmap(mpslinalg.eigvals)(A)
    with routing.ours_always():
        assert torch.equal(w, mpslinalg.eigvals(A))
    check_values(A, w)
    g = torch.func.grad(lambda x: mpslinalg.eigvals(x).abs().sum())(A[0])
    g0 = torch.func.grad(lambda x: torch.linalg.eigvals(x).abs().sum())(A[0])
    assert torch.allclose(g, g0)
    j = torch.func.jacfwd(lambda x: mpslinalg.eigvals(x).abs())(A[0])
    j0 = torch.func.jacrev(lambda x: torch.linalg.eigvals(x).abs())(A[0])
    assert torch.allclose(torch.sort(j.reshape(4, -1), 0).values, torch.sort(j0.reshape(4, -1), 0).values)


def test_compile_and_meta():
    A = torch.randn(3, 5, 5)
    f = torch.compile(lambda x: mpslinalg.eig(x), fullgraph=True, backend="aot_eager")
    L, V = f(A)
    assert spectra.eig_residual_ratio(A, L, V).max() < 100
    L, V = mpslinalg.eig(torch.empty(2, 6, 6, device="meta"))
    assert L.shape == (2, 6) and V.shape == (2, 6, 6) and L.dtype == torch.complex64


def test_routed_by_enable():
    A = gaussian((4, 5, 5), torch.float32, 8)
    with mpslinalg.enabled(devices="cpu", ops=("eig", "eigvals"), when="always"):
        L, V = torch.linalg.eig(A)
        w = torch.linalg.eigvals(A)
        assert routing.stats()["eig"]["ours"] == 1 and routing.stats()["eigvals"]["ours"] == 1
    assert torch.equal(L, mpslinalg.eig(A)[0]) and torch.equal(w, L)


def test_outside_the_table_is_torch_exactly(routing_table):
    A = torch.randn(6, 6)
    L, V = mpslinalg.eig(A)
    L0, V0 = torch.linalg.eig(A)
    assert torch.equal(L, L0) and torch.equal(V, V0)
