"""The QR family's rows of the main job (``python -m mpslinalg``): the workloads it stands for, our call,
the ``torch.linalg`` call timed in the same run, and the accuracy check (:mod:`mpslinalg.mainjob.workloads`)."""

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
    scipy_linalg,
)


def workloads() -> list[Workload]:
    """Householder QR (QR/SVD issue)."""
    if not implemented("qr"):
        return []

    def make(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        n = by_device(device, quick, gpu=4096, cpu=512, quick_gpu=1024, quick_cpu=96)
        return {"A": randn((n, n), dtype, device, 40)}

    def acc(x: Inputs, out: Any) -> tuple[str, float, float]:
        res, orth = ref_metrics().qr_ratios(head(x["A"]), head(out[0]), head(out[1]))
        return "max(‖A-QR‖/(m‖A‖u), ‖I-QhQ‖/(m u))", max(max_of(res), max_of(orth)), pass_ratio()

    def make_batched(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        b = by_device(device, quick, gpu=4096, cpu=512, quick_gpu=512, quick_cpu=64)
        return {"A": randn((b, 32, 32), dtype, device, 41)}

    def make_tall(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        m = by_device(device, quick, gpu=10**6, cpu=50000, quick_gpu=10**5, quick_cpu=5000)
        return {"A": randn((m, 32), dtype, device, 42)}

    def run(x: Inputs) -> Any:
        return ours("qr")(x["A"])

    def peer(x: Inputs) -> Any:
        return torch.linalg.qr(x["A"])

    return [
        Workload(op="qr", name="qr float32 large", description="scientific: QR of one 4096x4096 float32",
                 make=make, ours=run, peer=peer,
                 # mode="economic" is torch.linalg.qr's default "reduced": the same Q and R (square A);
                 # SciPy's default "full" also copies the factors into a C-ordered Q first (issue 15)
                 scipy=lambda x: scipy_linalg().qr(x["A"].numpy(), mode="economic", check_finite=False),
                 accuracy=acc),
        Workload(op="qr", name="qr float32 batched 32x32",
                 description="batched Householder QR of 4096 x (32x32) (torch: a per-matrix loop)",
                 make=make_batched, ours=run, peer=peer, accuracy=acc),
        Workload(op="qr", name="qr complex64 batched 32x32", dtype=torch.complex64,
                 description="batched complex QR of 4096 x (32x32)", make=make_batched, ours=run, peer=peer,
                 accuracy=acc),
        Workload(op="qr", name="qr float32 tall-skinny", description="Householder TSQR of 1e6 x 32 (reduced)",
                 make=make_tall, ours=run, peer=peer, accuracy=acc),
    ]
