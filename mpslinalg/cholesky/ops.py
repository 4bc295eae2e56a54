"""The Cholesky family's op declarations: implementations, fakes and derivatives side by side
(PyTorch's ``cholesky_backward``/``cholesky_jvp``, ``cholesky_solve_backward``/``cholesky_solve_jvp``,
``cholesky_inverse_backward``, FunctionsManual.cpp; conjugate Wirtinger). Every formula calls our
own ops (the triangular family's ``solve_triangular``, ``cholesky_solve``), so double backward works.

Like torch's, the derivatives with respect to the factor of ``cholesky_solve`` and
``cholesky_inverse`` are not projected on its triangle, and ``cholesky``'s gradient is Hermitian:
they are the derivatives on the structured inputs (a triangular factor, a Hermitian matrix), which
is how torch's own gradient checks feed them (``tests/cholesky/test_cholesky_grad.py``).
"""

from __future__ import annotations

import torch

from ..oplayer import defop
from ..oplayer import functorch_active as _functorch
from .algorithm import cholesky_ex_impl, cholesky_inverse_impl, cholesky_solve_impl


def _solve_tri(A: torch.Tensor, B: torch.Tensor, *, upper: bool, left: bool) -> torch.Tensor:
    """Differentiable triangular solve for the formulas (our op; torch's under ``torch.func``)."""
    if _functorch():
        return torch.linalg.solve_triangular(A, B, upper=upper, left=left)
    from ..triangular import solve_triangular

    return solve_triangular(A, B, upper=upper, left=left)


# --------------------------------------------------------------------------------------------------
# cholesky_ex
# --------------------------------------------------------------------------------------------------


def _cholesky_ex_shape(A: torch.Tensor, upper: bool):
    return [(A.shape[-2:], A.dtype), ((), torch.int32)]


def _cholesky_setup(ctx, inputs, output) -> None:
    ctx.upper = inputs[1]
    ctx.save_for_backward(output[0])


def cholesky_backward(gL: torch.Tensor | None, L: torch.Tensor, upper: bool) -> torch.Tensor | None:
    """``cholesky_backward`` (Murray 2016): ``gA = L⁻ᴴ π*(tril(Lᴴ gL)) L⁻¹`` with
    ``π*(X) = ½ (X + tril(X, -1)ᴴ)`` (a Hermitian gradient)."""
    if gL is None:
        return None
    L_, gL_ = (L.mH, gL.mH) if upper else (L, gL)
    gA = (L_.mH @ gL_).tril()
    gA = 0.5 * (gA + gA.tril(-1).mH)
    gA = _solve_tri(L_.mH, gA, upper=True, left=True)
    return _solve_tri(L_, gA, upper=False, left=False)


def _cholesky_backward(ctx, gL, ginfo):
    (L,) = ctx.saved_tensors
    return cholesky_backward(gL, L, ctx.upper), None


def cholesky_jvp(dA: torch.Tensor, L: torch.Tensor, upper: bool) -> torch.Tensor:
    """``cholesky_jvp``: ``dL = L π(L⁻¹ dA L⁻ᴴ)`` with ``π(X) = tril(X) - ½ diag(X)``."""
    L_ = L.mH if upper else L
    P = _solve_tri(L_, dA, upper=False, left=True)
    P = _solve_tri(L_.mH, P, upper=True, left=False)
    P = P.tril() - torch.diag_embed(0.5 * P.diagonal(dim1=-2, dim2=-1))
    dL = L_ @ P
    return dL.mH if upper else dL


def _cholesky_jvp(inputs, outputs, tangents):
    (_, upper), (L, _), dA = inputs, outputs, tangents[0]
    if dA is None:
        return torch.zeros_like(L), None
    return cholesky_jvp(dA, L, upper), None


_cholesky_ex = defop("cholesky_ex", impl=cholesky_ex_impl, shape=_cholesky_ex_shape, setup=_cholesky_setup,
                     backward=_cholesky_backward, jvp=_cholesky_jvp, ranks=(2,))


# --------------------------------------------------------------------------------------------------
# cholesky_solve
# --------------------------------------------------------------------------------------------------


def _cholesky_solve_impl(B: torch.Tensor, L: torch.Tensor, upper: bool) -> torch.Tensor:
    return cholesky_solve_impl(B, L, upper).contiguous()


def _cholesky_solve_shape(B: torch.Tensor, L: torch.Tensor, upper: bool):
    return (B.shape[-2:], B.dtype)


def _cholesky_solve_setup(ctx, inputs, output) -> None:
    B, L, upper = inputs
    ctx.upper = upper
    ctx.shapes = (B.shape, L.shape)
    ctx.save_for_backward(L, output)


def _cholesky_solve_backward(ctx, gX):
    """``cholesky_solve_backward``: ``gB = A⁻¹ gX`` (A = L Lᴴ, Hermitian), then with
    ``C = gB Xᴴ + X gBᴴ``: ``gL = -C L`` (lower) or ``-U C`` (upper); broadcast dims summed."""
    L, X = ctx.saved_tensors
    b_shape, l_shape = ctx.shapes
    if gX is None:
        return None, None, None
    gB = _cholesky_solve(gX, L, ctx.upper)
    C = gB @ X.mH
    C = C + C.mH
    gL = -(L @ C) if ctx.upper else -(C @ L)
    return gB.sum_to_size(b_shape), gL.sum_to_size(l_shape), None


def _cholesky_solve_jvp(inputs, outputs, tangents):
    """``cholesky_solve_jvp``: ``dA = dK + dKᴴ`` with ``dK = dL Lᴴ`` (``dUᴴ U``), then
    ``dX = A⁻¹ (dB - dA X)``."""
    (_, L, upper), (X,), (dB, dL) = inputs, outputs, tangents[:2]
    R = torch.zeros_like(X) if dB is None else dB.expand_as(X)
    if dL is not None:
        dK = dL.mH @ L if upper else dL @ L.mH
        R = R - (dK + dK.mH) @ X
    return (_cholesky_solve(R, L, upper),)


_cholesky_solve = defop("cholesky_solve", impl=_cholesky_solve_impl, shape=_cholesky_solve_shape,
                        setup=_cholesky_solve_setup, backward=_cholesky_solve_backward, jvp=_cholesky_solve_jvp,
                        ranks=(2, 2))


# --------------------------------------------------------------------------------------------------
# cholesky_inverse
# --------------------------------------------------------------------------------------------------


def _cholesky_inverse_shape(L: torch.Tensor, upper: bool):
    return (L.shape[-2:], L.dtype)


def _cholesky_inverse_setup(ctx, inputs, output) -> None:
    ctx.upper = inputs[1]
    ctx.save_for_backward(inputs[0], output)


def _cholesky_inverse_backward(ctx, gX):
    """``cholesky_inverse_backward``: ``C = X (G + Gᴴ) X``, ``gL = -C L`` (lower) or ``-U C``."""
    L, X = ctx.saved_tensors
    if gX is None:
        return None, None
    C = X @ (gX + gX.mH) @ X
    return (-(L @ C) if ctx.upper else -(C @ L)), None


def _cholesky_inverse_jvp(inputs, outputs, tangents):
    """``X = (L Lᴴ)⁻¹``: ``dX = K + Kᴴ`` with ``K = -X dL Lᴴ X`` (lower) or ``-X dUᴴ U X`` (upper)."""
    (L, upper), (X,), dL = inputs, outputs, tangents[0]
    if dL is None:
        return (torch.zeros_like(X),)
    K = -(X @ (dL.mH @ L if upper else dL @ L.mH) @ X)
    return (K + K.mH,)


_cholesky_inverse = defop("cholesky_inverse", impl=cholesky_inverse_impl, shape=_cholesky_inverse_shape,
                          setup=_cholesky_inverse_setup, backward=_cholesky_inverse_backward,
                          jvp=_cholesky_inverse_jvp, ranks=(2,))
