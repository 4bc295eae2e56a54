"""The SVD family's rows of the main job (``python -m mpslinalg``): the workloads it stands for, our call,
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
    wide,
)


def workloads() -> list[Workload]:
    """Jacobi SVD and what sits on it: svd, svdvals, pinv, lstsq (QR/SVD issue)."""
    rows: list[Workload] = []
    sl = scipy_linalg

    if implemented("svd"):
        def make(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
            b = by_device(device, quick, gpu=4096, cpu=512, quick_gpu=512, quick_cpu=64)
            return {"A": randn((b, 32, 32), dtype, device, 50)}

        def acc(x: Inputs, out: Any) -> tuple[str, float, float]:
            ratios = ref_metrics().svd_ratios(head(x["A"]), head(out[0]), head_vec(out[1], out[1].dim() - 1),
                                           head(out[2]))
            ratios = ratios if isinstance(ratios, tuple) else (ratios,)
            worst = max(max_of(r) for r in ratios)
            return "max(‖A-USVh‖/(m‖A‖u), ‖I-UhU‖/(m u), ‖I-VhV‖/(n u))", worst, pass_ratio()

        rows.append(Workload(
            op="svd", name="svd float32 batched 32x32", description="batched SVD: 4096 x (32x32) float32",
            make=make, ours=lambda x: ours("svd")(x["A"], full_matrices=False),
            peer=lambda x: torch.linalg.svd(x["A"], full_matrices=False),
            scipy=lambda x: sl().svd(x["A"].numpy(), full_matrices=False, check_finite=False),
            accuracy=acc))

        def make_8pt(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
            b = by_device(device, quick, gpu=100000, cpu=4096, quick_gpu=4096, quick_cpu=256)
            return {"A": randn((b, 8, 9), dtype, device, 51)}

        rows.append(Workload(
            op="svd", name="svd float32 batched 8x9",
            description="camera geometry: 8-point systems, 100000 x (8x9) float32, full V (null vector)",
            make=make_8pt, ours=lambda x: ours("svd")(x["A"]),
            peer=lambda x: torch.linalg.svd(x["A"]), accuracy=acc))

    if implemented("svdvals"):
        def make_vals(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
            n = by_device(device, quick, gpu=2048, cpu=256, quick_gpu=512, quick_cpu=64)
            return {"A": randn((n, n), dtype, device, 52)}

        def acc_vals(x: Inputs, out: Any) -> tuple[str, float, float]:
            # Weyl: a backward-stable SVD computes the exact singular values of A + E with
            # ||E||_2 <= c n u ||A||_2, so |s~_i - s_i| <= c n u s_1; ratio = max|ds| / (n u s_1).
            A = head(x["A"])
            ref = torch.linalg.svdvals(wide(A))
            s = head_vec(out, out.dim() - 1).double()
            u = ref_metrics().unit_roundoff(A.dtype)
            n = max(A.shape[-2:])
            return "max abs(ds)/(n u s1)", max_of((s - ref).abs().amax(-1) / (n * u * ref[..., 0])), pass_ratio()

        rows.append(Workload(
            op="svdvals", name="svdvals float32 large",
            description="scientific: singular values of one 2048x2048 float32",
            make=make_vals, ours=lambda x: ours("svdvals")(x["A"]),
            peer=lambda x: torch.linalg.svdvals(x["A"]),
            scipy=lambda x: sl().svdvals(x["A"].numpy(), check_finite=False), accuracy=acc_vals))

    def make_tall(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        m, n = by_device(device, quick, gpu=(4096, 512), cpu=(512, 128),
                     quick_gpu=(1024, 256), quick_cpu=(128, 32))
        return {"A": randn((m, n), dtype, device, 54), "B": randn((m, 16), dtype, device, 55)}

    if implemented("pinv"):
        def acc_pinv(x: Inputs, out: Any) -> tuple[str, float, float]:
            # A Gaussian tall A has full column rank (kappa ~ (sqrt m + sqrt n)/(sqrt m - sqrt n)),
            # so X = A^+ is a left inverse: LAPACK's inverse ratio |I - XA|/(n |A| |X| u) applies.
            A, X = wide(head(x["A"])), wide(head(out))
            n = A.shape[-1]
            eye = torch.eye(n, dtype=A.dtype)
            u = ref_metrics().unit_roundoff(x["A"].dtype)
            num = torch.linalg.matrix_norm(eye - X @ A, ord=1)
            den = n * torch.linalg.matrix_norm(A, ord=1) * torch.linalg.matrix_norm(X, ord=1) * u
            return "‖I-XA‖/(n‖A‖‖X‖u)", max_of(num / den), pass_ratio()

        rows.append(Workload(
            op="pinv", name="pinv float32 tall", description="pseudo-inverse of a 4096x512 float32",
            make=make_tall, ours=lambda x: ours("pinv")(x["A"]), peer=lambda x: torch.linalg.pinv(x["A"]),
            scipy=lambda x: sl().pinv(x["A"].numpy(), check_finite=False), accuracy=acc_pinv))

    if implemented("lstsq"):
        def acc_lstsq(x: Inputs, out: Any) -> tuple[str, float, float]:
            # LAPACK xQRT17-style: a backward-stable solution solves (A + dA) X = B + dB in the least
            # squares sense with |dA| <= c u |A|, |dB| <= c u |B|, so the normal-equation residual
            # |A^H (B - AX)| <= c u |A| (|A||X| + |B|) (+ a term |dA||R| <= u |A||B|).
            A, B = wide(head(x["A"])), wide(head(x["B"]))
            X = wide(head(out[0] if isinstance(out, tuple) else out.solution))
            u = ref_metrics().unit_roundoff(x["A"].dtype)
            nrm = lambda t: torch.linalg.matrix_norm(t, ord=1)  # noqa: E731
            num = nrm(A.mH @ (B - A @ X))
            den = max(A.shape[-2:]) * nrm(A) * (nrm(A) * nrm(X) + nrm(B)) * u
            return "‖A^H(B-AX)‖/(m‖A‖(‖A‖‖X‖+‖B‖)u)", max_of(num / den), pass_ratio()

        rows.append(Workload(
            op="lstsq", name="lstsq float32 tall", description="least squares 4096x512, 16 RHS",
            make=make_tall, ours=lambda x: ours("lstsq")(x["A"], x["B"]),
            peer=lambda x: torch.linalg.lstsq(x["A"], x["B"]),
            scipy=lambda x: sl().lstsq(x["A"].numpy(), x["B"].numpy(), check_finite=False),
            accuracy=acc_lstsq))
    return rows


def cpu_path_line() -> str:
    """Which implementation serves the CPU's SVD (the C Jacobi, or LAPACK's SVD at every size where
    no compiler is there: issue 15, the report says so)."""
    from .c import cpu_path
    from .kernels import TUNING

    path = cpu_path()
    if path != "C Jacobi":
        return f"{path} (no C compiler: torch.linalg's absolute accuracy, not the C Jacobi's relative accuracy)"
    return f"{path} (n <= {TUNING.jacobi_max.get('cpu', 0)}; LAPACK's SVD above)"


def environment() -> list[tuple[str, str, str]]:
    """The environment block's line for the SVD family."""
    return [("svd_cpu_path", "svd       CPU runs as:", cpu_path_line())]
