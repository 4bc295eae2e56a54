"""Benchmark of the matrix exponential family (issue 32).

    python benchmarks/bench_matrix_exp.py --device cuda --out results/     # the GPU run
    python benchmarks/bench_matrix_exp.py --device cpu --quick --out results/

Peers: ``torch.linalg.matrix_exp`` on the same inputs, timed in the same run. Targets (issue 32,
GPU): float32 4096x8x8 and 4096x32x32 >= 1.5x torch.linalg; 2048^2 >= 1x. Ours runs mpslinalg's
implementation (``routing.ours_always``: the front door's table would otherwise hand CPU/CUDA
calls to torch.linalg). Every case's accuracy (``reference.spectra.expm_ratio`` < 30) is printed.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg  # noqa: E402
from benchmarks.harness import Case, cli  # noqa: E402
from mpslinalg import routing  # noqa: E402


def _mats(shape: tuple, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64) / shape[-1] ** 0.5
    if dtype.is_complex:
        x = torch.complex(x, torch.randn(*shape, generator=g, dtype=torch.float64) / shape[-1] ** 0.5)
    return x.to(dtype).to(device)


def _ours(A: torch.Tensor):
    def run():
        with routing.ours_always():
            return mpslinalg.matrix_exp(A)
    return run


def _flops(A: torch.Tensor) -> float:
    n = A.shape[-1]
    b = A.numel() // (n * n)
    return b * 6 * 2 * n**3 * (4 if A.is_complex() else 1)  # T18: 5 products + ~1 squaring (norm ~2)


def _inputs(device: torch.device, quick: bool):
    gpu = device.type != "cpu"
    b = 4096 if not quick else 512
    big = (2048 if not quick else 512) if gpu else (512 if not quick else 128)
    return [
        ("batched", "Lie groups: 4096 x (8x8)", _mats((b, 8, 8), torch.float32, device, 1)),
        ("batched", "continuous-time models: 4096 x (32x32)", _mats((b, 32, 32), torch.float32, device, 2)),
        ("batched", "unitary evolution: complex 4096 x (32x32)", _mats((b, 32, 32), torch.complex64, device, 3)),
        ("batched tiny", "rotations: 4096 x (3x3)", _mats((b, 3, 3), torch.float32, device, 4)),
        ("large", "scientific: one dense float32", _mats((big, big), torch.float32, device, 5)),
    ]


def cases(device: torch.device, quick: bool) -> list[Case]:
    out = []
    for kind, workload, A in _inputs(device, quick):
        out.append(Case(name=f"matrix_exp {kind} {'x'.join(map(str, A.shape))} {str(A.dtype)[6:]}",
                        workload=workload, device=device, dtype=A.dtype, shape=tuple(A.shape), ours=_ours(A),
                        peer={"torch.linalg.matrix_exp": (lambda A=A: torch.linalg.matrix_exp(A))},
                        bytes_moved=2 * A.nbytes, flops=_flops(A), sync_check=False))
    return out


def _accuracy_report(device: torch.device) -> bool:
    from reference import metrics, spectra

    ok = True
    for _kind, _workload, A in _inputs(device, True):
        head = A[:32] if A.dim() == 3 else A
        r = float(spectra.expm_ratio(head.cpu(), _ours(head)().cpu()).max())
        good = r < metrics.PASS_RATIO
        ok &= good
        print(f"[bench_matrix_exp] accuracy {tuple(head.shape)} {A.dtype}: expm_ratio {r:.3g} "
              f"{'PASS' if good else 'FAIL'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    status = cli(cases, family="matrix_exp", argv=argv)
    dev = torch.device("cuda" if any("cuda" in a for a in argv) and torch.cuda.is_available() else "cpu")
    if not _accuracy_report(dev):
        status = status or 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
