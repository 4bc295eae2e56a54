"""Every metric of ``reference.metrics`` on a small case whose value is computed by hand.

A metric whose normalisation is dropped or changed (``m`` for ``n``, ``‖A‖∞`` for ``‖A‖₁``, no
``‖x‖``, ``Aᵀ`` for ``Aᴴ``...) still gives 0 for exact factors and a small number for LAPACK's
answers, so those checks cannot see it (issue 18: the SVD orthogonality metric's normalisation was
dropped unnoticed). Here every case has ``m ≠ n`` (or ``m ≠ k``) and unequal 1- and ∞-norms, so
each factor of each formula changes the expected value.

The cases are dyadic rationals: every input, product and residual is exact in float32 and float64,
so the only rounding is in the metric's own float64 division and sums (a few operations, relative
error below ``10·2⁻⁵³``); ``rel=1e-12`` is far below the smallest change a wrong factor makes (4/3).
The unit roundoff is the one of the inputs' dtype (float32: ``2⁻²⁴``), so its choice is checked too.
"""

from __future__ import annotations

import math

import pytest
import torch

from reference import metrics as M

U = 2.0**-24  # the inputs below are float32 / complex64
f32 = torch.float32


def t(x, dtype=f32):
    return torch.tensor(x, dtype=dtype)


def close(value, expected):
    return float(value) == pytest.approx(expected, rel=1e-12, abs=0)


# SVD of a 3 x 2: Uk = [[1.5, 0], [0, 1], [0, 0]] (column 0 too long), S = [2, 1],
# Vh = [[1, 0], [0, 2]] (row 1 too long); Uk diag(S) Vh = [[3, 0], [0, 2], [0, 0]] and
# A = that + e_2 e_0ᵀ = [[3, 0], [0, 2], [1, 0]].
#   recon  = ‖E‖₁ / (max(m, n) ‖A‖₁ u) = 1 / (3 · 4 · u)         (E = e_2 e_0ᵀ, ‖A‖₁ = max(4, 2))
#   u_orth = ‖I − UᴴU‖₁ / (m u)        = |1 − 2.25| / (3 u) = 1.25 / (3 u)
#   v_orth = ‖I − Vh Vhᴴ‖₁ / (n u)     = |1 − 4| / (2 u)    = 3 / (2 u)
_UK = [[1.5, 0.0], [0.0, 1.0], [0.0, 0.0]]
_VH = [[1.0, 0.0], [0.0, 2.0]]
_A = [[3.0, 0.0], [0.0, 2.0], [1.0, 0.0]]


def test_svd_ratios_tall():
    r = M.svd_ratios(t(_A), t(_UK), t([2.0, 1.0]), t(_VH))
    assert close(r.recon, 1 / (12 * U)) and close(r.u_orth, 1.25 / (3 * U)) and close(r.v_orth, 3 / (2 * U))
    assert float(r.order) == 0.0
    # full_matrices=True: U is 3 x 3 (third column e_2, exact); the same three values
    Ufull = t([[1.5, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    r = M.svd_ratios(t(_A), Ufull, t([2.0, 1.0]), t(_VH))
    assert close(r.recon, 1 / (12 * U)) and close(r.u_orth, 1.25 / (3 * U)) and close(r.v_orth, 3 / (2 * U))


def test_svd_ratios_wide():
    """The transpose (m = 2, n = 3): U = Vhᵀ, Vh = Ukᵀ. u_orth = 3 / (2 u), v_orth = 1.25 / (3 u);
    recon = 1 / (3 · 3 · u) (‖Aᵀ‖₁ = max(3, 2, 1) = 3)."""
    r = M.svd_ratios(t(_A).mT, t(_VH).mT, t([2.0, 1.0]), t(_UK).mT)
    assert close(r.recon, 1 / (9 * U)) and close(r.u_orth, 3 / (2 * U)) and close(r.v_orth, 1.25 / (3 * U))


def test_svd_ratios_complex_conjugate():
    """Uk[0, 0] = 1.5i: |1.5i|² = 2.25 as before (with Uᵀ instead of Uᴴ: 1 − (1.5i)² = 3.25)."""
    Uk = t(_UK, torch.complex64)
    Uk[0, 0] = 1.5j
    A = t(_A, torch.complex64)
    A[0, 0] = 3j
    r = M.svd_ratios(A, Uk, t([2.0, 1.0]), t(_VH, torch.complex64))
    assert close(r.recon, 1 / (12 * U)) and close(r.u_orth, 1.25 / (3 * U)) and close(r.v_orth, 3 / (2 * U))


def test_svd_order():
    """Test 4: non-negative, non-increasing; ties are allowed."""
    A, Uk, Vh = t(_A), t(_UK), t(_VH)
    assert float(M.svd_ratios(A, Uk, t([1.0, 1.0]), Vh).order) == 0.0
    assert float(M.svd_ratios(A, Uk, t([0.0, 0.0]), Vh).order) == 0.0
    for bad in ([1.0, 2.0], [1.0, -1.0], [float("nan"), 1.0]):
        assert math.isinf(float(M.svd_ratios(A, Uk, t(bad), Vh).order))


def test_qr_ratios_and_orthogonality_ratio():
    """Q = Uk (3 x 2), R = [[1, 1], [0, 1]]: Q R = [[1.5, 1.5], [0, 1], [0, 0]]; A = Q R + 2 e_2 e_1ᵀ.
    recon = 2 / (m ‖A‖₁ u) = 2 / (3 · 4.5 · u); orth = 1.25 / (m u) with m = 3 (not k = 2)."""
    A = t([[1.5, 1.5], [0.0, 1.0], [0.0, 2.0]])
    recon, orth = M.qr_ratios(A, t(_UK), t([[1.0, 1.0], [0.0, 1.0]]))
    assert close(recon, 2 / (13.5 * U)) and close(orth, 1.25 / (3 * U))
    assert close(M.orthogonality_ratio(t(_UK)), 1.25 / (3 * U))
    # rows orthonormal: pass Q.mH (the docstring's rule); Vhᵀ is 2 x 2: 3 / (2 u)
    assert close(M.orthogonality_ratio(t(_VH).mH), 3 / (2 * U))


def test_inverse_ratio():
    """A = [[2, 1], [0, 1]], X = [[0.5, 0], [0, 1]]: X A = [[1, 0.5], [0, 1]], ‖I − X A‖₁ = 0.5,
    ‖A‖₁ = 2, ‖X‖₁ = 1, n = 2: 0.5 / (2 · 2 · 1 · u)."""
    assert close(M.inverse_ratio(t([[2.0, 1.0], [0.0, 1.0]]), t([[0.5, 0.0], [0.0, 1.0]])), 0.5 / (4 * U))


def test_lu_ratio_and_lu_factor_ratio():
    """A = [[1, 2], [2, 1]], P = swap, L = [[1, 0], [0.5, 1]], U = [[2, 1], [0, 1]]:
    P L U = [[1, 1.5], [2, 1]], ‖A − P L U‖₁ = 0.5, ‖A‖₁ = 3, n = 2: 0.5 / (2 · 3 · u)."""
    A = t([[1.0, 2.0], [2.0, 1.0]])
    P = t([[0.0, 1.0], [1.0, 0.0]])
    L, Uf = t([[1.0, 0.0], [0.5, 1.0]]), t([[2.0, 1.0], [0.0, 1.0]])
    assert close(M.lu_ratio(A, P, L, Uf), 0.5 / (6 * U))
    LU = t([[2.0, 1.0], [0.5, 1.0]])
    assert close(M.lu_factor_ratio(A, LU, torch.tensor([2, 2], dtype=torch.int32)), 0.5 / (6 * U))


def test_solve_ratio():
    """Left: A = [[2, 3], [0, 1]] (‖A‖₁ = 4, ‖A‖∞ = 5), X = [[1, 4], [1, 0]], B = A X + 0.5 e_1 e_0ᵀ:
    column 0 gives 0.5 / (4 · 2 · u), column 1 gives 0: the max is 1 / (16 u).
    Right (X A = B): x = [1, 1], x A = [2, 4], b = [2, 4.5]: 0.5 / (‖A‖∞ · 2 · u) = 1 / (20 u)."""
    A = t([[2.0, 3.0], [0.0, 1.0]])
    X = t([[1.0, 4.0], [1.0, 0.0]])
    B = A @ X
    B[1, 0] += 0.5
    assert close(M.solve_ratio(A, X, B), 1 / (16 * U))
    assert close(M.solve_ratio(A, t([[1.0, 1.0]]), t([[2.0, 4.5]]), left=False), 1 / (20 * U))


def test_triangular_residual_ratio():
    """T = [[2, 5], [1, 1]], lower: the triangle [[2, 0], [1, 1]] (the 5 is never read), ‖·‖₁ = 3;
    x = [1, 1], b = [2, 2.5]: 0.5 / (3 · 2 · u). Unit: [[1, 0], [1, 1]], ‖·‖₁ = 2, b = [1, 2.5]:
    0.5 / (2 · 2 · u)."""
    T = t([[2.0, 5.0], [1.0, 1.0]])
    x = t([[1.0], [1.0]])
    assert close(M.triangular_residual_ratio(T, x, t([[2.0], [2.5]]), upper=False), 0.5 / (6 * U))
    assert close(M.triangular_residual_ratio(T, x, t([[1.0], [2.5]]), upper=False, unitriangular=True),
                 0.5 / (4 * U))


def test_lstsq_ratio():
    """A = [[1], [1], [0]], x = [1], b = [1, 2, 0]: r = [0, 1, 0], ‖Aᴴ r‖₁ = 1, ‖A‖₁ = 2,
    ‖r‖₁ + ‖b‖₁ + ‖A‖₁‖x‖₁ = 1 + 3 + 2 = 6, max(m, n, k) = 3: 1 / (3 · 2 · 6 · u)."""
    A = t([[1.0], [1.0], [0.0]])
    assert close(M.lstsq_ratio(A, t([[1.0]]), t([[1.0], [2.0], [0.0]])), 1 / (36 * U))
    assert close(M.lstsq_ratio(A, t([1.0]), t([1.0, 2.0, 0.0])), 1 / (36 * U))  # vector b


def test_norm1_growth_and_errors():
    assert float(M.norm1(t([[1.0, -2.0], [3.0, 4.0]]))) == 6.0  # column sums 4, 6 (row sums 3, 7)
    assert float(M.norm1(t([[3 + 4j, 0], [0, 1]], torch.complex64))) == 5.0  # |z|, not |Re| + |Im|
    # growth reads U's triangle only (the 5 below it is L's multiplier): 3 / 4
    assert float(M.growth_factor(t([[1.0, 0.0], [4.0, 1.0]]), t([[2.0, 1.0], [5.0, 3.0]]))) == 0.75
    # forward error relative to the reference: max|x - x_ref| / max|x_ref| = 1 / 2
    assert float(M.forward_error(t([[1.0, 3.0]]), t([[1.0, 2.0]]))) == 0.5
    rel = M.relative_error(t([float("inf"), 1.0, 0.0, 3.0]), t([float("inf"), 2.0, 0.0, 0.0]))
    assert rel.tolist() == [0.0, 0.5, 0.0, float("inf")]
