"""Benchmark of the SVD family (issue 12): every target shape, one row at a time, against
``torch.linalg`` in the same run.

    python benchmarks/bench_svd.py --device cuda --out results/                 # the H200, every row
    python benchmarks/bench_svd.py --device cuda --only "svd 100000x3x3"        # one row
    python benchmarks/bench_svd.py --device cpu --quick --out results/          # 2-core CPU, small sizes

Rows (issue 12's targets, H200, torch.linalg 2026-12-01): svd float32 100000x3x3 >= 20x (19.1 ms),
100000x8x9 >= 10x (35.4 ms), 4096x32x32 >= 2x (4.45 ms), complex64 4096x64x64 <= 20 ms (6.7 s),
pinv 4096x32x32 >= 2x (4.73 ms), float32 2048^2 >= 1x (217 ms); svdvals rows beside them.

Each row is timed on its own (CUDA events, interleaved with the peer, median of the per-round
ratios; :func:`benchmarks.harness.run_cases`), under a wall-clock box (``--row-limit`` seconds:
a row that runs over is reported as such and the next one starts), and its table is printed as
soon as it finishes; the JSON/markdown files are rewritten after every row. Before the rows: the
LAPACK ratio check of every workload (PASS/FAIL) and, on CUDA, the host-sync check of ``svd_ex``,
``svdvals``' no-sync path and ``pinv`` (``torch.cuda.set_sync_debug_mode("error")``).

Options beyond the harness's: ``--row-limit S`` (default 60), ``--torch-ops`` adds rows with the
Triton Jacobi switched off (the torch-op sweeps, to see what the kernel buys), ``--metal`` adds
rows running ``metal/svd.metal`` through the emulator's cuda target (``MPSLINALG_CUBIN_DIR``),
``--profile`` prints where one call's GPU time goes.
"""
# run_gpu: --warmup 1 --repeat 3 --profile


from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import pathlib
import signal
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg  # noqa: E402
from benchmarks.harness import Case, print_host_sync_check, run_cases  # noqa: E402
from mpslinalg.mainjob.report import best_device  # noqa: E402
from mpslinalg.mainjob.timing import resolve_device  # noqa: E402

svdmod = importlib.import_module("mpslinalg.svd")


def _mats(shape: tuple, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_complex:
        return torch.view_as_complex(torch.randn(*shape, 2, generator=g) / 2**0.5).to(device)
    return torch.randn(*shape, generator=g, dtype=dtype).to(device)


def _tag(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _shape(A: torch.Tensor) -> str:
    return "x".join(map(str, A.shape))


def _workloads(device: torch.device, quick: bool) -> list[tuple[str, torch.Tensor]]:
    gpu = device.type != "cpu"
    big = 100000 if gpu and not quick else 10000
    b32 = 4096 if not quick else 512
    n_large = 2048 if gpu and not quick else 256
    return [
        ("line/plane fits, rotations: 3x3", _mats((big, 3, 3), torch.float32, device, 1)),
        ("8-point fundamental matrices: 8x9", _mats((big, 8, 9), torch.float32, device, 2)),
        ("DLT homographies: 9x9", _mats((b32, 9, 9), torch.float32, device, 3)),
        ("batched 32x32", _mats((b32, 32, 32), torch.float32, device, 4)),
        ("batched complex 64x64", _mats((b32 if gpu else 64, 64, 64), torch.complex64, device, 5)),
        ("one large float32 matrix", _mats((n_large, n_large), torch.float32, device, 6)),
    ]


@contextlib.contextmanager
def _tuned(**changes):
    saved = {k: getattr(svdmod.TUNING, k) for k in changes}
    for k, v in changes.items():
        setattr(svdmod.TUNING, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(svdmod.TUNING, k, v)


def _with(fn, *, backend: str | None = None, **tuning):
    def run():
        with _tuned(**tuning), (mpslinalg.use_backend(backend) if backend else contextlib.nullcontext()):
            return fn()
    return run


def cases(device: torch.device, quick: bool, *, torch_ops: bool = False, metal: bool = False) -> list[Case]:
    """The issue's workloads on ``device`` (smaller with ``quick``): svd, svdvals and pinv rows."""
    out = []
    for workload, A in _workloads(device, quick):
        shape, tag = _shape(A), _tag(A.dtype)
        common = {"workload": workload, "device": device, "dtype": A.dtype, "shape": tuple(A.shape),
                  "sync_check": False}  # svd/svdvals raise as torch (a host read): svd_ex is checked below
        ours_svd = lambda A=A: mpslinalg.svd(A, full_matrices=False)  # noqa: E731
        out.append(Case(name=f"svd {shape} {tag}", ours=ours_svd,
                        peer={"torch.linalg.svd": (lambda A=A: torch.linalg.svd(A, full_matrices=False))},
                        **common))
        out.append(Case(name=f"svdvals {shape} {tag}", ours=(lambda A=A: mpslinalg.svdvals(A)),
                        peer={"torch.linalg.svdvals": (lambda A=A: torch.linalg.svdvals(A))}, **common))
        if A.shape[-1] == 32:
            out.append(Case(name=f"pinv {shape} {tag}", ours=(lambda A=A: mpslinalg.pinv(A)),
                            peer={"torch.linalg.pinv": (lambda A=A: torch.linalg.pinv(A))},
                            **{**common, "sync_check": True}))
        if A.ndim == 2 and device.type == "cuda":  # issue 12's 2048²: which cuSOLVER driver, and the old route
            def drv(d, A=A):
                return lambda: torch.linalg.svd(A, full_matrices=False, driver=d)
            out.append(Case(name=f"svd {shape} {tag} (cuSOLVER drivers)", ours=ours_svd,
                            peer={"torch.linalg.svd": drv(None), "gesvd": drv("gesvd"), "gesvdj": drv("gesvdj"),
                                  "gesvda": drv("gesvda")}, **common))
            out.append(Case(name=f"svd {shape} {tag} (QR-preconditioned)", ours_name="mpslinalg QR + device SVD",
                            ours=_with(lambda A=A: mpslinalg.svd(A, full_matrices=False), large_driver="precondition"),
                            peer={"torch.linalg.svd": drv(None)}, **common))
        small = A.ndim == 3 and A.shape[-1] <= 64
        if torch_ops and small:
            out.append(Case(name=f"svd {shape} {tag} (torch-op sweeps)", ours_name="mpslinalg torch-op sweeps",
                            ours=_with(lambda A=A: mpslinalg.svd(A, full_matrices=False), triton=False),
                            peer={"torch.linalg.svd": (lambda A=A: torch.linalg.svd(A, full_matrices=False))},
                            **common))
        if metal and small:
            out.append(Case(name=f"svd {shape} {tag} (Metal kernels)", ours_name="metal kernels (emulated)",
                            ours=_with(lambda A=A: mpslinalg.svd_ex(A, full_matrices=False), backend="emulator"),
                            peer={"torch.linalg.svd": (lambda A=A: torch.linalg.svd(A, full_matrices=False))},
                            **common))
    return out + _qdwh_cases(device)


def _qdwh_cases(device: torch.device) -> list[Case]:
    """Issue 35's large orders: ``TUNING.large_driver = "qdwh"`` (:mod:`mpslinalg.svd.qdwh`) against the
    default route (CUDA: cuSOLVER of the scaled matrix; CPU: LAPACK) and torch.linalg, float32.
    CUDA 1024², 2048², 4096²; the CPU 512² (runs on the 2-core box)."""
    out = []
    for n in ((1024, 2048, 4096) if device.type == "cuda" else (512,)):
        A = _mats((n, n), torch.float32, device, 7)
        common = {"workload": "one large float32 matrix (QDWH)", "device": device, "dtype": A.dtype,
                  "shape": tuple(A.shape), "sync_check": False}
        out.append(Case(name=f"svd {n}x{n} float32 (QDWH)", ours_name="mpslinalg QDWH",
                        ours=_with(lambda A=A: mpslinalg.svd(A, full_matrices=False), large_driver="qdwh"),
                        peer={"mpslinalg default": (lambda A=A: mpslinalg.svd(A, full_matrices=False)),
                              "torch.linalg.svd": (lambda A=A: torch.linalg.svd(A, full_matrices=False))},
                        **common))
        out.append(Case(name=f"svdvals {n}x{n} float32 (QDWH)", ours_name="mpslinalg QDWH",
                        ours=_with(lambda A=A: mpslinalg.svdvals(A), large_driver="qdwh"),
                        peer={"mpslinalg default": (lambda A=A: mpslinalg.svdvals(A)),
                              "torch.linalg.svdvals": (lambda A=A: torch.linalg.svdvals(A))}, **common))
    return out


def _accuracy_report(device: torch.device) -> bool:
    """PASS/FAIL of the LAPACK svd ratios (< 50, issue 12) on the first matrices of each workload."""
    from reference import metrics

    ok = True
    for _workload, A in _workloads(device, True):
        head = A[:64] if A.ndim == 3 else A
        U, S, Vh = mpslinalg.svd(head, full_matrices=True)
        r = max(float(x.max()) for x in metrics.svd_ratios(head.cpu(), U.cpu(), S.cpu(), Vh.cpu())[:3])
        good = r < 50
        ok &= good
        print(f"[bench_svd] accuracy svd {tuple(head.shape)} {_tag(A.dtype)}: max LAPACK ratio {r:.3g} "
              f"{'PASS' if good else 'FAIL'}", flush=True)
    return ok


def _sync_report(device: torch.device) -> bool:
    """The no-host-sync entry points under ``torch.cuda.set_sync_debug_mode("error")``."""
    A3 = _mats((4096, 3, 3), torch.float32, device, 1)
    A = _mats((512, 8, 9), torch.float32, device, 1)
    B = _mats((256, 32, 32), torch.float32, device, 3)
    C = _mats((64, 40, 40), torch.complex64, device, 2)
    D = _mats((16, 64, 64), torch.complex64, device, 4)
    return print_host_sync_check({
        "svd_ex 3x3": lambda: mpslinalg.svd_ex(A3),
        "svd_ex 8x9": lambda: mpslinalg.svd_ex(A),
        "svd_ex 32x32 reduced": lambda: mpslinalg.svd_ex(B, full_matrices=False),
        "svd_ex complex 40x40": lambda: mpslinalg.svd_ex(C),
        "svd_ex complex 64x64": lambda: mpslinalg.svd_ex(D),
        "svd_impl (svdvals' path) 32x32": lambda: svdmod.svd_impl(B, False, False),
        "pinv 32x32": lambda: mpslinalg.pinv(B),
    }, warmup=True)


def _profile(device: torch.device) -> None:
    """Where one call's GPU time goes, per workload."""
    from torch.profiler import ProfilerActivity, profile

    for _workload, A in _workloads(device, False)[:5]:
        mpslinalg.svd(A, full_matrices=False)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            mpslinalg.svd(A, full_matrices=False)
            torch.cuda.synchronize()
        table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=10)
        print(f"[bench_svd] profile {tuple(A.shape)} {_tag(A.dtype)}\n{table}", flush=True)


def _gpu_ms(fn) -> float | str:
    """GPU ms of ``fn()`` (CUDA events, median of 5 after one warm-up), or the error of a piece that
    failed (the report goes on)."""
    try:
        fn()
        torch.cuda.synchronize()
        out = []
        for _ in range(5):
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
            fn()
            t1.record()
            torch.cuda.synchronize()
            out.append(t0.elapsed_time(t1))
        return sorted(out)[2]
    except Exception as exc:  # noqa: BLE001 - report the piece that failed and go on
        return f"ERROR {type(exc).__name__}: {str(exc)[:150]}"


def _fused_report(device: torch.device) -> None:
    """The one-launch SVD (:mod:`mpslinalg.svd.triton_fused`) on the GPU: each code-shape
    variant (``VARIANT``) timed and checked (worst Frobenius ratios over the batch, float64 on the
    GPU: ``‖A − UΣVᵀ‖/(‖A‖·max(m,n)·u)``, ``‖UᵀU − I‖/(n·u)``, ``‖VᵀV − I‖/(n·u)``, < 50 expected),
    then ``svd_impl`` fused vs the composed path and torch.linalg in the same run."""
    from mpslinalg.svd import triton_fused as sf

    print("\n| fused SVD piece | GPU ms | S / recon / U / V ratios |\n|---|---:|---|", flush=True)
    u = 2.0 ** -24

    def ratios(A, U, S, V) -> str:
        A64 = A.double()
        k = S.shape[-1]
        S_ref = torch.linalg.svdvals(A64)
        so = ((S.double() - S_ref).abs().amax(-1) / (S_ref[..., 0] * k * u)).max()
        if U is None:
            return f"{float(so):.3g} / - / - / -"
        U64, V64 = U.double(), V.double()
        rec = torch.linalg.matrix_norm(A64 - (U64[..., :k] * S.double()[..., None, :]) @ V64.mT)
        rec = rec / (torch.linalg.matrix_norm(A64) * max(A.shape[-2:]) * u)
        eye_u = torch.eye(U.shape[-1], dtype=torch.float64, device=A.device)
        eye_v = torch.eye(V.shape[-1], dtype=torch.float64, device=A.device)
        uo = torch.linalg.matrix_norm(U64.mT @ U64 - eye_u) / (k * u)
        vo = torch.linalg.matrix_norm(V64.mT @ V64 - eye_v) / (k * u)
        return " / ".join(f"{float(t.max()):.3g}" for t in (so, rec, uo, vo))

    def variant(A, cfg, var, uv=True, jacobi="partner"):
        saved_c, saved_v = dict(sf.CONFIG), dict(sf.VARIANT)

        def run():
            sf.CONFIG[sf._pow2(A.shape[-1])] = cfg
            sf.VARIANT.update(var)
            saved_j, sf.JACOBI = sf.JACOBI, jacobi
            try:
                return sf.svd_tall(A, False, uv, 30)
            finally:
                sf.JACOBI = saved_j
                sf.CONFIG.clear()
                sf.CONFIG.update(saved_c)
                sf.VARIANT.clear()
                sf.VARIANT.update(saved_v)
        return run

    def add(name, fn, check=None) -> None:
        t = _gpu_ms(fn)
        acc = ""
        if check is not None and not isinstance(t, str):
            U, S, V, info = fn()
            acc = ratios(check, U, S, V) + f" (info != 0: {int(info.count_nonzero())})"
        print(f"| {name} | {t if isinstance(t, str) else f'{t:.3f}'} | {acc} |", flush=True)

    A32 = _mats((4096, 32, 32), torch.float32, device, 4)
    A98 = _mats((100000, 8, 9), torch.float32, device, 2).mT.contiguous()
    base = dict(sf.VARIANT)
    for tag, var in (("default", base), ("+joint", {**base, "joint": True}), ("+gather", {**base, "gather": True}),
                     ("A sorts by gather", {**base, "reload": False}),
                     ("σ sort by gather", {**base, "scatter": False})):
        add(f"fused 4096x32x32 f32, U and V, 1 matrix, 1 warp, {tag}", variant(A32, (1, 1), var), A32)
    add("fused 4096x32x32 f32, U and V, 1 matrix, 2 warps, default", variant(A32, (1, 2), base), A32)
    add("fused 4096x32x32 f32, U and V, 1 matrix, 1 warp, default, slots", variant(A32, (1, 1), base, jacobi="slots"),
        A32)
    add("fused 4096x32x32 f32, values only, 1 matrix, 1 warp, default", variant(A32, (1, 1), base, uv=False), A32)
    A16 = _mats((4096, 16, 16), torch.float32, device, 7)
    add("fused 4096x16x16 f32, U and V, 1 matrix, 1 warp, default", variant(A16, (1, 1), base), A16)
    for cfg in ((1, 1), (2, 1)):
        add(f"fused 100000x9x8 f32, U and V, {cfg[0]} matrices, {cfg[1]} warps, default", variant(A98, cfg, base), A98)

    def dispatch(fn, enabled):
        def run():
            saved, sf.ENABLED = sf.ENABLED, enabled
            try:
                fn()
            finally:
                sf.ENABLED = saved
        return run

    A89 = _mats((100000, 8, 9), torch.float32, device, 2)
    for name, A in (("4096x32x32", A32), ("100000x8x9", A89)):
        add(f"svd_impl {name} f32 (fused, default launch)", dispatch(lambda A=A: svdmod.svd_impl(A, False, True), True))
        add(f"svd_impl {name} f32 (composed path)", dispatch(lambda A=A: svdmod.svd_impl(A, False, True), False))
        add(f"torch.linalg.svd {name} f32", lambda A=A: torch.linalg.svd(A, full_matrices=False))
    add("mpslinalg.pinv 4096x32x32 f32 (fused)", dispatch(lambda: mpslinalg.pinv(A32), True))
    add("torch.linalg.pinv 4096x32x32 f32", lambda: torch.linalg.pinv(A32))


def _kernel_report(device: torch.device) -> None:
    """GPU time of the pieces (CUDA events, median of 5 after one warm-up): the Triton Jacobi kernels
    alone at each tile width, the QR preconditioner, and the whole ``svd_impl``."""
    from mpslinalg.qr import qr_impl
    from mpslinalg.svd import triton_jacobi as st

    ms = _gpu_ms

    def jac(X, warps=None, lane=None, kernel="memory"):
        V = torch.eye(X.shape[-1], dtype=X.dtype, device=device).expand_as(X).contiguous()
        u = 2.0 ** -24
        n = X.shape[-1]

        def run():
            saved = st.TILE_WARPS, dict(st.LANE_MAX), st.TILE_KERNEL
            st.TILE_WARPS, st.TILE_KERNEL = warps, kernel
            if lane is not None:
                st.LANE_MAX[X.dtype] = lane
            try:
                st.jacobi(X.clone(), V.clone(), 30, n ** 0.5 * u, 2 * n * u)
            finally:
                st.TILE_WARPS, st.LANE_MAX, st.TILE_KERNEL = saved
        return run

    print("\n| piece | GPU ms |\n|---|---:|", flush=True)

    def add(row) -> None:
        name, t = row
        print(f"| {name} | {t if isinstance(t, str) else f'{t:.3f}'} |", flush=True)

    X32 = qr_impl(_mats((4096, 32, 32), torch.float32, device, 4), "r")[1].mH.contiguous()
    for w in (1, 2, 4, 8):
        add((f"tile Jacobi 4096x32x32 f32, {w} warps", ms(jac(X32, w))))
    for w in (1, 2, 4):
        add((f"registers Jacobi 4096x32x32 f32, {w} warps", ms(jac(X32, w, kernel="registers"))))
    X64 = qr_impl(_mats((4096, 64, 64), torch.complex64, device, 5), "r")[1].mH.contiguous()
    for w in (4, 8, 16):
        add((f"tile Jacobi 4096x64x64 c64, {w} warps", ms(jac(X64, w))))
    for w in (2, 4, 8):
        add((f"registers Jacobi 4096x64x64 c64, {w} warps", ms(jac(X64, w, kernel="registers"))))
    X8 = qr_impl(_mats((100000, 9, 8), torch.float32, device, 2), "r")[1][:, :8].mH.contiguous()
    add(("lane Jacobi 100000x8x8 f32", ms(jac(X8))))
    add(("tile Jacobi 100000x8x8 f32 (1 warp)", ms(jac(X8, 1, lane=0))))
    add(("registers Jacobi 100000x8x8 f32 (1 warp)", ms(jac(X8, 1, lane=0, kernel="registers"))))
    A32 = _mats((4096, 32, 32), torch.float32, device, 4)
    add(("qr_impl reduced 4096x32x32 f32", ms(lambda: qr_impl(A32, "reduced"))))
    add(("svd_impl 4096x32x32 f32 (whole)", ms(lambda: svdmod.svd_impl(A32, False, True))))
    add(("torch.linalg.svd 4096x32x32 f32", ms(lambda: torch.linalg.svd(A32, full_matrices=False))))
    C64 = _mats((4096, 64, 64), torch.complex64, device, 5)
    for kernel in ("memory", "registers"):
        saved, st.TILE_KERNEL = st.TILE_KERNEL, kernel
        try:
            add((f"svd_impl 4096x64x64 c64 (whole, {kernel}; target <= 20 ms)",
                         ms(lambda: svdmod.svd_impl(C64, False, True))))
            add((f"svd_impl 4096x32x32 f32 (whole, {kernel})", ms(lambda: svdmod.svd_impl(A32, False, True))))
        finally:
            st.TILE_KERNEL = saved
    A89 = _mats((100000, 8, 9), torch.float32, device, 2)
    add(("svd_impl 100000x8x9 f32 (whole)", ms(lambda: svdmod.svd_impl(A89, False, True))))


class _RowTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise _RowTimeout


def _settings(case: Case, args) -> dict:
    warmup, repeat, min_time = (1, 5, 0.02) if args.quick else (args.warmup, args.repeat, args.min_time)
    if case.dtype.is_complex and not args.quick and "64x64" in str(case.name):
        warmup, repeat, min_time = 0, 1, 0.0  # torch.linalg takes ~7 s a call on the H200
    return {"warmup": warmup, "repeat": repeat, "min_time": min_time, "max_time": 0.5 * args.row_limit}


def _row_limit(case: Case, args) -> float:
    """Seconds for a row: the complex64 64x64 peer alone needs ~7 s a call, ~5 calls a row."""
    slow = case.dtype.is_complex and not args.quick and "64x64" in str(case.name)
    return max(args.row_limit, 100.0) if slow else args.row_limit


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="benchmark: svd, svdvals, pinv (ours vs torch.linalg, same run)")
    p.add_argument("--device", default="auto")
    p.add_argument("--out", default="results")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", action="append", default=[], help="only rows whose name contains TEXT")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--min-time", type=float, default=0.1)
    p.add_argument("--row-limit", type=float, default=60.0, help="wall-clock seconds per row")
    p.add_argument("--torch-ops", action="store_true", help="add rows without the Triton Jacobi")
    p.add_argument("--metal", action="store_true", help="add rows with metal/svd.metal on the cuda target")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--no-checks", action="store_true", help="skip the accuracy and host-sync checks")
    p.add_argument("--kernels", action="store_true", help="CUDA: time the pieces (Triton kernels, QR) first")
    p.add_argument("--fused", action="store_true", help="CUDA: time the one-launch SVD by launch shape first")
    args = p.parse_args(argv)
    dev = resolve_device(best_device() if args.device == "auto" else args.device)
    status = 0
    if not args.no_checks:
        if not _accuracy_report(dev):
            status = 1
        if dev.type == "cuda" and not _sync_report(dev):
            status = 1
    if args.kernels and dev.type == "cuda":
        _kernel_report(dev)
    if args.fused and dev.type == "cuda":
        _fused_report(dev)
    rows = [c for c in cases(dev, args.quick, torch_ops=args.torch_ops, metal=args.metal)
            if not args.only or any(s in c.name for s in args.only)]
    stem = f"svd_{dev.type}" + ("_quick" if args.quick else "")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    signal.signal(signal.SIGALRM, _alarm)
    for i, case in enumerate(rows, 1):
        print(f"\n[{i}/{len(rows)}] {case.name}", flush=True)
        limit = _row_limit(case, args)
        signal.alarm(max(1, int(limit)))
        try:
            res = run_cases([case], family="svd", **_settings(case, args))
            records += res["cases"]
            status = status or (0 if res["ok"] else 1)
        except _RowTimeout:
            print(f"| {case.name} | TIMEOUT after {limit:g} s |", flush=True)
            records.append({"name": case.name, "error": f"timeout after {limit:g} s"})
            status = 1
        finally:
            signal.alarm(0)
        sys.stdout.flush()
        (out / f"{stem}.json").write_text(json.dumps({"family": "svd", "cases": records}, indent=2, default=str))
    if args.profile and dev.type == "cuda":
        _profile(dev)
    print(f"\nwrote {out / (stem + '.json')}", file=sys.stderr)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
