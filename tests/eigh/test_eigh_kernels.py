"""The kernels of ``metal/eigh.metal`` (``eigh_small``, ``eigh_jacobi``) and ``metal/eigh_tridiag.metal``
(``eigh_tridiag_ql``) in the emulator, in every thread order, through the family's own launch code
(``mpslinalg.eigh.kernels._MetalKernels`` with its ``load_library`` patched by ``helpers.InOrder``).

Bounds (as ``test_eigh_accuracy``): the decomposition passes LAPACK's ``xHET21`` ratios
``‖H − VΛVᴴ‖₁/(n‖H‖₁u)`` and ``‖I − VᴴV‖₁/(n u)`` below 30 (``metrics.PASS_RATIO``); every matrix
converges (``rotated``/``failed`` false); graded positive-definite inputs keep Demmel–Veselić's
relative accuracy ``n·u·κ(M)`` against mpmath; the tridiagonal eigenvalues are within the Weyl
bound ``30 n u ‖T‖₁`` of LAPACK's in float64.
"""

from __future__ import annotations

import importlib

import pytest
import torch
from helpers import ORDER_IDS as OID
from helpers import ORDERS, InOrder, require_emulator

from mpslinalg.kernels import load_library
from reference import matrices, metrics, mp

kmod = importlib.import_module("mpslinalg.eigh.kernels")
jacobi_tolerances = importlib.import_module("mpslinalg.eigh.algorithm").jacobi_tolerances

DTYPES = [torch.float32, torch.complex64]
DID = ["float32", "complex64"]
U = 2.0**-24


@pytest.fixture(scope="module")
def libs():
    require_emulator()
    return {"eigh": load_library("eigh", "cpu"), "eigh_tridiag": load_library("eigh_tridiag", "cpu")}


@pytest.fixture
def kernels(libs, monkeypatch):
    """``kernels(dtype, order, seed)``: the family's ``_MetalKernels`` launching in that thread order."""

    def make(dtype, order, seed):
        monkeypatch.setattr(kmod, "load_library", lambda family, device: InOrder(libs[family], order, seed))
        return kmod._MetalKernels(torch.device("cpu"), dtype)

    return make


def _hermitian(n, batch, dtype, seed):
    A = matrices.random(n, batch=batch, dtype=dtype, seed=seed)
    return (A + A.mH) / 2


def _solve(kern, which, H, sweeps=30):
    B, n, _ = H.shape
    tol, ctol = jacobi_tolerances(torch.float32, n)
    V = torch.eye(n, dtype=H.dtype).expand(B, n, n).contiguous()
    Hj, Vj, rotated = getattr(kern, which)(H.contiguous(), V, sweeps, tol, ctol, True)
    return Hj.diagonal(dim1=-2, dim2=-1).real.contiguous(), Vj, rotated


def _check(H, w, V, rotated):
    assert not bool(rotated.any()), "a matrix still rotating after 30 sweeps"
    recon, orth = metrics.eigh_ratios(H, w, V)
    assert float(recon.max()) < metrics.PASS_RATIO, float(recon.max())
    assert float(orth.max()) < metrics.PASS_RATIO, float(orth.max())


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_eigh_small(kernels, order, seed, dtype):
    """n = 1..4, a batch of 70 (two threadgroups of 64, the second partly idle: the bounds check)."""
    kern = kernels(dtype, order, seed)
    for n in (1, 2, 3, 4):
        H = _hermitian(n, (70,), dtype, seed=10 + n)
        w, V, rotated = _solve(kern, "jacobi_small", H)
        _check(H, w, V, rotated)
    # eigenvalues only: V is not written, the eigenvalues are the same
    H = _hermitian(3, (5,), dtype, seed=3)
    tol, ctol = jacobi_tolerances(torch.float32, 3)
    Hj, Vj, _ = kern.jacobi_small(H, None, 30, tol, ctol, True)
    w, _, _ = _solve(kern, "jacobi_small", H)
    assert Vj is None and torch.equal(Hj.diagonal(dim1=-2, dim2=-1).real, w)


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_eigh_small_graded_relative(kernels, dtype):
    """3x3 graded positive-definite over 24 decades: relative accuracy n·u·κ(M) (module docstring)."""
    kern = kernels(dtype, "shuffle", 1)
    A, kappa = matrices.graded_hpd(3, decades=24, batch=(8,), dtype=dtype, seed=31)
    # the family scales by a power of two first; the kernel gets the scaled matrix (exact)
    scale = 2.0 ** -float(torch.frexp(A.abs().amax()).exponent)
    w, V, rotated = _solve(kern, "jacobi_small", A * scale)
    assert not bool(rotated.any())
    ref = mp.eigvalsh(A, dps=30)
    rel = ((w.double().sort(-1).values / scale - ref).abs() / ref.abs()).amax(-1)
    assert bool((rel <= 3 * U * kappa).all()), (rel / (3 * U * kappa)).tolist()


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_eigh_jacobi(kernels, order, seed, dtype):
    kern = kernels(dtype, order, seed)
    for n in (6, 10):
        H = _hermitian(n, (3,), dtype, seed=20 + n)
        w, V, rotated = _solve(kern, "jacobi", H)
        _check(H, w, V, rotated)


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_eigh_tridiag_ql(kernels, order, seed, dtype):
    """Z = I: Z' is the tridiagonal's own eigenvector matrix (ratios of T), eigenvalues within Weyl."""
    kern = kernels(dtype, order, seed)
    n, B = 9, 3
    g = torch.Generator().manual_seed(40)
    d, e = torch.randn(B, n, generator=g), torch.randn(B, n - 1, generator=g)
    Z = torch.eye(n, dtype=dtype).expand(B, n, n).contiguous()
    w, Zq, failed = kern.tridiagonal(d, e, Z, 30)
    assert not bool(failed.any())
    T = torch.diag_embed(d) + torch.diag_embed(e, 1) + torch.diag_embed(e, -1)
    recon, orth = metrics.eigh_ratios(T.to(dtype), w, Zq)
    assert float(recon.max()) < metrics.PASS_RATIO and float(orth.max()) < metrics.PASS_RATIO
    ref = torch.linalg.eigvalsh(T.double())
    weyl = metrics.PASS_RATIO * n * U * metrics.norm1(T.double())
    assert bool(((w.double().sort(-1).values - ref).abs().amax(-1) <= weyl).all())
