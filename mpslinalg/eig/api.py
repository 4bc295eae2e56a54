"""The eig family's public ops (``torch.linalg`` names, and ``eig_ex``): checks once, the table, the
declared op, ``out=``."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..oplayer import checks as E
from ..oplayer import table
from .ops import _eig_ex, _eigvals_ex

_RT = torch.return_types
_NONFINITE = "input tensor should not contain infs or NaNs."
_NO_CONVERGENCE = ("The algorithm failed to converge because the input matrix is ill-conditioned or has too many "
                   "repeated eigenvalues (error code: {info}).")


class EigEx(NamedTuple):
    """``eig_ex``'s result: ``eigenvalues``, ``eigenvectors`` and the per-matrix ``info``."""

    eigenvalues: torch.Tensor
    eigenvectors: torch.Tensor
    info: torch.Tensor


def _eig_ex_result(values) -> EigEx:
    """``checks.store``'s ``kind`` (it passes one tuple, as torch's return types take it)."""
    return EigEx(*values)


def _raise(op: str, A: torch.Tensor, info: torch.Tensor) -> None:
    """torch's errors: non-finite input (torch's message), then non-convergence (``LinAlgError``)."""
    n = A.shape[-1]
    if not E.traced(info) and not info.is_meta and info.numel():
        flags = info
        while torch._C._functorch.is_functorch_wrapped_tensor(flags):  # under torch.func: every element,
            flags = torch._C._functorch.get_unwrapped(flags)             # as raise_for_info reads them
        if bool((flags == n + 1).any()):
            raise RuntimeError(f"torch.{op}: {_NONFINITE}")
    E.raise_for_info(op, info, _NO_CONVERGENCE)


def eig(A: torch.Tensor, *, out=None):
    """Eigenvalues and right eigenvectors of square matrices, like :func:`torch.linalg.eig`.

    ``A V = V diag(L)``. Eigenvectors have unit 2-norm and their largest component real (LAPACK
    ``geev``); for real input, complex eigenvalues come in exact conjugate pairs (positive imaginary
    part first) with conjugate eigenvectors.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, n, n)``: float32/complex64 on any device, float64/complex128 on CPU/CUDA.
    out : tuple of torch.Tensor, optional
        ``(L, V)`` to write into (complex).

    Returns
    -------
    torch.return_types.linalg_eig
        ``(eigenvalues (*, n), eigenvectors (*, n, n))``, complex64 (or complex128).

    Raises
    ------
    RuntimeError
        Non-square or rank < 2 input, an unsupported dtype, non-finite entries (torch's message);
        ``torch.linalg.LinAlgError`` when the QR iteration does not converge; in backward, a loss that
        depends on the eigenvectors' phases (torch's message).

    Examples
    --------
    >>> R = torch.tensor([[0.0, -1.0], [1.0, 0.0]])   # a rotation: eigenvalues +-i
    >>> L, V = eig(R)
    >>> L
    tensor([0.+1.j, 0.-1.j])
    """
    if out is None and table.torch_first("eig", A):  # outside the table (table.WHEN)
        try:
            return torch.linalg.eig(A)
        except (RuntimeError, TypeError, ValueError, IndexError):  # bad input: our checks say what
            pass
    op = "linalg.eig"
    E.check_matrix(op, "A", A, square=True)
    L, V, info = _eig_ex(A, True)
    _raise(op, A, info)
    return E.store(op, out, (L, V), A, kind=_RT.linalg_eig)


def eigvals(A: torch.Tensor, *, out=None) -> torch.Tensor:
    """Eigenvalues of square matrices, like :func:`torch.linalg.eigvals` (see :func:`eig`).

    Parameters
    ----------
    A : torch.Tensor
        ``(*, n, n)``.
    out : torch.Tensor, optional

    Returns
    -------
    torch.Tensor
        ``(*, n)`` complex: the diagonal of the Schur form in its order; for real input exact
        conjugate pairs.

    Examples
    --------
    >>> eigvals(torch.diag(torch.tensor([1.0, 2.0])))
    tensor([1.+0.j, 2.+0.j])
    """
    if out is None and table.torch_first("eigvals", A):
        try:
            return torch.linalg.eigvals(A)
        except (RuntimeError, TypeError, ValueError, IndexError):
            pass
    op = "linalg.eigvals"
    E.check_matrix(op, "A", A, square=True)
    L, info = _eigvals_ex(A)
    _raise(op, A, info)
    return E.store(op, out, L, A)


def eig_ex(A: torch.Tensor, *, check_errors: bool = False, out=None) -> EigEx:
    """:func:`eig` with a per-matrix ``info`` instead of errors, and no host synchronisation on the
    kernel path (beyond torch: torch has no ``eig_ex``).

    Parameters
    ----------
    A : torch.Tensor
        ``(*, n, n)``.
    check_errors : bool
        Raise as :func:`eig` does (a host read).
    out : tuple of torch.Tensor, optional
        ``(L, V, info)``.

    Returns
    -------
    EigEx
        ``(eigenvalues, eigenvectors, info)``; ``info (*)`` int32: 0 success; ``1 <= i <= n``: the QR
        iteration did not converge, eigenvalues ``i+1 .. n`` had (LAPACK's ``geev`` convention); ``n + 1``:
        non-finite input. Matrices with ``info != 0`` have NaN eigenvalues and eigenvectors.

    Examples
    --------
    >>> A = torch.eye(3).expand(2, 3, 3).clone(); A[1, 0, 0] = float("nan")
    >>> eig_ex(A).info
    tensor([0, 4], dtype=torch.int32)
    """
    op = "mpslinalg.eig_ex"
    E.check_matrix(op, "A", A, square=True)
    E.check_bool(op, "check_errors", check_errors)
    result = _eig_ex(A, False)
    if check_errors:
        _raise("linalg.eig", A, result[2])
    return E.store(op, out, result, A, kind=_eig_ex_result)
