"""``lu_solve``, ``solve`` and ``solve_ex`` on every backend.

Pass marks (derived, not tuned):

* **Backward error**: LAPACK's ``xGET02`` ratio ``max_j ‖b_j − A x_j‖₁/(‖A‖₁ ‖x_j‖₁ u)``
  (``reference.metrics.solve_ratio``) below 30 (``TESTING/ctest.in``): LU with partial pivoting
  followed by two substitutions is backward stable, ``(A + ΔA) x̂ = b`` with
  ``|ΔA| <= γ_{3n} |L||U|`` (Higham, *Accuracy and Stability*, Thm 9.4), whatever κ(A).
* **Forward error** vs mpmath (``reference.mp.solve``, 50 digits): from a residual ratio ρ < 30,
  ``‖x − x̂‖₁ <= ‖A⁻¹‖₁ ‖r‖₁ <= ρ κ₁(A) u ‖x̂‖₁``; with ``‖v‖_∞ <= ‖v‖₁ <= n ‖v‖_∞`` the entrywise
  max-norm error of ``reference.metrics.forward_error`` is at most ``30 n κ₁(A) u`` (κ₁ measured in
  float64), up to a factor ``1 + O(κu)``, taken as 2.
"""

from __future__ import annotations

import pytest
import torch
from helpers import gaussian

import mpslinalg as LA
from reference import lapack, matrices, metrics
from reference import mp as rmp

PASS = metrics.PASS_RATIO


@pytest.mark.parametrize("left", [True, False], ids=["left", "right"])
@pytest.mark.parametrize("adjoint", [False, True], ids=["A", "AH"])
@pytest.mark.parametrize("n", [9, 40])
def test_lu_solve_ratio(backend, backend_device, gpu_dtype, left, adjoint, n):
    A = matrices.random(n, n, batch=(2,), dtype=gpu_dtype, seed=n)
    B = gaussian((2, n, 3) if left else (2, 3, n), gpu_dtype, n + 1)
    LU, piv = torch.linalg.lu_factor(A)
    X = LA.lu_solve(LU.to(backend_device), piv.to(backend_device), B.to(backend_device), left=left,
                    adjoint=adjoint).cpu()
    opA = A.mH if adjoint else A
    assert float(metrics.solve_ratio(opA, X, B, left=left).max()) < PASS


@pytest.mark.parametrize("n", [5, 24, 48])
def test_solve_ratio_and_info(backend, backend_device, gpu_dtype, n):
    A = matrices.random(n, n, batch=(3,), dtype=gpu_dtype, seed=2 * n)
    B = gaussian((3, n, 4), gpu_dtype, 3)
    A0, B0 = A.clone(), B.clone()
    X, info = LA.solve_ex(A.to(backend_device), B.to(backend_device))
    assert torch.equal(A, A0) and torch.equal(B, B0)
    assert torch.equal(info.cpu(), torch.zeros(3, dtype=torch.int32))
    assert float(metrics.solve_ratio(A, X.cpu(), B).max()) < PASS
    Xr = LA.solve(A.to(backend_device), B.mT.to(backend_device), left=False).cpu()
    assert float(metrics.solve_ratio(A, Xr, B.mT, left=False).max()) < PASS


@pytest.mark.parametrize("kappa", [1e2, 1e5])
def test_forward_error_vs_mpmath(backend, backend_device, gpu_dtype, kappa):
    n = 20
    A = matrices.with_condition(n, kappa, batch=(2,), dtype=gpu_dtype, seed=int(kappa))
    B = gaussian((2, n, 2), gpu_dtype, 5)
    X = LA.solve(A.to(backend_device), B.to(backend_device)).cpu()
    Xref = rmp.solve(A, B)
    k1 = torch.linalg.cond(A.to(torch.complex128 if gpu_dtype.is_complex else torch.float64), p=1)
    bound = 2 * 30 * n * k1 * metrics.unit_roundoff(gpu_dtype)
    err = metrics.forward_error(X, Xref)
    assert bool((err <= bound).all()), (err, bound)


def test_vector_and_broadcast_rhs(backend, backend_device):
    A = matrices.random(12, 12, batch=(2, 1), dtype=torch.float32, seed=1).to(backend_device)
    b = gaussian((12,), torch.float32, 2).to(backend_device)
    x = LA.solve(A, b)
    ref = torch.linalg.solve(A.cpu(), b.cpu())
    assert x.shape == ref.shape == (2, 1, 12)
    B = gaussian((3, 12, 2), torch.float32, 4).to(backend_device)
    X, info = LA.solve_ex(A, B)
    R = torch.linalg.solve_ex(A.cpu(), B.cpu())
    assert X.shape == R.result.shape and info.shape == R.info.shape
    Ae, Be = A.cpu().expand(2, 3, 12, 12), B.cpu().expand(2, 3, 12, 2)
    assert float(metrics.solve_ratio(Ae, X.cpu(), Be).max()) < PASS
    # batch of vectors: B.shape == A.shape[:-1]
    bv = gaussian((2, 1, 12), torch.float32, 6).to(backend_device)
    assert LA.solve(A, bv).shape == torch.linalg.solve(A.cpu(), bv.cpu()).shape


def test_singular_raises_with_batch_element(backend, backend_device):
    A = matrices.random(10, 10, batch=(3,), dtype=torch.complex64, seed=3)
    A[2, :, 4] = 0
    B = gaussian((3, 10, 1), torch.complex64, 1)
    X, info = LA.solve_ex(A.to(backend_device), B.to(backend_device))
    assert info.tolist() == [0, 0, 5]
    with pytest.raises(torch.linalg.LinAlgError, match="Batch element 2"):
        LA.solve(A.to(backend_device), B.to(backend_device))
    with pytest.raises(torch.linalg.LinAlgError, match="Batch element 2"):
        LA.solve_ex(A.to(backend_device), B.to(backend_device), check_errors=True)


def test_small_matrices_are_routed_and_accurate(backend, backend_device):
    A = matrices.random(3, 3, batch=(50,), dtype=torch.float32, seed=8)
    B = gaussian((50, 3, 2), torch.float32, 9)
    X = LA.solve(A.to(backend_device), B.to(backend_device)).cpu()
    assert float(metrics.solve_ratio(A, X, B).max()) < PASS


def test_float64_complex128_cpu():
    for dtype in (torch.float64, torch.complex128):
        A = matrices.random(30, 30, batch=(2,), dtype=dtype, seed=1)
        B = gaussian((2, 30, 3), dtype, 2)
        X = LA.solve(A, B)
        assert float(metrics.solve_ratio(A, X, B).max()) < PASS
        assert float(metrics.forward_error(X, lapack.solve(A, B)).max()) < 1e-10


def test_empty(backend, backend_device):
    for a, b in [((0, 3, 3), (0, 3, 2)), ((2, 0, 0), (2, 0, 3)), ((2, 3, 3), (2, 3, 0))]:
        X = LA.solve(torch.randn(a).to(backend_device), torch.randn(b).to(backend_device))
        assert X.shape == torch.linalg.solve(torch.randn(a), torch.randn(b)).shape


def test_bad_input():
    A = torch.randn(4, 4)
    with pytest.raises(ValueError, match="square"):
        LA.solve(torch.randn(4, 3), torch.randn(4, 1))
    with pytest.raises(ValueError, match="B must have 4 rows"):
        LA.solve(A, torch.randn(3, 2))
    with pytest.raises(TypeError, match="same dtype"):
        LA.solve(A, torch.randn(4, 2, dtype=torch.complex64))
    with pytest.raises(ValueError, match="batch"):
        LA.solve(torch.randn(2, 4, 4), torch.randn(3, 4, 1))
    LU, piv = LA.lu_factor(A)
    with pytest.raises(TypeError, match="int32"):
        LA.lu_solve(LU, piv.long(), torch.randn(4, 1))
    with pytest.raises(ValueError, match="pivots of shape"):
        LA.lu_solve(LU, piv[:3], torch.randn(4, 1))
