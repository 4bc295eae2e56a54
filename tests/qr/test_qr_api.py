"""``qr``, ``geqrf``, ``householder_product``, ``ormqr``: torch.linalg semantics (shapes, modes,
conventions, errors, ``out=``, empty inputs, compile, torch.func, no host sync).

``geqrf``/``householder_product``/``ormqr`` must equal torch's (LAPACK's) results: the same packed
reflectors and ``tau`` (larfg: ``beta`` real, ``tau = 0`` for an already-zero column). Both sides
are backward-stable Householder factorisations of the same input, so they differ by the
perturbation bound of ``test_qr_accuracy`` (``2·√2 κ₂ · 30 m u √n``, u of the dtype); the products
with ``Q`` by that bound times ``‖C‖``.
"""

from __future__ import annotations

import importlib
import math

import pytest
import torch

import mpslinalg
from reference import matrices, metrics

qrmod = importlib.import_module("mpslinalg.qr")
qrkern = importlib.import_module("mpslinalg.qr.kernels")
ALL = [torch.float32, torch.float64, torch.complex64, torch.complex128]


def _tol(A):
    u = metrics.unit_roundoff(A.dtype)
    m, n = A.shape[-2:]
    s = torch.linalg.svdvals(A.to(torch.complex128 if A.is_complex() else torch.float64))
    kappa = float((s[..., 0] / s[..., -1]).max())
    return 2 * math.sqrt(2) * kappa * metrics.PASS_RATIO * m * u * math.sqrt(n)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("m,n", [(6, 4), (4, 6), (5, 5)])
def test_geqrf_householder_ormqr_match_torch(dtype, m, n):
    A = matrices.random(m, n, batch=(3,), dtype=dtype, seed=m + 10 * n)
    A[0, :, 0] = 0  # an already-zero column: tau = 0
    QR, tau = mpslinalg.geqrf(A)
    QR0, tau0 = torch.geqrf(A)
    scale = float(A.abs().max())
    tol = _tol(A[1:])
    assert float((QR - QR0).abs().max()) <= tol * scale and float((tau - tau0).abs().max()) <= tol
    assert float(tau[0, 0].abs()) == 0.0
    k = min(m, n)
    H = mpslinalg.householder_product(QR[..., :, :k] if m >= n else QR[..., :, :m], tau)
    H0 = torch.linalg.householder_product(QR0[..., :, :k] if m >= n else QR0[..., :, :m], tau0)
    assert float((H - H0).abs().max()) <= tol
    for left in (True, False):
        for transpose in (False, True):
            C = torch.randn(3, m, 2, dtype=dtype) if left else torch.randn(3, 2, m, dtype=dtype)
            X = mpslinalg.ormqr(QR, tau, C, left=left, transpose=transpose)
            X0 = torch.ormqr(QR0, tau0, C, left=left, transpose=transpose)
            assert float((X - X0).abs().max()) <= tol * float(C.abs().sum(-2 if left else -1).max())


def test_blocked_torch_path_matches_torch():
    # the compact-WY blocked code (larft + larfb), forced on the torch backend with small panels
    old = (qrmod.TUNING.torch_blocked, qrmod.TUNING.torch_small_max, qrmod.TUNING.nb)
    qrmod.TUNING.torch_blocked, qrmod.TUNING.torch_small_max, qrmod.TUNING.nb = True, 4, 8
    try:
        for dtype in (torch.float64, torch.complex128):
            for m, n in [(50, 30), (30, 50), (40, 40)]:
                A = matrices.random(m, n, batch=(2,), dtype=dtype, seed=m * n)
                QR, tau = qrmod.geqrf_impl(A)
                QR0, tau0 = torch.geqrf(A)
                tol = _tol(A)
                assert float((QR - QR0).abs().max()) <= tol * float(A.abs().max())
                assert float((tau - tau0).abs().max()) <= tol
                Q, R = mpslinalg.qr(A, mode="complete")
                res, orth = metrics.qr_ratios(A, Q, R)
                assert float(res.max()) < 30 and float(orth.max()) < 30
    finally:
        qrmod.TUNING.torch_blocked, qrmod.TUNING.torch_small_max, qrmod.TUNING.nb = old


def test_larft_matches_lapack_recursion():
    # T = (I + D N)^-1 D equals LAPACK's column recursion, also with tau_i = 0. Bound: both are
    # float64 evaluations of the same sums of products (inner products of length m = 20 nested
    # k = 6 deep), so they differ by at most 2·γ_{mk} times the recursion run on absolute values
    # (the standard running error bound, Higham §3.1); γ_{mk} <= 1.01·m·k·u.
    g = torch.Generator().manual_seed(11)
    V = torch.randn(2, 20, 6, dtype=torch.complex128, generator=g).tril(-1) + torch.eye(20, 6, dtype=torch.complex128)
    tau = torch.randn(2, 6, dtype=torch.complex128, generator=g)
    tau[:, 2] = 0
    T = qrkern._larft(V, tau)
    Tr = torch.zeros(2, 6, 6, dtype=torch.complex128)
    Ta = torch.zeros(2, 6, 6, dtype=torch.float64)  # the recursion on |tau|, |V|
    Va = V.abs()
    for i in range(6):
        Tr[:, :i, i] = -tau[:, i, None] * (Tr[:, :i, :i] @ (V[:, :, :i].mH @ V[:, :, i:i + 1]))[..., 0]
        Tr[:, i, i] = tau[:, i]
        Ta[:, :i, i] = tau[:, i, None].abs() * (Ta[:, :i, :i] @ (Va[:, :, :i].mT @ Va[:, :, i:i + 1]))[..., 0]
        Ta[:, i, i] = tau[:, i].abs()
    u = torch.finfo(torch.float64).eps / 2
    bound = 2 * 1.01 * 20 * 6 * u * Ta
    assert bool(((T - Tr).abs() <= bound).all())


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0), (2, 0, 4), (0, 4, 3)])
def test_empty(mode, shape):
    A = torch.randn(*shape)
    Q, R = mpslinalg.qr(A, mode=mode)
    Q0, R0 = torch.linalg.qr(A, mode=mode)
    assert Q.shape == Q0.shape and R.shape == R0.shape
    assert torch.equal(Q, Q0) and torch.equal(R, R0)


def test_mode_r_and_shapes(backend, backend_device, gpu_dtype):
    A = matrices.random(7, 4, batch=(2, 3), dtype=gpu_dtype, seed=1).to(backend_device)
    Q, R = mpslinalg.qr(A, mode="r")
    assert Q.numel() == 0 and R.shape == (2, 3, 4, 4)
    assert torch.allclose(R, mpslinalg.qr(A).R)


def test_errors():
    with pytest.raises(ValueError, match="unrecognized mode 'x'"):
        mpslinalg.qr(torch.randn(3, 3), mode="x")
    with pytest.raises(ValueError, match="A must have at least 2 dimensions"):
        mpslinalg.qr(torch.randn(3))
    with pytest.raises(TypeError, match="int32"):
        mpslinalg.qr(torch.ones(3, 3, dtype=torch.int32))
    with pytest.raises(TypeError, match="expected A to be a torch.Tensor"):
        mpslinalg.qr([[1.0]])
    with pytest.raises(ValueError, match="input.shape\\[-2\\] must be greater than or equal to input.shape\\[-1\\]"):
        mpslinalg.householder_product(torch.randn(3, 4), torch.randn(3))
    with pytest.raises(ValueError, match="input.shape\\[-1\\] must be greater than or equal to tau.shape\\[-1\\]"):
        mpslinalg.householder_product(torch.randn(4, 3), torch.randn(4))
    with pytest.raises(ValueError, match="batch dimensions of tau"):
        mpslinalg.householder_product(torch.randn(2, 4, 3), torch.randn(3, 3))
    with pytest.raises(TypeError, match="same dtype"):
        mpslinalg.householder_product(torch.randn(4, 3), torch.randn(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="other.shape\\[-2\\] must be equal to input.shape\\[-2\\]"):
        mpslinalg.ormqr(torch.randn(5, 3), torch.randn(3), torch.randn(4, 2))
    with pytest.raises(ValueError, match="tau.shape\\[-1\\] must be equal to min"):
        mpslinalg.ormqr(torch.randn(5, 3), torch.randn(2), torch.randn(5, 2))
    with pytest.raises(ValueError, match="other must have at least 2 dimensions"):
        mpslinalg.ormqr(torch.randn(5, 3), torch.randn(3), torch.randn(5))
    with pytest.raises(TypeError, match="'left' must be bool"):
        mpslinalg.ormqr(torch.randn(5, 3), torch.randn(3), torch.randn(5, 2), left=1)
    with pytest.raises(ValueError, match="batch dimensions of other"):
        mpslinalg.ormqr(torch.randn(2, 5, 3), torch.randn(2, 3), torch.randn(3, 5, 2))


def test_out():
    A = torch.randn(5, 3)
    Q, R = torch.empty(5, 3), torch.empty(3, 3)
    res = mpslinalg.qr(A, out=(Q, R))
    assert res.Q is Q and res.R is R and torch.allclose(Q @ R, A, atol=1e-5)
    a, tau = torch.empty(0), torch.empty(0)
    mpslinalg.geqrf(A, out=(a, tau))
    assert a.shape == (5, 3) and tau.shape == (3,)
    o = torch.empty(5, 3)
    assert mpslinalg.householder_product(a, tau, out=o) is o
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        mpslinalg.qr(A.requires_grad_(), out=(Q, R))


def test_compile_fullgraph():
    A = torch.randn(4, 6, 5)

    @torch.compile(fullgraph=True, backend="aot_eager")
    def f(x):
        Q, R = mpslinalg.qr(x)
        a, tau = mpslinalg.geqrf(x)
        return Q @ R, mpslinalg.householder_product(a, tau), mpslinalg.ormqr(a, tau, x, transpose=True)

    QR, H, X = f(A)
    assert torch.allclose(QR, A, atol=1e-5)
    assert torch.allclose(H, mpslinalg.qr(A).Q, atol=1e-5)
    assert torch.allclose(X[..., :5, :].triu(), mpslinalg.qr(A).R, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
def test_torch_func(dtype):
    A = torch.randn(3, 5, 4, dtype=dtype)
    Qv, Rv = torch.func.vmap(mpslinalg.qr)(A)
    Q0, R0 = torch.linalg.qr(A)
    assert torch.allclose(Qv, Q0) and torch.allclose(Rv, R0)

    def loss(x):
        Q, R = mpslinalg.qr(x)
        return (Q.abs() ** 2 * torch.arange(4.0, dtype=Q.real.dtype)).sum() + (R.abs() ** 2).sum().sqrt()

    def loss0(x):
        Q, R = torch.linalg.qr(x)
        return (Q.abs() ** 2 * torch.arange(4.0, dtype=Q.real.dtype)).sum() + (R.abs() ** 2).sum().sqrt()

    g, g0 = torch.func.grad(loss)(A[0]), torch.func.grad(loss0)(A[0])
    assert torch.allclose(g, g0)
    if dtype == torch.float64:  # jacfwd/jacrev need real outputs of real inputs
        def fR(x):
            return mpslinalg.qr(x).R

        def fR0(x):
            return torch.linalg.qr(x).R

        assert torch.allclose(torch.func.jacrev(fR)(A[0]), torch.func.jacrev(fR0)(A[0]))
        assert torch.allclose(torch.func.jacfwd(fR)(A[0]), torch.func.jacfwd(fR0)(A[0]))


def test_meta():
    A = torch.empty(2, 7, 3, device="meta")
    Q, R = mpslinalg.qr(A, mode="complete")
    assert Q.shape == (2, 7, 7) and R.shape == (2, 7, 3)
    a, tau = mpslinalg.geqrf(A)
    assert a.shape == (2, 7, 3) and tau.shape == (2, 3)


@pytest.mark.cuda
def test_cuda_no_host_sync_and_matches():
    for shape, dtype in [((256, 32, 32), torch.float32), ((512, 3, 4), torch.float32),
                         ((128, 16, 16), torch.complex64), ((1, 20000, 32), torch.float32),
                         ((1, 300, 300), torch.float32)]:
        A = matrices.random(shape[1], shape[2], batch=shape[:1], dtype=dtype, seed=5).cuda()
        mpslinalg.qr(A)  # warm-up (Triton compile)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            Q, R = mpslinalg.qr(A)
            a, tau = mpslinalg.geqrf(A)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        res, orth = metrics.qr_ratios(A.cpu(), Q.cpu(), R.cpu())
        assert float(res.max()) < 30 and float(orth.max()) < 30, (shape, dtype)
        Q0, R0 = torch.linalg.qr(A.cpu().to(torch.complex128 if dtype.is_complex else torch.float64))
        tol = _tol(A.cpu()[:8])
        assert float((R.cpu() - R0).abs().max() / A.abs().max().cpu()) < tol, shape
