"""Our backward passes under ``enable(when="always")`` make one pass through the front doors (issue
33, "Also"): a backward runs outside the routed call that recorded it, and its ``torch.linalg``
calls (the torch backend's LAPACK leaves, a front door's table decision for a triangular solve)
went through the dispatcher back into our front door, counted as a second routed call ("ours")
plus the internal one. Now they are internal calls: ``routing.stats()`` counts no "ours" call
during a backward, and each front-door decision once.

Gradients are checked against torch's (routing off, float64): both are backward-stable solves
with the same matrices, κ <= 10 here, so they differ by at most ``GRAD_C u = 60 √n κ² u``
relative (``tests/test_routing.py``'s derivation).
"""

from __future__ import annotations

import math

import pytest
import torch

import mpslinalg
from mpslinalg import routing

N = 6
_G = torch.Generator().manual_seed(3)
_A = torch.randn(N, N, dtype=torch.float64, generator=_G) + 2 * N * torch.eye(N, dtype=torch.float64)
_B = torch.randn(N, 2, dtype=torch.float64, generator=_G)
_T = torch.randn(N + 1, N - 1, dtype=torch.float64, generator=_G) + torch.eye(N + 1, N - 1, dtype=torch.float64) * 4
_FACTORS = torch.linalg.lu_factor(_A)

#: name -> (function of the inputs, inputs); every forward is a torch.linalg call routed to ours
CASES = {
    "solve_triangular": (lambda A, B: torch.linalg.solve_triangular(A.triu(), B, upper=True), (_A, _B)),
    "qr": (lambda T: torch.linalg.qr(T)[1], (_T,)),
    "lu_factor": (lambda A: torch.linalg.lu_factor(A)[0], (_A,)),
    "lu": (lambda A: torch.linalg.lu(A)[1], (_A,)),
    "solve": (lambda A, B: torch.linalg.solve(A, B), (_A, _B)),
    "det": (lambda A: torch.linalg.det(A), (_A,)),
    "lu_solve": (lambda B: torch.linalg.lu_solve(*_FACTORS, B), (_B,)),
}


@pytest.fixture(autouse=True)
def _routing_off():
    routing.disable()
    yield
    routing.disable()


@pytest.mark.parametrize("name", list(CASES))
def test_backward_makes_one_pass(routing_table, name):
    fn, inputs = CASES[name]
    args = [x.clone().requires_grad_() for x in inputs]
    with mpslinalg.enabled(devices="cpu", when="always"):
        y = fn(*args)
        assert routing.stats()  # the forward ran ours
        routing.reset_stats()
        routing.reset_decisions()
        grads = torch.autograd.grad(y.sum(), args)
        during = routing.stats()
        decided = routing.decisions()
    assert all(c["ours"] == 0 for c in during.values()), during  # nothing re-entered a front door
    assert all(c["internal"] >= 1 for c in during.values()), during
    # each triangular solve of a backward is decided once at the front door, then one internal call
    if "solve_triangular" in decided:
        assert decided["solve_triangular"]["torch"] == during["solve_triangular"]["internal"], (decided, during)

    ref_args = [x.clone().requires_grad_() for x in inputs]
    ref = torch.autograd.grad(fn(*ref_args).sum(), ref_args)
    bound = 60 * math.sqrt(N) * 10**2 * 2.0**-53
    for g, r in zip(grads, ref):
        assert float((g - r).norm() / r.norm()) <= bound, name
