"""Autograd of the LU family: gradcheck / gradgradcheck (``fast_mode``: random projections of the
Jacobians, to keep the file fast) in complex128 (and float64) on the CPU, the
emulator's float32 gradients against those, and ``torch.compile(fullgraph=True)``.

Bounds: ``gradcheck`` compares with central finite differences in float64 (its own tolerances,
``atol=1e-6, rtol=1e-4``: the differences of these smooth functions at well-conditioned points are
accurate to ~1e-8). The float32 emulator gradient of ``solve``/``inv``/``slogdet`` is a product of
a few solves with ``A`` (``gA = −A⁻ᴴ gX Xᴴ`` etc.); each solve has relative error
``<= 30 n κ₁ u`` (see ``test_solve.py``), so the gradient's normwise error is at most
``c · 30 n κ₁ u`` with ``c`` the number of solves/products (≤ 4 here).
"""

from __future__ import annotations

import pytest
import torch
from helpers import gaussian
from torch.autograd import gradcheck, gradgradcheck

import mpslinalg as LA
from reference import matrices, metrics

N = 5  # > 4, so the LU path (not the small family) is what is checked


def _A(dtype, seed=0, batch=()):
    return matrices.with_condition(N, 10.0, batch=batch, dtype=dtype, seed=seed)


def _B(dtype, k=2, seed=1, left=True):
    return gaussian((N, k) if left else (k, N), dtype, seed)


def _check(f, *xs, second=True):
    xs = [x.detach().clone().requires_grad_() for x in xs]
    assert gradcheck(f, xs, atol=1e-6, rtol=1e-4, fast_mode=True)
    if second:
        assert gradgradcheck(f, xs, atol=1e-5, rtol=1e-4, fast_mode=True)


C = torch.complex128


@pytest.mark.parametrize("shape", [(N, N), (N - 1, N + 1), (N + 1, N - 1)], ids=["square", "wide", "tall"])
def test_lu_factor_grad(shape):
    A = matrices.random(*shape, dtype=C, seed=2)
    _check(lambda a: LA.lu_factor_ex(a).LU, A)
    _check(lambda a: LA.lu(a)[1:], A, second=False)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_grad(left, adjoint):
    LU, piv = LA.lu_factor(_A(C))
    _check(lambda lu, b: LA.lu_solve(lu, piv, b, left=left, adjoint=adjoint), LU, _B(C, left=left))


@pytest.mark.parametrize("dtype", [torch.float64, C])
def test_solve_inv_grad(dtype):
    A = _A(dtype)
    _check(lambda a, b: LA.solve(a, b), A, _B(dtype))
    _check(lambda a, b: LA.solve(a, b, left=False), A, _B(dtype, left=False), second=dtype.is_complex)
    _check(LA.inv, A)


@pytest.mark.parametrize("dtype", [torch.float64, C])
def test_det_slogdet_grad(dtype):
    A = _A(dtype, batch=(2,))
    _check(LA.det, A)
    if dtype.is_complex:
        _check(lambda a: LA.slogdet(a), A)  # complex sign included
    else:
        _check(lambda a: LA.slogdet(a).logabsdet, A)


def test_det_first_derivative_at_singular_matrix():
    # first derivative only: the SVD-based adjugate branch is exact to first order (test_det.py
    # compares it with the cofactors); its own derivative through the SVD is not claimed.
    A = _A(C)
    A[:, 2] = 0
    _check(LA.det, A, second=False)


def test_emulator_float32_gradients_match(backend):
    if backend == "metal":
        pytest.skip("compares CPU float32 with CPU float64; the metal variant lives in test_solve/test_inv")
    A64 = _A(torch.complex128, seed=4, batch=(2,))
    B64 = torch.stack([_B(torch.complex128, seed=5), _B(torch.complex128, seed=6)])
    k1 = torch.linalg.cond(A64, p=1).max()
    bound = 4 * 30 * N * float(k1) * metrics.unit_roundoff(torch.complex64)

    def grads(A, B):
        A = A.detach().clone().requires_grad_()
        B = B.detach().clone().requires_grad_()
        loss = (LA.solve(A, B).abs() ** 2).sum() + LA.slogdet(A).logabsdet.sum() + LA.inv(A).real.sum()
        return torch.autograd.grad(loss, (A, B))

    g32 = grads(A64.to(torch.complex64), B64.to(torch.complex64))
    with LA.use_backend("torch"):
        g64 = grads(A64, B64)
    for a, b in zip(g32, g64):
        assert float(metrics.forward_error(a, b).max()) <= bound


def test_torch_compile_fullgraph():
    A = _A(torch.complex64, batch=(3,))
    B = torch.stack([_B(torch.complex64, seed=s) for s in range(3)])

    def f(A, B):
        LU, piv, info = LA.lu_factor_ex(A)
        X = LA.lu_solve(LU, piv, B)
        Y, _ = LA.solve_ex(A, B)
        Ai, _ = LA.inv_ex(A)
        s, la = LA.slogdet(A)
        P, L, U = LA.lu(A)
        return X, Y, Ai, s, la, LA.det(A), P, L, U

    out = torch.compile(f, fullgraph=True, backend="aot_eager")(A, B)
    # the eager reference through the same declared ops (a plain eager call may route to one
    # torch.linalg call instead, a different rounding): same ops, same order, equal
    with torch.enable_grad():
        ref = f(A.clone().requires_grad_(), B)
    for a, b in zip(out, ref):
        assert torch.equal(a, b.detach())

    def loss(A):
        return (LA.det(A).abs() ** 2).sum() + LA.slogdet(A).logabsdet.sum() + LA.inv(A).abs().sum()

    Ac = A.clone().requires_grad_()
    (gc,) = torch.autograd.grad(torch.compile(loss, fullgraph=True, backend="aot_eager")(Ac), Ac)
    Ae = A.clone().requires_grad_()
    (ge,) = torch.autograd.grad(loss(Ae), Ae)
    assert torch.allclose(gc, ge, rtol=1e-5, atol=0)  # same ops, same order: equal up to rounding
    # the raising ops still raise under compile (a device-side assertion, no graph break)
    S = A.clone()
    S[1, :, 2] = 0
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        torch.compile(lambda a: LA.inv(a), fullgraph=True, backend="aot_eager")(S)
