"""Drop-in routing (``mpslinalg.enable``/``disable``/``enabled``, issue 13): the public contract.

An unmodified camera-geometry library (``examples/support/posekit.py``: ``torch.linalg.inv``,
``Tensor.inverse``, ``torch.inverse``, ``torch.det``, ``lu_factor_ex`` + ``lu_solve`` of 9x9 DLT
systems, ``solve`` of 8x8-15x15 normal equations, ``logdet``) runs with routing on for the CPU;
:func:`mpslinalg.routing.stats` proves mpslinalg's ops ran, results equal torch's within derived
bounds, gradients flow through our derivatives, and ``disable`` restores torch's kernels.

Bounds (derived, never tuned; ``u`` = 2^-24 for float32, 2^-53 for float64; LAPACK's test ratios
are below 30 for both torch and us, ``TESTING/ctest.in``):

* **inverse** (1-norm): xGET03 ``‖I − XA‖₁/(n‖A‖₁‖X‖₁u) < 30`` gives
  ``‖X − A⁻¹‖₁ ≤ ‖XA − I‖₁‖A⁻¹‖₁ ≤ 30 n κ₁ u ‖X‖₁``; two such results differ by ``60 n κ₁ u ‖X‖₁``.
  A product with ``M`` afterwards (``T_a⁻¹ T_b``, ``K⁻¹ p``) scales it by ``‖M‖₁`` and adds the
  product's own rounding, ``≤ 2 n u ‖X‖₁‖M‖₁`` for the two: ``INV_C = 62 n κ₁`` (κ₁ ≥ 1).
* **solutions** (2-norm): xGET02 ``‖b − Ax‖/(‖A‖‖x‖u) < 30`` gives ``‖x − x*‖ ≤ 30 κ u ‖x‖``; two
  differ by ``60 κ u ‖x‖``; the Frobenius norm over the (≤ n) columns adds ``√n``:
  ``SOLVE_C = 60 √n κ``. Forming the right-hand side ``-Jᵀr`` is the same code on both paths.
* **determinants**: a backward error ``‖ΔA‖ ≤ 30 n u ‖A‖`` (xGET01) moves ``det`` by at most
  ``n κ · 30 n u`` relative (``d det/det = tr(A⁻¹dA)``); two results: ``DET_C = 60 n² κ``, also the
  bound of the absolute difference of ``logdet``.
* **gradients** (float64): a first-order bound for two backward-stable backward passes, each a few
  solves with ``A`` or ``Aᴴ``: ``GRAD_C = 60 √n κ²`` relative (as ``tests/parity/common.py``).
"""

from __future__ import annotations

import contextlib
import math
import os
import pathlib
import re
import sys
import threading

import pytest
import torch
from helpers import adjugate

import mpslinalg
from mpslinalg import routing
from mpslinalg.kernels import loader, set_compiler, use_backend

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
from support import posekit  # noqa: E402  (examples/ is not a package; support/ is)

DTYPES = [torch.float32, torch.float64]


def _u(dtype: torch.dtype) -> float:
    return 2.0**-24 if dtype in (torch.float32, torch.complex64) else 2.0**-53


@pytest.fixture(autouse=True)
def _routing_off():
    """Every test starts and ends with routing off and zero counters."""
    routing.disable()
    routing.reset_stats()
    yield
    routing.disable()
    routing.reset_stats()


def _paths() -> dict:
    """``stats()`` without the ``internal`` counts (those depend on how an op is implemented)."""
    return {op: (c["ours"], c["torch"]) for op, c in routing.stats().items() if c["ours"] or c["torch"]}


def _kappa1(A: torch.Tensor) -> torch.Tensor:
    A = A.double()
    return torch.linalg.matrix_norm(A, ord=1) * torch.linalg.matrix_norm(torch.linalg.inv(A), ord=1)


def _kappa2(A: torch.Tensor) -> torch.Tensor:
    return torch.linalg.cond(A.double())


def _norm1(X: torch.Tensor) -> torch.Tensor:
    return torch.linalg.matrix_norm(X.double(), ord=1)


def _camera_inputs(dtype: torch.dtype, batch: int = 32, seed: int = 0) -> dict:
    """Inputs of the pipeline (built with routing off)."""
    g = torch.Generator().manual_seed(seed)
    K = torch.zeros(batch, 3, 3, dtype=torch.float64)
    K[:, 0, 0] = 500 + 100 * torch.rand(batch, generator=g, dtype=torch.float64)
    K[:, 1, 1] = K[:, 0, 0]
    K[:, :2, 2] = 320 + 10 * torch.randn(batch, 2, generator=g, dtype=torch.float64)
    K[:, 2, 2] = 1
    src = torch.rand(batch, 4, 2, generator=g, dtype=torch.float64) * 2 - 1
    dst = src + 0.1 * torch.randn(batch, 4, 2, generator=g, dtype=torch.float64)
    jac = {p: torch.randn(batch, 2 * p, p, generator=g, dtype=torch.float64) for p in (8, 11, 15)}
    res = {p: torch.randn(batch, 2 * p, 1, generator=g, dtype=torch.float64) for p in (8, 11, 15)}
    L = torch.randn(batch, 6, 6, generator=g, dtype=torch.float64)
    cov = L @ L.mT + 6 * torch.eye(6, dtype=torch.float64)
    data = {
        "T_a": posekit.random_poses(batch, dtype=torch.float64, generator=g),
        "T_b": posekit.random_poses(batch, dtype=torch.float64, generator=g),
        "K": K, "pixels": 640 * torch.rand(batch, 16, 2, generator=g, dtype=torch.float64),
        "src": src, "dst": dst, "J": jac, "r": res, "cov": cov,
        "resid": torch.randn(batch, 6, generator=g, dtype=torch.float64),
    }
    return {k: ({p: t.to(dtype) for p, t in v.items()} if isinstance(v, dict) else v.to(dtype))
            for k, v in data.items()}


def _run_pipeline(d: dict) -> dict:
    """The user's code: posekit calls only."""
    H, info = posekit.homography_dlt(d["src"], d["dst"])
    return {
        "inv": posekit.invert_poses(d["T_a"]),
        "rel": posekit.relative_pose(d["T_a"], d["T_b"]),
        "rays": posekit.unproject(d["K"], d["pixels"]),
        "right": posekit.is_right_handed(d["T_a"][:, :3, :3]),
        "H": H, "info": info,
        "steps": {p: posekit.damped_normal_step(d["J"][p], d["r"][p]) for p in d["J"]},
        "loglik": posekit.pose_log_likelihood(d["cov"], d["resid"]),
    }


def _check_close(ours: dict, ref: dict, d: dict, dtype: torch.dtype) -> None:
    """Every output of the routed run against torch's, with the bounds of the module docstring."""
    u = _u(dtype)
    T_a = d["T_a"]
    k1 = _kappa1(T_a)
    diff = _norm1(ours["inv"] - ref["inv"])
    assert (diff <= 62 * 4 * k1 * u * _norm1(ref["inv"])).all(), "inverse of 4x4 poses"
    diff = _norm1(ours["rel"] - ref["rel"])
    assert (diff <= 62 * 4 * k1 * u * _norm1(ref["inv"]) * _norm1(d["T_b"])).all(), "T_a^-1 T_b"
    # rays = (K^-1 p) per point: the 1-norm of a column is bounded by the matrix 1-norm times ‖p‖₁
    kK = _kappa1(d["K"])
    p1 = (d["pixels"].double().abs().sum(-1) + 1).amax(-1)
    diff = (ours["rays"] - ref["rays"]).double().abs().sum(-1).amax(-1)
    assert (diff <= 62 * 3 * kK * u * _norm1(torch.inverse(d["K"].double())) * p1).all(), "unproject"
    assert torch.equal(ours["right"], ref["right"]) and ours["right"].all()
    # DLT: 9x9 solves (the vector h reshaped to 3x3)
    A, _ = posekit.dlt_system(d["src"], d["dst"])
    k2 = _kappa2(A)
    h_ours, h_ref = ours["H"].flatten(-2).double(), ref["H"].flatten(-2).double()
    assert torch.equal(ours["info"], ref["info"]) and (ours["info"] == 0).all()
    assert ((h_ours - h_ref).norm(dim=-1) <= 60 * k2 * u * h_ref.norm(dim=-1)).all(), "DLT lu_solve"
    for p, s in ours["steps"].items():
        J = d["J"][p].double()
        k2 = _kappa2(J.mT @ J + 1e-3 * torch.eye(p, dtype=torch.float64))
        s_ref = ref["steps"][p].double()
        bound = 60 * math.sqrt(p) * k2 * u * s_ref.flatten(-2).norm(dim=-1)
        assert ((s.double() - s_ref).flatten(-2).norm(dim=-1) <= bound).all(), f"solve {p}x{p}"
    # log-likelihood: logdet (absolute, DET_C) + a solve with the covariance (SOLVE_C relative, times
    # the residual norm for the quadratic form)
    # loglik = -(rᵀx + logdet + c)/2 with x = cov⁻¹r: |Δ rᵀx| ≤ ‖r‖ 60 κ u ‖x‖; the final sum's
    # rounding is ≤ 3u (|rᵀx| + |logdet| + |c|)
    kc = _kappa2(d["cov"])
    resid, cov = d["resid"].double(), d["cov"].double()
    x = torch.linalg.solve(cov, resid.unsqueeze(-1)).squeeze(-1)
    terms = (resid * x).sum(-1).abs() + torch.logdet(cov).abs() + 6 * math.log(2 * math.pi)
    bound = 0.5 * (60 * 36 * kc * u + 60 * kc * u * resid.norm(dim=-1) * x.norm(dim=-1)) + 3 * u * terms
    assert ((ours["loglik"].double() - ref["loglik"].double()).abs() <= bound).all(), "logdet + solve"


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_camera_library_runs_our_ops(dtype):
    d = _camera_inputs(dtype)
    ref = _run_pipeline(d)
    assert routing.stats() == {}  # routing off: nothing counted
    mpslinalg.enable(devices=("cpu",), when="always")
    ours = _run_pipeline(d)
    s = routing.stats()
    # inv: invert_poses, relative_pose (Tensor.inverse), unproject (torch.inverse) -> linalg_inv_ex
    assert s["inv_ex"]["ours"] == 3
    assert s["det"]["ours"] == 1                    # torch.det
    assert s["lu_factor_ex"]["ours"] == 1           # homography_dlt
    assert s["lu_solve"]["ours"] == 1
    assert s["solve"]["ours"] == 3 + 1              # damped steps p = 8, 11, 15; the log-likelihood
    assert s["slogdet"]["ours"] == 1                # torch.logdet decomposes into linalg_slogdet
    assert all(c["torch"] == 0 for c in s.values()), s
    mpslinalg.disable()
    _check_close(ours, ref, d, dtype)


def test_disable_restores_torch_kernels():
    ops = routing.ROUTES
    before = {r.aten: repr(torch.library.get_kernel(f"aten::{r.aten}", "AutogradCPU")) for r in ops}
    mpslinalg.enable(devices=("cpu",), when="always")
    during = {r.aten: repr(torch.library.get_kernel(f"aten::{r.aten}", "AutogradCPU")) for r in ops}
    routed = {r.aten for r in ops if r.name in routing.routed_ops()}
    assert {a for a in before if before[a] != during[a]} == routed
    mpslinalg.disable()
    assert before == {r.aten: repr(torch.library.get_kernel(f"aten::{r.aten}", "AutogradCPU")) for r in ops}
    A = torch.randn(8, 4, 4)
    torch.linalg.inv(A), torch.det(A), torch.linalg.solve(A, A)
    assert routing.stats() == {}
    assert torch.linalg.inv(A).grad_fn is None


def test_enabled_context_restores_previous_routing():
    A = torch.randn(5, 3, 3, dtype=torch.float64)
    with mpslinalg.enabled(devices="cpu", ops=("det",), when="always"):
        torch.det(A)
        torch.linalg.inv(A)                          # not among ops: torch's kernel, never seen
        with mpslinalg.enabled(devices="cpu", ops=("inv_ex",), when="always"):
            torch.linalg.inv(A)
            torch.det(A)
        torch.det(A)                                 # the outer routing is back
    torch.det(A)                                     # and gone
    assert _paths() == {"det": (2, 0), "inv_ex": (1, 0)}


def test_internal_calls_do_not_recurse():
    # on the torch backend a 64x64 inverse calls torch.linalg itself (the LAPACK leaf: today
    # torch.linalg.inv_ex, the very op being routed): those are internal calls, handed to torch's
    # kernel, not routed again
    A = torch.randn(3, 64, 64, dtype=torch.float64) + 64 * torch.eye(64, dtype=torch.float64)
    with use_backend("torch"), mpslinalg.enabled(devices="cpu", when="always"):
        X = torch.linalg.inv(A)
    s = routing.stats()
    assert _paths() == {"inv_ex": (1, 0)}
    assert sum(c["internal"] for c in s.values()) >= 1
    k1 = _kappa1(A)
    assert (_norm1(X - torch.linalg.inv(A)) <= 60 * 64 * k1 * _u(A.dtype) * _norm1(X)).all()


def _grad(f, *inputs):
    xs = [x.detach().clone().requires_grad_() for x in inputs]
    out = f(*xs)
    return out, torch.autograd.grad(out, xs)


def test_gradients_flow_through_our_derivatives():
    g = torch.Generator().manual_seed(3)
    T = posekit.random_poses(6, dtype=torch.float64, generator=g)
    W = torch.randn(6, 4, 4, generator=g, dtype=torch.float64)
    J = torch.randn(6, 20, 10, generator=g, dtype=torch.float64)
    A = J.mT @ J + torch.eye(10, dtype=torch.float64)
    B = torch.randn(6, 10, 2, generator=g, dtype=torch.float64)

    def loss_inv(T):
        return (posekit.invert_poses(T) * W).sum()

    def loss_solve(A, B):
        return (torch.linalg.solve(A, B) ** 2).sum()

    def loss_det(A):
        return torch.det(A).sum()

    cases = [(loss_inv, (T,), 4, _kappa2(T)), (loss_solve, (A, B), 10, _kappa2(A)),
             (loss_det, (T,), 4, _kappa2(T))]
    refs = [_grad(f, *x) for f, x, _, _ in cases]
    with mpslinalg.enabled(devices="cpu", when="always"):
        T_ = T.clone().requires_grad_()
        assert "mpslinalg" in type(torch.linalg.inv(T_).grad_fn).__name__  # our backward recorded
        outs = [_grad(f, *x) for f, x, _, _ in cases]
    for (f, _x, n, kappa), (_, g_ref), (_, g_ours) in zip(cases, refs, outs):
        for a, b in zip(g_ours, g_ref):
            bound = 60 * math.sqrt(n) * kappa.amax() ** 2 * _u(torch.float64) * b.norm()
            assert (a - b).norm() <= bound, f.__name__
    assert routing.stats()["solve"]["ours"] == 1 and routing.stats()["det"]["ours"] == 1


def test_singular_det_gradient_is_the_adjugate():
    # det of a rank-2 3x3 matrix: the gradient is the cofactor matrix (torch.linalg.det returns ~0
    # there). Bound: the SVD-based adjugate of a backward-stable SVD (‖ΔA‖ ≤ 30 n u ‖A‖) moves the
    # null vectors by ‖ΔA‖/σ₂: 60 n² u (σ₁/σ₂) ‖C‖_F.
    A = torch.tensor([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=torch.float64)
    C = adjugate(A).mT  # the cofactor matrix
    s = torch.linalg.svdvals(A)
    with mpslinalg.enabled(devices="cpu", when="always"):
        _, (G,) = _grad(torch.det, A)
    assert routing.stats()["det"]["ours"] == 1
    assert (G - C).norm() <= 60 * 9 * _u(A.dtype) * (s[0] / s[1]) * C.norm()


def test_two_threads():
    d = _camera_inputs(torch.float32, batch=8, seed=5)
    mpslinalg.enable(devices=("cpu",), when="always")
    expected = _run_pipeline(d)
    routing.reset_stats()
    rounds, errors, results = 10, [], []

    def work():
        try:
            for _ in range(rounds):
                results.append(_run_pipeline(d))
        except BaseException as exc:  # noqa: BLE001  (reported by the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    mpslinalg.disable()
    assert not errors, errors
    s = routing.stats()
    assert len(results) == 2 * rounds
    for r in results:
        _check_close(r, expected, d, torch.float32)
    # every pipeline call ran ours: the internal-call flag of one thread never leaked into the other
    # (a leaked flag hands a user call to torch, counted as "internal")
    assert s["inv_ex"]["ours"] == 2 * rounds * 3
    assert s["solve"]["ours"] == 2 * rounds * 4
    assert s["lu_factor_ex"]["ours"] == 2 * rounds and s["det"]["ours"] == 2 * rounds


def test_compile_after_a_non_strict_export_still_traces_our_ops():
    # torch's Python dispatcher (on while Dynamo and torch.export trace) caches an op's kernel per
    # dispatch key: a non-strict export of torch.linalg.solve before enable() cached torch's
    # AutogradCPU kernel, and a later compile under enable(when="always") traced aten's solve
    # (routing._clear_dispatch_caches); after disable() the cache must not keep our kernel either
    from torch._dynamo.backends.common import aot_autograd

    class Solve(torch.nn.Module):
        def forward(self, A, B):
            return torch.linalg.solve(A, B)

    A = torch.randn(4, 9, 9, generator=torch.Generator().manual_seed(2)) + 9 * torch.eye(9)
    B = torch.randn(4, 9, 2, generator=torch.Generator().manual_seed(3))
    torch.export.export(Solve(), (A, B), strict=False)
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(str(gm.graph))
        return gm

    for routed in (True, False):
        torch._dynamo.reset()
        with mpslinalg.enabled(devices="cpu", when="always") if routed else contextlib.nullcontext():
            torch.compile(Solve(), backend=aot_autograd(fw_compiler=capture), fullgraph=True)(A, B)
        torch.export.export(Solve(), (A, B), strict=False)  # the cache filled again, routing on or off
        ours = "mpslinalg.solve_ex" in graphs[-1]
        assert ours is routed, (routed, graphs[-1])
    torch._dynamo.reset()


def test_torch_compile_traces_our_ops():
    from torch._dynamo.backends.common import aot_autograd

    graphs = []

    def capture(gm, example_inputs):
        graphs.append(str(gm.graph))
        return gm

    def f(T, A, B):
        return torch.linalg.inv(T) @ T, torch.linalg.solve(A, B), torch.det(A)

    g = torch.Generator().manual_seed(1)
    T = posekit.random_poses(4, generator=g)
    A = torch.randn(4, 9, 9, generator=g) + 9 * torch.eye(9)
    B = torch.randn(4, 9, 2, generator=g)
    ref = f(T, A, B)
    torch._dynamo.reset()
    with mpslinalg.enabled(devices="cpu", when="always"):
        out = torch.compile(f, backend=aot_autograd(fw_compiler=capture), fullgraph=True)(T, A, B)
    torch._dynamo.reset()
    # the graph computes with our custom ops (the small family's inverse for 4x4), not torch's kernels
    ops = set(re.findall(r"torch\.ops\.(\w+)\.(\w+)\.default", graphs[-1]))
    assert {("mpslinalg", "small_inv_ex"), ("mpslinalg", "solve_ex"), ("mpslinalg", "det")} <= ops, ops
    assert not {name for ns, name in ops if ns == "aten" and ("inv" in name or "solve" in name or "det" in name)}
    u = _u(torch.float32)
    # xGET03 and the product's rounding: ‖XT − I‖₁ ≤ (30 + 1) n u ‖X‖₁‖T‖₁
    assert (_norm1(out[0] - torch.eye(4)) <= 31 * 4 * u * _norm1(torch.inverse(T)) * _norm1(T)).all()
    k2 = _kappa2(A)
    assert ((out[1] - ref[1]).flatten(-2).norm(dim=-1) <= 60 * 3 * k2 * u * ref[1].flatten(-2).norm(dim=-1)).all()
    assert ((out[2] - ref[2]).abs() <= 60 * 81 * k2 * u * ref[2].abs()).all()


def test_torch_func_transforms():
    # the transform's level is handed to torch (its derivative formula; our autograd.Function cannot
    # be entered from the dispatcher's autograd key); the plain tensors beneath it may run ours
    A = torch.randn(3, 4, 4, dtype=torch.float64) + 4 * torch.eye(4, dtype=torch.float64)

    def f(a):
        return torch.linalg.inv(a).sum()

    ref = torch.func.grad(f)(A)
    ref_vmap = torch.func.vmap(torch.linalg.det)(A)
    with mpslinalg.enabled(devices="cpu", when="always"):
        got = torch.func.grad(f)(A)
        got_vmap = torch.func.vmap(torch.linalg.det)(A)
    s = routing.stats()
    assert s["inv_ex"]["torch"] >= 1  # (vmap of det batches torch's kernels below the autograd key)
    kappa = _kappa2(A).amax()
    assert (got - ref).norm() <= 60 * 2 * kappa**2 * _u(A.dtype) * ref.norm()   # GRAD_C, n = 4
    assert ((got_vmap - ref_vmap).abs() <= 60 * 16 * _kappa2(A) * _u(A.dtype) * ref_vmap.abs()).all()


def _error(f) -> str:
    with pytest.raises(RuntimeError) as info:
        f()
    return str(info.value)


def test_arguments_we_do_not_implement_stay_with_torch():
    # unpivoted LU (mpslinalg pivots) and integer input: torch's kernel runs and raises its own error
    A = torch.randn(3, 5, 5)
    calls = [lambda: torch.linalg.lu_factor_ex(A, pivot=False),
             lambda: torch.linalg.inv(torch.ones(3, 3, dtype=torch.int64))]
    expected = [_error(f) for f in calls]
    with mpslinalg.enabled(devices="cpu", when="always"):
        got = [_error(f) for f in calls]
    assert got == expected
    assert _paths() == {"lu_factor_ex": (0, 1), "inv_ex": (0, 1)}


def test_when_faster_follows_the_table(monkeypatch):
    table = {"inv_ex": {torch.float32: ((3, 4, 100),)}}
    monkeypatch.setitem(routing.WHEN, "cpu", table)
    cholesky_kernel = repr(torch.library.get_kernel("aten::linalg_cholesky_ex", "AutogradCPU"))
    with mpslinalg.enabled(devices="cpu"):
        torch.linalg.inv(torch.randn(100, 4, 4))                     # in the region: ours
        torch.linalg.inv(torch.randn(99, 4, 4))                      # batch below: torch
        torch.linalg.inv(torch.randn(100, 5, 5))                     # size outside: torch
        torch.linalg.inv(torch.randn(100, 4, 4, dtype=torch.float64))  # dtype not measured: torch
        torch.det(torch.randn(100, 4, 4))                            # op not in the table: torch
        torch.slogdet(torch.randn(100, 4, 4))
        # an op that is never faster is not even registered (no per-call cost; the LU family's are
        # on the CPU, where torch's batched getrf races: lu/torch_cpu.py) ...
        assert repr(torch.library.get_kernel("aten::linalg_cholesky_ex", "AutogradCPU")) == cholesky_kernel
        # ... except det, whose derivative is ours wherever autograd records (the adjugate)
        torch.det(torch.randn(100, 4, 4, requires_grad=True))
    assert _paths() == {"inv_ex": (1, 3), "det": (1, 1), "slogdet": (0, 1)}  # slogdet: seen, to torch


def test_bad_arguments():
    with pytest.raises(ValueError, match="devices"):
        mpslinalg.enable(devices=("tpu",))
    with pytest.raises(ValueError, match="ops"):
        mpslinalg.enable(devices="cpu", ops=("not_an_op",))
    with pytest.raises(ValueError, match="when"):
        mpslinalg.enable(devices="cpu", when="sometimes")
    assert routing._libraries == []  # nothing left registered by a failed enable


@pytest.mark.parametrize("name, call, expect", [
    ("qr", lambda A: torch.linalg.qr(A, mode="complete"), ((), {"mode": "complete"})),
    ("svd", lambda A: torch.linalg.svd(A, full_matrices=False), ((), {"full_matrices": False})),
    ("svdvals", lambda A: torch.linalg.svdvals(A), ((), {})),
    ("pinv", lambda A: torch.linalg.pinv(A, hermitian=False), ((), {"atol": None, "rtol": None,
                                                                   "hermitian": False})),
])
def test_route_argument_mapping(monkeypatch, name, call, expect):
    """The argument mapping of a route: a stand-in for ``mpslinalg.<op>`` records what it is given
    and returns torch's result (its torch call is internal, not routed again)."""
    seen = []
    torch_op = getattr(torch.linalg, name)

    def stand_in(A, *args, **kwargs):
        seen.append((args, kwargs))
        return torch_op(A, *args, **kwargs)

    monkeypatch.setattr(mpslinalg, name, stand_in, raising=False)
    A = torch.randn(2, 4, 4, dtype=torch.float64)
    ref = call(A)
    with mpslinalg.enabled(devices="cpu", ops=(name,), when="always"):
        out = call(A)
    assert seen == [expect]
    assert routing.stats()[name]["ours"] == 1
    for a, b in zip(out if isinstance(out, tuple) else (out,), ref if isinstance(ref, tuple) else (ref,)):
        assert torch.equal(a, b)


def test_emulator_backend_runs_our_metal_kernels():
    from helpers import require_emulator

    require_emulator()
    launches = []
    previous = loader._compilers["cpu"]

    class Counting:
        def __init__(self, lib):
            self._lib = lib

        def __getattr__(self, kernel):
            fn = getattr(self._lib, kernel)

            def launch(*args, **kwargs):
                launches.append(kernel)
                return fn(*args, **kwargs)

            return launch

    set_compiler("cpu", lambda source: Counting(previous(source)))
    try:
        d = _camera_inputs(torch.float32, batch=8, seed=7)
        ref = _run_pipeline(d)
        with use_backend("emulator"), mpslinalg.enabled(devices="cpu", when="always"):
            ours = _run_pipeline(d)
    finally:
        set_compiler("cpu", previous)
    s = routing.stats()
    assert s["inv_ex"]["ours"] == 3 and s["lu_factor_ex"]["ours"] == 1 and s["solve"]["ours"] == 4
    assert any(k.startswith("small_") for k in launches), launches   # 3x3/4x4 inverse, det
    assert any(k.startswith("lu_") for k in launches), launches      # 9x9 LU, 8..15 solves
    _check_close(ours, ref, d, torch.float32)


@pytest.mark.mps
def test_camera_library_on_mps():
    d = _camera_inputs(torch.float32)
    d_mps = {k: ({p: t.to("mps") for p, t in v.items()} if isinstance(v, dict) else v.to("mps"))
             for k, v in d.items()}
    ref = _run_pipeline(d)
    with mpslinalg.enabled(devices=("mps",), when="always"):
        ours = _run_pipeline(d_mps)
    s = routing.stats()
    assert s["inv_ex"]["ours"] == 3 and s["lu_factor_ex"]["ours"] == 1 and s["solve"]["ours"] == 4
    ours = {k: ({p: t.cpu() for p, t in v.items()} if isinstance(v, dict) else v.cpu()) for k, v in ours.items()}
    _check_close(ours, ref, d, torch.float32)


def test_dropin_example_script():
    """``examples/dropin_camera.py``, the few lines a user writes, runs and reports our ops."""
    import subprocess

    script = pathlib.Path(__file__).resolve().parents[1] / "examples" / "dropin_camera.py"
    root = str(script.parents[1])  # the checkout's package, however (or whether) it is installed
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("calls that ran mpslinalg:"))
    for op in ("inv_ex", "lu_factor_ex", "lu_solve", "solve"):
        assert f"'{op}': 1" in line, line
    assert "degenerate DLT samples: 0" in done.stdout


# --------------------------------------------------------------------------------------------------
# The same table at the public ops' front doors (routing.torch_is_faster)
# --------------------------------------------------------------------------------------------------


def _graph_has_ours(t: torch.Tensor) -> bool:
    """Whether the autograd graph that produced ``t`` contains one of mpslinalg's backward nodes."""
    seen, todo = set(), [t.grad_fn]
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if "mpslinalg" in type(fn).__name__:
            return True
        todo.extend(f for f, _ in fn.next_functions)
    return False


def _front_door_cases():
    """``(WHEN key, call)``: every front door that reads the table, on a float32 batch ``A`` of 3 6x6
    matrices (inside no default CPU region) with a right-hand side ``B``."""
    g = torch.Generator().manual_seed(5)
    B = torch.randn(1, 6, 2, generator=g)  # broadcasts with every batch of A
    LU, piv = torch.linalg.lu_factor(torch.randn(1, 6, 6, generator=g) + 6 * torch.eye(6))
    return [
        ("inv_ex", lambda A: mpslinalg.inv(A)),
        ("inv_ex", lambda A: mpslinalg.inv_ex(A)[0]),
        ("slogdet", lambda A: mpslinalg.slogdet(A)[1]),
        ("solve", lambda A: mpslinalg.solve(A, B)),
        ("solve_ex", lambda A: mpslinalg.solve_ex(A, B)[0]),
        ("lu_factor_ex", lambda A: mpslinalg.lu_factor(A)[0]),
        ("lu_factor_ex", lambda A: mpslinalg.lu_factor_ex(A)[0]),
        ("lu", lambda A: mpslinalg.lu(A)[2]),
        ("lu_solve", lambda A: mpslinalg.lu_solve(A * 0 + LU, piv.expand(len(A), 6), B)),  # A's graph, LU's values
        ("solve_triangular", lambda A: mpslinalg.solve_triangular(A, B, upper=True)),
        ("qr", lambda A: mpslinalg.qr(A)[1]),
    ]


@pytest.mark.parametrize("case", range(len(_front_door_cases())),
                         ids=[f"{k}-{i}" for i, (k, _) in enumerate(_front_door_cases())])
def test_front_doors_follow_the_table(routing_table, monkeypatch, case):
    key, call = _front_door_cases()[case]
    g = torch.Generator().manual_seed(case)
    A0 = torch.randn(3, 6, 6, generator=g) + 6 * torch.eye(6)

    def run(batch: int) -> tuple[bool, dict]:
        A = A0[:batch].clone().requires_grad_()
        routing.reset_decisions()
        out = call(A)
        return _graph_has_ours(out), routing.decisions()

    # outside the table: one torch.linalg call with torch's derivative (no mpslinalg node)
    monkeypatch.setitem(routing.WHEN, "cpu", {})
    assert run(3) == (False, {key: {"ours": 0, "torch": 1}})
    # inside a region: mpslinalg's op and derivative; below its batch_min: torch again
    monkeypatch.setitem(routing.WHEN, "cpu", {key: {torch.float32: ((6, 6, 3),)}})
    assert run(3) == (True, {key: {"ours": 1, "torch": 0}})
    assert run(2) == (False, {key: {"ours": 0, "torch": 1}})
    # another dtype is not in the region
    monkeypatch.setitem(routing.WHEN, "cpu", {key: {torch.complex64: ((6, 6, 1),)}})
    assert run(3)[0] is False
    # ours_always: our implementation whatever the table says, and no decision is taken
    monkeypatch.setitem(routing.WHEN, "cpu", {})
    with routing.ours_always():
        assert run(3) == (True, {})


def test_front_door_outside_the_table_is_torch_linalg_exactly(routing_table, monkeypatch):
    # no grad: the result is torch.linalg's, bit for bit (the same call), for a size the default
    # table leaves to torch (9x9 RANSAC solves) and for one it gives to us nowhere (float64)
    g = torch.Generator().manual_seed(0)
    A = torch.randn(256, 9, 9, generator=g) + 9 * torch.eye(9)
    b = torch.randn(256, 9, 1, generator=g)
    assert torch.equal(mpslinalg.solve(A, b), torch.linalg.solve(A, b))
    assert torch.equal(mpslinalg.inv(A.double()), torch.linalg.inv(A.double()))
    assert routing.decisions()["solve"]["torch"] >= 1 and routing.decisions()["inv_ex"]["torch"] >= 1


def test_det_keeps_our_derivative_outside_the_table(routing_table, monkeypatch):
    # det's gradient at a singular matrix is the adjugate (torch.linalg.det's is not): with autograd
    # recording, det runs our op even where the table gives the forward to torch.linalg, and takes
    # no table decision; without autograd it is torch.linalg's call. Bound as in
    # test_singular_det_gradient_is_the_adjugate.
    monkeypatch.setitem(routing.WHEN, "cpu", {})
    A = torch.tensor([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=torch.float64)
    C = adjugate(A).mT  # the cofactor matrix
    s = torch.linalg.svdvals(A)
    X = A.clone().requires_grad_()
    routing.reset_decisions()
    d = mpslinalg.det(X)
    assert _graph_has_ours(d) and routing.decisions() == {}
    (G,) = torch.autograd.grad(d, X)
    assert (G - C).norm() <= 60 * 9 * _u(A.dtype) * (s[0] / s[1]) * C.norm()
    assert torch.equal(mpslinalg.det(A), torch.linalg.det(A))
    assert routing.decisions() == {"det": {"ours": 0, "torch": 1}}


def test_small_sizes_route_by_the_table(routing_table, monkeypatch):
    # n <= 4 goes to the small family inside a region, to torch.linalg outside it (counted calls)
    import importlib

    lu_api = importlib.import_module("mpslinalg.lu.api")  # mpslinalg.lu is also a function

    calls = {"small": 0}
    small_inv = lu_api.small.inv_ex_op

    def counted(A):
        calls["small"] += 1
        return small_inv(A)

    monkeypatch.setattr(lu_api.small, "inv_ex_op", counted)
    monkeypatch.setitem(routing.WHEN, "cpu", {"inv_ex": {torch.float32: ((3, 4, 100),)}})
    g = torch.Generator().manual_seed(1)
    A = torch.randn(100, 4, 4, generator=g) + 4 * torch.eye(4)
    mpslinalg.inv(A)
    assert calls["small"] == 1
    mpslinalg.inv(A[:99])      # batch below the region
    mpslinalg.inv(A[:, :2, :2])  # order below it
    assert calls["small"] == 1
    assert routing.decisions()["inv_ex"] == {"ours": 1, "torch": 2}


def test_kernel_backends_never_consult_the_table(routing_table, monkeypatch):
    # on the emulator (and metal) backend our kernels run at every size: no table decision
    from helpers import require_emulator

    require_emulator()
    monkeypatch.setitem(routing.WHEN, "cpu", {})
    A = torch.randn(2, 6, 6) + 6 * torch.eye(6)
    routing.reset_decisions()
    with use_backend("emulator"):
        X = mpslinalg.inv(A)
    assert routing.decisions() == {}
    assert ((X @ A - torch.eye(6)).abs().max() <= 30 * 6 * _u(A.dtype) * _norm1(A).amax() * _norm1(X).amax())


def test_when_always_runs_our_implementation_at_every_size(routing_table, monkeypatch):
    # enable(when="always") routes the call to mpslinalg and mpslinalg's implementation runs (the
    # front doors skip the table while computing it), even where the table says torch is faster
    monkeypatch.setitem(routing.WHEN, "cpu", {})
    A = (torch.randn(3, 6, 6) + 6 * torch.eye(6)).requires_grad_()
    routing.reset_decisions()
    with mpslinalg.enabled(devices="cpu", when="always"):
        X = torch.linalg.inv(A)
    assert _graph_has_ours(X) and routing.decisions() == {}
    assert routing.stats()["inv_ex"]["ours"] == 1


def test_dropin_det_gradient_is_ours_outside_the_table(monkeypatch):
    # enable() with a table that routes no det: a det that autograd records still runs ours, so the
    # gradient at a singular matrix is the adjugate (torch.linalg.det's is zero); bound as in
    # test_singular_det_gradient_is_the_adjugate
    monkeypatch.setitem(routing.WHEN, "cpu", {})
    A = torch.tensor([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=torch.float64)
    C = torch.tensor([[-3.0, 6, -3], [6, -12, 6], [-3, 6, -3]], dtype=torch.float64)  # cofactors
    s = torch.linalg.svdvals(A)
    with mpslinalg.enabled(devices="cpu"):
        _, (G,) = _grad(torch.det, A)
        torch.det(A)  # no autograd: torch's
    assert _paths() == {"det": (1, 1)}
    assert (G - C).norm() <= 60 * 9 * _u(A.dtype) * (s[0] / s[1]) * C.norm()
