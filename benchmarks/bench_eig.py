"""Benchmark of the eig family (issue 32): batched small eigvals/eig (kornia's 10x10), complex
batches, one large matrix.

    python benchmarks/bench_eig.py --device cuda --out results/ --warmup 1 --repeat 3   # the GPU run
    python benchmarks/bench_eig.py --device cpu --quick --out results/                  # the 2-core CPU

Peers: ``torch.linalg.eigvals``/``eig`` on the same inputs, timed in the same run (CUDA events on
cuda; on CUDA torch runs them on the CPU through MAGMA's hybrid geev). Ours runs mpslinalg's
implementation (``routing.ours_always``; the front door's table would hand CPU/CUDA calls to
torch.linalg): on CPU/CUDA that is the torch-op Schur kernel (explicit shifted QR steps, one
batched QR per step). On CUDA, when the emulator's cuda target is available (prebuilt cubins,
``MPSLINALG_CUBIN_DIR``; run_gpu.sh builds them), rows named ``metal ...`` run the family on the
emulator backend: the Schur form by ``metal/eig.metal``'s ``eig_schur_small`` on the GPU (one
dispatch per batch), the rest (balancing, eigenvectors) torch ops on CUDA — the path an Apple GPU
takes, and the one that can meet the batched targets.

Targets (issue 32, GPU, full sizes): eigvals/eig float32 512x10x10 and 4096x10x10 >= 20x,
complex64 batched (4096x10x10) >= 10x, single 1024^2 >= 1x. The 1024^2 rows run ~n QR steps of a
1024^2 matrix per call (seconds each): few repeats (the ``run_gpu`` flags below); if the step
runs past run_gpu.sh's limit, set ``LIMIT_eig=900``. ``--quick`` uses small sizes (the CPU here).
Every case's accuracy is printed after the table: ``max ‖Av − λv‖ / (n ‖A‖ u)`` over the first
matrices (LAPACK's xGET22 ratio, pass mark 100 as in tests/eig) and the eigenvalues' distance to
float64 LAPACK.
"""
# run_gpu: --warmup 1 --repeat 3

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg  # noqa: E402
from benchmarks.harness import Case, cli  # noqa: E402
from mpslinalg import routing  # noqa: E402
from mpslinalg.mainjob.report import best_device  # noqa: E402
from mpslinalg.mainjob.timing import resolve_device  # noqa: E402

_PASS_RESIDUAL = 100  # tests/eig's bound on ‖Av − λv‖ / (n ‖A‖ u) per column


def _mats(shape: tuple, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    if dtype.is_complex:
        x = torch.complex(x, torch.randn(*shape, generator=g, dtype=torch.float64)) / 2**0.5
    return x.to(dtype).to(device)


def _ours(fn, A):
    def run():
        with routing.ours_always():
            return fn(A)
    return run


def _inputs(device: torch.device, quick: bool):
    """``(op, workload, A)``: the issue's target cases at full size; small ones with ``quick``."""
    few, small, large = (16, 32, 24) if quick else (512, 4096, 1024)
    f32, c64 = torch.float32, torch.complex64
    return [
        ("eigvals", "kornia five-point: 512 action matrices", _mats((few, 10, 10), f32, device, 1)),
        ("eigvals", "kornia five-point: 4096 action matrices", _mats((small, 10, 10), f32, device, 2)),
        ("eig", "eigenpairs of 512 x (10x10)", _mats((few, 10, 10), f32, device, 3)),
        ("eig", "eigenpairs of 4096 x (10x10)", _mats((small, 10, 10), f32, device, 4)),
        ("eigvals", "complex spectra 4096 x (10x10)", _mats((small, 10, 10), c64, device, 5)),
        ("eig", "complex eigenpairs 4096 x (10x10)", _mats((small, 10, 10), c64, device, 6)),
        ("eigvals", "scientific: one dense float32", _mats((large, large), f32, device, 7)),
    ]


def _name(op: str, A: torch.Tensor) -> str:
    return f"{op} {'x'.join(map(str, A.shape))} {str(A.dtype)[6:]}"


def _emulated(fn, A):
    def run():
        with mpslinalg.use_backend("emulator"), routing.ours_always():
            return fn(A)
    return run


def _kernel_cases(device: torch.device, quick: bool) -> list[Case]:
    """The batched cases with the Metal kernel through the emulator's cuda target (if available)."""
    if device.type != "cuda":
        return []
    probe = _mats((2, 10, 10), torch.float32, device, 0)
    try:
        _emulated(mpslinalg.eigvals, probe)()
    except Exception as exc:  # the cuda target is optional (issue 7)
        print(f"[bench_eig] Metal kernel on {device} via the emulator: unavailable ({exc})", file=sys.stderr)
        return []
    out = []
    for op, workload, A in _inputs(device, quick)[:-1]:  # the batched ones (n <= 64)
        peer = getattr(torch.linalg, op)
        out.append(Case(name="metal " + _name(op, A), workload=workload + " (eig_schur_small, emulator cuda target)",
                        device=device, dtype=A.dtype, shape=tuple(A.shape), ours=_emulated(getattr(mpslinalg, op), A),
                        peer={f"torch.linalg.{op}": (lambda A=A, peer=peer: peer(A))}, bytes_moved=2 * A.nbytes,
                        sync_check=False, ours_name="metal kernel (emulated)"))  # eig's error check reads info
    return out


def cases(device: torch.device, quick: bool) -> list[Case]:
    out = _kernel_cases(device, quick)
    for op, workload, A in _inputs(device, quick):
        ours = getattr(mpslinalg, op)
        peer = getattr(torch.linalg, op)
        out.append(Case(name=_name(op, A), workload=workload, device=device, dtype=A.dtype, shape=tuple(A.shape),
                        ours=_ours(ours, A), peer={f"torch.linalg.{op}": (lambda A=A, peer=peer: peer(A))},
                        bytes_moved=2 * A.nbytes, sync_check=False))  # ours reads convergence on the host
    return out


def _accuracy_report(device: torch.device, quick: bool, only: list[str]) -> bool:
    from reference import spectra

    ok = True
    kernel = bool(_kernel_cases(device, True))
    for op, _workload, A in _inputs(device, quick):
        if only and not any(s in _name(op, A) for s in only):
            continue
        head = A[:8] if A.dim() == 3 else A
        paths = [("", lambda X: _ours(mpslinalg.eig, X)())]
        if head.dim() == 3 and kernel:
            paths.append(("metal ", lambda X: _emulated(mpslinalg.eig, X)()))
        for tag, run in paths:
            L, V = run(head)
            r = float(spectra.eig_residual_ratio(head.cpu(), L.cpu(), V.cpu()).max())
            d = float(spectra.eigvals_distance(L.cpu(), spectra.eig(head.cpu())[0]).max())
            good = r < _PASS_RESIDUAL
            ok &= good
            print(f"[bench_eig] accuracy {tag}{_name(op, head)}: max ‖Av−λv‖/(n‖A‖u) {r:.3g} "
                  f"{'PASS' if good else 'FAIL'}; eigenvalues vs float64 LAPACK {d:.3g}")
    return ok


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    status = cli(cases, family="eig", argv=argv)
    if status == 2:
        return status
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--device", default="auto")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", action="append", default=[])
    args, _ = p.parse_known_args(argv)
    dev = resolve_device(best_device() if args.device == "auto" else args.device)
    if not _accuracy_report(dev, args.quick, args.only):
        status = status or 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
