"""The kernels of ``metal/cholesky.metal`` in the emulator through the family's own launch code
(``mpslinalg.cholesky.kernels._MetalKernels``, its ``load_library`` patched to add the emulator's
thread order and guard pages: ``helpers.InOrder``), in every thread order, float32 and complex64.

Bounds (derived in test_cholesky_accuracy.py): LAPACK's ``xPOT01`` ratio < 30 and the scale-free
componentwise bound ``|A − L Lᴴ|_ij <= γ/(1−γ) √(a_ii a_jj)``, ``γ = γ_{n+1}`` (complex:
``γ_{√2 (n+2)}``), Higham Thm 10.3. Exact properties: ``info`` is the failing order of matrices
built to fail there; a failed matrix's columns from ``info - 1`` on are zero (``cholesky_small``);
zeros above the diagonal; the unread triangle and everything outside a panel's block untouched;
matrices past the batch neither read nor written (guard pages trap an access past a buffer).
"""

from __future__ import annotations

import importlib
import math

import pytest
import torch
from helpers import ORDER_IDS, ORDERS, InOrder, require_emulator

from mpslinalg.kernels import load_library
from reference import matrices, metrics

kern = importlib.import_module("mpslinalg.cholesky.kernels")
DTYPES = [torch.float32, torch.complex64]
DID = ["float32", "complex64"]


@pytest.fixture(scope="module")
def lib():
    require_emulator()
    return load_library("cholesky", "cpu")


@pytest.fixture
def metal(lib, monkeypatch):
    def make(dtype, order, seed):
        monkeypatch.setattr(kern, "load_library", lambda family, device: InOrder(lib, order, seed, guard=True))
        return kern._MetalKernels(torch.device("cpu"), dtype)

    return make


def _bound(n, dtype):
    u = metrics.unit_roundoff(dtype)
    k = math.sqrt(2) * (n + 2) if dtype.is_complex else n + 1
    g = k * u / (1 - k * u)
    return g / (1 - g)


def _failing(n, k, dtype, seed):
    """Leading minors positive below order k, the pivot of order k equal to -l_kk² (exactly)."""
    wide = torch.complex128 if dtype.is_complex else torch.float64
    L0 = torch.linalg.cholesky(matrices.positive_definite(n, 10.0, dtype=wide, seed=seed))
    A = L0 @ L0.mH
    A[k - 1, k - 1] -= 2 * L0[k - 1, k - 1] ** 2
    return A.to(dtype)


def _batch(n, dtype, count, seed):
    """``count`` positive-definite matrices, every third one failing at a different order."""
    mats = []
    for b in range(count):
        if b % 3 == 1:
            mats.append(_failing(n, 1 + (b * 7) % n, dtype, seed + b))
        else:
            mats.append(matrices.positive_definite(n, 1e3, dtype=dtype, seed=seed + b))
    return torch.stack(mats)


@pytest.mark.parametrize("order,seed", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_cholesky_small(metal, order, seed, dtype):
    k = metal(dtype, order, seed)
    for n in (1, 3, 8, 13, 16, 31, 33, 64):
        per = kern.small_per_group(kern.small_width(n), dtype)
        count = per + 1 if per > 1 else 2  # the last threadgroup partly empty
        A = _batch(n, dtype, count, seed=10 * n)
        unread = torch.ones(n, n, dtype=torch.bool).triu(1)
        L = A.masked_fill(unread, float("nan"))  # the strict upper triangle is never read
        info = torch.full((count,), -7, dtype=torch.int32)  # written for every matrix
        k.small(L, info)
        want = [1 + (b * 7) % n if b % 3 == 1 else 0 for b in range(count)]
        assert info.tolist() == want, (n, info.tolist())
        assert torch.equal(L.triu(1), torch.zeros_like(L))
        for b in range(count):
            m = want[b] - 1 if want[b] else n
            assert torch.equal(L[b, :, m:], torch.zeros_like(L[b, :, m:]))  # cleared after a failure
            if m:
                Ab, Lb = A[b, :m, :m], L[b, :m, :m]
                assert float(metrics.cholesky_ratio(Ab, Lb)) < metrics.PASS_RATIO
                assert float(metrics.cholesky_componentwise(Ab, Lb)) <= _bound(m, dtype)


@pytest.mark.parametrize("order,seed", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_cholesky_panel(metal, order, seed, dtype):
    """potf2 of the diagonal block [o, o + w) of a 70 x 70 matrix: the block's lower triangle is
    factored in place, info is offset by o and an earlier failure is kept, nothing else moves."""
    k = metal(dtype, order, seed)
    n = 70
    for o, w in ((0, 1), (5, 17), (30, 32), (6, 64)):
        fail = 1 + w // 2
        A = matrices.positive_definite(n, 1e3, batch=(3,), dtype=dtype, seed=7 + o)
        A[1, o:o + w, o:o + w] = _failing(w, fail, dtype, seed=8 + o)  # the block fails at its order `fail`
        A[2, o:o + w, o:o + w] = _failing(w, fail, dtype, seed=9 + o)
        L = A.clone()
        info = torch.tensor([0, 0, 3], dtype=torch.int32)  # matrix 2: an earlier failure at order 3
        k.panel(L, info, o, w)
        keep = torch.ones(n, n, dtype=torch.bool)
        keep[o:o + w, o:o + w] = torch.ones(w, w, dtype=torch.bool).triu(1)
        assert torch.equal(L[:, keep], A[:, keep])
        assert info.tolist() == [0, o + fail, 3]
        Ab, Lb = A[0, o:o + w, o:o + w], L[0, o:o + w, o:o + w].tril()
        assert float(metrics.cholesky_ratio(Ab, Lb)) < metrics.PASS_RATIO
        assert float(metrics.cholesky_componentwise(Ab, Lb)) <= _bound(w, dtype)
        m = fail - 1  # the failed block's first fail - 1 columns are those of its factor
        if m:
            Ab, Lb = A[1, o:o + m, o:o + m], L[1, o:o + m, o:o + m].tril()
            assert float(metrics.cholesky_ratio(Ab, Lb)) < metrics.PASS_RATIO


@pytest.mark.parametrize("order,seed", ORDERS[:2], ids=ORDER_IDS[:2])
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_blocked_through_the_algorithm(metal, monkeypatch, order, seed, dtype):
    """The blocked path on the kernel backends (cholesky_panel + the triangular family's kernels +
    matrix products) with the launches in each order: the accuracy bounds and the failing order."""
    from mpslinalg.cholesky import TUNING, cholesky_ex_impl
    from mpslinalg.kernels import use_backend

    metal(dtype, order, seed)  # patches the family's load_library
    monkeypatch.setattr(TUNING, "small_max", 8)
    monkeypatch.setattr(TUNING, "nb", 8)
    A = torch.stack([matrices.positive_definite(27, 1e3, dtype=dtype, seed=1), _failing(27, 19, dtype, seed=2)])
    with use_backend("emulator"):
        L, info = cholesky_ex_impl(A, False)
    assert info.tolist() == [0, 19]
    assert float(metrics.cholesky_ratio(A[0], L[0])) < metrics.PASS_RATIO
    assert float(metrics.cholesky_componentwise(A[0], L[0])) <= _bound(27, dtype)
    assert float(metrics.cholesky_ratio(A[1, :18, :18], L[1, :18, :18])) < metrics.PASS_RATIO
    assert torch.equal(L[1, :, 18:], torch.zeros_like(L[1, :, 18:]))


def test_launch_shapes():
    """Matrices per threadgroup as the kernel computes them (CHOL_PER): 16 KiB of tiles, 1 to 8."""
    assert [kern.small_per_group(w, torch.float32) for w in (8, 16, 32, 64)] == [8, 8, 4, 1]
    assert [kern.small_per_group(w, torch.complex64) for w in (8, 16, 32, 64)] == [8, 8, 2, 1]
    assert [kern.small_width(n) for n in (1, 8, 9, 16, 17, 33, 64)] == [8, 8, 16, 16, 32, 64, 64]
