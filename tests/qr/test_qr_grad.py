"""Derivatives of ``qr``: PyTorch's ``linalg_qr_backward`` / ``linalg_qr_jvp`` (conjugate Wirtinger).

* ``gradcheck`` / ``gradgradcheck`` (finite differences, float64/complex128) for reduced (tall,
  square, wide) and complete (square, wide), forward mode included: the formulas are exact, so
  torch's default gradcheck tolerances (1e-5 relative on O(1) entries, float64) apply unchanged.
* Equality with ``torch.linalg.qr``'s own gradients (float64: rounding only).
* The cases torch refuses raise torch's messages (``mode="r"``; ``complete`` with ``m > n``).
* float32 gradients on every backend against the float64 ones: the backward map is one solve with
  ``Rᴴ`` after products with ``Q`` and ``R``, whose float32 errors are ``<= 30 m κ u`` (the
  accuracy tests' bounds) and are amplified by at most ``κ`` by that solve:
  ``‖g32 − g64‖ <= 30 m κ² u ‖g64‖`` (max norms), on well-conditioned Gaussian input.
"""

from __future__ import annotations

import pytest
import torch

import mpslinalg
from reference import matrices, metrics

CASES = [((5, 3), "reduced"), ((3, 5), "reduced"), ((4, 4), "reduced"), ((2, 6, 4), "reduced"),
         ((3, 5), "complete"), ((2, 4, 4), "complete")]
DT = [torch.float64, torch.complex128]


@pytest.mark.parametrize("dtype", DT, ids=str)
@pytest.mark.parametrize("shape,mode", CASES, ids=[f"{'x'.join(map(str, s))}-{m}" for s, m in CASES])
def test_gradcheck(dtype, shape, mode):
    A = torch.randn(*shape, dtype=dtype, requires_grad=True)

    def f(a):
        return mpslinalg.qr(a, mode=mode)

    assert torch.autograd.gradcheck(f, (A,))
    assert torch.autograd.gradcheck(f, (A,), check_forward_ad=True, check_backward_ad=False,
                                    check_undefined_grad=False, check_batched_grad=False)


GG = [((4, 3), "reduced"), ((3, 4), "reduced"), ((3, 3), "complete")]


@pytest.mark.parametrize("dtype", DT, ids=str)
@pytest.mark.parametrize("shape,mode", GG, ids=[f"{'x'.join(map(str, s))}-{m}" for s, m in GG])
def test_gradgradcheck(dtype, shape, mode):
    # double backward through our backward (it calls our ops): one case per branch of the formula
    A = torch.randn(*shape, dtype=dtype, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda a: mpslinalg.qr(a, mode=mode), (A,))


@pytest.mark.parametrize("dtype", DT, ids=str)
@pytest.mark.parametrize("shape,mode", CASES, ids=[f"{'x'.join(map(str, s))}-{m}" for s, m in CASES])
def test_matches_torch(dtype, shape, mode):
    A = torch.randn(*shape, dtype=dtype)
    A1, A0 = A.clone().requires_grad_(), A.clone().requires_grad_()
    Q, R = mpslinalg.qr(A1, mode=mode)
    Q0, R0 = torch.linalg.qr(A0, mode=mode)
    gQ, gR = torch.randn_like(Q), torch.randn_like(R)
    g = torch.autograd.grad([Q, R], A1, [gQ, gR], retain_graph=True)[0]
    g0 = torch.autograd.grad([Q0, R0], A0, [gQ, gR], retain_graph=True)[0]
    assert torch.allclose(g, g0, rtol=1e-10, atol=1e-10)
    # only one of the two outputs used
    g = torch.autograd.grad(R, A1, gR)[0]
    g0 = torch.autograd.grad(R0, A0, gR)[0]
    assert torch.allclose(g, g0, rtol=1e-10, atol=1e-10)


def test_torch_errors():
    A = torch.randn(5, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="depends on Q, which is not computed when mode='r'"):
        mpslinalg.qr(A, mode="r").R.sum().backward()
    Q, R = mpslinalg.qr(A, mode="complete")
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and nrows > ncols"):
        (Q.sum() + R.sum()).backward()


def test_float32_gradients(backend, backend_device, gpu_dtype):
    m, n = 9, 6
    A = matrices.random(m, n, batch=(2,), dtype=gpu_dtype, seed=17)
    wide = torch.complex128 if gpu_dtype.is_complex else torch.float64
    gQ = torch.randn(2, m, n, dtype=wide)
    gR = torch.randn(2, n, n, dtype=wide)
    A32 = A.to(backend_device).requires_grad_()
    Q, R = mpslinalg.qr(A32)
    g32 = torch.autograd.grad([Q, R], A32, [gQ.to(gpu_dtype).to(backend_device),
                                            gR.to(gpu_dtype).to(backend_device)])[0].cpu()
    A64 = A.to(wide).requires_grad_()
    Q6, R6 = torch.linalg.qr(A64)
    g64 = torch.autograd.grad([Q6, R6], A64, [gQ, gR])[0]
    s = torch.linalg.svdvals(A.to(wide))
    kappa = float((s[..., 0] / s[..., -1]).max())
    bound = 30 * m * kappa**2 * metrics.unit_roundoff(gpu_dtype) * float(g64.abs().max())
    assert float((g32.to(wide) - g64).abs().max()) < bound


@pytest.mark.parametrize("dtype", DT, ids=str)
def test_householder_product_and_ormqr_derivatives(dtype):
    # exact derivatives (torch.func of the reflector-by-reflector product): finite differences,
    # double backward, forward mode, and torch's own gradients (float64 rounding only)
    A = torch.randn(2, 5, 3, dtype=dtype, requires_grad=True)
    tau = torch.randn(2, 3, dtype=dtype, requires_grad=True)

    def hp(a, t):
        return mpslinalg.householder_product(a, t)

    assert torch.autograd.gradcheck(hp, (A, tau))
    assert torch.autograd.gradgradcheck(hp, (A, tau))
    assert torch.autograd.gradcheck(hp, (A, tau), check_forward_ad=True, check_backward_ad=False,
                                    check_undefined_grad=False, check_batched_grad=False)
    g = torch.randn(2, 5, 3, dtype=dtype)
    ours = torch.autograd.grad(hp(A, tau), (A, tau), g)
    ref = torch.autograd.grad(torch.linalg.householder_product(A, tau), (A, tau), g)
    assert all(torch.allclose(a, b, rtol=1e-10, atol=1e-10) for a, b in zip(ours, ref))
    for left in (True, False):
        for transpose in (False, True):
            C = torch.randn((2, 5, 2) if left else (2, 2, 5), dtype=dtype, requires_grad=True)

            def f(a, t, c, left=left, transpose=transpose):
                return mpslinalg.ormqr(a, t, c, left, transpose)

            assert torch.autograd.gradcheck(f, (A, tau, C))
            assert torch.autograd.gradcheck(f, (A, tau, C), check_forward_ad=True, check_backward_ad=False,
                                            check_undefined_grad=False, check_batched_grad=False)
            gX = torch.randn_like(C)
            ours = torch.autograd.grad(f(A, tau, C), (A, tau, C), gX)
            ref = torch.autograd.grad(torch.ormqr(A, tau, C, left, transpose), (A, tau, C), gX)
            assert all(torch.allclose(a, b, rtol=1e-10, atol=1e-10) for a, b in zip(ours, ref))
