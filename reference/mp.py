"""mpmath references at arbitrary precision, with the working precision raised until the answer is
right.

Every function takes torch tensors (any floating dtype, any batch shape), converts the given
(rounded) entries **exactly** to mpmath numbers, computes at a working precision chosen and
raised automatically, and returns float64/complex128 torch tensors: the result is the correctly
rounded value of the exact answer for the given input up to ``10**-dps`` relative error (normwise
per column for solutions, per value for determinants and singular values).

How the precision is chosen (DESIGN §8):

* **Linear systems, inverses, determinants** (Gaussian elimination with partial pivoting on lists
  of mpf/mpc, not ``mp.lu_solve``, which takes one vector and adds only a few guard bits): the
  error at working precision ``w`` digits is ``≈ κ·10**-w``. The result is computed at ``w`` and at
  a higher ``w'``; it is accepted when the two agree to ``dps`` digits (then the ``w'`` result is
  good to ``≈ dps + (w' − w)`` digits), else ``w`` grows. ``w`` starts at ``dps + 10 +
  log10 κ_float64``.
* **Singular values** (``mp.svd_r``/``mp.svd_c``, which are only *absolutely* accurate:
  ``|Δσ_i| ≈ n·10**-w·σ₁``): ``w`` is raised until ``w >= dps + log10(σ₁/σ_i) + log10 n + 5`` for
  every ``i``, so every singular value, however small, has ``dps`` correct digits.
* **Exact singularity**: the input's entries are dyadic rationals, so ``A = 2**e·M`` with ``M`` an
  integer (Gaussian-integer) matrix; a non-zero ``k × k`` minor of ``M`` has modulus ``>= 1``,
  hence the smallest *non-zero* singular value satisfies ``σ₁/σ_k <= σ₁(M)**k``. Once ``w``
  exceeds ``dps`` plus that many digits (``exact_singularity_digits``) a value still at noise
  level is exactly zero: ``svdvals`` returns 0, ``det`` returns 0, ``solve``/``inv`` raise
  ``torch.linalg.LinAlgError``. Exactly singular input therefore costs the most precision.

Cost (pure-Python mpmath backend, one float32 Gaussian matrix, ``dps = 50``, measured on a shared
2-core x86 machine): ``solve`` ``n = 32`` ≈ 0.2 s, ``n = 64`` ≈ 2 s (two evaluations: the agreement
check); ``det`` similar; ``svdvals`` ``n = 16`` ≈ 0.1 s, ``n = 32`` ≈ 0.6 s, ``n = 64`` ≈ 6 s; more for
ill-conditioned input (higher ``w``) and much more for exactly singular input. Keep to ``n <= 64``
and small batches; use :mod:`reference.lapack` for bulk checks of float32 results.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import mpmath
import numpy as np
import torch

from ._common import check_square as _square
from ._common import check_tensor as _check
from ._common import is_vector_rhs as _is_vector_rhs
from ._common import wide as _wide
from ._common import wide_dtype as _wide_dtype

__all__ = [
    "cond",
    "det",
    "eigvalsh",
    "exact_singularity_digits",
    "inv",
    "slogdet",
    "solve",
    "solve_triangular",
    "svdvals",
    "to_mpmath",
]

mp = mpmath.mp
_MAX_EXTRA_DIGITS = 5000  # hard cap on the working precision above dps


class _Singular(Exception):
    pass


# ----------------------------------------------------------------------------------------------
# plumbing


def _check_dps(dps: int) -> int:
    if not isinstance(dps, int) or dps < 1:
        raise ValueError(f"dps must be a positive int (decimal digits), got {dps!r}")
    return dps


def _flat_wide(A: torch.Tensor) -> np.ndarray:
    """``A`` widened, as an (N, m, n) numpy array over the flattened batch."""
    return _wide(A).reshape(math.prod(A.shape[:-2]), *A.shape[-2:]).numpy()


def _rows(a: np.ndarray) -> list[list[Any]]:
    """Exact mp conversion of a 2-D array (call inside a context with prec >= 53 bits)."""
    if np.iscomplexobj(a):
        return [[mp.mpc(float(z.real), float(z.imag)) for z in r] for r in a.tolist()]
    return [[mp.mpf(float(x)) for x in r] for r in a.tolist()]


def to_mpmath(A: torch.Tensor) -> mpmath.matrix:
    """One matrix as an ``mpmath.matrix``, converted exactly (at the current ``mp.prec`` >= 53).

    Parameters
    ----------
    A : torch.Tensor
        ``(m, n)``, any floating dtype.

    Returns
    -------
    mpmath.matrix
    """
    _check("A", A)
    if A.ndim != 2:
        raise ValueError(f"to_mpmath takes one matrix, got shape {tuple(A.shape)}")
    with mp.workprec(max(mp.prec, 53)):
        return mp.matrix(_rows(_wide(A).numpy()))


def _to_float(x: Any, cplx: bool) -> complex | float:
    if cplx:
        z = mp.mpc(x)
        return complex(float(z.real), float(z.imag))
    return float(x)


def _log10_cond64(a: np.ndarray) -> float:
    """log10 of the float64 2-norm condition number, clipped to [0, 30] (a starting guess)."""
    if a.size == 0 or not np.isfinite(a).all():
        return 0.0
    try:
        s = np.linalg.svd(a, compute_uv=False)
    except np.linalg.LinAlgError:  # pragma: no cover - LAPACK failure on finite input
        return 30.0
    if s[0] == 0:
        return 0.0
    return float(min(30.0, max(0.0, math.log10(s[0] / s[-1]) if s[-1] > 0 else 30.0)))


def exact_singularity_digits(a: np.ndarray | torch.Tensor) -> float:
    """Digits beyond which a numerically zero singular value/pivot is provably exactly zero.

    ``A = 2**e·M`` with ``M`` a (Gaussian-)integer matrix; for the rank ``k`` of ``A`` the product
    ``σ₁(M)…σ_k(M)`` is the square root of a sum of squared ``k × k`` minors, one of them a
    non-zero (Gaussian) integer, so ``σ_k(M) >= σ₁(M)**(1−k)`` and ``σ₁/σ_k <= σ₁(M)**k``. Returns
    ``k·log10(σ₁(M))`` with ``σ₁(M) <= ‖M‖_F`` and ``k = min(m, n)``.

    Parameters
    ----------
    a : numpy.ndarray or torch.Tensor
        One matrix.

    Returns
    -------
    float
        Decimal digits (``0`` for the zero matrix).
    """
    arr = a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    parts = np.concatenate([arr.real.ravel(), arr.imag.ravel()]) if np.iscomplexobj(arr) else arr.ravel()
    parts = parts.astype(np.float64)
    nz = parts[parts != 0]
    if nz.size == 0:
        return 0.0
    lo = min(_lowest_bit(float(x)) for x in nz)
    hi = max(math.frexp(abs(float(x)))[1] for x in nz)  # |x| < 2**hi
    m, n = arr.shape[-2:]
    log10_s1 = 0.5 * math.log10(max(1, arr.size) * (2 if np.iscomplexobj(arr) else 1)) + (
        hi - lo
    ) * math.log10(2)
    return min(m, n) * log10_s1


def _lowest_bit(x: float) -> int:
    """Exponent of the lowest set bit of a finite non-zero float: x = odd * 2**result."""
    p, q = abs(x).as_integer_ratio()
    return (p & -p).bit_length() - 1 - (q.bit_length() - 1)


def _agree(prev: Sequence[Sequence[Any]], cur: Sequence[Sequence[Any]], dps: int) -> bool:
    """Each block (column) of prev agrees with cur to dps digits, normwise (max norm)."""
    tol = mp.mpf(10) ** (-dps)
    for p, c in zip(prev, cur):
        cmax = max((abs(x) for x in c), default=mp.zero)
        dmax = max((abs(x - y) for x, y in zip(p, c)), default=mp.zero)
        if dmax > tol * cmax:
            return False
    return True


def _converge(
    fn: Callable[[int], list[list[Any]]], dps: int, start: float, singular_digits: float, n: int = 1
) -> list[list[Any]]:
    """Run fn at increasing working precision (digits) until two runs agree to dps digits.

    fn(w) is evaluated inside mp.workdps(w) and returns a list of blocks (lists of mp numbers),
    or raises _Singular. Raises _Singular when the precision exceeds
    dps + singular_digits + log10(3n³·2^(n−1)) + 20 without agreement: a non-singular input has
    κ <= 10**singular_digits (exact_singularity_digits) and GEPP's error is at most
    3n³ρ·κ·10**-w with growth ρ <= 2^(n−1), so it would have converged."""
    w = max(20, int(math.ceil(start)))  # >= 20 digits: exact conversion of float64 input
    wmax = dps + singular_digits + math.log10(3 * n**3) + (n - 1) * math.log10(2) + 20
    prev = None
    while True:
        with mp.workdps(w):
            try:
                cur = fn(w)
            except _Singular:
                cur = None
            if prev is not None and cur is not None and _agree(prev, cur, dps):
                return cur
        if w > wmax or w > dps + _MAX_EXTRA_DIGITS:
            raise _Singular
        prev = cur
        w = max(w + dps, int(1.5 * w))


def _lu(rows: list[list[Any]]) -> tuple[list[list[Any]], list[int], int]:
    """In-place Gaussian elimination with partial pivoting (max modulus, first on ties).
    Returns (rows with L below / U on and above the diagonal, swap sequence, #swaps).
    Raises _Singular on an exactly zero pivot."""
    n = len(rows)
    swaps = []
    nsw = 0
    for k in range(n):
        p = max(range(k, n), key=lambda i: abs(rows[i][k]))
        if rows[p][k] == 0:
            raise _Singular
        swaps.append(p)
        if p != k:
            rows[k], rows[p] = rows[p], rows[k]
            nsw += 1
        rk = rows[k]
        piv = rk[k]
        tail = rk[k + 1 :]
        for i in range(k + 1, n):
            ri = rows[i]
            f = ri[k] / piv
            ri[k] = f
            if f:
                ri[k + 1 :] = [x - f * y for x, y in zip(ri[k + 1 :], tail)]
    return rows, swaps, nsw


def _lu_solve_cols(lu: list[list[Any]], swaps: list[int], cols: list[list[Any]]) -> list[list[Any]]:
    n = len(lu)
    out = []
    for b in cols:
        x = list(b)
        for k, p in enumerate(swaps):
            if p != k:
                x[k], x[p] = x[p], x[k]
        for i in range(n):  # L y = Pb, unit lower
            ri = lu[i]
            s = x[i]
            for j in range(i):
                s -= ri[j] * x[j]
            x[i] = s
        for i in range(n - 1, -1, -1):  # U x = y
            ri = lu[i]
            s = x[i]
            for j in range(i + 1, n):
                s -= ri[j] * x[j]
            x[i] = s / ri[i]
        out.append(x)
    return out


def _batched_pair(
    A: torch.Tensor, B: torch.Tensor, dt: torch.dtype
) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
    batch = tuple(torch.broadcast_shapes(A.shape[:-2], B.shape[:-2]))
    nb = math.prod(batch)
    a = _wide(A, dt).expand(*batch, *A.shape[-2:]).reshape(nb, *A.shape[-2:]).numpy()
    b = _wide(B, dt).expand(*batch, *B.shape[-2:]).reshape(nb, *B.shape[-2:]).numpy()
    return batch, a, b


def _raise_singular(fn: str, batch: tuple[int, ...], i: int) -> None:
    idx = tuple(int(v) for v in np.unravel_index(i, batch)) if batch else ()
    where = f" (batch element {idx})" if idx else ""
    raise torch.linalg.LinAlgError(f"reference.mp.{fn}: the matrix{where} is exactly singular")


def _solve_np(a: np.ndarray, b: np.ndarray, dps: int) -> np.ndarray:
    """X with A X = B for one matrix (numpy in, numpy complex/float out)."""
    n, k = b.shape
    cplx = np.iscomplexobj(a) or np.iscomplexobj(b)
    if n == 0 or k == 0:
        return np.zeros((n, k), dtype=np.complex128 if cplx else np.float64)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return np.full((n, k), np.nan, dtype=np.complex128 if cplx else np.float64)

    def fn(w: int) -> list[list[Any]]:
        rows = _rows(a)
        lu, swaps, _ = _lu(rows)
        cols = [list(c) for c in zip(*_rows(b))]
        return _lu_solve_cols(lu, swaps, cols)

    cols = _converge(fn, dps, dps + 10 + _log10_cond64(a), exact_singularity_digits(a), n)
    out = np.array(
        [[_to_float(x, cplx) for x in c] for c in cols], dtype=np.complex128 if cplx else np.float64
    )
    return out.T


# ----------------------------------------------------------------------------------------------
# public references


def solve(A: torch.Tensor, B: torch.Tensor, *, left: bool = True, dps: int = 50) -> torch.Tensor:
    """``torch.linalg.solve`` to ``dps`` correct digits (normwise per right-hand side).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``.
    B : torch.Tensor
        ``(..., n, k)`` or a (batch of) vector(s) by torch's rule; ``(..., k, n)`` if ``left=False``.
    left : bool
        ``A X = B`` (``True``) or ``X A = B``.
    dps : int
        Correct decimal digits wanted (the result is then rounded to float64).

    Returns
    -------
    torch.Tensor
        float64/complex128.

    Raises
    ------
    torch.linalg.LinAlgError
        If a matrix is exactly singular.
    """
    _check("A", A)
    _check("B", B, 1)
    _square("A", A)
    _check_dps(dps)
    vec = _is_vector_rhs(A, B)
    Bm = (B.unsqueeze(-1) if left else B.unsqueeze(-2)) if vec else B
    At = A if left else A.mT
    Bt = Bm if left else Bm.mT
    if Bt.shape[-2] != A.shape[-1]:
        raise ValueError(f"B has incompatible shape {tuple(B.shape)} for A of shape {tuple(A.shape)}")
    dt = _wide_dtype(A, B)
    batch, a, b = _batched_pair(At, Bt, dt)
    outs = []
    for i in range(a.shape[0]):
        try:
            outs.append(_solve_np(a[i], b[i], dps))
        except _Singular:
            _raise_singular("solve", batch, i)
    X = torch.from_numpy(np.stack(outs)) if outs else torch.empty(0, *b.shape[1:], dtype=dt)
    X = X.reshape(*batch, *Bt.shape[-2:])
    if not left:
        X = X.mT
    if vec:
        X = X.squeeze(-1) if left else X.squeeze(-2)
    return X.contiguous()


def inv(A: torch.Tensor, *, dps: int = 50) -> torch.Tensor:
    """``torch.linalg.inv`` to ``dps`` correct digits (normwise per column).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``.
    dps : int
        Correct decimal digits wanted.

    Returns
    -------
    torch.Tensor
        float64/complex128.

    Raises
    ------
    torch.linalg.LinAlgError
        If a matrix is exactly singular.
    """
    _check("A", A)
    _square("A", A)
    n = A.shape[-1]
    eye = torch.eye(n, dtype=A.dtype if A.is_complex() else torch.float64)
    try:
        return solve(A, eye.expand(*A.shape[:-2], n, n), dps=dps)
    except torch.linalg.LinAlgError as e:
        raise torch.linalg.LinAlgError(str(e).replace("mp.solve", "mp.inv")) from None


def solve_triangular(
    A: torch.Tensor,
    B: torch.Tensor,
    *,
    upper: bool,
    left: bool = True,
    unitriangular: bool = False,
    dps: int = 50,
) -> torch.Tensor:
    """``torch.linalg.solve_triangular`` to ``dps`` correct digits (substitution in mpmath).

    Reads only the triangle named by ``upper`` (not the diagonal if ``unitriangular``).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``.
    B : torch.Tensor
        ``(..., n, k)`` (``left``) or ``(..., k, n)``.
    upper, left, unitriangular : bool
        As in torch.
    dps : int
        Correct decimal digits wanted.

    Returns
    -------
    torch.Tensor
        float64/complex128.

    Raises
    ------
    torch.linalg.LinAlgError
        If a diagonal entry is exactly zero (torch returns inf/NaN there).
    """
    _check("A", A)
    _check("B", B)
    _square("A", A)
    _check_dps(dps)
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise ValueError(f"B has incompatible shape {tuple(B.shape)} for A of shape {tuple(A.shape)}")
    # X op(T) = B  <=>  op(T)^T X^T = B^T, and T^T is lower iff T is upper
    T = A if left else A.mT
    low = (not upper) if left else upper
    Bt = B if left else B.mT
    cplx = A.is_complex() or B.is_complex()
    batch, a, b = _batched_pair(T, Bt, _wide_dtype(A, B))
    dt = np.complex128 if cplx else np.float64
    outs = []
    for t in range(a.shape[0]):
        at, bt = a[t], b[t]
        mask = np.tril(np.ones((n, n), bool), -1 if unitriangular else 0)
        if not low:
            mask = mask.T
        at = np.where(mask, at, 0)
        if unitriangular:
            at = at + np.eye(n)
        if bt.size == 0:
            outs.append(np.zeros(bt.shape, dtype=dt))
            continue
        if (np.diagonal(at) == 0).any():
            _raise_singular("solve_triangular", batch, t)
        if not (np.isfinite(at).all() and np.isfinite(bt).all()):
            outs.append(np.full(bt.shape, np.nan, dtype=dt))
            continue

        def fn(w: int, at: np.ndarray = at, bt: np.ndarray = bt) -> list[list[Any]]:
            rows = _rows(at)
            res = []
            order = range(n) if low else range(n - 1, -1, -1)
            for c in zip(*_rows(bt)):
                x = list(c)
                for i in order:
                    ri = rows[i]
                    s = x[i]
                    js = range(i) if low else range(i + 1, n)
                    for j in js:
                        s -= ri[j] * x[j]
                    x[i] = s if unitriangular else s / ri[i]
                res.append(x)
            return res

        cols = _converge(fn, dps, dps + 10 + _log10_cond64(at), math.inf)
        outs.append(np.array([[_to_float(x, cplx) for x in c] for c in cols], dtype=dt).T)
    X = (
        torch.from_numpy(np.stack(outs))
        if outs
        else torch.empty(0, *b.shape[1:], dtype=torch.from_numpy(b).dtype)
    )
    X = X.reshape(*batch, *Bt.shape[-2:])
    return (X if left else X.mT).contiguous()


def _det_mp(a: np.ndarray, dps: int) -> Any:
    """det of one matrix as an mp number with dps correct digits (0 if exactly singular)."""
    n = a.shape[0]
    if n == 0:
        return mp.one

    def fn(w: int) -> list[list[Any]]:
        lu, _, nsw = _lu(_rows(a))
        d = -mp.one if nsw % 2 else mp.one
        for i in range(n):
            d *= lu[i][i]
        return [[d]]

    try:
        return _converge(fn, dps, dps + 10 + _log10_cond64(a), exact_singularity_digits(a), n)[0][0]
    except _Singular:
        return mp.zero


def det(A: torch.Tensor, *, dps: int = 50) -> torch.Tensor:
    """``torch.linalg.det`` to ``dps`` correct digits (relative), rounded to float64/complex128.

    Exactly singular input gives exactly 0; a determinant outside float64's range gives inf/0
    (use :func:`slogdet`).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``.
    dps : int
        Correct decimal digits wanted.

    Returns
    -------
    torch.Tensor
        float64/complex128 ``(...)``.
    """
    _check("A", A)
    _square("A", A)
    _check_dps(dps)
    cplx = A.is_complex()
    a = _flat_wide(A)
    vals = []
    for i in range(a.shape[0]):
        if not np.isfinite(a[i]).all():
            vals.append(complex("nan+nanj") if cplx else math.nan)
            continue
        with mp.workdps(dps + 10):
            vals.append(_to_float(_det_mp(a[i], dps), cplx))
    out = np.array(vals, dtype=np.complex128 if cplx else np.float64)
    return torch.from_numpy(out).reshape(A.shape[:-2])


def slogdet(A: torch.Tensor, *, dps: int = 50) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.slogdet`` to ``dps`` correct digits: ``(sign, logabsdet)``.

    Computed from the mp determinant, so it is right even where ``det`` over/underflows float64.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``.
    dps : int
        Correct decimal digits wanted.

    Returns
    -------
    sign : torch.Tensor
        float64 (``±1``, 0 if singular) or complex128 (unit modulus, 0 if singular).
    logabsdet : torch.Tensor
        float64 (``-inf`` if singular).
    """
    _check("A", A)
    _square("A", A)
    _check_dps(dps)
    cplx = A.is_complex()
    a = _flat_wide(A)
    signs, logs = [], []
    for i in range(a.shape[0]):
        if not np.isfinite(a[i]).all():
            signs.append(complex("nan+nanj") if cplx else math.nan)
            logs.append(math.nan)
            continue
        with mp.workdps(dps + 10):
            d = _det_mp(a[i], dps)
            if d == 0:
                signs.append(0j if cplx else 0.0)
                logs.append(-math.inf)
            else:
                signs.append(_to_float(d / abs(d), cplx))
                logs.append(float(mp.log(abs(d))))
    shape = A.shape[:-2]
    return (
        torch.from_numpy(np.array(signs, dtype=np.complex128 if cplx else np.float64)).reshape(shape),
        torch.from_numpy(np.array(logs, dtype=np.float64)).reshape(shape),
    )


def _svdvals_mp(a: np.ndarray, dps: int) -> list[Any]:
    """Singular values of one matrix, each with dps correct digits (relative)."""
    m, n = a.shape
    k = min(m, n)
    if k == 0:
        return []
    if not (a != 0).any():
        return [mp.zero] * k
    cplx = np.iscomplexobj(a)
    guard = math.log10(max(m, n)) + 5  # |Δσ_i| <= 10**guard * 10**-w * σ₁ (generous)
    w = max(20.0, dps + guard + 5 + _log10_cond64(a))
    zero_digits = exact_singularity_digits(a)
    while True:
        with mp.workdps(int(math.ceil(w))):
            M = mp.matrix(_rows(a))
            S = (mp.svd_c if cplx else mp.svd_r)(M, compute_uv=False)
            s = sorted((S[i] for i in range(k)), reverse=True)
            s1 = s[0]
            noise_digits = w - guard  # σ_i below s1*10**-noise_digits is not resolved
            need = w
            unresolved = False
            for si in s:
                if si <= s1 * mp.mpf(10) ** (-noise_digits):
                    unresolved = True
                else:
                    need = max(need, dps + guard + float(mp.log10(s1 / si)))
            if unresolved and noise_digits > zero_digits + 5:
                # provably exactly zero (exact_singularity_digits); resolved ones checked below
                floor = s1 * mp.mpf(10) ** (-noise_digits)
                s = [si if si > floor else mp.zero for si in s]
                unresolved = False
            if not unresolved and w >= need:
                return [+si for si in s]
        if w - dps > _MAX_EXTRA_DIGITS:
            raise RuntimeError("reference.mp.svdvals: precision cap reached")  # pragma: no cover
        w = max(2 * w, need + 5) if unresolved else need + 5


def svdvals(A: torch.Tensor, *, dps: int = 50) -> torch.Tensor:
    """``torch.linalg.svdvals`` with every singular value correct to ``dps`` digits *relative*.

    ``mp.svd`` is only absolutely accurate (``|Δσ_i| ≈ n·10**-w·σ₁``); the working precision ``w``
    is raised by ``log10(σ₁/σ_min)`` until the smallest one is resolved too, and exactly zero
    singular values (see :func:`exact_singularity_digits`) are returned as 0.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.
    dps : int
        Correct decimal digits wanted.

    Returns
    -------
    torch.Tensor
        float64 ``(..., min(m, n))``, non-increasing (NaN for non-finite input).
    """
    _check("A", A)
    _check_dps(dps)
    m, n = A.shape[-2:]
    k = min(m, n)
    a = _flat_wide(A)
    out = np.empty((a.shape[0], k), dtype=np.float64)
    for i in range(a.shape[0]):
        if not np.isfinite(a[i]).all():
            out[i] = np.nan
            continue
        out[i] = [float(s) for s in _svdvals_mp(a[i], dps)]
    return torch.from_numpy(out).reshape(*A.shape[:-2], k)


def cond(A: torch.Tensor, p: float | str | None = None, *, dps: int = 50) -> torch.Tensor:
    """Condition number to ``dps`` digits, rounded to float64.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)`` (any ``(..., m, n)`` for ``p`` = None/2).
    p : {None, 2, 1, inf, "fro"}
        ``None``/2: ``σ₁/σ_min`` (from :func:`svdvals`, ``inf`` if singular); 1, ``inf``,
        ``"fro"``: ``‖A‖_p ‖A⁻¹‖_p`` (``inf`` if singular).
    dps : int
        Correct decimal digits wanted.

    Returns
    -------
    torch.Tensor
        float64 ``(...)``.
    """
    _check("A", A)
    if p is None or p == 2:
        S = svdvals(A, dps=dps)
        with np.errstate(divide="ignore", invalid="ignore"):
            return S[..., 0] / S[..., -1]
    if p not in (1, math.inf, "fro"):
        raise ValueError(f"cond: p must be None, 2, 1, inf or 'fro', got {p!r}")
    _square("A", A)
    a = _flat_wide(A)
    out = np.empty(a.shape[0], dtype=np.float64)

    def norm(rows: list[list[Any]]) -> Any:
        if p == 1:
            return max(mp.fsum(abs(r[j]) for r in rows) for j in range(len(rows[0])))
        if p == math.inf:
            return max(mp.fsum(abs(x) for x in r) for r in rows)
        return mp.sqrt(mp.fsum(abs(x) ** 2 for r in rows for x in r))

    for i in range(a.shape[0]):
        try:
            Xi = _solve_np(a[i], np.eye(a.shape[-1]), dps)
        except _Singular:
            out[i] = math.inf
            continue
        with mp.workdps(dps + 10):
            out[i] = float(norm(_rows(a[i])) * norm(_rows(Xi)))
    return torch.from_numpy(out).reshape(A.shape[:-2])


def _eigvalsh_mp(a: np.ndarray, dps: int) -> list[Any]:
    """Eigenvalues of one Hermitian matrix (lower triangle read), ascending, each with ``dps``
    correct digits relative to itself (``mp.eigsy``/``mp.eighe`` are absolutely accurate:
    ``|Δλ_i| ≈ n 10**-w max|λ|``; ``w`` is raised by ``log10(max|λ| / |λ_i|)``; eigenvalues still at
    the noise level past :func:`exact_singularity_digits` are exactly zero)."""
    n = a.shape[0]
    if n == 0:
        return []
    low = np.tril(a, -1)
    h = low + low.conj().T + np.diag(np.diag(a).real)
    if not (h != 0).any():
        return [mp.zero] * n
    cplx = np.iscomplexobj(h)
    guard = math.log10(n) + 5
    w = max(20.0, dps + guard + 5 + _log10_cond64(h))
    zero_digits = exact_singularity_digits(h)
    while True:
        with mp.workdps(int(math.ceil(w))):
            M = mp.matrix(_rows(h))
            ev = (mp.eighe if cplx else mp.eigsy)(M, eigvals_only=True)
            lam = sorted(ev[i] for i in range(n))
            top = max(abs(x) for x in lam)
            noise_digits = w - guard
            need, unresolved = w, False
            for x in lam:
                if abs(x) <= top * mp.mpf(10) ** (-noise_digits):
                    unresolved = True
                else:
                    need = max(need, dps + guard + float(mp.log10(top / abs(x))))
            if unresolved and noise_digits > zero_digits + 5:
                floor = top * mp.mpf(10) ** (-noise_digits)
                lam = [x if abs(x) > floor else mp.zero for x in lam]
                unresolved = False
            if not unresolved and w >= need:
                return [+x for x in lam]
        if w - dps > _MAX_EXTRA_DIGITS:
            raise RuntimeError("reference.mp.eigvalsh: precision cap reached")  # pragma: no cover
        w = max(2 * w, need + 5) if unresolved else need + 5


def eigvalsh(A: torch.Tensor, *, dps: int = 50) -> torch.Tensor:
    """``torch.linalg.eigvalsh`` (lower triangle, ``UPLO="L"``) with every eigenvalue correct to
    ``dps`` digits *relative to itself*, however small (precision raised as for :func:`svdvals`).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``; only the lower triangle and the real part of the diagonal are read.
    dps : int
        Correct decimal digits wanted.

    Returns
    -------
    torch.Tensor
        float64 ``(..., n)``, ascending (NaN for non-finite input).
    """
    _check("A", A)
    _square("A", A)
    _check_dps(dps)
    n = A.shape[-1]
    a = _flat_wide(A)
    out = np.empty((a.shape[0], n), dtype=np.float64)
    for i in range(a.shape[0]):
        if not np.isfinite(np.tril(a[i])).all():
            out[i] = np.nan
            continue
        out[i] = [float(x) for x in _eigvalsh_mp(a[i], dps)]
    return torch.from_numpy(out).reshape(*A.shape[:-2], n)
