"""The LDL family's op declarations (:func:`mpslinalg.oplayer.defop`): implementations, fakes and
derivatives. torch has no derivative for ``linalg_ldl_factor_ex`` nor ``linalg_ldl_solve``; ours
raise torch's errors at the same moments (reverse mode: when the backward runs; forward mode: when
the op meets a dual tensor)."""

from __future__ import annotations

import torch

from ..oplayer import defop
from .algorithm import ldl_factor_impl, ldl_solve_impl


def _not_differentiable(aten: str):
    """A backward and a jvp that raise what torch raises for ``aten``."""

    def backward(ctx, *grads):
        raise RuntimeError(f"derivative for aten::{aten} is not implemented")

    def jvp(inputs, outputs, tangents):
        raise NotImplementedError(f"Trying to use forward AD with aten::{aten} that does not support it.")

    return backward, jvp


def _factor_impl(A: torch.Tensor, hermitian: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    LD, piv, info = ldl_factor_impl(A, hermitian)
    return LD.contiguous(), piv.contiguous(), info.contiguous()


def _factor_shape(A: torch.Tensor, hermitian: bool):
    return [(A.shape[-2:], A.dtype), (A.shape[-1:], torch.int32), ((), torch.int32)]


def _solve_impl(LD: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, hermitian: bool) -> torch.Tensor:
    return ldl_solve_impl(LD, pivots, B, hermitian).contiguous()


def _solve_shape(LD: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, hermitian: bool):
    return (B.shape[-2:], B.dtype)


_factor_backward, _factor_jvp = _not_differentiable("linalg_ldl_factor_ex")
_solve_backward, _solve_jvp = _not_differentiable("linalg_ldl_solve")

_ldl_factor_ex = defop("ldl_factor_ex", impl=_factor_impl, shape=_factor_shape, backward=_factor_backward,
                       jvp=_factor_jvp, ranks=(2,))
_ldl_solve = defop("ldl_solve", impl=_solve_impl, shape=_solve_shape, backward=_solve_backward, jvp=_solve_jvp,
                   ranks=(2, 1, 2))
