"""The Cholesky family's public ops (``torch.linalg``/``torch`` names) and ``psd_safe_cholesky``:
checks once, the table, the declared op, ``out=``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from ..oplayer import checks as E
from ..oplayer import table
from .ops import _cholesky_ex, _cholesky_inverse, _cholesky_solve

_RT = torch.return_types
_TORCH_ERRORS = (RuntimeError, TypeError, ValueError, IndexError)
_NOT_PD = ("The factorization could not be completed because the input is not positive-definite "
           "(the leading minor of order {info} is not positive-definite).")


def _factor(op: str, A, upper, check_errors) -> tuple[torch.Tensor, torch.Tensor]:
    E.check_bool(op, "upper", upper)
    E.check_bool(op, "check_errors", check_errors)
    E.check_matrix(op, "A", A, square=True)
    if table.torch_is_faster("cholesky_ex", A):  # outside the measured table (table.WHEN)
        L, info = torch.linalg.cholesky_ex(A, upper=upper)
    else:
        L, info = _cholesky_ex(A, upper)
    if check_errors:
        E.raise_for_info(op, info, _NOT_PD)
    return L, info


def cholesky_ex(A: torch.Tensor, *, upper: bool = False, check_errors: bool = False, out=None):
    r"""Cholesky factorization without host synchronisation, like :func:`torch.linalg.cholesky_ex`.

    ``A = L Lᴴ`` with ``L`` lower triangular with a real positive diagonal (``A = Uᴴ U`` with
    ``upper=True``).

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
        Hermitian positive-definite matrices; only the lower triangle (``upper=False``) or the upper
        triangle is read, and the imaginary part of the diagonal is ignored (LAPACK ``potrf``).
        float32/complex64 on every device, float64/complex128 on CPU/CUDA.
    upper : bool, optional
        Return the upper factor ``U = Lᴴ`` (reading the upper triangle).
    check_errors : bool, optional
        Raise :class:`torch.linalg.LinAlgError` when a matrix is not positive definite (synchronises).
    out : tuple of Tensor, optional
        ``(L, info)`` to write into (not differentiable, as in torch).

    Returns
    -------
    torch.return_types.linalg_cholesky_ex
        ``(L, info)``: ``info`` (int32, shape ``(*)``) is 0 on success, else the order ``k`` of the
        first leading minor that is not positive definite (a pivot ``<= 0`` or NaN). Then ``L``'s
        first ``k - 1`` columns are those of the factor (as LAPACK's) and the rest is unspecified
        (zeros on mpslinalg's kernels). No host synchronisation, no exception.

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> A = torch.tensor([[4.0, 2.0], [2.0, 3.0]])
    >>> L, info = LA.cholesky_ex(A)
    >>> L, int(info)
    (tensor([[2.0000, 0.0000],
            [1.0000, 1.4142]]), 0)
    """
    if out is None and table.torch_first("cholesky_ex", A):  # outside the table (table.WHEN)
        try:
            return torch.linalg.cholesky_ex(A, upper=upper, check_errors=check_errors)
        except _TORCH_ERRORS:  # bad input, or check_errors raised: our checks and op say what
            pass
    op = "linalg.cholesky_ex"
    return E.store(op, out, _factor(op, A, upper, check_errors), A, kind=_RT.linalg_cholesky_ex)


def cholesky(A: torch.Tensor, *, upper: bool = False, out: torch.Tensor | None = None) -> torch.Tensor:
    r"""Cholesky factor of Hermitian positive-definite matrices, like :func:`torch.linalg.cholesky`.

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
        As in :func:`cholesky_ex` (only the named triangle is read).
    upper : bool, optional
        Return ``U`` with ``A = Uᴴ U``.
    out : Tensor, optional

    Returns
    -------
    Tensor, shape ``(*, n, n)``
        ``L`` (or ``U``). Differentiable (torch's formula: a Hermitian gradient), twice, forward mode
        and ``torch.func`` transforms.

    Raises
    ------
    torch.linalg.LinAlgError
        A matrix is not positive definite (naming the batch element and the order of the leading
        minor, as torch).

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> X = torch.randn(3, 5, 5)
    >>> L = LA.cholesky(X @ X.mT + torch.eye(5))
    >>> L.shape
    torch.Size([3, 5, 5])
    """
    if out is None and table.torch_first("cholesky_ex", A):
        try:
            return torch.linalg.cholesky(A, upper=upper)
        except _TORCH_ERRORS:
            pass
    op = "linalg.cholesky"
    L, _ = _factor(op, A, upper, True)
    return E.store(op, out, L, A)


def _check_factor(op: str, name: str, L: torch.Tensor, upper: object) -> None:
    E.check_bool(op, "upper", upper)
    E.check_matrix(op, name, L, square=True)


def cholesky_solve(B: torch.Tensor, L: torch.Tensor, upper: bool = False, *,
                   out: torch.Tensor | None = None) -> torch.Tensor:
    r"""Solve ``A X = B`` given the Cholesky factor of ``A``, like :func:`torch.cholesky_solve`.

    Parameters
    ----------
    B : Tensor, shape ``(*, n, k)``
        Right-hand sides (torch's argument order: ``B`` first).
    L : Tensor, shape ``(*, n, n)``
        ``A = L Lᴴ`` (lower) or ``A = Uᴴ U`` (``upper=True``); only that triangle is read. Same
        dtype and device as ``B``; batch dimensions broadcast.
    upper : bool, optional
    out : Tensor, optional

    Returns
    -------
    Tensor, shape ``broadcast(*) × (n, k)``
        Two triangular solves (the triangular family). Differentiable in ``B`` and ``L`` (torch's
        formulas), twice, forward mode and ``torch.func`` transforms.

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> A = torch.tensor([[4.0, 2.0], [2.0, 3.0]])
    >>> LA.cholesky_solve(torch.tensor([[6.0], [5.0]]), LA.cholesky(A))
    tensor([[1.0000],
            [1.0000]])
    """
    if out is None and table.torch_first("cholesky_solve", L):
        try:
            return torch.cholesky_solve(B, L, upper=upper)
        except _TORCH_ERRORS:
            pass
    op = "torch.cholesky_solve"
    _check_factor(op, "L", L, upper)
    E.check_matrix(op, "B", B)
    E.check_same(op, ("B", "L"), B, L)
    E.check_rhs(op, L, B, a_name="L", b_name="B")
    E.broadcast_batch(op, ("B", "L"), B, L)
    if table.torch_is_faster("cholesky_solve", L):
        X = torch.cholesky_solve(B, L, upper=upper)
    else:
        X = _cholesky_solve(B, L, upper)
    return E.store(op, out, X, B, L)


def cholesky_inverse(L: torch.Tensor, upper: bool = False, *, out: torch.Tensor | None = None) -> torch.Tensor:
    r"""Inverse of ``A = L Lᴴ`` from its Cholesky factor, like :func:`torch.cholesky_inverse`.

    Parameters
    ----------
    L : Tensor, shape ``(*, n, n)``
        Lower factor (``upper=False``) or upper factor ``U`` of ``A = Uᴴ U``; only that triangle is
        read.
    upper : bool, optional
    out : Tensor, optional

    Returns
    -------
    Tensor, shape ``(*, n, n)``
        ``A⁻¹``, exactly Hermitian (LAPACK ``potri``: the triangle's inverse, then one product).
        Differentiable (torch's formula), twice, forward mode and ``torch.func`` transforms.

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> L = torch.tensor([[2.0, 0.0], [1.0, 1.0]])
    >>> LA.cholesky_inverse(L)
    tensor([[ 0.5000, -0.5000],
            [-0.5000,  1.0000]])
    """
    if out is None and table.torch_first("cholesky_inverse", L):
        try:
            return torch.cholesky_inverse(L, upper=upper)
        except _TORCH_ERRORS:
            pass
    op = "torch.cholesky_inverse"
    _check_factor(op, "L", L, upper)
    if table.torch_is_faster("cholesky_inverse", L):
        X = torch.cholesky_inverse(L, upper=upper)
    else:
        X = _cholesky_inverse(L, upper)
    return E.store(op, out, X, L)


# --------------------------------------------------------------------------------------------------
# Beyond torch: the jitter-retry loop, per matrix, without a host synchronisation
# --------------------------------------------------------------------------------------------------


class PsdSafeCholesky(NamedTuple):
    """The result of :func:`psd_safe_cholesky`."""

    L: torch.Tensor
    jitter: torch.Tensor


def psd_safe_cholesky(A: torch.Tensor, jitter: Sequence[float] = (1e-6, 1e-5, 1e-4), *, upper: bool = False,
                      relative: bool = True, check_errors: bool = False) -> PsdSafeCholesky:
    r"""Cholesky factor of nearly positive-definite matrices: each matrix gets the smallest diagonal
    jitter that makes it factor, without a host synchronisation.

    The loop GP users write by hand (gpytorch's ``psd_safe_cholesky``)::

        L, info = torch.linalg.cholesky_ex(A)
        for j in (1e-6, 1e-5, 1e-4):
            if not info.any():          # a host synchronisation per try
                break
            A = A + j * I               # the whole batch, or the failed matrices
            L, info = torch.linalg.cholesky_ex(A)

    Here every level is tried for every matrix in one batched factorization of
    ``(1 + len(jitter))`` matrices per input matrix (no ``.any()``), and each matrix keeps the first
    level that succeeds. That costs ``1 + len(jitter)`` factorizations where the loop's common case
    (nothing fails) costs one plus a synchronisation: use it where syncs are dear (GPU streams,
    ``torch.compile`` graphs, batches of which some fail).

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
        Hermitian, positive semi-definite up to rounding (only the named triangle is read).
    jitter : sequence of float, optional
        Increasing levels tried after the plain factorization.
    upper : bool, optional
        Return ``U`` with ``A + δI = Uᴴ U``.
    relative : bool, optional
        Scale each level by the matrix's mean ``|Re a_ii|`` (1 where that is 0), so the retry does
        not depend on the units of ``A`` (GPy's ``jitchol``); ``False`` adds the levels as they are,
        as gpytorch does.
    check_errors : bool, optional
        Raise :class:`torch.linalg.LinAlgError` when a matrix fails at every level (synchronises).

    Returns
    -------
    PsdSafeCholesky
        ``(L, jitter)``: ``L`` the factor of ``A + δ I`` and ``jitter`` (real, shape ``(*)``) the
        ``δ`` added to each matrix (0 where ``A`` itself factored; NaN where every level failed, and
        then ``L`` is the last try's partial factor, see :func:`cholesky_ex`). Differentiable in
        ``A`` through :func:`cholesky_ex`; ``δ`` is a constant there.

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> x = torch.randn(2, 8, 1)
    >>> K = torch.exp(-(x - x.mT) ** 2)          # rank-deficient in float32
    >>> L, jitter = LA.psd_safe_cholesky(K)
    >>> bool(torch.isfinite(L).all())
    True
    """
    op = "mpslinalg.psd_safe_cholesky"
    E.check_bool(op, "upper", upper)
    E.check_bool(op, "relative", relative)
    E.check_bool(op, "check_errors", check_errors)
    E.check_matrix(op, "A", A, square=True)
    levels = [float(j) for j in jitter]
    if any(not (j > 0) for j in levels) or levels != sorted(levels):
        raise ValueError(f"{op}: jitter must be positive and increasing, got {tuple(jitter)}")
    real = A.real.dtype if A.is_complex() else A.dtype
    n = A.shape[-1]
    with torch.no_grad():
        if relative and n:
            scale = A.diagonal(dim1=-2, dim2=-1).real.abs().mean(-1)
            scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        else:
            scale = torch.ones(A.shape[:-2], dtype=real, device=A.device)
        steps = torch.tensor([0.0, *levels], dtype=real, device=A.device)
        delta = steps.reshape(-1, *([1] * scale.dim())) * scale  # (1 + K, *)
        eye = torch.eye(n, dtype=A.dtype, device=A.device)
    tries = A + delta[..., None, None].to(A.dtype) * eye  # (1 + K, *, n, n): every level at once
    L_all, info_all = cholesky_ex(tries, upper=upper)
    ok = info_all == 0
    first = torch.where(ok.any(0), ok.to(torch.int8).argmax(0), len(levels))  # the last try where none works
    L = L_all.gather(0, first[None, ..., None, None].expand(1, *A.shape)).squeeze(0)
    used = delta.gather(0, first[None]).squeeze(0)
    used = torch.where(ok.any(0), used, torch.full_like(used, float("nan")))
    if check_errors:
        info = torch.where(ok.any(0), 0, info_all[-1])
        E.raise_for_info(op, info, "The matrix is not positive-definite even with the largest jitter (the leading "
                         "minor of order {info} fails).")
    return PsdSafeCholesky(L, used)
