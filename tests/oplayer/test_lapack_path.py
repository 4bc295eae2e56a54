"""The CPU LAPACK path (issue 34.7, ``table.LAPACK``): SciPy's xGETRF / xGESV / xGESDD on zero-copy
views of one square contiguous CPU matrix. Taken only where the table says, with torch.linalg's
results (within LAPACK's own bounds) and types; skipped cleanly without SciPy, for batches, for
tensors that record autograd, for conj views; singular inputs raise torch's errors as before."""

import pytest
import torch

import mpslinalg as M
from mpslinalg.lu import lapack as lu_lapack
from mpslinalg.oplayer import table

pytest.importorskip("scipy")

U32 = 2.0**-24  # float32/complex64 unit roundoff
N = 256  # inside every region of table.LAPACK (lu_factor complex64 starts at 256)


@pytest.fixture
def calls(monkeypatch, routing_table):
    """Count the LU family's LAPACK calls (the SVD's is seen by its result's type: numpy-backed)."""
    seen = {"inv": 0, "lu_factor_ex": 0}
    for name in seen:
        real = getattr(lu_lapack, name)

        def spy(*args, _real=real, _name=name):
            seen[_name] += 1
            return _real(*args)

        monkeypatch.setattr(lu_lapack, name, spy)
    return seen


def _matrix(dtype, n=N, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, n, dtype=dtype, generator=g)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_inv_and_lu_factor_take_lapack_with_torchs_results(dtype, calls):
    A = _matrix(dtype)
    A0 = A.clone()
    X = M.inv(A)
    Xe = M.inv_ex(A)
    LU, piv = M.lu_factor(A)
    LUe = M.lu_factor_ex(A)
    assert calls == {"inv": 2, "lu_factor_ex": 2}
    assert torch.equal(A, A0)  # never modified
    assert type(Xe) is torch.return_types.linalg_inv_ex and int(Xe.info) == 0
    assert type(LUe) is torch.return_types.linalg_lu_factor_ex and int(LUe.info) == 0
    assert piv.dtype == torch.int32 and LU.dtype == dtype and X.dtype == dtype
    # LAPACK's inverse test ratio ‖I − XA‖₁ / (n ‖A‖₁ ‖X‖₁ u) <= 30 (xGET03's threshold)
    I = torch.eye(N, dtype=dtype)
    norm = torch.linalg.matrix_norm
    ratio = norm(I - X @ A, 1) / (N * norm(A, 1) * norm(X, 1) * U32)
    assert ratio <= 30
    # xGET01's ratio of the factorisation ‖P L U − A‖₁ / (n ‖A‖₁ u) <= 30
    P, L, Uf = torch.lu_unpack(LU, piv)
    assert norm(P @ L @ Uf - A, 1) / (N * norm(A, 1) * U32) <= 30
    # partial pivoting picks the same rows as torch's LAPACK (no ties in Gaussian data)
    assert torch.equal(piv, torch.linalg.lu_factor(A).pivots)
    assert torch.equal(LUe.LU, LU) and torch.equal(Xe.inverse, X)


def test_svdvals_takes_lapack_with_torchs_values(routing_table):
    A = _matrix(torch.float32)
    S = M.svdvals(A)
    St = torch.linalg.svdvals(A)
    assert S.shape == St.shape and S.dtype == St.dtype
    # both are xGESDD's values: backward stable, |σ − σ'| <= n u σ₁ (times the threshold 30)
    assert (S - St).abs().max() <= 30 * N * U32 * St[0]
    assert table.lapack_first("svdvals", A) is not None


@pytest.mark.parametrize("make", [
    lambda: _matrix(torch.float32).expand(2, N, N),  # a batch
    lambda: _matrix(torch.complex64).conj(),  # a conj view
    lambda: _matrix(torch.float32).mT,  # not contiguous
    lambda: _matrix(torch.float32, n=64),  # below the region
    lambda: _matrix(torch.float64),  # a dtype outside the table
    lambda: _matrix(torch.float32).requires_grad_(),  # autograd records
])
def test_outside_the_table_torch_runs(make, calls):
    A = make()
    X = M.inv(A)
    M.lu_factor(A)
    assert calls == {"inv": 0, "lu_factor_ex": 0}
    # one matrix at a time: torch's own batched CPU inverse races at >1 thread (lu/torch_cpu.py)
    expected = torch.stack([torch.linalg.inv(a) for a in A.reshape(-1, *A.shape[-2:])]).reshape(A.shape)
    torch.testing.assert_close(X, expected)
    with torch.no_grad():  # a leaf that requires grad, under no_grad: nothing records, LAPACK may run
        M.inv(A)
    assert calls["inv"] == (1 if A.dim() == 2 and A.requires_grad else 0)


def test_without_scipy_torch_runs(monkeypatch, calls):
    monkeypatch.setattr(table, "_scipy_lapack", [None])
    A = _matrix(torch.float32)
    torch.testing.assert_close(M.inv(A), torch.linalg.inv(A))
    torch.testing.assert_close(M.svdvals(A), torch.linalg.svdvals(A))
    assert calls == {"inv": 0, "lu_factor_ex": 0}


def test_ours_always_skips_it(calls):
    assert table.lapack_first("inv_ex", _matrix(torch.float32)) is not None
    with table.ours_always():
        assert table.lapack_first("inv_ex", _matrix(torch.float32)) is None


def test_singular_raises_torchs_error(calls):
    S = torch.zeros(N, N)
    S[0, 0] = 1
    with pytest.raises(torch.linalg.LinAlgError):
        M.inv(S)
    with pytest.raises(torch.linalg.LinAlgError):
        M.lu_factor(S)
    assert int(M.inv_ex(S).info) == 2  # torch's info (the LAPACK path returned None)
    assert int(M.lu_factor_ex(S).info) == 2  # LAPACK's info, as torch's
    assert calls["lu_factor_ex"] == 2  # lu_factor and lu_factor_ex took the path, then torch raised
