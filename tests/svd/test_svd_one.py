"""One CPU matrix at the SVD front doors: the C kernel's call without the op layer (issue 34.7,
:func:`mpslinalg.svd.c.svd_one`). It makes the same kernel call as the op's batch of one, so the
results must be the same bits (no tolerance to derive); the rare cases it hands back (non-finite,
no convergence, a σ to complete, gradients) must reach the op."""

from __future__ import annotations

import importlib

import pytest
import torch

import mpslinalg as LA

ops = importlib.import_module("mpslinalg.svd.ops")
svd_c = importlib.import_module("mpslinalg.svd.c")

pytestmark = pytest.mark.skipif(not svd_c.usable(torch.empty(1)), reason="the SVD C kernel needs a C compiler")

DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]
SHAPES = [(8, 8), (9, 5), (5, 9), (1, 1), (1, 6), (33, 33)]


@pytest.fixture
def op_calls(monkeypatch):
    """The matrices that reached the op's impl (the general path)."""
    seen = []
    real = ops.svd_impl
    monkeypatch.setattr(ops, "svd_impl", lambda A, f, uv: (seen.append(tuple(A.shape)), real(A, f, uv))[1])
    return seen


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("full", [True, False])
def test_same_bits_as_the_batch_of_one(dtype, shape, full, op_calls):
    A = torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(7))
    before = A.clone()
    U, S, Vh = LA.svd(A, full_matrices=full)
    assert op_calls == []  # served without the op
    Ub, Sb, Vhb = LA.svd(A[None], full_matrices=full)
    assert torch.equal(U, Ub[0]) and torch.equal(S, Sb[0]) and torch.equal(Vh, Vhb[0])
    assert torch.equal(A, before)
    assert not Vh.is_conj() and Vh._base is None and U._base is None
    Ut, _, Vht = torch.linalg.svd(A, full_matrices=full)
    assert U.shape == Ut.shape and Vh.shape == Vht.shape and U.dtype == Ut.dtype and S.dtype == Sb.dtype
    assert torch.equal(LA.svdvals(A), Sb[0])
    Ue, Se, Vhe, info = LA.svd_ex(A, full_matrices=full)
    assert torch.equal(Se, Sb[0]) and info.shape == () and info.dtype == torch.int32 and int(info) == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_views_are_read_as_the_matrix_they_are(dtype, op_calls):
    B = torch.randn(7, 12, dtype=dtype, generator=torch.Generator().manual_seed(3))
    for A in (B[:, ::2], B[:, :7].mT, B[:, :6].conj() if dtype.is_complex else -B[:, :6]):
        U, S, Vh = LA.svd(A)
        assert op_calls == []
        Ub, Sb, Vhb = LA.svd(A.resolve_conj().contiguous()[None])
        assert torch.equal(S, Sb[0]) and torch.equal(U, Ub[0]) and torch.equal(Vh, Vhb[0])
        op_calls.clear()


def test_a_sigma_to_complete_reaches_the_op(op_calls):
    A = torch.randn(6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    A[:, 2] = 0  # σ_4 = 0: V's column is completed by the general path
    U, S, Vh = LA.svd(A)
    assert op_calls == [(6, 4)]
    # orthonormal V: the completion's QR, ‖VᴴV − I‖ of a few ulps (n·u with n = 4)
    assert (Vh @ Vh.mH - torch.eye(4, dtype=A.dtype)).abs().max() <= 30 * 4 * 2.0**-53
    Ub, Sb, Vhb = LA.svd(A[None])
    assert torch.equal(U, Ub[0]) and torch.equal(S, Sb[0]) and torch.equal(Vh, Vhb[0])
    assert torch.equal(LA.svdvals(A), Sb[0])  # σ alone needs no completion


def test_non_finite_input_reaches_the_op():
    A = torch.ones(3, 3)
    A[1, 1] = float("nan")
    with pytest.raises(torch.linalg.LinAlgError):
        LA.svd(A)
    with pytest.raises(torch.linalg.LinAlgError):
        LA.svdvals(A)
    U, S, Vh, info = LA.svd_ex(A)
    assert int(info) == 1 and bool(S.isnan().all()) and bool(U.isnan().all())


def test_gradients_take_the_op(op_calls):
    A = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    LA.svdvals(A).sum().backward()
    assert op_calls == [(5, 4)] and A.grad is not None


def test_out_is_filled(op_calls):
    A = torch.randn(4, 4)
    out = (torch.empty(0), torch.empty(0), torch.empty(0))
    U, S, Vh = LA.svd(A, out=out)
    assert U is out[0] and torch.equal(out[1], LA.svdvals(A)) and op_calls == []


