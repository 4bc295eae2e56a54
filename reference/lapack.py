"""SciPy/LAPACK references with ``torch.linalg``'s conventions.

Every function takes torch tensors of any floating dtype and batch shape, promotes the *given*
(already rounded) values exactly to float64/complex128, runs LAPACK through SciPy on each matrix of
the batch, and returns float64/complex128 torch tensors on the CPU with the same shapes, argument
names, pivot convention (1-based int32) and broadcasting rules as the ``torch.linalg`` function of
the same name. They are references for float32/complex64 results: their own error is of order
``κ·2**-53``, far below float32's ``2**-24``. For float64 results use :mod:`reference.mp`.

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
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla
import torch
from scipy.linalg import blas as _blas
from scipy.linalg import lapack as _lapack

from ._common import check_square as _square
from ._common import check_tensor as _check
from ._common import is_vector_rhs as _is_vector_rhs
from ._common import wide as _wide
from ._common import wide_dtype as _wide_dtype

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


def _flat(t: torch.Tensor, batch: tuple[int, ...], core: int) -> np.ndarray:
    """Expand ``t`` to ``batch + t.shape[-core:]`` and return it as (N, *core) numpy array."""
    tail = tuple(t.shape[t.ndim - core :]) if core else ()
    return np.ascontiguousarray(t.expand(*batch, *tail).reshape(math.prod(batch), *tail).numpy())


def _index(batch: tuple[int, ...], flat_i: int) -> tuple[int, ...]:
    return tuple(int(v) for v in np.unravel_index(flat_i, batch)) if batch else ()


def _finite(a: np.ndarray) -> bool:
    return bool(np.isfinite(a).all())


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


# ----------------------------------------------------------------------------------------------
# orthogonal factorizations


def _map(
    A: torch.Tensor,
    fn: Callable[[np.ndarray], tuple[np.ndarray, ...]],
    shapes: tuple[tuple[int, ...], ...],
    dtypes: tuple[np.dtype, ...],
) -> tuple[torch.Tensor, ...]:
    """Apply ``fn`` to each matrix of ``A`` (widened); outputs of given core shapes/dtypes.
    A matrix with a non-finite entry yields NaN outputs."""
    batch = tuple(A.shape[:-2])
    a = _flat(_wide(A), batch, 2)
    outs = [np.empty((a.shape[0], *s), dtype=d) for s, d in zip(shapes, dtypes)]
    for i in range(a.shape[0]):
        if not _finite(a[i]):
            for o in outs:
                o[i] = np.nan
            continue
        res = fn(a[i])
        for o, r in zip(outs, res):
            o[i] = r
    return tuple(torch.from_numpy(o).reshape(*batch, *o.shape[1:]) for o in outs)


def qr(A: torch.Tensor, mode: str = "reduced") -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.qr`` in float64/complex128 (``xGEQRF`` + ``xORGQR``/``xUNGQR``).

    LAPACK's Householder conventions, as torch's CPU path: ``R``'s diagonal is real for real input
    and may be negative.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.
    mode : {"reduced", "complete", "r"}
        As in torch; ``"r"`` returns an empty ``Q``.

    Returns
    -------
    Q, R : torch.Tensor
        float64/complex128.
    """
    _check("A", A)
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    m, n = A.shape[-2:]
    k = min(m, n)
    if m == 0 or n == 0:
        return torch.linalg.qr(_wide(A), mode=mode)
    dt = np.complex128 if A.is_complex() else np.float64
    if mode == "r":
        (R,) = _map(A, lambda a: (sla.qr(a, mode="r", check_finite=False)[0][:k],), ((k, n),), (dt,))
        return torch.empty(0, dtype=R.dtype), R
    full = mode == "complete"
    qc = m if full else k
    return _map(
        A,
        lambda a: tuple(sla.qr(a, mode="full" if full else "economic", check_finite=False)),
        ((m, qc), (qc, n)),
        (dt, dt),
    )


def svd(A: torch.Tensor, full_matrices: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch.linalg.svd`` in float64/complex128 (LAPACK ``xGESVD``, the QR-iteration driver,
    chosen over ``xGESDD`` for robustness).

    Singular values are accurate to ``≈ max(m,n)·2**-53·σ₁`` **absolutely**; small ones relative
    to ``σ₁`` lose accuracy (use :func:`reference.mp.svdvals` for relative accuracy).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.
    full_matrices : bool
        As in torch (default ``True``).

    Returns
    -------
    U, S, Vh : torch.Tensor
        ``U`` ``(..., m, m|k)``, ``S`` float64 ``(..., k)`` non-increasing, ``Vh`` ``(..., n|k, n)``.
    """
    _check("A", A)
    m, n = A.shape[-2:]
    k = min(m, n)
    if m == 0 or n == 0:
        return torch.linalg.svd(_wide(A), full_matrices=full_matrices)
    dt = np.complex128 if A.is_complex() else np.float64
    uc, vr = (m, n) if full_matrices else (k, k)
    return _map(
        A,
        lambda a: tuple(sla.svd(a, full_matrices=full_matrices, check_finite=False, lapack_driver="gesvd")),
        ((m, uc), (k,), (vr, n)),
        (dt, np.float64, dt),
    )


def svdvals(A: torch.Tensor) -> torch.Tensor:
    """``torch.linalg.svdvals`` in float64 (``xGESVD`` without vectors).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.

    Returns
    -------
    torch.Tensor
        float64 ``(..., min(m, n))``, non-increasing; absolutely accurate (see :func:`svd`).
    """
    _check("A", A)
    m, n = A.shape[-2:]
    k = min(m, n)
    if k == 0:
        return torch.linalg.svdvals(_wide(A))
    (S,) = _map(
        A,
        lambda a: (sla.svd(a, compute_uv=False, check_finite=False, lapack_driver="gesvd"),),
        ((k,),),
        (np.float64,),
    )
    return S


def cond(A: torch.Tensor) -> torch.Tensor:
    """2-norm condition number ``σ₁/σₙ`` in float64 (``inf`` if ``σₙ = 0``).

    Only reliable while ``κ ≲ 1e14``: beyond that ``σₙ`` is rounding noise (use
    :func:`reference.mp.cond`).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.

    Returns
    -------
    torch.Tensor
        float64 ``(...)``.
    """
    S = svdvals(A)
    return S[..., 0] / S[..., -1]


def _default_rtol(A: torch.Tensor) -> float:
    # torch.linalg.pinv / lstsq default: eps of A's dtype (finfo.eps, not u) times max(m, n)
    return torch.finfo(A.dtype).eps * max(A.shape[-2], A.shape[-1])


def pinv(
    A: torch.Tensor,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    hermitian: bool = False,
) -> torch.Tensor:
    """``torch.linalg.pinv`` in float64/complex128 via :func:`svd` (or ``eigh`` if
    ``hermitian``).

    Singular values ``σ > max(atol, rtol·σ₁)`` are inverted, the rest dropped. The default tolerance
    follows torch **for the input's dtype** (``rtol = finfo(A.dtype).eps·max(m, n)`` when neither
    ``atol`` nor ``rtol`` is given, 0 when only ``atol`` is), so that the reference drops the same
    singular values as a float32 computation would.

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.
    atol, rtol : float, optional
        Absolute and relative cut-offs.
    hermitian : bool
        Use ``eigh`` of the (lower triangle of the) Hermitian ``A``.

    Returns
    -------
    torch.Tensor
        float64/complex128 ``(..., n, m)``.
    """
    _check("A", A)
    if rtol is None:
        rtol = _default_rtol(A) if (atol is None or atol == 0) else 0.0
    atol = 0.0 if atol is None else float(atol)
    m, n = A.shape[-2:]
    if m == 0 or n == 0:
        return torch.linalg.pinv(_wide(A))
    if hermitian:
        _square("A", A)
        dt = np.complex128 if A.is_complex() else np.float64

        def f(a: np.ndarray) -> tuple[np.ndarray]:
            w, v = np.linalg.eigh(a)  # reads the lower triangle, as torch does
            cut = max(atol, rtol * np.abs(w).max())
            keep = np.abs(w) > cut
            winv = np.where(keep, 1.0 / np.where(keep, w, 1.0), 0.0)
            return ((v * winv) @ v.conj().T,)

        return _map(A, f, ((n, n),), (dt,))[0]
    U, S, Vh = svd(A, full_matrices=False)
    cut = torch.maximum(torch.tensor(atol, dtype=torch.float64), rtol * S[..., :1])
    keep = S > cut
    Sinv = torch.where(keep, 1.0 / torch.where(keep, S, torch.ones_like(S)), torch.zeros_like(S))
    return (Vh.mH * Sinv.unsqueeze(-2).to(Vh.dtype)) @ U.mH


class LstsqResult(NamedTuple):
    """Result of :func:`lstsq` (the fields of ``torch.linalg.lstsq``)."""

    solution: torch.Tensor
    residuals: torch.Tensor
    rank: torch.Tensor
    singular_values: torch.Tensor


def lstsq(A: torch.Tensor, B: torch.Tensor, rcond: float | None = None) -> LstsqResult:
    """Minimum-norm least-squares solution of ``min ‖AX − B‖₂`` in float64/complex128, via the SVD.

    Singular values ``σ ≤ rcond·σ₁`` are treated as zero; default ``rcond`` follows torch **for the
    input's dtype** (``finfo(A.dtype).eps·max(m, n)``). For full-rank ``A`` this is the unique
    solution every ``torch.linalg.lstsq`` driver returns; for rank-deficient ``A`` it is the
    minimum-norm one (drivers ``gelsy``, ``gelsd``, ``gelss``).

    Parameters
    ----------
    A : torch.Tensor
        ``(..., m, n)``.
    B : torch.Tensor
        ``(..., m, k)`` or ``(..., m)`` (torch's vector rule).
    rcond : float, optional
        Relative cut-off.

    Returns
    -------
    LstsqResult
        ``solution`` ``(..., n, k)``; ``residuals`` = squared 2-norms of the residual columns
        ``(..., k)`` if ``m > n`` and every matrix has rank ``n``, else empty; ``rank`` int64
        ``(...)``; ``singular_values`` float64 ``(..., min(m, n))``. (torch fills ``residuals``,
        ``rank`` and ``singular_values`` only for some drivers; the reference always does.)
    """
    _check("A", A)
    _check("B", B, 1)
    vec = _is_vector_rhs(A, B)
    Bm = B.unsqueeze(-1) if vec else B
    m, n = A.shape[-2:]
    if Bm.shape[-2] != m:
        raise ValueError(f"B must have {m} rows to match A of shape {tuple(A.shape)}, got {tuple(B.shape)}")
    if rcond is None:
        rcond = _default_rtol(A)
    dt = _wide_dtype(A, B)
    U, S, Vh = svd(_wide(A, dt), full_matrices=False)
    keep = S > rcond * S[..., :1] if S.shape[-1] else torch.zeros_like(S, dtype=torch.bool)
    Sinv = torch.where(keep, 1.0 / torch.where(keep, S, torch.ones_like(S)), torch.zeros_like(S))
    Bw = _wide(Bm, dt)
    X = Vh.mH @ (Sinv.unsqueeze(-1).to(dt) * (U.mH @ Bw))
    rank = keep.sum(-1)
    if m > n and bool((rank == n).all()):
        res = ((Bw - _wide(A, dt) @ X).abs() ** 2).sum(-2)
    else:
        res = torch.empty(0, dtype=torch.float64)
    if vec:
        X = X.squeeze(-1)
        if res.numel():
            res = res.squeeze(-1)
    return LstsqResult(X, res, rank, S)
