"""``metal/ldl.metal``'s ``ldl_small`` through the family's own launch code (``_MetalKernels.small``)
in the emulator, in every thread order (a missing barrier shows in some).

Bounds: ``ldl_small`` is LAPACK ``sytf2``/``hetf2``. Its pivots must equal LAPACK's on the float64
of the rounded input (torch.linalg.ldl_factor_ex on the CPU; the seeded matrices below have no
near-tie in a pivot test, which the float64 run would resolve differently) and its ``info`` too;
the factorization must pass LAPACK's ``xSYT01`` ratio ``‖PAPᵀ − LDLᴴ‖₁/(n‖A‖₁u) < 30``
(u = 2⁻²⁴) with the growth factor ``‖|L||D||L|ᵀ‖/‖A‖`` of these matrices below ``2n + 4`` (stated, so that the pass
mark means something) (Bunch–Kaufman's
backward error is ``p(n) u`` times that growth: Higham, Accuracy and Stability, Thm 11.3).
"""

from __future__ import annotations

import importlib

import pytest
import torch
from helpers import ORDER_IDS, ORDERS, InOrder, gaussian, require_emulator

from mpslinalg.kernels import load_library
from reference import metrics

kern = importlib.import_module("mpslinalg.ldl.kernels")


@pytest.fixture(scope="module")
def lib():
    require_emulator()
    return load_library("ldl", "cpu")


def _matrices(n: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Four kinds: Gaussian; zero diagonal (2x2 blocks); a zero row/column (info); a 2x2 block
    chosen at the last possible step."""
    A = gaussian((4, n, n), dtype, seed)
    A[1].diagonal().zero_()
    if n > 2:
        A[2, :, 1] = 0
        A[2, 1, :] = 0
    A[3].diagonal().mul_(1e-3)
    return A


@pytest.mark.parametrize("order,seed", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["float32", "complex64"])
@pytest.mark.parametrize("hermitian", [False, True], ids=["sym", "herm"])
def test_ldl_small_orders(lib, monkeypatch, order, seed, dtype, hermitian):
    monkeypatch.setattr(kern, "load_library", lambda *a: InOrder(lib, order, seed))
    for n in (1, 5, 13):
        A = _matrices(n, dtype, 100 + n)
        k = kern._MetalKernels(A.device, dtype)
        LD = A.clone()
        piv = torch.full((4, n), -99, dtype=torch.int32)
        info = torch.full((4,), -99, dtype=torch.int32)
        k.small(LD, piv, info, hermitian)
        ref = torch.linalg.ldl_factor_ex(A.to(torch.complex128 if dtype.is_complex else torch.float64),
                                         hermitian=hermitian)
        assert torch.equal(piv, ref.pivots)
        assert torch.equal(info, ref.info)
        assert torch.equal(LD.triu(1), torch.zeros_like(LD))  # zero above the diagonal
        ok = ref.info == 0
        ratio, growth = metrics.ldl_ratio(A[ok], LD[ok], piv[ok], hermitian=hermitian)
        assert float(growth.max()) < 2 * n + 4
        assert float(ratio.max()) < metrics.PASS_RATIO


def test_ldl_small_full_tile(lib, monkeypatch):
    """The largest float32 order (64: the whole 16 KiB tile) in shuffled order."""
    monkeypatch.setattr(kern, "load_library", lambda *a: InOrder(lib, "shuffle", 3))
    n = 64
    assert kern.small_fits(n, torch.float32) and not kern.small_fits(n + 1, torch.float32)
    A = gaussian((1, n, n), torch.float32, 7)
    LD = A.clone()
    piv, info = torch.empty(1, n, dtype=torch.int32), torch.empty(1, dtype=torch.int32)
    kern._MetalKernels(A.device, torch.float32).small(LD, piv, info, False)
    ref = torch.linalg.ldl_factor_ex(A.double())
    assert torch.equal(piv, ref.pivots) and int(info) == 0
    ratio, growth = metrics.ldl_ratio(A, LD, piv)
    assert float(growth) < 2 * n and float(ratio) < metrics.PASS_RATIO
