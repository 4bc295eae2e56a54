"""The matrix exponential's op declaration: implementation, fake and derivatives.

Both derivatives come from one identity (Mathias 1996; PyTorch's ``differential_analytic_matrix_function``
and ``backward_analytic_function_of_a_matrix``): for an analytic ``f``,

    f([[X, E], [0, X]]) = [[f(X), L_f(X, E)], [0, f(X)]],

with ``L_f(X, E)`` the Fréchet derivative of ``f`` at ``X`` in the direction ``E``. Forward mode is
``dexp = L(A, dA)``; reverse mode is the adjoint, ``gA = L(Aᴴ, G)``. Each is one matrix exponential of
order ``2n`` through this same op, so double backward and higher derivatives follow.
"""

from __future__ import annotations

import torch

from ..oplayer import defop
from ..oplayer import functorch_active as _functorch
from .algorithm import matrix_exp_impl


def _impl(A: torch.Tensor) -> torch.Tensor:
    if _functorch():
        # torch.func transforms: the impl must be vmap-friendly, and ours reads two integers on the host
        return torch.linalg.matrix_exp(A)
    return matrix_exp_impl(A)


def _shape(A: torch.Tensor):
    return (A.shape[-2:], A.dtype)


def frechet(X: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """``L_exp(X, E)``: the upper-right block of ``exp([[X, E], [0, X]])`` (through the op, so it is
    differentiable again)."""
    n = X.shape[-1]
    shape = torch.broadcast_shapes(X.shape, E.shape)
    X, E = X.expand(shape), E.expand(shape)
    top = torch.cat([X, E], dim=-1)
    bottom = torch.cat([torch.zeros_like(X), X], dim=-1)
    return _matrix_exp(torch.cat([top, bottom], dim=-2))[..., :n, n:].contiguous()  # a tangent laid out as its primal


def _setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(inputs[0])


def _backward(ctx, grad):
    (A,) = ctx.saved_tensors
    return frechet(A.mH, grad)


def _jvp(inputs, outputs, tangents):
    (A,) = inputs
    (dA,) = tangents
    if dA is None:
        return (torch.zeros_like(outputs[0]),)
    return (frechet(A, dA),)


_matrix_exp = defop("matrix_exp", impl=_impl, shape=_shape, setup=_setup, backward=_backward, jvp=_jvp,
                     ranks=(2,))
