"""The n <= 4 family's pivot tie rule (issue 18's mutation gate: ``small-pivot-tie-last``,
``small-metal-pivot-tie-last``): partial pivoting takes the FIRST row of largest magnitude, as
LAPACK's i?amax, in the torch program, the generated code and the Metal kernels.

A tie changes only rounding, so the test uses an input whose first-wins elimination is exact while
the last-wins one is not: column 0 of ``A = [[1, 0, 0], [1, 4, 4], [1, 1, 2]]`` ties three ways.
First row wins: the pivots are 1, 4, 1 and every multiplier, update and getri step is a small
dyadic rational (exact in float32), so the computed inverse equals the exact one,
``[[1, 0, 0], [1/2, 1/2, -1], [-3/4, -1/4, 1]]``, bit for bit. Last row wins: the second pivot is
3 and the multiplier -1/3 rounds, so the inverse is off in the last bits. Embedded in a 4 x 4 (a
unit last row/column) for the n = 4 program; complex64 alike (zero imaginary parts).
"""

from __future__ import annotations

import pytest
import torch
from helpers import ORDERS, require_emulator

import mpslinalg
from mpslinalg import small

A3 = torch.tensor([[1.0, 0.0, 0.0], [1.0, 4.0, 4.0], [1.0, 1.0, 2.0]])
X3 = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, -1.0], [-0.75, -0.25, 1.0]])


def _case(n, dtype, batch=5):
    A, X = torch.eye(n), torch.eye(n)
    A[:3, :3], X[:3, :3] = A3, X3
    assert torch.equal(A.double() @ X.double(), torch.eye(n, dtype=torch.float64))  # X is exact
    return A.to(dtype).expand(batch, n, n).contiguous(), X.to(dtype).expand(batch, n, n)


@pytest.mark.parametrize("n", [3, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["float32", "complex64"])
def test_ties_go_to_the_first_row_program_and_kernels(dtype, n):
    A, X = _case(n, dtype)
    assert torch.equal(small.program._program_inv(A)[0], X)
    require_emulator()
    for order in ORDERS:
        for load in ("direct", "staged"):
            assert torch.equal(small.program._kernel_inv(A, load=load, order=order[0], seed=order[1])[0], X)


@pytest.mark.parametrize("backend", ["torch", "emulator"])
@pytest.mark.parametrize("n", [3, 4])
def test_ties_go_to_the_first_row_public_inv(backend, n):
    if backend == "emulator":
        require_emulator()
    A, X = _case(n, torch.float32, batch=300)  # a large batch: the family's batched paths
    with mpslinalg.use_backend(backend):
        Y, info = mpslinalg.inv_ex(A)
    assert torch.equal(Y, X) and not bool(info.any())
