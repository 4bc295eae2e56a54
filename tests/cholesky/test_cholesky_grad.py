"""Derivatives of the Cholesky family: gradcheck/gradgradcheck (reverse, forward mode included) in
float64/complex128 on the torch backend's paths, agreement with torch's own derivatives, the
``torch.func`` transforms (vmap, grad, jacrev, jacfwd), and the emulator's float32 gradients
against float64 at a κ-scaled bound.

How the inputs are fed is torch's own (its OpInfo gradcheck wrappers): ``cholesky`` reads a
Hermitian matrix, so it is checked on ``A = X Xᴴ + n I`` built from a free ``X``; ``cholesky_solve``
and ``cholesky_inverse`` read a triangle, so they are checked on ``L = tril(X)`` with a positive
diagonal (their derivative formulas, like torch's, are those of the triangular factor).

Bounds: gradcheck's defaults (finite differences in float64). Against torch: the same formula
evaluated by backward-stable steps (products and triangular solves with ``L``), so a relative
difference ``<= 2 · 30 n κ₂(A) u`` (first order). Emulator float32 against float64: the forward
``L`` has a relative error ``<= 30 n κ₂(A) u`` (Sun's perturbation bound for Cholesky,
``‖ΔL‖/‖L‖ <= κ₂ ‖ΔA‖/‖A‖`` with the ``xPOT01`` backward error) and each of the backward's two
solves with ``L`` adds ``30 n √κ₂ u``: ``<= 30 n (κ₂ + 2√κ₂) u <= 90 n κ₂ u``.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

import mpslinalg as LA
from mpslinalg.cholesky import TUNING
from mpslinalg.kernels import use_backend
from reference import matrices, metrics

WIDE = [torch.float64, torch.complex128]
WID = ["float64", "complex128"]


@pytest.fixture(params=["direct", "blocked"])
def torch_path(request, monkeypatch):
    """The torch backend as shipped (the device's potrf) and through the blocked algorithm."""
    if request.param == "blocked":
        monkeypatch.setitem(TUNING.torch_direct_max, "cpu", 0)
        monkeypatch.setattr(TUNING, "nb", 2)
    with use_backend("torch"):
        yield request.param


def _hermitian(X):
    n = X.shape[-1]
    return X @ X.mH + n * torch.eye(n, dtype=X.dtype)


def _factor(X):
    """A triangular factor with a positive diagonal from a free X (torch's triangular wrapper)."""
    return X.tril(-1) + torch.diag_embed(X.diagonal(dim1=-2, dim2=-1).real.abs().to(X.dtype) + 1)


def _gen(shape, dtype, seed):
    return torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(seed)).requires_grad_()


@pytest.mark.parametrize("dtype", WIDE, ids=WID)
@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
def test_gradcheck_cholesky(torch_path, dtype, upper):
    X = _gen((2, 3, 3), dtype, 1)
    fn = lambda X: LA.cholesky_ex(_hermitian(X), upper=upper).L  # noqa: E731
    assert gradcheck(fn, (X,), check_forward_ad=True)
    assert gradgradcheck(fn, (X[0].detach().requires_grad_(),))


@pytest.mark.parametrize("dtype", WIDE, ids=WID)
@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
def test_gradcheck_cholesky_solve(torch_path, dtype, upper):
    X = _gen((2, 3, 3), dtype, 2)
    B = _gen((2, 1, 3, 1), dtype, 3)  # broadcast batch: the gradient is summed back

    def fn(X, B):
        F = _factor(X)
        return LA.cholesky_solve(B, F.mH if upper else F, upper)

    assert gradcheck(fn, (X, B), check_forward_ad=True)
    assert gradgradcheck(fn, (X[:1].detach().requires_grad_(), B[:1, 0].detach().requires_grad_()))


@pytest.mark.parametrize("dtype", WIDE, ids=WID)
@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
def test_gradcheck_cholesky_inverse(torch_path, dtype, upper):
    X = _gen((2, 3, 3), dtype, 4)

    def fn(X):
        F = _factor(X)
        return LA.cholesky_inverse(F.mH if upper else F, upper)

    assert gradcheck(fn, (X,), check_forward_ad=True)
    assert gradgradcheck(fn, (X[0].detach().requires_grad_(),))


def _close(g, g_ref, A, c=60, u=None):
    n = A.shape[-1]
    kappa = float(torch.linalg.cond(A.detach()).max())
    u = metrics.unit_roundoff(g.dtype) if u is None else u
    diff = torch.linalg.matrix_norm(g - g_ref, ord=1)
    return bool((diff <= c * n * kappa * u * torch.linalg.matrix_norm(g_ref, ord=1)).all())


@pytest.mark.parametrize("dtype", WIDE, ids=WID)
def test_gradients_equal_torchs(torch_path, dtype):
    """Our formulas are torch's (complex included): the same gradients and tangents."""
    A = matrices.positive_definite(6, 50.0, batch=(2,), dtype=dtype, seed=5)
    B = matrices.random(6, 3, batch=(2,), dtype=dtype, seed=6)
    W = matrices.random(6, 6, batch=(2,), dtype=dtype, seed=7)  # a generic cotangent
    for upper in (False, True):
        for ours, theirs in ((LA.cholesky, torch.linalg.cholesky),):
            a1, a2 = A.clone().requires_grad_(), A.clone().requires_grad_()
            g1 = torch.autograd.grad((ours(a1, upper=upper) * W).sum().real, a1)[0]
            g2 = torch.autograd.grad((theirs(a2, upper=upper) * W).sum().real, a2)[0]
            assert _close(g1, g2, A)
            t1 = torch.func.jvp(lambda a, f=ours, up=upper: f(a, upper=up), (A,), (W + W.mH,))[1]
            t2 = torch.func.jvp(lambda a, f=theirs, up=upper: f(a, upper=up), (A,), (W + W.mH,))[1]
            assert _close(t1, t2, A)
        F = torch.linalg.cholesky(A, upper=upper)
        f1, b1 = F.clone().requires_grad_(), B.clone().requires_grad_()
        f2, b2 = F.clone().requires_grad_(), B.clone().requires_grad_()
        g1 = torch.autograd.grad((LA.cholesky_solve(b1, f1, upper) * B).sum().real, (f1, b1))
        g2 = torch.autograd.grad((torch.cholesky_solve(b2, f2, upper) * B).sum().real, (f2, b2))
        assert _close(g1[0], g2[0], A) and _close(g1[1], g2[1], A)
        g1 = torch.autograd.grad((LA.cholesky_inverse(f1, upper) * W).sum().real, f1)[0]
        g2 = torch.autograd.grad((torch.cholesky_inverse(f2, upper) * W).sum().real, f2)[0]
        assert _close(g1, g2, A)


def test_torch_func_transforms(torch_path):
    A = matrices.positive_definite(5, 20.0, batch=(3,), dtype=torch.float64, seed=8)
    B = matrices.random(5, 2, batch=(3,), dtype=torch.float64, seed=9)
    # vmap: the batched call equals the loop (torch's potrf per matrix under the transform)
    assert torch.allclose(torch.func.vmap(LA.cholesky)(A), torch.stack([LA.cholesky(a) for a in A]))
    F = LA.cholesky(A)
    X = torch.func.vmap(LA.cholesky_solve)(B, F)
    assert float(metrics.solve_ratio(A, X, B).max()) < 30
    inv = torch.func.vmap(LA.cholesky_inverse)(F)
    assert float(metrics.inverse_ratio(A, inv).max()) < 30

    def loss(a):  # a GP-style objective: log det + a quadratic form
        L = LA.cholesky(a)
        return 2 * L.diagonal().log().sum() + (B[0] * LA.cholesky_solve(B[0], L)).sum()

    g = torch.func.grad(loss)(A[0])
    a = A[0].clone().requires_grad_()
    (g_ref,) = torch.autograd.grad(loss(a), a)
    assert _close(g, g_ref, A[0])
    Jr = torch.func.jacrev(LA.cholesky)(A[0])
    Jf = torch.func.jacfwd(LA.cholesky)(A[0])
    # jacfwd pushes through the formula for every (i, j), symmetric or not; on Hermitian
    # perturbations (the domain) both Jacobians agree: contract with E_ij + E_ji
    sym = lambda J: J + J.transpose(-1, -2)  # noqa: E731
    assert torch.allclose(sym(Jr), sym(Jf), rtol=0, atol=1e-12 * float(Jr.abs().max()))


def test_forward_ad_dual_tensors(torch_path):
    import torch.autograd.forward_ad as fwAD

    A = matrices.positive_definite(6, 20.0, dtype=torch.float64, seed=10)
    dA = matrices.random(6, dtype=torch.float64, seed=11)
    dA = dA + dA.mT
    with fwAD.dual_level():
        L = LA.cholesky(fwAD.make_dual(A, dA))
        dL = fwAD.unpack_dual(L).tangent
    # dL satisfies the derivative of A = L Lᵀ: dA = dL Lᵀ + L dLᵀ, with dL lower triangular
    L0 = LA.cholesky(A)
    assert torch.equal(dL.triu(1), torch.zeros_like(dL))
    res = dA - dL @ L0.mT - L0 @ dL.mT
    assert float(res.abs().max()) <= 30 * 6 * 20.0 * metrics.unit_roundoff(torch.float64) * float(dA.abs().max())


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["float32", "complex64"])
def test_emulator_float32_gradients(dtype, monkeypatch):
    """The Metal kernels' gradients (the backward through our solves on the emulator) against the
    float64 gradient: relative 1-norm error <= 90 n κ₂ u (module docstring)."""
    from helpers import require_emulator

    require_emulator()
    monkeypatch.setattr(TUNING, "small_max", 8)  # n = 20: blocked, cholesky_panel + trsm kernels
    monkeypatch.setattr(TUNING, "nb", 8)
    wide = torch.complex128 if dtype.is_complex else torch.float64
    A = matrices.positive_definite(20, 30.0, batch=(2,), dtype=dtype, seed=12)
    B = matrices.random(20, 2, batch=(2,), dtype=dtype, seed=13)

    def loss(a, b):
        L = LA.cholesky(a)
        return (LA.cholesky_solve(b, L) * b.conj()).sum().real + L.diagonal(dim1=-2, dim2=-1).real.log().sum()

    with use_backend("emulator"):
        a = A.clone().requires_grad_()
        g = torch.autograd.grad(loss(a, B), a)[0]
    a64 = A.to(wide).requires_grad_()
    g64 = torch.autograd.grad(loss(a64, B.to(wide)), a64)[0]
    assert _close(g.to(wide), g64, A.to(wide), c=90, u=metrics.unit_roundoff(dtype))
