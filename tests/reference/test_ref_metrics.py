"""Tests of reference.metrics: every ratio is checked against a value derived by hand.

The construction used throughout: small-integer (or dyadic) matrices whose products are exact in
float32 and float64, so a residual is *exactly* zero for the exact answer, and a perturbation of one
entry by a power of two Δ gives a residual we can write down exactly. A metric with the wrong norm
(∞ instead of 1, |Re|+|Im| instead of |z|), the wrong u, a missing factor n/m, or wrong batching
gives a different number and fails.
"""

from __future__ import annotations

import math

import pytest
import torch

from reference import metrics as M

U32 = 2.0**-24
U64 = 2.0**-53


def _int_matrix(shape, seed, lo=-4, hi=5, cplx=False):
    g = torch.Generator().manual_seed(seed)
    A = torch.randint(lo, hi, shape, generator=g).to(torch.float64)
    if cplx:
        A = torch.complex(A, torch.randint(lo, hi, shape, generator=g).to(torch.float64))
    return A


def _unimodular(n, seed, cplx=False):
    """Integer matrix with integer inverse: L U, L unit lower, U unit upper, small integers."""
    L = _int_matrix((n, n), seed, -2, 3, cplx).tril(-1) + torch.eye(n)
    U = _int_matrix((n, n), seed + 1, -2, 3, cplx).triu(1) + torch.eye(n)
    A = L @ U
    Ainv = torch.linalg.solve_triangular(
        U,
        torch.linalg.solve_triangular(L, torch.eye(n, dtype=A.dtype), upper=False, unitriangular=True),
        upper=True,
        unitriangular=True,
    )
    return A, Ainv.round() if not cplx else torch.complex(Ainv.real.round(), Ainv.imag.round())


def test_unit_roundoff():
    assert M.unit_roundoff(torch.float32) == 2.0**-24
    assert M.unit_roundoff(torch.complex64) == 2.0**-24
    assert M.unit_roundoff(torch.float64) == 2.0**-53
    assert M.unit_roundoff(torch.complex128) == 2.0**-53
    assert M.PASS_RATIO == 30.0
    with pytest.raises(TypeError, match="floating"):
        M.unit_roundoff(torch.int32)


@pytest.mark.parametrize("cplx", [False, True])
@pytest.mark.parametrize("dtype_real", [torch.float32, torch.float64])
def test_solve_ratio_exact_and_perturbed(cplx, dtype_real):
    dt = {torch.float32: torch.complex64, torch.float64: torch.complex128}[dtype_real] if cplx else dtype_real
    u = M.unit_roundoff(dt)
    n, k = 5, 3
    A = _int_matrix((n, n), 1, cplx=cplx)
    X = _int_matrix((n, k), 2, cplx=cplx)
    B = A @ X  # small integers: exact in float32 and float64
    A_, X_, B_ = A.to(dt), X.to(dt), B.to(dt)
    assert float(M.solve_ratio(A_, X_, B_)) == 0.0  # exact solution: zero residual -> ratio 0
    # perturb X[i, j] by delta: residual column j is exactly -delta * A[:, i], all others 0, so
    # ratio = |delta| ||A[:, i]||_1 / (||A||_1 ||x'_j||_1 u)   (1-norm, |z| for complex)
    i, j, delta = 2, 1, 0.25
    Xp = X.clone()
    Xp[i, j] += delta
    expect = delta * A[:, i].abs().sum() / (A.abs().sum(0).max() * Xp[:, j].abs().sum() * u)
    got = M.solve_ratio(A_, Xp.to(dt), B_)
    assert got.dtype == torch.float64 and got.shape == ()
    assert abs(float(got) / float(expect) - 1) < 1e-12
    assert float(got) > M.PASS_RATIO  # a wrong answer fails the pass mark
    # left=False: X A = B; perturbing X[i, j] makes residual row i = -delta * A[j, :], whose
    # 1-norm over ||A||_inf ||x'_i (row)||_1 u is the ratio of the transposed system
    Bl = X.mT @ A
    Xl = X.mT.clone()
    Xl[j, i] += delta
    expect_l = delta * A[i, :].abs().sum() / (A.abs().sum(1).max() * Xl[j, :].abs().sum() * u)
    assert float(M.solve_ratio(A_, X.mT.to(dt), Bl.to(dt), left=False)) == 0.0
    got_l = M.solve_ratio(A_, Xl.to(dt), Bl.to(dt), left=False)
    assert abs(float(got_l) / float(expect_l) - 1) < 1e-12


def test_solve_ratio_vector_rhs_u_override_and_batching():
    A = _int_matrix((3, 1, 4, 4), 3)
    X = _int_matrix((2, 4, 1), 4)  # batch (2,) broadcasts against (3, 1) -> (3, 2)
    B = A @ X
    r = M.solve_ratio(A, X, B)
    assert r.shape == (3, 2) and r.dtype == torch.float64 and (r == 0).all()
    Xp = X.clone()
    Xp[1, 0, 0] += 1.0
    r = M.solve_ratio(A, Xp, B, u=1.0)  # u overridden: ratio = ||A e_0||_1/(||A||_1 ||x'||_1)
    for b in range(3):
        a = A[b, 0]
        expect = a[:, 0].abs().sum() / (a.abs().sum(0).max() * Xp[1].abs().sum())
        assert abs(float(r[b, 1]) / float(expect) - 1) < 1e-12
        assert float(r[b, 0]) == 0.0
    # torch.linalg.solve's vector rule: B of shape A.shape[:-1] is a batch of vectors
    Av = A[:, 0]
    xv = _int_matrix((3, 4), 5)
    bv = (Av @ xv.unsqueeze(-1)).squeeze(-1)
    xv[2, 3] += 2.0
    r = M.solve_ratio(Av, xv, bv)
    assert r.shape == (3,) and float(r[0]) == float(r[1]) == 0.0
    expect = 2.0 * Av[2, :, 3].abs().sum() / (Av[2].abs().sum(0).max() * xv[2].abs().sum() * U64)
    assert abs(float(r[2]) / float(expect) - 1) < 1e-12


def test_degenerate_conventions():
    Z = torch.zeros(3, 3)
    x = torch.zeros(3, 1)
    assert float(M.solve_ratio(Z, x, x)) == 0.0  # zero residual -> 0 even over a zero denominator
    assert math.isinf(float(M.solve_ratio(Z, x, torch.ones(3, 1))))  # nonzero / 0 -> inf
    A = torch.eye(3)
    Xn = torch.full((3, 1), float("nan"))
    assert math.isnan(float(M.solve_ratio(A, Xn, torch.ones(3, 1))))  # NaN never passes
    E = torch.zeros(0, 0)
    assert float(M.solve_ratio(E, torch.zeros(0, 2), torch.zeros(0, 2))) == 0.0
    assert float(M.inverse_ratio(E, E)) == 0.0


@pytest.mark.parametrize("cplx", [False, True])
def test_inverse_ratio(cplx):
    n = 5
    A, Ainv = _unimodular(n, 7, cplx)
    dt = torch.complex64 if cplx else torch.float32
    assert torch.equal((Ainv @ A), torch.eye(n, dtype=A.dtype))
    assert float(M.inverse_ratio(A.to(dt), Ainv.to(dt))) == 0.0
    # X' = X + delta e_i e_j^T: I - X'A = -delta e_i A[j, :]; its column sums are |delta||A[j, k]|,
    # so ||I - X'A||_1 = |delta| max_k |A[j, k]|; ratio = that / (n ||A||_1 ||X'||_1 u)
    i, j, delta = 1, 3, 0.5
    Xp = Ainv.clone()
    Xp[i, j] += delta
    expect = delta * A[j].abs().max() / (n * A.abs().sum(0).max() * Xp.abs().sum(0).max() * U32)
    got = M.inverse_ratio(A.to(dt), Xp.to(dt))
    assert abs(float(got) / float(expect) - 1) < 1e-12


@pytest.mark.parametrize("cplx", [False, True])
def test_lu_ratio_and_lu_factor_ratio(cplx):
    n = 6
    L = _int_matrix((n, n), 11, -1, 2, cplx).tril(-1) + torch.eye(n)  # |l_ij| <= 1 like GEPP
    U = _int_matrix((n, n), 12, cplx=cplx).triu() + 8 * torch.eye(n)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    P = torch.eye(n)[:, perm].to(L.dtype)
    A = P @ L @ U  # exact
    dt = torch.complex64 if cplx else torch.float32
    assert float(M.lu_ratio(A.to(dt), P.to(dt), L.to(dt), U.to(dt))) == 0.0
    # U' = U + delta e_i e_j^T: A - P L U' = -delta P L[:, i] e_j^T; ||.||_1 = |delta| ||L[:, i]||_1
    # ratio = |delta| ||L[:, i]||_1 / (n ||A||_1 u)
    i, j, delta = 2, 4, 0.125
    Up = U.clone()
    Up[i, j] += delta
    expect = delta * L[:, i].abs().sum() / (n * A.abs().sum(0).max() * U32)
    got = M.lu_ratio(A.to(dt), P.to(dt), L.to(dt), Up.to(dt))
    assert abs(float(got) / float(expect) - 1) < 1e-12
    # the packed form of torch.linalg.lu_factor gives the same number
    LU, piv = torch.linalg.lu_factor(A.to(dt))
    P2, L2, U2 = torch.linalg.lu(A.to(dt))
    assert torch.allclose(
        M.lu_factor_ratio(A.to(dt), LU, piv), M.lu_ratio(A.to(dt), P2, L2, U2), rtol=1e-12, atol=0
    )
    # torch's float32 LU is backward stable: ratio well below the pass mark
    assert float(M.lu_factor_ratio(A.to(dt), LU, piv)) < M.PASS_RATIO


def test_triangular_residual_ratio_reads_only_the_triangle():
    n, k = 6, 2
    for upper in (False, True):
        for unit in (False, True):
            T = _int_matrix((n, n), 21) + 6 * torch.eye(n)
            T = T.triu() if upper else T.tril()
            if unit:
                T = T - torch.diag(torch.diagonal(T)) + torch.eye(n)
            X = _int_matrix((n, k), 22)
            B = T @ X
            garbage = torch.full((n, n), float("nan"))
            keep = torch.ones(n, n, dtype=torch.bool)
            keep = keep.triu(1 if unit else 0) if upper else keep.tril(-1 if unit else 0)
            Tg = torch.where(keep, T, garbage)  # NaN where the solver must not look
            r = M.triangular_residual_ratio(Tg, X, B, upper, True, unit)
            assert float(r) == 0.0
            Xp = X.clone()
            Xp[1, 0] += 0.5
            # xTRT02: ||b - T x'||_1 / (||T||_1 ||x'||_1 u), no factor n
            expect = 0.5 * T[:, 1].abs().sum() / (T.abs().sum(0).max() * Xp[:, 0].abs().sum() * U64)
            r = M.triangular_residual_ratio(Tg, Xp, B, upper=upper, unitriangular=unit)
            assert abs(float(r) / float(expect) - 1) < 1e-12
            # right side: X T = B
            Br = X.mT @ T
            assert (
                float(M.triangular_residual_ratio(Tg, X.mT, Br, upper, left=False, unitriangular=unit)) == 0.0
            )


def _householder4():
    v = torch.ones(4, 1, dtype=torch.float64)
    return torch.eye(4, dtype=torch.float64) - 0.5 * (v @ v.mT)  # entries +-1/2, exactly orthogonal


def test_qr_ratios():
    Q = _householder4()
    assert torch.equal(Q.mT @ Q, torch.eye(4, dtype=torch.float64))
    R = _int_matrix((4, 3), 31).triu()
    A = Q[:, :3] @ R[:3]
    recon, orth = M.qr_ratios(A.float(), Q[:, :3].float(), R[:3].float())
    assert float(recon) == 0.0 and float(orth) == 0.0
    # R' = R + delta e_0 e_2^T: ||A - Q R'||_1 = |delta| ||Q[:, 0]||_1 = 2 |delta|  (m = 4)
    Rp = R[:3].clone()
    Rp[0, 2] += 0.25
    recon, orth = M.qr_ratios(A.float(), Q[:, :3].float(), Rp.float())
    assert abs(float(recon) / (2 * 0.25 / (4 * A.abs().sum(0).max() * U32)) - 1) < 1e-12
    assert float(orth) == 0.0
    # Q' = (1 + d) Q: I - Q'^T Q' = -(2d + d^2) I, 1-norm 2d + d^2, ratio (2d + d^2)/(m u)
    d = 2.0**-10
    _, orth = M.qr_ratios(A, (1 + d) * Q, torch.cat([R[:3], torch.zeros(1, 3, dtype=R.dtype)]))
    assert abs(float(orth) / ((2 * d + d * d) / (4 * U64)) - 1) < 1e-12


def _householder4_complex():
    v = torch.tensor([[1], [1j], [1], [-1j]], dtype=torch.complex128)
    return torch.eye(4, dtype=torch.complex128) - 0.5 * (v @ v.mH)  # entries ±1/2, ±i/2: unitary


def test_qr_and_svd_ratios_complex_use_the_conjugate_transpose():
    Q = _householder4_complex()
    assert torch.equal(Q.mH @ Q, torch.eye(4, dtype=torch.complex128))
    assert not torch.equal(Q.mT @ Q, torch.eye(4, dtype=torch.complex128))  # Qᵀ would be wrong
    R = _int_matrix((4, 4), 33, cplx=True).triu()
    A = Q @ R  # exact: Gaussian-integer multiples of 1/2
    recon, orth = M.qr_ratios(A.to(torch.complex64), Q.to(torch.complex64), R.to(torch.complex64))
    assert float(recon) == 0.0 and float(orth) == 0.0
    S = torch.tensor([3.0, 2.0, 1.0, 0.5], dtype=torch.float64)
    A = (Q * S.to(Q.dtype)) @ Q.mH
    r = M.svd_ratios(A, Q, S, Q.mH)
    assert float(r.recon) == float(r.u_orth) == float(r.v_orth) == 0.0


def test_svd_ratios():
    Ufull = _householder4()
    Vfull = torch.eye(3, dtype=torch.float64)[[2, 0, 1]]
    S = torch.tensor([4.0, 2.0, 0.5], dtype=torch.float64)
    A = (Ufull[:, :3] * S) @ Vfull  # 4 x 3, exact
    for U in (Ufull, Ufull[:, :3]):  # full_matrices True and False
        r = M.svd_ratios(A, U, S, Vfull)
        assert float(r.recon) == float(r.u_orth) == float(r.v_orth) == float(r.order) == 0.0
    # S'[0] = S[0] + delta: ||A - U S' Vh||_1 = |delta| ||u_0||_1 max_k |Vh[0, k]| = 2 |delta|
    Sp = S.clone()
    Sp[0] += 0.5
    r = M.svd_ratios(A.float(), Ufull.float(), Sp.float(), Vfull.float())
    expect = 0.5 * 2 / (max(4, 3) * A.abs().sum(0).max() * U32)
    assert abs(float(r.recon) / float(expect) - 1) < 1e-12
    # unsorted or negative singular values fail test 4
    assert math.isinf(float(M.svd_ratios(A, Ufull, S[[1, 0, 2]], Vfull).order))
    assert math.isinf(float(M.svd_ratios(A, Ufull, -S, Vfull).order))
    # torch's own SVD of a random matrix passes all four
    G = torch.randn(2, 7, 5, generator=torch.Generator().manual_seed(0), dtype=torch.complex64)
    r = M.svd_ratios(G, *torch.linalg.svd(G))
    assert r.recon.shape == (2,) and all(float(t.max()) < M.PASS_RATIO for t in r)


def test_forward_and_relative_error():
    x_ref = torch.tensor([[1.0, -4.0], [2.0, 0.0]], dtype=torch.float64)
    x = x_ref.clone()
    x[1, 1] = 0.5
    assert float(M.forward_error(x, x_ref)) == 0.5 / 4.0  # max|x - x_ref| / max|x_ref|
    fe = M.forward_error(x, x_ref, dim=-1)  # per row
    assert fe.tolist() == [0.0, 0.25]
    assert float(M.forward_error(x_ref, x_ref)) == 0.0
    assert math.isinf(float(M.forward_error(torch.ones(2), torch.zeros(2))))
    a = torch.tensor([1.0, 3.0, 0.0, float("inf"), 1.0], dtype=torch.float32)
    b = torch.tensor([1.0, 2.0, 0.0, float("inf"), 0.0], dtype=torch.float64)
    assert M.relative_error(a, b).tolist() == [0.0, 0.5, 0.0, 0.0, math.inf]
    z = M.relative_error(torch.tensor([1 + 1j]), torch.tensor([1j]))
    assert float(z) == 1.0  # |z| for complex


def test_bad_input_messages():
    with pytest.raises(TypeError, match="X must be a torch.Tensor"):
        M.solve_ratio(torch.eye(2), [[1.0]], torch.ones(2, 1))
    with pytest.raises(ValueError, match="A must have at least 2 dimensions"):
        M.inverse_ratio(torch.ones(3), torch.ones(3))
    with pytest.raises(TypeError, match="floating or complex"):
        M.lu_ratio(torch.eye(2, dtype=torch.int64), torch.eye(2), torch.eye(2), torch.eye(2))


def test_lstsq_ratio_exact_and_perturbed():
    Q = _householder4()
    Rr = torch.tensor([[2.0, 1.0], [0.0, 4.0]], dtype=torch.float64)
    A = Q[:, :2] @ Rr  # 4 x 2, exact
    X = torch.tensor([[1.0], [-2.0]], dtype=torch.float64)
    B = A @ X + Q[:, 2:] @ torch.tensor([[3.0], [1.0]], dtype=torch.float64)  # residual ⟂ range(A)
    assert float(M.lstsq_ratio(A, X, B)) == 0.0  # the exact LS solution: Aᴴ(B − AX) = 0 exactly
    # X' = X + Δe_0: Aᴴ R' = −Δ (AᴴA)[:, 0]; ratio = that 1-norm over the documented scale
    Xp = X.clone()
    Xp[0, 0] += 0.25
    R = B - A @ Xp
    num = 0.25 * (A.mT @ A)[:, 0].abs().sum()
    an = A.abs().sum(0).max()
    scale = R.abs().sum() + B.abs().sum() + an * Xp.abs().sum()
    expect = num / (4 * an * scale * U64)
    assert abs(float(M.lstsq_ratio(A, Xp, B)) / float(expect) - 1) < 1e-12
    # vector form, and torch's own float32 lstsq passes
    G_ = torch.Generator().manual_seed(3)
    Af = torch.randn(3, 20, 5, generator=G_)
    bf = torch.randn(3, 20, generator=G_)
    x = torch.linalg.lstsq(Af, bf.unsqueeze(-1)).solution.squeeze(-1)
    r = M.lstsq_ratio(Af, x, bf)
    assert r.shape == (3,) and float(r.max()) < M.PASS_RATIO


def test_growth_factor():
    n = 10
    W = torch.eye(n) - torch.ones(n, n).tril(-1)
    W[:, -1] = 1
    LU, _ = torch.linalg.lu_factor(W)
    assert float(M.growth_factor(W, LU)) == 2.0 ** (n - 1)  # Wilkinson: only the triangle read
    assert float(M.growth_factor(torch.zeros(2, 2), torch.zeros(2, 2))) == 0.0


def test_ratio_is_at_most_one_for_the_correctly_rounded_answer():
    # Calibration of "~1": X = fl32(X*) with X* the exact solution (B = A X* formed exactly in
    # float64 from integer data). Then ‖b_j − A x_j‖₁ = ‖A(x*_j − x_j)‖₁ <= ‖A‖₁ u ‖x*_j‖₁ and
    # ‖x_j‖₁ >= (1 − u)‖x*_j‖₁, so the ratio is <= 1/(1 − u) (+ the float64 residual's own
    # rounding, ~n·u64/u32 ≈ 1e-8): the pass mark 30 leaves a factor 30 for the algorithm.
    g = torch.Generator().manual_seed(5)
    A = torch.randint(-50, 51, (4, 8, 8), generator=g).double()
    Xs = torch.randn(4, 8, 3, generator=g, dtype=torch.float64)
    B = A @ Xs
    X = Xs.float()  # one rounding per entry
    r = M.solve_ratio(A, X, B)
    assert float(r.max()) <= 1 / (1 - U32) + 1e-7
    assert float(r.max()) > 0.01  # and it is not vacuously tiny: rounding errors are visible


def test_ratios_are_scale_invariant_and_batch_consistent():
    hyp = pytest.importorskip("hypothesis")
    st = pytest.importorskip("hypothesis.strategies")

    @hyp.given(k=st.integers(-60, 60), seed=st.integers(0, 2**16), n=st.integers(1, 6))
    def check(k, seed, n):
        # scaling A and B by 2^k (exact) leaves every ratio unchanged: the norms scale together
        g = torch.Generator().manual_seed(seed)
        A = torch.randn(2, n, n, generator=g)
        B = torch.randn(2, n, 2, generator=g)
        X = torch.linalg.solve(A, B)
        r1 = M.solve_ratio(A, X, B)
        r2 = M.solve_ratio(A * 2.0**k, X, B * 2.0**k)
        assert torch.allclose(r1, r2, rtol=1e-12, atol=0)
        LU, piv = torch.linalg.lu_factor(A)
        q1 = M.lu_factor_ratio(A, LU, piv)
        q2 = M.lu_factor_ratio(A * 2.0**k, LU * torch.where(torch.ones(n, n).triu().bool(), 2.0**k, 1.0), piv)
        assert torch.allclose(q1, q2, rtol=1e-12, atol=0)
        # a batch gives the same numbers as its elements one by one
        assert torch.equal(r1, torch.stack([M.solve_ratio(A[i], X[i], B[i]) for i in range(2)]))

    check()


def test_orthogonality_ratio():
    Q = _householder4_complex()
    assert float(M.orthogonality_ratio(Q[:, :3])) == 0.0
    # (1 + d) Q: ‖I − Q'ᴴQ'‖₁ = 2d + d², divided by m u
    d = 2.0**-12
    r = M.orthogonality_ratio(((1 + d) * Q).to(torch.complex64))
    assert abs(float(r) / ((2 * d + d * d) / (4 * U32)) - 1) < 1e-12
    assert M.orthogonality_ratio(torch.stack([Q, Q])).shape == (2,)
