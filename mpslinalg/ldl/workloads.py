"""The LDL family's rows of the main job (``python -m mpslinalg``): the workloads it stands for, our
call, the ``torch.linalg`` call timed in the same run, and the accuracy check
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
    randn,
    ref_metrics,
)


def _ratio(x: Inputs, out: Any) -> tuple[str, float, float]:
    ratio, _ = ref_metrics().ldl_ratio(head(x["A"]), head(out[0]), head(out[1]))
    return "‖PAPᵀ-LDLᵀ‖/(n‖A‖u)", max_of(ratio), pass_ratio()


def workloads() -> list[Workload]:
    """Bunch–Kaufman LDLᵀ (issue 37): KKT systems of constrained optimization, batched and large."""
    if not implemented("ldl_factor"):
        return []

    def make_batched(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        b = by_device(device, quick, gpu=4096, cpu=256, quick_gpu=512, quick_cpu=32)
        A = randn((b, 32, 32), dtype, device, 65)
        return {"A": A + A.mT}

    def make_large(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        n = by_device(device, quick, gpu=4096, cpu=256, quick_gpu=512, quick_cpu=64)
        A = randn((n, n), dtype, device, 66)
        return {"A": A + A.mT}

    def run(x: Inputs) -> Any:
        return ours("ldl_factor")(x["A"])

    def peer(x: Inputs) -> Any:
        return torch.linalg.ldl_factor(x["A"])

    return [
        Workload(op="ldl_factor", name="ldl_factor float32 batched 32x32",
                 description="KKT systems: Bunch-Kaufman of 4096 x (32x32) symmetric indefinite (torch: a "
                             "per-matrix loop on CUDA)",
                 make=make_batched, ours=run, peer=peer, accuracy=_ratio),
        Workload(op="ldl_factor", name="ldl_factor float32 large",
                 description="scientific: Bunch-Kaufman of one 4096x4096 symmetric indefinite float32",
                 make=make_large, ours=run, peer=peer, accuracy=_ratio),
    ]
