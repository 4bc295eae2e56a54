"""Triangular solves's rows of the main job (``python -m mpslinalg``): the workloads it stands for, our call,
the ``torch.linalg`` call timed in the same run, and the accuracy check (:mod:`mpslinalg.mainjob.workloads`)."""

from __future__ import annotations

from collections.abc import Callable
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
    ref_matrices,
    ref_metrics,
    scipy_linalg,
)


def workloads() -> list[Workload]:
    """Triangular solves (issue 4): DeltaNet's chunked UT transform and a batched 64x64 solve."""
    if not implemented("solve_triangular"):
        return []

    def make_deltanet(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        # Gated DeltaNet / Qwen3-Next torch path, chunk 64, key dim 128: the unit lower UT-transform
        # matrix of each chunk (reference.matrices documents the construction), solved twice per
        # layer with 128 right-hand sides.
        batch = by_device(device, quick, gpu=(1, 32, 16), cpu=(1, 8, 4), quick_gpu=(1, 8, 4), quick_cpu=(1, 2, 2))
        T = ref_matrices().triangular(64, upper=False, unit=True, kind="deltanet", key_dim=128, batch=batch,
                                   dtype=dtype, seed=4)
        return {"A": T.to(device), "B": randn((*batch, 64, 128), dtype, device, 5)}

    def make_batched(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        b = by_device(device, quick, gpu=4096, cpu=512, quick_gpu=512, quick_cpu=64)
        # Lower triangles with kappa_2 = 100 (R^H of a matrix with that condition number): the
        # residual ratio does not depend on kappa for a backward-stable solver, the forward error
        # would; a Gaussian triangle (kappa ~ 2^n) is the stress test of the family's own tests.
        L = ref_matrices().triangular(64, upper=False, kind="well", kappa=100.0, batch=b, dtype=dtype, seed=6)
        return {"A": L.to(device), "B": randn((b, 64, 64), dtype, device, 7)}

    def acc(upper: bool, unit: bool) -> Callable[[Inputs, Any], tuple[str, float, float]]:
        def f(x: Inputs, out: Any) -> tuple[str, float, float]:
            r = ref_metrics().triangular_residual_ratio(head(x["A"]), head(out), head(x["B"]),
                                                     upper=upper, left=True, unitriangular=unit)
            return "‖B-TX‖/(‖T‖‖X‖u)", max_of(r), pass_ratio()
        return f

    def sp(unit: bool):
        return lambda x: scipy_linalg().solve_triangular(x["A"].numpy(), x["B"].numpy(), lower=True,
                                                          unit_diagonal=unit, check_finite=False)

    # SciPy's OpenBLAS strtrs slows with the shared machine's state far more than torch's MKL trsm
    # (DeltaNet 1.06-1.44x over six full runs of 2026-12-02, passes of one run 1.12-1.47x): each row's
    # own run-to-run drift against SciPy, by the columns' method over those six runs
    # (compare_verdicts.py --row-drift), against the column's 0.045 (Workload.drift)

    return [
        Workload(
            op="solve_triangular", name="solve_triangular deltanet",
            description="DeltaNet chunk UT transform: [1,32,16,64,64] unit lower, 128 RHS",
            make=make_deltanet,
            ours=lambda x: ours("solve_triangular")(x["A"], x["B"], upper=False, unitriangular=True),
            peer=lambda x: torch.linalg.solve_triangular(x["A"], x["B"], upper=False, unitriangular=True),
            scipy=sp(True), accuracy=acc(False, True), drift={"scipy": 0.103}),
        Workload(
            op="solve_triangular", name="solve_triangular batched 64x64",
            description="4096 x (64x64) lower, 64 RHS",
            make=make_batched,
            ours=lambda x: ours("solve_triangular")(x["A"], x["B"], upper=False),
            peer=lambda x: torch.linalg.solve_triangular(x["A"], x["B"], upper=False),
            scipy=sp(False), accuracy=acc(False, False), drift={"scipy": 0.105}),
    ]
