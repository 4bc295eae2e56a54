"""``det``'s torch-first path hands a large complex row-major CPU batch to torch.linalg as ``det(A.mT)``.

``det(Aᵀ) = det(A)``; Aᵀ of a row-major batch is the column-major layout LAPACK factors, so torch
skips its transposing copy (``mpslinalg.lu.api._DET_BY_TRANSPOSE``, docs/ops/lu.md). LU of Aᵀ is as
backward stable as LU of A, so the pass mark is the family's (``tests/lu/test_det.py``): with
``PAᵀ + ΔA = LU``, ``‖ΔA‖₁ <= 30 n ‖A‖₁ u`` (the ``xGET01`` ratio), ``|det − det_ref|/|det_ref| <=
30 n² κ₁ u`` to first order (κ₁(Aᵀ) = κ_∞(A) <= n κ₁(A): the bound uses ``max(κ₁, κ_∞)``), times 2
for the second-order terms. Reference: LAPACK in complex128 (its own error ~κ·2^-53, negligible).
"""

from __future__ import annotations

import pytest
import torch

import mpslinalg as LA
from mpslinalg.lu import api
from reference import matrices, metrics


def _bound(A):
    n = A.shape[-1]
    wide = A.to(torch.complex128)
    kappa = torch.maximum(torch.linalg.cond(wide, p=1), torch.linalg.cond(wide, p=float("inf")))
    return 2 * 30 * n * n * kappa * metrics.unit_roundoff(A.dtype)


@pytest.fixture
def det_calls(monkeypatch, routing_table):
    """The strides of the tensors the front door hands to ``torch.linalg.det`` (with the "never
    slower" table in force, as outside the tests)."""
    seen, real = [], torch.linalg.det

    def spy(A, *args, **kwargs):
        seen.append(A.stride())
        return real(A, *args, **kwargs)

    monkeypatch.setattr(torch.linalg, "det", spy)
    return seen


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_large_complex_batch_goes_through_the_transpose(det_calls, dtype):
    n = 64
    A = matrices.with_condition(n, 10.0, batch=(api._DET_BY_TRANSPOSE // (n * n),), dtype=dtype, seed=7).contiguous()
    before = A.clone()
    d = LA.det(A)
    assert det_calls == [A.mT.stride()]
    ref = torch.linalg.det(A.to(torch.complex128))
    assert bool((metrics.relative_error(d, ref) <= _bound(A)).all())
    assert torch.equal(A, before)  # never modified


@pytest.mark.parametrize("make", ["small", "column_major", "real"])
def test_other_calls_keep_their_layout(det_calls, make):
    n = 32
    if make == "small":  # below the threshold: one matrix, measured slower through the transpose
        A = matrices.with_condition(n, 10.0, batch=(1,), dtype=torch.complex64, seed=8).contiguous()
    elif make == "column_major":  # already LAPACK's layout: its transpose would be the one to copy
        A = matrices.with_condition(n, 10.0, batch=(16,), dtype=torch.complex64, seed=9).contiguous().mT
    else:  # float32 gains nothing (docs/ops/lu.md)
        A = matrices.with_condition(n, 10.0, batch=(16,), dtype=torch.float32, seed=10).contiguous()
    d = LA.det(A)
    assert det_calls == [A.stride()]
    wide = torch.complex128 if A.is_complex() else torch.float64
    assert bool((metrics.relative_error(d, torch.linalg.det(A.to(wide))) <= _bound(A)).all())
