"""Benchmark of the Cholesky family (issue 30): batched small, large, complex.

    python benchmarks/bench_cholesky.py --device cuda --out results/               # the GPU run
    python benchmarks/bench_cholesky.py --device cuda --out results/ --kernel      # + the Metal kernels
    python benchmarks/bench_cholesky.py --device cpu --quick --out results/        # the 2-core CPU

Peers are ``torch.linalg.cholesky_ex`` on the same inputs, timed in the same run (CUDA events,
medians after warm-up: ``benchmarks/harness.py``). Targets (issue 30, H200, torch.linalg measured
2026-12-01): batched float32 4096x32x32 >= 2x, 4096x64x64 >= 1.5x (0.52 ms), complex64 batched
>= 1.5x; float32 8192^2 >= 1x (9.0 ms), complex64 4096^2 >= 1x (4.2 ms).

Each workload has two rows: ``cholesky_ex`` as a user calls it (the front door: one torch.linalg
call outside the measured table ``Family.when``, so ~1.00x by construction there) and ``[own]``:
mpslinalg's own algorithm on the torch backend (``routing.ours_always`` and
``TUNING.torch_direct_max = 0``: the blocked recursion with the device's ``potrf`` on the diagonal
blocks, or the batch-vectorised ``potf2`` for batches), which is what a ``when`` region would be
measured from.

``--kernel`` (CUDA, with the emulator's cuda target): the Metal kernels on the GPU —
``cholesky_small`` on 4096 x 16x16 / 32x32 float32 against copy bandwidth (the issue's "batched
n <= 16 at >= 50% of copy bandwidth"), and one kernel-backend ``cholesky`` at n = 4096 (1024 with
``--quick``: ``cholesky_panel`` + the triangular family's kernels + matrix products) against
cuSOLVER, with its GPU launch count. Every row's LAPACK ratio is printed (PASS/FAIL) and, on CUDA,
``cholesky_ex`` is checked for host syncs.
"""

from __future__ import annotations

import contextlib
import importlib
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg  # noqa: E402
from benchmarks.harness import Case, cli, print_host_sync_check  # noqa: E402
from mpslinalg import routing  # noqa: E402

chol = importlib.import_module("mpslinalg.cholesky")


def _spd(shape: tuple, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    """``X Xᴴ / n + I`` (κ₂ <= 5), drawn on the CPU with a seed, moved to ``device``."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(shape, dtype=dtype, generator=g)
    n = shape[-1]
    return (X @ X.mH / n + torch.eye(n, dtype=dtype)).to(device)


def _tag(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _flops(A: torch.Tensor) -> float:
    n = A.shape[-1]
    b = A.numel() // (n * n)
    return b * n**3 / 3 * (4 if A.is_complex() else 1)


def _bytes(A: torch.Tensor) -> int:
    return 2 * A.nbytes + 4 * (A.numel() // (A.shape[-1] ** 2))  # read A, write L and info


@contextlib.contextmanager
def _own():
    """mpslinalg's own algorithm on the torch backend (not the device's potrf for the whole call)."""
    saved = dict(chol.TUNING.torch_direct_max)
    chol.TUNING.torch_direct_max.update({"cpu": 0, "cuda": 0})
    try:
        with routing.ours_always():
            yield
    finally:
        chol.TUNING.torch_direct_max.clear()
        chol.TUNING.torch_direct_max.update(saved)


def _own_call(A):
    def run():
        with _own():
            return mpslinalg.cholesky_ex(A)
    return run


def _workloads(device: torch.device, quick: bool) -> list[tuple[str, str, torch.Tensor]]:
    gpu = device.type != "cpu"
    b = 4096 if not quick else 512
    big, cbig = (8192, 4096) if gpu and not quick else ((2048, 1024) if gpu else (512, 256))
    return [
        ("batched", "GP / MultivariateNormal: 4096 x (32x32)", _spd((b, 32, 32), torch.float32, device, 1)),
        ("batched", "LM / UKF normal equations: 4096 x (64x64)", _spd((b, 64, 64), torch.float32, device, 2)),
        ("batched", "complex covariances: 4096 x (32x32)", _spd((b, 32, 32), torch.complex64, device, 3)),
        ("large", "exact GP: one float32 kernel matrix", _spd((big, big), torch.float32, device, 4)),
        ("large", "one complex64 Hermitian matrix", _spd((cbig, cbig), torch.complex64, device, 5)),
    ]


def _emulated(fn):
    def run():
        with mpslinalg.use_backend("emulator"):
            return fn()
    return run


def _kernel_cases(device: torch.device, quick: bool) -> list[Case]:
    """The Metal kernels through the emulator's cuda target (when it is available here)."""
    probe = _spd((8, 16, 16), torch.float32, device, 6)
    try:
        _emulated(lambda: chol.cholesky_ex_impl(probe, False))()
    except Exception as exc:  # the cuda target is optional
        print(f"[bench_cholesky] Metal kernels on {device} via the emulator: unavailable ({exc})", file=sys.stderr)
        return []
    out = []
    for n in (16, 32):
        A = _spd((4096, n, n), torch.float32, device, 7 + n)
        out.append(Case(name=f"metal cholesky_small 4096x{n}x{n} float32", device=device, dtype=torch.float32,
                        workload="the Metal kernel cholesky_small (emulator cuda target): fraction of copy bandwidth",
                        shape=tuple(A.shape), ours=_emulated(lambda A=A: chol.cholesky_ex_impl(A, False)),
                        peer={"torch.linalg.cholesky_ex": lambda A=A: torch.linalg.cholesky_ex(A)},
                        bytes_moved=_bytes(A), ours_name="metal kernel (emulated)"))
    n = 1024 if quick else 4096
    B = _spd((n, n), torch.float32, device, 9)
    out.append(Case(name=f"metal-backend cholesky {n}x{n} float32", device=device, dtype=torch.float32,
                    workload="cholesky_panel + trsm kernels + GEMM (emulator cuda target) vs cuSOLVER",
                    shape=tuple(B.shape), ours=_emulated(lambda: chol.cholesky_ex_impl(B, False)),
                    peer={"torch.linalg.cholesky_ex": lambda: torch.linalg.cholesky_ex(B)}, flops=_flops(B),
                    ours_name="metal kernels (emulated)"))
    return out


def cases(device: torch.device, quick: bool, kernel: bool = False) -> list[Case]:
    """The issue's workloads on ``device`` (smaller with ``quick``)."""
    out = []
    for kind, workload, A in _workloads(device, quick):
        shape = "x".join(map(str, A.shape))
        peer = {"torch.linalg.cholesky_ex": (lambda A=A: torch.linalg.cholesky_ex(A))}
        out.append(Case(name=f"cholesky_ex {kind} {shape} {_tag(A.dtype)}", workload=workload, device=device,
                        dtype=A.dtype, shape=tuple(A.shape), ours=(lambda A=A: mpslinalg.cholesky_ex(A)), peer=peer,
                        bytes_moved=_bytes(A), flops=_flops(A)))
        out.append(Case(name=f"cholesky_ex {kind} {shape} {_tag(A.dtype)} [own]", workload=workload + " (own)",
                        device=device, dtype=A.dtype, shape=tuple(A.shape), ours=_own_call(A), peer=peer,
                        bytes_moved=_bytes(A), flops=_flops(A), ours_name="mpslinalg (own algorithm)"))
    if kernel and device.type == "cuda":
        out.extend(_kernel_cases(device, quick))
    return out


def _accuracy_report(device: torch.device) -> bool:
    """PASS/FAIL of LAPACK's xPOT01 ratio (< 30) on the first matrices of each workload, both paths."""
    from reference import metrics

    ok = True
    for _kind, _workload, A in _workloads(device, True):
        head = A[:64] if A.ndim == 3 else A
        for label, ctx in (("front door", contextlib.nullcontext()), ("own", _own())):
            with ctx:
                L, info = mpslinalg.cholesky_ex(head)
            r = float(metrics.cholesky_ratio(head.cpu(), L.cpu()).max())
            good = r < metrics.PASS_RATIO and not bool(info.any())
            ok &= good
            print(f"[bench_cholesky] accuracy {label} {tuple(head.shape)} {_tag(A.dtype)}: LAPACK ratio {r:.3g} "
                  f"{'PASS' if good else 'FAIL'}")
    return ok


def _count_dispatches(device: torch.device, n: int) -> None:
    """GPU launches of one kernel-backend ``cholesky`` at ``n`` (profiler)."""
    from torch.profiler import ProfilerActivity, profile

    A = _spd((n, n), torch.float32, device, 10)
    run = _emulated(lambda: chol.cholesky_ex_impl(A, False))
    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    names: dict[str, int] = {}
    for e in events:
        names[e.name[:48]] = names.get(e.name[:48], 0) + 1
    print(f"[bench_cholesky] kernel-backend cholesky n={n}: {len(events)} GPU launches "
          f"(nb = {chol.TUNING.nb}: {-(-n // chol.TUNING.nb)} diagonal blocks)")
    for k, v in sorted(names.items(), key=lambda kv: -kv[1])[:12]:
        print(f"[bench_cholesky]   {v:6d}  {k}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    kernel = "--kernel" in argv
    argv = [a for a in argv if a != "--kernel"]
    status = cli(lambda d, q: cases(d, q, kernel), family="cholesky", argv=argv)
    dev = torch.device("cuda" if any("cuda" in a for a in argv) and torch.cuda.is_available() else "cpu")
    if not _accuracy_report(dev):
        status = status or 1
    if dev.type == "cuda":
        A = _spd((512, 32, 32), torch.float32, dev, 11)
        B = _spd((1024, 1024), torch.float32, dev, 12)
        checks = {"cholesky_ex batched": lambda: mpslinalg.cholesky_ex(A),
                  "cholesky_ex 1024^2": lambda: mpslinalg.cholesky_ex(B),
                  "cholesky_ex batched [own]": _own_call(A), "cholesky_ex 1024^2 [own]": _own_call(B)}
        if not print_host_sync_check(checks, warmup=True):
            status = status or 1
        if kernel:
            try:
                _count_dispatches(dev, 4096)
            except Exception as exc:
                print(f"[bench_cholesky] dispatch count unavailable: {exc}", file=sys.stderr)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
