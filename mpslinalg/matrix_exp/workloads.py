"""The matrix exponential's rows of the main job (``python -m mpslinalg``): the workloads it stands for,
our call, the ``torch.linalg`` call timed in the same run, and the accuracy check
(:mod:`mpslinalg.mainjob.workloads`)."""

from __future__ import annotations

from typing import Any

import torch

from ..mainjob.workloads import (
    Inputs,
    Workload,
    by_device,
    head,
    implemented,
    max_of,
    ours,
    pass_ratio,
    ref_oracle,
    scipy_linalg,
)


def _scaled(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    """Gaussian entries over sqrt(n): 2-norms near 2, the range of Lie-algebra parameters (pypose)
    and continuous-time generators times a step."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, dtype=dtype, generator=g) / shape[-1] ** 0.5
    return x.to(device)


def workloads() -> list[Workload]:
    """matrix_exp rows (issue 32): batched small, and one large."""
    if not implemented("matrix_exp"):
        return []

    def batched(n: int, seed: int):
        def make(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
            b = by_device(device, quick, gpu=4096, cpu=1024, quick_gpu=512, quick_cpu=64)
            return {"A": _scaled((b, n, n), dtype, device, seed)}
        return make

    def make_large(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        n = by_device(device, quick, gpu=2048, cpu=512, quick_gpu=512, quick_cpu=128)
        return {"A": _scaled((n, n), dtype, device, 62)}

    def acc(x: Inputs, out: Any) -> tuple[str, float, float]:
        A = head(x["A"])
        A = A[:32] if A.dim() > 2 else A  # the reference's 2-norms and expm are per matrix in float64
        E = head(out)
        E = E[:32] if E.dim() > 2 else E
        return ("‖E-exp A‖F/(n u ‖exp A‖F κ̄)", max_of(ref_oracle("spectra").expm_ratio(A, E)), pass_ratio())

    def run(x: Inputs) -> Any:
        return ours("matrix_exp")(x["A"])

    def peer(x: Inputs) -> Any:
        return torch.linalg.matrix_exp(x["A"])

    return [
        Workload(op="matrix_exp", name="matrix_exp float32 batched 8x8",
                 description="Lie groups / orthogonal parametrizations: exp of 4096 x (8x8)",
                 make=batched(8, 60), ours=run, peer=peer, accuracy=acc),
        Workload(op="matrix_exp", name="matrix_exp float32 batched 32x32",
                 description="continuous-time models: exp of 4096 x (32x32)",
                 make=batched(32, 61), ours=run, peer=peer, accuracy=acc),
        Workload(op="matrix_exp", name="matrix_exp complex64 batched 32x32", dtype=torch.complex64,
                 description="unitary evolution: exp of 4096 x (32x32) complex", make=batched(32, 63), ours=run,
                 peer=peer, accuracy=acc),
        Workload(op="matrix_exp", name="matrix_exp float32 large", description="scientific: exp of one 2048x2048",
                 make=make_large, ours=run, peer=peer,
                 scipy=lambda x: scipy_linalg().expm(x["A"].numpy()), accuracy=acc),
    ]
