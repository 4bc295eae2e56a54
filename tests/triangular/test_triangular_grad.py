"""Autograd and torch integration of ``mpslinalg.solve_triangular``.

* ``gradcheck``/``gradgradcheck`` in float64 and complex128 (conjugate-Wirtinger) for all eight
  variants, with small blocks (nb = 4, 2-block leaves) so that the blocked, refined and recursive
  code paths are all differentiated, and with broadcast batches (the backward reduces them).
* float32 gradients on the emulator against float64 gradients of the same (exactly upcast) inputs,
  to a derived bound (see :func:`test_float32_gradients_match_float64`).
* the custom op passes ``torch.library.opcheck`` and ``torch.compile(fullgraph=True)`` traces a
  function that calls it, forward and backward.
"""

from __future__ import annotations

import itertools

import pytest
import torch

import mpslinalg
from mpslinalg import triangular as tri
from mpslinalg.triangular import api as tri_api
from reference import metrics

VARIANTS = list(itertools.product([False, True], repeat=3))  # (upper, left, unit)
VID = [f"{'U' if u else 'L'}{'left' if lf else 'right'}{'-unit' if un else ''}" for u, lf, un in VARIANTS]


@pytest.fixture
def small_blocks():
    # the blocked path (not the CPU default of LAPACK leaves), with blocks small enough that a
    # 9x9 system has three of them and one recursion split
    old = (tri.TUNING.nb, tri.TUNING.nb_unit, tri.TUNING.leaf_blocks, tri.TUNING.trsm_leaf_cpu,
           tri.TUNING.direct_max)
    tri.TUNING.nb, tri.TUNING.nb_unit, tri.TUNING.leaf_blocks, tri.TUNING.trsm_leaf_cpu = 4, 4, 2, 0
    tri.TUNING.direct_max = {**old[4], "cpu": 0}
    yield
    (tri.TUNING.nb, tri.TUNING.nb_unit, tri.TUNING.leaf_blocks, tri.TUNING.trsm_leaf_cpu,
     tri.TUNING.direct_max) = old


def _inputs(n, k, left, dtype, seed, a_batch=(2, 1), b_batch=(3,)):
    g = torch.Generator().manual_seed(seed)
    real = torch.float64 if dtype in (torch.float64, torch.complex128) else torch.float32

    def rnd(*shape):
        x = torch.randn(shape, generator=g, dtype=real)
        if dtype.is_complex:
            return torch.complex(x, torch.randn(shape, generator=g, dtype=real)).to(dtype)
        return x

    # well conditioned with or without the diagonal: 2I (or I) + N(0,1)/n off the diagonal
    A = rnd(*a_batch, n, n) / n + 2 * torch.eye(n, dtype=dtype)
    B = rnd(*b_batch, n, k) if left else rnd(*b_batch, k, n)
    return A, B


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=["float64", "complex128"])
@pytest.mark.parametrize("variant", VARIANTS, ids=VID)
def test_gradcheck(small_blocks, dtype, variant):
    upper, left, unit = variant
    A, B = _inputs(9, 2, left, dtype, 1, a_batch=(2, 1), b_batch=(2,))  # blocks 4+4+1, one split
    A.requires_grad_()
    B.requires_grad_()

    def f(A, B):
        return mpslinalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unit)

    # fast_mode: checks J·v for random v (same mathematical test, one column instead of all)
    assert torch.autograd.gradcheck(f, (A, B), fast_mode=True)
    assert torch.autograd.gradgradcheck(f, (A, B), fast_mode=True)


def test_float32_gradients_match_float64(backend, backend_device, small_blocks):
    # Inputs: float32/complex64 values, and their exact float64/complex128 upcasts. Loss
    # L = Re Σ conj(W) ∘ X. Then gB = A⁻ᴴ W is a triangular solve: with the forward-error bound of
    # test_triangular (residual ratio < 30), Σ_j ‖ĝ_j − g_j‖₁ <= e' Σ_j ‖g_j‖₁, e' = e/(1−e),
    # e = 30 κ u, κ = max(κ₁, κ_∞) of the triangle (A and Aᴴ). X obeys the same bound, and
    # gA = −P(gB Xᴴ) (P: projection on the triangle, which only drops entries) satisfies, in the
    # entrywise 1-norm ‖·‖_s (sub-multiplicative), ‖ΔgA‖_s <= (2e' + e'² + k u) ‖gB‖_s ‖X‖_s,
    # the k u from rounding the length-k inner products of the float32 product.
    n, k = 40, 5
    for (upper, left, unit), dtype in itertools.product(VARIANTS[::3], [torch.float32, torch.complex64]):
        A, B = _inputs(n, k, left, dtype, 2, a_batch=(2,), b_batch=(2,))
        W = _inputs(n, k, left, dtype, 3, a_batch=(2,), b_batch=(2,))[1]
        wide = torch.complex128 if dtype.is_complex else torch.float64
        grads = {}
        for dt, dev in ((dtype, backend_device), (wide, "cpu")):
            a = A.to(dt).to(dev).detach().clone().requires_grad_()
            b = B.to(dt).to(dev).detach().clone().requires_grad_()
            X = mpslinalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit)
            (X * W.to(dt).to(dev).conj()).real.sum().backward()
            grads[dt] = (a.grad.cpu().to(wide), b.grad.cpu().to(wide), X.detach().cpu().to(wide))
        gA, gB, X = grads[wide]
        gA32, gB32, _ = grads[dtype]
        T = metrics.triangle(A.to(wide), upper=upper, unitriangular=unit)
        Ti = torch.linalg.inv(T)
        kappa = float(torch.maximum(metrics.norm1(T) * metrics.norm1(Ti),
                                    metrics.norm1(T.mT) * metrics.norm1(Ti.mT)).max())
        u = metrics.unit_roundoff(dtype)
        e = 30 * kappa * u
        ep = e / (1 - e)

        def s(x):  # entrywise 1-norm per batch element
            return x.abs().sum((-2, -1))

        assert bool((s(gB32 - gB) <= ep * s(gB)).all())
        assert bool((s(gA32 - gA) <= (2 * ep + ep**2 + k * u) * s(gB) * s(X)).all())


def test_opcheck():
    # schema, fake (meta) implementation, autograd registration, AOT dispatch
    A, B = _inputs(6, 2, True, torch.float64, 4)
    A.requires_grad_()
    B.requires_grad_()
    for left in (True, False):
        b = B if left else B.detach().mT.contiguous().requires_grad_()
        torch.library.opcheck(tri_api._solve_triangular_op.custom, (A, b, False, left, True))


def test_torch_compile_fullgraph():
    # "aot_eager" traces with fake tensors through the registered fake implementation and
    # autograd formula (what inductor sees) without spending a minute in C++ code generation.
    def f(A, B):
        X = mpslinalg.solve_triangular(A, B, upper=True, left=False)
        return (X * X).sum()

    A, B = _inputs(12, 3, False, torch.float32, 5)
    A.requires_grad_()
    cf = torch.compile(f, fullgraph=True, backend="aot_eager")
    loss = cf(A, B)
    (gA,) = torch.autograd.grad(loss, A)
    loss_ref = f(A, B)
    (gA_ref,) = torch.autograd.grad(loss_ref, A)
    # identical operations in eager and compiled mode on the CPU: same numbers
    assert torch.equal(loss, loss_ref) and torch.equal(gA, gA_ref)


@pytest.mark.cuda
def test_torch_compile_inductor_cuda():
    # the full compiler (inductor) on CUDA: our op stays one opaque node, no graph break
    def f(A, B):
        X = mpslinalg.solve_triangular(A, B, upper=False, unitriangular=True)
        return X.relu().sum()

    A, B = (t.cuda() for t in _inputs(64, 128, True, torch.float32, 6, a_batch=(4,), b_batch=(4,)))
    A.requires_grad_()
    B.requires_grad_()
    cf = torch.compile(f, fullgraph=True)
    gA, gB = torch.autograd.grad(cf(A, B), (A, B))
    gA_ref, gB_ref = torch.autograd.grad(f(A, B), (A, B))
    X = mpslinalg.solve_triangular(A, B, upper=False, unitriangular=True).detach()
    # Our op is one opaque node in both runs and the relu mask is exact, so gB is computed by the
    # same calls: identical. gA = -tril(gB Xᴴ, -1) may come from a different GEMM kernel: the
    # float32 inner products of length k = 128 differ by at most 2 γ_k (|gB| |X|ᴴ) entrywise.
    assert torch.equal(gB, gB_ref)
    k, u = 128, 2.0**-24
    bound = 2 * (k * u / (1 - k * u)) * (gB_ref.abs() @ X.abs().mH)
    assert bool(((gA - gA_ref).abs() <= bound).all())
