"""``det`` forward + backward (VMC Slater determinants), ours vs ``torch.linalg.det``.

With autograd recording ``mpslinalg.det`` always runs our op (the adjugate gradient at singular
matrices; docs/routing.md). On GPUs its backward reads one flag (any negligible pivot: those
elements get the SVD adjugate); the sync-free rank-1 variant measured 0.47x here. The cases:

* the main job's row (complex64 32x32; 512 matrices quick, 4096 full) and float32;
* the same batch with one exactly singular element (two equal rows): torch's gradient is wrong there
  (zero), ours is the adjugate; the time shows what the correct gradient costs;
* forward only (with autograd recording), to split the cost between the two passes.

On CUDA the runner reports whether ours synchronises (``sync_check``: it does, once, in the
backward) and counts its kernel launches::

    python benchmarks/bench_det_grad.py --device cuda --out results/ [--quick]
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg  # noqa: E402
from benchmarks.harness import Case, cli  # noqa: E402


def _fwd_bwd(det, A):
    def run():
        X = A.detach().requires_grad_()
        return torch.autograd.grad(det(X).real.sum(), X)[0]
    return run


def _fwd(det, A):
    def run():
        return det(A.detach().requires_grad_())
    return run


def cases(device: torch.device, quick: bool) -> list[Case]:
    on_gpu = device.type != "cpu"
    batch = (512 if quick else 4096) if on_gpu else (64 if quick else 1024)
    out = []
    for dtype in (torch.complex64, torch.float32):
        A = torch.randn(batch, 32, 32, dtype=dtype, generator=torch.Generator().manual_seed(26)).to(device)
        S = A.clone()
        S[0, 5] = S[0, 2]  # one exactly singular element (two equal rows)
        shape = tuple(A.shape)
        name = f"{str(dtype).replace('torch.', '')} {batch}x32x32"
        out += [
            Case(name=f"det fwd+bwd {name}", workload="VMC: gradient of sum Re det", device=device, dtype=dtype,
                 shape=shape, ours=_fwd_bwd(mpslinalg.det, A), peer={"torch.linalg": _fwd_bwd(torch.linalg.det, A)}),
            Case(name=f"det fwd+bwd {name}, one singular", workload="the same with one rank n-1 element",
                 device=device, dtype=dtype, shape=shape, ours=_fwd_bwd(mpslinalg.det, S),
                 peer={"torch.linalg (gradient 0 there)": _fwd_bwd(torch.linalg.det, S)}),
            Case(name=f"det fwd only {name}", workload="forward with autograd recording", device=device,
                 dtype=dtype, shape=shape, ours=_fwd(mpslinalg.det, A),
                 peer={"torch.linalg": _fwd(torch.linalg.det, A)}),
        ]
    return out


if __name__ == "__main__":
    raise SystemExit(cli(cases, family="det_grad"))
