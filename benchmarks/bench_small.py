"""Benchmark of the n <= 4 family (issue 6): batched inverses, determinants and solves.

    python benchmarks/bench_small.py --device cuda --out results/          # the H200 run
    python benchmarks/bench_small.py --device cpu --quick --out results/   # the 2-core CPU

Peers are ``torch.linalg`` on the same inputs, timed in the same run (interleaved); every case
reports the fraction of copy bandwidth it reaches (``bytes_moved`` = input + output bytes, against a
copy of the same bytes timed in the same run). Targets (issue 6): H200 float32 4×4 batch 1e7 >= 10×
``torch.linalg.inv``; CPU float32 4×4 batch 1e6 >= 3×.

On CUDA the torch path is the ``torch.compile``-fused program (compiled once, dynamic batch; the
harness's untimed first call pays the compile). The script also prints PASS/FAIL for "no host
synchronisation" of every ``_ex`` op under ``torch.cuda.set_sync_debug_mode("error")``, and — when
the emulator's cuda target exists — times the Metal kernel ``small_inv`` itself on the GPU, the
figure that says how close the kernel is to memory speed (DESIGN §10). On a Mac (``--device mps``)
rows ``(load=direct)`` / ``(load=staged)`` time the Metal kernels' two load variants, the
measurement that decides ``small.TUNING.load["mps"]`` (docs/ops/small.md, "Load variants").

On the CPU the default torch path is the program printed as C (compiled once, cached); a second
row times ``torch.compile`` of the program (``set_compile("inductor")``; its ~25 s first compile is
paid in the untimed call) and a third the fallback without generated code (``"never"``: LAPACK
wrapped in the same equilibration).
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg  # noqa: E402
from benchmarks.harness import Case, cli, print_host_sync_check  # noqa: E402
from mpslinalg import small  # noqa: E402


def _mats(batch: int, n: int, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n, n, dtype=dtype, generator=g).to(device)


class _Mode:
    """Run a callable under ``small.set_compile(mode)`` (the CPU's alternative rows)."""

    def __init__(self, fn, mode: str):
        self.fn = fn
        self.mode = mode

    def __call__(self):
        prev = small.set_compile(self.mode)
        try:
            return self.fn()
        finally:
            small.set_compile(prev)


class _Load:
    """Run a callable with ``small.TUNING.load[device type] = load`` (the kernels' load variants)."""

    def __init__(self, fn, device: torch.device, load: str):
        self.fn, self.device, self.load = fn, device, load

    def __call__(self):
        table = small.TUNING.load
        prev = table.get(self.device.type)
        table[self.device.type] = self.load
        try:
            return self.fn()
        finally:
            if prev is None:
                del table[self.device.type]
            else:
                table[self.device.type] = prev


def _load_variant_cases(device: torch.device, batch: int) -> list[Case]:
    """On a Mac: inv_ex and det through each load variant of the Metal kernels, so one run says
    which variant the Mac default (``small.TUNING.load["mps"]``) should be (docs/ops/small.md)."""
    out = []
    for n, dtype in [(4, torch.float32), (3, torch.float32), (4, torch.complex64), (3, torch.complex64)]:
        A = _mats(batch, n, dtype, device, seed=20 + n)
        tag = "float32" if dtype == torch.float32 else "complex64"
        for load in ("direct", "staged"):
            out.append(Case(
                name=f"inv_ex {n}x{n} {tag} batch {batch:.0e} (load={load})",
                workload="the Metal kernel's load variant (TUNING.load)",
                device=device, dtype=dtype, shape=tuple(A.shape),
                ours=_Load(lambda A=A: mpslinalg.inv_ex(A), device, load),
                peer={"torch.linalg.inv_ex": (lambda A=A: torch.linalg.inv_ex(A))} if load == "direct" else {},
                bytes_moved=2 * A.nbytes + 4 * batch))
            out.append(Case(
                name=f"det {n}x{n} {tag} batch {batch:.0e} (load={load})",
                workload="the Metal kernel's load variant (TUNING.load)",
                device=device, dtype=dtype, shape=tuple(A.shape),
                ours=_Load(lambda A=A: mpslinalg.det(A), device, load),
                bytes_moved=A.nbytes + A.element_size() * batch))
    return out


def _emulator_kernel_case(A: torch.Tensor, name: str) -> Case | None:
    """The Metal kernel small_inv run by the emulator's cuda target, if that target exists."""
    try:
        with mpslinalg.use_backend("emulator"):
            small.inv_ex_op(A[:64])
    except Exception as exc:  # the cuda target is optional (issue 7)
        print(f"[bench_small] Metal kernel on {A.device} via the emulator: unavailable ({exc})",
              file=sys.stderr)
        return None

    def run():
        with mpslinalg.use_backend("emulator"):
            return mpslinalg.inv_ex(A)

    return Case(name=name, workload="the Metal kernel small_inv itself (emulator cuda target): roofline",
                device=A.device, dtype=A.dtype, shape=tuple(A.shape), ours=run,
                peer={"torch.linalg.inv_ex": lambda: torch.linalg.inv_ex(A)},
                bytes_moved=2 * A.nbytes + 4 * A.shape[0], ours_name="metal kernel (emulated)")


def cases(device: torch.device, quick: bool) -> list[Case]:
    """The issue's workloads on ``device`` (smaller with ``quick``)."""
    gpu = device.type != "cpu"
    out: list[Case] = []
    if gpu:
        inv_batches = [10**5] if quick else [10**6, 10**7]
    else:
        inv_batches = [10**5] if quick else [10**6]

    for batch in inv_batches:
        for n, dtype in [(4, torch.float32), (3, torch.float32), (4, torch.complex64)]:
            A = _mats(batch, n, dtype, device, seed=n)
            tag = "float32" if dtype == torch.float32 else "complex64"
            out.append(Case(
                name=f"inv_ex {n}x{n} {tag} batch {batch:.0e}",
                workload="camera poses (4x4) / homographies, intrinsics (3x3)",
                device=device, dtype=dtype, shape=tuple(A.shape),
                ours=(lambda A=A: mpslinalg.inv_ex(A)),
                peer={"torch.linalg.inv_ex": (lambda A=A: torch.linalg.inv_ex(A))},
                bytes_moved=2 * A.nbytes + 4 * batch))
        if not gpu:
            A = _mats(batch, 4, torch.float32, device, seed=4)
            for mode, what in [("inductor", "torch.compile of the program"),
                               ("never", "no generated code: torch.linalg, the no-compiler fallback")]:
                out.append(Case(
                    name=f"inv_ex 4x4 float32 batch {batch:.0e} ({mode})",
                    workload=f"camera poses, {what}",
                    device=device, dtype=torch.float32, shape=tuple(A.shape),
                    ours=_Mode(lambda A=A: mpslinalg.inv_ex(A), mode),
                    peer={"torch.linalg.inv_ex": (lambda A=A: torch.linalg.inv_ex(A))},
                    bytes_moved=2 * A.nbytes + 4 * batch))

    batch = inv_batches[-1]
    A = _mats(batch, 3, torch.float32, device, seed=7)
    out.append(Case(name=f"slogdet 3x3 float32 batch {batch:.0e}", workload="homography orientation / scale",
                    device=device, dtype=torch.float32, shape=tuple(A.shape),
                    ours=lambda: mpslinalg.slogdet(A),
                    peer={"torch.linalg.slogdet": lambda: torch.linalg.slogdet(A)},
                    bytes_moved=A.nbytes + 8 * batch))
    out.append(Case(name=f"det 3x3 float32 batch {batch:.0e}", workload="homography orientation",
                    device=device, dtype=torch.float32, shape=tuple(A.shape),
                    ours=lambda: mpslinalg.det(A), peer={"torch.linalg.det": lambda: torch.linalg.det(A)},
                    bytes_moved=A.nbytes + 4 * batch))
    A4 = _mats(batch, 4, torch.float32, device, seed=8)
    B4 = torch.randn(batch, 4, 1, device=device)
    out.append(Case(name=f"solve_ex 4x4 float32 batch {batch:.0e}, 1 RHS",
                    workload="point transfer through poses", device=device, dtype=torch.float32,
                    shape=tuple(A4.shape), ours=lambda: small.solve_ex_op(A4, B4, True),
                    peer={"torch.linalg.solve_ex": lambda: torch.linalg.solve_ex(A4, B4)},
                    bytes_moved=A4.nbytes + 2 * B4.nbytes + 4 * batch))

    if device.type == "mps":
        out.extend(_load_variant_cases(device, batch))
    if device.type == "cuda":
        A = _mats(10**5 if quick else 10**7, 4, torch.float32, device, seed=4)
        case = _emulator_kernel_case(A, f"metal small_inv 4x4 float32 batch {A.shape[0]:.0e}")
        if case is not None:
            out.append(case)
    return out


def _no_sync_report(device: torch.device) -> bool:
    """PASS/FAIL: each _ex op runs with torch.cuda.set_sync_debug_mode('error')."""
    A = _mats(1 << 16, 4, torch.float32, device, seed=1)
    B = torch.randn(1 << 16, 4, 2, device=device)
    calls = {"inv_ex": lambda: mpslinalg.inv_ex(A), "solve_ex": lambda: mpslinalg.solve_ex(A, B),
             "det": lambda: mpslinalg.det(A), "slogdet": lambda: mpslinalg.slogdet(A)}
    return print_host_sync_check({f"mpslinalg.{name}": fn for name, fn in calls.items()}, warmup=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    status = cli(cases, family="small", argv=argv)
    if torch.cuda.is_available() and any("cuda" in a for a in argv):
        dev = torch.device("cuda")
        if not _no_sync_report(dev):
            status = status or 1
        print(f"[bench_small] compiled programs: {sorted(small.program._compiled)}; "
              f"compile failures: {sorted(small.program._compile_failed)}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
