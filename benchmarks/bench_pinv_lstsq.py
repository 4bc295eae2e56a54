"""Benchmark of the ops built on the SVD and QR (issue 12): ``pinv`` and every ``lstsq`` driver.

    python benchmarks/bench_pinv_lstsq.py --device cuda --out results/          # the H200 run
    python benchmarks/bench_pinv_lstsq.py --device cpu --quick --out results/   # the 2-core CPU

Peers are ``torch.linalg.pinv`` / ``torch.linalg.lstsq`` with the same driver on the same inputs,
timed in the same run (interleaved). On CUDA torch has only ``'gels'``: the other drivers' peers
raise and are reported as unavailable, ours run. Every case checks on CUDA that ours never
synchronises with the host (``torch.cuda.set_sync_debug_mode("error")``). Target (issue 12): pinv
float32 4096×32×32 >= 2× torch.linalg on the H200.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg  # noqa: E402
from benchmarks.harness import Case, cli  # noqa: E402

DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _randn(shape, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g).to(device)


def _lstsq(fn, A, B, driver):
    return lambda: fn(A, B, driver=driver)


def cases(device: torch.device, quick: bool) -> list[Case]:
    batch = 512 if quick else 4096
    out: list[Case] = []
    for dtype in (torch.float32, torch.complex64):
        A = _randn((batch, 32, 32), dtype, device, 0)
        out.append(Case(
            name=f"pinv {str(dtype)[6:]} {batch}x32x32", workload="pseudo-inverses of batched ill-conditioned data",
            device=device, dtype=dtype, shape=tuple(A.shape),
            ours=lambda A=A: mpslinalg.pinv(A), peer={"torch.linalg": lambda A=A: torch.linalg.pinv(A)},
            bytes_moved=2 * A.nbytes, sync_check=True))
    # square with every driver; overdetermined, the usual least-squares shape (line/plane fits,
    # regression), with the QR and SVD drivers
    for m, n, drivers, workload, seed in ((32, 32, DRIVERS, "batched least squares (driver as named)", 1),
                                          (64, 16, ("gels", "gelsd"), "overdetermined fits", 3)):
        A = _randn((batch, m, n), torch.float32, device, seed)
        B = _randn((batch, m, 4), torch.float32, device, seed + 1)
        for driver in drivers:
            out.append(Case(
                name=f"lstsq {driver} {batch}x{m}x{n} 4 RHS", workload=workload,
                device=device, dtype=torch.float32, shape=f"{tuple(A.shape)} {tuple(B.shape)}",
                ours=_lstsq(mpslinalg.lstsq, A, B, driver),
                peer={"torch.linalg": _lstsq(torch.linalg.lstsq, A, B, driver)},
                bytes_moved=A.nbytes + 2 * B.nbytes, sync_check=True))
    return out


if __name__ == "__main__":
    raise SystemExit(cli(cases, family="pinv_lstsq"))
