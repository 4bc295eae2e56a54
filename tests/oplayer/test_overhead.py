"""The op layer's cheap route decision (issue 13's host overhead) keeps every route, and the
overhead benchmark's "own path" rows time what they say they time."""

import torch
import torch.autograd.forward_ad as fwAD

from mpslinalg import routing
from mpslinalg.mainjob import overhead
from mpslinalg.oplayer import defop, needs_custom_op
from mpslinalg.oplayer import op as O


class _Sub(torch.Tensor):
    pass


def _ident_op():
    calls = {"impl": 0}

    def impl(x: torch.Tensor) -> torch.Tensor:
        calls["impl"] += 1
        return x * 2

    op = defop("_test_overhead_double", impl=impl, fake=lambda x: torch.empty_like(x),
               backward=lambda ctx, g: 2 * g, jvp=lambda i, o, t: (2 * t[0],))
    return op, calls


def test_path_of_every_situation():
    # _path is the one decision Op.__call__ and Op.direct share: each situation that needs the custom
    # op or the autograd.Function must still get it (the cheap checks may only reorder the tests)
    x = torch.randn(3)
    xr = x.clone().requires_grad_()
    assert O._path((x,)) == O._DIRECT and O._path((x, 2, True)) == O._DIRECT
    assert O._path((torch.nn.Parameter(x, requires_grad=False),)) == O._DIRECT
    assert O._path((xr,)) == O._CUSTOM  # autograd records
    with torch.no_grad():
        assert O._path((xr,)) == O._DIRECT  # nothing to record
    assert O._path((torch.empty(3, device="meta"),)) == O._CUSTOM
    assert O._path((x.as_subclass(_Sub),)) == O._CUSTOM
    assert needs_custom_op(xr) and not needs_custom_op(x, 1.0)
    with fwAD.dual_level():
        assert O._path((x,)) == O._DIRECT  # a dual level alone needs nothing
        assert O._path((fwAD.make_dual(x, torch.ones_like(x)),)) == O._FUNCTION
    seen = []
    torch.func.grad(lambda t: (seen.append(O._path((t,))), t.sum())[1])(x)
    torch.vmap(lambda t: (seen.append(O._path((t,))), t)[1])(x[:, None])
    assert seen == [O._FUNCTION, O._FUNCTION]


def test_op_call_follows_path_and_runs_impl_once():
    op, calls = _ident_op()
    x = torch.randn(4, dtype=torch.float64)
    assert op.direct(x) and torch.equal(op(x), 2 * x) and calls["impl"] == 1
    xr = x.clone().requires_grad_()
    assert not op.direct(xr)
    (g,) = torch.autograd.grad(op(xr).sum(), xr)  # custom op with its backward
    assert torch.equal(g, torch.full_like(x, 2.0))
    with fwAD.dual_level():
        out = op(fwAD.make_dual(x, torch.ones_like(x)))  # autograd.Function with its jvp
        assert torch.equal(fwAD.unpack_dual(out).tangent, torch.full_like(x, 2.0))
    traced = torch.jit.trace(lambda t: op(t), (x,))  # tracing keeps the custom op in the graph
    assert "mpslinalg::_test_overhead_double" in str(traced.graph)


def test_own_path_rows_time_the_computation_they_name():
    # each row's peer is the computation its front door ends in: equal results on the same inputs
    # (both sides are deterministic CPU computations of the same implementation or LAPACK call)
    rows = overhead.ours_cases()
    assert rows and all(c.ours_always for c in rows)
    with routing.ours_always():
        for case in rows:
            ours, peer = case.ours(), case.peer()
            if isinstance(peer, tuple) and not isinstance(ours, tuple):
                peer = peer[0]  # the small family's (inverse, info) behind inv
            if isinstance(ours, tuple):
                ours, peer = ours[0], peer[0]
            assert torch.equal(ours, peer), case.name
