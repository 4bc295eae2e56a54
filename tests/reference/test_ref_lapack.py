"""Tests of reference.lapack: torch.linalg conventions, batching, and accuracy bounds.

Agreement with torch.linalg (an independent LAPACK build) is asserted with forward-error bounds
derived from backward stability in float64: for a backward-stable solver
``‖x̂ − x‖/‖x‖ <= κ·c·n·u64/(1 − κ·c·n·u64)``; two such solvers differ by at most twice that. The
matrices have a prescribed κ (reference.matrices.with_condition), so the bound is explicit.
"""

from __future__ import annotations

import math

import pytest
import torch

from reference import lapack as R
from reference import matrices as G
from reference import metrics as M

U64 = 2.0**-53
DTYPES = [torch.float32, torch.complex64]


def _fe_bound(n: int, kappa: float, rho: float = 2.0) -> float:
    # Worst-case forward error of GEPP in float64 (Higham, ASNA Thm 9.4 + §7): the computed x̂
    # solves (A + ΔA)x̂ = b with |ΔA| <= γ_{3n}|L̂||Û|, so ‖ΔA‖_∞ <= 3n·u·‖L‖_∞‖U‖_∞
    # <= 3n·u·n·(n ρ ‖A‖_∞) with ρ the growth factor; then ‖x̂ − x‖_∞/‖x‖_∞ <= κ_∞ e/(1 − κ_∞ e)
    # with κ_∞ <= n κ₂. Two such solvers (ours and torch's LAPACK) differ by at most twice that.
    # ρ <= 2 holds for these well-conditioned Haar-based matrices (checked where it matters).
    e = n * kappa * 3 * n**3 * rho * U64
    return 2 * e / (1 - e)


@pytest.mark.parametrize("dtype", DTYPES)
def test_getrf_pivots_match_torch_cpu_lapack(dtype):
    # the same LAPACK algorithm in the same precision picks the same pivots (ties: first index)
    for seed, shape in enumerate([(6, 6), (3, 17, 17), (9, 5), (5, 9), (2, 64, 64)]):
        A = G.random(*shape[-2:], batch=shape[:-2], dtype=dtype, seed=seed)
        piv = R.getrf_pivots(A)
        assert piv.dtype == torch.int32 and piv.shape == (*shape[:-2], min(shape[-2:]))
        assert torch.equal(piv, torch.linalg.lu_factor(A).pivots)
    LU, piv, info = R.getrf(A)
    assert LU.dtype == dtype and (info == 0).all()
    # sgetrf/cgetrf really ran in single precision: its LU differs from the float64 one
    assert (LU.to(R.lu_factor(A)[0].dtype) - R.lu_factor(A)[0]).abs().max() > 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_family_conventions(dtype):
    A = G.with_condition(7, 50.0, batch=(2, 3), dtype=dtype, seed=1)
    LU, piv = R.lu_factor(A)
    wide = torch.complex128 if dtype.is_complex else torch.float64
    assert LU.dtype == wide and piv.dtype == torch.int32 and piv.min() >= 1
    tLU, tpiv = torch.linalg.lu_factor(A.to(wide))
    assert torch.equal(piv, tpiv)
    assert float(M.growth_factor(A, LU).max()) <= 2.0  # the ρ used by _fe_bound
    P, L, U = R.lu(A)
    assert float(M.lu_ratio(A.to(wide), P, L, U).max()) < M.PASS_RATIO  # in float64 units
    B = G.random(7, 2, batch=(3,), dtype=dtype, seed=2)
    for left in (True, False):
        for adjoint in (False, True):
            Bx = B if left else B.mT
            X = R.lu_solve(LU, piv, Bx, left=left, adjoint=adjoint)
            assert X.shape == (2, 3, *Bx.shape[-2:])
            tX = torch.linalg.lu_solve(tLU, tpiv, Bx.to(wide), left=left, adjoint=adjoint)
            assert float(M.forward_error(X, tX).max()) < _fe_bound(7, 50.0)
            # and it solves the stated system (backward error in float64 units)
            Aop = A.mH if adjoint else A
            assert float(M.solve_ratio(Aop, X, Bx, left=left, u=U64).max()) < M.PASS_RATIO


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_inv_det_slogdet_against_torch(dtype):
    n, kappa = 9, 100.0
    A = G.with_condition(n, kappa, batch=(4,), dtype=dtype, seed=3)
    wide = torch.complex128 if dtype.is_complex else torch.float64
    B = G.random(n, 3, batch=(4,), dtype=dtype, seed=4)
    bound = _fe_bound(n, kappa)
    assert float(M.forward_error(R.solve(A, B), torch.linalg.solve(A.to(wide), B.to(wide))).max()) < bound
    b = B[..., 0]  # batch of vectors (torch's rule)
    x = R.solve(A, b)
    assert x.shape == (4, n)
    assert float(M.forward_error(x, torch.linalg.solve(A.to(wide), b.to(wide)), dim=-1).max()) < bound
    Xr = R.solve(A, B.mT, left=False)
    assert float(M.solve_ratio(A, Xr, B.mT, left=False, u=U64).max()) < M.PASS_RATIO
    Ainv = R.inv(A)
    assert float(M.inverse_ratio(A, Ainv, u=U64).max()) < M.PASS_RATIO
    assert float(M.forward_error(Ainv, torch.linalg.inv(A.to(wide))).max()) < bound
    # det: relative perturbation |det(A+E)/det(A) - 1| <= n κ ‖E‖/‖A‖ to first order
    d = R.det(A)
    assert float(M.relative_error(d, torch.linalg.det(A.to(wide))).max()) < n * bound
    sign, logabs = R.slogdet(A)
    tsign, tlogabs = torch.linalg.slogdet(A.to(wide))
    assert sign.dtype == wide and logabs.dtype == torch.float64
    assert float((sign - tsign).abs().max()) < n * bound
    assert float((logabs - tlogabs).abs().max()) < n * bound


def test_det_does_not_overflow_in_the_product():
    # det = 2^1000 * 2^1000 * 2^-1000 * 2^-1000 = 1 exactly; a naive product overflows to inf
    d = torch.tensor([2.0**1000, 2.0**1000, 2.0**-1000, 2.0**-1000], dtype=torch.float64)
    A = torch.diag(d)
    assert float(R.det(A)) == 1.0
    assert float(R.det(A[[1, 0, 2, 3]])) == -1.0  # one row swap
    Ac = A.to(torch.complex128) * 1j  # det = i^4 = 1
    assert complex(R.det(Ac)) == 1.0
    sign, logabs = R.slogdet(A)
    assert float(sign) == 1.0 and float(logabs) == 0.0
    # out of float64 range: inf (use slogdet), never NaN
    assert float(R.det(torch.diag(torch.tensor([2.0**1000] * 2, dtype=torch.float64)))) == math.inf


def test_singular_input():
    A = torch.ones(2, 3, 3)
    A[0] = torch.eye(3)  # element 0 regular, element 1 exactly singular
    with pytest.raises(torch.linalg.LinAlgError, match=r"batch element \(1,\)"):
        R.lu_factor(A)
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        R.solve(A, torch.ones(2, 3, 1))
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        R.inv(A)
    _, _, info = R.lu_factor_ex(A)
    assert info.tolist() == torch.linalg.lu_factor_ex(A.double()).info.tolist() == [0, 2]
    assert R.det(A).tolist() == [1.0, 0.0]
    sign, logabs = R.slogdet(A)
    assert sign.tolist() == [1.0, 0.0] and logabs.tolist() == [0.0, -math.inf]


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_triangular_reads_only_the_triangle(dtype):
    n = 8
    B = G.random(n, 3, batch=(2,), dtype=dtype, seed=5)
    wide = torch.complex128 if dtype.is_complex else torch.float64
    for upper in (False, True):
        for unit in (False, True):
            T = G.triangular(n, upper=upper, unit=unit, kind="well", batch=(2,), dtype=dtype, seed=6)
            Tn = G.triangular(
                n, upper=upper, unit=unit, kind="well", batch=(2,), dtype=dtype, seed=6, fill=float("nan")
            )
            for left in (True, False):
                Bx = B if left else B.mT
                X = R.solve_triangular(Tn, Bx, upper=upper, left=left, unitriangular=unit)
                tX = torch.linalg.solve_triangular(
                    T.to(wide), Bx.to(wide), upper=upper, left=left, unitriangular=unit
                )
                # κ(T) <= 10 (non-unit, "well") or <= 3 (unit): trsm forward error <= κ n u each
                assert float(M.forward_error(X, tX).max()) < _fe_bound(n, 10.0)
                r = M.triangular_residual_ratio(Tn, X, Bx, upper, left, unit, u=U64)
                assert float(r.max()) < M.PASS_RATIO


@pytest.mark.parametrize("dtype", DTYPES)
def test_qr_svd_conventions(dtype):
    A = G.with_condition(5, 30.0, m=8, batch=(3,), dtype=dtype, seed=7)
    wide = torch.complex128 if dtype.is_complex else torch.float64
    for mode in ("reduced", "complete"):
        Q, Rr = R.qr(A, mode)
        k = 5 if mode == "reduced" else 8
        assert Q.shape == (3, 8, k) and Rr.shape == (3, k, 5) and Q.dtype == wide
        recon, orth = M.qr_ratios(A, Q, Rr, u=U64)
        assert float(recon.max()) < M.PASS_RATIO and float(orth.max()) < M.PASS_RATIO
        # LAPACK's Householder convention, as torch's CPU QR: R agrees, signs included
        tQ, tR = torch.linalg.qr(A.to(wide), mode=mode)
        assert float(M.forward_error(Rr, tR).max()) < _fe_bound(8, 30.0)
    Qe, Rr = R.qr(A, "r")
    assert Qe.numel() == 0 and Rr.shape == (3, 5, 5)
    for full in (True, False):
        for X in (A, A.mT):
            U, S, Vh = R.svd(X, full_matrices=full)
            m, n = X.shape[-2:]
            k = min(m, n)
            assert U.shape == (3, m, m if full else k) and Vh.shape == (3, n if full else k, n)
            assert S.dtype == torch.float64
            r = M.svd_ratios(X, U, S, Vh, u=U64)
            assert all(float(t.max()) < M.PASS_RATIO for t in r)
    # prescribed σ = geometric from 1 to 1/30: float64 SVD is accurate to ~ max(m,n) u σ₁ absolute,
    # and the rounding of A to float32/complex64 moves σ by <= u32 √k (Weyl, see with_condition)
    S_expected = G.singular_values(5, 30.0)
    assert float((R.svdvals(A) - S_expected).abs().max()) < 2.0**-24 * math.sqrt(5) + 8 * 8 * U64


def test_nonfinite_svd_gives_nan_not_an_exception():
    A = torch.eye(3).expand(2, 3, 3).clone()
    A[1, 0, 0] = float("nan")
    S = R.svdvals(A)
    assert S[0].tolist() == [1.0, 1.0, 1.0] and torch.isnan(S[1]).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_pinv_and_lstsq_rank_deficient(dtype):
    m, n, r = 9, 6, 3
    A = G.rank_deficient(m, n, r, kappa=10.0, batch=(2,), dtype=dtype, seed=8)
    wide = torch.complex128 if dtype.is_complex else torch.float64
    # the rounded matrix has σ_{r+1..} <= u32 √r ≈ 1e-7 < eps32·max(m,n) ≈ 1e-6 (the default cut):
    # the reference drops exactly the 3 noise singular values, as a float32 pinv would
    Ap = R.pinv(A)
    assert Ap.shape == (2, n, m)
    assert (torch.linalg.matrix_rank(Ap, rtol=1e-10) == r).all()
    # Moore-Penrose condition A⁺ A A⁺ = A⁺: the kept singular triplets are those of A itself
    # (A V_r = U_r S_r), so it holds up to the float64 SVD's backward error c·m·n·u64 (c = 10)
    # amplified by κ(A_r) = 10 (relative to ‖A⁺‖)
    kappa_r = 10.0
    resid = (Ap @ A.to(wide) @ Ap - Ap).abs().max() / Ap.abs().max()
    assert float(resid) < 10 * m * n * U64 * kappa_r
    B = G.random(m, 2, batch=(2,), dtype=dtype, seed=9)
    sol = R.lstsq(A, B)
    assert sol.solution.shape == (2, n, 2) and sol.rank.tolist() == [r, r]
    assert sol.residuals.numel() == 0  # rank-deficient: torch leaves residuals empty too
    # the minimum-norm solution is A⁺ B (same truncation; both from one backward-stable SVD)
    assert float(M.forward_error(sol.solution, Ap @ B.to(wide)).max()) < 10 * m * n * U64 * kappa_r

    # full rank, tall: residuals are the squared column norms of B − AX
    Af = G.with_condition(n, 10.0, m=m, batch=(2,), dtype=dtype, seed=10).to(wide)
    res = R.lstsq(Af, B)
    assert res.residuals.shape == (2, 2)
    Bw = B.to(wide)
    Rr = Bw - Af @ res.solution
    assert torch.allclose(res.residuals, (Rr.abs() ** 2).sum(-2), rtol=1e-12, atol=0)
    # normal equations: X̂ is the exact LS solution of (A + ΔA, B + ΔB), ‖ΔA‖ <= c m n u ‖A‖,
    # ‖ΔB‖ <= c m n u ‖B‖ (c = 10), so ‖Aᴴ r̂‖ <= c m n u ‖A‖ (‖r̂‖ + ‖B‖ + ‖A‖‖X̂‖)
    nrm = torch.linalg.matrix_norm
    bound = 10 * m * n * U64 * nrm(Af, 2) * (nrm(Rr, 2) + nrm(Bw, 2) + nrm(Af, 2) * nrm(res.solution, 2))
    assert (nrm(Af.mH @ Rr, 2) < bound).all()
    # against torch's gelsd: LS condition κ + κ² ‖r‖/(‖A‖‖x‖) (Wedin), two solvers -> factor 2
    tsol = torch.linalg.lstsq(Af, Bw, driver="gelsd").solution
    kappa = 10.0
    cond_ls = kappa + kappa**2 * nrm(Rr, 2) / (nrm(Af, 2) * nrm(res.solution, 2))
    fe = M.forward_error(res.solution, tsol)
    assert (fe < 2 * 10 * m * n * U64 * cond_ls).all()


def test_broadcasting_and_errors():
    A = G.random(4, batch=(3, 1), dtype=torch.float64, seed=11)
    B = G.random(4, 2, batch=(5,), dtype=torch.float64, seed=12)
    assert R.solve(A, B).shape == (3, 5, 4, 2)
    assert R.solve_triangular(A, B, upper=True).shape == (3, 5, 4, 2)
    with pytest.raises(ValueError, match="square"):
        R.inv(torch.ones(3, 4))
    with pytest.raises(TypeError, match="floating"):
        R.det(torch.ones(3, 3, dtype=torch.int32))
    with pytest.raises(ValueError, match="mode"):
        R.qr(torch.ones(3, 3), mode="economic")
    # empty matrices follow torch
    assert R.svd(torch.zeros(0, 3))[1].shape == (0,)
    assert R.det(torch.zeros(2, 0, 0)).tolist() == [1.0, 1.0]
    assert R.solve(torch.zeros(0, 0), torch.zeros(0, 2)).shape == (0, 2)
    # inputs are never modified
    A0 = A.clone()
    R.lu_factor(A), R.svd(A), R.qr(A), R.pinv(A), R.det(A)
    assert torch.equal(A, A0)


def test_pinv_hermitian_and_underdetermined_lstsq():
    # Hermitian input: the eigh path and the SVD path compute the same pseudo-inverse (both
    # backward stable in float64, κ = 20: agreement within 2·c·n·u64·κ, c = 10)
    n = 6
    Q = G.haar(n, dtype=torch.complex128, seed=15)
    lam = torch.tensor([3.0, -2.0, 1.0, 0.5, -0.25, 0.15], dtype=torch.float64)
    H = (Q * lam.to(Q.dtype)) @ Q.mH
    H = (H + H.mH) / 2
    P1, P2 = R.pinv(H, hermitian=True), R.pinv(H)
    assert float(M.forward_error(P1, P2)) < 2 * 10 * n * U64 * 20
    # underdetermined (m < n): the minimum-norm solution lies in the row space of A and solves
    # A X = B (consistent system): backward error in float64 units below the pass mark
    A = G.with_condition(7, 10.0, m=4, dtype=torch.float64, seed=16)
    B = G.random(4, 2, dtype=torch.float64, seed=17)
    X = R.lstsq(A, B).solution
    assert X.shape == (7, 2)
    assert float(M.solve_ratio(A, X, B, u=U64)) < M.PASS_RATIO  # A X = B, column-wise xGET02 form
    # row space: X = Aᴴ Y for some Y, i.e. (I − A⁺A) X = 0 up to c·n·u64·κ
    Pnull = torch.eye(7, dtype=torch.float64) - R.pinv(A) @ A
    assert float((Pnull @ X).abs().max() / X.abs().max()) < 10 * 7 * U64 * 10


def test_pinv_lstsq_default_cutoff_is_torchs():
    # torch: rtol = finfo(A.dtype).eps · max(m, n) (eps, not u). A float64 matrix with
    # σ = (1, …, 1, 1e-15) and max(m, n) = 6: eps·6 = 1.33e-15 > 1e-15 > u·6 = 6.7e-16, so the
    # smallest σ is dropped under torch's rule and would be kept under a u-based one.
    n = 6
    Q1, Q2 = G.haar(n, dtype=torch.float64, seed=21), G.haar(n, dtype=torch.float64, seed=22)
    S = torch.tensor([1.0] * (n - 1) + [1e-15], dtype=torch.float64)
    A = (Q1 * S) @ Q2.mT
    s = R.svdvals(A)
    # the float64 construction moves σ₆ by O(n·u64) (Weyl; Q's orthogonality and one rounding per
    # entry), so check the precondition itself: σ₆ lies between u·6 and the cut eps·6
    assert 6.7e-16 < float(s[-1]) < 1.33e-15
    assert int(torch.linalg.matrix_rank(R.pinv(A), rtol=1e-12)) == n - 1
    assert int(R.lstsq(A, torch.ones(n, 1, dtype=torch.float64)).rank) == n - 1
    assert int(torch.linalg.matrix_rank(torch.linalg.pinv(A), rtol=1e-12)) == n - 1  # torch agrees
