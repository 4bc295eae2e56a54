"""The LU family's public ops (``torch.linalg`` names): checks once, then route (small family, one
``torch.linalg`` call, or the declared op), ``out=`` and errors."""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as _fwad

from .. import small
from ..oplayer import checks as E
from ..oplayer import functorch_active as _functorch
from ..oplayer import table
from . import lapack as _lapack
from . import torch_cpu as _torch
from .kernels import TUNING, _on_kernels, _perm_from_pivots
from .ops import (
    _cpu_worst_count,
    _det_op,
    _inv_ex_op,
    _lu_factor_ex_op,
    _lu_solve_op,
    _slogdet_op,
    _solve_ex_op,
    _unpack,
)

_RT = torch.return_types
#: What a torch.linalg call raises for bad input (the front doors' fast path then runs their checks).
_TORCH_ERRORS = (RuntimeError, TypeError, ValueError, IndexError)
#: Complex row-major ``det`` calls on the CPU of at least this many elements go to torch.linalg as
#: ``det(A.mT)`` (measured faster from here up, slower for one small matrix: docs/ops/lu.md, "det").
_DET_BY_TRANSPOSE = 16384


# --------------------------------------------------------------------------------------------------
# Routing of n <= 4 to the small family
# --------------------------------------------------------------------------------------------------


def _route(op, kind: str | None, name: str, A: torch.Tensor, *more: torch.Tensor, grad_ours: bool = False) -> str:
    """Where a front door sends a checked call (one backend lookup per call):

    * ``"torch"``: one ``torch.linalg`` call, torch's derivative included. On the torch backend,
      outside the measured regions of :data:`mpslinalg.oplayer.table.WHEN` for ``name`` (the same table
      as the drop-in routing: :func:`mpslinalg.oplayer.table.torch_is_faster`), unless autograd records
      and ``grad_ours`` (our derivative is needed for correctness: the adjugate gradient of ``det``
      at singular matrices). Also inside the regions when the torch backend would make exactly that
      one call (:func:`_direct_torch`) and nothing needs the declared ``op`` (no autograd, compile,
      ``torch.func``, dual tensor): the front door makes the call itself, skipping the op layer;
    * ``"small"``: ``n <= 4`` and ``kind`` given (``"inv"`` for inv/solve, ``"det"`` for
      det/slogdet): the small family;
    * ``"op"``: the declared op. On meta tensors the LU path serves ``n <= 4`` too (it supports them).
    """
    # first: the common CPU/CUDA case (torch_is_faster checks compile, transforms and the backend)
    if (not grad_ours or op.direct(A, *more)) and table.torch_is_faster(name, A):
        return "torch"
    if A.is_meta:
        return "op"
    if _functorch() or torch.compiler.is_compiling():  # no backend lookup under a transform or trace
        return "small" if kind is not None and 0 < A.shape[-1] <= 4 else "op"
    if kind is not None and 0 < A.shape[-1] <= 4:
        # the table's n <= 4 CPU regions were measured on the small family's generated C; without it
        # (no compiler) its path is LAPACK behind its checks, slower than torch.linalg's one call
        if (A.is_cpu and (not grad_ours or op.direct(A, *more)) and not table.ours_forced()
                and small.lapack_leaf_serves(A)):
            return "torch"
        return "small"
    if (max(A.shape[-2], A.shape[-1]) <= TUNING.direct_max.get(A.device.type, 256) and not _on_kernels(A)
            and op.direct(A, *more)):
        return "torch"
    return "op"


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def _check_pivot_values(op: str, pivots: torch.Tensor, n: int) -> None:
    """torch's check that pivots came from ``lu_factor`` (``1 <= p <= n``), with its messages. Like
    torch's ``lu_solve`` (not an ``_ex`` op) this reads two numbers back from the device; the
    kernels never index out of range even without it. Skipped where values can't be read (meta
    tensors, a compile's trace (:func:`~mpslinalg.oplayer.checks.traced`), ``torch.func``)."""
    if pivots.numel() == 0 or pivots.device.type == "meta" or E.traced(pivots) or _functorch():
        return
    lo, hi = torch.aminmax(pivots)
    if int(lo) < 1:
        raise E.LinAlgError(f"{op}: Pivots given to lu_solve must all be greater or equal to 1. "
                            "Did you properly pass the result of lu_factor?")
    if int(hi) > n:
        raise E.LinAlgError(f"{op}: Pivots given to lu_solve must all be smaller or equal to LU.size(-2). "
                            "Did you properly pass the result of lu_factor?")


def _check_factor_args(op: str, A: torch.Tensor, pivot: bool) -> None:
    """The checks lu_factor_ex, lu_factor and lu share: ``A`` a matrix, ``pivot`` a bool and True."""
    E.check_matrix(op, "A", A)
    E.check_bool(op, "pivot", pivot)
    if not pivot:  # torch raises RuntimeError here on the CPU; NotImplementedError is one (issue 34.8)
        raise NotImplementedError(
            f"{op}: pivot=False (LU without pivoting) is not supported by mpslinalg; partial "
            "pivoting is what makes LU stable. Use pivot=True (the default)."
        )


def lu_factor_ex(A: torch.Tensor, *, pivot: bool = True, check_errors: bool = False, out=None):
    r"""LU factorisation with partial pivoting, without host synchronisation (``torch.linalg.lu_factor_ex``).

    Parameters
    ----------
    A : Tensor, shape ``(*, m, n)``
        Batches of (possibly rectangular) matrices; float32/complex64 on every device,
        float64/complex128 on CPU/CUDA. Never modified.
    pivot : bool, optional
        Must be ``True`` (partial pivoting).
    check_errors : bool, optional
        Raise :class:`torch.linalg.LinAlgError` if some ``info > 0`` (synchronises).
    out : tuple of Tensor, optional
        ``(LU, pivots, info)`` to write the results into (resized; not differentiable, as in torch).

    Returns
    -------
    LU : Tensor, shape ``(*, m, n)``
        ``L`` (unit lower, diagonal not stored) and ``U`` packed, ``A = P L U``.
    pivots : Tensor, shape ``(*, min(m, n))``, int32
        LAPACK's 1-based row interchanges (first row of largest ``|Re| + |Im|``).
    info : Tensor, shape ``(*)``, int32
        0, or the 1-based index of the first exactly-zero pivot (the factorisation continued).

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> A = torch.randn(3, 4, 4, dtype=torch.complex64)
    >>> LU, piv, info = LA.lu_factor_ex(A)
    """
    if out is None and pivot is True and not _torch.unsafe(A) and table.torch_first("lu_factor_ex", A):
        if (lapack := table.lapack_first("lu_factor_ex", A)) is not None and check_errors is False:
            return _RT.linalg_lu_factor_ex(_lapack.lu_factor_ex(lapack, A))  # table.LAPACK
        try:
            return torch.linalg.lu_factor_ex(A, check_errors=check_errors)
        except _TORCH_ERRORS:  # bad input: the checks below raise mpslinalg's error for it
            pass
    op = "linalg.lu_factor_ex"
    _check_factor_args(op, A, pivot)
    E.check_bool(op, "check_errors", check_errors)
    direct = _route(_lu_factor_ex_op, None, "lu_factor_ex", A) == "torch"
    LU, piv, info = _torch.lu_factor_ex(A) if direct else _lu_factor_ex_op(A)
    if check_errors:
        E.raise_for_info(op, info, "U[{info},{info}] is zero (1-based), the matrix is singular.")
    return E.store(op, out, (LU, piv, info), A, kind=_RT.linalg_lu_factor_ex)


def lu_factor(A: torch.Tensor, *, pivot: bool = True, out=None):
    r"""LU factorisation with partial pivoting (``torch.linalg.lu_factor``).

    Like :func:`lu_factor_ex` but raises :class:`torch.linalg.LinAlgError` naming the batch element
    and the zero pivot when a matrix is singular (this synchronises with the device). ``out`` is an
    optional tuple ``(LU, pivots)`` to write into.

    Returns
    -------
    LU : Tensor, shape ``(*, m, n)``
    pivots : Tensor, shape ``(*, min(m, n))``, int32

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> LU, piv = LA.lu_factor(torch.randn(5, 5))
    """
    if out is None and pivot is True and not _torch.unsafe(A) and table.torch_first("lu_factor_ex", A):
        if (lapack := table.lapack_first("lu_factor_ex", A)) is not None:
            LU, piv, info = _lapack.lu_factor_ex(lapack, A)  # table.LAPACK
            if not info:  # singular: torch.linalg.lu_factor raises torch's error
                return _RT.linalg_lu_factor((LU, piv))
        try:
            return torch.linalg.lu_factor(A)
        except _TORCH_ERRORS:  # bad input: the checks below raise mpslinalg's error for it
            pass
    op = "linalg.lu_factor"
    _check_factor_args(op, A, pivot)
    direct = _route(_lu_factor_ex_op, None, "lu_factor_ex", A) == "torch"
    LU, piv, info = _torch.lu_factor_ex(A) if direct else _lu_factor_ex_op(A)
    E.raise_for_info(op, info, "U[{info},{info}] is zero (1-based pivot {info}), the matrix is singular "
                     "and using it in lu_solve would divide by zero. Use lu_factor_ex or lu to factor it "
                     "anyway.")
    return E.store(op, out, (LU, piv), A, kind=_RT.linalg_lu_factor)


def lu(A: torch.Tensor, *, pivot: bool = True, out=None):
    r"""LU decomposition ``A = P L U`` (``torch.linalg.lu``).

    Parameters
    ----------
    A : Tensor, shape ``(*, m, n)``
    pivot : bool, optional
        Must be ``True`` (partial pivoting).
    out : tuple of Tensor, optional
        ``(P, L, U)`` to write the results into (resized; not differentiable, as in torch).

    Returns
    -------
    P : Tensor, shape ``(*, m, m)``
        Permutation matrix (same dtype as ``A``).
    L : Tensor, shape ``(*, m, k)``
        Unit lower triangular, ``k = min(m, n)``.
    U : Tensor, shape ``(*, k, n)``
        Upper triangular.

    Never raises on singular input. Differentiable with respect to ``A`` (through ``L`` and ``U``).

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> A = torch.randn(4, 3)
    >>> P, L, U = LA.lu(A)
    >>> torch.allclose(P @ L @ U, A, atol=1e-5)
    True
    """
    if out is None and pivot is True and not _torch.unsafe(A) and table.torch_first("lu", A):
        try:
            return torch.linalg.lu(A)
        except _TORCH_ERRORS:  # bad input: the checks below raise mpslinalg's error for it
            pass
    op = "linalg.lu"
    _check_factor_args(op, A, pivot)
    if _route(_lu_factor_ex_op, None, "lu", A) == "torch":  # one call of the device's own LU
        return E.store(op, out, _torch.lu(A), A, kind=_RT.linalg_lu)
    LU, piv, _ = _lu_factor_ex_op(A)
    m = A.shape[-2]
    L, U = _unpack(LU)
    perm = _perm_from_pivots(piv, m)
    # P[i, j] = 1 where perm[j] == i (out of place: works under torch.vmap and on meta tensors)
    P = (perm[..., None, :] == torch.arange(m, device=A.device)[:, None]).to(A.dtype)
    return E.store(op, out, (P, L, U), A, kind=_RT.linalg_lu)


def lu_solve(LU: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, *, left: bool = True,
             adjoint: bool = False, out: torch.Tensor | None = None) -> torch.Tensor:
    r"""Solve ``A X = B`` from the LU factorisation of ``A`` (``torch.linalg.lu_solve``).

    Parameters
    ----------
    LU : Tensor, shape ``(*, n, n)``
        From :func:`lu_factor`.
    pivots : Tensor, shape ``(*, n)``, int32
        From :func:`lu_factor`.
    B : Tensor, shape ``(*, n, k)`` (``left``) or ``(*, k, n)``
        Right-hand sides; batch dimensions broadcast with ``LU``'s.
    left : bool, optional
        Solve ``A X = B`` (default) or ``X A = B``.
    adjoint : bool, optional
        Use ``Aᴴ`` instead of ``A``.
    out : Tensor, optional
        Output tensor (resized; not differentiable, as in torch).

    Returns
    -------
    X : Tensor
        Differentiable with respect to ``LU`` and ``B``.

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> A, B = torch.randn(4, 4), torch.randn(4, 2)
    >>> LU, piv = LA.lu_factor(A)
    >>> X = LA.lu_solve(LU, piv, B)
    """
    if out is None and table.torch_first("lu_solve", LU):
        try:
            return torch.linalg.lu_solve(LU, pivots, B, left=left, adjoint=adjoint)
        except _TORCH_ERRORS:  # bad input: the checks below raise mpslinalg's error for it
            pass
    op = "linalg.lu_solve"
    E.check_bool(op, "left", left)
    E.check_bool(op, "adjoint", adjoint)
    E.check_matrix(op, "LU", LU, square=True)
    E.check_tensor(op, "pivots", pivots)
    E.check_matrix(op, "B", B)
    E.check_same(op, ("LU", "B"), LU, B)
    if pivots.dtype != torch.int32:
        raise E.DTypeError(f"{op}: expected pivots to be int32 (as lu_factor returns), got {pivots.dtype}")
    if pivots.device != LU.device:
        raise E.DeviceError(f"{op}: pivots is on {pivots.device} but LU is on {LU.device}")
    if pivots.shape != LU.shape[:-1]:
        raise E.ShapeError(f"{op}: expected pivots of shape {tuple(LU.shape[:-1])} for LU of shape "
                           f"{tuple(LU.shape)}, got {tuple(pivots.shape)}")
    E.check_rhs(op, LU, B, left=left, a_name="LU")
    E.broadcast_batch(op, ("LU", "B"), LU, B)
    if _route(_lu_solve_op, None, "lu_solve", LU, pivots, B) == "torch":  # torch's getrs validates the pivots itself
        X = torch.linalg.lu_solve(LU, pivots, B, left=left, adjoint=adjoint)
    else:
        _check_pivot_values(op, pivots, LU.shape[-2])
        X = _lu_solve_op(LU, pivots, B, left, adjoint)
    return E.store(op, out, X, LU, B)


def _vector_case(A: torch.Tensor, B: torch.Tensor) -> bool:
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])


def solve_ex(A: torch.Tensor, B: torch.Tensor, *, left: bool = True, check_errors: bool = False,
             out=None):
    r"""Solve ``A X = B`` (or ``X A = B``) without host synchronisation (``torch.linalg.solve_ex``).

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
    B : Tensor, shape ``(*, n)``, ``(*, n, k)`` (or ``(*, k, n)`` if not ``left``)
        A batch of vectors when ``B.ndim == 1`` or ``B.shape == A.shape[:-1]`` (torch's rule).
    left : bool, optional
    check_errors : bool, optional
        Raise :class:`torch.linalg.LinAlgError` for singular ``A`` (synchronises).
    out : tuple of Tensor, optional
        ``(result, info)`` to write into (resized; not differentiable, as in torch).

    Returns
    -------
    result : Tensor
    info : Tensor, int32, shape of ``A``'s batch
        LAPACK's ``info`` of the factorisation of ``A`` (0 = success).

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> X, info = LA.solve_ex(torch.randn(2, 3, 3), torch.randn(2, 3))
    """
    if out is None and not _torch.unsafe(A) and table.torch_first("solve_ex", A):
        try:
            if left is True and check_errors is False:  # torch's defaults: no keyword parsing (~0.4 µs)
                return torch.linalg.solve_ex(A, B)
            return torch.linalg.solve_ex(A, B, left=left, check_errors=check_errors)
        except _TORCH_ERRORS:  # bad input: the checks below raise mpslinalg's error for it
            pass
    op = "linalg.solve_ex"
    E.check_bool(op, "check_errors", check_errors)
    X, info = _solve_checked(op, "solve_ex", A, B, left)
    if check_errors:
        E.raise_for_info(op, info, "The solver failed because the input matrix is singular.")
    return E.store(op, out, (X, info), A, B, kind=_RT.linalg_solve_ex)


def _solve_checked(op: str, name: str, A: torch.Tensor, B: torch.Tensor, left: bool):
    E.check_bool(op, "left", left)
    E.check_matrix(op, "A", A, square=True)
    E.check_tensor(op, "B", B)
    if B.ndim < 1:
        raise E.ShapeError(f"{op}: B must have at least 1 dimension, got shape {tuple(B.shape)}")
    E.check_dtype(op, "B", B)
    E.check_same(op, ("A", "B"), A, B)
    vec = _vector_case(A, B)
    if vec and not left:
        raise E.ShapeError(
            f"{op}: vector broadcasting of the left hand side is not supported for left=False "
            f"(B of shape {tuple(B.shape)} is a vector for A of shape {tuple(A.shape)}); in this case "
            "solve is equivalent to B / A.squeeze(-1)"
        )
    B2 = B.unsqueeze(-1) if vec else B
    E.check_rhs(op, A, B2, left=left)
    E.broadcast_batch(op, ("A", "B"), A, B2)
    route = _route(_solve_ex_op, "inv", name, A, B2)
    if route == "small":
        X, info = small.solve_ex_op(A, B2, left)  # info of A's batch, as torch's
    elif route == "torch":
        X, info = _torch.solve_ex(A, B2, left)
    else:
        X, info = _solve_ex_op(A, B2, left)
    return (X.squeeze(-1) if vec else X), info


def solve(A: torch.Tensor, B: torch.Tensor, *, left: bool = True,
          out: torch.Tensor | None = None) -> torch.Tensor:
    r"""Solve ``A X = B`` (or ``X A = B``) by LU with partial pivoting (``torch.linalg.solve``).

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
    B : Tensor, shape ``(*, n)`` or ``(*, n, k)`` (``(*, k, n)`` if not ``left``)
    left : bool, optional
        Solve ``A X = B`` (default) or ``X A = B`` (then ``B`` must be a matrix, as in torch).
    out : Tensor, optional
        Output tensor (resized; not differentiable, as in torch).

    Returns
    -------
    X : Tensor
        Differentiable with respect to ``A`` and ``B``.

    Raises
    ------
    torch.linalg.LinAlgError
        When some ``A`` is singular (names the batch element; synchronises).

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> A = torch.randn(3, 3, dtype=torch.complex64)
    >>> X = LA.solve(A, torch.randn(3, 2, dtype=torch.complex64))
    """
    if out is None and not _torch.unsafe(A) and table.torch_first("solve", A):
        try:
            # left=True is torch's default: not passing it skips torch's keyword parsing (~0.4 µs)
            return torch.linalg.solve(A, B) if left is True else torch.linalg.solve(A, B, left=left)
        except _TORCH_ERRORS:  # bad input: the checks below raise mpslinalg's error for it
            pass
    op = "linalg.solve"
    X, info = _solve_checked(op, "solve", A, B, left)
    E.raise_for_info(op, info, "The solver failed because the input matrix is singular "
                     "(U[{info},{info}] is zero).")
    return E.store(op, out, X, A, B)


def inv_ex(A: torch.Tensor, *, check_errors: bool = False, out=None):
    r"""Inverse of square matrices without host synchronisation (``torch.linalg.inv_ex``).

    Complex64 included (a gap of ``torch.linalg.inv`` on mps).

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
    check_errors : bool, optional
        Raise :class:`torch.linalg.LinAlgError` for singular ``A`` (synchronises).
    out : tuple of Tensor, optional
        ``(inverse, info)`` to write into (resized; not differentiable, as in torch).

    Returns
    -------
    inverse : Tensor, shape ``(*, n, n)``
    info : Tensor, int32, shape ``(*)``
        0, or the 1-based index of the first zero pivot (then ``inverse`` holds inf/NaN).

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> Ainv, info = LA.inv_ex(torch.randn(8, 5, 5))
    """
    if out is None and not _torch.unsafe(A) and table.torch_first("inv_ex", A):
        if ((lapack := table.lapack_first("inv_ex", A)) is not None
                and (X := _lapack.inv(lapack, A)) is not None):  # table.LAPACK; singular: torch's info
            return _RT.linalg_inv_ex((X, torch.zeros((), dtype=torch.int32)))
        try:
            return torch.linalg.inv_ex(A, check_errors=check_errors)
        except _TORCH_ERRORS:  # bad input: the checks below raise mpslinalg's error for it
            pass
    op = "linalg.inv_ex"
    E.check_bool(op, "check_errors", check_errors)
    E.check_matrix(op, "A", A, square=True)
    route = _route(_inv_ex_op, "inv", "inv_ex", A)
    if route == "small":
        X, info = small.inv_ex_op(A)
    elif route == "torch":
        X, info = _torch.inv_ex(A)
    else:
        X, info = _inv_ex_op(A)
    if check_errors:
        E.raise_for_info(op, info, "The diagonal element {info} is zero, the inversion could not be "
                         "completed because the input matrix is singular.")
    return E.store(op, out, (X, info), A, kind=_RT.linalg_inv_ex)


def inv(A: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    r"""Inverse of square matrices (``torch.linalg.inv``), float32 and complex64 on every device.

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
    out : Tensor, optional
        Output tensor (resized; not differentiable, as in torch).

    Returns
    -------
    Tensor, shape ``(*, n, n)``

    Raises
    ------
    torch.linalg.LinAlgError
        When some ``A`` is singular (names the batch element and the zero pivot; synchronises).

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> A = torch.randn(6, 6, dtype=torch.complex64)
    >>> err = (LA.inv(A) @ A - torch.eye(6)).abs().max()
    """
    if out is None and not _torch.unsafe(A) and table.torch_first("inv_ex", A):
        if ((lapack := table.lapack_first("inv_ex", A)) is not None
                and (X := _lapack.inv(lapack, A)) is not None):  # table.LAPACK; singular: torch raises
            return X
        try:
            return torch.linalg.inv(A)
        except _TORCH_ERRORS:  # bad input: the checks below raise mpslinalg's error for it
            pass
    op = "linalg.inv"
    E.check_matrix(op, "A", A, square=True)
    route = _route(_inv_ex_op, "inv", "inv_ex", A)
    if route == "small":
        X, info = small.inv_ex_op(A)
    elif route == "torch":
        X, info = _torch.inv_ex(A)
    else:
        X, info = _inv_ex_op(A)
    E.raise_for_info(op, info, "The diagonal element {info} is zero, the inversion could not be "
                     "completed because the input matrix is singular.")
    return E.store(op, out, X, A)


def det(A: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    r"""Determinant of square matrices (``torch.linalg.det``).

    Differentiable, twice; at an exactly singular matrix the gradient is the true derivative, the
    conjugate-transposed adjugate (``torch.linalg.det`` returns zeros there).

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
    out : Tensor, optional
        Output tensor (resized; not differentiable, as in torch).

    Returns
    -------
    Tensor, shape ``(*)``

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> LA.det(torch.eye(3))
    tensor(1.)
    """
    # torch's derivatives of det are zero (reverse) or NaN/zero (forward) at singular matrices: with
    # autograd recording or a forward-mode level open (a dual A), the checks and our op run
    if (out is None and isinstance(A, torch.Tensor) and not (A.requires_grad and torch.is_grad_enabled())
            and _fwad._current_level < 0 and not _torch.unsafe(A) and table.torch_first("det", A)):
        try:
            if A.is_complex() and A.is_cpu and A.numel() >= _DET_BY_TRANSPOSE and A.is_contiguous():
                # det(Aᵀ) = det(A), and Aᵀ of a row-major batch is the column-major layout LAPACK
                # factors: torch copies it as is instead of transposing (docs/ops/lu.md, "det";
                # measured on the CPU only)
                return torch.linalg.det(A.mT)
            return torch.linalg.det(A)
        except _TORCH_ERRORS:  # bad input: the checks below raise mpslinalg's error for it
            pass
    op = "linalg.det"
    E.check_matrix(op, "A", A, square=True)
    if A.shape[-1] == 0:  # det of 0x0 is 1, differentiable (an empty gradient), as torch's
        d = A.sum((-2, -1)) + 1
    elif (route := _route(_det_op, "det", "det", A, grad_ours=True)) == "small":
        d = small.det_op(A)
    elif route == "torch":
        d = _torch.det(A)
    elif (d := _torch_det_with_exact_gradient(A)) is None:
        d = _det_op(A)[0]
    return E.store(op, out, d, A)


def _torch_det_with_exact_gradient(A: torch.Tensor) -> torch.Tensor | None:
    """``det`` with autograd recording, on the CPU outside :data:`mpslinalg.oplayer.table.WHEN`: torch's
    own call (forward and derivative) when its factorisation shows no negligible pivot (there
    torch's ``g · conj(det) A⁻ᴴ`` is our derivative to working precision), else None: our op, for
    the adjugate. Reading the pivots reads CPU memory; on GPUs it would synchronise, so there our op
    runs (its backward reads nothing). A singular batch costs one extra factorisation."""
    if not A.is_cpu or not table.torch_is_faster("det", A):
        return None
    d, LU, _ = _torch.linalg_det(A)
    return d if _cpu_worst_count(LU) == 0 else None


def slogdet(A: torch.Tensor, *, out=None):
    r"""Sign (phase) and log of the absolute value of the determinant (``torch.linalg.slogdet``).

    ``logabsdet`` is finite for matrices whose determinant over- or underflows the dtype.

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
    out : tuple of Tensor, optional
        ``(sign, logabsdet)`` to write into (resized; not differentiable, as in torch).

    Returns
    -------
    sign : Tensor, shape ``(*)``
        ``±1`` (real) or a unit complex number; 0 for singular matrices.
    logabsdet : Tensor, shape ``(*)``, real
        ``-inf`` for singular matrices.

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> sign, logabsdet = LA.slogdet(1e-20 * torch.eye(50))
    """
    if out is None and not _torch.unsafe(A) and table.torch_first("slogdet", A):
        try:
            return torch.linalg.slogdet(A)
        except _TORCH_ERRORS:  # bad input: the checks below raise mpslinalg's error for it
            pass
    op = "linalg.slogdet"
    E.check_matrix(op, "A", A, square=True)
    if A.shape[-1] == 0:  # (1, 0) for 0x0, differentiable (an empty gradient), as torch's
        zero = A.sum((-2, -1))
        s, la = zero + 1, zero.abs()
    elif (route := _route(_slogdet_op, "det", "slogdet", A)) == "small":
        s, la = small.slogdet_op(A)
    elif route == "torch":
        s, la = _torch.slogdet(A)
    else:
        s, la = _slogdet_op(A)[:2]
    return E.store(op, out, (s, la), A, kind=_RT.linalg_slogdet)

