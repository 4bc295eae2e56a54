"""The triangular family's conjugate views of ``B`` (issue 18's mutation gate:
``tri-trsm-conj-b-dropped`` survived). Metal binds a tensor's storage and ignores its conj bit, so
``trsm_small`` takes a ``conj(B)`` flag instead of a resolved copy; nothing passed a conjugate view
of ``B`` to it.

Bound: the solve with ``B.conj()`` (a view) and with its resolved copy run the same kernel on the
same values (the kernel conjugates what it reads, the copy holds the conjugates), so the two
solutions are bitwise equal; and the solution passes LAPACK's ``xTRT02`` ratio < 30.
"""

from __future__ import annotations

import pytest
import torch
from helpers import require_emulator

import mpslinalg as LA
from reference import matrices, metrics


@pytest.mark.parametrize("backend", ["torch", "emulator"])
@pytest.mark.parametrize("n", [16, 40])  # trsm_small on the kernel backends (n <= 64)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
def test_conjugate_view_of_B(backend, n, upper, left):
    if backend == "emulator":
        require_emulator()
    A = matrices.triangular(n, upper=upper, batch=(2,), dtype=torch.complex64, seed=n)
    shape = (2, n, 3) if left else (2, 3, n)
    Bc = matrices.random(*shape[1:], batch=(2,), dtype=torch.complex64, seed=n + 1).conj()
    assert Bc.is_conj()
    with LA.use_backend(backend):
        X = LA.solve_triangular(A, Bc, upper=upper, left=left)
        Xr = LA.solve_triangular(A, Bc.resolve_conj(), upper=upper, left=left)
    assert torch.equal(X, Xr)
    ratio = metrics.triangular_residual_ratio(A, X, Bc.resolve_conj(), upper=upper, left=left)
    assert float(ratio.max()) < metrics.PASS_RATIO
