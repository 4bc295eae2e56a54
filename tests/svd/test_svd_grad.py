"""Derivatives of ``svd``/``svdvals``: PyTorch's ``svd_backward``/``linalg_svd_jvp`` (real and
complex), its gauge check and error, ``full_matrices`` handling as torch, forward mode, torch.func.

Test matrices ``U diag(s) Vᴴ`` with well-separated singular values ``s = linspace(3, 1)`` (gaps
``>= 2/(k−1)``, ``σ_min = 1``): the SVD is differentiable there and the derivative's condition is
``max(1/gap, 1/σ_min) <= k``. ``gradcheck``'s finite differences in float64 use its default
tolerances (``atol = 1e-5``, ``rtol = 1e-3``). Against torch's own derivatives (same formula, the
factors from two backward-stable SVDs) the gauge-invariant losses below differ by at most
``30 · k · max(m,n) · u`` per unit of loss weight, times the derivative's condition ``k``:
``BOUND = 30 k² max(m,n) u`` relative to the gradient's size.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

import mpslinalg as LA

U64 = 2.0**-53
SHAPES = [(4, 4), (5, 3), (3, 5)]


def _well_separated(m, n, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    real = torch.float64
    X = torch.randn(m, n, generator=g, dtype=real)
    if dtype.is_complex:
        X = torch.complex(X, torch.randn(m, n, generator=g, dtype=real))
    U, _, Vh = torch.linalg.svd(X, full_matrices=False)
    k = min(m, n)
    s = torch.linspace(3, 1, k, dtype=real).to(dtype)
    return (U * s) @ Vh


def _invariant_losses(svd):
    """Outputs that do not depend on the singular vectors' signs/phases."""
    def f(A):
        U, S, Vh = svd(A)
        k = S.shape[-1]
        U, Vh = U[..., :k], Vh[..., :k, :]
        return U @ Vh, S, U.abs(), Vh.abs(), (U * S.to(U.dtype)) @ Vh
    return f


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=["float64", "complex128"])
@pytest.mark.parametrize("m,n", SHAPES)
@pytest.mark.parametrize("full", [False, True], ids=["reduced", "full"])
def test_gradcheck(dtype, m, n, full):
    A = _well_separated(m, n, dtype).requires_grad_()
    f = _invariant_losses(lambda X: LA.svd(X, full_matrices=full))
    assert gradcheck(f, (A,))
    assert gradcheck(LA.svdvals, (A,))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=["float64", "complex128"])
def test_double_backward(dtype):
    A = _well_separated(4, 3, dtype).requires_grad_()
    f = _invariant_losses(lambda X: LA.svd(X, full_matrices=False))
    assert gradgradcheck(lambda X: LA.svdvals(X).sum() + f(X)[0].abs().sum(), (A,))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=["float64", "complex128"])
@pytest.mark.parametrize("m,n", SHAPES)
@pytest.mark.parametrize("full", [False, True], ids=["reduced", "full"])
def test_matches_torch_reverse_and_forward(dtype, m, n, full):
    A = _well_separated(m, n, dtype, seed=1)
    k = min(m, n)
    bound = 30 * k * k * max(m, n) * U64
    ours = _invariant_losses(lambda X: LA.svd(X, full_matrices=full))
    ref = _invariant_losses(lambda X: torch.linalg.svd(X, full_matrices=full))
    g = torch.Generator().manual_seed(2)
    W = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in ref(A)]

    def loss(f, X):
        return sum((o * w).real.sum() for o, w in zip(f(X), W))

    g1 = torch.func.grad(lambda X: loss(ours, X))(A)
    g2 = torch.func.grad(lambda X: loss(ref, X))(A)
    assert float((g1 - g2).abs().max()) <= bound * float(g2.abs().max())
    A2 = A.clone().requires_grad_()
    g3 = torch.autograd.grad(loss(ours, A2), A2)[0]  # the custom op's autograd path
    assert float((g3 - g2).abs().max()) <= bound * float(g2.abs().max())
    T = torch.randn(A.shape, generator=g, dtype=dtype)
    t1 = torch.func.jvp(ours, (A,), (T,))[1]
    t2 = torch.func.jvp(ref, (A,), (T,))[1]
    for a, b in zip(t1, t2):
        assert float((a - b).abs().max()) <= bound * max(1.0, float(b.abs().max()))


def test_full_matrices_extra_columns_ignored_like_torch():
    """torch differentiates only the first k columns of U (rows of Vh) with full_matrices=True."""
    A = _well_separated(5, 3, torch.float64, seed=3).requires_grad_()
    U, S, Vh = LA.svd(A, full_matrices=True)
    (g,) = torch.autograd.grad(U[:, 3:].sum() + S.sum(), A)
    U2, S2, _ = torch.linalg.svd(A, full_matrices=True)
    (g2,) = torch.autograd.grad(U2[:, 3:].sum() + S2.sum(), A)
    assert torch.allclose(g, g2, rtol=0, atol=30 * 9 * 5 * U64 * 3)


def test_complex_gauge_error_like_torch():
    A = _well_separated(4, 4, torch.complex128, seed=4).requires_grad_()
    U, S, Vh = LA.svd(A)
    with pytest.raises(RuntimeError, match=r"svd_backward: The singular vectors in the complex case are "
                       r"specified up to multiplication by e\^\{i phi\}"):
        U[:, 0].real.sum().backward()  # depends on the phase of u_1


def test_forward_mode_dual_tensors():
    import torch.autograd.forward_ad as fwad

    A = _well_separated(4, 3, torch.float64, seed=5)
    T = torch.randn(4, 3, dtype=torch.float64)
    with fwad.dual_level():
        S = LA.svdvals(fwad.make_dual(A, T))
        dS = fwad.unpack_dual(S).tangent
    ref = torch.func.jvp(torch.linalg.svdvals, (A,), (T,))[1]
    assert dS is not None and float((dS - ref).abs().max()) <= 30 * 9 * 4 * U64 * float(ref.abs().max())


def test_float32_gradient_on_emulator_matches_float64(backend, backend_device):
    """The float32 kernels' gradient (svdvals: U Vᴴ, condition 1) against the float64 one:
    ``30 k max(m,n) u₃₂`` relative."""
    A64 = _well_separated(6, 4, torch.float64, seed=6)
    A = A64.float().to(backend_device).requires_grad_()
    (g,) = torch.autograd.grad(LA.svdvals(A).sum(), A)
    A64 = A.detach().cpu().double().requires_grad_()
    (g64,) = torch.autograd.grad(torch.linalg.svdvals(A64).sum(), A64)
    assert float((g.cpu().double() - g64).abs().max()) <= 30 * 4 * 6 * 2.0**-24 * float(g64.abs().max())
