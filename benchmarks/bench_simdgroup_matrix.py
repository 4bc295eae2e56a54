"""What ``simdgroup_matrix`` costs in the emulator's cuda target (issue 16, "Apple's matrix hardware").

Batched 32x32x32 products C += A @ B, one threadgroup of 4 simdgroups per matrix, from the emulator's
test kernels (``tests/emulator/kernels/simdgroup_matrix.metal``) through the cuda target:

* ``gemm32_tg``: A and B staged in threadgroup memory, 8x8 simdgroup_matrix loads and
  multiply-accumulates (the shape a Metal kernel written for Apple's matrix units takes);
* ``gemm32_dev``: simdgroup_matrix loads straight from device memory;
* ``gemm32_scalar``: the same staging, plain scalar products (the baseline without the matrix type);

each eager (with ``torch.baddbmm``, cuBLAS, as the peer in the same run) and as the replay of a
CUDA graph of 10 launches (the kernel's own GPU time), with the fraction of the float32 GEMM rate
and of the copy bandwidth measured in the same run. On the H200 the matrix type is emulated with
warp shuffles (docs/emulator-cuda.md), so the ratio tg/scalar says what the emulation costs the
proxy timings of kernels that use it, not what Apple's matrix units deliver.

    python -m mpslinalg.emulator build --target cuda --out .cubins     # where clang is
    python benchmarks/bench_simdgroup_matrix.py --device cuda --out results/   # on the GPU
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

from benchmarks.bench_roofline import _graphed  # noqa: E402
from benchmarks.harness import Case, cli  # noqa: E402

_KERNELS = pathlib.Path(__file__).resolve().parents[1] / "tests" / "emulator" / "kernels" / "simdgroup_matrix.metal"


def cases(device: torch.device, quick: bool) -> list[Case]:
    from mpslinalg import emulator

    target = "cuda" if device.type == "cuda" else "cpu"
    lib = emulator.compile_shader(_KERNELS.read_text(), target=target)
    G = 256 if target == "cpu" else 4096 if quick else 65536  # the cpu target runs fibers: small
    gen = torch.Generator(device=device).manual_seed(0)
    A, B, C = (torch.randn(G, 32, 32, generator=gen, device=device) for _ in range(3))
    p_tg = [32, 32, 32, 0, 1, 1024, 1024, 1024]  # lda, ldb, ldc, B transposed, barrier, strides
    p_dev = [32, 32, 32, 1024, 1024, 1024]
    kernels = {
        "gemm32_tg (simdgroup_matrix, threadgroup memory)": (lib.gemm32_tg, p_tg),
        "gemm32_dev (simdgroup_matrix, device memory)": (lib.gemm32_dev, p_dev),
        "gemm32_scalar (no simdgroup_matrix)": (lib.gemm32_scalar, p_tg),
    }
    out = []
    for label, (kernel, p) in kernels.items():
        for graphed in (False, True) if target == "cuda" else (False,):
            case = Case(
                name=f"{label} {G}x32x32x32",
                workload="block products of the triangular / LU kernels on Apple's matrix units",
                device=device,
                dtype=torch.float32,
                shape=(G, 32, 32),
                ours=lambda k=kernel, p=p: k(A, B, C, p, threads=128 * G, group_size=128),
                peer={} if graphed else {"torch.baddbmm": lambda: torch.baddbmm(C, A, B, out=C)},
                bytes_moved=4 * A.nbytes,  # A, B and C read, C written
                flops=2 * 32**3 * G + 32**2 * G,
                ours_name="Metal kernel (cuda target)",
            )
            out.append(_graphed(case) if graphed else case)
    return out


if __name__ == "__main__":
    raise SystemExit(cli(cases, family="simdgroup_matrix"))
