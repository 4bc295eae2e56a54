"""The kernels of ``metal/qr.metal`` called directly in the emulator, in every thread order, and the
Triton kernels of ``mpslinalg.qr.triton`` (Triton's interpreter on the CPU; compiled on CUDA).

Each Metal case runs in order, in reverse and shuffled (two seeds), so a missing barrier shows,
through the same call shape as ``mpslinalg.qr._MetalKernels`` plus the emulator-only
``order``/``seed``.

Bounds: ``qr_small``/``qr_panel`` do LAPACK ``geqr2`` (+ ``larft``). Their packed reflectors and
``tau`` must equal LAPACK's in float64 (``torch.geqrf`` of the widened input) within the
perturbation bound of two backward-stable Householder factorisations, ``2·√2 κ₂ · 30 m u √n``
(see ``test_qr_accuracy``), and the factorisation must pass LAPACK's ``xQRT01`` ratios < 30. The
``T`` factor must satisfy ``H_1 ⋯ H_w = I − V T Vᴴ`` to ``30 m u`` (the products of ``w``
reflectors each exact to a few u). Columns outside the panel are never touched (exact).
"""

from __future__ import annotations

import importlib
import math

import pytest
import torch
from helpers import require_emulator, run_interpreted

from mpslinalg.kernels import kernel_name, load_library, use_backend
from reference import matrices, metrics

qrmod = importlib.import_module("mpslinalg.qr")
qrkern = importlib.import_module("mpslinalg.qr.kernels")
ORDERS = [("inorder", 0), ("reverse", 0), ("shuffle", 1), ("shuffle", 2)]
OID = [f"{o}{s}" for o, s in ORDERS]
DTYPES = [torch.float32, torch.complex64]
DID = ["float32", "complex64"]
U = 2.0**-24


@pytest.fixture(scope="module")
def lib():
    require_emulator()
    return load_library("qr", "cpu")


def _wide(x):
    return x.to(torch.complex128 if x.is_complex() else torch.float64)


def _bound(A):
    m, n = A.shape[-2:]
    s = torch.linalg.svdvals(_wide(A))
    kappa = float((s[..., 0] / s[..., -1]).max())
    return 2 * math.sqrt(2) * kappa * 30 * m * U * math.sqrt(n)


def _check_geqrf(A, QR, tau):
    QR0, tau0 = torch.geqrf(_wide(A))
    tol = _bound(A)
    assert float((_wide(QR) - QR0).abs().max()) <= tol * float(A.abs().max())
    assert float((_wide(tau) - tau0).abs().max()) <= tol
    k = min(A.shape[-2:])
    Q = torch.linalg.householder_product(_wide(QR)[..., :k] if A.shape[-2] >= A.shape[-1] else _wide(QR)[..., :k],
                                         _wide(tau))
    res, orth = metrics.qr_ratios(A, Q.to(A.dtype), QR[..., :k, :].triu())
    assert float(res.max()) < 30 and float(orth.max()) < 30


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_qr_small(lib, order, seed, dtype):
    for m, n in [(9, 9), (32, 32), (12, 5), (5, 12), (64, 64 if dtype == torch.float32 else 63), (1, 3)]:
        A = matrices.random(m, n, batch=(3,), dtype=dtype, seed=m * 100 + n)
        A[1, :, 0] = 0  # tau = 0 column
        QR = A.clone()
        k = min(m, n)
        tau = torch.zeros(3, k, dtype=dtype)
        Q = torch.full((3, m, k), float("nan"), dtype=dtype)  # written whole
        getattr(lib, kernel_name("qr_small", dtype))(QR, tau, Q, m, n, 1, threads=3 * 32, group_size=32,
                                                     order=order, seed=seed)
        assert float(tau[1, 0].abs()) == 0.0
        _check_geqrf(A[[0, 2]], QR[[0, 2]], tau[[0, 2]])
        # the thin Q formed in the same dispatch: LAPACK's (householder_product of its own factors)
        H = torch.linalg.householder_product(_wide(QR)[..., :k], _wide(tau))
        assert float((_wide(Q) - H).abs().max()) < 30 * m * U
        res, orth = metrics.qr_ratios(A, Q, QR[..., :k, :].triu())
        assert float(res.max()) < 30 and float(orth.max()) < 30
        QR2, tau2 = A.clone(), torch.zeros(3, k, dtype=dtype)  # without Q: same factors, Q untouched
        getattr(lib, kernel_name("qr_small", dtype))(QR2, tau2, tau2, m, n, 0, threads=3 * 32, group_size=32,
                                                     order=order, seed=seed)
        assert torch.equal(QR2, QR) and torch.equal(tau2, tau)


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_qr_panel(lib, order, seed, dtype):
    M, N = 300, 20
    A = matrices.random(M, N, batch=(2,), dtype=dtype, seed=7)
    for o, w in [(0, 8), (5, 6), (12, 8)]:
        X = A.clone()
        K = min(M, N)
        tau = torch.zeros(2, K, dtype=dtype)
        T = torch.full((2, w, w), float("nan"), dtype=dtype)  # written whole by the kernel
        Vk = torch.full((2, M - o, w), float("nan"), dtype=dtype)
        getattr(lib, kernel_name("qr_panel", dtype))(X, tau, T, Vk, M, N, K, o, w, threads=2 * 256,
                                                group_size=256, order=order, seed=seed)
        # outside the panel nothing moved (exact)
        keep = torch.ones(M, N, dtype=torch.bool)
        keep[o:, o:o + w] = False
        assert torch.equal(X[:, keep], A[:, keep])
        # the panel equals LAPACK's geqrf of the sub-block
        _check_geqrf(A[:, o:, o:o + w], X[:, o:, o:o + w], tau[:, o:o + w])
        # the compact WY form: H_1 ... H_w = I - V T V^H
        V = qrkern._unit_lower(_wide(X[:, o:, o:o + w]))
        assert torch.equal(_wide(Vk), V)  # V copied out exactly, unit diagonal, zeros above
        assert torch.equal(T.tril(-1), torch.zeros_like(T))
        H = torch.linalg.householder_product(V, _wide(tau[:, o:o + w]))
        Qfull = torch.eye(M - o, dtype=V.dtype) - V @ _wide(T) @ V.mH
        assert float((Qfull[..., :w] - H).abs().max()) < 30 * (M - o) * U


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_panel_path_through_module(lib, dtype):
    # geqrf of a 200 x 70 matrix on the emulator backend: qr_panel + larfb by matrix products
    A = matrices.random(200, 70, batch=(1,), dtype=dtype, seed=9)
    with use_backend("emulator"):
        QR, tau = qrmod.geqrf_impl(A)
    _check_geqrf(A, QR, tau)


def _triton_check(device: str) -> None:
    """Triton geqrf_small (with thin Q) and lapack_signs against LAPACK, real and complex."""
    from mpslinalg.qr.triton import geqrf_small, lapack_signs
    from mpslinalg.qr.tsqr import _signs_torch

    for dtype in DTYPES:
        for m, n in [(5, 3), (3, 5), (32, 32), (3, 4), (256, 32), (128, 64)]:
            # one matrix per program: a random one (against geqrf) and one with a zero column (tau = 0)
            A = matrices.random(m, n, batch=(2,), dtype=dtype, seed=m + n)
            A[1, :, 0] = 0
            k = min(m, n)
            QR, tau = A.clone().to(device), torch.zeros(2, k, dtype=dtype, device=device)
            Q = torch.empty(2, m, k, dtype=dtype, device=device)
            geqrf_small(QR, tau, Q)
            QR, tau, Q = QR.cpu(), tau.cpu(), Q.cpu()
            assert float(tau[1, 0].abs()) == 0.0
            _check_geqrf(A[:1], QR[:1], tau[:1])
            res, orth = metrics.qr_ratios(A, Q, QR[..., :k, :].triu())
            assert float(res.max()) < 30 and float(orth.max()) < 30, (m, n, dtype)
        Q1 = torch.linalg.qr(matrices.random(40, 7, batch=(20,), dtype=dtype, seed=3))[0][:, :7]
        assert torch.equal(lapack_signs(Q1.to(device)).cpu(), _signs_torch(Q1))


def test_triton_interpreted():
    run_interpreted("import qr.test_qr_kernels as t; t._triton_check('cpu')")


@pytest.mark.cuda
def test_triton_cuda():
    _triton_check("cuda")
