"""The public ops' fast path (``routing.torch_first``): outside the ``WHEN`` table a front door makes
one ``torch.linalg`` call before its Python checks (host overhead, issues 13 and 15).

The decision runs in one frame on every call (docs/ops/overhead.md), so these tests pin what its
shortcuts must keep: mpslinalg's errors for bad input, the same decision as the helpers it inlines,
exact counts across threads, the ``when="always"`` flag, and what ``torch.export`` records.
"""

from __future__ import annotations

import threading

import pytest
import torch

import mpslinalg
from mpslinalg import routing
from mpslinalg.kernels import use_backend
from mpslinalg.oplayer import table
from reference.metrics import unit_roundoff


def test_front_door_decisions_are_counted_exactly_across_threads(routing_table, monkeypatch):
    # the front doors count with one C call (itertools.count: table._doors), not a thread-local
    # dict: four threads' decisions sum exactly, and reset_decisions() zeroes them
    monkeypatch.setitem(routing.WHEN, "cpu", {"inv_ex": {torch.float32: ((3, 4, 1),)}})
    outside, inside, calls = torch.empty(9, 9), torch.empty(4, 4), 2000
    routing.reset_decisions()

    def work():
        for _ in range(calls):
            assert routing.torch_first("inv_ex", outside) is True
            assert routing.torch_is_faster("inv_ex", inside) is False

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert routing.decisions() == {"inv_ex": {"ours": 4 * calls, "torch": 4 * calls}}
    assert routing.torch_first("a new op", outside) is True  # an op never counted: its counters are made
    assert routing.decisions()["a new op"] == {"ours": 0, "torch": 1}
    routing.reset_decisions()
    assert routing.decisions() == {}


def test_export_records_what_the_front_door_runs(routing_table, monkeypatch):
    # outside the table a front door is one torch.linalg call: a non-strict torch.export runs the
    # Python for real and records torch's aten op; a strict export (Dynamo's trace) keeps the
    # declared op. Both compute the solve: forward error of a backward-stable LU solve against
    # torch's, 30 n u κ(A) relative (LAPACK's solve test ratio)
    monkeypatch.setitem(routing.WHEN, "cpu", {})
    A = torch.randn(4, 5, 5, dtype=torch.float64) + 5 * torch.eye(5, dtype=torch.float64)
    B = torch.randn(4, 5, 2, dtype=torch.float64)

    class Solve(torch.nn.Module):
        def forward(self, A, B):
            return mpslinalg.solve(A, B)

    for strict, op in ((False, "aten.linalg_solve"), (True, "mpslinalg.solve_ex")):
        ep = torch.export.export(Solve(), (A, B), strict=strict)
        targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
        assert any(t.startswith(op) for t in targets), (strict, targets)
        X, ref = ep.module()(A, B), torch.linalg.solve(A, B)
        bound = 30 * 5 * unit_roundoff(A.dtype) * torch.linalg.cond(A).amax() * ref.abs().amax()
        assert (X - ref).abs().amax() <= bound, strict


def test_when_always_flag_is_set_only_while_a_call_computes(routing_table, monkeypatch):
    # torch_first reads the thread-local "computing under when='always'" only while some thread is in
    # such a call (table._always_active): inside one the front doors run ours; after it, and after
    # one that raised, the count is back to 0 and the flag is off
    monkeypatch.setitem(routing.WHEN, "cpu", {})
    seen = []
    real = mpslinalg.inv_ex

    def spy(A, **kwargs):
        seen.append((table._always_active, routing.torch_first("inv_ex", A)))
        return real(A, **kwargs)

    monkeypatch.setattr(mpslinalg, "inv_ex", spy)
    A = torch.randn(2, 6, 6) + 6 * torch.eye(6)
    with mpslinalg.enabled(devices="cpu", when="always"):
        torch.linalg.inv(A)
        with pytest.raises(torch.linalg.LinAlgError):
            torch.linalg.inv(torch.zeros(6, 6))
    assert seen == [(1, False), (1, False)]
    assert table._always_active == 0 and table._local.ours is False
    assert routing.torch_first("inv_ex", A) is True


def test_fast_path_keeps_our_errors_and_torch_results(routing_table, monkeypatch):
    # outside the table a front door calls torch.linalg before its checks (routing.torch_first); bad
    # input still gets mpslinalg's error (the checks run when torch raises), good input torch's result
    from mpslinalg.oplayer import checks as E

    monkeypatch.setitem(routing.WHEN, "cpu", {})
    g = torch.Generator().manual_seed(2)
    A = torch.randn(4, 5, 5, generator=g) + 5 * torch.eye(5)
    B = torch.randn(4, 5, 2, generator=g)
    with pytest.raises(E.ShapeError, match="linalg.inv"):
        mpslinalg.inv(A[..., :4])                                    # not square
    with pytest.raises(E.DTypeError, match="linalg.solve"):
        mpslinalg.solve(A, B.double())                               # mixed dtypes
    with pytest.raises(ValueError, match="mode"):
        mpslinalg.qr(A, mode="full")
    with pytest.raises(TypeError, match="upper"):
        mpslinalg.solve_triangular(A, B, upper=1)
    for call in (lambda: mpslinalg.det([[1.0, 0.0], [0.0, 1.0]]), lambda: mpslinalg.inv(None),
                 lambda: mpslinalg.solve(A, [1.0, 2.0]), lambda: mpslinalg.lu_factor(3.0)):
        with pytest.raises(TypeError):  # not a tensor: mpslinalg's TypeError, as without the table
            call()
    S = A.clone()
    S[1, :, 0] = 0                                                   # batch element 1 singular
    with pytest.raises(torch.linalg.LinAlgError, match=r"linalg.solve.*\(Batch element 1\)|batch element 1"):
        mpslinalg.solve(S, B)
    assert torch.equal(mpslinalg.solve(A, B), torch.linalg.solve(A, B))
    assert torch.equal(mpslinalg.qr(A).R, torch.linalg.qr(A).R)
    T = A.triu()
    assert torch.equal(mpslinalg.solve_triangular(T, B, upper=True), torch.linalg.solve_triangular(T, B, upper=True))
    assert torch.equal(mpslinalg.lu_factor(A).LU, torch.linalg.lu_factor(A).LU)


def test_fast_path_decision_without_pre_tests(routing_table, monkeypatch):
    # routing.torch_first reads the argument without isinstance/dim() pre-tests (host overhead): a
    # non-tensor, a dtype mpslinalg does not take and a vector inside a table region are mpslinalg's
    # path; a vector outside every region goes to torch.linalg, which raises, then to the checks.
    # Every front door on the fast path still raises mpslinalg's error for each.
    from mpslinalg.oplayer import checks as E

    monkeypatch.setitem(routing.WHEN, "cpu", {"inv_ex": {torch.float32: ((1, 8, 1),)}})
    for bad in (None, 3.0, [[1.0]], torch.ones(3), torch.ones(()), torch.eye(3, dtype=torch.float16),
                torch.eye(3, dtype=torch.int64), torch.eye(3, dtype=torch.bool)):
        assert routing.torch_first("inv_ex", bad) is False
    assert routing.torch_first("inv_ex", torch.eye(3)) is False            # inside the region: ours
    assert routing.torch_first("inv_ex", torch.eye(9)) is True             # outside: torch.linalg
    assert routing.torch_first("solve", torch.ones(3)) is True             # no region: torch raises
    eye = torch.eye(5) * 3 + 1
    rhs = torch.ones(5, 2)
    piv = torch.arange(1, 6, dtype=torch.int32)
    doors = {"inv": lambda A: mpslinalg.inv(A), "inv_ex": lambda A: mpslinalg.inv_ex(A),
             "det": lambda A: mpslinalg.det(A), "slogdet": lambda A: mpslinalg.slogdet(A),
             "solve": lambda A: mpslinalg.solve(A, rhs.to(A.dtype)),
             "solve_ex": lambda A: mpslinalg.solve_ex(A, rhs.to(A.dtype)),
             "lu_factor": lambda A: mpslinalg.lu_factor(A), "lu": lambda A: mpslinalg.lu(A),
             "lu_solve": lambda A: mpslinalg.lu_solve(A, piv, rhs.to(A.dtype)),
             "qr": lambda A: mpslinalg.qr(A),
             "solve_triangular": lambda A: mpslinalg.solve_triangular(A, rhs.to(A.dtype), upper=True)}
    for name, door in doors.items():
        for dtype in (torch.float16, torch.bfloat16, torch.int64, torch.bool):
            with pytest.raises(E.DTypeError, match=f"{name}: expected (A|LU) to be a floating point or complex"):
                door(eye.to(dtype))
        for shape in ((5,), ()):
            with pytest.raises(E.ShapeError, match=f"{name}: (A|LU) must have at least 2 dimensions"):
                door(torch.ones(shape))


def test_fast_path_inline_copies_agree_with_their_originals(routing_table, monkeypatch):
    # torch_first inlines routing._inside's region test and requested_backend()'s common case (a frame
    # each costs 0.1-1 µs of host overhead in place, docs/ops/overhead.md): they must decide as the
    # originals do, for every shape against a table of several regions, and under every backend request
    from mpslinalg.kernels import backends

    regions = ((2, 4, 64), (9, 9, 1), (16, 32, 8))
    monkeypatch.setitem(routing.WHEN, "cpu", {"inv_ex": {torch.float32: regions}})
    for shape in ((3, 3), (100, 3, 3), (64, 4, 4), (9, 9), (2, 9, 9), (8, 16, 16), (7, 32, 16), (16, 5),
                  (40, 2), (0, 9, 9), (33, 33), (8, 33, 16)):
        A = torch.empty(shape)
        assert routing.torch_first("inv_ex", A) is (not table._inside(regions, A)), shape
    B = torch.empty(2, 12, 12)  # outside every region: torch.linalg unless a request sends it to our kernels
    for request in ("auto", "torch", "emulator"):
        with use_backend(request):
            assert routing.torch_first("inv_ex", B) is (backends.requested_backend() in ("auto", "torch")), request
    for env in ("", "torch", "EMULATOR", " auto "):
        monkeypatch.setenv(backends.ENV_VAR, env)
        assert routing.torch_first("inv_ex", B) is (backends.requested_backend() in ("auto", "torch")), env
    monkeypatch.setenv(backends.ENV_VAR, "nonsense")
    with pytest.raises(ValueError, match="unknown backend"):  # the original's validation, not a silent "auto"
        routing.torch_first("inv_ex", B)
