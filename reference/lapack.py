"""SciPy/LAPACK references with ``torch.linalg``'s conventions.

Every function takes torch tensors of any floating dtype and batch shape, promotes the *given*
(already rounded) values exactly to float64/complex128, runs LAPACK through SciPy on each matrix of
the batch, and returns float64/complex128 torch tensors on the CPU with the same shapes, argument
names, pivot convention (1-based int32) and broadcasting rules as the ``torch.linalg`` function of
the same name. They are references for float32/complex64 results: their own error is of order
``κ·2**-53``, far below float32's ``2**-24``. For float64 results use :mod:`reference.mp`.

This module holds the LU family (``getrf``, ``lu*``, ``solve*``, ``inv``, ``det``, ``slogdet``);
the orthogonal factorizations (``qr``, ``svd``, ``svdvals``, ``cond``, ``pinv``, ``lstsq``) live in
:mod:`reference.lapack_orthogonal` and are re-exported here.

The exception is :func:`getrf_pivots` / :func:`getrf`, which run LAPACK in the input's **own**
precision (``sgetrf``/``cgetrf`` for float32/complex64) to get the pivot sequence LAPACK picks in
that precision.

Non-finite input: the LU-based functions run LAPACK on it as is (NaN propagates); the SVD-based
ones (``svd``, ``svdvals``, ``pinv``, ``lstsq``) and ``qr`` return NaN for a batch element with a
NaN or inf entry, instead of LAPACK's undefined behaviour.

Exactly singular input (a zero pivot in LAPACK's LU) makes ``lu_factor``, ``solve`` and ``inv``
raise ``torch.linalg.LinAlgError`` naming the batch element, as ``torch.linalg`` does; use the
``_ex`` variant or ``det``/``slogdet`` to inspect it.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.linalg import blas as _blas
from scipy.linalg import lapack as _lapack

from ._common import check_square as _square
from ._common import check_tensor as _check
from ._common import flat_batch as _flat
from ._common import is_vector_rhs as _is_vector_rhs
from ._common import wide as _wide
from ._common import wide_dtype as _wide_dtype

# the orthogonal factorizations live in lapack_orthogonal.py; re-exported: users import reference.lapack
from .lapack_orthogonal import LstsqResult, cond, lstsq, pinv, qr, svd, svdvals

__all__ = [
    "LstsqResult",
    "cond",
    "det",
    "getrf",
    "getrf_pivots",
    "inv",
    "lstsq",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_triangular",
    "svd",
    "svdvals",
]


# ----------------------------------------------------------------------------------------------
# plumbing


def _index(batch: tuple[int, ...], flat_i: int) -> tuple[int, ...]:
    return tuple(int(v) for v in np.unravel_index(flat_i, batch)) if batch else ()


def _singular(fn: str, idx: tuple[int, ...], info: int) -> torch.linalg.LinAlgError:
    where = f"(batch element {idx}) " if idx else ""
    return torch.linalg.LinAlgError(
        f"reference.lapack.{fn}: {where}the matrix is singular: U[{info - 1},{info - 1}] is exactly zero "
        f"(LAPACK info = {info})"
    )


# ----------------------------------------------------------------------------------------------
# LU family


def getrf(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LAPACK ``xGETRF`` in the input's own precision.

    ``sgetrf`` for float32, ``cgetrf`` for complex64, ``dgetrf``/``zgetrf`` for float64/complex128
    (other floating dtypes are promoted to float32). Use it to compare a float32 LU's pivot
    sequence and rounding with LAPACK's.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.

    Returns
    -------
    LU : torch.Tensor
        Packed factors in ``A``'s dtype, ``(..., m, n)``.
    pivots : torch.Tensor
        int32, 1-based (torch/LAPACK convention), ``(..., min(m, n))``.
    info : torch.Tensor
        int32, ``(...)``: 0, or ``i`` if ``U[i-1, i-1]`` is exactly zero (first such ``i``).
    """
    _check("A", A)
    t = A.detach().to("cpu").resolve_conj().resolve_neg()
    if t.dtype not in (torch.float32, torch.complex64, torch.float64, torch.complex128):
        t = t.to(torch.complex64 if t.is_complex() else torch.float32)
    fn = {
        torch.float32: _lapack.sgetrf,
        torch.complex64: _lapack.cgetrf,
        torch.float64: _lapack.dgetrf,
        torch.complex128: _lapack.zgetrf,
    }[t.dtype]
    batch = tuple(t.shape[:-2])
    m, n = t.shape[-2:]
    k = min(m, n)
    a = _flat(t, batch, 2)
    lus = np.empty_like(a)
    pivs = np.zeros((a.shape[0], k), dtype=np.int32)
    infos = np.zeros(a.shape[0], dtype=np.int32)
    if k > 0:
        for i in range(a.shape[0]):
            lu_, piv, info = fn(a[i])
            lus[i], pivs[i], infos[i] = lu_, piv + 1, info
    else:
        lus[...] = a
    return (
        torch.from_numpy(lus).reshape(*batch, m, n),
        torch.from_numpy(pivs).reshape(*batch, k),
        torch.from_numpy(infos).reshape(batch),
    )


def getrf_pivots(A: torch.Tensor) -> torch.Tensor:
    """LAPACK's 1-based int32 pivots for ``A`` computed in ``A``'s own precision (see :func:`getrf`).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``, float32/complex64 (``sgetrf``/``cgetrf``) or float64/complex128.

    Returns
    -------
    torch.Tensor
        int32, ``(..., min(m, n))``, comparable with ``torch.linalg.lu_factor(A).pivots``.

    Examples
    --------
    >>> A = torch.randn(5, 5)
    >>> bool((getrf_pivots(A) == torch.linalg.lu_factor(A).pivots).all())
    True
    """
    return getrf(A)[1]


def lu_factor_ex(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch.linalg.lu_factor_ex`` in float64/complex128 (``dgetrf``/``zgetrf``), never raises.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``, any floating dtype.

    Returns
    -------
    LU : torch.Tensor
        float64/complex128, ``(..., m, n)``.
    pivots : torch.Tensor
        int32, 1-based, ``(..., min(m, n))``.
    info : torch.Tensor
        int32, ``(...)``.
    """
    _check("A", A)
    return getrf(_wide(A))


def lu_factor(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.lu_factor`` in float64/complex128: ``(LU, pivots)``.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.

    Returns
    -------
    LU : torch.Tensor
        Packed unit-lower ``L`` and upper ``U``, float64/complex128.
    pivots : torch.Tensor
        int32, 1-based, ``(..., min(m, n))``.

    Raises
    ------
    torch.linalg.LinAlgError
        If a batch element is exactly singular (zero pivot), naming the element.
    """
    LU, piv, info = lu_factor_ex(A)
    bad = torch.nonzero(info.reshape(-1)).flatten()
    if bad.numel():
        i = int(bad[0])
        raise _singular("lu_factor", _index(tuple(info.shape), i), int(info.reshape(-1)[i]))
    return LU, piv


def lu(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch.linalg.lu`` in float64/complex128: ``(P, L, U)`` with ``A = P L U``.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.

    Returns
    -------
    P : torch.Tensor
        Permutation matrices ``(..., m, m)`` (same dtype as ``L``).
    L : torch.Tensor
        Unit lower trapezoidal ``(..., m, k)``, ``k = min(m, n)``.
    U : torch.Tensor
        Upper trapezoidal ``(..., k, n)``.
    """
    LU, piv, _ = lu_factor_ex(A)
    return torch.lu_unpack(LU, piv)


def _broadcast_batch(*ts: torch.Tensor) -> tuple[int, ...]:
    return tuple(torch.broadcast_shapes(*(t.shape[:-2] for t in ts)))


def lu_solve(
    LU: torch.Tensor,
    pivots: torch.Tensor,
    B: torch.Tensor,
    *,
    left: bool = True,
    adjoint: bool = False,
) -> torch.Tensor:
    """``torch.linalg.lu_solve`` in float64/complex128 (``xGETRS``).

    Solves ``A X = B`` (``left``), ``X A = B`` (``left=False``), or with ``Aᴴ`` (``adjoint``),
    given ``A = P L U`` packed in ``LU, pivots``. Batches broadcast.

    Parameters
    ----------
    LU : torch.Tensor
        ``(..., n, n)``, as from ``torch.linalg.lu_factor`` (any floating dtype; promoted).
    pivots : torch.Tensor
        int32 1-based ``(..., n)``.
    B : torch.Tensor
        ``(..., n, k)`` (``left``) or ``(..., k, n)``.
    left, adjoint : bool
        As in ``torch.linalg.lu_solve``.

    Returns
    -------
    torch.Tensor
        float64/complex128, broadcast batch shape.
    """
    _check("LU", LU)
    _check("B", B)
    _square("LU", LU)
    n = LU.shape[-1]
    if pivots.shape[-1] != n:
        raise ValueError(f"pivots must have shape (..., {n}), got {tuple(pivots.shape)}")
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise ValueError(f"B has incompatible shape {tuple(B.shape)} for LU of shape {tuple(LU.shape)}")
    dt = _wide_dtype(LU, B)
    batch = tuple(torch.broadcast_shapes(LU.shape[:-2], pivots.shape[:-1], B.shape[:-2]))
    lu_ = _flat(_wide(LU, dt), batch, 2)
    piv = np.ascontiguousarray(
        pivots.detach().to("cpu", torch.int32).expand(*batch, n).reshape(math.prod(batch), n).numpy() - 1
    )
    b = _flat(_wide(B, dt), batch, 2)
    getrs = _lapack.zgetrs if dt == torch.complex128 else _lapack.dgetrs
    out = np.empty_like(b)
    for i in range(b.shape[0]):
        if n == 0 or b.shape[-1] == 0 or b.shape[-2] == 0:
            out[i] = b[i]
            continue
        if left:
            x, _ = getrs(lu_[i], piv[i], b[i], trans=2 if adjoint else 0)
        elif not adjoint:
            # X A = B  <=>  A^T X^T = B^T
            x, _ = getrs(lu_[i], piv[i], np.ascontiguousarray(b[i].T), trans=1)
            x = x.T
        else:
            # X A^H = B  <=>  conj(A) X^T = B^T  <=>  A conj(X^T) = conj(B^T)
            x, _ = getrs(lu_[i], piv[i], np.ascontiguousarray(b[i].T.conj()), trans=0)
            x = x.conj().T
        out[i] = x
    return torch.from_numpy(out).reshape(*batch, *B.shape[-2:])


def solve(A: torch.Tensor, B: torch.Tensor, *, left: bool = True) -> torch.Tensor:
    """``torch.linalg.solve`` in float64/complex128 (``xGETRF`` + ``xGETRS``).

    Same vector rule as torch: ``B`` is a (batch of) vector(s) if ``B.ndim == 1`` or
    ``B.ndim == A.ndim - 1`` and ``B.shape == A.shape[:-1]``. Batches broadcast.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``.
    B : torch.Tensor
        ``(..., n, k)``, ``(..., n)`` or ``(n,)`` (``(..., k, n)`` when ``left=False``).
    left : bool
        ``True``: ``A X = B``; ``False``: ``X A = B``.

    Returns
    -------
    torch.Tensor
        float64/complex128.

    Raises
    ------
    torch.linalg.LinAlgError
        If some ``A`` is exactly singular.
    """
    _check("A", A)
    _check("B", B, 1)
    _square("A", A)
    vec = _is_vector_rhs(A, B)
    Bm = B.unsqueeze(-1) if vec else B
    if not left and vec:
        Bm = B.unsqueeze(-2)
    LU, piv, info = lu_factor_ex(A)
    bad = torch.nonzero(info.reshape(-1)).flatten()
    if bad.numel():
        i = int(bad[0])
        raise _singular("solve", _index(tuple(info.shape), i), int(info.reshape(-1)[i]))
    X = lu_solve(LU, piv, Bm, left=left)
    if vec:
        X = X.squeeze(-1) if left else X.squeeze(-2)
    return X


def solve_triangular(
    A: torch.Tensor,
    B: torch.Tensor,
    *,
    upper: bool,
    left: bool = True,
    unitriangular: bool = False,
) -> torch.Tensor:
    """``torch.linalg.solve_triangular`` in float64/complex128 (BLAS ``xTRSM``).

    Reads only the triangle named by ``upper`` (and not the diagonal when ``unitriangular``), like
    ``xTRSM``; the rest of ``A`` may hold anything, including NaN. A zero diagonal entry gives
    inf/NaN, as in torch (no check). Batches broadcast.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``.
    B : torch.Tensor
        ``(..., n, k)`` (``left``) or ``(..., k, n)`` (``left=False``).
    upper, left, unitriangular : bool
        As in ``torch.linalg.solve_triangular``.

    Returns
    -------
    torch.Tensor
        float64/complex128.
    """
    _check("A", A)
    _check("B", B)
    _square("A", A)
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise ValueError(f"B has incompatible shape {tuple(B.shape)} for A of shape {tuple(A.shape)}")
    dt = _wide_dtype(A, B)
    batch = _broadcast_batch(A, B)
    a = _flat(_wide(A, dt), batch, 2)
    b = _flat(_wide(B, dt), batch, 2)
    trsm = _blas.ztrsm if dt == torch.complex128 else _blas.dtrsm
    out = np.empty_like(b)
    for i in range(b.shape[0]):
        if b[i].size == 0:
            out[i] = b[i]
            continue
        out[i] = trsm(
            1.0,
            a[i],
            b[i],
            side=0 if left else 1,
            lower=0 if upper else 1,
            trans_a=0,
            diag=1 if unitriangular else 0,
        )
    return torch.from_numpy(out).reshape(*batch, *B.shape[-2:])


def inv(A: torch.Tensor) -> torch.Tensor:
    """``torch.linalg.inv`` in float64/complex128 (``xGETRF`` + ``xGETRI``).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``.

    Returns
    -------
    torch.Tensor
        float64/complex128 ``(..., n, n)``.

    Raises
    ------
    torch.linalg.LinAlgError
        If some ``A`` is exactly singular.
    """
    LU, info, batch, lu_, p = _lu_batch(A)
    bad = torch.nonzero(info.reshape(-1)).flatten()
    if bad.numel():
        i = int(bad[0])
        raise _singular("inv", _index(tuple(info.shape), i), int(info.reshape(-1)[i]))
    n = A.shape[-1]
    getri = _lapack.zgetri if LU.is_complex() else _lapack.dgetri
    out = np.empty_like(lu_)
    for i in range(lu_.shape[0]):
        if n == 0:
            continue
        out[i], _ = getri(lu_[i], p[i])
    return torch.from_numpy(out).reshape(*batch, n, n)


def _lu_batch(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, tuple[int, ...], np.ndarray, np.ndarray]:
    """Check square ``A`` and factor it: ``(LU, info, batch, LU as (N, n, n), 0-based pivots (N, n))``."""
    _check("A", A)
    _square("A", A)
    LU, piv, info = lu_factor_ex(A)
    batch = tuple(A.shape[:-2])
    return LU, info, batch, _flat(LU, batch, 2), _flat(piv, batch, 1) - 1


def _odd_perm(piv: np.ndarray) -> bool:
    """Whether the interchanges ``piv`` (0-based, LAPACK's ``ipiv``) make an odd permutation."""
    return bool(np.count_nonzero(piv != np.arange(piv.size)) % 2)


def _logdet_parts(lu_diag: np.ndarray, piv: np.ndarray) -> tuple[complex | float, float]:
    """(sign, log|det|) from U's diagonal and 0-based pivots."""
    sign: complex | float = -1.0 if _odd_perm(piv) else 1.0
    absd = np.abs(lu_diag)
    if (absd == 0).any():
        return 0.0 * sign, -math.inf
    if np.iscomplexobj(lu_diag):
        sign = sign * np.prod(lu_diag / absd)
        sign = sign / abs(sign)  # renormalise the product of unit-modulus factors
    else:
        sign = sign * float(np.prod(np.sign(lu_diag)))
    return sign, float(np.sum(np.log(absd)))


def _ldexp(x: float, e: int) -> float:
    try:
        return math.ldexp(x, e)
    except OverflowError:
        return math.copysign(math.inf, x)


def _scaled_prod(vals: np.ndarray) -> complex | float:
    """Product without intermediate overflow/underflow: every factor and the running product are
    split into a mantissa of modulus in [0.5, 1) and an integer power of two (exact), so the
    only roundings are the ``len(vals)`` mantissa products and the final ``ldexp``."""
    if not np.isfinite(vals).all() or (vals == 0).any():
        return np.prod(vals)
    cplx = np.iscomplexobj(vals)
    m: complex | float = complex(1.0) if cplx else 1.0
    e = 0
    for v in vals.tolist():
        ev = math.frexp(abs(v))[1]
        m = m * (v * 2.0**-ev if abs(ev) < 1000 else v / math.ldexp(1.0, ev))
        e += ev
        em = math.frexp(abs(m))[1]
        m = m * 2.0**-em
        e += em
    if cplx:
        return complex(_ldexp(m.real, e), _ldexp(m.imag, e))
    return _ldexp(m, e)


def det(A: torch.Tensor) -> torch.Tensor:
    """``torch.linalg.det`` in float64/complex128: product of ``U``'s diagonal of ``xGETRF``
    times the permutation's sign, accumulated without intermediate overflow/underflow.

    Exactly singular input gives 0. A determinant outside float64's range gives ±inf or 0 (use
    :func:`slogdet` then).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``.

    Returns
    -------
    torch.Tensor
        float64/complex128, ``(...)``.
    """
    _, _, batch, lu_, p = _lu_batch(A)
    out = np.empty(lu_.shape[0], dtype=lu_.dtype)
    for i in range(lu_.shape[0]):
        d = np.diagonal(lu_[i]).copy()
        if _odd_perm(p[i]):
            d = np.concatenate([d, np.array([-1.0], dtype=d.dtype)])
        out[i] = _scaled_prod(d) if d.size else 1.0
    return torch.from_numpy(out).reshape(batch)


def slogdet(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.slogdet`` in float64/complex128: ``(sign, logabsdet)``.

    ``sign`` has ``A``'s (widened) dtype (unit modulus complex for complex input, 0 for singular
    input); ``logabsdet`` is float64 (``-inf`` for singular input).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., n, n)``.

    Returns
    -------
    sign, logabsdet : torch.Tensor
        Shapes ``(...)``.
    """
    _, _, batch, lu_, p = _lu_batch(A)
    signs = np.empty(lu_.shape[0], dtype=lu_.dtype)
    logs = np.empty(lu_.shape[0], dtype=np.float64)
    for i in range(lu_.shape[0]):
        signs[i], logs[i] = _logdet_parts(np.diagonal(lu_[i]), p[i])
    return torch.from_numpy(signs).reshape(batch), torch.from_numpy(logs).reshape(batch)
