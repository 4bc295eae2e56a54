"""``metal/eig.metal``'s ``eig_schur_small`` in the emulator, in every thread order, through the
family's own launch code (``mpslinalg.eig.kernels._MetalKernels``, whose ``load_library`` is patched
to hand out an :class:`helpers.InOrder` library), so a missing barrier shows.

Bounds (LAPACK's ``xHST01`` test of ``hseqr``, pass mark 30, ``u = 2⁻²⁴``): the Schur form is a
product of Householder similarities, each backward stable to ``c u ‖A‖`` (Wilkinson), so
``‖A − Z T Zᴴ‖₁ / (n ‖A‖₁ u) < 30`` and ``‖I − ZᴴZ‖₁ / (n u) < 30``. Structure exactly: complex
``T`` upper triangular, real ``T`` quasi-triangular (zeros below the subdiagonal, no two adjacent
nonzero subdiagonal entries). Eigenvalues (through ``eig``) as in test_eig_accuracy (Bauer–Fike).
"""

from __future__ import annotations

import importlib

import pytest
import torch
from helpers import ORDER_IDS, ORDERS, InOrder, NoHostSync, gaussian, require_emulator

import mpslinalg
from mpslinalg.kernels import load_library, use_backend
from reference import metrics

eigkern = importlib.import_module("mpslinalg.eig.kernels")
DTYPES = [torch.float32, torch.complex64]
DID = ["float32", "complex64"]


@pytest.fixture(params=ORDERS, ids=ORDER_IDS)
def ordered(request, monkeypatch):
    """The family's launch code with every kernel call in one thread order."""
    require_emulator()
    order, seed = request.param
    lib = load_library("eig", "cpu")
    monkeypatch.setattr(eigkern, "load_library", lambda family, device: InOrder(lib, order, seed))
    return order, seed


def _kernel(A):
    assert eigkern.metal_fits(A.shape[-1], A.dtype)
    return eigkern._MetalKernels(A.device, A.dtype)


def _check_schur(A, T, Z, m):
    n = A.shape[-1]
    assert m.tolist() == [0] * A.shape[0]
    recon, _ = metrics.qr_ratios(A, Z, T.to(torch.complex128 if A.is_complex() else torch.float64)
                                 @ Z.to(torch.complex128 if A.is_complex() else torch.float64).mH)
    assert recon.max() < metrics.PASS_RATIO, recon.max()
    assert metrics.orthogonality_ratio(Z).max() < metrics.PASS_RATIO
    if A.is_complex():
        assert torch.equal(torch.tril(T, -1), torch.zeros_like(T))
    elif n > 1:
        assert torch.equal(torch.tril(T, -2), torch.zeros_like(T))
        sub = torch.diagonal(T, -1, -2, -1) != 0
        assert not (sub[:, 1:] & sub[:, :-1]).any()  # 2x2 blocks never overlap


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("n", [1, 2, 3, 6, 10, 17])
def test_schur_form(ordered, dtype, n):
    A = gaussian((3, n, n), dtype, 40 + n)
    T, Z, m = _kernel(A).schur(A.clone(), True)
    _check_schur(A, T, Z, m)
    T2, Z2, m2 = _kernel(A).schur(A.clone(), False)  # Z is never read back into H: the same T exactly
    assert Z2 is None and torch.equal(T2, T) and torch.equal(m2, m)


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_triangular_input_is_untouched(ordered, dtype):
    # no reflector (every column is already reduced) and every subdiagonal entry exactly zero
    A = gaussian((2, 7, 7), dtype, 50).triu()
    T, Z, m = _kernel(A).schur(A.clone(), True)
    assert torch.equal(T, A) and torch.equal(Z, torch.eye(7, dtype=dtype).expand(2, 7, 7)) and m.tolist() == [0, 0]


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_structured(ordered, dtype):
    # rotations in a random frame (complex pairs e^{±iθ}), a Jordan block rotated, a zero matrix,
    # a permutation (exceptional shifts: the unshifted step stalls on it)
    n = 6
    Q, _ = torch.linalg.qr(gaussian((n, n), torch.float64, 51))
    R = torch.zeros(n, n, dtype=torch.float64)
    for j, th in ((0, 0.3), (2, 2.0)):
        R[j, j] = R[j + 1, j + 1] = torch.cos(torch.tensor(th))
        R[j, j + 1], R[j + 1, j] = -torch.sin(torch.tensor(th)), torch.sin(torch.tensor(th))
    R[4, 4], R[5, 5] = 1.0, -1.0
    J = 2 * torch.eye(n, dtype=torch.float64) + torch.diag(torch.ones(n - 1, dtype=torch.float64), 1)
    P = torch.roll(torch.eye(n, dtype=torch.float64), 1, 0)
    A = torch.stack([Q @ R @ Q.T, Q @ J @ Q.T, torch.zeros(n, n, dtype=torch.float64), P]).to(dtype)
    T, Z, m = _kernel(A).schur(A.clone(), True)
    _check_schur(A, T, Z, m)


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_eig_through_the_front_door(ordered, dtype):
    # the family's algorithm (scaling, balancing, kernel, vectors) on the emulator backend
    from test_eig_accuracy import check_eig

    A = gaussian((4, 9, 9), dtype, 52)
    with use_backend("emulator"):
        assert isinstance(eigkern.kernels_for(A), eigkern._MetalKernels)
        L, V = mpslinalg.eig(A)
        w = mpslinalg.eigvals(A)
    check_eig(A, L, V)
    assert torch.equal(w, L)  # the same Schur form (Z does not feed back into T)


@pytest.mark.parametrize("dtype,n", [(torch.float32, 64), (torch.complex64, 62)], ids=DID)
def test_largest(dtype, n):
    require_emulator()
    A = gaussian((1, n, n), dtype, 53)
    T, Z, m = _kernel(A).schur(A.clone(), True)
    _check_schur(A, T, Z, m)
    assert not eigkern.metal_fits(n + 1, dtype)


def test_eig_ex_on_the_kernel_reads_nothing_on_the_host(ordered):
    A = gaussian((3, 8, 8), torch.complex64, 54)
    A[1, 2, 3] = float("nan")
    with use_backend("emulator"), NoHostSync():
        L, V, info = mpslinalg.eig_ex(A)
    assert info.tolist() == [0, 9, 0]
    assert torch.isnan(L[1]).all() and torch.isfinite(L[[0, 2]]).all()


def test_routing_of_sizes_and_dtypes():
    with use_backend("emulator"):
        assert isinstance(eigkern.kernels_for(torch.zeros(2, 64, 64)), eigkern._MetalKernels)
        assert eigkern.kernels_for(torch.zeros(2, 65, 65)) is eigkern._TORCH_KERNELS
        assert eigkern.kernels_for(torch.zeros(2, 63, 63, dtype=torch.complex64)) is eigkern._TORCH_KERNELS
        assert eigkern.kernels_for(torch.zeros(2, 8, 8, dtype=torch.float64)) is eigkern._TORCH_KERNELS
    assert eigkern.kernels_for(torch.zeros(2, 8, 8)) is eigkern._TORCH_KERNELS  # torch backend
