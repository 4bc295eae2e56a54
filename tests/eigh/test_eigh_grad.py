"""Derivatives of eigh/eigvalsh: gradcheck/gradgradcheck in float64/complex128 (both paths), forward
mode, torch.func, the complex gauge check, degenerate eigenvalues as torch, and agreement with
torch.linalg's derivatives on the same inputs.

Gauge: eigenvectors are defined up to sign (phase), so the checked functions are gauge invariant:
eigenvalues, ``V diag(f(w)) Vᴴ`` and ``|V|``-free products such as ``(V * conj(V)).real``.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

import mpslinalg

DOUBLE = [torch.float64, torch.complex128]
DID = ["float64", "complex128"]


def _herm(n, batch=(), dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(*batch, n, n, generator=g, dtype=dtype)
    return A + A.mH


def _sym(X):
    """torch's ``gradcheck_wrapper_hermitian_input``: the op reads one triangle, so finite differences
    are taken through ``X + Xᴴ`` (a perturbation of one entry of a Hermitian input is not Hermitian)."""
    return X + X.mH


def _spectral_fn(A, uplo="L"):
    """Gauge-invariant function of both outputs."""
    w, V = mpslinalg.eigh(_sym(A), uplo)
    return w, (V * torch.sin(w).unsqueeze(-2).to(V.dtype)) @ V.mH


@pytest.mark.parametrize("dtype", DOUBLE, ids=DID)
@pytest.mark.parametrize("n", [3, 66])
def test_gradcheck(dtype, n):
    A = _herm(n, (2,) if n < 8 else (), dtype).requires_grad_()
    fast = n > 8  # n = 66 (the tridiagonal path): gradcheck's fast mode, one random projection of the Jacobian
    assert gradcheck(lambda X: _spectral_fn(X), (A,), fast_mode=fast)
    assert gradcheck(lambda X: mpslinalg.eigvalsh(_sym(X), "U"), (A,), fast_mode=fast)


@pytest.mark.parametrize("dtype", DOUBLE, ids=DID)
def test_gradgradcheck(dtype):
    A = _herm(4, (2,), dtype, seed=1).requires_grad_()
    fast = dtype.is_complex  # complex128's full second-order Jacobian takes ~30 s here: a random projection
    assert gradgradcheck(lambda X: _spectral_fn(X), (A,), fast_mode=fast)
    assert gradgradcheck(lambda X: mpslinalg.eigvalsh(_sym(X)), (A,), fast_mode=fast)


@pytest.mark.parametrize("dtype", DOUBLE, ids=DID)
def test_matches_torch_gradients(dtype):
    """Our backward is torch's formula: same gradients (the full-matrix gradient, not projected on
    the triangle, as torch) for a loss of both outputs."""
    A = _herm(5, (2,), dtype, seed=2)
    G = torch.randn(2, 5, 5, dtype=dtype, generator=torch.Generator().manual_seed(3))

    def loss(fn, X):
        w, V = fn(X)
        return (w.sum() + ((V * w.unsqueeze(-2).to(V.dtype)) @ V.mH * G).abs().sum())

    X1 = A.clone().requires_grad_()
    X2 = A.clone().requires_grad_()
    (g1,) = torch.autograd.grad(loss(mpslinalg.eigh, X1), X1)
    (g2,) = torch.autograd.grad(loss(torch.linalg.eigh, X2), X2)
    torch.testing.assert_close(g1, g2, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", DOUBLE, ids=DID)
def test_forward_mode_and_func(dtype):
    A = _herm(4, (2,), dtype, seed=4)
    T = _herm(4, (2,), dtype, seed=5)
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level():
        w, V = mpslinalg.eigh(fwad.make_dual(A, T))
        dw = fwad.unpack_dual(w).tangent
        dv = fwad.unpack_dual(V).tangent
    with fwad.dual_level():
        wt, Vt = torch.linalg.eigh(fwad.make_dual(A, T))
        dwt = fwad.unpack_dual(wt).tangent
    torch.testing.assert_close(dw, dwt, rtol=1e-10, atol=1e-10)
    # dV is gauge dependent; its gauge-free part: Vᴴ dV has a zero diagonal (torch's choice), and
    # d(V diag(w) Vᴴ) = dA (the tangent of the reconstruction)
    dA = (dv * w.unsqueeze(-2).to(V.dtype)) @ V.mH + (V * dw.unsqueeze(-2).to(V.dtype)) @ V.mH \
        + (V * w.unsqueeze(-2).to(V.dtype)) @ dv.mH
    torch.testing.assert_close(dA, T, rtol=1e-9, atol=1e-9)
    # torch.func: grad, jacrev, jacfwd, vmap
    f = lambda X: mpslinalg.eigvalsh(X).pow(2).sum()  # noqa: E731
    g = torch.func.grad(f)(A[0])
    gt = torch.func.grad(lambda X: torch.linalg.eigvalsh(X).pow(2).sum())(A[0])
    torch.testing.assert_close(g, gt, rtol=1e-10, atol=1e-10)
    if not dtype.is_complex:
        jr = torch.func.jacrev(mpslinalg.eigvalsh)(A[0])
        jf = torch.func.jacfwd(mpslinalg.eigvalsh)(A[0])
        torch.testing.assert_close(jr, jf, rtol=1e-9, atol=1e-9)
    wv = torch.func.vmap(mpslinalg.eigvalsh)(A)
    torch.testing.assert_close(wv, torch.linalg.eigvalsh(A), rtol=1e-12, atol=1e-12)


def test_complex_gauge_error():
    """A loss that depends on the eigenvectors' phases: torch's error, word for word."""
    A = _herm(3, (), torch.complex128, seed=6).requires_grad_()
    w, V = mpslinalg.eigh(A)
    with pytest.raises(RuntimeError, match=r"linalg_eigh_backward: The eigenvectors in the complex case are "
                                           r"specified up to multiplication by e\^\{i phi\}"):
        V[0, 0].imag.backward()


def test_degenerate_as_torch():
    """Repeated eigenvalues: a loss of the eigenvalues only is fine (finite gradient, equal to
    torch's); one of the eigenvectors divides by zero, as torch's (non-finite gradient)."""
    A = torch.eye(3, dtype=torch.float64).requires_grad_()
    w, V = mpslinalg.eigh(A)
    (g,) = torch.autograd.grad(w.sum(), A)
    torch.testing.assert_close(g, torch.eye(3, dtype=torch.float64))
    w, V = mpslinalg.eigh(A)
    (g,) = torch.autograd.grad(V.sum(), A)
    wt, Vt = torch.linalg.eigh(A)
    (gt,) = torch.autograd.grad(Vt.sum(), A)
    assert not bool(torch.isfinite(g).all()) and not bool(torch.isfinite(gt).all())


def test_float32_gradient_on_the_emulator(backend, backend_device):
    """float32 gradients of the kernels' path agree with float64 ones to κ-scaled tolerance: the
    eigenvalue gradient V diag(g) Vᴴ is as accurate as V (≈ 30 n u, n = 6)."""
    A = _herm(6, (2,), torch.float64, seed=8)
    X = A.float().to(backend_device).requires_grad_()
    (g,) = torch.autograd.grad(mpslinalg.eigvalsh(X).pow(2).sum(), X)
    Xd = A.clone().requires_grad_()
    (gd,) = torch.autograd.grad(torch.linalg.eigvalsh(Xd).pow(2).sum(), Xd)
    tol = 30 * 6 * 2.0**-24 * float(gd.abs().max())
    assert float((g.cpu().double() - gd).abs().max()) <= tol


def test_vmap_runs_the_batched_op(backend, backend_device):
    """``vmap`` of eigh/eigh_ex is the declared op on one more batch dimension (``ranks=(2,)``): the
    same eigenvalues as the plain batched call (bit for bit: the same kernels on the same batch),
    ``info`` per matrix."""
    A = _herm(5, (3, 2), torch.float64, seed=9).float().to(backend_device)
    w, V = torch.func.vmap(mpslinalg.eigh)(A)
    w0, V0 = mpslinalg.eigh(A)
    assert torch.equal(w, w0) and torch.equal(V.abs(), V0.abs())
    info = torch.func.vmap(lambda X: mpslinalg.eigh_ex(X).info)(A)
    assert info.shape == (3, 2) and not bool(info.any())
