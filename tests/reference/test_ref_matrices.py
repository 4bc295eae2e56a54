"""Tests of reference.matrices: every generator delivers the property it promises, within a
tolerance derived from the one rounding to the output dtype.

Notation: u = unit roundoff of the output dtype; rounding gives |ΔA| <= u|A| entrywise, hence
‖ΔA‖₂ <= ‖ΔA‖_F <= u‖A‖_F, and by Weyl every singular value moves by at most that (absolute).
Singular values are measured with the float64 SVD (reference.lapack), whose absolute error is
<= p·u64·σ₁ with p = max(m, n) (LAPACK Users' Guide, §4.9), or with reference.mp for relative
accuracy.
"""

from __future__ import annotations

import math

import pytest
import torch

from reference import lapack as R
from reference import matrices as G
from reference import metrics as M
from reference import mp as MP

U64 = 2.0**-53
ALL = [torch.float32, torch.complex64, torch.float64, torch.complex128]


def _u(dt):
    return M.unit_roundoff(dt)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("mode", ["geometric", "arithmetic", "cluster", "cluster_low", "random"])
def test_with_condition_hits_kappa_and_profile(dtype, mode):
    n = 12
    kappa = 1e3 if dtype in (torch.float32, torch.complex64) else 1e9
    A = G.with_condition(n, kappa, mode, batch=(3,), dtype=dtype, seed=1)
    assert A.shape == (3, n, n) and A.dtype == dtype
    S = R.svdvals(A)
    # each σ_i within e = u‖A‖_F (rounding, Weyl; ‖A‖_F = ‖σ‖₂ <= √n) + float64 construction
    # and measurement (2 n u64 for the Haar factors' orthogonality and p·u64 for the SVD)
    prescribed = G.singular_values(n, kappa, mode, seed=None) if mode != "random" else None
    e = _u(dtype) * math.sqrt(n) + 3 * n * U64
    if prescribed is not None:
        assert float((S - prescribed).abs().max()) <= e
    # κ = σ₁/σ_n within (1 − e)/(1/κ + e) .. (1 + e)/(1/κ − e)
    k = S[..., 0] / S[..., -1]
    lo, hi = (1 - e) / (1 / kappa + e), (1 + e) / (1 / kappa - e)
    assert (k >= lo).all() and (k <= hi).all(), (k, lo, hi)


def test_singular_values_profiles_exact():
    assert G.singular_values(4, 1e6).tolist() == pytest.approx([1, 1e-2, 1e-4, 1e-6], rel=1e-14)
    assert G.singular_values(3, 10, "arithmetic").tolist() == pytest.approx([1, 0.55, 0.1], rel=1e-14)
    assert G.singular_values(3, 10, "cluster").tolist() == [1, 1, 0.1]
    assert G.singular_values(3, 10, "cluster_low").tolist() == [1, 0.1, 0.1]
    S = G.singular_values(50, 1e5, "random", seed=0)
    assert float(S[0]) == 1.0 and float(S[-1]) == 1e-5 and (S[1:] <= S[:-1]).all()
    with pytest.raises(ValueError, match="kappa"):
        G.singular_values(3, 0.5)
    with pytest.raises(ValueError, match="mode"):
        G.singular_values(3, 10, "log")


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_near_singular_and_rank_deficient(dtype):
    u = _u(dtype)
    n = 10
    A = G.near_singular(n, 1e-3, batch=(2,), dtype=dtype, seed=2)
    S = R.svdvals(A)
    e = u * math.sqrt(n) + 3 * n * U64  # Weyl bound of the rounding, as above
    assert ((S[..., :-1] - 1).abs() <= e).all() and ((S[..., -1] - 1e-3).abs() <= e).all()
    m, n, r = 12, 9, 4
    B = G.rank_deficient(m, n, r, kappa=100.0, batch=(2,), dtype=dtype, seed=3)
    S = R.svdvals(B)
    e = u * math.sqrt(r) + 3 * m * U64  # ‖B‖_F = ‖σ‖₂ <= √r
    assert (S[..., r:] <= e).all()  # zero in float64, rounding noise after
    assert ((S[..., r - 1] - 1e-2).abs() <= e).all()
    with pytest.raises(ValueError, match="rank"):
        G.rank_deficient(3, 4, 5)


def test_graded_singular_values_to_high_relative_accuracy():
    # Q D (and D Q, square) with Haar Q: σ = diag(D) exactly in exact arithmetic. Rounding to
    # float32 is (Q + ΔQ)D with |ΔQ| <= u|Q|, which moves σ_i by a relative <= ‖ΔQ Q⁻¹‖₂ <= u√n
    # (Demmel–Veselić); Q's float64 departure from orthogonality adds <= 2n u64. The σ_i span
    # 30 decades, so a merely absolutely accurate SVD (float64 LAPACK) cannot resolve them:
    # mpmath at raised precision does (reference.mp.svdvals), and must.
    n, dec = 6, 30.0
    d = 10.0 ** (-dec * torch.arange(n, dtype=torch.float64) / (n - 1))
    bound = 2.0**-24 * math.sqrt(n) + 2 * n * U64
    for side in ("cols", "rows"):
        A = G.graded(n, decades=dec, side=side, dtype=torch.float32, seed=4)
        # permuting rows and columns keeps σ; the reversed grading is the hard order
        for X in (A, A.flip(-2).flip(-1)):
            S = MP.svdvals(X, dps=20)
            assert float(M.relative_error(S, d).max()) <= bound
    # the power of this test: mpmath's SVD at 20 digits *without* the precision compensation
    # is off by orders of magnitude on the reversed grading (absolute accuracy 1e-20 ≫ 1e-30)
    import mpmath

    with mpmath.mp.workdps(20):
        raw = mpmath.mp.svd_r(MP.to_mpmath(A.flip(-2).flip(-1).double()), compute_uv=False)
    raw = torch.tensor(sorted((float(x) for x in raw), reverse=True), dtype=torch.float64)
    assert float(M.relative_error(raw, d).max()) > 1.0


def test_kahan_matches_theory():
    # K = diag(s^i)(I − cN): upper triangular, diag s^i, and the closed-form inverse
    # (K⁻¹)_ij = c(1+c)^{j−i−1}/s^{j−1} (j > i), 1/s^{i−1} (i = j)  (Higham §8.3)
    n, theta = 12, 1.2
    s, c = math.sin(theta), math.cos(theta)
    K = G.kahan(n, theta, dtype=torch.float64)
    assert torch.equal(K, K.triu())
    assert torch.allclose(torch.diagonal(K), s ** torch.arange(n, dtype=torch.float64), rtol=4 * U64, atol=0)
    Kinv = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        Kinv[i, i] = 1 / s**i
        for j in range(i + 1, n):
            Kinv[i, j] = c * (1 + c) ** (j - i - 1) / s**j
    # the generated K is the exact K rounded entrywise (|ΔK| <= u|K|) so, to first order,
    # |K̃⁻¹ − K⁻¹| <= u |K⁻¹||K||K⁻¹|  (doubled for second-order terms and the reference's error)
    Kinv_ref = MP.inv(K, dps=30)
    bound = 2 * U64 * (Kinv.abs() @ K.abs() @ Kinv.abs()) + 4 * U64 * Kinv.abs()
    assert ((Kinv_ref - Kinv).abs() <= bound).all()
    # ill-conditioned as theory says: κ₂ >= ‖K‖₂ · (K⁻¹)_{1n} = c(1+c)^{n−2}/s^{n−1} · ‖K‖₂
    lower = float(torch.linalg.matrix_norm(K, 2)) * c * (1 + c) ** (n - 2) / s ** (n - 1)
    assert float(MP.cond(K)) >= lower * (1 - 1e-10)
    # complex variant: D K Dᴴ has the same singular values
    Kc = G.kahan(n, theta, dtype=torch.complex128, seed=5)
    assert torch.equal(Kc, Kc.triu())
    assert float(M.relative_error(R.svdvals(Kc), R.svdvals(K)).max()) < 10 * n * U64 * float(R.cond(K))


@pytest.mark.parametrize("dtype", ALL)
def test_wilkinson_growth_is_two_to_the_n_minus_one(dtype):
    n = 24
    W = G.wilkinson_growth(n, batch=(2,), dtype=dtype, seed=6)
    for LU, piv in (torch.linalg.lu_factor(W), R.getrf(W)[:2]):
        # no row interchange, and U_nn = 2^{n−1} W_nn exactly (all arithmetic is exact)
        assert (piv == torch.arange(1, n + 1, dtype=torch.int32)).all()
        assert torch.equal(LU[..., -1, -1], 2.0 ** (n - 1) * W[..., -1, -1])
        growth = LU.abs().amax((-2, -1)) / W.abs().amax((-2, -1))
        assert torch.allclose(
            growth.double(), torch.full((2,), 2.0 ** (n - 1), dtype=torch.float64), rtol=2 * _u(dtype), atol=0
        )


def test_hilbert_like():
    H = G.hilbert_like(8, dtype=torch.float64)
    i = torch.arange(8, dtype=torch.float64)
    assert torch.equal(H, 1.0 / (i[:, None] + i + 1))
    # κ₂ of the exact H₈ (rational entries, mpmath at 60 digits: absolute error 1e-60 is far
    # below σ₈ ≈ 1e-10). The rounded H moves σ₈ by <= u64‖H‖_F ≈ 2.3e-16 (Weyl), i.e. relative
    # <= 2.3e-16/σ₈(H₈), and σ₁ by much less; κ of the rounded matrix is within twice that.
    import mpmath

    with mpmath.mp.workdps(60):
        Hx = mpmath.mp.matrix(8, 8)
        for a in range(8):
            for b in range(8):
                Hx[a, b] = mpmath.mpf(1) / (a + b + 1)
        sx = mpmath.mp.svd_r(Hx, compute_uv=False)
        s1, s8 = float(max(sx)), float(min(sx))
    rel = 2 * U64 * float(torch.linalg.matrix_norm(H)) / s8
    assert abs(float(MP.cond(H)) / (s1 / s8) - 1) < rel
    C = G.hilbert_like(5, kind="cauchy", batch=(2,), dtype=torch.complex64, seed=7)
    assert C.shape == (2, 5, 5) and C.dtype == torch.complex64


def test_scaled_extreme_scales():
    A = G.random(6, batch=(2,), dtype=torch.float32, seed=8)
    for scale in (1e-30, 1e30):
        As = G.scaled(A, scale)
        assert As.dtype == torch.float32 and torch.isfinite(As).all()
        # one rounding: |fl(a·s) − a·s| <= u|a·s|
        exact = A.double() * scale
        assert ((As.double() - exact).abs() <= 2.0**-24 * exact.abs()).all()
    assert torch.equal(G.scaled(A, 2.0**100), A * 2.0**100)  # powers of two are exact
    with pytest.raises(ValueError, match="overflow"):
        G.scaled(A, 1e39)
    with pytest.raises(ValueError, match="underflow"):
        G.scaled(A, 1e-50)
    # scale-invariance of the test ratio: LU of A·2^100 has the same ratio as LU of A
    r1 = M.lu_factor_ratio(A, *torch.linalg.lu_factor(A))
    A2 = G.scaled(A, 2.0**100)
    r2 = M.lu_factor_ratio(A2, *torch.linalg.lu_factor(A2))
    assert torch.allclose(r1, r2, rtol=1e-12, atol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_triangular_kinds(dtype):
    n = 32
    for upper in (False, True):
        T = G.triangular(n, upper, kind="well", kappa=50.0, dtype=dtype, seed=9)
        assert torch.equal(T, T.triu() if upper else T.tril())
        # R of the QR of a κ = 50 matrix: κ(R) = 50 up to the float64 construction (n u64 κ)
        assert abs(float(R.cond(T)) / 50.0 - 1) < 10 * n * U64 * 50
        Tu = G.triangular(n, upper, unit=True, kind="well", dtype=dtype, seed=9)
        assert (torch.diagonal(Tu) == 1).all() and float(R.cond(Tu)) <= 3.0  # (1+½)/(1−½)
        Tg = G.triangular(n, upper, unit=True, kind="gaussian", dtype=dtype, seed=9)
        assert (torch.diagonal(Tg) == 1).all() and torch.equal(Tg, Tg.triu() if upper else Tg.tril())
    # fill: the unread part is filled, the read part unchanged
    T0 = G.triangular(8, unit=True, kind="gaussian", dtype=dtype, seed=10)
    Tn = G.triangular(8, unit=True, kind="gaussian", dtype=dtype, seed=10, fill=float("nan"))
    upper_part = torch.ones(8, 8, dtype=torch.bool).triu()  # incl. the unit diagonal (unread)
    assert torch.isnan(Tn[upper_part]).all() and torch.equal(Tn[~upper_part], T0[~upper_part])


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_deltanet_triangle(dtype):
    n = 64
    L = G.triangular(n, unit=True, kind="deltanet", batch=(2, 3), dtype=dtype, seed=11)
    assert L.shape == (2, 3, n, n) and torch.equal(L, L.tril())
    assert (torch.diagonal(L, dim1=-2, dim2=-1) == 1).all()
    # |β_i ⟨k_i, k_j⟩ e^{g_i − g_j}| < 1: β ∈ (0,1), unit keys (Cauchy–Schwarz), decay <= 1
    assert float(L.tril(-1).abs().max()) < 1.0
    # default keys (d = 128, random) are nearly orthogonal: a well-conditioned chunk
    assert float(R.cond(L).max()) < 10
    # the convention: FLA's reference loop (chunk_gated_delta_rule, torch path) starts from
    # attn = −(β K Kᵀ ⊙ Γ) strictly lower and turns it into T = (I − attn)⁻¹ row by row; the
    # generated L (sign=+1) is I − attn, so the loop applied to attn = −(L − I) must give L⁻¹
    Ld = G.triangular(16, unit=True, kind="deltanet", key_correlation=0.9, dtype=torch.float64, seed=13)
    attn = -(Ld - torch.eye(16, dtype=torch.float64))
    for i in range(1, 16):
        row = attn[i, :i].clone()
        attn[i, :i] = row + (row.unsqueeze(-1) * attn[:i, :i]).sum(-2)
    T = attn + torch.eye(16, dtype=torch.float64)
    assert float(M.inverse_ratio(Ld, T, u=U64)) < M.PASS_RATIO
    # sign=−1 with correlated keys and no gating approaches I − strict-lower ones, whose inverse
    # has entries 2^{i−j−1}: condition numbers grow exponentially with n
    Lc = G.triangular(
        n,
        unit=True,
        kind="deltanet",
        key_correlation=0.99,
        gated=False,
        sign=-1.0,
        dtype=torch.float64,
        seed=12,
    )
    assert float(R.cond(Lc)) > 1e6
    with pytest.raises(ValueError, match="unit"):
        G.triangular(n, kind="deltanet")


def test_reproducibility_and_argument_errors():
    a = G.random(5, 3, batch=4, dtype=torch.complex64, seed=13)
    assert a.shape == (4, 5, 3) and torch.equal(a, G.random(5, 3, batch=4, dtype=torch.complex64, seed=13))
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(G.with_condition(4, 10, generator=g1), G.with_condition(4, 10, generator=g2))
    # complex Gaussian entries have E|z|² = 1: the mean of |z|² over 10⁴ samples is 1 ± 4·(1/√10⁴)
    z = G.random(100, dtype=torch.complex128, seed=14)
    assert abs(float((z.abs() ** 2).mean()) - 1) < 0.04
    with pytest.raises(ValueError, match="either generator= or seed="):
        G.random(3, seed=1, generator=torch.Generator())
    with pytest.raises(TypeError, match="dtype"):
        G.random(3, dtype=torch.float16)
    with pytest.raises(ValueError, match="non-negative"):
        G.random(-1)
    assert G.haar(5, 3, dtype=torch.float64, seed=0).shape == (5, 3)
    assert G.with_condition(0, 10).shape == (0, 0)


GENERATORS = {
    "random": lambda **kw: G.random(5, 4, **kw),
    "with_condition": lambda **kw: G.with_condition(4, 10.0, m=5, **kw),
    "near_singular": lambda **kw: G.near_singular(4, 1e-3, **kw),
    "rank_deficient": lambda **kw: G.rank_deficient(5, 4, 2, **kw),
    "graded": lambda **kw: G.graded(4, decades=6, m=5, **kw),
    "kahan": lambda **kw: G.kahan(4, **kw),
    "wilkinson_growth": lambda **kw: G.wilkinson_growth(4, **kw),
    "hilbert_like": lambda **kw: G.hilbert_like(4, **kw),
    "cauchy": lambda **kw: G.hilbert_like(4, kind="cauchy", **kw),
    "triangular": lambda **kw: G.triangular(4, **kw),
    "triangular_well": lambda **kw: G.triangular(4, kind="well", **kw),
    "deltanet": lambda **kw: G.triangular(4, unit=True, kind="deltanet", key_dim=8, **kw),
}


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", list(GENERATORS))
def test_every_generator_every_dtype_and_batch(name, dtype):
    A = GENERATORS[name](batch=(2, 3), dtype=dtype, seed=20)
    assert A.dtype == dtype and A.device.type == "cpu" and A.shape[:2] == (2, 3)
    assert torch.isfinite(A).all()
    if dtype.is_complex:  # a genuinely complex matrix, not a real one in complex storage
        assert float(A.imag.abs().max()) > 0
    # seeded: reproducible
    assert torch.equal(A, GENERATORS[name](batch=(2, 3), dtype=dtype, seed=20))
