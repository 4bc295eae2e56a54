"""Tests of reference.mp against *exact* rational arithmetic and against SciPy/LAPACK.

Exact references: the inputs are float64 numbers, i.e. dyadic rationals, so Python's ``Fraction``
(and a small complex-rational class) solve systems and compute determinants exactly. reference.mp
promises ``dps`` correct digits before rounding to float64, so against the exact answer its
normwise forward error is at most ``u64·(1 + 10**-dps) + 10**-dps`` per column (one rounding of
each component, ``|fl(y) − x| <= u|y| + |y − x|``): we assert ``<= 1.000001·u64``. That holds
only if the working precision was raised enough for the condition number — the cases include
κ ≈ 1e61, where 50 fixed digits would give no correct digit at all.

SciPy vs mpmath agreement (the oracles against each other) uses well-conditioned float32 input
and the float64 backward-stability bound ``κ·3n²·u64`` for LAPACK's side.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

from reference import lapack as R
from reference import matrices as G
from reference import metrics as M
from reference import mp as MP

U64 = 2.0**-53
EXACT = 1.000001 * U64  # see module docstring


class QC:
    """Exact complex rational (just what Gaussian elimination needs)."""

    __slots__ = ("re", "im")

    def __init__(self, re, im=0):
        self.re, self.im = Fraction(re), Fraction(im)

    def __add__(self, o):
        return QC(self.re + o.re, self.im + o.im)

    def __sub__(self, o):
        return QC(self.re - o.re, self.im - o.im)

    def __mul__(self, o):
        return QC(self.re * o.re - self.im * o.im, self.re * o.im + self.im * o.re)

    def __truediv__(self, o):
        d = o.re * o.re + o.im * o.im
        return QC((self.re * o.re + self.im * o.im) / d, (self.im * o.re - self.re * o.im) / d)

    def __bool__(self):
        return bool(self.re or self.im)

    def abs2(self):
        return self.re * self.re + self.im * self.im

    def to(self):
        return complex(float(self.re), float(self.im))


def _exact(t: torch.Tensor):
    t = t.detach().to(torch.complex128 if t.is_complex() else torch.float64)
    if t.is_complex():
        return [[QC(z.real, z.imag) for z in row] for row in t.tolist()]
    return [[QC(x) for x in row] for row in t.tolist()]


def _ge(A, B):
    """Exact Gaussian elimination: returns (X, det) for A X = B (B may have 0 columns)."""
    n = len(A)
    A = [row[:] + b[:] for row, b in zip(A, B)]
    det = QC(1)
    for k in range(n):
        p = next((i for i in range(k, n) if A[i][k]), None)
        if p is None:
            return None, QC(0)
        if p != k:
            A[k], A[p] = A[p], A[k]
            det = QC(0) - det
        det = det * A[k][k]
        for i in range(k + 1, n):
            f = A[i][k] / A[k][k]
            if f:
                A[i] = [x - f * y for x, y in zip(A[i], A[k])]
    m = len(A[0]) - n
    X = [[QC(0)] * m for _ in range(n)]
    for i in range(n - 1, -1, -1):
        for j in range(m):
            s = A[i][n + j]
            for q in range(i + 1, n):
                s = s - A[i][q] * X[q][j]
            X[i][j] = s / A[i][i]
    return X, det


def _to_tensor(X, cplx):
    if cplx:
        return torch.tensor([[x.to() for x in row] for row in X], dtype=torch.complex128)
    return torch.tensor([[float(x.re) for x in row] for row in X], dtype=torch.float64)


def _ill_2x2():
    # [[1, 2^150], [1, 2^150 + 2^98]]: det = 2^98 exactly, σ₁ ≈ 2^150.5, κ ≈ 1.3e61
    return torch.tensor([[1.0, 2.0**150], [1.0, 2.0**150 + 2.0**98]], dtype=torch.float64)


def _unimodular_huge(n=6, bits=20, seed=0):
    # A = L U, L/U unit triangular with integer entries up to 2^bits: det A = 1, the entries of A
    # (< n·2^(2 bits) < 2^53) are exact in float64, A⁻¹ is an integer matrix with entries up to
    # ~2^(bits·n): κ ≈ 1e67 for this seed (mp.cond), and Gaussian elimination on A is *not* exact, so an mp
    # solve at a fixed 40 digits would be wrong in every digit
    g = torch.Generator().manual_seed(seed)
    L = torch.randint(-(2**bits), 2**bits, (n, n), generator=g).double().tril(-1) + torch.eye(
        n, dtype=torch.float64
    )
    U = torch.randint(-(2**bits), 2**bits, (n, n), generator=g).double().triu(1) + torch.eye(
        n, dtype=torch.float64
    )
    return L @ U


def _cases():
    yield "random", G.random(6, dtype=torch.float64, seed=1)
    yield "random-complex", G.random(5, dtype=torch.complex128, seed=2)
    yield "hilbert8", G.hilbert_like(8, dtype=torch.float64)  # κ ≈ 1.5e10
    yield "kappa1e15", G.with_condition(6, 1e15, dtype=torch.float64, seed=3)
    yield "kappa1e14-complex", G.with_condition(4, 1e14, dtype=torch.complex128, seed=4)
    yield "kahan", G.kahan(20, 0.5, dtype=torch.float64)  # κ ≈ 1e16
    yield "ill-2x2", _ill_2x2()
    yield "unimodular-kappa1e67", _unimodular_huge()


@pytest.mark.parametrize("name,A", list(_cases()), ids=[c[0] for c in _cases()])
def test_solve_det_slogdet_exact(name, A):
    n = A.shape[-1]
    cplx = A.is_complex()
    B = G.random(n, 2, dtype=A.dtype, seed=5)
    Xe, de = _ge(_exact(A), _exact(B))
    X = MP.solve(A, B, dps=30)
    # per column: normwise error <= one rounding
    fe = M.forward_error(X, _to_tensor(Xe, cplx), dim=-2)
    assert float(fe.max()) <= EXACT, (name, fe)
    # det: relative error of one rounding (a float64 det here is far from over/underflow)
    d = MP.det(A)
    d_exact = de.to() if cplx else float(de.re)
    assert float(M.relative_error(d, torch.tensor(d_exact, dtype=d.dtype))) <= EXACT
    # slogdet: |det|² = 2^e·x exactly with x in [1, 2) (a Fraction, rounded once to float), so
    # log|det| = (log x + e log 2)/2 evaluated with <= 3 roundings of terms <= |log|det|| + 1,
    # plus one rounding of mp's result
    sign, logabs = MP.slogdet(A)
    a2 = de.abs2()
    e = a2.numerator.bit_length() - a2.denominator.bit_length()
    x = float(a2 / Fraction(2) ** e)
    log_exact = 0.5 * (math.log(x) + e * math.log(2))
    assert abs(float(logabs) - log_exact) <= 4 * U64 * (abs(log_exact) + 1)
    assert abs(complex(sign) - d_exact / abs(d_exact)) <= 2 * U64


def test_inverse_exact_and_left_false():
    A = G.hilbert_like(6, dtype=torch.float64)
    eye = [[QC(int(i == j)) for j in range(6)] for i in range(6)]
    Xe, _ = _ge(_exact(A), eye)
    Xi = MP.inv(A)
    assert float(M.forward_error(Xi, _to_tensor(Xe, False), dim=-2).max()) <= EXACT
    # X A = B  <=>  Aᵀ Xᵀ = Bᵀ
    B = G.random(3, 6, dtype=torch.float64, seed=6)
    Xe, _ = _ge(_exact(A.mT), _exact(B.mT))
    X = MP.solve(A, B, left=False)
    assert float(M.forward_error(X.mT, _to_tensor(Xe, False), dim=-2).max()) <= EXACT
    # vector right-hand side, batched
    Ab = torch.stack([A, 2 * A])
    b = torch.ones(2, 6, dtype=torch.float64)
    x = MP.solve(Ab, b)
    assert x.shape == (2, 6) and torch.equal(x[1], MP.solve(A, b[0]) / 2)  # 2A x = b: exact scaling


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_solve_triangular_exact_all_variants(dtype):
    n = 12
    T = G.triangular(n, kind="gaussian", dtype=dtype, seed=7)  # Gaussian triangle: κ ~ 1e4..1e8
    B = G.random(n, 2, dtype=dtype, seed=8)
    cplx = dtype.is_complex
    for upper in (False, True):
        for unit in (False, True):
            Tt = T.mH.clone() if upper else T.clone()
            if unit:
                Tt.diagonal().fill_(1)
            garbage = G.triangular(n, upper, unit, kind="gaussian", dtype=dtype, seed=7, fill=float("nan"))
            keep = ~torch.isnan(garbage.real) if cplx else ~torch.isnan(garbage)
            Tn = torch.where(keep, Tt, torch.full((), float("nan"), dtype=dtype))  # NaN where unread
            for left in (True, False):
                Bx = B if left else B.mT
                A_sys, B_sys = (Tt, Bx) if left else (Tt.mT, Bx.mT)
                Xe, _ = _ge(_exact(A_sys), _exact(B_sys))
                X = MP.solve_triangular(Tn, Bx, upper=upper, left=left, unitriangular=unit)
                Xc = X if left else X.mT
                fe = M.forward_error(Xc, _to_tensor(Xe, cplx), dim=-2)
                assert float(fe.max()) <= EXACT, (upper, unit, left)


def test_exactly_singular():
    S = torch.tensor([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=torch.float64)
    assert float(MP.det(S)) == 0.0
    sign, logabs = MP.slogdet(S)
    assert float(sign) == 0.0 and float(logabs) == -math.inf
    s = MP.svdvals(S)
    assert float(s[-1]) == 0.0  # provably zero (exact_singularity_digits), not rounding noise
    # σ₁² + σ₂² = ‖S‖_F² = 285 exactly; two roundings of σ and one of the sum
    assert abs(float(s[0] ** 2 + s[1] ** 2) / 285 - 1) <= 6 * U64
    with pytest.raises(torch.linalg.LinAlgError, match="exactly singular"):
        MP.solve(S, torch.ones(3, 1, dtype=torch.float64))
    with pytest.raises(torch.linalg.LinAlgError, match=r"mp.inv.*batch element \(1,\)"):
        MP.inv(torch.stack([torch.eye(3, dtype=torch.float64), S]))
    assert float(MP.cond(S)) == math.inf
    assert MP.svdvals(torch.zeros(2, 3)).tolist() == [0.0, 0.0]


def test_svdvals_relative_accuracy():
    # product of the singular values = |det| (exact); each σ correctly rounded -> k roundings
    for A in (
        _ill_2x2(),
        _unimodular_huge(),
        G.with_condition(5, 1e12, dtype=torch.float64, seed=9),
        G.random(4, dtype=torch.complex128, seed=10),
    ):
        s = MP.svdvals(A, dps=30)
        _, de = _ge(_exact(A), [[] for _ in range(A.shape[-1])])
        absdet = math.sqrt(float(de.abs2()))
        k = s.numel()
        prod = math.prod(float(x) for x in s)
        assert abs(prod / absdet - 1) <= (k + 2) * U64
    # for the 2 x 2 case: σ₂ = det/σ₁ with σ₁ ≈ 2^150.5 and σ₂ ≈ 1.6e-16, κ ≈ 1e61: 50 fixed
    # digits could not resolve σ₂ at all; the compensated reference gets it to the last bit
    s = MP.svdvals(_ill_2x2())
    assert float(s[0] / s[1]) > 1e61


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_scipy_and_mpmath_agree_on_well_conditioned_input(dtype):
    # LAPACK (float64) GEPP is backward stable: its answer is within κ_∞·3n³ρu64 of the exact
    # one (Higham ASNA Thm 9.4: ‖ΔA‖_∞ <= 3n u ‖L‖_∞‖U‖_∞ <= 3n³ρ u ‖A‖_∞; κ_∞ <= n κ₂), and mp
    # returns the exact one to one rounding; so |LAPACK − mp| <= e + u64 (normwise), with the
    # growth factor ρ measured. κ₂ is prescribed (with_condition). The same e bounds the
    # triangular solve (trsm: |ΔT| <= n u |T|, a special case).
    n, kappa = 10, 100.0
    A = G.with_condition(n, kappa, batch=(2,), dtype=dtype, seed=11)
    B = G.random(n, 2, batch=(2,), dtype=dtype, seed=12)
    rho = float(M.growth_factor(A, R.lu_factor(A)[0]).max())
    e = n * kappa * 3 * n**3 * rho * U64 + U64
    assert float(M.forward_error(R.solve(A, B), MP.solve(A, B), dim=-2).max()) <= e
    assert float(M.forward_error(R.inv(A), MP.inv(A), dim=-2).max()) <= e
    assert float(M.relative_error(R.det(A), MP.det(A)).max()) <= n * e  # det: n κ ‖ΔA‖/‖A‖
    s1, l1 = R.slogdet(A)
    s2, l2 = MP.slogdet(A)
    assert float((l1 - l2).abs().max()) <= n * e and float((s1 - s2).abs().max()) <= n * e
    T = G.triangular(n, kind="well", kappa=kappa, batch=(2,), dtype=dtype, seed=13)
    X1 = R.solve_triangular(T, B, upper=False)
    X2 = MP.solve_triangular(T, B, upper=False)
    assert float(M.forward_error(X1, X2, dim=-2).max()) <= e
    # singular values: LAPACK's are absolutely accurate, |Δσ| <= p·u64·σ₁, p = n (LUG §4.9)
    assert float((R.svdvals(A) - MP.svdvals(A)).abs().max()) <= n * U64 + U64
    c1, c2 = R.cond(A), MP.cond(A)
    assert float(M.relative_error(c1, c2).max()) <= 2 * n * U64 * kappa + 2 * U64


def test_cond_norms_exact_on_unimodular():
    # integer L U (unit triangular, small entries): A⁻¹ is an integer matrix, so mp.inv is exact
    # and κ_1, κ_∞, κ_F are products of exactly known norms (one rounding each)
    g = torch.Generator().manual_seed(14)
    L = torch.randint(-2, 3, (5, 5), generator=g).double().tril(-1) + torch.eye(5, dtype=torch.float64)
    U = torch.randint(-2, 3, (5, 5), generator=g).double().triu(1) + torch.eye(5, dtype=torch.float64)
    A = L @ U
    Ai = MP.inv(A)
    assert torch.equal(Ai, Ai.round()) and torch.equal(Ai @ A, torch.eye(5, dtype=torch.float64))
    for p in (1, math.inf, "fro"):
        expect = float(torch.linalg.matrix_norm(A, p) * torch.linalg.matrix_norm(Ai, p))
        assert abs(float(MP.cond(A, p)) / expect - 1) <= 4 * U64
    with pytest.raises(ValueError, match="p must be"):
        MP.cond(A, p=3)
    with pytest.raises(ValueError, match="dps"):
        MP.solve(A, A, dps=0)


def test_empty_batches_and_broadcasting():
    E = torch.zeros(0, 3, 3, dtype=torch.float64)
    B = torch.zeros(0, 3, 2, dtype=torch.float64)
    assert MP.solve(E, B).shape == (0, 3, 2)
    assert MP.solve_triangular(E, B, upper=True).shape == (0, 3, 2)
    assert MP.inv(E).shape == (0, 3, 3) and MP.det(E).shape == (0,) and MP.svdvals(E).shape == (0, 3)
    # batch (2, 1) against (4,) broadcasts to (2, 4), like torch.linalg.solve
    A = G.random(3, batch=(2, 1), dtype=torch.float64, seed=18)
    Bb = G.random(3, 1, batch=(4,), dtype=torch.float64, seed=19)
    X = MP.solve(A, Bb)
    assert X.shape == (2, 4, 3, 1)
    # LAPACK GEPP worst case κ_∞·3n³ρ·u64 (κ_∞ <= n κ₂, growth ρ <= 2^{n−1}), κ₂ measured
    n, kappa = 3, float(MP.cond(A).max())
    assert float(M.forward_error(X, R.solve(A, Bb)).max()) < n * kappa * 3 * n**3 * 2 ** (n - 1) * U64
