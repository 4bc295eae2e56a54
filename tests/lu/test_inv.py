"""``inv`` and ``inv_ex`` on every backend, complex64 included (a gap of ``torch.linalg.inv`` on mps).

Pass mark: LAPACK's ``xGET03`` ratio ``‖I − XA‖₁/(n ‖A‖₁ ‖X‖₁ u)`` (``reference.metrics.inverse_ratio``)
below 30 (``TESTING/ctest.in``). Each column of ``X`` is an LU solve of ``A x = e_j``, backward
stable with ``|ΔA_j| <= γ_{3n}|L||U|`` (Higham, *Accuracy and Stability*, Thm 9.4), so
``‖I − XA‖₁ <= ‖X‖₁ max_j ‖ΔA_j‖₁ = O(n ‖A‖₁ ‖X‖₁ u)`` for small growth (Higham §14.3).
"""

from __future__ import annotations

import pytest
import torch

import mpslinalg as LA
from reference import matrices, metrics

PASS = metrics.PASS_RATIO


@pytest.mark.parametrize("n", [3, 9, 33, 50])
def test_inverse_ratio(backend, backend_device, gpu_dtype, n):
    A = matrices.random(n, n, batch=(2,), dtype=gpu_dtype, seed=n)
    A0 = A.clone()
    X, info = LA.inv_ex(A.to(backend_device))
    assert torch.equal(A, A0)
    assert torch.equal(info.cpu(), torch.zeros(2, dtype=torch.int32))
    assert float(metrics.inverse_ratio(A, X.cpu()).max()) < PASS
    Y = LA.inv(A.to(backend_device)).cpu()
    assert float(metrics.inverse_ratio(A, Y).max()) < PASS


@pytest.mark.parametrize("kind", ["ill", "tiny", "huge"])
def test_hard_inverse(backend, backend_device, gpu_dtype, kind):
    n = 24
    if kind == "ill":
        A = matrices.with_condition(n, 1e5, batch=(2,), dtype=gpu_dtype, seed=1)
    else:
        A = matrices.scaled(matrices.random(n, n, batch=(2,), dtype=gpu_dtype, seed=2),
                            1e-30 if kind == "tiny" else 1e30)
    X = LA.inv(A.to(backend_device)).cpu()
    assert bool(torch.isfinite(X).all())
    assert float(metrics.inverse_ratio(A, X).max()) < PASS


def test_singular(backend, backend_device):
    A = matrices.random(12, 12, batch=(2,), dtype=torch.complex64, seed=4)
    A[1, :, 6] = 0
    X, info = LA.inv_ex(A.to(backend_device))
    assert info.tolist() == [0, 7]
    with pytest.raises(torch.linalg.LinAlgError, match=r"Batch element 1.*diagonal element 7"):
        LA.inv(A.to(backend_device))
    with pytest.raises(torch.linalg.LinAlgError, match="Batch element 1"):
        LA.inv_ex(A.to(backend_device), check_errors=True)


def test_views_nan_empty(backend, backend_device):
    A = matrices.random(10, 10, batch=(2,), dtype=torch.complex64, seed=5).to(backend_device)
    for view in (A.mT, A.conj(), A.mH):
        assert torch.equal(LA.inv(view), LA.inv(view.resolve_conj().contiguous()))
    B = A.clone()
    B[0, 2, 3] = float("nan")
    X, _ = LA.inv_ex(B)
    assert bool(torch.isnan(X[0]).any())
    assert float(metrics.inverse_ratio(A[1].cpu(), X[1].cpu())) < PASS  # other batch elements unaffected
    for shape in [(0, 5, 5), (3, 0, 0)]:
        assert LA.inv(torch.randn(shape).to(backend_device)).shape == shape


def test_bad_input():
    with pytest.raises(ValueError, match="square"):
        LA.inv(torch.randn(3, 4))
    with pytest.raises(TypeError):
        LA.inv(torch.ones(3, 3, dtype=torch.int32))
