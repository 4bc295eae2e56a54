"""The eig family's rows of the main job (``python -m mpslinalg``): the workloads it stands for, our call,
the ``torch.linalg`` call timed in the same run, and the accuracy check
(:mod:`mpslinalg.mainjob.workloads`)."""

from __future__ import annotations

from typing import Any

import torch

from ..mainjob.workloads import Inputs, Workload, by_device, head, implemented, max_of, ours, pass_ratio, randn
from ..mainjob.workloads import ref_oracle as _oracle


def workloads() -> list[Workload]:
    """eig/eigvals rows (issue 32): kornia's batched 10x10 action matrices, complex batches, one large."""
    if not implemented("eig"):
        return []

    def batched(n: int, seed: int):
        def make(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
            b = by_device(device, quick, gpu=4096, cpu=512, quick_gpu=512, quick_cpu=32)
            return {"A": randn((b, n, n), dtype, device, seed)}
        return make

    def make_large(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        n = by_device(device, quick, gpu=1024, cpu=256, quick_gpu=256, quick_cpu=48)
        return {"A": randn((n, n), dtype, device, 72)}

    def acc_eig(x: Inputs, out: Any) -> tuple[str, float, float]:
        A, L, V = head(x["A"])[:32], head(out[0].unsqueeze(-1)).squeeze(-1)[:32], head(out[1])[:32]
        if x["A"].dim() == 2:
            A, L, V = head(x["A"]), out[0].detach().cpu(), out[1].detach().cpu()
        return "max ‖Av−λv‖/(n‖A‖u)", max_of(_oracle("spectra").eig_residual_ratio(A, L, V)), 100.0

    def acc_vals(x: Inputs, out: Any) -> tuple[str, float, float]:
        spectra = _oracle("spectra")
        A = head(x["A"])
        A = A[:32] if A.dim() > 2 else A
        L = out.detach().cpu().reshape(-1, A.shape[-1])[: (A.numel() // A.shape[-1] ** 2)].reshape(*A.shape[:-1])
        w, _, kv = spectra.eig(A)
        u = 2.0**-24
        n = A.shape[-1]
        scale = kv * n * u * A.to(torch.complex128).abs().sum(-2).amax(-1)
        return ("max |λ−λ64|/(κ(V) n u ‖A‖)", max_of(spectra.eigvals_distance(L, w) / scale[..., None]), pass_ratio())

    rows = []
    for name, n, dtype, seed, desc in [
        ("eigvals float32 batched 10x10", 10, torch.float32, 70, "kornia five-point: eigenvalues of 4096 x (10x10)"),
        ("eigvals complex64 batched 16x16", 16, torch.complex64, 71, "physics: spectra of 4096 x (16x16) complex"),
    ]:
        rows.append(Workload(op="eigvals", name=name, description=desc, make=batched(n, seed), dtype=dtype,
                             ours=lambda x: ours("eigvals")(x["A"]), peer=lambda x: torch.linalg.eigvals(x["A"]),
                             accuracy=acc_vals))
    rows.append(Workload(op="eig", name="eig float32 batched 10x10", description="eigenpairs of 4096 x (10x10)",
                         make=batched(10, 73), ours=lambda x: ours("eig")(x["A"]),
                         peer=lambda x: torch.linalg.eig(x["A"]), accuracy=acc_eig))
    rows.append(Workload(op="eig", name="eig float32 large", description="scientific: eigenpairs of one 1024x1024",
                         make=make_large, ours=lambda x: ours("eig")(x["A"]),
                         peer=lambda x: torch.linalg.eig(x["A"]), accuracy=acc_eig))
    return rows
