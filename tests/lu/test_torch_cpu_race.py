"""torch's CPU batched getrf races (pytorch/pytorch#142815, mpslinalg/lu/torch_cpu.py): at more than
one thread, a CPU batch of matrices of >= ~150 columns gets wrong factors, errors or hangs from
``torch.linalg.lu_factor``, ``inv``, ``solve``, ``det``, ``slogdet``, ``lu``. mpslinalg's front doors
and ``enable(devices=("cpu",))`` must give correct answers there, on the torch route too.

Every result is checked against LAPACK's test ratios (``xGET01/02/03``, pass mark 30 of
``TESTING/ctest.in``) or against the same op on each matrix alone (a single matrix is not affected);
determinants by ``|d − d_i| <= 30 n u |d_i|`` with ``d_i`` the matrix's own determinant (both are
products of the same LAPACK factorisation's diagonal, backward stable: a relative ``n u`` each)."""

import pytest
import torch

import mpslinalg as M
from mpslinalg.lu import torch_cpu
from reference import metrics

N = 160  # above the smallest failing width measured (150) and above torch_cpu.MIN_COLUMNS
BOUND = metrics.PASS_RATIO


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the race needs more than one thread (CI's machine has two cores)
    yield
    torch.set_num_threads(before)


def _batch(dtype, kind):
    g = torch.Generator().manual_seed(7)
    A = torch.randn(3, N, N, dtype=torch.complex128 if dtype.is_complex else torch.float64, generator=g)
    # per matrix: torch's batched slogdet here is the race itself (it hung CI on 2026-12-07)
    logabsdet = torch.stack([torch.linalg.slogdet(a).logabsdet for a in A.unbind(0)])
    A = (A * torch.exp(-logabsdet / N)[:, None, None]).to(dtype)  # |det| ~ 1: no overflow
    if kind == "expanded":  # a stride-0 batch: one matrix seen three times
        return A[0].expand(3, N, N)
    return A


def _each(f, A):
    return torch.stack([f(a) for a in A.unbind(0)])


KINDS = ["distinct", "expanded"]
DTYPES = [torch.float32, torch.complex64, torch.float64]


def test_the_guard_covers_the_measured_region():
    A = torch.empty(2, 150, 150)
    assert torch_cpu.MIN_COLUMNS <= 150
    with torch.inference_mode():
        before = torch.get_num_threads()
        try:
            torch.set_num_threads(2)
            assert torch_cpu.unsafe(A) and torch_cpu.unsafe(A[0].expand(2, 150, 150))
            assert torch_cpu.unsafe(torch.empty(2, 64, 400))  # the width decides, not the rows
            assert not torch_cpu.unsafe(A[0])  # one matrix
            assert not torch_cpu.unsafe(torch.empty(1, 150, 150))
            assert not torch_cpu.unsafe(torch.empty(2, 0, 150))
            assert not torch_cpu.unsafe("not a tensor")
            torch.set_num_threads(1)
            assert not torch_cpu.unsafe(A)
        finally:
            torch.set_num_threads(before)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_front_doors_are_right_where_torch_races(dtype, kind, two_threads, routing_table):
    A = _batch(dtype, kind)
    A0 = A.clone()
    B = torch.randn(3, N, 2, dtype=dtype, generator=torch.Generator().manual_seed(8))
    u = metrics.unit_roundoff(dtype)

    assert (metrics.inverse_ratio(A, M.inv(A)) <= BOUND).all()
    X, info = M.inv_ex(A)
    assert (metrics.inverse_ratio(A, X) <= BOUND).all() and not info.any()
    assert (metrics.solve_ratio(A, M.solve(A, B), B) <= BOUND).all()
    assert (metrics.solve_ratio(A, M.solve(A, B[..., 0]), B[..., 0]) <= BOUND).all()  # vectors
    Bt = B.mT.contiguous()
    assert (metrics.solve_ratio(A, M.solve(A, Bt, left=False), Bt, left=False) <= BOUND).all()
    X, info = M.solve_ex(A, B)
    assert (metrics.solve_ratio(A, X, B) <= BOUND).all() and not info.any()
    LU, piv = M.lu_factor(A)
    assert (metrics.lu_factor_ratio(A, LU, piv) <= BOUND).all()
    LU, piv, info = M.lu_factor_ex(A)
    assert (metrics.lu_factor_ratio(A, LU, piv) <= BOUND).all() and not info.any()
    P, L, U = M.lu(A)
    assert (metrics.lu_ratio(A, P, L, U) <= BOUND).all()

    d, d1 = M.det(A), _each(torch.linalg.det, A)
    assert ((d - d1).abs() <= BOUND * N * u * d1.abs()).all()
    s, la = M.slogdet(A)
    s1, la1 = (torch.stack(t) for t in zip(*(torch.linalg.slogdet(a) for a in A.unbind(0))))
    assert ((la - la1).abs() <= BOUND * N * u).all() and ((s - s1).abs() <= BOUND * N * u).all()
    assert torch.equal(A, A0)  # never modified


@pytest.mark.parametrize("kind", KINDS)
def test_gradients_are_right_where_torch_races(kind, two_threads, routing_table):
    A = _batch(torch.float64, kind).clone().requires_grad_()
    M.slogdet(A).logabsdet.sum().backward()
    expected = _each(lambda a: torch.linalg.inv(a).mT, A.detach())  # d log|det A| / dA = A⁻ᵀ
    # ‖A⁻ᵀ − Ã⁻ᵀ‖ <= 30 n u κ(A) ‖A⁻¹‖ (the inverses' forward error bound)
    kappa = torch.linalg.cond(A.detach()).max()
    err = (A.grad - expected).abs().max() / expected.abs().max()
    assert err <= BOUND * N * metrics.unit_roundoff(torch.float64) * kappa


def test_enable_on_cpu_routes_the_racing_calls(two_threads):
    A = _batch(torch.float32, "distinct")
    B = torch.randn(3, N, 2, generator=torch.Generator().manual_seed(9))
    with M.enabled(devices=("cpu",)):
        M.routing.reset_stats()
        X = torch.linalg.inv(A)
        Y = torch.linalg.solve(A, B)
        LU, piv = torch.linalg.lu_factor(A)
        s, la = torch.linalg.slogdet(A)
        stats = M.routing.stats()
    assert (metrics.inverse_ratio(A, X) <= BOUND).all()
    assert (metrics.solve_ratio(A, Y, B) <= BOUND).all()
    assert (metrics.lu_factor_ratio(A, LU, piv) <= BOUND).all()
    la1 = torch.stack([torch.linalg.slogdet(a).logabsdet for a in A.unbind(0)])
    assert ((la - la1).abs() <= BOUND * N * metrics.unit_roundoff(torch.float32)).all()
    for op in ("inv_ex", "solve", "lu_factor_ex", "slogdet"):
        assert stats[op]["ours"] == 1, (op, stats)
