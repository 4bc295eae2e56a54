"""Benchmark of the eigh family (issue 31): batched 3x3 covariances, batched Jacobi sizes, complex64
batched, large n, and the relative-accuracy sweep on graded positive-definite inputs.

    python benchmarks/bench_eigh.py --device cuda --out results/ --warmup 1 --repeat 5   # the H100/H200 run
    python benchmarks/bench_eigh.py --device cpu --quick --out results/                  # the 2-core CPU

Peers are ``torch.linalg.eigh`` on the same inputs, timed in the same run (CUDA events, median of
repeats after warm-up: ``benchmarks/harness.py``). Targets (issue 31, H200 torch.linalg: float32
4096x32x32 2.46 ms, 2048^2 25.1 ms): float32 100000x3x3 >= 10x, 4096x32x32 >= 2x, 4096x64x64 >= 10x
(torch loops per matrix there), complex64 batched >= 2x; float32 2048^2 and 4096^2 >= 1x. The front
door runs ours at every size here (``routing.ours_always``): the rows measure our implementation,
not the "never slower" table.

On CUDA, when the emulator's cuda target is available (prebuilt cubins, ``MPSLINALG_CUBIN_DIR``), a
row times the Metal kernels themselves on the GPU (``eigh_small`` on 100000x3x3, ``eigh_jacobi`` on
4096x32x32). The relative-accuracy sweep prints, per (n, decades), the worst relative eigenvalue error
of ours and of torch.linalg against mpmath on the same graded inputs, and writes
``eigh_accuracy_<device>.json``.

``--count-dispatches`` (alone) prints, on the emulator backend, the kernel launches and torch ops of
one float32 ``eigh`` at n = 512 and 1024 with each large-n reduction (``Tuning.reduction``:
``two_stage``, ``sytrd``): the structural count that carries over to a Mac (docs/ops/roofline.md).
The CPU wall time printed with it is the emulator's, not a speed claim.
"""

from __future__ import annotations

import importlib
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg  # noqa: E402
from benchmarks.harness import Case, cli, print_host_sync_check  # noqa: E402
from mpslinalg import routing  # noqa: E402

# run_gpu: --warmup 1 --repeat 5

eighmod = importlib.import_module("mpslinalg.eigh")


def _hermitian(shape: tuple, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_complex:
        A = torch.view_as_complex(torch.randn(*shape, 2, generator=g) / 2**0.5)
    else:
        A = torch.randn(*shape, generator=g, dtype=dtype)
    return (A + A.mH).to(device)


def _covariances(b: int, device: torch.device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    P = torch.randn(b, 16, 3, generator=g)
    P = P - P.mean(-2, keepdim=True)
    return (P.mT @ P / 16).to(device)


def _tag(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _ours(A: torch.Tensor):
    def run():
        with routing.ours_always():
            return mpslinalg.eigh(A)
    return run


def _emulated(fn):
    def run():
        with mpslinalg.use_backend("emulator"):
            return fn()
    return run


def _workloads(device: torch.device, quick: bool) -> list[tuple[str, torch.Tensor]]:
    gpu = device.type != "cpu"
    full = gpu and not quick
    b3 = 100000 if full else (10000 if gpu else 2000)
    bj = 4096 if full else (512 if gpu else 64)
    rows = [
        ("point-cloud normals: 3x3 covariances", _covariances(b3, device, 1)),
        ("batched Jacobi: SOAP/Shampoo preconditioner blocks", _hermitian((bj, 32, 32), torch.float32, device, 2)),
        ("batched Jacobi past torch's n = 32 bound", _hermitian((bj, 64, 64), torch.float32, device, 3)),
        ("complex Hermitian batch (VMC)", _hermitian((bj, 32, 32), torch.complex64, device, 4)),
        ("scientific: one dense symmetric", _hermitian((2048 if full else 256,) * 2, torch.float32, device, 5)),
    ]
    if full:
        rows.append(("scientific: one dense symmetric", _hermitian((4096, 4096), torch.float32, device, 6)))
    return rows


def _kernel_cases(device: torch.device, quick: bool) -> list[Case]:
    """The Metal kernels through the emulator's cuda target (if it is available here)."""
    A3 = _covariances(10000 if quick else 100000, device, 7)
    A32 = _hermitian((512 if quick else 4096, 32, 32), torch.float32, device, 8)
    try:
        _emulated(lambda: eighmod.eigh_impl(A3[:8], "L", True))()
    except Exception as exc:  # the cuda target is optional (issue 7)
        print(f"[bench_eigh] Metal kernels on {device} via the emulator: unavailable ({exc})", file=sys.stderr)
        return []
    out = []
    for A, kern in ((A3, "eigh_small"), (A32, "eigh_jacobi")):
        out.append(Case(name=f"metal {kern} eigh {'x'.join(map(str, A.shape))} float32",
                        workload=f"the Metal kernel {kern} (emulator cuda target)", device=device,
                        dtype=torch.float32, shape=tuple(A.shape),
                        ours=_emulated(lambda A=A: eighmod.eigh_impl(A, "L", True)),
                        peer={"torch.linalg.eigh": lambda A=A: torch.linalg.eigh(A)},
                        bytes_moved=3 * A.nbytes, ours_name="metal kernels (emulated)"))
    return out


def cases(device: torch.device, quick: bool) -> list[Case]:
    """The issue's workloads on ``device`` (smaller with ``quick``)."""
    out = []
    for workload, A in _workloads(device, quick):
        n = A.shape[-1]
        b = A.numel() // (n * n)
        out.append(Case(
            name=f"eigh {'x'.join(map(str, A.shape))} {_tag(A.dtype)}", workload=workload, device=device,
            dtype=A.dtype, shape=tuple(A.shape), ours=_ours(A),
            peer={"torch.linalg.eigh": (lambda A=A: torch.linalg.eigh(A))},
            bytes_moved=3 * A.nbytes,
            flops=b * 9.0 * n**3 * (4 if A.is_complex() else 1)))  # ~9n³: tridiagonalise + QL + back-transform
    if device.type == "cuda":
        out.extend(_kernel_cases(device, quick))
    return out


def accuracy_sweep(device: torch.device, quick: bool) -> list[dict]:
    """Worst relative eigenvalue error, ours vs torch.linalg, on graded positive-definite ``D M D``
    (``reference.matrices.graded_hpd``) against mpmath (``reference.mp.eigvalsh``), with the
    Demmel–Veselić bound ``n u κ(M)`` our Jacobi meets (float32: u = 2⁻²⁴)."""
    from reference import matrices, metrics, mp

    rows = []
    sizes = (3, 8, 16) if quick else (3, 8, 16, 32, 64)
    for dtype in (torch.float32, torch.complex64):
        u = metrics.unit_roundoff(dtype)
        for n in sizes:
            for decades in (8, 16, 24):
                A, kappa = matrices.graded_hpd(n, decades=decades, batch=(2 if quick else 4,), dtype=dtype,
                                               seed=n * 100 + decades)
                ref = mp.eigvalsh(A, dps=30)
                Ad = A.to(device)
                with routing.ours_always():
                    w = mpslinalg.eigvalsh(Ad).cpu().double()
                wt = torch.linalg.eigvalsh(Ad).cpu().double()
                rel = float(((w - ref).abs() / ref.abs()).max())
                rel_t = float(((wt - ref).abs() / ref.abs()).max())
                bound = n * u * float(torch.as_tensor(kappa).max())
                rows.append({"dtype": _tag(dtype), "n": n, "decades": decades, "ours": rel, "torch.linalg": rel_t,
                             "bound n*u*kappa": bound, "ours_within_bound": rel <= bound})
                print(f"[bench_eigh] relative accuracy {_tag(dtype)} n={n:3d} {decades:2d} decades: ours {rel:.2e}, "
                      f"torch.linalg {rel_t:.2e}, bound n·u·κ {bound:.2e} {'PASS' if rel <= bound else 'FAIL'}")
    worst = max(r["ours"] for r in rows)
    worst_t = max(r["torch.linalg"] for r in rows)
    print(f"[bench_eigh] worst relative eigenvalue error over the graded sweep: ours {worst:.2e}, "
          f"torch.linalg {worst_t:.2e}")
    return rows


def count_dispatches(sizes=(512, 1024)) -> list[dict]:
    """Rows ``{n, reduction, kernels, torch_ops, products, total}`` of one emulator ``eigh`` each."""
    import time

    from benchmarks.dispatches import Dispatches
    from mpslinalg.kernels import use_backend

    eigh_kernels = importlib.import_module("mpslinalg.eigh.kernels")
    saved = dict(eigh_kernels.TUNING.reduction["metal"])
    rows = []
    try:
        for n in sizes:
            A = _hermitian((1, n, n), torch.float32, torch.device("cpu"), 11)
            for red in ("two_stage", "sytrd"):
                eigh_kernels.TUNING.reduction["metal"][torch.float32] = red
                with use_backend("emulator"), routing.ours_always():
                    mpslinalg.eigh(A[:, :80, :80].contiguous())  # compile outside the count
                    t = time.perf_counter()
                    with Dispatches() as c:
                        mpslinalg.eigh(A)
                    wall = time.perf_counter() - t
                prods = sum(v for k, v in c.ops.items() if k in ("mm", "bmm", "baddbmm", "addmm"))
                rows.append(dict(n=n, reduction=red, kernels=sum(c.kernels.values()), torch_ops=sum(c.ops.values()),
                                 products=prods, total=c.total))
                print(f"[bench_eigh] emulator eigh n={n} {red}: {rows[-1]['kernels']} kernels + "
                      f"{rows[-1]['torch_ops']} torch ops ({prods} products) = {c.total} dispatches "
                      f"(emulator CPU wall {wall:.1f} s, not a speed claim)", flush=True)
    finally:
        eigh_kernels.TUNING.reduction["metal"] = saved
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--count-dispatches" in argv:
        count_dispatches()
        return 0
    status = cli(cases, family="eigh", argv=argv)
    dev = torch.device("cuda" if any("cuda" in a for a in argv) and torch.cuda.is_available() else "cpu")
    quick = "--quick" in argv
    rows = accuracy_sweep(dev, quick)
    if not all(r["ours_within_bound"] for r in rows):
        status = status or 1
    out = pathlib.Path(argv[argv.index("--out") + 1] if "--out" in argv else "results")
    out.mkdir(parents=True, exist_ok=True)
    (out / f"eigh_accuracy_{dev.type}.json").write_text(json.dumps(rows, indent=1))
    if dev.type == "cuda":
        A = _hermitian((512, 32, 32), torch.float32, dev, 9)
        C = _covariances(10000, dev, 10)
        with routing.ours_always():
            checks = {"eigh_ex batched 32x32": lambda: mpslinalg.eigh_ex(A),
                      "eigh_ex 3x3 covariances": lambda: mpslinalg.eigh_ex(C)}
            if not print_host_sync_check(checks, warmup=True):
                status = status or 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
