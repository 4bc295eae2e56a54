"""Benchmark of the QR family (issue 11): batched small, tall-skinny and large QR.

    python benchmarks/bench_qr.py --device cuda --out results/ --warmup 1 --repeat 3   # the H200 run
    python benchmarks/bench_qr.py --device cpu --quick --out results/                  # the 2-core CPU

Peers are ``torch.linalg.qr`` on the same inputs, timed in the same run. Targets (issue 11, H200):
float32 4096x32x32 <= 1 ms (torch.linalg 334 ms: a per-matrix loop), 100000x3x4 <= 0.5 ms
(torch 6.1 s), complex64 4096x32x32 too; tall-skinny float32 1e6x32 reduced >= 3x torch.linalg
(5.94 ms); float32 4096^2 >= 1x (28.5 ms), complex64 4096^2 >= 1x (44.0 ms). The peer of the
100000x3x4 case takes seconds per call: use few repeats on the GPU (``--warmup 1 --repeat 3``).

On CUDA, when the emulator's cuda target is available (prebuilt cubins, ``MPSLINALG_CUBIN_DIR``),
two rows time the Metal kernels themselves on the GPU: ``qr_small`` on 4096x32x32 (its fraction of
copy bandwidth is what carries over to an Apple GPU) and one kernel-backend ``qr`` at n = 1024
(``qr_panel`` + matrix products) against cuSOLVER; ``--count-dispatches`` prints the launches of a
kernel-backend ``qr`` at n = 4096 per panel. Every ``qr`` row is also checked for host syncs and
its LAPACK ratios are printed (PASS/FAIL).
"""
# run_gpu: --warmup 1 --repeat 3 --count-dispatches


from __future__ import annotations

import importlib
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg  # noqa: E402
from benchmarks.harness import Case, cli, print_host_sync_check  # noqa: E402

qrmod = importlib.import_module("mpslinalg.qr")


def _mats(shape: tuple, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_complex:
        real = torch.randn(*shape, 2, generator=g) / 2**0.5
        return torch.view_as_complex(real).to(device)
    return torch.randn(*shape, generator=g, dtype=dtype).to(device)


def _tag(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _qr_bytes(A: torch.Tensor) -> int:
    m, n = A.shape[-2:]
    k = min(m, n)
    per = A.element_size() * (A.numel() // (m * n))
    return per * (m * n + m * k + k * n)  # read A, write Q and R


def _qr_flops(A: torch.Tensor) -> float:
    m, n = A.shape[-2:]
    k = min(m, n)
    b = A.numel() // (m * n)
    # geqrf 2mn^2 - 2n^3/3 plus orgqr of the same count (LAPACK's op counts), complex x4
    f = 2 * (2 * m * n * k - 2 * k**3 / 3)
    return b * f * (4 if A.is_complex() else 1)


def _emulated(fn):
    def run():
        with mpslinalg.use_backend("emulator"):
            return fn()
    return run


def _kernel_cases(device: torch.device, quick: bool) -> list[Case]:
    """The Metal kernels through the emulator's cuda target (if it is available here)."""
    A = _mats((4096, 32, 32), torch.float32, device, 7)
    try:
        _emulated(lambda: qrmod.geqrf_impl(A[:8]))()
    except Exception as exc:  # the cuda target is optional (issue 7)
        print(f"[bench_qr] Metal kernels on {device} via the emulator: unavailable ({exc})", file=sys.stderr)
        return []
    n = 256 if quick else 1024
    B = _mats((n, n), torch.float32, device, 8)
    return [
        Case(name="metal qr_small geqrf 4096x32x32 float32", workload="the Metal kernel qr_small (emulator cuda "
             "target): fraction of copy bandwidth", device=device, dtype=torch.float32, shape=tuple(A.shape),
             ours=_emulated(lambda: qrmod.geqrf_impl(A)), peer={"torch.geqrf": lambda: torch.geqrf(A)},
             bytes_moved=2 * A.nbytes + 4 * 4096 * 32, ours_name="metal kernel (emulated)"),
        Case(name=f"metal-backend qr {n}x{n} float32", workload="qr_panel + larfb matrix products "
             "(emulator cuda target) vs cuSOLVER", device=device, dtype=torch.float32, shape=tuple(B.shape),
             ours=_emulated(lambda: qrmod.qr_impl(B, "reduced")), peer={"torch.linalg.qr": lambda: torch.linalg.qr(B)},
             flops=_qr_flops(B), ours_name="metal kernels (emulated)"),
    ]


def _workloads(device: torch.device, quick: bool) -> list[tuple[str, str, torch.Tensor]]:
    gpu = device.type != "cpu"
    big = 4096 if gpu and not quick else (1024 if gpu else 256)
    tall = 10**6 if gpu and not quick else (10**5 if gpu else 20000)
    b32 = 4096 if not quick else 512
    b34 = 100000 if gpu and not quick else 10000
    return [
        ("batched small", "VMC / local frames: 4096 x (32x32)", _mats((b32, 32, 32), torch.float32, device, 1)),
        ("batched small", "complex 32x32 batch", _mats((b32, 32, 32), torch.complex64, device, 2)),
        ("batched tiny", "camera: RQ of 3x4 projection matrices", _mats((b34, 3, 4), torch.float32, device, 3)),
        ("tall-skinny", "least squares / SVD preconditioning, m >> n", _mats((tall, 32), torch.float32, device, 4)),
        ("large", "scientific: one dense float32 QR", _mats((big, big), torch.float32, device, 5)),
        ("large", "scientific: one dense complex64 QR", _mats((big, big), torch.complex64, device, 6)),
    ]


def cases(device: torch.device, quick: bool) -> list[Case]:
    """The issue's workloads on ``device`` (smaller with ``quick``)."""
    out = []
    for kind, workload, A in _workloads(device, quick):
        out.append(Case(
            name=f"qr {kind} {'x'.join(map(str, A.shape))} {_tag(A.dtype)}", workload=workload,
            device=device, dtype=A.dtype, shape=tuple(A.shape),
            ours=(lambda A=A: mpslinalg.qr(A)), peer={"torch.linalg.qr": (lambda A=A: torch.linalg.qr(A))},
            bytes_moved=_qr_bytes(A), flops=_qr_flops(A)))
    if device.type == "cuda":
        out.extend(_kernel_cases(device, quick))
    return out


def _accuracy_report(device: torch.device, quick: bool) -> bool:
    """PASS/FAIL of LAPACK's xQRT01 ratios (< 30) on the first matrices of each workload."""
    from reference import metrics

    ok = True
    for _kind, _workload, A in _workloads(device, True):
        head = A[:64] if A.ndim == 3 else A
        Q, R = mpslinalg.qr(head)
        res, orth = metrics.qr_ratios(head.cpu(), Q.cpu(), R.cpu())
        r = max(float(res.max()), float(orth.max()))
        good = r < metrics.PASS_RATIO
        ok &= good
        print(f"[bench_qr] accuracy qr {tuple(head.shape)} {_tag(A.dtype)}: max LAPACK ratio {r:.3g} "
              f"{'PASS' if good else 'FAIL'}")
    return ok


def _count_dispatches(device: torch.device, n: int) -> None:
    """Kernel launches of one kernel-backend ``qr`` at ``n`` (profiler), per panel of ``nb``."""
    from torch.profiler import ProfilerActivity, profile

    A = _mats((n, n), torch.float32, device, 9)
    run = _emulated(lambda: qrmod.qr_impl(A, "reduced"))
    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    names: dict[str, int] = {}
    for e in events:
        key = "qr_panel (Metal)" if "qr_panel" in e.name else ("qr_small (Metal)" if "qr_small" in e.name
                                                                else e.name[:40])
        names[key] = names.get(key, 0) + 1
    panels = -(-n // qrmod.TUNING.nb)
    print(f"[bench_qr] kernel-backend qr n={n}: {len(events)} GPU launches, {panels} panels "
          f"({len(events) / panels:.1f} per panel; geqrf + orgqr)")
    for k, v in sorted(names.items(), key=lambda kv: -kv[1])[:12]:
        print(f"[bench_qr]   {v:6d}  {k}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    count = "--count-dispatches" in argv
    argv = [a for a in argv if a != "--count-dispatches"]
    status = cli(cases, family="qr", argv=argv)
    dev = torch.device("cuda" if any("cuda" in a for a in argv) and torch.cuda.is_available() else "cpu")
    quick = "--quick" in argv
    if not _accuracy_report(dev, quick):
        status = status or 1
    if dev.type == "cuda":
        A = _mats((512, 32, 32), torch.float32, dev, 1)
        T = _mats((200000, 32), torch.float32, dev, 2)
        L = _mats((512, 512), torch.complex64, dev, 3)
        checks = {"qr batched 32x32": lambda: mpslinalg.qr(A), "qr tall-skinny (TSQR)": lambda: mpslinalg.qr(T),
                  "qr 512^2 complex64": lambda: mpslinalg.qr(L), "geqrf batched": lambda: mpslinalg.geqrf(A)}
        if not print_host_sync_check(checks, warmup=True):
            status = status or 1
        if count:
            try:
                _count_dispatches(dev, 4096)
            except Exception as exc:
                print(f"[bench_qr] dispatch count unavailable: {exc}", file=sys.stderr)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
