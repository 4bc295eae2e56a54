"""Benchmark: ``mpslinalg.solve_triangular`` against ``torch.linalg.solve_triangular`` (issue 4).

Workloads (the issue's performance targets are for the H200):

==========================================  ===============================================
case                                        target on the H200
==========================================  ===============================================
float32 4096 x 64x64 lower, 64 RHS          <= 0.25 ms (torch.linalg 0.545 ms, bmm 0.10 ms)
DeltaNet [1,32,16,64,64] unit lower, 128    >= 2x torch.linalg (0.163 ms)
float32 8192 x 8192, 1024 RHS               >= 1.0x torch.linalg (3.78 ms)
complex64 4096 x 4096, 256 RHS              >= 1.0x torch.linalg (1.91 ms)
==========================================  ===============================================

A batched matmul of the same shape is timed beside the 64x64 cases as the reference point.

    python benchmarks/bench_triangular.py --device cuda --out results/           # the H200 run
    python benchmarks/bench_triangular.py --device cuda --out results/ --tune    # + tuning sweep
    python benchmarks/bench_triangular.py --device cpu --quick --out results/
    python benchmarks/bench_triangular.py --device cuda --out results/ --kernel  # the Metal kernel

``--kernel`` times the Metal ``trsm_small`` kernel itself (issue 16): on CUDA through the
emulator's cuda target, the replay of a CUDA graph of 10 launches (the kernel's own GPU time,
without the ~30 us of ctypes launch overhead per call) against graphs of 10
``torch.linalg.solve_triangular`` calls and of 10 ``bmm`` of the same shape, in the same run; one
row per ``TUNING.small_cols`` and, for float32, the ``small_mma`` variant. Elsewhere (mps: Metal;
cpu: the emulator, small sizes) loops of 10 calls.

On CUDA the script first runs every case under ``torch.cuda.set_sync_debug_mode("error")`` and
prints ``host-sync check: PASS``/``FAIL`` per case (our op must never synchronise with the host).
``--tune`` adds rows for the alternatives of :data:`mpslinalg.triangular.TUNING` (diagonal-block
inverse by batched trsm or by doubling products, nb 16/32, leaf sizes, trsm leaves for large n), each
timed against the default in the same run (ratio > 1: the default is faster).
"""

from __future__ import annotations

import contextlib
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg  # noqa: E402
from benchmarks.harness import Case, cli, print_host_sync_check  # noqa: E402
from mpslinalg import triangular as tri  # noqa: E402
from mpslinalg.mainjob.timing import resolve_device, synchronize  # noqa: E402
from mpslinalg.triangular import kernels as tri_kernels  # noqa: E402

TUNE = "--tune" in sys.argv
if TUNE:
    sys.argv.remove("--tune")
COUNT = "--count-ops" in sys.argv
if COUNT:
    sys.argv.remove("--count-ops")
KERNEL = "--kernel" in sys.argv
if KERNEL:
    sys.argv.remove("--kernel")

#: ``TUNING.direct_max`` that never takes the one-trsm shortcut (for the tuning sweep)
NODIRECT = {"cpu": 0, "cuda": 0}


@contextlib.contextmanager
def tuning(**kw):
    """Temporarily change :data:`mpslinalg.triangular.TUNING`."""
    old = {k: getattr(tri.TUNING, k) for k in kw}
    for k, v in kw.items():
        setattr(tri.TUNING, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(tri.TUNING, k, v)


def _tri(n, batch, dtype, device, unit=False, seed=0):
    """Well-conditioned lower triangles: unit diagonal + N(0,1)/sqrt(n) below, or that + 2I."""
    g = torch.Generator().manual_seed(seed)
    real = torch.randn((*batch, n, n), generator=g) / n**0.5
    A = torch.complex(real, torch.randn((*batch, n, n), generator=g) / n**0.5) if dtype.is_complex else real
    A = A.tril(-1) + (1 if unit else 2) * torch.eye(n)
    return A.to(dtype).to(device)


def _rhs(shape, dtype, device, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    if dtype.is_complex:
        x = torch.complex(x, torch.randn(shape, generator=g))
    return x.to(dtype).to(device)


def _case(name, workload, A, B, *, unit, extra_peers=None, flops_mult=1.0):
    n, k = A.shape[-1], B.shape[-1]
    batch = B.shape[:-2].numel()
    flops = flops_mult * batch * n * n * k  # n^2 k real flops for a real trsm (x4 complex)
    peers = {"torch.linalg": lambda: torch.linalg.solve_triangular(A, B, upper=False, unitriangular=unit)}
    peers.update(extra_peers or {})
    return Case(name=name, workload=workload, device=A.device, dtype=A.dtype,
                shape=f"{tuple(A.shape)} rhs {k}",
                ours=lambda: mpslinalg.solve_triangular(A, B, upper=False, unitriangular=unit),
                peer=peers, flops=flops,
                bytes_moved=(A.nbytes // 2 if A.shape[:-2].numel() > 1 else 0) + 2 * B.nbytes or None)


def _variant_case(base: Case, A, B, unit, label, **kw):
    def ours():
        with tuning(**kw):
            return mpslinalg.solve_triangular(A, B, upper=False, unitriangular=unit)

    return Case(name=f"{base.name} [tune: {label}]", workload="tuning sweep (peer = default TUNING)",
                device=base.device, dtype=base.dtype, shape=base.shape, ours=ours,
                peer={"default": base.ours}, sync_check=False)


def _base_cases(device: torch.device, quick: bool) -> list[tuple[Case, torch.Tensor, torch.Tensor, bool]]:
    """The four workloads: (case, A, B, unit)."""
    gpu = device.type != "cpu"
    out: list[tuple[Case, torch.Tensor, torch.Tensor, bool]] = []

    # 1. batched 64x64, 64 RHS
    b = (4096 if not quick else 512) if gpu else (512 if not quick else 64)
    A = _tri(64, (b,), torch.float32, device)
    B = _rhs((b, 64, 64), torch.float32, device)
    M = _rhs((b, 64, 64), torch.float32, device, 2)
    out.append((_case(f"float32 {b}x64x64 lower, 64 RHS", "batched small solves", A, B, unit=False,
                      extra_peers={"bmm (same shape)": lambda M=M, B=B: torch.bmm(M, B)}), A, B, False))

    # 2. DeltaNet [1, 32, T/64, 64, 64] unit lower, 128 RHS
    chunks = (16 if not quick else 4) if gpu else (4 if not quick else 1)
    heads = 32 if (gpu or not quick) else 8
    A = _tri(64, (1, heads, chunks), torch.float32, device, unit=True)
    B = _rhs((1, heads, chunks, 64, 128), torch.float32, device)
    M = _rhs((1, heads, chunks, 64, 64), torch.float32, device, 2)
    out.append((_case(f"DeltaNet [1,{heads},{chunks},64,64] unit lower, 128 RHS",
                      "Gated DeltaNet chunked UT transform (Qwen3-Next torch path)", A, B, unit=True,
                      extra_peers={"matmul (same shape)": lambda M=M, B=B: torch.matmul(M, B)}), A, B, True))

    # 3. one large float32 system
    n, k = ((8192, 1024) if not quick else (2048, 256)) if gpu else ((2048, 256) if not quick else (512, 64))
    A = _tri(n, (), torch.float32, device)
    B = _rhs((n, k), torch.float32, device)
    out.append((_case(f"float32 {n}x{n}, {k} RHS", "scientific: large triangular solve", A, B, unit=False),
                A, B, False))

    # 4. one large complex64 system
    n, k = ((4096, 256) if not quick else (1024, 64)) if gpu else ((1024, 128) if not quick else (256, 32))
    A = _tri(n, (), torch.complex64, device)
    B = _rhs((n, k), torch.complex64, device)
    out.append((_case(f"complex64 {n}x{n}, {k} RHS", "scientific: complex triangular solve", A, B,
                      unit=False, flops_mult=4.0), A, B, False))

    return out


def triangular_ratio(A, B, X, unit) -> float:
    """LAPACK's xTRT02 ratio (pass < 30) of a lower left solve on the first 64 matrices of the
    batch and the first 16 right-hand sides (the ratio is a max over columns, so a subset gives
    exact per-column values), in float64 on the CPU; NaN when the reference package is missing."""
    try:
        from reference import metrics
    except ImportError:  # pragma: no cover - the bench extra has no reference package
        return float("nan")
    a = A.reshape(-1, *A.shape[-2:])[:64].cpu()
    b = B.reshape(-1, *B.shape[-2:])[:64, :, :16].cpu()
    x = X.reshape(-1, *X.shape[-2:])[:64, :, :16].cpu()
    return float(metrics.triangular_residual_ratio(a, x, b, False, True, unit).max())


def cases(device: torch.device, quick: bool) -> list[Case]:
    out = _base_cases(device, quick)
    if device.type == "cuda":
        print_host_sync_check({case.name: case.ours for case, *_ in out})

    # accuracy of what is being timed: LAPACK's xTRT02 ratio (pass < 30) on the first 64
    # matrices of the batch and the first 16 right-hand sides (the ratio is a max over columns,
    # so a subset gives exact per-column values), computed in float64 on the CPU.
    try:
        from reference import metrics
    except ImportError:  # pragma: no cover - the bench extra has no reference package
        metrics = None
    if metrics is not None:
        print("accuracy (LAPACK residual ratio, pass < 30):")
        for case, A, B, unit in out:
            r = triangular_ratio(A, B, case.ours(), unit)
            print(f"  {case.name}: {r:.3g} {'PASS' if r < 30 else 'FAIL'}")

    result = [c for c, *_ in out]
    if device.type == "cuda":
        # The Metal kernels themselves, compiled for the GPU by the emulator's cuda target
        # (DESIGN §5b): the fused trsm_small kernel's roofline fraction says how it will fare on
        # an Apple GPU. Skipped (with the reason) if the cuda target cannot compile here.
        try:
            with mpslinalg.use_backend("emulator"):
                mpslinalg.kernels.load_library("triangular", device)
            emulated = True
        except Exception as exc:  # noqa: BLE001 - report and go on
            print(f"emulator cuda target unavailable, no Metal-kernel rows: {exc}")
            emulated = False
        if emulated:
            for case, A, B, unit in out:
                if A.shape[-1] > 64:
                    continue

                def ours(A=A, B=B, unit=unit):
                    with mpslinalg.use_backend("emulator"):
                        return mpslinalg.solve_triangular(A, B, upper=False, unitriangular=unit)

                result.append(Case(name=f"{case.name} [Metal trsm_small via emulator cuda]",
                                   workload=case.workload, device=device, dtype=case.dtype, shape=case.shape,
                                   ours=ours, peer={"torch.linalg": case.peers()["torch.linalg"],
                                                    "mpslinalg torch path": case.ours},
                                   bytes_moved=case.bytes_moved, flops=case.flops))
        # The one-launch Triton kernel (opt-in: TUNING.triton_max), timed against torch.linalg and
        # the default in the same run: the evidence for switching it on. Its accuracy and host-sync
        # behaviour are checked first; a row that fell back to cuBLAS fails instead of lying.
        for case, A, B, unit in out:
            if A.shape[-1] > 64:
                continue

            def triton_ours(A=A, B=B, unit=unit):
                with tuning(triton_max=64):
                    X = mpslinalg.solve_triangular(A, B, upper=False, unitriangular=unit)
                if tri_kernels._triton_state.get("ok") is not True:
                    raise RuntimeError(f"Triton kernel unavailable: {tri_kernels._triton_state}")
                return X

            try:
                X = triton_ours()
                r = triangular_ratio(A, B, X, unit)
                print(f"  Triton trsm_small accuracy, {case.name}: {r:.3g} {'PASS' if r < 30 else 'FAIL'}")
            except Exception as exc:  # noqa: BLE001 - report and go on
                print(f"  Triton trsm_small unavailable for {case.name}: {exc}")
            print_host_sync_check({f"{case.name} [Triton]": triton_ours})
            result.append(Case(name=f"{case.name} [Triton trsm_small, TUNING.triton_max=64]",
                               workload=case.workload, device=device, dtype=case.dtype, shape=case.shape,
                               ours=triton_ours, peer={"torch.linalg": case.peers()["torch.linalg"],
                                                       "default (cuBLAS)": case.ours},
                               bytes_moved=case.bytes_moved, flops=case.flops))
    if TUNE:
        # the default on CUDA/CPU is one trsm up to TUNING.direct_max (every n on CUDA): the
        # alternatives below switch that off (NODIRECT) to time the blocked/recursive paths
        for case, A, B, unit in out:
            n = A.shape[-1]
            if n <= 64:
                result += [
                    _variant_case(case, A, B, unit, "blocked path (inverse leaves)", direct_max=NODIRECT,
                                  trsm_leaf_cpu=0),
                    _variant_case(case, A, B, unit, "blocked, inverse=doubling", direct_max=NODIRECT,
                                  trsm_leaf_cpu=0, torch_inverse="doubling"),
                    _variant_case(case, A, B, unit, "blocked, nb=32 non-unit", direct_max=NODIRECT,
                                  trsm_leaf_cpu=0, nb=32),
                    _variant_case(case, A, B, unit, "blocked, nb=16 unit", direct_max=NODIRECT,
                                  trsm_leaf_cpu=0, nb_unit=16),
                    _variant_case(case, A, B, unit, "trsm leaves of 32 + GEMM", direct_max=NODIRECT,
                                  trsm_leaf=1, trsm_leaf_cpu=1, trsm_leaf_rows=32),
                ]
            else:
                result += [
                    _variant_case(case, A, B, unit, "no trsm leaves (inverse leaves)", direct_max=NODIRECT,
                                  trsm_leaf=0, trsm_leaf_cpu=0),
                    _variant_case(case, A, B, unit, "GEMM recursion, trsm leaves of 256",
                                  direct_max=NODIRECT, trsm_leaf=1, trsm_leaf_cpu=1, trsm_leaf_rows=256),
                    _variant_case(case, A, B, unit, "GEMM recursion, trsm leaves of 1024",
                                  direct_max=NODIRECT, trsm_leaf=1, trsm_leaf_cpu=1, trsm_leaf_rows=1024),
                    _variant_case(case, A, B, unit, "GEMM recursion, trsm leaves of 2048",
                                  direct_max=NODIRECT, trsm_leaf=1, trsm_leaf_cpu=1, trsm_leaf_rows=2048),
                ]
    return result


GRAPH_REPS = 10  # launches per CUDA-graph replay in --kernel mode


def _replay(fn, device: torch.device):
    """A callable that runs ``fn`` ``GRAPH_REPS`` times: on CUDA the replay of a captured CUDA graph
    (warmed up outside the capture; a call that cannot be captured is run in a plain loop, and the
    row's name says so), elsewhere a plain loop. Returns ``(callable, label)``."""
    loop = (lambda: [fn() for _ in range(GRAPH_REPS)]), f"loop x{GRAPH_REPS}"
    if device.type != "cuda":
        return loop
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            for _ in range(GRAPH_REPS):
                fn()
    except Exception as exc:  # noqa: BLE001 - report and time the eager loop instead
        print(f"  graph capture failed ({exc}); timing a loop of {GRAPH_REPS} calls")
        return loop
    return (lambda g=g: g.replay()), f"graph x{GRAPH_REPS}"  # g (and its memory pool) lives with it


def kernel_cases(device: torch.device, quick: bool) -> list[Case]:
    """The Metal ``trsm_small`` kernel (emulator cuda target) in CUDA-graph replay vs torch.linalg.

    The kernel is launched with the library's own launch description
    (:func:`mpslinalg.triangular.kernels._trsm_small_launch`: kernel variant, index maps, grid);
    only its argument buffer is a device tensor made once, because a Python list is staged through
    a pinned host buffer per launch, which a graph must not capture. The accuracy of what the graph
    computed is checked (LAPACK's ratio) before the rows are timed.
    """
    with mpslinalg.use_backend("emulator" if device.type != "mps" else "metal"):
        lib = mpslinalg.kernels.load_library("triangular", device)
    gpu = device.type != "cpu"
    b = (512 if quick else 4096) if gpu else (16 if quick else 64)
    chunks = (4 if quick else 16) if gpu else 1
    heads = 32 if gpu else 4
    work = [  # name, A, B, unit, flops multiplier
        (f"float32 {b}x64x64 lower, 64 RHS", _tri(64, (b,), torch.float32, device),
         _rhs((b, 64, 64), torch.float32, device), False, 1.0),
        (f"DeltaNet [1,{heads},{chunks},64,64] unit lower, 128 RHS",
         _tri(64, (1, heads, chunks), torch.float32, device, unit=True),
         _rhs((1, heads, chunks, 64, 128), torch.float32, device), True, 1.0),
        (f"complex64 {b}x64x64 lower, 64 RHS", _tri(64, (b,), torch.complex64, device),
         _rhs((b, 64, 64), torch.complex64, device), False, 4.0),
        (f"float32 {4 * b}x16x16 lower, 16 RHS", _tri(16, (4 * b,), torch.float32, device),
         _rhs((4 * b, 16, 16), torch.float32, device), False, 1.0),
    ]
    out = []
    for name, A, B, unit, fm in work:
        n, k = A.shape[-1], B.shape[-1]
        A3, B3 = A.reshape(-1, n, n), B.reshape(-1, n, k)
        nmat = A3.shape[0]
        M = torch.randn_like(A3)
        peers = {}
        for pname, pfn in (("torch.linalg", lambda A=A, B=B, unit=unit: torch.linalg.solve_triangular(
                               A, B, upper=False, unitriangular=unit)),
                           ("bmm", lambda M=M, B3=B3: torch.bmm(M, B3))):
            fn, label = _replay(pfn, device)
            peers[f"{pname} ({label})"] = fn
        variants = [dict(small_cols=64), dict(small_cols=32), dict(small_cols=128)]
        if A.dtype == torch.float32:
            variants.append(dict(small_mma=True))  # the simdgroup_matrix variant (float32 only)
        for var in variants:
            label_var = ", ".join(f"{key}={val}" for key, val in var.items())
            with tuning(**var):
                X = torch.empty_like(B3)
                kname, tensors, prm, threads, group = tri_kernels._trsm_small_launch(A3, B3, X, False, unit)
            # on CUDA the argument buffer is a device tensor made once: a Python list is staged
            # through a pinned host buffer per launch, which a graph must not capture
            arg = torch.tensor(prm, dtype=torch.int64, device=device) if device.type == "cuda" else prm
            kern = getattr(lib, kname)

            def launch(kern=kern, tensors=tensors, arg=arg, threads=threads, group=group):
                kern(*tensors, arg, threads=threads, group_size=group)

            replay, label = _replay(launch, device)
            X.fill_(float("nan"))
            replay()
            synchronize(device)
            r = triangular_ratio(A3, B3, X, unit)
            print(f"  {name} [{kname}, {group} threads/group, {label_var}] accuracy: "
                  f"{r:.3g} {'PASS' if r < 30 else 'FAIL'}")
            case = Case(name=f"{name} [Metal {kname} {label_var}, {label}]",
                        workload="Metal kernel via the emulator's cuda target", device=device, dtype=A.dtype,
                        shape=f"{tuple(A.shape)} rhs {k}", ours=replay, ours_name="Metal kernel", peer=peers,
                        bytes_moved=GRAPH_REPS * (A3.nbytes // 2 + 2 * B3.nbytes),
                        flops=GRAPH_REPS * fm * nmat * n * n * k, sync_check=False, count_launches=False)
            case.keep = (launch, X, A, B, M)  # the tensors the graphs use
            out.append(case)
    # above n = 64 the kernel backends recurse with GEMMs over trsm_small leaves (TUNING.kernel_leaf);
    # eager calls (several dispatches each, host launch overhead included: dispatch economy is the
    # point), the diagonal-inverse leaves and torch.linalg in the same run
    big = [(256, 64 if gpu else 4, 64, torch.float32), (1024, 1, 256, torch.float32),
           (1024, 1, 256, torch.complex64)] if not quick else [(256, 8 if gpu else 2, 64, torch.float32)]
    for n, nmat, k, dtype in big:
        A = _tri(n, (nmat,), dtype, device)
        B = _rhs((nmat, n, k), dtype, device)

        def solve(leaf, A=A, B=B):
            with mpslinalg.use_backend("emulator" if device.type != "mps" else "metal"), tuning(kernel_leaf=leaf):
                return mpslinalg.solve_triangular(A, B, upper=False)

        r = triangular_ratio(A, B, solve("trsm_small"), False)
        print(f"  {str(dtype)[6:]} {nmat}x{n}x{n}: trsm_small leaves accuracy {r:.3g} {'PASS' if r < 30 else 'FAIL'}")
        out.append(Case(name=f"{str(dtype)[6:]} {nmat}x{n}x{n} lower, {k} RHS [kernel backend, trsm_small leaves]",
                        workload="Metal kernels + GEMMs (eager)", device=device, dtype=dtype,
                        shape=f"{tuple(A.shape)} rhs {k}", ours=lambda solve=solve: solve("trsm_small"),
                        ours_name="trsm_small leaves",
                        peer={"trtri_diag leaves": lambda solve=solve: solve("trtri_diag"),
                              "torch.linalg": lambda A=A, B=B: torch.linalg.solve_triangular(A, B, upper=False)},
                        bytes_moved=A.nbytes // 2 + 2 * B.nbytes,
                        flops=(4.0 if dtype.is_complex else 1.0) * nmat * n * n * k))
    return out

_VIEW_OPS = {
    "aten::view", "aten::as_strided", "aten::transpose", "aten::expand", "aten::slice", "aten::select",
    "aten::t", "aten::permute", "aten::alias", "aten::resolve_conj", "aten::detach", "aten::_reshape_alias",
    "aten::empty", "aten::empty_strided", "aten::unsqueeze", "aten::reshape", "aten::diagonal",
    "aten::_conj", "aten::conj", "aten::mT", "aten::matrix_H", "aten::squeeze", "aten::contiguous",
    "aten::lift_fresh", "aten::resize_",
}


def count_ops(device: torch.device, quick: bool) -> None:
    """Print, per workload, the torch ops of one call of ours and of torch.linalg (``torch.profiler``):
    top-level ``aten`` ops (each is a dispatcher round trip: host time), those of them that compute
    (not views/allocations: each is at least one kernel launch), and on CUDA the kernels launched.
    A structural metric that transfers between machines (the H200 runs were host-bound)."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])

    def count(fn):
        fn()
        synchronize(device)
        with profile(activities=acts) as prof:
            fn()
            synchronize(device)
        ev = prof.events()
        top = [e for e in ev if e.name.startswith("aten::")
               and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))]
        comp = [e for e in top if e.name not in _VIEW_OPS]
        kernels = sum(1 for e in ev if e.device_type == torch.autograd.DeviceType.CUDA
                      and not e.name.startswith("Memcpy") and not e.name.startswith("Memset"))
        return len(top), len(comp), kernels, sorted({e.name.replace("aten::", "") for e in comp})

    print(f"torch ops per call on {device} (top-level aten ops / computing ops"
          f"{' / CUDA kernels' if device.type == 'cuda' else ''}):")
    def old_default(case):
        # the CUDA default before 2026-11-30 (blocked path below n = 1024, trsm leaves of 512 rows
        # above), with CUDA's thresholds also on CPU tensors for comparison
        def run():
            with tuning(direct_max=NODIRECT, trsm_leaf_cpu=tri.TUNING.trsm_leaf):
                return case.ours()
        return run

    def triton(case):
        def run():
            with tuning(triton_max=64):
                return case.ours()
        return run

    for case, A, *_ in _base_cases(device, quick):
        whos = [("ours", case.ours), ("ours, old CUDA", old_default(case)),
                ("torch.linalg", case.peers()["torch.linalg"])]
        if device.type == "cuda" and A.shape[-1] <= 64:
            whos.insert(1, ("ours, Triton", triton(case)))
        for who, fn in whos:
            top, comp, kern, names = count(fn)
            k = f" / {kern}" if device.type == "cuda" else ""
            print(f"  {case.name:48s} {who:15s} {top:4d} / {comp:3d}{k}   {', '.join(names)}")


if __name__ == "__main__":
    if COUNT:
        import argparse

        ap = argparse.ArgumentParser()
        ap.add_argument("--device", default="cpu")
        ap.add_argument("--quick", action="store_true")
        ap.add_argument("--out", default=None)
        args, _ = ap.parse_known_args()
        count_ops(resolve_device(args.device), args.quick)
        raise SystemExit(0)
    if KERNEL:
        raise SystemExit(cli(kernel_cases, family="triangular_kernel"))
    raise SystemExit(cli(cases, family="triangular"))
