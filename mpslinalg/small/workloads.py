"""The n <= 4 family's rows of the main job (``python -m mpslinalg``): the workloads it stands for, our call,
the ``torch.linalg`` call timed in the same run, and the accuracy check (:mod:`mpslinalg.mainjob.workloads`)."""

from __future__ import annotations

from typing import Any

import torch

from ..mainjob.workloads import (
    Inputs,
    Workload,
    by_device,
    det_ratio,
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


def workloads() -> list[Workload]:
    """Batched <= 4x4 inverses (issue 6): camera poses."""
    if not implemented("inv"):
        return []

    def make(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        b = by_device(device, quick, gpu=10**6, cpu=10**5, quick_gpu=10**5, quick_cpu=10**4)
        # A rigid pose [R t; 0 1] is perfectly conditioned; camera stacks also carry intrinsics and
        # scale, so use Gaussian 4x4 matrices (kappa ~ 10..1e3, occasionally more), the harder case.
        return {"A": randn((b, 4, 4), dtype, device, 30)}

    def acc(x: Inputs, out: Any) -> tuple[str, float, float]:
        r = ref_metrics().inverse_ratio(head(x["A"]), head(out))
        return "‖I-XA‖/(n‖A‖‖X‖u)", max_of(r), pass_ratio()

    rows = [Workload(
        op="inv", name="inv 4x4 batched",
        description="camera poses: inverse of 1e6 x (4x4) float32",
        make=make, ours=lambda x: ours("inv")(x["A"]), peer=lambda x: torch.linalg.inv(x["A"]),
        scipy=lambda x: scipy_linalg().inv(x["A"].numpy(), check_finite=False), accuracy=acc)]

    def make3(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        b = by_device(device, quick, gpu=10**6, cpu=10**5, quick_gpu=10**5, quick_cpu=10**4)
        return {"A": randn((b, 3, 3), dtype, device, 31)}

    rows.append(Workload(
        op="inv", name="inv 3x3 complex64 batched", dtype=torch.complex64,
        description="complex 3x3 inverses, 1e6 x (3x3) complex64 (no complex inv on MPS in torch)",
        make=make3, ours=lambda x: ours("inv")(x["A"]), peer=lambda x: torch.linalg.inv(x["A"]),
        accuracy=acc))
    if implemented("slogdet"):
        def slogdet_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
            A = head(x["A"])
            return ("|det-det_ref|/(|det_ref| n kappa u)",
                    det_ratio(A, head_vec(out[0], 1), head_vec(out[1], 1)), pass_ratio())
        rows.append(Workload(
            op="slogdet", name="slogdet 3x3 batched",
            description="homographies: sign and log|det| of 1e6 x (3x3) float32",
            make=make3, ours=lambda x: ours("slogdet")(x["A"]), peer=lambda x: torch.linalg.slogdet(x["A"]),
            accuracy=slogdet_acc))
    return rows


def environment() -> list[tuple[str, str, str]]:
    """The environment block's line: which implementation serves n <= 4 float32 CPU batches
    (generated C, or torch.linalg where no compiler is there: issue 15)."""
    from . import cpu_path

    return [("small_cpu_path", "n <= 4    CPU batches run as:", cpu_path())]
