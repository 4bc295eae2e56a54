"""Self-benchmark of the harness: a matmul against itself, a batched matmul, and a copy.

Ours and the "peer" are the same call, so their ratio must read ~1.0: that checks the interleaved
timing is unbiased (no first-runs-cold or last-runs-warm effect). The matmul rows report their
fraction of the GEMM rate measured in the same run, the copy row its fraction of copy bandwidth;
both should be ~100%. On CUDA the H200 nominal peaks (4.8 TB/s, 67 TFLOP/s float32) are reported
beside them in the JSON.

    python benchmarks/bench_matmul.py --device cpu --quick --out results/
    python benchmarks/bench_matmul.py --device cuda --out results/
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

from benchmarks.harness import Case, cli  # noqa: E402


def cases(device: torch.device, quick: bool) -> list[Case]:
    """Matmul vs itself (+ NumPy on the CPU), a 4096 x 64x64 bmm, and a copy."""
    gpu = device.type != "cpu"
    n = (1024 if quick else 4096) if gpu else (256 if quick else 1024)
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    peers = {"torch.matmul (same call)": lambda: a @ b}
    if device.type == "cpu":
        an, bn = a.numpy(), b.numpy()
        peers["numpy"] = lambda: an @ bn
    out = [Case(name=f"matmul {n}", workload="harness self-check: the same call as ours and peer",
                device=device, dtype=torch.float32, shape=(n, n), ours=lambda: a @ b, peer=peers,
                flops=2.0 * n**3, bytes_moved=3 * a.nbytes)]

    batch = (4096 if not quick else 512) if gpu else (512 if not quick else 64)
    x = torch.randn(batch, 64, 64, device=device)
    y = torch.randn(batch, 64, 64, device=device)
    out.append(Case(name=f"bmm {batch}x64x64", device=device,
                    workload="the GEMM shape of the batched 64x64 triangular solve",
                    dtype=torch.float32, shape=(batch, 64, 64), ours=lambda: x @ y,
                    peer={"torch.bmm": lambda: torch.bmm(x, y)}, flops=2.0 * batch * 64**3,
                    bytes_moved=3 * x.nbytes))

    mib = (1024 if not quick else 128) if gpu else (64 if not quick else 8)
    z = torch.randn(mib * 2**20 // 4, device=device)
    out.append(Case(name=f"clone {mib} MiB", workload="memory bandwidth: clone vs empty_like + copy_",
                    device=device, dtype=torch.float32, shape=f"{mib} MiB", ours=lambda: z.clone(),
                    peer={"empty_like+copy_": lambda: torch.empty_like(z).copy_(z)},
                    bytes_moved=2 * z.nbytes))
    return out


if __name__ == "__main__":
    raise SystemExit(cli(cases, family="matmul"))
