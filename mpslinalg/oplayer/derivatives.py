"""Derivative formulas that more than one op declaration uses, written once.

Conventions are PyTorch's (``torch/csrc/autograd/FunctionsManual.cpp``): conjugate Wirtinger
calculus, so for a real loss ``L`` the gradient ``G`` of a complex input satisfies
``dL = Re tr(Gᴴ dA)``. Each formula names the PyTorch function it follows. The callers pass the
Ops to use inside (``solve``...), so that a backward runs through differentiable ops and double
backward works.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = [
    "inv_backward",
    "inv_jvp",
    "or_zeros",
    "slogdet_cotangent",
    "slogdet_jvp",
    "solve_backward",
    "solve_jvp",
]


def or_zeros(t: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """A tangent/cotangent, or zeros where autograd passed ``None``."""
    return torch.zeros_like(like) if t is None else t


def inv_backward(X: torch.Tensor, gX: torch.Tensor | None) -> torch.Tensor | None:
    """``linalg_inv_ex`` backward: ``gA = -Xᴴ gX Xᴴ`` with ``X = A⁻¹``."""
    if gX is None:
        return None
    XH = X.mH
    return -(XH @ gX @ XH)


def inv_jvp(X: torch.Tensor, dA: torch.Tensor | None) -> torch.Tensor:
    """``d(A⁻¹) = -A⁻¹ dA A⁻¹``."""
    return -(X @ or_zeros(dA, X) @ X)


def solve_backward(solve: Callable, A: torch.Tensor, X: torch.Tensor, gX: torch.Tensor | None,
                   left: bool, needs_input_grad, a_shape, b_shape):
    """``linalg_solve_backward``: ``gB = A⁻ᴴ gX`` (left) / ``gX A⁻ᴴ`` (right);
    ``gA = -gB Xᴴ`` / ``-Xᴴ gB``; both reduced to the inputs' (broadcast) shapes.

    ``solve(A, B, left) -> X`` is the differentiable solve to use.
    """
    if gX is None:
        return None, None
    gB_full = solve(A.mH, gX, left)
    gA = gB = None
    if needs_input_grad[1]:
        gB = gB_full.sum_to_size(b_shape)
    if needs_input_grad[0]:
        gA = (-(gB_full @ X.mH) if left else -(X.mH @ gB_full)).sum_to_size(a_shape)
    return gA, gB


def solve_jvp(solve: Callable, A: torch.Tensor, X: torch.Tensor, dA: torch.Tensor | None,
              dB: torch.Tensor | None, left: bool) -> torch.Tensor:
    """``A X = B``: ``dX = A⁻¹ (dB − dA X)``;  ``X A = B``: ``dX = (dB − X dA) A⁻¹``."""
    R = dB.expand_as(X) if dB is not None else torch.zeros_like(X)
    if dA is not None:
        R = R - (dA @ X if left else X @ dA)
    return solve(A, R, left)


def slogdet_cotangent(A: torch.Tensor, sign: torch.Tensor, gsign: torch.Tensor | None,
                      glogabs: torch.Tensor | None) -> torch.Tensor:
    """``slogdet_backward``'s scalar ``g`` with ``gA = g · A⁻ᴴ``:
    ``g = g_logabs − i Im(conj(g_sign) sign)`` (complex; real: ``g_logabs``)."""
    real = A.real.dtype if A.is_complex() else A.dtype
    g = glogabs if glogabs is not None else torch.zeros(sign.shape, dtype=real, device=A.device)
    if A.is_complex():
        g = g.to(A.dtype)
        if gsign is not None:
            g = g - 1j * (gsign.conj() * sign).imag
    return g


def slogdet_jvp(t: torch.Tensor, sign: torch.Tensor, logabs: torch.Tensor, complex_: bool):
    """With ``t = tr(A⁻¹ dA)``: ``d logabsdet = Re t``, ``d sign = i Im(t) sign`` (complex; 0 for real)."""
    if not complex_:
        return torch.zeros_like(sign), t
    return sign * (1j * t.imag), t.real.to(logabs.dtype)


def solve_rules(solve: Callable) -> dict:
    """``setup``/``backward``/``jvp`` of an op ``(A, B, left) -> (X, info)``; ``solve(A, B, left)``
    returns ``X`` through a differentiable op (late-bound: the op may be declared after this call)."""

    def setup(ctx, inputs, output):
        A, B, left = inputs
        ctx.left = left
        ctx.shapes = (A.shape, B.shape)
        ctx.save_for_backward(A, output[0])

    def backward(ctx, gX, ginfo=None):
        A, X = ctx.saved_tensors
        gA, gB = solve_backward(solve, A, X, gX, ctx.left, ctx.needs_input_grad, *ctx.shapes)
        return gA, gB, None

    def jvp(inputs, outputs, tangents):
        (A, _, left), (X, _), (dA, dB, _) = inputs, outputs, tangents
        return solve_jvp(solve, A, X, dA, dB, left), None

    return {"setup": setup, "backward": backward, "jvp": jvp}


def inv_rules() -> dict:
    """``setup``/``backward``/``jvp`` of an op ``A -> (A⁻¹, info)``."""

    def setup(ctx, inputs, output):
        ctx.save_for_backward(output[0])

    def backward(ctx, gX, ginfo=None):
        (X,) = ctx.saved_tensors
        return inv_backward(X, gX)

    def jvp(inputs, outputs, tangents):
        return inv_jvp(outputs[0], tangents[0]), None

    return {"setup": setup, "backward": backward, "jvp": jvp}
