"""Forward mode (jvp) of the shared derivative formulas (``mpslinalg/oplayer/derivatives.py``) in
complex128 and float64: the mutation gate (issue 18) found that only reverse mode was checked
against finite differences in complex arithmetic, so a wrong tangent (``deriv-inv-jvp-sign``,
``deriv-solve-jvp-*``, ``deriv-slogdet-jvp-*``) went unseen.

Bound: ``gradcheck(check_forward_ad=True)`` compares each jvp with central finite differences in
float64 (``atol=1e-6, rtol=1e-4`` as ``test_lu_grad.py``: at these well-conditioned points,
κ₂ = 10, the differences are accurate to ~1e-8). ``N = 5 > 4``, so the LU family (not the small
family) is what is differentiated.
"""

from __future__ import annotations

import pytest
import torch
from helpers import gaussian
from torch.autograd import gradcheck

import mpslinalg as LA
from reference import matrices

N = 5


_OPS = {
    "solve_left": (lambda a, b: LA.solve(a, b), True),
    "solve_right": (lambda a, b: LA.solve(a, b, left=False), True),
    "inv": (lambda a: LA.inv(a), False),
    "det": (lambda a: LA.det(a), False),
    "slogdet": (lambda a: LA.slogdet(a), False),
}


@pytest.mark.parametrize("op", list(_OPS))
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=["float64", "complex128"])
def test_forward_mode_matches_finite_differences(dtype, op):
    f, has_b = _OPS[op]
    A = matrices.with_condition(N, 10.0, batch=(2,), dtype=dtype, seed=3)
    xs = [A]
    if has_b:
        xs.append(gaussian((2, N, 3) if op == "solve_left" else (2, 3, N), dtype, 4))
    xs = [x.detach().clone().requires_grad_() for x in xs]
    if op == "slogdet" and not dtype.is_complex:
        f = lambda a: LA.slogdet(a).logabsdet  # noqa: E731  (the real sign is piecewise constant)
    assert gradcheck(f, xs, atol=1e-6, rtol=1e-4, check_forward_ad=True, check_backward_ad=False,
                     check_undefined_grad=False, fast_mode=True)
