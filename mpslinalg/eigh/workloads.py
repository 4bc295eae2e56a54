"""The eigh family's rows of the main job (``python -m mpslinalg``): the workloads it stands for, our call,
the ``torch.linalg`` call timed in the same run, and the accuracy check (:mod:`mpslinalg.mainjob.workloads`)."""

from __future__ import annotations

from typing import Any

import torch

from ..mainjob.workloads import (
    Inputs,
    Workload,
    by_device,
    head,
    head_vec,
    implemented,
    max_of,
    ours,
    pass_ratio,
    randn,
    ref_metrics,
    scipy_linalg,
)


def _hermitian(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    A = randn(shape, dtype, device, seed)
    return A + A.mH


def workloads() -> list[Workload]:
    """Hermitian eigensolver (issue 31): point-cloud normals (batched 3x3), batched Jacobi sizes, large n."""
    if not implemented("eigh"):
        return []

    def acc(x: Inputs, out: Any) -> tuple[str, float, float]:
        recon, orth = ref_metrics().eigh_ratios(head(x["A"]), head_vec(out[0], x["A"].dim() - 2), head(out[1]))
        return "max(‖A-VΛVᴴ‖/(n‖A‖u), ‖I-VᴴV‖/(n u))", max(max_of(recon), max_of(orth)), pass_ratio()

    def make_cov(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        b = by_device(device, quick, gpu=100000, cpu=20000, quick_gpu=10000, quick_cpu=1000)
        P = randn((b, 16, 3), dtype, device, 50)  # 16-point neighbourhoods: their 3x3 covariances
        P = P - P.mean(-2, keepdim=True)
        return {"A": P.mT @ P / 16}

    def make_batched(n: int):
        def make(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
            b = by_device(device, quick, gpu=4096, cpu=256, quick_gpu=512, quick_cpu=32)
            return {"A": _hermitian((b, n, n), dtype, device, 51 + n)}

        return make

    def make_large(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        n = by_device(device, quick, gpu=2048, cpu=256, quick_gpu=512, quick_cpu=96)
        return {"A": _hermitian((n, n), dtype, device, 52)}

    def run(x: Inputs) -> Any:
        return ours("eigh")(x["A"])

    def peer(x: Inputs) -> Any:
        return torch.linalg.eigh(x["A"])

    return [
        Workload(op="eigh", name="eigh float32 batched 3x3",
                 description="point-cloud normals: eigh of 100000 3x3 covariances", make=make_cov,
                 ours=run, peer=peer, accuracy=acc),
        Workload(op="eigh", name="eigh float32 batched 32x32",
                 description="batched Jacobi: 4096 x (32x32) (torch's batched Jacobi bound)",
                 make=make_batched(32), ours=run, peer=peer, accuracy=acc),
        Workload(op="eigh", name="eigh float32 batched 64x64",
                 description="batched Jacobi: 4096 x (64x64) (torch: a per-matrix loop)", make=make_batched(64),
                 ours=run, peer=peer, accuracy=acc),
        Workload(op="eigh", name="eigh complex64 batched 32x32", dtype=torch.complex64,
                 description="complex Hermitian 4096 x (32x32)", make=make_batched(32), ours=run, peer=peer,
                 accuracy=acc),
        Workload(op="eigh", name="eigh float32 large",
                 description="scientific: eigh of one 2048x2048 symmetric (tridiagonal path)", make=make_large,
                 ours=run, peer=peer,
                 scipy=lambda x: scipy_linalg().eigh(x["A"].numpy(), lower=True, check_finite=False),
                 accuracy=acc),
    ]
