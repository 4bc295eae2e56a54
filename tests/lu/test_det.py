"""``det`` and ``slogdet`` on every backend, and ``det``'s gradient at singular matrices.

Pass marks (derived): the LU factors satisfy ``PA + ΔA = LU`` with ``‖ΔA‖₁ <= ρ n ‖A‖₁ u``, where
ρ < 30 is the ``xGET01`` ratio (tested in ``test_lu.py``). To first order
``det(A + ΔA)/det(A) − 1 = tr(A⁻¹ ΔA)``, and ``|tr(A⁻¹ΔA)| <= n ‖A⁻¹ΔA‖₁ <= 30 n² κ₁(A) u``; the
product of the ``n`` pivots adds at most ``n u``. So ``|det − det_ref|/|det_ref|``, the error of
``logabsdet`` and ``|sign − sign_ref|`` are at most ``e = 30 n² κ₁ u`` (κ₁ in float64), times 2
for the second-order terms. References: ``reference.mp`` (mpmath, 50 digits).

The gradient of ``det`` is ``g · adj(A)ᴴ`` (conjugate-Wirtinger). At an exactly singular matrix of
rank ``n − 1`` the adjugate is a nonzero rank-1 matrix (``torch.linalg.det`` returns zeros there);
at rank ``<= n − 2`` it is zero. The reference adjugate is the cofactor expansion in float64.
"""

from __future__ import annotations

import pytest
import torch
from helpers import adjugate

import mpslinalg as LA
from reference import matrices, metrics
from reference import mp as rmp


def _bound(A, dtype):
    n = A.shape[-1]
    k1 = torch.linalg.cond(A.to(torch.complex128 if dtype.is_complex else torch.float64), p=1)
    return 2 * 30 * n * n * k1 * metrics.unit_roundoff(dtype)


@pytest.mark.parametrize("n", [3, 10, 40])
def test_det_and_slogdet_vs_mpmath(backend, backend_device, gpu_dtype, n):
    A = matrices.with_condition(n, 10.0, batch=(2,), dtype=gpu_dtype, seed=n)
    d = LA.det(A.to(backend_device)).cpu()
    s, la = (t.cpu() for t in LA.slogdet(A.to(backend_device)))
    dref = rmp.det(A)
    sref, laref = rmp.slogdet(A)
    e = _bound(A, gpu_dtype)
    assert bool((metrics.relative_error(d, dref) <= e).all())
    assert bool(((la.double() - laref).abs() <= e).all())
    assert bool(((s.to(sref.dtype) - sref).abs() <= e).all())


def test_slogdet_where_det_over_and_underflows(backend, backend_device, gpu_dtype):
    n = 50
    base = matrices.with_condition(n, 10.0, batch=(1,), dtype=gpu_dtype, seed=3)
    for scale in (1e-3, 1e3):  # |det| ~ 1e-150 / 1e150: outside float32
        A = matrices.scaled(base, scale)
        s, la = (t.cpu() for t in LA.slogdet(A.to(backend_device)))
        sref, laref = rmp.slogdet(A)
        e = _bound(A, gpu_dtype)
        assert bool(torch.isfinite(la).all())
        assert bool(((la.double() - laref).abs() <= e).all())
        assert bool(((s.to(sref.dtype) - sref).abs() <= e).all())


def test_singular_nan_empty(backend, backend_device, gpu_dtype):
    A = matrices.random(12, 12, batch=(3,), dtype=gpu_dtype, seed=1)
    A[1, :, 5] = 0
    A[2, 4, 4] = float("nan")
    d = LA.det(A.to(backend_device)).cpu()
    s, la = (t.cpu() for t in LA.slogdet(A.to(backend_device)))
    assert d[1] == 0 and s[1] == 0 and la[1] == float("-inf")
    assert bool(torch.isnan(d[2])) and bool(torch.isnan(la[2]))
    for shape in [(0, 6, 6), (2, 0, 0)]:
        Z = torch.randn(shape).to(backend_device)
        assert torch.equal(LA.det(Z).cpu(), torch.linalg.det(torch.randn(shape)))
        ss, ll = LA.slogdet(Z)
        rs, rl = torch.linalg.slogdet(torch.randn(shape))
        assert torch.equal(ss.cpu(), rs) and torch.equal(ll.cpu(), rl)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("rank", [5, 4])  # n - 1, n - 2
def test_det_gradient_at_singular_matrix_is_adjugate(dtype, rank):
    n = 6
    g = torch.Generator().manual_seed(rank)
    A = torch.randn(n, n, dtype=dtype, generator=g)
    A[:, 0] = 0  # exactly singular: rank n - 1
    if rank == n - 2:
        A[:, 3] = 0  # rank n - 2: the adjugate is zero
    A.requires_grad_()
    d = LA.det(A)
    assert d.item() == 0
    (gA,) = torch.autograd.grad(d.real if dtype.is_complex else d, A)
    ref = adjugate(A.detach()).mH
    # cofactors of a float64 matrix: rounding ~ n! n u relative to their size; 1e-10 is far above
    assert float((gA - ref).abs().max()) <= 1e-10 * max(1.0, float(ref.abs().max()))
    if rank == 5:
        assert float(ref.abs().max()) > 1e-3  # nonzero: torch.linalg.det would give zeros here
