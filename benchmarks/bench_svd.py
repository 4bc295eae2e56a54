"""Benchmark of the SVD core (issue 12): batched camera-geometry sizes, 32x32/64x64 batches, and
one large matrix, against ``torch.linalg.svd`` in the same run.

    python benchmarks/bench_svd.py --device cuda --out results/ --warmup 1 --repeat 5   # the H200
    python benchmarks/bench_svd.py --device cpu --quick --out results/                   # 2-core CPU

Targets (issue 12, H200, torch.linalg measured 2026-12-01): float32 100000x3x3 >= 20x (19.1 ms),
100000x8x9 >= 10x (35.4 ms), 4096x32x32 >= 2x (4.45 ms), complex64 4096x64x64 <= 20 ms (6.7 s),
float32 2048^2 >= 1x (217 ms). On CUDA, when the emulator's cuda target is available
(``MPSLINALG_CUBIN_DIR``), extra rows run the Metal kernels (``svd_jacobi_small``/``_round``) on the
GPU. ``--profile`` prints where the time of one call goes (Jacobi rounds vs the rest). Every case's
LAPACK ratios are printed (PASS/FAIL) and ``svd_ex`` is checked for host syncs.
"""

from __future__ import annotations

import importlib
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg  # noqa: E402
from benchmarks.harness import Case, cli, print_host_sync_check  # noqa: E402

svdmod = importlib.import_module("mpslinalg.svd")


def _mats(shape: tuple, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_complex:
        return torch.view_as_complex(torch.randn(*shape, 2, generator=g) / 2**0.5).to(device)
    return torch.randn(*shape, generator=g, dtype=dtype).to(device)


def _tag(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


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


def _emulated(fn):
    def run():
        with mpslinalg.use_backend("emulator"):
            return fn()
    return run


def _eager(fn):
    def run():
        saved, svdmod.TUNING.compile_max = svdmod.TUNING.compile_max, 0
        try:
            return fn()
        finally:
            svdmod.TUNING.compile_max = saved
    return run


def cases(device: torch.device, quick: bool) -> list[Case]:
    """The issue's workloads on ``device`` (smaller with ``quick``)."""
    out = []
    kernels = device.type == "cuda" and _cuda_target(device)
    for workload, A in _workloads(device, quick):
        name = f"svd {'x'.join(map(str, A.shape))} {_tag(A.dtype)}"
        out.append(Case(name=name, workload=workload, device=device, dtype=A.dtype, shape=tuple(A.shape),
                        ours=(lambda A=A: mpslinalg.svd(A, full_matrices=False)),
                        peer={"torch.linalg.svd": (lambda A=A: torch.linalg.svd(A, full_matrices=False))}))
        if device.type == "cuda" and A.ndim == 3 and A.shape[-1] <= svdmod.TUNING.compile_max:
            out.append(Case(name=name + " (eager sweeps)", workload="torch ops without torch.compile",
                            device=device, dtype=A.dtype, shape=tuple(A.shape),
                            ours=_eager(lambda A=A: mpslinalg.svd(A, full_matrices=False)),
                            peer={"torch.linalg.svd": (lambda A=A: torch.linalg.svd(A, full_matrices=False))},
                            ours_name="mpslinalg eager"))
        if kernels and A.ndim == 3 and A.shape[-1] <= 64:
            out.append(Case(name=name + " (Metal kernels)", workload="svd.metal via the emulator cuda target",
                            device=device, dtype=A.dtype, shape=tuple(A.shape),
                            ours=_emulated(lambda A=A: mpslinalg.svd_ex(A, full_matrices=False)),
                            peer={"torch.linalg.svd": (lambda A=A: torch.linalg.svd(A, full_matrices=False))},
                            ours_name="metal kernels (emulated)"))
    return out


def _cuda_target(device: torch.device) -> bool:
    try:
        _emulated(lambda: svdmod.svd_impl(_mats((2, 4, 4), torch.float32, device, 0), False, True))()
        return True
    except Exception as exc:  # the cuda target is optional
        print(f"[bench_svd] Metal kernels on {device} via the emulator: unavailable ({exc})", file=sys.stderr)
        return False


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
              f"{'PASS' if good else 'FAIL'}")
    return ok


def _profile(device: torch.device) -> None:
    """Share of one call's GPU time in the Jacobi rounds, per workload."""
    from torch.profiler import ProfilerActivity, profile

    for _workload, A in _workloads(device, False)[:5]:
        mpslinalg.svd(A, full_matrices=False)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            mpslinalg.svd(A, full_matrices=False)
            torch.cuda.synchronize()
        table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=8)
        print(f"[bench_svd] profile {tuple(A.shape)} {_tag(A.dtype)}\n{table}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    prof = "--profile" in argv
    argv = [a for a in argv if a != "--profile"]
    status = cli(cases, family="svd", argv=argv)
    dev = torch.device("cuda" if any("cuda" in a for a in argv) and torch.cuda.is_available() else "cpu")
    if not _accuracy_report(dev):
        status = status or 1
    if dev.type == "cuda":
        A = _mats((512, 8, 9), torch.float32, dev, 1)
        C = _mats((64, 40, 40), torch.complex64, dev, 2)
        if not print_host_sync_check({"svd_ex 8x9": lambda: mpslinalg.svd_ex(A),
                                      "svd_ex complex 40x40": lambda: mpslinalg.svd_ex(C)}, warmup=True):
            status = status or 1
        if prof:
            _profile(dev)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
