"""The C kernel's lane Jacobi (mpslinalg/svd/c.py, ``jacobi_lanes``): a batch's matrices
run 8 (float32/complex64) or 4 (float64/complex128) at a time, one per SIMD lane; a batch of one
runs the one-matrix kernel (``jacobi``, de Rijk's pivoting).

Thresholds as tests/svd/test_svd_c.py (LAPACK's ``xDRVBD`` ratios below 30 with ``u = 2^-24`` /
``2^-53``). Lane independence is exact: a lane stops rotating after its own first sweep without a
significant rotation, so a matrix's bits cannot depend on the other matrices of its group.
"""

from __future__ import annotations

import importlib

import pytest
import torch
from helpers import gaussian
from svd.harness import assert_svd_ratios

import mpslinalg as LA
from reference.metrics import unit_roundoff

svd_mod = importlib.import_module("mpslinalg.svd")
svd_c = importlib.import_module("mpslinalg.svd.c")

THRESHOLD = 30.0
HOST = [torch.float32, torch.float64, torch.complex64, torch.complex128]
LANES = {torch.float32: 8, torch.complex64: 8, torch.float64: 4, torch.complex128: 4}

pytestmark = pytest.mark.skipif(svd_c.SVD_C.compiler() is None, reason="no C compiler (clang >= 17) for the C kernel")


def _assert_svd(A, U, S, Vh):
    assert_svd_ratios(A, U, S, Vh, THRESHOLD)


@pytest.mark.parametrize("dtype", HOST, ids=str)
@pytest.mark.parametrize("shape", [(3, 3), (9, 8), (8, 9), (33, 33), (40, 17), (17, 40), (5, 1)], ids=str)
def test_lapack_ratios_lanes_and_single(dtype, shape):
    # a batch that fills one group and leaves a partial one (unused lanes), and one matrix alone
    B = LANES[dtype] + 3
    A = gaussian((B, *shape), dtype, 11)
    A0 = A.clone()
    for full in (False, True):
        U, S, Vh = LA.svd(A, full_matrices=full)
        _assert_svd(A, U, S, Vh)
        U1, S1, Vh1 = LA.svd(A[2], full_matrices=full)  # batch of one: the one-matrix kernel
        _assert_svd(A[2], U1, S1, Vh1)
        k = min(shape)
        # both kernels are backward stable: the same σ to a few k·u·σ₁ (Weyl)
        assert float((S1 - S[2]).abs().max()) <= THRESHOLD * k * unit_roundoff(dtype) * float(S[2, 0])
    assert torch.equal(A, A0)


@pytest.mark.parametrize("dtype", HOST, ids=str)
def test_a_matrix_gets_the_same_bits_in_any_lane(dtype):
    # lanes are independent: permuting the batch (other neighbours, other lane, other group, a
    # partial group) permutes the outputs exactly
    B = 2 * LANES[dtype] + 1
    A = gaussian((B, 12, 10), dtype, 12)
    A[3] = 0  # a zero matrix and a rank-deficient one share groups with the others
    A[5, :, 4:] = 0
    perm = torch.randperm(B, generator=torch.Generator().manual_seed(0))
    U, S, Vh = LA.svd(A)
    Up, Sp, Vhp = LA.svd(A[perm])
    assert torch.equal(Sp, S[perm]) and torch.equal(Up, U[perm]) and torch.equal(Vhp, Vh[perm])
    torch.testing.assert_close(LA.svdvals(A[perm]), S[perm], rtol=0, atol=0)  # same kernel without V
    _assert_svd(A, U, S, Vh)


@pytest.mark.parametrize("dtype", HOST, ids=str)
def test_nonfinite_and_unconverged_lanes_keep_their_own_info(dtype, monkeypatch):
    # one group holding a NaN matrix, an already diagonal one (no rotation: converged in one
    # sweep) and random ones (not orthogonal after one sweep): info 1 / 0 / 2 per lane
    A = gaussian((LANES[dtype], 16, 16), dtype, 13)
    A[1, 3, 4] = float("nan")
    A[2] = torch.diag(torch.arange(16, 0, -1, dtype=torch.float64)).to(dtype)
    monkeypatch.setattr(svd_mod.TUNING, "max_sweeps", 1)
    U, S, Vh, info = LA.svd_ex(A)
    want = [2] * LANES[dtype]
    want[1], want[2] = 1, 0
    assert info.tolist() == want
    assert torch.isnan(S[1]).all() and torch.isnan(U[1]).all() and torch.isnan(Vh[1]).all()
    assert torch.equal(S[2], torch.arange(16, 0, -1, dtype=S.dtype))
    monkeypatch.setattr(svd_mod.TUNING, "max_sweeps", 30)
    assert LA.svd_ex(A).info.tolist() == [0, 1] + [0] * (LANES[dtype] - 2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
def test_tiny_columns_in_lanes_are_relatively_accurate(dtype):
    # columns below 2^-450 take the lane kernel's scaled dot products and norms; a batch of four
    # (one group) with the small singular values in different columns of each matrix
    n = 5
    d = torch.tensor([1.0, 1e-80, 1e-160, 1e-200, 1e-250], dtype=torch.float64)
    Q, _ = torch.linalg.qr(gaussian((4, 7, n), dtype, 14))
    cols = torch.stack([torch.roll(d, k) for k in range(4)])
    A = Q * cols[:, None, :].to(dtype)
    S = LA.svdvals(A)
    u = unit_roundoff(dtype)
    rel = ((S - d) / d).abs().max()
    assert float(rel) < THRESHOLD * n * u, float(rel)
    U, S2, Vh = LA.svd(A, full_matrices=False)
    _assert_svd(A, U, S2, Vh)


def test_graded_relative_accuracy_in_lanes():
    # two-sided graded A = D1 B D2 (B well conditioned): every σ to c·κ(B)·u relative (Demmel &
    # Veselić), for each matrix of a batch that fills a float32 group
    n, B = 8, 8
    Bm = gaussian((B, n, n), torch.float64, 15)
    kB = float(torch.linalg.cond(Bm).max())
    g = torch.logspace(0, -3, n, dtype=torch.float64)
    A = (g[:, None] * Bm * g[None, :]).flip(-2)
    ref = torch.linalg.svdvals(A)  # σ_min/σ_max ~ 1e-6: float64 LAPACK to 1e-10 relative
    S = LA.svdvals(A.to(torch.float32)).double()
    rel = float(((S - ref) / ref).abs().max())
    assert rel < THRESHOLD * kB * unit_roundoff(torch.float32), (rel, kB)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
@pytest.mark.parametrize("shift", range(5))
def test_tiny_columns_one_matrix_any_order(dtype, shift):
    # the one-matrix kernel on the same spectra in every column order: a pair of tiny columns
    # with different powers of two (1e-200 beside 1e-250) was once rotated by the angle of the
    # columns scaled apart, which never converged (info 2, σ wrong by 1e49 for complex128)
    n = 5
    d = torch.tensor([1.0, 1e-80, 1e-160, 1e-200, 1e-250], dtype=torch.float64)
    Q, _ = torch.linalg.qr(gaussian((7, n), dtype, 14))
    A = Q * torch.roll(d, shift).to(dtype)
    U, S, Vh, info = LA.svd_ex(A, full_matrices=False)
    assert int(info) == 0
    rel = ((S - d) / d).abs().max()
    assert float(rel) < THRESHOLD * n * unit_roundoff(dtype), float(rel)
    _assert_svd(A, U, S, Vh)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=str)
def test_above_the_jacobi_order_lapack_with_the_family_rules(dtype):
    # above TUNING.jacobi_max the CPU takes LAPACK's SVD of A: in LAPACK's safe range A itself
    # (torch.linalg's bits; svdvals straight from the front door), outside it A scaled by a power of
    # two (the same digits at 2^±100, where xGESDD's own scaling would round), a non-finite matrix
    # info 1 and NaN (torch raises)
    n = svd_mod.TUNING.jacobi_max["cpu"] + 3
    A = gaussian((2, n + 2, n), dtype, 16)
    torch.testing.assert_close(LA.svdvals(A), torch.linalg.svdvals(A), rtol=0, atol=0)
    S = LA.svdvals(A)
    for s in (2.0**100, 2.0**-100):
        torch.testing.assert_close(LA.svdvals(A * s), S * s, rtol=0, atol=0)
    S0 = LA.svd_ex(A[:1], full_matrices=False).S  # with vectors: xGESDD's other bits
    A[1, 0, 0] = float("inf")
    U, S2, Vh, info = LA.svd_ex(A, full_matrices=False)
    assert info.tolist() == [0, 1] and torch.isnan(S2[1]).all() and torch.isnan(U[1]).all()
    torch.testing.assert_close(S2[:1], S0, rtol=0, atol=0)  # the finite matrix: not scaled
    _assert_svd(A[:1], U[:1], S2[:1], Vh[:1])
