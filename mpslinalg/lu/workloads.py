"""The LU family's rows of the main job (``python -m mpslinalg``): the workloads it stands for, our call,
the ``torch.linalg`` call timed in the same run, and the accuracy check (:mod:`mpslinalg.mainjob.workloads`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..mainjob.workloads import (
    Inputs,
    Workload,
    by_device,
    det_ratio,
    grad_of,
    grad_ratio,
    head,
    head_vec,
    implemented,
    max_of,
    no_complex_inv_on_mps,
    ours,
    pass_ratio,
    randn,
    ref_lapack,
    ref_metrics,
    scipy_linalg,
)


def workloads() -> list[Workload]:
    """LU family (issue 5): factor, solve, det, slogdet, inv."""
    rows: list[Workload] = []
    sl = scipy_linalg

    def make_square(gpu, cpu, quick_gpu, quick_cpu, seed, rhs=None):
        def make(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
            b, n = by_device(device, quick, gpu=gpu, cpu=cpu, quick_gpu=quick_gpu, quick_cpu=quick_cpu)
            shape = (b, n, n) if b else (n, n)
            x = {"A": randn(shape, dtype, device, seed)}
            if rhs is not None:
                x["B"] = randn(shape[:-1] + (rhs,), dtype, device, seed + 1)
            return x
        return make

    def lu_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
        LU, piv = out[0], out[1]
        r = ref_metrics().lu_factor_ratio(head(x["A"]), head(LU), head_vec(piv, LU.dim() - 2))
        return "‖A-PLU‖/(n‖A‖u)", max_of(r), pass_ratio()

    def plu_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
        P, L, U = (head(t) for t in out)
        r = ref_metrics().lu_ratio(head(x["A"]), P, L, U)
        return "‖A-PLU‖/(n‖A‖u)", max_of(r), pass_ratio()

    def solve_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
        r = ref_metrics().solve_ratio(head(x["A"]), head(out), head(x["B"]))
        return "‖B-AX‖/(‖A‖‖X‖u)", max_of(r), pass_ratio()

    if implemented("lu_factor"):
        rows.append(Workload(
            op="lu_factor", name="lu_factor complex64 large", dtype=torch.complex64,
            description="scientific: complex64 LU of one 4096x4096 matrix",
            make=make_square((0, 4096), (0, 512), (0, 1024), (0, 128), 10),
            ours=lambda x: ours("lu_factor")(x["A"]), peer=lambda x: torch.linalg.lu_factor(x["A"]),
            scipy=lambda x: sl().lu_factor(x["A"].numpy(), check_finite=False), accuracy=lu_acc))
        rows.append(Workload(
            op="lu_factor", name="lu_factor complex64 batched 32x32", dtype=torch.complex64,
            description="VMC Slater matrices: 4096 x (32x32) complex64",
            make=make_square((4096, 32), (1024, 32), (512, 32), (64, 32), 12),
            ours=lambda x: ours("lu_factor")(x["A"]), peer=lambda x: torch.linalg.lu_factor(x["A"]),
            accuracy=lu_acc))
    if implemented("lu"):
        rows.append(Workload(
            op="lu", name="lu float32 large",
            description="P, L, U of one 2048x2048 float32 matrix",
            make=make_square((0, 2048), (0, 256), (0, 512), (0, 96), 14),
            ours=lambda x: ours("lu")(x["A"]), peer=lambda x: torch.linalg.lu(x["A"]),
            scipy=lambda x: sl().lu(x["A"].numpy(), check_finite=False), accuracy=plu_acc))
    if implemented("lu_solve"):
        def make_lu_solve(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
            x = make_square((0, 2048), (0, 256), (0, 512), (0, 96), 16, rhs=256)(device, dtype, quick)
            # Both sides solve with the same factors (torch's LAPACK convention), so the row times
            # lu_solve alone.
            x["LU"], x["pivots"] = torch.linalg.lu_factor(x["A"])
            return x
        rows.append(Workload(
            op="lu_solve", name="lu_solve complex64 large", dtype=torch.complex64,
            description="complex64 2048x2048 factors, 256 RHS",
            make=make_lu_solve,
            ours=lambda x: ours("lu_solve")(x["LU"], x["pivots"], x["B"]),
            peer=lambda x: torch.linalg.lu_solve(x["LU"], x["pivots"], x["B"]),
            scipy=lambda x: sl().lu_solve((x["LU"].numpy(), x["pivots"].numpy() - 1), x["B"].numpy(),
                                          check_finite=False),
            accuracy=solve_acc))
    if implemented("solve"):
        rows.append(Workload(
            op="solve", name="solve RANSAC 9x9",
            description="RANSAC DLT: 2048 x (9x9) float32, 1 RHS",
            make=make_square((2048, 9), (2048, 9), (256, 9), (256, 9), 18, rhs=1),
            ours=lambda x: ours("solve")(x["A"], x["B"]), peer=lambda x: torch.linalg.solve(x["A"], x["B"]),
            scipy=lambda x: sl().solve(x["A"].numpy(), x["B"].numpy(), check_finite=False),
            accuracy=solve_acc))
    if implemented("det"):
        def det_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
            d = head_vec(out, out.dim())
            return "relerr(det)/(n kappa u)", det_ratio(head(x["A"]), d.sgn(), d.abs().log()), pass_ratio()
        rows.append(Workload(
            op="det", name="det complex64 batched 32x32", dtype=torch.complex64,
            description="VMC: det of 4096 x (32x32) complex64",
            make=make_square((4096, 32), (1024, 32), (512, 32), (64, 32), 20),
            ours=lambda x: ours("det")(x["A"]), peer=lambda x: torch.linalg.det(x["A"]),
            scipy=lambda x: sl().det(x["A"].numpy(), check_finite=False), accuracy=det_acc))
    if implemented("slogdet"):
        def slogdet_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
            sign, la = out
            bd = sign.dim()
            return ("relerr(det)/(n kappa u)",
                    det_ratio(head(x["A"]), head_vec(sign, bd), head_vec(la, bd)), pass_ratio())
        rows.append(Workload(
            op="slogdet", name="slogdet complex64 VMC 32x32", dtype=torch.complex64,
            description="VMC: 4096 walkers x 16 dets, (32x32) complex64",
            make=make_square((65536, 32), (4096, 32), (1024, 32), (128, 32), 22),
            ours=lambda x: ours("slogdet")(x["A"]), peer=lambda x: torch.linalg.slogdet(x["A"]),
            accuracy=slogdet_acc))
    if implemented("det"):
        def det_grad(det: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[Inputs], torch.Tensor]:
            return grad_of(lambda A: det(A).real.sum())

        def det_grad_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
            A = head(x["A"])
            ref = (ref_lapack().det(A)[..., None, None] * ref_lapack().inv(A).mT).conj()
            return "‖G-G*‖/(‖G*‖n kappa u)", grad_ratio(A, head(out), ref), pass_ratio()
        rows.append(Workload(
            op="det", name="det fwd+bwd complex64 32x32", dtype=torch.complex64,
            description="VMC: gradient of sum Re det over 4096 x (32x32) complex64",
            make=make_square((4096, 32), (1024, 32), (512, 32), (64, 32), 26),
            ours=det_grad(lambda A: ours("det")(A)), peer=det_grad(torch.linalg.det),
            accuracy=det_grad_acc))
    if implemented("slogdet"):
        def slogdet_grad(fn: Callable[[torch.Tensor], Any]) -> Callable[[Inputs], torch.Tensor]:
            return grad_of(lambda A: fn(A)[1].sum())

        def slogdet_grad_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
            A = head(x["A"])
            ref = ref_lapack().inv(A).mH  # d log|det A| = Re tr(A^-1 dA): the gradient is A^-H
            return "‖G-A^-H‖/(‖A^-H‖n kappa u)", grad_ratio(A, head(out), ref), pass_ratio()
        rows.append(Workload(
            op="slogdet", name="slogdet fwd+bwd complex64 VMC", dtype=torch.complex64,
            description="VMC: gradient of sum log|det| over 4096 walkers x 16 dets (32x32) complex64",
            make=make_square((65536, 32), (4096, 32), (1024, 32), (128, 32), 28),
            ours=slogdet_grad(lambda A: ours("slogdet")(A)), peer=slogdet_grad(torch.linalg.slogdet),
            accuracy=slogdet_grad_acc))
    if implemented("inv"):
        def inv_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
            r = ref_metrics().inverse_ratio(head(x["A"]), head(out))
            return "‖I-XA‖/(n‖A‖‖X‖u)", max_of(r), pass_ratio()
        rows.append(Workload(
            op="inv", name="inv complex64 large", dtype=torch.complex64,
            description=f"complex64 inverse of one 1024x1024 matrix ({no_complex_inv_on_mps()})",
            # CPU 512² (lu_factor's CPU size): at 256² torch's getrs against SciPy's getri read
            # 0.81-0.86x, on the slower edge in one run of six (docs/evidence/routing.md, item 20)
            make=make_square((0, 1024), (0, 512), (0, 256), (0, 64), 24),
            ours=lambda x: ours("inv")(x["A"]), peer=lambda x: torch.linalg.inv(x["A"]),
            scipy=lambda x: sl().inv(x["A"].numpy(), check_finite=False), accuracy=inv_acc))
    return rows
