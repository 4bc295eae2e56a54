"""The eigh family's public ops (``torch.linalg`` names): checks once, the table, the declared op, ``out=``."""

from __future__ import annotations

import torch

from ..oplayer import checks as E
from ..oplayer import table
from .algorithm import eigh_via_torch
from .ops import _eigh

_RT = torch.return_types
_NOCONV = ("The algorithm failed to converge because the input matrix is ill-conditioned or has too many "
           "repeated eigenvalues (error code: {info}).")
_CAUGHT = (RuntimeError, TypeError, ValueError, IndexError, NotImplementedError)


class UPLOError(RuntimeError, ValueError):
    """``UPLO`` is neither ``'L'`` nor ``'U'``."""


class EighExResult(tuple):
    """``(eigenvalues, eigenvectors, info)`` of :func:`eigh_ex`, with named fields."""

    __slots__ = ()
    _fields = ("eigenvalues", "eigenvectors", "info")

    def __new__(cls, seq):
        return super().__new__(cls, seq)

    eigenvalues = property(lambda self: self[0])
    eigenvectors = property(lambda self: self[1])
    info = property(lambda self: self[2])


def _check(op: str, A, UPLO) -> str:
    """The checks of every door; returns ``UPLO`` upper-cased (torch accepts ``'l'``/``'u'``)."""
    E.check_matrix(op, "A", A, square=True)
    if not isinstance(UPLO, str):
        raise TypeError(f"{op}: argument 'UPLO' must be str, not {type(UPLO).__name__}")
    uplo = UPLO.upper()
    if uplo not in ("L", "U"):
        raise UPLOError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return uplo


def _eigh_core(A: torch.Tensor, uplo: str, compute_v: bool, name: str):
    """``(w, V, info)``: torch.linalg outside the table (with the eigh_ex contract), else our op."""
    if table.torch_is_faster(name, A):  # outside the measured table (table.WHEN)
        return eigh_via_torch(A, uplo, compute_v)
    return _eigh(A, uplo, compute_v)


def _wants_vectors(A: torch.Tensor, uplo: str) -> bool:
    """eigvalsh needs ``V`` when a derivative may be taken (autograd, forward mode, torch.func,
    compile): torch's ``_may_require_fw_or_bw_grad``."""
    return not _eigh.direct(A, uplo, False)


def eigh(A: torch.Tensor, UPLO: str = "L", *, out=None):
    """Eigenvalues and eigenvectors of Hermitian (real symmetric) matrices, like
    :func:`torch.linalg.eigh`: ``A = V diag(L) Vᴴ``.

    Only the triangle named by ``UPLO`` is read (and the real part of the diagonal). Small
    matrices (``n <= 64``) run the batched cyclic Jacobi with Demmel–Veselić's relative stopping
    rule, so the eigenvalues of graded positive-definite matrices are relatively accurate; larger
    ones Householder tridiagonalisation, implicit QL and a blocked back-transformation
    (:mod:`mpslinalg.eigh`).

    Parameters
    ----------
    A : torch.Tensor
        ``(*, n, n)``; float32/complex64 on every device, float64/complex128 on CPU/CUDA.
    UPLO : {"L", "U"}
        The triangle read (lower-case accepted, as torch).
    out : tuple of torch.Tensor, optional
        ``(eigenvalues, eigenvectors)`` to write into.

    Returns
    -------
    torch.return_types.linalg_eigh
        ``eigenvalues (*, n)`` real, ascending; ``eigenvectors (*, n, n)`` orthonormal columns.

    Raises
    ------
    torch.linalg.LinAlgError
        A matrix with a non-finite entry in its triangle, or no convergence (torch's message and
        error code; :func:`eigh_ex` reports these per matrix instead).
    RuntimeError
        Non-square, rank below 2, unsupported dtype, bad ``UPLO``.

    Examples
    --------
    >>> A = torch.tensor([[2.0, 1.0], [1.0, 2.0]])
    >>> L, V = eigh(A)
    >>> L
    tensor([1., 3.])
    """
    if out is None and table.torch_first("eigh", A):  # outside the table (table.WHEN)
        try:
            return torch.linalg.eigh(A, UPLO)
        except _CAUGHT:  # bad input: our checks say what (a LinAlgError is raised again below)
            pass
    op = "linalg.eigh"
    uplo = _check(op, A, UPLO)
    w, V, info = _eigh_core(A, uplo, True, "eigh")
    E.raise_for_info(op, info, _NOCONV)
    return E.store(op, out, (w, V), A, kind=_RT.linalg_eigh)


def eigh_ex(A: torch.Tensor, UPLO: str = "L", *, check_errors: bool = False, out=None):
    """:func:`eigh` with a per-matrix status instead of errors, and no host synchronisation
    (beyond torch.linalg).

    Parameters
    ----------
    A : torch.Tensor
        ``(*, n, n)``, as :func:`eigh`.
    UPLO : {"L", "U"}
    check_errors : bool
        Raise :class:`torch.linalg.LinAlgError` for a non-zero ``info`` (this synchronises).
    out : tuple of three tensors, optional

    Returns
    -------
    (eigenvalues, eigenvectors, info)
        As :func:`eigh`, plus ``info`` int32 ``(*)``: 0 success, 1 a non-finite entry in the
        triangle (that matrix's outputs are NaN), 2 not converged within the sweep bound.

    Examples
    --------
    >>> L, V, info = eigh_ex(torch.eye(3))
    >>> L.tolist(), int(info)
    ([1.0, 1.0, 1.0], 0)
    """
    op = "linalg.eigh_ex"
    uplo = _check(op, A, UPLO)
    E.check_bool(op, "check_errors", check_errors)
    w, V, info = _eigh_core(A, uplo, True, "eigh")
    if check_errors:
        E.raise_for_info("linalg.eigh", info, _NOCONV)
    return E.store(op, out, (w, V, info), A, kind=EighExResult)


def eigvalsh(A: torch.Tensor, UPLO: str = "L", *, out=None) -> torch.Tensor:
    """Eigenvalues of Hermitian (real symmetric) matrices, like :func:`torch.linalg.eigvalsh`.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, n, n)``, as :func:`eigh` (only the ``UPLO`` triangle is read).
    UPLO : {"L", "U"}
    out : torch.Tensor, optional

    Returns
    -------
    torch.Tensor
        ``(*, n)`` real, ascending. Differentiable (the eigenvectors are computed when a derivative
        may be taken, as torch does).

    Examples
    --------
    >>> eigvalsh(torch.tensor([[2.0, 1.0], [1.0, 2.0]]))
    tensor([1., 3.])
    """
    if out is None and table.torch_first("eigvalsh", A):  # outside the table (table.WHEN)
        try:
            return torch.linalg.eigvalsh(A, UPLO)
        except _CAUGHT:
            pass
    op = "linalg.eigvalsh"
    uplo = _check(op, A, UPLO)
    w, _, info = _eigh_core(A, uplo, _wants_vectors(A, uplo), "eigvalsh")
    E.raise_for_info("linalg.eigh", info, _NOCONV)
    return E.store(op, out, w, A)
