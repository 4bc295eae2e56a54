"""Benchmark: the LU family against ``torch.linalg`` in the same run (issue 5).

Workloads and the issue's targets (H200, torch.linalg timed in the same run):

=================================================  ==========================================
case                                               target on the H200
=================================================  ==========================================
lu_factor complex64 n = 4096, 8192                 >= 0.7x torch.linalg (16.0 / 57.2 ms), aim 1.0x
lu_factor float32 n = 8192                         >= 0.7x (34.3 ms)
lu_factor complex64 4096 x 32x32 (VMC)             >= 1.0x (0.188 ms)
solve float32 2048 x 9x9, 1 RHS (RANSAC DLT)       >= 2x (0.146 ms)
det complex64 4096 x 32x32, forward + backward     >= 1.0x (1.45 ms)
slogdet complex64 65536 x 32x32, fwd + bwd (VMC)   (anchor 8.50 ms)
inv complex64 1024 x 1024                          (torch.linalg.inv has no complex64 on mps)
=================================================  ==========================================

    python benchmarks/bench_lu.py --device cuda --out results/           # the H200 run
    python benchmarks/bench_lu.py --device cuda --out results/ --tune    # + tuning rows
    python benchmarks/bench_lu.py --device cpu --quick --out results/

On CUDA the script first calls every ``_ex``-style op (``lu_factor_ex``, ``lu_solve``, ``solve_ex``,
``inv_ex``, ``det``, ``slogdet`` forward) under ``torch.cuda.set_sync_debug_mode("error")`` and
prints ``host-sync check: PASS``/``FAIL`` per op; the harness also records launches per call
(``lu_factor`` n = 4096: the number the issue asks for) and, where the emulator's cuda target is
available, times the Metal kernels themselves on the GPU (``[metal kernels via emulator]`` rows:
``lu_small`` for the batched factorisations, ``lu_small_solve`` for RANSAC, ``lu_panel`` +
``lu_laswp`` inside the recursion).
``--tune`` adds rows for the alternatives of :data:`mpslinalg.lu.TUNING` (leaf width, direct
threshold, complex GEMM as 4 real products or a real block embedding), each timed against the
default in the same run (ratio > 1: the default is faster).
"""

from __future__ import annotations

import contextlib
import importlib
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg as LA  # noqa: E402
from benchmarks.harness import Case, cli, print_host_sync_check  # noqa: E402
from reference import metrics  # noqa: E402

lu_mod = importlib.import_module("mpslinalg.lu")

TUNE = "--tune" in sys.argv
if TUNE:
    sys.argv.remove("--tune")
PROFILE = "--profile" in sys.argv
if PROFILE:
    sys.argv.remove("--profile")
#: ``--profile`` also profiles the tuning row that sets exactly these fields (the candidate default).
PROFILE_TUNE = {"look_roll", "panel_regs", "swap_trsm"}


@contextlib.contextmanager
def tuning(**kw):
    """Temporarily change :data:`mpslinalg.lu.TUNING` (dict entries as ``name=(key, value)``)."""
    old = {}
    for k, v in kw.items():
        if isinstance(v, tuple):
            d = getattr(lu_mod.TUNING, k)
            old[k] = (v[0], d.get(v[0]))
            d[v[0]] = v[1]
        else:
            old[k] = getattr(lu_mod.TUNING, k)
            setattr(lu_mod.TUNING, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if isinstance(v, tuple):
                getattr(lu_mod.TUNING, k)[v[0]] = v[1]
            else:
                setattr(lu_mod.TUNING, k, v)


def _randn(shape, dtype, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    if dtype.is_complex:
        x = torch.complex(x, torch.randn(shape, generator=g))
    return x.to(dtype).to(device)


def _lu_flops(n, dtype, batch=1):
    return batch * (2 / 3) * n ** 3 * (4 if dtype.is_complex else 1)


def _fwd_bwd(fn, A, part=None):
    def run():
        Ag = A.detach().requires_grad_()
        out = fn(Ag)
        out = out[part] if part is not None else out
        loss = (out.abs() ** 2).sum() if out.is_complex() else out.sum()
        return torch.autograd.grad(loss, Ag)[0]

    return run


def _emulator_ok(device) -> bool:
    if device.type != "cuda":
        return False
    try:
        with LA.use_backend("emulator"):
            LA.lu_factor_ex(torch.randn(2, 4, 4, device=device))
        return True
    except Exception as exc:  # noqa: BLE001 - report and carry on without those rows
        print(f"[metal kernels via emulator] rows skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
        return False


def _on_emulator(fn):
    def run():
        with LA.use_backend("emulator"):
            return fn()

    return run


def cases(device: torch.device, quick: bool) -> list[Case]:
    gpu = device.type != "cpu"
    out: list[Case] = []
    c64, f32 = torch.complex64, torch.float32

    # 1. large factorizations
    big = ([4096] if quick else [4096, 8192]) if gpu else ([256] if quick else [512, 1024])
    for n in big:
        A = _randn((n, n), c64, device, n)
        out.append(Case(name=f"lu_factor complex64 n={n}", workload="scientific: complex LU",
                        device=device, dtype=c64, shape=(n, n), ours=lambda A=A: LA.lu_factor_ex(A),
                        peer={"torch.linalg": lambda A=A: torch.linalg.lu_factor_ex(A)},
                        flops=_lu_flops(n, c64)))
    n = (4096 if quick else 8192) if gpu else (512 if quick else 1024)
    A = _randn((n, n), f32, device, 1)
    out.append(Case(name=f"lu_factor float32 n={n}", workload="scientific: real LU", device=device,
                    dtype=f32, shape=(n, n), ours=lambda A=A: LA.lu_factor_ex(A),
                    peer={"torch.linalg": lambda A=A: torch.linalg.lu_factor_ex(A)},
                    flops=_lu_flops(n, f32)))

    # 2. batched small LU (VMC 32x32)
    b = (4096 if not quick else 1024) if gpu else (512 if not quick else 128)
    A = _randn((b, 32, 32), c64, device, 2)
    out.append(Case(name=f"lu_factor complex64 {b}x32x32", workload="VMC Slater matrices",
                    device=device, dtype=c64, shape=tuple(A.shape), ours=lambda A=A: LA.lu_factor_ex(A),
                    peer={"torch.linalg": lambda A=A: torch.linalg.lu_factor_ex(A)},
                    bytes_moved=2 * A.nbytes, flops=_lu_flops(32, c64, b)))

    # 3. RANSAC: 2048 x 9x9 solves, 1 RHS
    A9 = _randn((2048, 9, 9), f32, device, 3)
    B9 = _randn((2048, 9, 1), f32, device, 4)
    out.append(Case(name="solve float32 2048x9x9 1 RHS", workload="RANSAC DLT (camera geometry)",
                    device=device, dtype=f32, shape="(2048,9,9) rhs 1",
                    ours=lambda: LA.solve_ex(A9, B9),
                    peer={"torch.linalg.solve": lambda: torch.linalg.solve(A9, B9),
                          "torch lu_factor_ex+lu_solve": lambda: torch.linalg.lu_solve(
                              *torch.linalg.lu_factor_ex(A9)[:2], B9)},
                    bytes_moved=A9.nbytes + 2 * B9.nbytes))

    # 4. det forward + backward (complex Slater determinants)
    b = 4096 if gpu else (512 if not quick else 128)
    Ad = _randn((b, 32, 32), c64, device, 5) / 32 ** 0.5 + torch.eye(32, device=device)
    out.append(Case(name=f"det complex64 {b}x32x32 fwd+bwd", workload="VMC: gradient of Slater dets",
                    device=device, dtype=c64, shape=tuple(Ad.shape), ours=_fwd_bwd(LA.det, Ad),
                    peer={"torch.linalg": _fwd_bwd(torch.linalg.det, Ad)}, sync_check=False))

    # 5. slogdet forward + backward, VMC 4096 walkers x 16 dets
    b = (65536 if not quick else 8192) if gpu else (1024 if not quick else 128)
    As = _randn((b, 32, 32), c64, device, 6) / 32 ** 0.5 + torch.eye(32, device=device)
    out.append(Case(name=f"slogdet complex64 {b}x32x32 fwd+bwd", workload="VMC: log|psi| and its gradient",
                    device=device, dtype=c64, shape=tuple(As.shape), ours=_fwd_bwd(LA.slogdet, As, 1),
                    peer={"torch.linalg": _fwd_bwd(torch.linalg.slogdet, As, 1)}, sync_check=False))

    # 6. complex inverse (a gap of torch.linalg on mps)
    n = (1024 if not quick else 512) if gpu else (256 if not quick else 128)
    Ai = _randn((n, n), c64, device, 7)
    out.append(Case(name=f"inv_ex complex64 n={n}", workload="scientific: complex inverse", device=device,
                    dtype=c64, shape=(n, n), ours=lambda: LA.inv_ex(Ai),
                    peer={"torch.linalg": lambda: torch.linalg.inv_ex(Ai)}, flops=2 * n ** 3 * 4))

    # 7. the Metal kernels themselves on the GPU (emulator cuda target)
    if _emulator_ok(device):
        A = _randn((4096, 32, 32), c64, device, 2)
        out.append(Case(name="lu_factor complex64 4096x32x32 [metal kernels via emulator]",
                        workload="lu_small kernel on the H200", device=device, dtype=c64,
                        shape=tuple(A.shape), ours=_on_emulator(lambda A=A: LA.lu_factor_ex(A)),
                        peer={"torch.linalg": lambda A=A: torch.linalg.lu_factor_ex(A)},
                        bytes_moved=2 * A.nbytes))
        out.append(Case(name="solve float32 2048x9x9 [metal kernels via emulator]",
                        workload="lu_small_solve (fused factor + solve) on the H200", device=device, dtype=f32,
                        shape="(2048,9,9) rhs 1", ours=_on_emulator(lambda: LA.solve_ex(A9, B9)),
                        peer={"torch.linalg.solve": lambda: torch.linalg.solve(A9, B9)},
                        bytes_moved=A9.nbytes + 2 * B9.nbytes))
        A = _randn((1024, 1024), c64, device, 8)
        out.append(Case(name="lu_factor complex64 n=1024 [metal kernels via emulator]",
                        workload="lu_panel + lu_laswp + GEMM recursion on the H200", device=device,
                        dtype=c64, shape=(1024, 1024), ours=_on_emulator(lambda A=A: LA.lu_factor_ex(A)),
                        peer={"torch.linalg": lambda A=A: torch.linalg.lu_factor_ex(A)},
                        flops=_lu_flops(1024, c64)))

    if _emulator_ok(device):
        out += _kernel_lu_cases(device, quick)

    if TUNE:
        out += _tune_cases(device, gpu, quick)

    if device.type == "cuda":
        _sync_report(device)
    return out


def _graphed(fn, device):
    """``fn``'s CUDA-graph replay (None where capture fails): a kernel-backend LU issues thousands of
    launches through ctypes (~30 us of host time each), which graph replay removes so the GPU's own
    time shows (the figure that transfers to a Mac, where the Metal launches are encoded ahead)."""
    try:
        fn()
        torch.cuda.synchronize(device)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        g.replay()
        torch.cuda.synchronize(device)
    except Exception as exc:  # noqa: BLE001 - a peer that cannot be captured stays eager
        print(f"graph capture failed: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
        return None

    def replay(g=g, keep=fn):  # the graph and the eager callable (it owns the tensors) stay alive
        g.replay()

    return replay


def _dispatches(fn) -> str:
    """``fn``'s kernel dispatches and matrix-product steps per call (lu.kernels.DISPATCHES)."""
    counter = importlib.import_module("mpslinalg.lu.kernels").DISPATCHES
    counter.clear()
    fn()
    total = sum(v for k, v in counter.items() if k not in ("trsm", "gemm"))
    return f"{total} kernel dispatches + {counter['trsm']} trsm + {counter['gemm']} gemm ({dict(counter)})"


def _kernel_name(name: str) -> str:
    """A GPU kernel's name for the profile table: the Metal function of an emulator kernel
    (``mpsle_k12_lu_panel_look_c64_8`` -> ``lu_panel_look_c64_8``), else its first 60 characters."""
    if name.startswith("mpsle_k"):
        return name.split("_", 2)[-1]
    if "direct_copy" in name:
        return "torch copy"
    if "elementwise_kernel" in name:
        return "torch elementwise"
    name = name.removeprefix("void ")
    return name if len(name) <= 60 else name[:57] + "..."


def _kernel_profile(label: str, replay, device, calls: int = 5) -> None:
    """Per-kernel GPU time of one call (the graph replay ``replay``, ``calls`` times under the CUDA
    profiler), as a markdown table: where the blocked LU's time goes. The last row compares the
    kernels' summed time with the replay's elapsed time (CUDA events): the difference is the GPU
    idle between dependent kernels."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    try:
        replay()
        torch.cuda.synchronize(device)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                replay()
            torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            replay()
        end.record()
        torch.cuda.synchronize(device)
        wall_us = start.elapsed_time(end) * 1e3 / calls
        time: dict[str, float] = {}
        count: dict[str, int] = {}
        for e in prof.events():
            if e.device_type != DeviceType.CUDA or "Memcpy" in e.name or "Memset" in e.name:
                continue
            k = _kernel_name(e.name)
            time[k] = time.get(k, 0.0) + e.time_range.elapsed_us() / calls
            count[k] = count.get(k, 0) + 1
    except Exception as exc:  # noqa: BLE001 - a profiler failure must not lose the timing rows
        print(f"[kernel LU profile] {label}: failed ({type(exc).__name__}: {str(exc)[:200]})", flush=True)
        return
    total = sum(time.values())
    lines = [f"\n[kernel LU profile] {label}: GPU time per call by kernel (CUDA profiler over {calls} "
             "graph replays)\n", "| kernel | launches per call | us per call | share |", "|---|---:|---:|---:|"]
    for k in sorted(time, key=time.get, reverse=True):
        lines.append(f"| {k} | {count[k] / calls:g} | {time[k]:.0f} | {100 * time[k] / max(total, 1e-9):.1f}% |")
    lines.append(f"| all kernels | {sum(count.values()) / calls:g} | {total:.0f} | replay elapsed {wall_us:.0f} us, "
                 f"idle between kernels {wall_us - total:.0f} us |")
    print("\n".join(lines) + "\n", flush=True)


def _lu_ratio(A, LU, piv) -> float:
    """``‖A − PLU‖₁/(n ‖A‖₁ u)`` with u = 2^-24, unpacked and multiplied in double on A's device."""
    wide = torch.complex128 if A.is_complex() else torch.float64
    P, L, U = torch.lu_unpack(LU.to(wide), piv)
    return float(metrics.lu_ratio(A.to(wide), P, L, U, u=2.0 ** -24))


def _kernel_lu_case(name, A, device, **tune) -> Case | None:
    """``lu_factor_ex(A)`` on the kernel backend (the .metal kernels via the emulator's cuda target,
    CUDA-graph replay) against cuSOLVER (torch.linalg.lu_factor_ex, eager and graph-replayed)."""
    def eager():
        with LA.use_backend("emulator"), tuning(**tune):
            return LA.lu_factor_ex(A)

    LU, piv, info = eager()
    LUref, ref_piv, _ = torch.linalg.lu_factor_ex(A)
    differ = int((piv != ref_piv).sum())
    print(f"[kernel LU] {name}: {_dispatches(eager)}; LU ratio (LAPACK xGET01, pass < 30): ours "
          f"{_lu_ratio(A, LU, piv):.3g}, cuSOLVER {_lu_ratio(A, LUref, ref_piv):.3g}; pivots differing "
          f"from cuSOLVER's: {differ} of {piv.numel()}; info {int(info)}",
          flush=True)
    ours = _graphed(eager, device)
    if ours is None:
        return None
    peer = {"torch.linalg (cuSOLVER)": lambda: torch.linalg.lu_factor_ex(A)}
    peer_graph = _graphed(lambda: torch.linalg.lu_factor_ex(A), device)
    if PROFILE and (not tune or set(tune) == PROFILE_TUNE):  # the default tuning and the candidate
        _kernel_profile(name, ours, device)
        if peer_graph is not None and not tune:
            _kernel_profile(f"{name}: cuSOLVER", peer_graph, device)
    if peer_graph is not None:
        peer["torch.linalg graph"] = peer_graph
    return Case(name=f"{name} [kernel LU, graph]", workload="blocked LU on the .metal kernels (H200 proxy)",
                device=device, dtype=A.dtype, shape=tuple(A.shape), ours=ours, peer=peer,
                flops=_lu_flops(A.shape[-1], A.dtype), sync_check=False, count_launches=False)


def _kernel_lu_cases(device, quick) -> list[Case]:
    """Issue 16: lu_factor on the kernel backends (c64 n = 1024, 4096; f32 n = 1024, 4096), and
    with ``--tune`` the blocked LU's open tuning questions (the H200 rounds of 2026-12-01 settled
    the rest: 64 register slots 10-40% slower everywhere, nb = 64 15% slower, panel_look 4 16%
    slower, one-group panels at every size 2.6x slower, 16 rows per group only for panels of at
    most 1024 rows, complex64 k = 16 slower, the matrix-unit update no faster; the night's rounds:
    column-major panel buffers faster (now the default), the rolled column loop, lu_panel_regs, the
    fused TRSM and rank-64 outer blocks slower; docs/evidence/lu.md)."""
    if device.type != "cuda":
        return []
    rows = []
    sizes = [(torch.complex64, 1024)] + ([] if quick else [(torch.complex64, 4096), (torch.float32, 1024),
                                                          (torch.float32, 4096)])
    for dtype, n in sizes:
        A = _randn((n, n), dtype, device, 40 + n)
        name = f"lu_factor {'complex64' if dtype.is_complex else 'float32'} n={n}"
        # issue 35: the default panel_tall "one" (every panel one dispatch, <= 4 a panel) and the
        # multi-group panels it replaced, side by side (DISPATCHES per call printed for both)
        for kw in ({}, {"panel_tall": "look"}):
            case = _kernel_lu_case(name + "".join(f" [{k}={v}]" for k, v in kw.items()), A, device, **kw)
            if case is not None:
                rows.append(case)
    if TUNE:
        # (round 2; round 1 measured the column-major buffers, now the default, and showed the rest
        # slow only because clang had not inlined the column step): lu_panel_look's rolled column loop,
        # the one-group panels in registers with the TRSM inside the interchanges' dispatch, and both
        c64, f32 = torch.complex64, torch.float32
        roll, fused = {"look_roll": True}, {"panel_regs": True, "swap_trsm": True}
        for dtype, n in ((c64, 1024), (c64, 4096), (f32, 1024), (f32, 4096)):
            A = _randn((n, n), dtype, device, 40 + n)
            for kw in (roll, fused, {**roll, **fused}):
                label = ", ".join(f"{k}={v}" for k, v in kw.items())
                name = f"lu_factor {'complex64' if dtype.is_complex else 'float32'} n={n} [{label}]"
                case = _kernel_lu_case(name, A, device, **kw)
                if case is not None:
                    rows.append(case)
    return rows


def _tune_cases(device, gpu, quick) -> list[Case]:
    rows: list[Case] = []
    dev = device.type
    n = (4096 if not quick else 2048) if gpu else 1024  # above the CPU direct threshold (512)
    A = _randn((n, n), torch.complex64, device, 11)

    def variant(label, **kw):
        def ours():
            with tuning(**kw):
                return LA.lu_factor_ex(A)

        rows.append(Case(name=f"lu_factor complex64 n={n} [tune: {label}]",
                         workload="tuning sweep (peer = default TUNING)", device=device,
                         dtype=torch.complex64, shape=(n, n), ours=ours,
                         peer={"default": lambda: LA.lu_factor_ex(A)}, sync_check=False,
                         count_launches=False))

    for nb in (32, 64, 256):
        variant(f"leaf_nb={nb}", leaf_nb=(dev, nb))
    variant("direct (one leaf call)", direct_max=(dev, 1 << 30))
    for mode in ("4m", "embed"):
        variant(f"complex GEMM {mode}", gemm=(dev, mode))
    # the complex GEMM alone, as the recursion issues it (C -= A @ B)
    m = (4096 if not quick else 2048) if gpu else 512
    X, Y = _randn((1, m, m), torch.complex64, device, 12), _randn((1, m, m), torch.complex64, device, 13)
    C = _randn((1, m, m), torch.complex64, device, 14)
    gemm_sub = importlib.import_module("mpslinalg.lu.algorithm")._gemm_sub
    for mode in ("4m", "embed"):
        rows.append(Case(name=f"complex GEMM {m}^3 [{mode}]", workload="C -= A @ B as real GEMMs",
                         device=device, dtype=torch.complex64, shape=(m, m, m),
                         ours=lambda mode=mode: gemm_sub(C, X, Y, mode),
                         peer={"native complex matmul": lambda: gemm_sub(C, X, Y, "native")},
                         flops=8 * m ** 3, sync_check=False, count_launches=False))
    return rows


def _sync_report(device):
    """``host-sync check`` per sync-free op: our op under ``set_sync_debug_mode("error")``."""
    A = _randn((2, 300, 300), torch.complex64, device, 20)
    As = _randn((64, 32, 32), torch.complex64, device, 21)
    B = _randn((2, 300, 3), torch.complex64, device, 22)
    LU, piv, _ = LA.lu_factor_ex(A)
    checks = {
        "lu_factor_ex n=300 (recursive)": lambda: LA.lu_factor_ex(A),
        "lu_factor_ex 64x32x32": lambda: LA.lu_factor_ex(As),
        "lu_solve": lambda: LA.lu_solve(LU, piv, B),
        "solve_ex": lambda: LA.solve_ex(A, B),
        "inv_ex": lambda: LA.inv_ex(A),
        "det": lambda: LA.det(As),
        "slogdet": lambda: LA.slogdet(As),
    }
    print_host_sync_check(checks)


if __name__ == "__main__":
    raise SystemExit(cli(cases, family="lu"))
