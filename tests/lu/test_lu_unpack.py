"""``lu_unpack``: equal to ``torch.lu_unpack`` (exactly: it only moves entries), batched and with
broadcast pivots, the flags, empty shapes, ``out=``, errors, no host sync, and torch's derivative
(gradcheck/gradgradcheck in float64/complex128, forward mode, vmap)."""

from __future__ import annotations

import pytest
import torch
from helpers import NoHostSync, gaussian

import mpslinalg as M


@pytest.mark.parametrize("shape", [(5, 5), (2, 6, 4), (3, 4, 7), (2, 0, 3), (0, 3, 3), (3, 0), (1, 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128], ids=["float32", "complex128"])
def test_equals_torch(shape, dtype):
    A = gaussian(shape, dtype, 1)
    LU, piv = torch.linalg.lu_factor(A)
    ours, ref = M.lu_unpack(LU, piv), torch.lu_unpack(LU, piv)
    assert isinstance(ours, torch.return_types.lu_unpack)
    for x, y in zip(ours, ref):
        assert x.shape == y.shape and x.dtype == y.dtype and torch.equal(x, y)


def test_flags_broadcast_and_big_pivots():
    A = gaussian((4, 70, 70), torch.float32, 2)  # > one 64-step chunk... of 256: many interchanges
    LU, piv = torch.linalg.lu_factor(A)
    for flags in ((True, True), (False, True), (True, False), (False, False)):
        for x, y in zip(M.lu_unpack(LU, piv, *flags), torch.lu_unpack(LU, piv, *flags)):
            assert x.shape == y.shape and torch.equal(x, y)
    # pivots of one matrix broadcast over LU's batch, as torch allows. torch 2.13's P differs between
    # the batch elements there (a bug: the pivots are the same); ours is the P of those pivots
    P, L, U = M.lu_unpack(LU, piv[0])
    for b in range(LU.shape[0]):
        ref = torch.lu_unpack(LU[b], piv[0])
        assert torch.equal(P[b], ref.P) and torch.equal(L[b], ref.L) and torch.equal(U[b], ref.U)
    P, L, U = M.lu_unpack(LU, piv)
    assert torch.allclose(P @ L @ U, A, atol=1e-4)


def test_no_host_sync_and_out():
    LU, piv = torch.linalg.lu_factor(gaussian((8, 9, 9), torch.float32, 3))
    with NoHostSync():
        M.lu_unpack(LU, piv)
    outs = tuple(torch.empty(0) for _ in range(3))
    res = M.lu_unpack(LU, piv, out=outs)
    assert res.P is outs[0] and torch.equal(res.U, torch.lu_unpack(LU, piv).U)


def test_errors():
    LU, piv = torch.linalg.lu_factor(torch.randn(2, 5, 3))
    with pytest.raises(RuntimeError, match="int32"):
        M.lu_unpack(LU, piv.long())
    with pytest.raises(RuntimeError, match="LU_pivots"):
        M.lu_unpack(LU, piv[:, :2])
    with pytest.raises(RuntimeError, match="2 dimensions"):
        M.lu_unpack(LU[0, 0], piv)
    with pytest.raises(TypeError, match="unpack_data"):
        M.lu_unpack(LU, piv, unpack_data=1)
    with pytest.raises(RuntimeError, match="broadcast"):
        M.lu_unpack(LU, torch.ones(3, 3, dtype=torch.int32))


@pytest.mark.parametrize("shape,dtype", [((3, 3), torch.complex128), ((4, 2), torch.float64),
                                         ((2, 4), torch.float64)], ids=["square-c128", "tall-f64", "wide-f64"])
def test_gradients(shape, dtype):
    LU0, piv = torch.linalg.lu_factor(gaussian((1, *shape), dtype, 4))
    LU = LU0.clone().requires_grad_()

    def f(x):
        _, L, U = M.lu_unpack(x, piv)
        return L, U

    assert torch.autograd.gradcheck(f, (LU,), fast_mode=True)
    assert torch.autograd.gradgradcheck(f, (LU,), fast_mode=True)
    g = (gaussian((1, shape[0], min(shape)), dtype, 5), gaussian((1, min(shape), shape[1]), dtype, 6))
    ours = torch.autograd.grad(f(LU), LU, g)[0]
    _, Lt, Ut = torch.lu_unpack(LU, piv)
    ref = torch.autograd.grad((Lt, Ut), LU, g)[0]
    assert torch.allclose(ours, ref)
    P = M.lu_unpack(LU, piv).P
    assert not P.requires_grad  # not differentiable, as torch's
    t = gaussian(LU.shape, dtype, 7)
    _, (dL, dU) = torch.func.jvp(f, (LU0,), (t,))
    _, (rL, rU) = torch.func.jvp(lambda x: torch.lu_unpack(x, piv)[1:], (LU0,), (t,))
    assert torch.allclose(dL, rL) and torch.allclose(dU, rU)
    Pv, Lv, Uv = torch.func.vmap(M.lu_unpack)(LU0, piv)
    assert all(torch.equal(x, y) for x, y in zip((Pv, Lv, Uv), torch.lu_unpack(LU0, piv)))
