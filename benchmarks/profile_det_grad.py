"""Where the time of one ``det`` forward + backward goes: torch.profiler tables, ours and torch.linalg's.

``benchmarks/bench_det_grad.py`` gives the ratio and the launch count (H200 round 1: 69 kernels for
ours against torch's, 0.47x at complex64 512x32x32). This prints, per call, each op's host time and
its kernels' device time, so the ops that cost launches can be fused::

    python benchmarks/profile_det_grad.py [--device cuda] [--batch 512] [--dtype complex64]
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import mpslinalg  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--dtype", default="complex64", choices=["complex64", "float32"])
    p.add_argument("--calls", type=int, default=20)
    args = p.parse_args(argv)
    dev = torch.device(args.device)
    A = torch.randn(args.batch, 32, 32, dtype=getattr(torch, args.dtype),
                    generator=torch.Generator().manual_seed(26)).to(dev)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    sort = "self_cuda_time_total" if dev.type == "cuda" else "self_cpu_time_total"
    for name, det in (("mpslinalg.det", mpslinalg.det), ("torch.linalg.det", torch.linalg.det)):
        def call(det=det):
            X = A.detach().requires_grad_()
            return torch.autograd.grad(det(X).real.sum(), X)[0]

        for _ in range(3):
            call()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        with profile(activities=activities) as prof:
            for _ in range(args.calls):
                call()
            if dev.type == "cuda":
                torch.cuda.synchronize()
        print(f"\n## {name}: {args.calls} calls of fwd+bwd, {args.dtype} {args.batch}x32x32 on {dev}\n")
        print(prof.key_averages().table(sort_by=sort, row_limit=40, max_name_column_width=60))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
