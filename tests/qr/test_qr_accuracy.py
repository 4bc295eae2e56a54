"""Accuracy of ``qr`` against ``reference/`` (SciPy/LAPACK, mpmath), on the torch and emulator backends.

Bounds (DESIGN §8; LAPACK ``xQRT01``, threshold 30 from ``TESTING/ctest.in``, u = 2^-24 for
float32/complex64):

* backward error ``‖A − QR‖₁ / (m ‖A‖₁ u) < 30`` and orthogonality ``‖I − QᴴQ‖₁ / (m u) < 30``
  (Householder QR is backward stable with ``‖ΔA‖ <= γ_cmn ‖A‖`` and ``Q`` orthonormal to ``O(mn u)``,
  Higham Thm 19.4 / 19.13, for ANY input: rank-deficient, zero, graded and extreme-scaled too);
* agreement with LAPACK's factors, signs included (``geqrf``'s conventions): QR's first-order
  perturbation theory (Sun 1991; Higham Thm 19.? notes) gives ``‖ΔQ‖_F <= √2 κ₂(A) ‖ΔA‖_F/‖A‖₂``, so
  two backward-stable factorisations (each within ``30 m u ‖A‖₁`` of ``A``, and
  ``‖·‖_F <= √n ‖·‖₁``) differ by at most ``2 · √2 κ₂ · 30 m u √n`` in ``Q`` (and in ``R/‖A‖``);
* ``R``'s forward error against mpmath at 50 digits on well-conditioned input, the same bound with
  the exact factor in place of LAPACK's (one factorisation's error, not two);
* tall-skinny at κ = 1e6 (TSQR on the kernel backends and CUDA): orthogonality ratio < 30, where
  CholeskyQR's loss of orthogonality ``≈ κ² u`` makes its ratio > 1e3 (asserted, to show the test
  distinguishes them).
"""

from __future__ import annotations

import importlib
import math

import mpmath
import pytest
import torch

import mpslinalg
from reference import lapack, matrices, metrics

qrmod = importlib.import_module("mpslinalg.qr")
qralg = importlib.import_module("mpslinalg.qr.algorithm")
U32 = metrics.unit_roundoff(torch.float32)
PASS = metrics.PASS_RATIO


def _check_ratios(A, Q, R, what):
    res, orth = metrics.qr_ratios(A, Q, R)
    assert float(res.max()) < PASS, (what, "backward error", float(res.max()))
    assert float(orth.max()) < PASS, (what, "orthogonality", float(orth.max()))


def _kappa(A):
    s = torch.linalg.svdvals(A.to(torch.complex128 if A.is_complex() else torch.float64))
    return float((s[..., 0] / s[..., -1]).max())


SHAPES = [(1, 1), (5, 3), (3, 5), (8, 8), (40, 40), (70, 45), (45, 70), (130, 40)]


@pytest.mark.parametrize("m,n", SHAPES, ids=[f"{m}x{n}" for m, n in SHAPES])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_ratios_and_lapack_agreement(backend, backend_device, gpu_dtype, m, n, mode):
    A = matrices.random(m, n, batch=(2,), dtype=gpu_dtype, seed=m * 97 + n)
    Q, R = mpslinalg.qr(A.to(backend_device), mode=mode)
    Q, R = Q.cpu(), R.cpu()
    k = m if mode == "complete" else min(m, n)
    assert Q.shape == (2, m, k) and R.shape == (2, k, n)
    _check_ratios(A, Q, R, (m, n, mode))
    assert torch.equal(R, R.triu())
    assert float(R.diagonal(dim1=-2, dim2=-1).imag.abs().max()) == 0.0 if R.is_complex() else True
    Q0, R0 = lapack.qr(A, mode=mode)
    kmin = min(m, n)
    tol = 2 * math.sqrt(2) * _kappa(A) * PASS * m * U32 * math.sqrt(n)
    # columns of a complete Q beyond min(m, n) are any orthonormal completion: compare the first k
    dq = (Q[..., :kmin].to(Q0.dtype) - Q0[..., :kmin]).abs().max()
    dr = (R.to(R0.dtype) - R0).abs().max() / A.abs().max()
    assert float(dq) < tol and float(dr) < tol, (float(dq), float(dr), tol)


@pytest.mark.parametrize("kind", ["rank_deficient", "zero", "graded", "tiny", "huge", "zero_column"])
def test_hard_matrices(backend, backend_device, gpu_dtype, kind):
    m, n = 48, 36
    if kind == "rank_deficient":
        A = matrices.rank_deficient(m, n, 10, batch=(2,), dtype=gpu_dtype, seed=3)
    elif kind == "zero":
        A = torch.zeros(2, m, n, dtype=gpu_dtype)
    elif kind == "graded":
        A = matrices.graded(n, m=m, decades=30, side="cols", batch=(2,), dtype=gpu_dtype, seed=4)
    elif kind == "zero_column":
        A = matrices.random(m, n, batch=(2,), dtype=gpu_dtype, seed=6)
        A[:, :, 0] = 0
        A[:, 5:, 7] = 0
    else:
        A = matrices.scaled(matrices.random(m, n, batch=(2,), dtype=gpu_dtype, seed=5),
                            1e-30 if kind == "tiny" else 1e30)
    Q, R = mpslinalg.qr(A.to(backend_device))
    Q, R = Q.cpu(), R.cpu()
    assert torch.isfinite(Q).all() and torch.isfinite(R).all()
    _check_ratios(A, Q, R, kind)
    if kind == "zero":  # LAPACK: tau = 0 for every column, Q = I, R = 0 exactly
        assert torch.equal(Q, torch.eye(m, n, dtype=gpu_dtype).expand(2, m, n))
        assert torch.equal(R, torch.zeros_like(R))


def test_tall_skinny_kappa_1e6(backend, backend_device, gpu_dtype):
    # the TSQR route on every backend (the torch backend on CPU otherwise calls LAPACK's geqrf)
    m, n = 2048, 16
    A = matrices.with_condition(n, 1e6, m=m, batch=(1,), dtype=gpu_dtype, seed=11)
    old = dict(qrmod.TUNING.tsqr_ratio)
    qrmod.TUNING.tsqr_ratio.update(cpu=16, mps=16)
    try:
        assert qralg._use_tsqr(A.to(backend_device))
        Q, R = mpslinalg.qr(A.to(backend_device))
    finally:
        qrmod.TUNING.tsqr_ratio.update(old)
    Q, R = Q.cpu(), R.cpu()
    _check_ratios(A, Q, R, "tsqr")
    # LAPACK's signs recovered: R equals geqrf's to the perturbation bound above
    Q0, R0 = lapack.qr(A)
    tol = 2 * math.sqrt(2) * 1e6 * PASS * m * U32 * math.sqrt(n)
    assert float((R.to(R0.dtype) - R0).abs().max() / A.abs().max()) < tol
    # CholeskyQR in the same precision loses orthogonality (≈ κ² u): the test tells them apart
    G = A.mH @ A
    L, info = torch.linalg.cholesky_ex(G)
    if int(info.max()) == 0:
        Qc = torch.linalg.solve_triangular(L.mH, A, upper=True, left=False)
        assert float(metrics.orthogonality_ratio(Qc).max()) > 1e3


def test_r_forward_error_vs_mpmath(backend, backend_device):
    # well-conditioned (κ = 10): ‖R − R_exact‖/‖A‖ <= √2 κ · 30 m u √n (one factorisation's error);
    # mpmath's R has LAPACK's signs for real input: compare row signs anyway (QR is unique up to them)
    m, n = 12, 7
    A = matrices.with_condition(n, 10.0, m=m, dtype=torch.float32, seed=21)
    R = mpslinalg.qr(A.to(backend_device), mode="r").R.cpu().double()
    mpmath.mp.dps = 50
    _, Rm = mpmath.qr(mpmath.matrix(A.double().tolist()), mode="skinny")
    Rx = torch.tensor([[float(Rm[i, j]) for j in range(n)] for i in range(n)], dtype=torch.float64)
    sign = torch.sign(R.diagonal()) * torch.sign(Rx.diagonal())
    err = (R - sign[:, None] * Rx).abs().max() / A.abs().max()
    assert float(err) < math.sqrt(2) * 10.0 * PASS * m * U32 * math.sqrt(n)


def test_inputs_never_modified_and_views(backend, backend_device, gpu_dtype):
    A = matrices.random(9, 6, batch=(3,), dtype=gpu_dtype, seed=8).to(backend_device)
    keep = A.clone()
    ref = mpslinalg.qr(A.clone())
    for view in (A, A.mT.contiguous().mT, A.conj() if A.is_complex() else A[..., :, :]):
        Q, R = mpslinalg.qr(view)
        Qe, Re = mpslinalg.qr(view.resolve_conj().contiguous())
        assert torch.allclose(Q, Qe) and torch.allclose(R, Re)
    Q, R = mpslinalg.qr(A.expand(2, 3, 9, 6))  # broadcast batch
    assert torch.allclose(Q[1], ref.Q)
    assert torch.equal(A, keep)
    QR, tau = mpslinalg.geqrf(A)
    mpslinalg.householder_product(QR, tau)
    C = torch.randn(3, 9, 2, dtype=gpu_dtype, device=backend_device)
    Ck = C.clone()
    mpslinalg.ormqr(QR, tau, C)
    assert torch.equal(A, keep) and torch.equal(C, Ck)
