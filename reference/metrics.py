"""LAPACK's test ratios, batched, in float64/complex128.

Every ratio here is a *scaled backward error*: the residual of a computed result divided by what a
backward-stable algorithm is allowed to leave, so that a correct implementation gives a number of
order 1 whatever the matrix, and LAPACK's pass mark is ``PASS_RATIO = 30``
(``TESTING/ctest.in``: "Threshold value of test ratio").

Conventions (shared by all ratios):

* **Norm**: the matrix 1-norm (maximum absolute column sum), as LAPACK's testers use it
  (``xLANGE('1', ...)``). For complex entries the modulus ``|z|`` is used, as ``CLANGE`` does
  (``CGET02`` sums columns with ``SCASUM``, i.e. ``|Re|+|Im|``; the two differ by at most √2 and we
  use the modulus everywhere so that real and complex ratios mean the same thing).
* **Precision of the check**: inputs are promoted to float64/complex128 before the residual is
  formed, so for float32/complex64 results the check itself contributes ~1e-9 to a ratio. For
  float64 results the residual is formed in float64, as LAPACK's own testers do, and ratios of
  order 1 are partly rounding noise of the check.
* **Unit roundoff**: ``u`` is that of the computed result's dtype (``2**-24`` for
  float32/complex64, ``2**-53`` for float64/complex128); every function takes ``u=`` to override.
* **Degenerate cases**: a zero residual gives ratio 0 (also for empty and zero matrices); a nonzero
  residual over a zero denominator gives ``inf``; NaN anywhere gives NaN (and ``NaN < 30`` is
  ``False``, so a NaN result never passes). LAPACK returns ``1/eps`` instead of ``inf``.
* **Batching**: leading dimensions broadcast as in ``torch.matmul``; every ratio is a float64
  tensor of the broadcast batch shape (a 0-d tensor for a single matrix).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ._common import check_tensor as _check_tensor
from ._common import is_vector_rhs as _is_vector_rhs
from ._common import wide as _wide
from ._common import wide_dtype as _wide_dtype

__all__ = [
    "PASS_RATIO",
    "SVDRatios",
    "eigh_ratios",
    "cholesky_componentwise",
    "cholesky_ratio",
    "hermitian_from",
    "forward_error",
    "growth_factor",
    "inverse_ratio",
    "ldl_ratio",  # noqa: F822  (module __getattr__: reference.metrics_ldl)
    "ldl_unpack",  # noqa: F822  (module __getattr__: reference.metrics_ldl)
    "lstsq_ratio",
    "lu_factor_ratio",
    "lu_ratio",
    "norm1",
    "orthogonality_ratio",
    "qr_ratios",
    "relative_error",
    "solve_ratio",
    "svd_ratios",
    "triangle",
    "triangular_residual_ratio",
    "unit_roundoff",
]

#: LAPACK's pass mark for the test ratios (``TESTING/ctest.in``, ``THRESH = 30.0``).
PASS_RATIO: float = 30.0

_U = {
    torch.float16: 2.0**-11,
    torch.bfloat16: 2.0**-8,
    torch.float32: 2.0**-24,
    torch.complex64: 2.0**-24,
    torch.float64: 2.0**-53,
    torch.complex128: 2.0**-53,
}


def unit_roundoff(dtype: torch.dtype) -> float:
    """Unit roundoff ``u`` of a floating dtype (half the machine epsilon).

    Parameters
    ----------
    dtype : torch.dtype
        float16, bfloat16, float32, complex64, float64 or complex128. A complex dtype has the
        unit roundoff of its real part (each of Re and Im is rounded separately, and
        ``|fl(z) - z| <= u |z|`` holds for the modulus).

    Returns
    -------
    float
        ``2**-24`` for float32/complex64, ``2**-53`` for float64/complex128, ``2**-11`` for
        float16, ``2**-8`` for bfloat16.

    Raises
    ------
    TypeError
        For integer, bool or other non-floating dtypes.

    Examples
    --------
    >>> unit_roundoff(torch.complex64) == 2.0**-24
    True
    """
    try:
        return _U[dtype]
    except (KeyError, TypeError):
        raise TypeError(f"unit_roundoff: expected a floating or complex torch.dtype, got {dtype!r}") from None


# ----------------------------------------------------------------------------------------------
# helpers


def _pair(*ts: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Widen all to one dtype: complex128 if any is complex, else float64."""
    dt = _wide_dtype(*ts)
    return tuple(_wide(t, dt) for t in ts)


def _u_of(u: float | None, result: torch.Tensor) -> float:
    return unit_roundoff(result.dtype) if u is None else float(u)


def _colnorms1(M: torch.Tensor) -> torch.Tensor:
    """1-norms of the columns: shape (..., k)."""
    return M.abs().sum(-2)


def _amax(x: torch.Tensor, dim: int | tuple[int, ...]) -> torch.Tensor:
    """``amax`` that returns 0 over empty dimensions (an empty matrix has norm 0)."""
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if any(x.shape[d] == 0 for d in dims):
        shape = [s for i, s in enumerate(x.shape) if i not in {d % x.ndim for d in dims}]
        return torch.zeros(shape, dtype=torch.float64)
    return x.amax(dim=dims)


def norm1(A: torch.Tensor) -> torch.Tensor:
    """Matrix 1-norm (maximum absolute column sum, ``|z|`` for complex), batched, in float64.

    Parameters
    ----------
    A : torch.Tensor
        Shape ``(..., m, n)``.

    Returns
    -------
    torch.Tensor
        float64, shape ``(...)``; 0 for empty matrices.
    """
    _check_tensor("A", A)
    return _amax(_colnorms1(_wide(A)), -1)


def _ratio(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """num/den with 0/0 = 0 and x/0 = inf; NaN propagates."""
    num, den = torch.broadcast_tensors(num, den)
    out = num / den
    return torch.where((num == 0) & ~torch.isnan(den), torch.zeros_like(out), out)


def _eye_like(M: torch.Tensor, n: int) -> torch.Tensor:
    return torch.eye(n, dtype=M.dtype)


# ----------------------------------------------------------------------------------------------
# ratios


def solve_ratio(
    A: torch.Tensor,
    X: torch.Tensor,
    B: torch.Tensor,
    *,
    left: bool = True,
    u: float | None = None,
) -> torch.Tensor:
    """Scaled residual of a linear solve, LAPACK ``xGET02``.

    ``max_j ‖b_j − A x_j‖₁ / (‖A‖₁ ‖x_j‖₁ u)`` over the right-hand sides ``j`` (left), or the same
    for the rows of ``X A = B`` (``left=False``, i.e. the ratio of the transposed system, which
    uses ``‖A‖_∞``). A backward-stable solver gives O(1) whatever ``κ(A)``; pass when
    ``< PASS_RATIO``.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)`` (square for ``solve``; rectangular allowed, e.g. a consistent
        underdetermined system).
    X : torch.Tensor
        Computed solution, ``(..., n, k)`` or ``(..., n)`` (``torch.linalg.solve``'s vector rule).
    B : torch.Tensor
        Right-hand side, ``(..., m, k)`` or ``(..., m)``.
    left : bool
        ``True`` for ``A X = B``, ``False`` for ``X A = B``.
    u : float, optional
        Unit roundoff; default that of ``X.dtype``.

    Returns
    -------
    torch.Tensor
        float64, the broadcast batch shape.

    Examples
    --------
    >>> A = torch.randn(4, 4, dtype=torch.float64); B = torch.randn(4, 2, dtype=torch.float64)
    >>> bool(solve_ratio(A, torch.linalg.solve(A, B), B) < PASS_RATIO)
    True
    """
    _check_tensor("A", A)
    _check_tensor("X", X, 1)
    _check_tensor("B", B, 1)
    uu = _u_of(u, X)
    if _is_vector_rhs(A, B):
        X, B = X.unsqueeze(-1), B.unsqueeze(-1)
    if left:
        ok = X.shape[-2] == A.shape[-1] and B.shape[-2] == A.shape[-2] and X.shape[-1] == B.shape[-1]
    else:
        ok = X.shape[-1] == A.shape[-2] and B.shape[-1] == A.shape[-1] and X.shape[-2] == B.shape[-2]
    if not ok:
        raise ValueError(
            f"solve_ratio: shapes A {tuple(A.shape)}, X {tuple(X.shape)}, B {tuple(B.shape)} do not "
            f"form {'A X = B' if left else 'X A = B'}"
        )
    A64, X64, B64 = _pair(A, X, B)
    if not left:
        A64, X64, B64 = A64.mT, X64.mT, B64.mT
    R = B64 - A64 @ X64
    anorm = _amax(_colnorms1(A64), -1)
    num = _colnorms1(R)  # (..., k)
    den = anorm.unsqueeze(-1) * _colnorms1(X64) * uu
    return _amax(_ratio(num, den), -1)


def triangular_residual_ratio(
    T: torch.Tensor,
    X: torch.Tensor,
    B: torch.Tensor,
    upper: bool,
    left: bool = True,
    unitriangular: bool = False,
    *,
    u: float | None = None,
) -> torch.Tensor:
    """Scaled residual of a triangular solve, LAPACK ``xTRT02``.

    ``max_j ‖b_j − op(T) x_j‖₁ / (‖op(T)‖₁ ‖x_j‖₁ u)`` where ``op(T)`` is the triangle of ``T``
    named by ``upper`` (the other triangle is **never read**: it may hold garbage or NaN), with
    its diagonal replaced by ones when ``unitriangular``. ``left=False`` means ``X op(T) = B`` (the
    ratio of the transposed system). No factor ``n`` in the denominator, as in ``xTRT02``: this is
    ``n`` times stricter than ``‖b − Tx‖/(n‖T‖‖x‖u)``.

    Parameters
    ----------
    T : torch.Tensor
        ``(..., n, n)``.
    X, B : torch.Tensor
        ``(..., n, k)`` (``left``) or ``(..., k, n)`` (``left=False``).
    upper, left, unitriangular : bool
        As in ``torch.linalg.solve_triangular``.
    u : float, optional
        Unit roundoff; default that of ``X.dtype``.

    Returns
    -------
    torch.Tensor
        float64, the broadcast batch shape.
    """
    _check_tensor("T", T)
    _check_tensor("X", X)
    _check_tensor("B", B)
    if T.shape[-1] != T.shape[-2]:
        raise ValueError(f"T must be square, got shape {tuple(T.shape)}")
    T_eff = triangle(T, upper=upper, unitriangular=unitriangular)
    return solve_ratio(T_eff, X, B, left=left, u=_u_of(u, X))


def triangle(T: torch.Tensor, *, upper: bool, unitriangular: bool = False) -> torch.Tensor:
    """The named triangle of ``T`` in float64/complex128, other entries exactly 0 (even if they
    were NaN/inf), diagonal 1 if ``unitriangular``."""
    T64 = _wide(T)
    n = T64.shape[-1]
    mask = torch.ones(n, n, dtype=torch.bool)
    mask = mask.triu(1 if unitriangular else 0) if upper else mask.tril(-1 if unitriangular else 0)
    out = torch.where(mask, T64, torch.zeros((), dtype=T64.dtype))
    if unitriangular:
        out = out + torch.eye(n, dtype=T64.dtype)
    return out


def inverse_ratio(A: torch.Tensor, X: torch.Tensor, *, u: float | None = None) -> torch.Tensor:
    """Scaled residual of a computed inverse, LAPACK ``xGET03``: ``‖I − XA‖₁/(n ‖A‖₁ ‖X‖₁ u)``.

    Parameters
    ----------
    A, X : torch.Tensor
        ``(..., n, n)``; ``X`` is the computed inverse.
    u : float, optional
        Unit roundoff; default that of ``X.dtype``.

    Returns
    -------
    torch.Tensor
        float64, the broadcast batch shape.
    """
    _check_tensor("A", A)
    _check_tensor("X", X)
    uu = _u_of(u, X)
    A64, X64 = _pair(A, X)
    n = A64.shape[-1]
    R = _eye_like(A64, n) - X64 @ A64
    num = _amax(_colnorms1(R), -1)
    den = n * _amax(_colnorms1(A64), -1) * _amax(_colnorms1(X64), -1) * uu
    return _ratio(num, den)


def hermitian_from(A: torch.Tensor, *, upper: bool = False) -> torch.Tensor:
    """The Hermitian matrix a Cholesky factorization reads from ``A``: its lower (or upper)
    triangle, the conjugate mirror of it, and the real part of its diagonal (LAPACK ``potrf``).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``; the other triangle and the imaginary part of the diagonal are ignored.
    upper : bool
        Read the upper triangle instead of the lower one.

    Returns
    -------
    torch.Tensor
        ``A``'s dtype, exactly Hermitian.
    """
    _check_tensor("A", A)
    T = A.mH if upper else A
    S = T.tril(-1)
    d = T.diagonal(dim1=-2, dim2=-1)
    d = d.real.to(A.dtype) if A.is_complex() else d
    return S + S.mH + torch.diag_embed(d)


def cholesky_ratio(A: torch.Tensor, L: torch.Tensor, *, upper: bool = False,
                   u: float | None = None) -> torch.Tensor:
    """Scaled residual of a Cholesky factorization, LAPACK ``xPOT01``: ``‖A − L Lᴴ‖₁/(n ‖A‖₁ u)``
    (``‖A − Uᴴ U‖₁`` with ``upper=True``), ``A`` the Hermitian matrix of the triangle read
    (:func:`hermitian_from`).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``, the factorization's input.
    L : torch.Tensor
        The computed factor (lower, or upper ``U`` with ``upper=True``).
    upper : bool
    u : float, optional
        Unit roundoff; default that of ``L.dtype``.

    Returns
    -------
    torch.Tensor
        float64, the batch shape.
    """
    _check_tensor("L", L)
    uu = _u_of(u, L)
    A64, L64 = _pair(hermitian_from(A, upper=upper), L)
    n = A64.shape[-1]
    R = A64 - (L64.mH @ L64 if upper else L64 @ L64.mH)
    return _ratio(_amax(_colnorms1(R), -1), n * _amax(_colnorms1(A64), -1) * uu)


def cholesky_componentwise(A: torch.Tensor, L: torch.Tensor, *, upper: bool = False) -> torch.Tensor:
    """``max_ij |A − L Lᴴ|_ij / √(a_ii a_jj)`` in float64: the backward error of a Cholesky
    factorization scaled by the diagonal (``A`` as in :func:`cholesky_ratio`).

    Higham (2002), Thm 10.3: ``L Lᴴ = A + ΔA`` with ``|ΔA| <= γ_{n+1} |L| |Lᴴ|``, and by
    Cauchy-Schwarz ``(|L||Lᴴ|)_ij <= ‖l_i‖ ‖l_j‖`` with ``‖l_i‖² = a_ii + Δa_ii``, so this value is
    at most ``γ_{n+1}/(1 − γ_{n+1})`` whatever the scaling of the rows and columns of ``A`` (graded
    matrices, 1e±30). Zero where ``a_ii a_jj = 0`` and the residual is 0.

    Returns
    -------
    torch.Tensor
        float64, the batch shape.
    """
    _check_tensor("L", L)
    A64, L64 = _pair(hermitian_from(A, upper=upper), L)
    R = (A64 - (L64.mH @ L64 if upper else L64 @ L64.mH)).abs()
    d = A64.diagonal(dim1=-2, dim2=-1).real.abs().sqrt()
    scale = d[..., :, None] * d[..., None, :]
    return _amax(_ratio(R, scale), (-2, -1))


def lu_ratio(
    A: torch.Tensor, P: torch.Tensor, L: torch.Tensor, U: torch.Tensor, *, u: float | None = None
) -> torch.Tensor:
    """Scaled residual of an LU factorization, LAPACK ``xGET01``: ``‖A − PLU‖₁/(n ‖A‖₁ u)``.

    Uses ``torch.linalg.lu``'s convention ``A = P L U`` (``‖A − PLU‖₁ = ‖PᵀA − LU‖₁``: a row
    permutation does not change column sums). ``n`` is the number of columns of ``A``, as in
    ``xGET01``. Rectangular ``A`` (``m × n``, ``L`` ``m × k``, ``U`` ``k × n``) is allowed.

    Parameters
    ----------
    A, P, L, U : torch.Tensor
        As returned by ``torch.linalg.lu(A)``.
    u : float, optional
        Unit roundoff; default that of ``U.dtype``.

    Returns
    -------
    torch.Tensor
        float64, the broadcast batch shape.
    """
    for name, t in (("A", A), ("P", P), ("L", L), ("U", U)):
        _check_tensor(name, t)
    uu = _u_of(u, U)
    A64, L64, U64 = _pair(A, L, U)
    P64 = _wide(P).to(A64.dtype)
    n = A64.shape[-1]
    R = A64 - P64 @ (L64 @ U64)
    num = _amax(_colnorms1(R), -1)
    den = n * _amax(_colnorms1(A64), -1) * uu
    return _ratio(num, den)


def lu_factor_ratio(
    A: torch.Tensor, LU: torch.Tensor, pivots: torch.Tensor, *, u: float | None = None
) -> torch.Tensor:
    """:func:`lu_ratio` for the compact output of ``torch.linalg.lu_factor`` (``LU``, 1-based
    int32 ``pivots``).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.
    LU : torch.Tensor
        Packed factors, ``(..., m, n)``.
    pivots : torch.Tensor
        int32, ``(..., min(m, n))``, 1-based (LAPACK/torch convention).
    u : float, optional
        Unit roundoff; default that of ``LU.dtype``.

    Returns
    -------
    torch.Tensor
        float64, the batch shape.
    """
    _check_tensor("LU", LU)
    uu = _u_of(u, LU)
    P, L, U = torch.lu_unpack(_wide(LU), pivots.detach().to("cpu", torch.int32))
    return lu_ratio(A, P, L, U, u=uu)


def qr_ratios(
    A: torch.Tensor, Q: torch.Tensor, R: torch.Tensor, *, u: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """LAPACK ``xQRT01`` ratios of a QR factorization.

    Returns ``(‖A − QR‖₁/(m ‖A‖₁ u), ‖I − QᴴQ‖₁/(m u))`` for ``A`` of shape ``(..., m, n)`` and
    ``Q`` of shape ``(..., m, k)`` (reduced ``k = min(m, n)`` or complete ``k = m``), ``R`` of
    shape ``(..., k, n)``.

    Parameters
    ----------
    A, Q, R : torch.Tensor
        As returned by ``torch.linalg.qr(A, mode="reduced" | "complete")``.
    u : float, optional
        Unit roundoff; default that of ``Q.dtype``.

    Returns
    -------
    tuple of torch.Tensor
        Two float64 tensors of the broadcast batch shape.
    """
    for name, t in (("A", A), ("Q", Q), ("R", R)):
        _check_tensor(name, t)
    uu = _u_of(u, Q)
    A64, Q64, R64 = _pair(A, Q, R)
    m, k = Q64.shape[-2], Q64.shape[-1]
    E = A64 - Q64 @ R64
    recon = _ratio(_amax(_colnorms1(E), -1), m * _amax(_colnorms1(A64), -1) * uu)
    G = _eye_like(Q64, k) - Q64.mH @ Q64
    orth = _ratio(_amax(_colnorms1(G), -1), torch.tensor(m * uu, dtype=torch.float64))
    return recon, orth


def eigh_ratios(
    A: torch.Tensor, w: torch.Tensor, V: torch.Tensor, *, upper: bool = False, u: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """LAPACK ``xSYT21``/``xHET21`` ratios of a Hermitian eigendecomposition.

    Returns ``(‖H − V diag(w) Vᴴ‖₁/(n ‖H‖₁ u), ‖I − VᴴV‖₁/(n u))`` where ``H`` is the Hermitian
    matrix whose ``upper``/lower triangle (and real diagonal) is ``A``'s — what eigh reads.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``.
    w, V : torch.Tensor
        ``(..., n)`` real and ``(..., n, n)``, as returned by ``torch.linalg.eigh``.
    upper : bool
        The triangle of ``A`` that defines ``H`` (``UPLO="U"``).
    u : float, optional
        Unit roundoff; default that of ``V.dtype``.

    Returns
    -------
    tuple of torch.Tensor
        Two float64 tensors of the batch shape.
    """
    for name, t in (("A", A), ("V", V)):
        _check_tensor(name, t)
    uu = _u_of(u, V)
    A64, V64 = _pair(A, V)
    n = V64.shape[-1]
    H = hermitian_from(A64, upper=upper)
    w64 = w.to(torch.float64).to(V64.dtype)
    E = H - (V64 * w64.unsqueeze(-2)) @ V64.mH
    recon = _ratio(_amax(_colnorms1(E), -1), max(n, 1) * _amax(_colnorms1(H), -1) * uu)
    G = _eye_like(V64, n) - V64.mH @ V64
    orth = _ratio(_amax(_colnorms1(G), -1), torch.tensor(max(n, 1) * uu, dtype=torch.float64))
    return recon, orth


def orthogonality_ratio(Q: torch.Tensor, *, u: float | None = None) -> torch.Tensor:
    """Orthonormality of the columns of ``Q``, LAPACK ``xORT01``: ``‖I − QᴴQ‖₁ / (m u)``.

    For a ``Q`` with more columns than rows, pass ``Q.mH`` (rows orthonormal).

    Parameters
    ----------
    Q : torch.Tensor
        ``(..., m, k)``, ``k <= m``.
    u : float, optional
        Unit roundoff; default that of ``Q.dtype``.

    Returns
    -------
    torch.Tensor
        float64, the batch shape.
    """
    _check_tensor("Q", Q)
    uu = _u_of(u, Q)
    Q64 = _wide(Q)
    m, k = Q64.shape[-2], Q64.shape[-1]
    G = _eye_like(Q64, k) - Q64.mH @ Q64
    return _ratio(_amax(_colnorms1(G), -1), torch.tensor(max(m, 1) * uu, dtype=torch.float64))


class SVDRatios(NamedTuple):
    """LAPACK ``xDRVBD`` ratios of an SVD (all float64 tensors of the batch shape)."""

    #: ``‖A − U Σ Vᴴ‖₁ / (max(m, n) ‖A‖₁ u)``
    recon: torch.Tensor
    #: ``‖I − UᴴU‖₁ / (m u)``
    u_orth: torch.Tensor
    #: ``‖I − Vᴴ V‖₁ / (n u)`` (rows of ``Vh`` orthonormal)
    v_orth: torch.Tensor
    #: 0 if ``S`` is non-negative and non-increasing, ``inf`` otherwise (``xDRVBD`` test 4)
    order: torch.Tensor


def svd_ratios(
    A: torch.Tensor, U: torch.Tensor, S: torch.Tensor, Vh: torch.Tensor, *, u: float | None = None
) -> SVDRatios:
    """LAPACK ``xDRVBD`` ratios of an SVD ``A = U diag(S) Vh``.

    Works for ``full_matrices=True`` (``U`` ``m × m``, ``Vh`` ``n × n``) and ``False``
    (``m × k``, ``k × n``), ``k = min(m, n)``; the reconstruction uses the first ``k`` columns of
    ``U`` and rows of ``Vh``, the orthogonality tests use all of them (so the completion of a full
    ``U`` is checked too).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.
    U, S, Vh : torch.Tensor
        As returned by ``torch.linalg.svd``.
    u : float, optional
        Unit roundoff; default that of ``S.dtype`` (real dtype of the result).

    Returns
    -------
    SVDRatios
        ``(recon, u_orth, v_orth, order)``.
    """
    for name, t in (("A", A), ("U", U), ("Vh", Vh)):
        _check_tensor(name, t)
    _check_tensor("S", S, 1)
    uu = _u_of(u, S)
    A64, U64, V64 = _pair(A, U, Vh)
    S64 = _wide(S)
    m, n = A64.shape[-2], A64.shape[-1]
    k = min(m, n)
    Uk, Vk = U64[..., :, :k], V64[..., :k, :]
    E = A64 - (Uk * S64[..., None, :].to(A64.dtype)) @ Vk
    recon = _ratio(_amax(_colnorms1(E), -1), max(m, n) * _amax(_colnorms1(A64), -1) * uu)
    GU = _eye_like(U64, U64.shape[-1]) - U64.mH @ U64
    u_orth = _ratio(_amax(_colnorms1(GU), -1), torch.tensor(m * uu, dtype=torch.float64))
    GV = _eye_like(V64, V64.shape[-2]) - V64 @ V64.mH
    v_orth = _ratio(_amax(_colnorms1(GV), -1), torch.tensor(n * uu, dtype=torch.float64))
    if S64.shape[-1] == 0:
        bad = torch.zeros(S64.shape[:-1], dtype=torch.bool)
    else:
        bad = (S64 < 0).any(-1) | (S64[..., 1:] > S64[..., :-1]).any(-1) | torch.isnan(S64).any(-1)
    order = torch.where(
        bad, torch.tensor(float("inf"), dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64)
    )
    return SVDRatios(recon, u_orth, v_orth, order)


def lstsq_ratio(A: torch.Tensor, X: torch.Tensor, B: torch.Tensor, *, u: float | None = None) -> torch.Tensor:
    """Scaled residual of the normal equations of a least-squares solution (cf. LAPACK ``xQRT17``).

    ``‖Aᴴ R‖₁ / (max(m, n, k) · ‖A‖₁ · (‖R‖₁ + ‖B‖₁ + ‖A‖₁‖X‖₁) · u)`` with ``R = B − A X``.
    Derivation of the scaling: a backward-stable solver returns the exact least-squares solution
    of ``(A + E, B + F)`` with ``‖E‖ <= εu‖A‖``, ``‖F‖ <= εu‖B‖``; then ``(A + E)ᴴ(B + F − (A + E)X) = 0``
    gives ``‖Aᴴ R‖ <= ε u ‖A‖ (‖R‖ + ‖B‖ + ‖A‖‖X‖)`` to first order, so the ratio is O(1) whatever
    the size of the residual (``xQRT17`` divides by ``‖B‖`` or ``‖R‖`` depending on the test
    problem instead). Valid for full column rank ``A``; for rank-deficient ``A`` also check the
    minimum-norm property (e.g. against ``reference.lapack.lstsq``).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.
    X : torch.Tensor
        ``(..., n, k)`` or ``(..., n)`` (vector rule of ``torch.linalg.lstsq``).
    B : torch.Tensor
        ``(..., m, k)`` or ``(..., m)``.
    u : float, optional
        Unit roundoff; default that of ``X.dtype``.

    Returns
    -------
    torch.Tensor
        float64, the broadcast batch shape.
    """
    _check_tensor("A", A)
    _check_tensor("X", X, 1)
    _check_tensor("B", B, 1)
    uu = _u_of(u, X)
    if B.ndim == A.ndim - 1:  # torch.linalg.lstsq: B (..., m) is a (batch of) vector(s)
        X, B = X.unsqueeze(-1), B.unsqueeze(-1)
    A64, X64, B64 = _pair(A, X, B)
    m, n, k = A64.shape[-2], A64.shape[-1], B64.shape[-1]
    R = B64 - A64 @ X64
    an = _amax(_colnorms1(A64), -1)
    num = _amax(_colnorms1(A64.mH @ R), -1)
    scale = _amax(_colnorms1(R), -1) + _amax(_colnorms1(B64), -1) + an * _amax(_colnorms1(X64), -1)
    return _ratio(num, max(m, n, k, 1) * an * scale * uu)


def growth_factor(A: torch.Tensor, U: torch.Tensor) -> torch.Tensor:
    """Element growth of an LU factorization, ``max|U_ij| / max|A_ij|`` (float64, batched).

    Partial pivoting bounds it by ``2^{n−1}`` (attained by
    :func:`reference.matrices.wilkinson_growth`); for random matrices it is ``O(n^{2/3})``
    (Trefethen & Schreiber). The backward error of GEPP is proportional to it.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.
    U : torch.Tensor
        The computed upper factor (or the packed ``LU``: only its upper triangle is read).

    Returns
    -------
    torch.Tensor
        float64, the broadcast batch shape; 0/0 = 0.
    """
    _check_tensor("A", A)
    _check_tensor("U", U)
    return _ratio(_amax(_wide(U).triu().abs(), (-2, -1)), _amax(_wide(A).abs(), (-2, -1)))


def forward_error(
    x: torch.Tensor, x_ref: torch.Tensor, *, dim: int | tuple[int, ...] | None = None
) -> torch.Tensor:
    """Normwise relative forward error ``max|x − x_ref| / max|x_ref|`` (∞-norm of the entries).

    Not divided by ``u``: compare it with a derived bound such as ``c·κ(A)·u`` (LAPACK
    ``xGET04`` divides by ``κ·eps`` and applies the threshold to that).

    Parameters
    ----------
    x : torch.Tensor
        Computed result.
    x_ref : torch.Tensor
        Reference (e.g. from :mod:`reference.mp`); broadcast against ``x``.
    dim : int or tuple of int, optional
        Dimensions reduced by the norm. Default: the last two (a batch of matrices), or the only
        one for 1-D input. Pass ``dim=-1`` for a batch of vectors.

    Returns
    -------
    torch.Tensor
        float64 of the remaining (batch) shape; 0 when ``x == x_ref``; ``inf`` when
        ``x_ref == 0 != x``.
    """
    _check_tensor("x", x, 0)
    _check_tensor("x_ref", x_ref, 0)
    a, b = _pair(x, x_ref)
    a, b = torch.broadcast_tensors(a, b)
    if dim is None:
        dim = (-2, -1) if a.ndim >= 2 else tuple(range(a.ndim))
    if a.ndim == 0:
        return _ratio((a - b).abs(), b.abs())
    return _ratio(_amax((a - b).abs(), dim), _amax(b.abs(), dim))


def relative_error(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise relative error ``|a − b| / |b|`` in float64.

    0 where ``a == b`` (including equal infinities and ``0 == 0``), ``inf`` where ``b == 0 != a``,
    NaN where either is NaN. Use it for quantities with a componentwise guarantee, e.g. singular
    values of graded matrices (``relative_error(S, S_ref).amax(-1) <= c·u``) or determinants.

    Parameters
    ----------
    a, b : torch.Tensor
        Broadcastable; real or complex.

    Returns
    -------
    torch.Tensor
        float64, the broadcast shape.
    """
    _check_tensor("a", a, 0)
    _check_tensor("b", b, 0)
    a64, b64 = _pair(a, b)
    a64, b64 = torch.broadcast_tensors(a64, b64)
    eq = a64 == b64
    diff = (a64 - b64).abs()
    out = _ratio(diff, b64.abs())
    return torch.where(eq, torch.zeros_like(out), out)


def __getattr__(name: str):
    """``ldl_ratio``/``ldl_unpack``: the Bunch–Kaufman (LDL) ratios live in ``metrics_ldl`` (module
    size), which imports this module's helpers; resolved on first use, so either import order works."""
    if name in ("ldl_ratio", "ldl_unpack"):
        from . import metrics_ldl

        return getattr(metrics_ldl, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
