"""``solve_triangular``: its op declaration (implementation, fake, derivatives) and the public op."""

from __future__ import annotations

import torch

from ..oplayer import checks as E
from ..oplayer import defop, table
from ..oplayer import derivatives as D
from .algorithm import _batch_shape, _solve_impl
from .kernels import _OP

# --------------------------------------------------------------------------------------------------
# The custom op: fake implementation and autograd
# --------------------------------------------------------------------------------------------------


def _solve(A: torch.Tensor, B: torch.Tensor, upper: bool, left: bool, unit: bool,
           batch: torch.Size | None = None) -> torch.Tensor:
    """The declared op (:mod:`mpslinalg.oplayer`) where autograd, compile, ``torch.func`` or a
    dual tensor needs it, else the implementation directly, keeping torch's layout for large
    direct solves (``contiguous=False``) and the caller's broadcast ``batch``."""
    if _solve_triangular_op.direct(A, B):
        return _solve_impl(A, B, upper, left, unit, batch, contiguous=False)
    return _solve_triangular_op(A, B, upper, left, unit)


def _solve_triangular(A: torch.Tensor, B: torch.Tensor, upper: bool, left: bool,
                      unitriangular: bool) -> torch.Tensor:
    return _solve_impl(A, B, upper, left, unitriangular)


def _solve_triangular_shape(A, B, upper, left, unitriangular):
    return (B.shape[-2:], A.dtype)


def _setup_context(ctx, inputs, output):
    A, B, upper, left, unitriangular = inputs
    ctx.flags = (upper, left, unitriangular)
    ctx.shapes = (A.shape, B.shape)
    ctx.save_for_backward(A, output)


def _backward(ctx, gX):
    # PyTorch's formula (FunctionsManual.cpp, linalg_solve_triangular_backward), conjugate-Wirtinger:
    #   left:  X = A⁻¹ B,  gB = A⁻ᴴ gX,  gA = -gB Xᴴ;   right: X = B A⁻¹,  gB = gX A⁻ᴴ,  gA = -Xᴴ gB
    # then gA is projected on the triangle that was read (strictly, when the diagonal was not read).
    # Both go through our op (when create_graph records), so double backward works.
    A, X = ctx.saved_tensors
    upper, left, unit = ctx.flags
    a_shape, b_shape = ctx.shapes
    gA = gB = None
    gB_full = _solve(A.mH, gX, not upper, left, unit)  # the op itself when create_graph records
    if ctx.needs_input_grad[1]:
        gB = gB_full.sum_to_size(b_shape)
    if ctx.needs_input_grad[0]:
        gA = -(gB_full @ X.mH) if left else -(X.mH @ gB_full)
        gA = _project(gA, upper, unit).sum_to_size(a_shape)
    return gA, gB, None, None, None


def _project(dA: torch.Tensor, upper: bool, unit: bool) -> torch.Tensor:
    """The part of ``dA`` the solve reads (its triangle; strictly, when the diagonal is not read)."""
    return dA.triu(int(unit)) if upper else dA.tril(-int(unit))


def _jvp(inputs, outputs, tangents):
    # A X = B: dX = A⁻¹ (dB − dA X);  X A = B: dX = (dB − X dA) A⁻¹, dA on the triangle read
    (A, _, upper, left, unit), (X,), (dA, dB, *_) = inputs, outputs, tangents
    dA = None if dA is None else _project(dA, upper, unit)
    return (D.solve_jvp(lambda a, r, lft: _solve_triangular_op(a, r, upper, lft, unit), A, X, dA, dB, left),)


_solve_triangular_op = defop("solve_triangular", impl=_solve_triangular, shape=_solve_triangular_shape,
                             setup=_setup_context, backward=_backward, jvp=_jvp, ranks=(2, 2))



# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def solve_triangular(A: torch.Tensor, B: torch.Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False, out: torch.Tensor | None = None) -> torch.Tensor:
    r"""Solve a triangular system ``A X = B`` (or ``X A = B``), like ``torch.linalg.solve_triangular``.

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
        Batches of triangular matrices. Only the triangle named by ``upper`` is read (the other
        may hold anything, NaN included); with ``unitriangular=True`` the diagonal is not read
        either. float32 or complex64 on every device; float64/complex128 on CPU and CUDA.
    B : Tensor, shape ``(*, n, k)`` if ``left`` else ``(*, k, n)``
        Right-hand sides, same dtype and device as ``A`` (no silent casts: complex ``B`` with real
        ``A`` raises). Batch dimensions broadcast with ``A``'s.
    upper : bool
        ``A`` is upper (``True``) or lower (``False``) triangular. Keyword-only and required, as in
        torch.
    left : bool, optional
        Solve ``A X = B`` (default) or ``X A = B``.
    unitriangular : bool, optional
        Take the diagonal of ``A`` to be all ones (it is never read).
    out : Tensor, optional
        Output tensor (resized as needed). Not differentiable, as in torch.

    Returns
    -------
    Tensor, shape ``broadcast(*) × B.shape[-2:]``
        The solution ``X``; contiguous, dtype of ``A``.

    Raises
    ------
    TypeError, ValueError, RuntimeError
        Wrong argument types, ranks, shapes, dtypes or devices (:mod:`mpslinalg._errors` classes
        derive from both the Python and the torch exception). A singular ``A`` (zero diagonal
        entry) is not an error, as in torch: the result has ``inf``/``nan``.

    Notes
    -----
    Diagonal blocks of width ``nb <= 32`` are inverted in one batched dispatch; everything else is
    matrix products (recursive splitting). The result is backward stable: LAPACK's residual ratio
    ``‖B − AX‖₁ / (‖A‖₁ ‖X‖₁ u)`` stays far below 30 (see ``docs/ops/triangular.md``).
    Differentiable in ``A`` and ``B`` (complex included, twice), a ``torch.library`` custom op
    (``mpslinalg::solve_triangular``) that ``torch.compile(fullgraph=True)`` traces through, and
    free of host synchronisation.

    Examples
    --------
    >>> import torch, mpslinalg
    >>> A = torch.tensor([[2.0, 0.0], [1.0, 4.0]])
    >>> B = torch.tensor([[2.0], [9.0]])
    >>> mpslinalg.solve_triangular(A, B, upper=False)
    tensor([[1.],
            [2.]])
    """
    if out is None and table.torch_first("solve_triangular", A):  # outside the table (table.WHEN)
        try:
            # torch casts B to A's dtype (or promotes) silently, dropping a complex B's imaginary
            # part: a mix goes to our checks, which refuse it (dtypes are singletons: `is`)
            if B.dtype is A.dtype:
                return torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)
        except (RuntimeError, TypeError, ValueError, IndexError, AttributeError):  # bad input: our checks say what
            pass
    A = E.check_matrix(_OP, "A", A, square=True)
    B = E.check_matrix(_OP, "B", B)
    E.check_same(_OP, ("A", "B"), A, B)
    for name, val in (("upper", upper), ("left", left), ("unitriangular", unitriangular)):
        E.check_bool(_OP, name, val)
    E.check_rhs(_OP, A, B, left=left)
    batch = _batch_shape(A, B)  # before either path: a mismatch names A's and B's shapes (issue 34.8)
    if table.torch_is_faster("solve_triangular", A):  # outside the measured table (table.WHEN)
        X = torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)
    else:
        X = _solve(A, B, upper, left, unitriangular, batch)
    return E.store(_OP, out, X, A, B)

