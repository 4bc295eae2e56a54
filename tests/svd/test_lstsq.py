"""mpslinalg.lstsq: every driver against SciPy's LAPACK drivers, torch's output rules, shapes,
views, errors, no host sync and gradients.

Bounds (threshold 30, u = 2^-24 for float32/complex64, 2^-53 for float64/complex128)
-----------------------------------------------------------------------------------
* Full column rank: ``lstsq_ratio`` (reference.metrics, LAPACK ``xQRT17``-like; O(1) for a
  backward-stable solver whatever the residual).
* Every case, against SciPy's solution ``X*`` (float64) of the same data: least-squares perturbation
  theory (Wedin; Higham, *Accuracy and Stability*, Thm 20.1) for a backward error ``c·n·u`` at fixed
  rank ``r`` gives ``‖X − X*‖ / ‖X*‖ <= c·n·u·(κ + κ²·‖R*‖ / (‖A‖·‖X*‖))`` with ``κ = σ₁/σ_r`` and
  ``R* = B − A X*`` (the ``κ²`` term vanishes for consistent systems), ``n = max(m, n, k)``.
* ``singular_values``: a backward-stable SVD has ``|σᵢ − σᵢ*| <= c·max(m,n)·u·σ₁``.
* ``residuals``: ``‖B − A X‖`` is computed with torch ops from ``X``; its error against SciPy's is
  at most ``‖A‖·‖X − X*‖`` plus rounding ``c·max(m,n)·u·(‖A‖‖X‖ + ‖B‖)``.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import scipy.linalg as sla
import torch
from spectral_data import matrix as _matrix
from sync_check import no_host_sync

import mpslinalg as LA
from reference.metrics import lstsq_ratio, unit_roundoff

lstsq_mod = importlib.import_module("mpslinalg.svd.lstsq")  # the module (mpslinalg.lstsq is the op)

THRESHOLD = 30.0
DRIVERS = ["gels", "gelsy", "gelsd", "gelss"]
HOST = [torch.float32, torch.float64, torch.complex64, torch.complex128]


def _scipy(A: torch.Tensor, B: torch.Tensor, driver: str, rcond: float | None):
    """SciPy's solution, residues, rank and singular values in float64, per matrix of the batch."""
    wide = np.complex128 if A.is_complex() else np.float64
    a = A.resolve_conj().numpy().astype(wide).reshape(-1, *A.shape[-2:])
    b = B.resolve_conj().numpy().astype(wide).reshape(-1, *B.shape[-2:])
    cond = torch.finfo(A.dtype).eps * max(A.shape[-2:]) if rcond is None else rcond
    lapack = "gelsy" if driver in ("gels", "gelsy") else driver
    out = [sla.lstsq(ai, bi, cond=cond, lapack_driver=lapack) for ai, bi in zip(a, b)]
    X = torch.from_numpy(np.stack([o[0] for o in out])).reshape(*A.shape[:-2], A.shape[-1], B.shape[-1])
    rank = torch.tensor([o[2] for o in out]).reshape(A.shape[:-2])
    S = [o[3] for o in out]
    return X, rank, S


def _forward_bound(A, B, Xref, rank):
    """The least-squares forward-error scale ``max(m,n,k)·u·(κ + κ²‖R*‖/(‖A‖‖X*‖))`` (float64, per matrix)."""
    wide = torch.complex128 if A.is_complex() else torch.float64
    A64, B64 = A.to(wide), B.to(wide)
    S = torch.linalg.svdvals(A64)
    kappa = S[..., 0] / S.gather(-1, (rank - 1).clamp_min(0).unsqueeze(-1)).squeeze(-1)
    R = B64 - A64 @ Xref
    two = lambda M: torch.linalg.matrix_norm(M, 2)  # noqa: E731
    rel = two(R) / (S[..., 0] * two(Xref))
    n = max(A.shape[-2], A.shape[-1], B.shape[-1])
    return n * unit_roundoff(A.dtype) * (kappa + kappa**2 * rel.nan_to_num(0.0))


def _check(A, B, driver, rcond=None, rank=None):
    A0, B0 = A.clone(), B.clone()
    res = LA.lstsq(A, B, rcond, driver=driver)
    assert torch.equal(A, A0) and torch.equal(B, B0)
    m, n = A.shape[-2:]
    Xref, rank_ref, S_ref = _scipy(A, B, driver, rcond)
    X = res.solution
    assert X.shape == Xref.shape and X.dtype == A.dtype
    r = rank_ref if rank is None else torch.full_like(rank_ref, rank)
    if driver != "gels":
        assert res.rank.dtype == torch.int64 and torch.equal(res.rank, rank_ref), (res.rank, rank_ref)
    err = torch.linalg.matrix_norm(X.to(Xref.dtype) - Xref, 2) / torch.linalg.matrix_norm(Xref, 2)
    ratio = (err / _forward_bound(A, B, Xref, r)).max().item()
    assert ratio < THRESHOLD, (driver, ratio)
    if bool((r == n).all()) and m >= n:
        assert lstsq_ratio(A, X, B).max().item() < THRESHOLD
    if driver in ("gelsd", "gelss"):
        S = torch.from_numpy(np.stack(S_ref)).reshape(res.singular_values.shape)
        u = unit_roundoff(A.dtype)
        assert (((res.singular_values - S).abs() / (max(m, n) * u * S[..., :1])).max().item()) < THRESHOLD
    return res


@pytest.mark.parametrize("dtype", HOST, ids=str)
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("shape", [(3, 8, 5), (3, 5, 8), (2, 6, 6), (9, 4)], ids=str)
def test_full_rank_vs_scipy(shape, driver, dtype):
    A = _matrix(shape, dtype, cond=100.0, seed=1)
    g = torch.Generator().manual_seed(2)
    B = torch.randn(*shape[:-1], 3, generator=g, dtype=torch.float64).to(dtype)
    _check(A, B, driver)


@pytest.mark.parametrize("dtype", HOST, ids=str)
@pytest.mark.parametrize("driver", ["gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shape", [(3, 8, 5), (3, 5, 8), (2, 6, 6)], ids=str)
def test_rank_deficient_minimum_norm_vs_scipy(shape, driver, dtype):
    A = _matrix(shape, dtype, rank=3, cond=10.0, seed=3)
    g = torch.Generator().manual_seed(4)
    B = torch.randn(*shape[:-1], 2, generator=g, dtype=torch.float64).to(dtype)
    res = _check(A, B, driver, rank=3)
    assert res.rank.tolist() == [3] * shape[0]


@pytest.mark.parametrize("driver", ["gelsy", "gelsd", "gelss"])
def test_rcond_decides_the_rank(driver):
    # singular values 1, 1e-2, 1e-4, 1e-6 (κ-graded): rcond between them picks the rank
    A = _matrix((6, 4), torch.float64, cond=1e6, seed=5)
    B = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    for rcond, rank in [(1e-1, 1), (1e-3, 2), (1e-5, 3), (1e-8, 4)]:
        res = _check(A, B, driver, rcond=rcond, rank=rank)
        assert res.rank.item() == rank


def test_every_backend(backend, backend_device, gpu_dtype):
    for shape in [(2, 7, 4), (2, 4, 7)]:
        A = _matrix(shape, gpu_dtype, cond=30.0, seed=7).to(backend_device)
        B = torch.randn(*shape[:-1], 2, dtype=torch.float64).to(gpu_dtype).to(backend_device)
        for driver in DRIVERS:
            res = LA.lstsq(A, B, driver=driver)
            Xref, _, _ = _scipy(A.cpu(), B.cpu(), driver, None)
            err = torch.linalg.matrix_norm(res.solution.cpu().to(Xref.dtype) - Xref, 2)
            bound = _forward_bound(A.cpu(), B.cpu(), Xref, torch.full(shape[:1], min(shape[1:])))
            assert (err / torch.linalg.matrix_norm(Xref, 2) / bound).max().item() < THRESHOLD, driver


@pytest.mark.parametrize("shape", [(7, 4), (4, 7), (5, 5)], ids=str)
def test_output_fields_follow_torch(shape):
    A = _matrix((2, *shape), torch.float64, seed=8)
    B = torch.randn(2, shape[0], 3, dtype=torch.float64)
    for driver in DRIVERS:
        ours, theirs = LA.lstsq(A, B, driver=driver), torch.linalg.lstsq(A, B, driver=driver)
        assert type(ours) is type(theirs)
        for a, b in zip(ours, theirs):
            assert a.shape == b.shape and a.dtype == b.dtype, driver
        torch.testing.assert_close(ours.residuals, theirs.residuals)
        torch.testing.assert_close(ours.rank, theirs.rank)
        assert not ours.singular_values.requires_grad


def test_residuals_vs_scipy():
    A = _matrix((3, 9, 4), torch.float32, cond=50.0, seed=9)
    B = torch.randn(3, 9, 2)
    u = unit_roundoff(torch.float32)
    Xref, rank, _ = _scipy(A, B, "gelsd", None)
    ref = torch.from_numpy(np.stack([sla.lstsq(a.double().numpy(), b.double().numpy())[1] for a, b in zip(A, B)]))
    two = lambda M: torch.linalg.matrix_norm(M, 2)  # noqa: E731
    nA, nB = two(A.double()), two(B.double())
    # ‖A‖·‖X − X*‖ (forward bound) + rounding of B − A X
    scale = nA * two(Xref) * _forward_bound(A, B, Xref, rank) + 9 * u * (nA * two(Xref) + nB)
    for driver in ["gels", "gelsd", "gelss"]:
        res = LA.lstsq(A, B, driver=driver)
        err = (res.residuals.double().sqrt() - ref.sqrt()).abs().amax(-1)
        assert (err / scale).max().item() < THRESHOLD, driver


def test_vector_rhs_and_broadcasting():
    A = _matrix((2, 6, 3), torch.float64, seed=10)
    b = torch.randn(2, 6, dtype=torch.float64)
    ours, theirs = LA.lstsq(A, b, driver="gelsd"), torch.linalg.lstsq(A, b, driver="gelsd")
    assert ours.solution.shape == (2, 3) and ours.residuals.shape == theirs.residuals.shape
    torch.testing.assert_close(ours.solution, theirs.solution)
    # batch broadcasting (torch's own lstsq needs equal batch ranks; same-rank broadcast as torch)
    B = torch.randn(3, 1, 6, 2, dtype=torch.float64)
    X = LA.lstsq(A.unsqueeze(0), B).solution
    assert X.shape == (3, 2, 3, 2)
    torch.testing.assert_close(X, torch.linalg.lstsq(A.expand(3, 2, 6, 3), B.expand(3, 2, 6, 2)).solution)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0), (4, 3)], ids=str)
@pytest.mark.parametrize("driver", DRIVERS)
def test_empty_and_zero_matrices_as_torch(shape, driver):
    A = torch.zeros(2, *shape)
    B = torch.zeros(2, shape[0], 2)
    ours, theirs = LA.lstsq(A, B, driver=driver), torch.linalg.lstsq(A, B, driver=driver)
    fields = list(zip(ours, theirs))
    if driver in ("gelsd", "gelss") and shape[0] > shape[1] > 0:
        # the documented difference: torch drops the residuals of rank-deficient matrices (a
        # host read); ours are ‖B − A X‖² of the minimum-norm solution, here ‖B‖² = 0
        assert theirs.residuals.numel() == 0
        torch.testing.assert_close(ours.residuals, torch.zeros(2, 2))
        fields = [fields[0], *fields[2:]]
    for a, b in fields:
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(a, b)
    assert LA.lstsq(torch.zeros(0, 5, 3), torch.zeros(0, 5, 2), driver=driver).solution.shape == (0, 3, 2)


def test_zero_rhs_columns():
    A = _matrix((5, 3), torch.float64, seed=11)
    for driver in DRIVERS:
        assert LA.lstsq(A, torch.zeros(5, 0, dtype=torch.float64), driver=driver).solution.shape == (3, 0)


def test_extreme_scales():
    # exact powers of two: the solution of (s·A) X = (t·B) is (t/s)·X
    A = _matrix((6, 4), torch.float32, rank=3, seed=12)
    B = torch.randn(6, 2)
    full = _matrix((6, 4), torch.float32, seed=13)
    for driver, M in [("gelsy", A), ("gelsy", full), ("gelsd", A), ("gelss", A), ("gels", full)]:
        base = LA.lstsq(M, B, driver=driver).solution
        for s, t in [(2.0**100, 2.0**-20), (2.0**-100, 2.0**20)]:
            X = LA.lstsq(M * s, B * t, driver=driver).solution
            # both the drivers and the SVD scale by powers of two: the same digits come out
            torch.testing.assert_close(X, base * (t / s), rtol=0, atol=0)


def test_default_driver_per_device():
    A, B = _matrix((6, 3), torch.float32), torch.randn(6, 2)
    assert LA.lstsq(A, B).rank.shape == ()  # gelsy on CPU fills rank; gels would not


def test_conj_and_strided_views():
    A = _matrix((2, 8, 5), torch.complex64, seed=14)
    B = torch.randn(2, 8, 6, dtype=torch.complex64)
    for a, b in [(A.conj(), B), (A, B.conj()), (A[..., ::2, :], B[..., ::2, ::3]), (A.mH.mH, B.mT.mT)]:
        for driver in DRIVERS:
            X = LA.lstsq(a, b, driver=driver).solution
            Y = LA.lstsq(a.resolve_conj().contiguous(), b.resolve_conj().contiguous(), driver=driver).solution
            torch.testing.assert_close(X, Y, rtol=0, atol=0)


def test_errors():
    A, B = torch.randn(5, 3), torch.randn(5, 2)
    with pytest.raises(ValueError, match="driver"):
        LA.lstsq(A, B, driver="gelsx")
    with pytest.raises(RuntimeError, match=r"input.size\(-2\) should match other.size\(-2\)"):  # torch's words
        LA.lstsq(A, torch.randn(4, 2))
    with pytest.raises(RuntimeError, match=r"input.size\(-2\) should match other.size\(-1\)"):
        LA.lstsq(A, torch.randn(4))
    with pytest.raises(TypeError, match="same dtype"):
        LA.lstsq(A, B.double())
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        LA.lstsq(torch.randn(5), B)
    with pytest.raises(TypeError, match="rcond"):
        LA.lstsq(A, B, "small")
    with pytest.raises(TypeError, match="floating point or complex"):
        LA.lstsq(A.int(), B.int())
    with pytest.raises(RuntimeError, match="broadcast"):
        LA.lstsq(torch.randn(2, 5, 3), torch.randn(3, 5, 2))


@pytest.mark.parametrize("driver", DRIVERS)
def test_no_host_sync(driver):
    A = _matrix((3, 6, 4), torch.float32, rank=3 if driver != "gels" else None, seed=15)
    B = torch.randn(3, 6, 2)
    # exempt: the other families' doors, and the CPU-only LAPACK route (its range check reads CPU
    # memory: no device synchronises; the GPU path is the rest, checked here)
    exempt = [(lstsq_mod, "svd_parts"), (lstsq_mod, "qr_reduced"), (lstsq_mod, "solve_triangular"),
              (lstsq_mod, "_lapack_lstsq")]
    with no_host_sync(exempt=exempt):
        res = LA.lstsq(A, B, driver=driver)
    torch.testing.assert_close(res.solution, LA.lstsq(A, B, driver=driver).solution)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5)], ids=str)
def test_gradcheck(shape, driver, dtype):
    # one matrix, one right-hand side: every entry is perturbed, so size is test time
    A = _matrix(shape, dtype, cond=4.0, seed=16).requires_grad_()
    B = torch.randn(shape[0], 1, dtype=dtype).requires_grad_()

    def f(A, B):
        r = LA.lstsq(A, B, driver=driver)
        return (r.solution, r.residuals) if r.residuals.numel() else r.solution

    torch.autograd.gradcheck(f, (A, B), check_forward_ad=True)
    if driver == "gelsd":
        torch.autograd.gradgradcheck(lambda A, B: LA.lstsq(A, B, driver=driver).solution, (A, B))


def test_gradient_matches_torch():
    A = _matrix((6, 4), torch.float64, seed=17).requires_grad_()
    B = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    G = torch.randn(4, 2, dtype=torch.float64)
    ours = torch.autograd.grad((LA.lstsq(A, B).solution * G).sum(), (A, B))
    theirs = torch.autograd.grad((torch.linalg.lstsq(A, B).solution * G).sum(), (A, B))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b)


def test_torch_func_vmap():
    A = _matrix((3, 6, 4), torch.float64, seed=18)
    B = torch.randn(3, 6, 2, dtype=torch.float64)
    for driver in DRIVERS:
        X = torch.func.vmap(lambda a, b, d=driver: LA.lstsq(a, b, driver=d).solution)(A, B)
        torch.testing.assert_close(X, LA.lstsq(A, B, driver=driver).solution)


def test_compile_fullgraph():
    A, B = _matrix((2, 6, 4), torch.float32), torch.randn(2, 6, 2)
    f = torch.compile(lambda a, b: LA.lstsq(a, b, driver="gelsd"), fullgraph=True, backend="eager")
    torch.testing.assert_close(f(A, B).solution, LA.lstsq(A, B, driver="gelsd").solution)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_nonfinite_matrix_has_rank_minus_one(bad):
    A = _matrix((3, 6, 4), torch.float32, seed=19)
    A[1, 2, 3] = bad
    B = torch.randn(3, 6, 2)
    for driver in DRIVERS:
        res = LA.lstsq(A, B, driver=driver)
        assert not res.solution[1].isfinite().all()
        good = LA.lstsq(A[[0, 2]], B[[0, 2]], driver=driver).solution
        torch.testing.assert_close(res.solution[[0, 2]], good, rtol=0, atol=0)
        if driver != "gels":
            assert res.rank.tolist() == [4, -1, 4]


# --------------------------------------------------------------------------------------------------
# 'gelsy' on the CPU: LAPACK's unpivoted QR (xgels's calls) for the tall matrices it proves to have
# rank n, the pivoted QR in C for the others (lstsq._gelsy_c, _QR_ROUTE_MARGIN)
# --------------------------------------------------------------------------------------------------

needs_lapack_qr = pytest.mark.skipif(
    any(lstsq_mod._lapack_qr(d) is None for d in HOST),
    reason="this torch build exports no LAPACK QR from libtorch_cpu: 'gelsy' runs the pivoted QR only")


def _pivoted_only(A, B, rcond=None):
    """The same call with the QR route off (every matrix through the column-pivoted QR)."""
    saved = lstsq_mod._lapack_qr
    lstsq_mod._lapack_qr = lambda dtype: None
    try:
        return LA.lstsq(A, B, rcond, driver="gelsy")
    finally:
        lstsq_mod._lapack_qr = saved


@needs_lapack_qr
@pytest.mark.parametrize("dtype", HOST, ids=str)
@pytest.mark.parametrize("shape,k", [((3, 128, 32), 3), ((2, 64, 64), 2), ((40, 32), 16)], ids=str)
def test_gelsy_routed_matrices_are_lapack_gels_bits(shape, k, dtype):
    # κ = 100 is far inside the route's bound: the solution is xgels's (the same LAPACK calls on
    # the same data; the power-of-two scaling is exact), the rank n. Sizes at or above the route's
    # (m·n >= 4096 or m·n·k >= 16384)
    A = _matrix(shape, dtype, cond=100.0, seed=20)
    B = torch.randn(*shape[:-1], k, dtype=torch.float64, generator=torch.Generator().manual_seed(21)).to(dtype)
    res = LA.lstsq(A, B)
    assert torch.equal(res.solution, torch.linalg.lstsq(A, B, driver="gels").solution)
    assert bool((res.rank == shape[-1]).all())
    assert not torch.equal(res.solution, _pivoted_only(A, B).solution)  # a different computation ran
    for s_, t in [(2.0**100, 2.0**-20), (2.0**-100, 2.0**20)]:  # exact powers of two: the same digits
        assert torch.equal(LA.lstsq(A * s_, B * t).solution, res.solution * (t / s_))


@needs_lapack_qr
@pytest.mark.parametrize("dtype", HOST, ids=str)
def test_gelsy_kept_cases_are_the_pivoted_qr(dtype):
    # what the route declines runs the column-pivoted QR, bit for bit: rank-deficient (the bound
    # fails), wide (no route), rcond below eps·m (no proof at the rounding level), a zero matrix,
    # full rank beyond the bound (κ = 1e4 float32: 32·rcond·κ_F > 1, the pivots still pass) and a
    # small problem (below the route's sizes)
    g = torch.Generator().manual_seed(22)
    eps = torch.finfo(dtype).eps
    beyond = 1e4 if dtype in (torch.float32, torch.complex64) else 1e12
    cases = [(_matrix((2, 128, 32), dtype, rank=3, seed=23), None, 3),
             (_matrix((2, 32, 128), dtype, seed=24), None, 32),
             (_matrix((2, 128, 32), dtype, seed=25), eps, 32),
             (torch.zeros(2, 128, 32, dtype=dtype), None, 0),
             (_matrix((2, 128, 32), dtype, cond=beyond, seed=26), None, 32),
             (_matrix((2, 12, 6), dtype, seed=27), None, 6)]
    for A, rcond, rank in cases:
        B = torch.randn(*A.shape[:-1], 2, dtype=torch.float64, generator=g).to(dtype)
        res, ref = LA.lstsq(A, B, rcond), _pivoted_only(A, B, rcond)
        assert torch.equal(res.solution, ref.solution) and torch.equal(res.rank, ref.rank), A.shape
        assert res.rank.tolist() == [rank] * 2, (A.shape, res.rank)


@needs_lapack_qr
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=str)
def test_gelsy_route_never_changes_the_rank(dtype):
    # across the route's boundary (κ from 10 to 1e6, float32 128x32: the bound needs κ_F below
    # ~2e3, the pivoted rule's rank drops near κ ~ 6e4), the rank is the pivoted QR's for every
    # matrix, and a routed solution is within the least-squares forward bound of SciPy's
    for e, cond in enumerate([1e1, 1e2, 3e2, 1e3, 3e3, 1e4, 1e5, 1e6]):
        A = _matrix((4, 128, 32), dtype, cond=cond, seed=30 + e)
        B = torch.randn(4, 128, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(e)).to(dtype)
        res, ref = LA.lstsq(A, B), _pivoted_only(A, B)
        assert torch.equal(res.rank, ref.rank), (cond, res.rank, ref.rank)
        if bool((res.rank == 32).all()):
            _check(A, B, "gelsy")


@needs_lapack_qr
def test_gelsy_result_does_not_depend_on_batch_neighbours():
    # torch.linalg.lstsq's own 'gelsy' passes LAPACK an uninitialised pivot array and reuses it
    # along the batch (pytorch#92537, #187411: rank 0 instead of 4, a neighbour changes a result),
    # so it is not a route; here each matrix decides on its own entries
    full = _matrix((128, 32), torch.float32, cond=10.0, seed=40)
    deficient = _matrix((128, 32), torch.float32, rank=5, seed=41)
    graded = _matrix((128, 32), torch.float32, cond=1e4, seed=42)
    bad = full.clone()
    bad[3, 4] = float("nan")
    mats = [full, deficient, graded, bad, torch.eye(128, 32)]
    B = torch.randn(len(mats), 128, 3, generator=torch.Generator().manual_seed(43))
    batch = LA.lstsq(torch.stack(mats), B)
    backwards = LA.lstsq(torch.stack(mats[::-1]), B.flip(0))
    for i, A in enumerate(mats):
        alone = LA.lstsq(A, B[i])
        for res, j in ((batch, i), (backwards, len(mats) - 1 - i)):
            assert torch.equal(res.rank[j], alone.rank), i
            assert torch.equal(res.solution[j].nan_to_num(7.0), alone.solution.nan_to_num(7.0)), i
    assert batch.rank.tolist() == [32, 5, 32, -1, 32]
    # pytorch#92537's matrix (a zero first row: LAPACK without pivoting sees r_11 = 0), every call
    a = torch.eye(5)
    a[0] = 0
    for _ in range(10):
        res = LA.lstsq(a, torch.ones(5))
        assert int(res.rank) == 4 and torch.equal(res.solution, torch.tensor([0.0, 1, 1, 1, 1]))
