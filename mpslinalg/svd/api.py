"""The SVD family's front doors: ``svd``, ``svd_ex``, ``svdvals`` with ``torch.linalg``'s semantics."""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as _fwad
import torch.utils._pytree as _pytree

from ..kernels import backend_for
from ..oplayer import checks as E
from ..oplayer import functorch_active, table
from . import c as _svd_c
from .algorithm import lapack_smlnum
from .kernels import INFO_NOCONV, INFO_NONFINITE, TUNING
from .ops import svd_op as _svd
from .paths import in_lapack_range

__all__ = ["SVDExResult", "svd", "svd_ex", "svdvals"]

_DRIVERS = (None, "gesvd", "gesvdj", "gesvda")
_NONFINITE = "The algorithm failed to converge because the input matrix contained non-finite values."
_NOCONV = ("The algorithm failed to converge because the input matrix is ill-conditioned or has too "
           "many repeated singular values (error code: {info}).")


def _check(op: str, A, driver) -> torch.Tensor:
    A = E.check_matrix(op, "A", A)
    if driver not in _DRIVERS:
        raise ValueError(f"{op}: driver must be None or one of 'gesvd', 'gesvdj', 'gesvda', got {driver!r}")
    return A


def _raise(info: torch.Tensor) -> None:
    # the common case in one host read (svd raises as torch); compile, meta and torch.func: the checks
    if (not E.traced(info) and not info.is_meta and not functorch_active() and info.numel()
            and not bool(info.any())):
        return
    # torch names linalg.svd in the errors of svdvals too
    E.raise_for_info("linalg.svd", (info == INFO_NONFINITE).to(torch.int32), _NONFINITE)
    E.raise_for_info("linalg.svd", torch.where(info == INFO_NOCONV, info, 0), _NOCONV)


def _one_cpu(A: torch.Tensor, full_matrices: bool, compute_uv: bool):
    """One CPU matrix in the C kernel's range, where the op would run its impl directly: the
    kernel's call without the op layer (:func:`mpslinalg.svd.c.svd_one`; issue 34.7), or None.
    Without a C compiler (:func:`mpslinalg.svd.c.unbuildable`) the op's route there is LAPACK's SVD
    of ``A`` itself (``paths.lapack_tall``): a matrix inside LAPACK's safe range (finite) makes that
    call here, without the op layer's round (+45 against +3 µs at 8x8); the others go to the op."""
    # direct() first: under torch.compile it is False, and backend_for's ContextVar is not traceable
    if not _svd.direct(A) or A.dim() != 2 or not 0 < min(A.shape) <= TUNING.jacobi_max.get("cpu", 0):
        return None
    if _svd_c.usable(A):
        if backend_for(A.device) != "torch":
            return None
        return _svd_c.svd_one(A, full_matrices, compute_uv, TUNING.max_sweeps)
    if not A.is_cpu or not _svd_c.unbuildable(A) or backend_for(A.device) != "torch":
        return None
    big, lo = float(A.abs().max()), lapack_smlnum(A.dtype)  # LAPACK's own test (anrm; NaN fails it)
    if not lo <= big <= 1 / lo:  # [SMLNUM, BIGNUM]
        return None
    if compute_uv:
        return tuple(torch.linalg.svd(A, full_matrices=full_matrices))
    return None, torch.linalg.svdvals(A), None


def _wants_grad(A: torch.Tensor) -> bool:
    if functorch_active() or (torch.is_grad_enabled() and A.requires_grad):
        return True
    return _fwad.unpack_dual(A).tangent is not None


def svd_ex(A: torch.Tensor, full_matrices: bool = True, *, driver: str | None = None, out=None):
    """SVD with a per-matrix status instead of errors, and no host synchronisation.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``; float32/complex64 on every device, float64/complex128 on CPU/CUDA.
    full_matrices : bool
        As :func:`svd`.
    driver : None or str
        Accepted for compatibility with ``torch.linalg.svd`` (``'gesvd'``, ``'gesvdj'``,
        ``'gesvda'``) on every device; the algorithm is always the preconditioned Jacobi method.
    out : tuple of four tensors, optional

    Returns
    -------
    (U, S, Vh, info)
        As :func:`svd`, plus ``info`` int32 ``(*)``: 0 success, 1 non-finite input (``U``, ``S``,
        ``Vh`` of that matrix are NaN), 2 not converged within the sweep bound.

    Examples
    --------
    >>> import torch, mpslinalg
    >>> U, S, Vh, info = mpslinalg.svd_ex(torch.eye(3))
    >>> S.tolist(), int(info)
    ([1.0, 1.0, 1.0], 0)
    """
    op = "linalg.svd_ex"
    A = _check(op, A, driver)
    full_matrices = E.check_bool(op, "full_matrices", full_matrices)
    if (one := _one_cpu(A, full_matrices, True)) is not None:
        return E.store(op, out, (*one, torch.zeros((), dtype=torch.int32)), A, kind=SVDExResult)
    U, S, Vh, info = _svd(A, full_matrices, True)
    return E.store(op, out, (U, S, Vh, info), A, kind=SVDExResult)


def svd(A: torch.Tensor, full_matrices: bool = True, *, driver: str | None = None, out=None):
    """Singular value decomposition ``A = U diag(S) Vh``, as ``torch.linalg.svd``.

    Preconditioned one-sided Jacobi (module docstring): small singular values of graded matrices
    are relatively accurate, inputs of any scale are handled, ``U``/``Vh`` are orthonormal also
    for rank-deficient and zero matrices.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``; float32/complex64 on every device, float64/complex128 on CPU/CUDA.
    full_matrices : bool
        ``U`` ``(*, m, m)`` and ``Vh`` ``(*, n, n)`` if true (default), else ``(*, m, k)`` and
        ``(*, k, n)`` with ``k = min(m, n)``.
    driver : None or str
        Accepted for compatibility (see :func:`svd_ex`).
    out : tuple of three tensors, optional

    Returns
    -------
    (U, S, Vh)
        ``torch.return_types.linalg_svd``; ``S`` real, descending, non-negative.

    Raises
    ------
    torch.linalg.LinAlgError
        Non-finite input or no convergence, naming the batch element (as torch).

    Examples
    --------
    >>> import torch, mpslinalg
    >>> A = torch.tensor([[3.0, 0.0], [0.0, -4.0]])
    >>> mpslinalg.svd(A).S.tolist()
    [4.0, 3.0]
    """
    op = "linalg.svd"
    A = _check(op, A, driver)
    full_matrices = E.check_bool(op, "full_matrices", full_matrices)
    if (one := _one_cpu(A, full_matrices, True)) is not None:
        return E.store(op, out, one, A, kind=torch.return_types.linalg_svd)
    U, S, Vh, info = _svd(A, full_matrices, True)
    _raise(info)
    return E.store(op, out, (U, S, Vh), A, kind=torch.return_types.linalg_svd)


def svdvals(A: torch.Tensor, *, driver: str | None = None, out=None) -> torch.Tensor:
    """Singular values of ``A``, descending, as ``torch.linalg.svdvals``.

    The singular vectors are computed only when a gradient is needed (``A`` requires grad, a
    forward-mode tangent or a ``torch.func`` transform).

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``.
    driver : None or str
        Accepted for compatibility (see :func:`svd_ex`).
    out : torch.Tensor, optional

    Returns
    -------
    torch.Tensor
        Real ``(*, min(m, n))``.

    Raises
    ------
    torch.linalg.LinAlgError
        Non-finite input or no convergence.

    Examples
    --------
    >>> import torch, mpslinalg
    >>> mpslinalg.svdvals(torch.tensor([[0.0, 2.0], [1.0, 0.0]])).tolist()
    [2.0, 1.0]
    """
    op = "linalg.svdvals"
    A = _check(op, A, driver)
    if (one := _one_cpu(A, False, False)) is not None:
        return E.store(op, out, one[1], A)
    if (A.device.type == "cpu" and min(A.shape[-2:]) > TUNING.jacobi_max.get("cpu", 0) and _svd.direct(A)
            and TUNING.large_driver != "qdwh"
            and not _wants_grad(A) and backend_for(A.device) == "torch"
            and bool(in_lapack_range(A.reshape(-1, *A.shape[-2:])).all())):
        # LAPACK's xGESDD of A itself (_lapack_tall's in-range case) without the op layer's round:
        # SciPy's where table.LAPACK measured it faster than torch.linalg's (issue 34.7)
        if out is None and (lapack := table.lapack_first("svdvals", A)) is not None:
            gesdd = lapack.sgesdd if A.dtype is torch.float32 else lapack.dgesdd
            _, S, _, info = gesdd(A.numpy().T, compute_uv=0)  # Aᵀ: A's C order read as Fortran, same σ
            if info == 0:
                return torch.from_numpy(S)
        return E.store(op, out, torch.linalg.svdvals(A), A)
    _, S, _, info = _svd(A, False, _wants_grad(A))
    _raise(info)
    return E.store(op, out, S, A)


class SVDExResult(tuple):
    """``(U, S, Vh, info)`` of :func:`svd_ex`, with named fields."""

    __slots__ = ()
    _fields = ("U", "S", "Vh", "info")

    def __new__(cls, seq):
        return super().__new__(cls, seq)

    U = property(lambda self: self[0])
    S = property(lambda self: self[1])
    Vh = property(lambda self: self[2])
    info = property(lambda self: self[3])


# a pytree node (as torch.return_types are): torch.func transforms return it, e.g. vmap(svd_ex)
_pytree.register_pytree_node(
    SVDExResult, lambda r: (list(r), None), lambda values, _: SVDExResult(values),
    serialized_type_name="mpslinalg.svd.SVDExResult")
