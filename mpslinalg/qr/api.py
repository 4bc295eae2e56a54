"""The QR family's public ops (``torch.linalg``/``torch`` names): checks once, the declared op, ``out=``."""

from __future__ import annotations

import torch

from ..oplayer import checks as E
from ..oplayer import table
from .ops import _geqrf, _householder_product, _ormqr, _qr

_RT = torch.return_types


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def qr(A: torch.Tensor, mode: str = "reduced", *, out=None):
    """QR decomposition ``A = Q R``, like :func:`torch.linalg.qr`.

    Householder QR with LAPACK's conventions (``R`` has a real diagonal whose signs follow
    ``larfg``), so ``Q`` and ``R`` equal torch's/SciPy's up to rounding.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``, float32/complex64 on any device, float64/complex128 on CPU/CUDA.
    mode : {"reduced", "complete", "r"}
        ``"reduced"``: ``Q (*, m, k)``, ``R (*, k, n)`` with ``k = min(m, n)``; ``"complete"``:
        ``Q (*, m, m)``, ``R (*, m, n)``; ``"r"``: ``R`` only (``Q`` is empty).
    out : tuple of torch.Tensor, optional
        ``(Q, R)`` to write into.

    Returns
    -------
    torch.return_types.linalg_qr
        ``(Q, R)``.

    Raises
    ------
    TypeError
        ``mode`` not a str.
    RuntimeError
        Unknown mode, rank below 2, unsupported dtype; in backward, ``mode="r"`` and ``"complete"`` with
        ``m > n`` (torch's messages).

    Examples
    --------
    >>> A = torch.randn(4, 3)
    >>> Q, R = qr(A)
    >>> torch.allclose(Q @ R, A, atol=1e-5)
    True
    """
    if out is None and table.torch_first("qr", A):  # outside the table (table.WHEN)
        try:
            return torch.linalg.qr(A, mode)
        except (RuntimeError, TypeError, ValueError, IndexError):  # bad input: our checks say what
            pass
    op = "linalg.qr"
    E.check_matrix(op, "A", A)
    if not isinstance(mode, str):  # torch's argument parser: TypeError
        raise TypeError(f"{op}: argument 'mode' must be str, not {type(mode).__name__}")
    if mode not in ("reduced", "complete", "r"):
        raise E.OptionError(f"qr received unrecognized mode {mode!r} but expected one of 'reduced' (default), "
                         "'r', or 'complete'")
    if table.torch_is_faster("qr", A):  # outside the measured table (table.WHEN)
        return E.store(op, out, torch.linalg.qr(A, mode), A, kind=_RT.linalg_qr)
    return E.store(op, out, _qr(A, mode), A, kind=_RT.linalg_qr)


def geqrf(A: torch.Tensor, *, out=None):
    """Householder QR in LAPACK's packed form, like :func:`torch.geqrf`.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``.
    out : tuple of torch.Tensor, optional

    Returns
    -------
    torch.return_types.geqrf
        ``(a, tau)``: ``R`` on and above the diagonal of ``a``, the reflectors' ``v`` (unit first
        entry implied) below it; ``tau (*, min(m, n))``. Use :func:`householder_product` or
        :func:`ormqr` to form or apply ``Q``. Not differentiable (as torch's).

    Examples
    --------
    >>> a, tau = geqrf(torch.randn(5, 3))
    >>> householder_product(a, tau).shape
    torch.Size([5, 3])
    """
    op = "torch.geqrf"
    E.check_matrix(op, "input", A)
    return E.store(op, out, _geqrf(A), A, kind=_RT.geqrf)


def _check_reflectors(op: str, V: torch.Tensor, tau: torch.Tensor) -> None:
    E.check_matrix(op, "input", V)
    E.check_tensor(op, "tau", tau)
    if tau.ndim != V.ndim - 1:
        raise E.ShapeError(f"{op}: Expected tau to have one dimension less than input, but got tau.ndim "
                           f"equal to {tau.ndim} and input.ndim is equal to {V.ndim}")
    if tau.shape[:-1] != V.shape[:-2]:
        raise E.ShapeError(f"{op}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"{list(tau.shape[:-1])}")
    E.check_same(op, ("input", "tau"), V, tau)


def householder_product(A: torch.Tensor, tau: torch.Tensor, *, out=None) -> torch.Tensor:
    """The first ``n`` columns of ``H_1 ... H_k``, like :func:`torch.linalg.householder_product`
    (LAPACK ``orgqr``/``ungqr``).

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)`` with ``m >= n``: the reflectors below the diagonal (as :func:`geqrf` packs them).
    tau : torch.Tensor
        ``(*, k)`` with ``k <= n``, same batch shape and dtype.
    out : torch.Tensor, optional

    Returns
    -------
    torch.Tensor
        ``(*, m, n)`` with orthonormal columns. Differentiable in ``A`` (its strictly lower part)
        and ``tau``, forward and reverse mode.

    Examples
    --------
    >>> a, tau = geqrf(torch.randn(6, 4))
    >>> Q = householder_product(a, tau)
    >>> torch.allclose(Q.mT @ Q, torch.eye(4), atol=1e-5)
    True
    """
    op = "torch.linalg.householder_product"
    E.check_tensor(op, "input", A)
    if A.ndim < 2:
        raise E.ShapeError(f"{op}: input must have at least 2 dimensions.")
    if A.shape[-2] < A.shape[-1]:
        raise E.ShapeError(f"{op}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    E.check_tensor(op, "tau", tau)
    if A.shape[-1] < tau.shape[-1]:
        raise E.ShapeError(f"{op}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    _check_reflectors(op, A, tau)
    return E.store(op, out, _householder_product(A, tau), A, tau)


def ormqr(A: torch.Tensor, tau: torch.Tensor, other: torch.Tensor, left: bool = True, transpose: bool = False,
          *, out=None) -> torch.Tensor:
    """Multiply ``other`` by ``Q = H_1 ... H_k`` of :func:`geqrf`, like :func:`torch.ormqr`
    (LAPACK ``ormqr``/``unmqr``), without forming ``Q``.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, mn, k')``: the reflectors (as :func:`geqrf` packs them); ``Q`` is ``mn x mn``.
    tau : torch.Tensor
        ``(*, k)``, ``k = min(mn, k')``.
    other : torch.Tensor
        ``(*, m, n)``: ``m = mn`` if ``left`` else ``n = mn``; same batch shape and dtype.
    left : bool
        ``op(Q) @ other`` if True, else ``other @ op(Q)``.
    transpose : bool
        ``op(Q) = Qᴴ`` (the conjugate transpose for complex) if True, else ``Q``.
    out : torch.Tensor, optional

    Returns
    -------
    torch.Tensor
        ``(*, m, n)``. Differentiable in ``A`` (its strictly lower part), ``tau`` and ``other``.

    Examples
    --------
    >>> A = torch.randn(5, 3)
    >>> a, tau = geqrf(A)
    >>> R = ormqr(a, tau, A, transpose=True)[:3]
    >>> torch.allclose(R.tril(-1), torch.zeros(3, 3), atol=1e-5)
    True
    """
    op = "torch.ormqr"
    E.check_tensor(op, "input", A)
    E.check_tensor(op, "other", other)
    if A.ndim < 2:
        raise E.ShapeError(f"{op}: input must have at least 2 dimensions.")
    if other.ndim < 2:
        raise E.ShapeError(f"{op}: other must have at least 2 dimensions.")
    E.check_bool(op, "left", left)
    E.check_bool(op, "transpose", transpose)
    side = -2 if left else -1
    if other.shape[side] != A.shape[-2]:
        raise E.ShapeError(f"{op}: other.shape[{side}] must be equal to input.shape[-2]")
    E.check_tensor(op, "tau", tau)
    if tau.shape[-1] != min(other.shape[side], A.shape[-1]):
        raise E.ShapeError(f"{op}: tau.shape[-1] must be equal to min(other.shape[{side}], input.shape[-1])")
    if other.ndim != A.ndim:
        raise E.ShapeError(f"{op}: Expected other to have the same number of dimensions as input, but got "
                           f"other.ndim equal to {other.ndim} and input.ndim is equal to {A.ndim}")
    _check_reflectors(op, A, tau)
    if other.shape[:-2] != A.shape[:-2]:
        raise E.ShapeError(f"{op}: Expected batch dimensions of other to be equal to input.shape[:-2], but got "
                           f"{list(other.shape[:-2])}")
    E.check_same(op, ("input", "other"), A, other)
    return E.store(op, out, _ormqr(A, tau, other, left, transpose), A, tau, other)


