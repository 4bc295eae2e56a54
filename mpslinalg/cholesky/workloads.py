"""The Cholesky family's rows of the main job (``python -m mpslinalg``): the workloads it stands for
(Gaussian processes, MultivariateNormal, Levenberg-Marquardt normal equations), our call, the
``torch.linalg`` call timed in the same run, and LAPACK's ``xPOT01`` ratio
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
    scipy_linalg,
)


def _spd(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    """``X Xᴴ / n + I`` of a seeded Gaussian ``X`` (κ₂ <= 5: Marchenko-Pastur), drawn on the CPU."""
    n = shape[-1]
    X = randn(shape, dtype, torch.device("cpu"), seed)
    return (X @ X.mH / n + torch.eye(n, dtype=dtype)).to(device)


def workloads() -> list[Workload]:
    """Cholesky family (issue 30): factorization of batched small and single large matrices."""
    if not implemented("cholesky_ex"):
        return []

    def make(gpu, cpu, quick_gpu, quick_cpu, seed):
        def build(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
            b, n = by_device(device, quick, gpu=gpu, cpu=cpu, quick_gpu=quick_gpu, quick_cpu=quick_cpu)
            return {"A": _spd((b, n, n) if b else (n, n), dtype, device, seed)}
        return build

    def acc(x: Inputs, out: Any) -> tuple[str, float, float]:
        L, info = out
        r = max_of(ref_metrics().cholesky_ratio(head(x["A"]), head(L)))
        failed = bool((info.reshape(-1)[:256] != 0).any())  # positive definite by construction
        return "‖A-LLᴴ‖/(n‖A‖u)", float("inf") if failed else r, pass_ratio()

    def run(x: Inputs) -> Any:
        return ours("cholesky_ex")(x["A"])

    def peer(x: Inputs) -> Any:
        return torch.linalg.cholesky_ex(x["A"])

    return [
        Workload(op="cholesky_ex", name="cholesky float32 batched 32x32",
                 description="GP / MultivariateNormal covariances: 4096 x (32x32) float32",
                 make=make((4096, 32), (1024, 32), (512, 32), (64, 32), 60), ours=run, peer=peer, accuracy=acc),
        Workload(op="cholesky_ex", name="cholesky float32 batched 64x64",
                 description="LM / UKF normal equations: 4096 x (64x64) float32",
                 make=make((4096, 64), (512, 64), (512, 64), (32, 64), 61), ours=run, peer=peer, accuracy=acc),
        Workload(op="cholesky_ex", name="cholesky complex64 batched 32x32", dtype=torch.complex64,
                 description="complex covariances: 4096 x (32x32) complex64",
                 make=make((4096, 32), (1024, 32), (512, 32), (64, 32), 62), ours=run, peer=peer, accuracy=acc),
        Workload(op="cholesky_ex", name="cholesky float32 large",
                 description="exact GP regression: one 8192x8192 float32 kernel matrix",
                 make=make((0, 8192), (0, 1024), (0, 2048), (0, 256), 63), ours=run, peer=peer,
                 scipy=lambda x: scipy_linalg().cholesky(x["A"].numpy(), lower=True, check_finite=False),
                 accuracy=acc),
    ]
