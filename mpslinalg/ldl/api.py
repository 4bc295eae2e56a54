"""The LDL family's public ops (``torch.linalg`` names): checks once, the table, the declared op, ``out=``."""

from __future__ import annotations

import torch

from ..oplayer import checks as E
from ..oplayer import table
from .ops import _ldl_factor_ex, _ldl_solve

_RT = torch.return_types
#: What a torch.linalg call raises for bad input (the front doors then run their own checks).
_TORCH_ERRORS = (RuntimeError, TypeError, ValueError, IndexError)
_SINGULAR = ("D[{info},{info}] is exactly zero (1-based), so the matrix is singular and ldl_solve would "
             "divide by zero. Use ldl_factor_ex to factor it anyway.")
_PIVOT_DTYPES = (torch.int32, torch.int64)


def _factor(op: str, A: torch.Tensor, hermitian: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The checked factorization: one torch.linalg call outside the table, else the declared op."""
    E.check_matrix(op, "A", A, square=True)
    E.check_bool(op, "hermitian", hermitian)
    if table.torch_is_faster("ldl_factor_ex", A):  # outside the measured table (table.WHEN)
        return tuple(torch.linalg.ldl_factor_ex(A, hermitian=hermitian))
    return _ldl_factor_ex(A, hermitian)


def ldl_factor_ex(A: torch.Tensor, *, hermitian: bool = False, check_errors: bool = False, out=None):
    r"""Bunch–Kaufman factorization ``A = L D Lᵀ`` (or ``L D Lᴴ``), like :func:`torch.linalg.ldl_factor_ex`.

    LAPACK's ``sytrf``/``hetrf`` on the lower triangle of ``A`` (the upper one is not read):
    partial pivoting with Bunch and Kaufman's threshold ``alpha = (1 + sqrt(17)) / 8``, 1x1 and
    2x2 blocks in ``D``, so ``LD`` and ``pivots`` equal torch's (LAPACK's) up to rounding.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, n, n)`` symmetric (complex symmetric if ``hermitian=False``) or Hermitian;
        float32/complex64 on any device, float64/complex128 on CPU/CUDA.
    hermitian : bool
        Factor ``A = L D Lᴴ`` (Hermitian; the diagonal's imaginary parts are ignored).
    check_errors : bool
        Raise :class:`torch.linalg.LinAlgError` when ``info > 0`` (synchronises with the device).
    out : tuple of torch.Tensor, optional
        ``(LD, pivots, info)`` to write into.

    Returns
    -------
    torch.return_types.linalg_ldl_factor_ex
        ``LD (*, n, n)``: ``L`` (unit lower, in LAPACK's storage) below the diagonal and ``D`` on
        it (a 2x2 block's off-diagonal entry in the subdiagonal), zero above; ``pivots (*, n)``
        int32, LAPACK's 1-based interchanges (``pivots[k] = pivots[k+1] = -p`` for a 2x2 block at
        ``k``); ``info (*)`` int32, ``k > 0`` when ``D[k-1, k-1]`` is exactly zero. No host
        synchronisation unless ``check_errors``. Not differentiable (as torch's).

    Raises
    ------
    RuntimeError
        Non-square or rank < 2 input, unsupported dtype; ``LinAlgError`` (``check_errors``).

    Examples
    --------
    >>> A = torch.tensor([[0., 1.], [1., 0.]])
    >>> LD, pivots, info = ldl_factor_ex(A)
    >>> pivots.tolist(), int(info)
    ([-2, -2], 0)
    """
    op = "torch.linalg.ldl_factor_ex"
    if out is None and table.torch_first("ldl_factor_ex", A):
        try:
            res = torch.linalg.ldl_factor_ex(A, hermitian=hermitian)
            if check_errors is True:
                E.raise_for_info(op, res.info, _SINGULAR)
            elif check_errors is not False:
                raise TypeError
            return res
        except _TORCH_ERRORS:  # bad input: the checks below raise mpslinalg's error for it
            pass
    E.check_bool(op, "check_errors", check_errors)
    LD, piv, info = _factor(op, A, hermitian)
    if check_errors:
        E.raise_for_info(op, info, _SINGULAR)
    return E.store(op, out, (LD, piv, info), A, kind=_RT.linalg_ldl_factor_ex)


def ldl_factor(A: torch.Tensor, *, hermitian: bool = False, out=None):
    r"""Bunch–Kaufman factorization, like :func:`torch.linalg.ldl_factor` (see :func:`ldl_factor_ex`).

    Parameters
    ----------
    A : torch.Tensor
        ``(*, n, n)`` symmetric or (``hermitian=True``) Hermitian.
    hermitian : bool
    out : tuple of torch.Tensor, optional
        ``(LD, pivots)``.

    Returns
    -------
    torch.return_types.linalg_ldl_factor
        ``(LD, pivots)``.

    Raises
    ------
    torch.linalg.LinAlgError
        A ``D[k, k]`` is exactly zero (the batch element and ``k`` are named).

    Examples
    --------
    >>> A = torch.randn(4, 4); A = A + A.mT
    >>> LD, pivots = ldl_factor(A)
    """
    op = "torch.linalg.ldl_factor"
    LD, piv, info = None, None, None
    if out is None and table.torch_first("ldl_factor_ex", A):
        try:
            LD, piv, info = torch.linalg.ldl_factor_ex(A, hermitian=hermitian)
        except _TORCH_ERRORS:  # bad input: the checks below raise mpslinalg's error for it
            pass
    if LD is None:
        LD, piv, info = _factor(op, A, hermitian)
    E.raise_for_info(op, info, _SINGULAR)
    return E.store(op, out, (LD, piv), A, kind=_RT.linalg_ldl_factor)


def _torch_solves(LD: torch.Tensor, hermitian: bool) -> bool:
    """torch.linalg.ldl_solve serves it (torch raises for Hermitian complex input on CUDA)."""
    return not (hermitian is True and LD.is_complex() and LD.is_cuda)


def _torch_solve(LD: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, hermitian: bool) -> torch.Tensor:
    """``torch.linalg.ldl_solve`` with the batches expanded to their broadcast shape first: torch 2.13
    crashes (segmentation fault, CPU) when ``B``'s batch broadcasts against ``LD``'s, e.g. ``LD (4, n, n)``
    with ``B (3, 1, n, k)``."""
    if LD.shape[:-2] != B.shape[:-2] and LD.ndim >= 2 and B.ndim >= 2:
        if pivots.shape != LD.shape[:-1]:
            raise RuntimeError("pivots")  # the front door's checks name the mistake
        batch = torch.broadcast_shapes(LD.shape[:-2], B.shape[:-2])
        LD, pivots = LD.expand(*batch, *LD.shape[-2:]), pivots.expand(*batch, pivots.shape[-1])
        B = B.expand(*batch, *B.shape[-2:])
    return torch.linalg.ldl_solve(LD, pivots, B, hermitian=hermitian)


def ldl_solve(LD: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, *, hermitian: bool = False,
              out: torch.Tensor | None = None) -> torch.Tensor:
    r"""Solve ``A X = B`` from :func:`ldl_factor`'s ``(LD, pivots)``, like :func:`torch.linalg.ldl_solve`.

    LAPACK ``sytrs``/``hetrs``: the interchanges and the columns of ``L`` applied in order, the 1x1
    and 2x2 blocks of ``D`` solved, then ``Lᴴ`` backwards. Runs on every device (torch raises for
    ``hermitian=True`` complex input on CUDA; this does not).

    Parameters
    ----------
    LD : torch.Tensor
        ``(*, n, n)`` from :func:`ldl_factor`.
    pivots : torch.Tensor
        ``(*, n)`` int32 (int64 accepted, as torch does), same batch shape as ``LD``.
    B : torch.Tensor
        ``(*, n, k)``; batch dimensions broadcast with ``LD``'s; same dtype.
    hermitian : bool
        ``LD`` is a Hermitian factorization (must match the factorization's flag).
    out : torch.Tensor, optional

    Returns
    -------
    torch.Tensor
        ``X (*, n, k)``. Not differentiable (as torch's).

    Examples
    --------
    >>> A = torch.randn(4, 4, dtype=torch.float64); A = A + A.mT
    >>> B = torch.randn(4, 2, dtype=torch.float64)
    >>> LD, pivots = ldl_factor(A)
    >>> torch.allclose(A @ ldl_solve(LD, pivots, B), B)
    True
    """
    op = "torch.linalg.ldl_solve"
    if out is None and table.torch_first("ldl_solve", LD) and _torch_solves(LD, hermitian):
        try:
            return _torch_solve(LD, pivots, B, hermitian)
        except _TORCH_ERRORS:  # bad input: the checks below raise mpslinalg's error for it
            pass
    E.check_matrix(op, "LD", LD, square=True)
    E.check_tensor(op, "pivots", pivots)
    E.check_tensor(op, "B", B)
    E.check_bool(op, "hermitian", hermitian)
    if B.ndim < 2:
        raise E.ShapeError(f"{op}: B must have at least 2 dimensions, got shape {tuple(B.shape)}")
    if pivots.shape != LD.shape[:-1]:
        raise E.ShapeError(f"{op}: Expected LD.shape[:-1] and pivots.shape to be the same, but got pivots with "
                           f"shape {list(pivots.shape)} instead")
    if pivots.dtype not in _PIVOT_DTYPES:
        raise E.DTypeError(f"{op}: Expected pivots to be integers (int32), but got {pivots.dtype}")
    E.check_same(op, ("LD", "B"), LD, B)
    if pivots.device != LD.device:
        raise E.DeviceError(f"{op}: expected all tensors on one device, but LD is on {LD.device} and pivots "
                            f"is on {pivots.device}")
    E.check_rhs(op, LD, B, a_name="LD")
    E.broadcast_batch(op, ("LD", "B"), LD, B)
    if table.torch_is_faster("ldl_solve", LD) and _torch_solves(LD, hermitian):
        return E.store(op, out, _torch_solve(LD, pivots, B, hermitian), LD, B)
    return E.store(op, out, _ldl_solve(LD, pivots.to(torch.int32), B, hermitian), LD, B)
