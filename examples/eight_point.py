"""Batched 8-point fundamental matrices and DLT homographies with ``mpslinalg.svd`` (RANSAC-style).

A RANSAC loop draws thousands of minimal samples and solves each by an SVD:

1. **8-point algorithm** (Hartley): 8 correspondences ``x₁ ↔ x₂`` (normalised coordinates) give
   an 8x9 system ``A f = 0``; ``f`` is the last right singular vector, reshaped to ``F`` (3x3),
   then **rank 2 is enforced** through a second SVD (``σ₃ ← 0``);
2. **DLT homography**: 4 correspondences of a plane give an 8x9 system for ``H``, padded to 9x9.

Every result is compared with the float64 SVD of the same float32 system. The null vector of
``A`` is determined to ``‖sin Θ‖ <= ‖ΔA‖/(σ₈ − σ₉)`` (Wedin); a backward-stable SVD has
``‖ΔA‖ <= c·9·u·σ₁``, so the ratio ``‖f̂ − f₆₄‖ / (9 u σ₁/(σ₈ − σ₉))`` (signs aligned) must stay
below 30, LAPACK's threshold (u = 2⁻²⁴). The rank-2 step is checked the same way with the gap
``σ₂ − σ₃`` of ``F`` (``‖ΔF₂‖ <= ‖ΔF‖(1 + 2σ₁/(σ₂ − σ₃))``)::

    python examples/eight_point.py                      # CPU
    python examples/eight_point.py --device cuda --batch 100000
    MPSLINALG_BACKEND=emulator python examples/eight_point.py --batch 256    # the Metal kernels

The same pipeline with ``torch.linalg.svd`` is measured against the same bounds (in brackets).
Exit status 0 when every check of ``mpslinalg`` passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys

import torch
from support import devices

import mpslinalg as LA

U32 = 2.0**-24


def _scene(batch: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``batch`` samples of 8 correspondences between two calibrated views, and 4 of a plane."""
    X = torch.randn(batch, 8, 3, generator=g, dtype=torch.float64) + torch.tensor([0.0, 0.0, 6.0],
                                                                                 dtype=torch.float64)
    angle = 0.2
    R = torch.tensor([[1, 0, 0], [0, torch.cos(torch.tensor(angle)), -torch.sin(torch.tensor(angle))],
                      [0, torch.sin(torch.tensor(angle)), torch.cos(torch.tensor(angle))]], dtype=torch.float64)
    t = torch.tensor([1.0, 0.2, 0.1], dtype=torch.float64)
    x1 = X[..., :2] / X[..., 2:]
    Y = X @ R.T + t
    x2 = Y[..., :2] / Y[..., 2:]
    noise = 1e-3 * torch.randn(x2.shape, generator=g, dtype=torch.float64)
    return x1, x2 + noise, X


def _epipolar_system(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    a, b = x1.unbind(-1)
    c, d = x2.unbind(-1)
    one = torch.ones_like(a)
    return torch.stack([c * a, c * b, c, d * a, d * b, d, a, b, one], dim=-1)  # (..., 8, 9)


def _dlt_system(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    a, b = x1[..., :4, :].unbind(-1)
    c, d = x2[..., :4, :].unbind(-1)
    z, one = torch.zeros_like(a), torch.ones_like(a)
    r1 = torch.stack([-a, -b, -one, z, z, z, c * a, c * b, c], dim=-1)
    r2 = torch.stack([z, z, z, -a, -b, -one, d * a, d * b, d], dim=-1)
    A = torch.cat([r1, r2], dim=-2)  # (..., 8, 9)
    return torch.cat([A, torch.zeros_like(A[..., :1, :])], dim=-2)  # 9x9, as kornia pads it


def _null_ratio(A32: torch.Tensor, f: torch.Tensor, gap_idx: int) -> torch.Tensor:
    """``‖f − f₆₄‖ / (9 u σ₁ / gap)`` with the float64 SVD of the same float32 ``A``."""
    _, S64, Vh64 = torch.linalg.svd(A32.double())
    f64 = Vh64[..., -1, :]
    f = f.double()
    f = f * torch.sign((f * f64).sum(-1, keepdim=True))
    below = S64[..., gap_idx] if S64.shape[-1] > gap_idx else torch.zeros_like(S64[..., 0])  # 8x9: σ₉ = 0
    gap = S64[..., gap_idx - 1] - below
    return (f - f64).norm(dim=-1) / (9 * U32 * S64[..., 0] / gap)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", type=devices.device, help="cpu (default), cuda or mps")
    p.add_argument("--batch", type=int, default=4096)
    args = p.parse_args(argv)
    dev = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    x1, x2, _ = _scene(args.batch, g)
    ok = True

    A = _epipolar_system(x1, x2).float().to(dev)
    H = _dlt_system(x1, x2).float().to(dev)

    def ratios(svd) -> dict[str, torch.Tensor]:
        """The three ratios and |det F|/σ₁³ of the pipeline run with ``svd`` in float32."""
        _, _, Vh = svd(A)  # 8x9: full_matrices gives the 9th (null) right singular vector
        f = Vh[..., -1, :]
        F = f.reshape(-1, 3, 3)
        U, S, Vh3 = svd(F)
        F2 = U @ torch.diag_embed(torch.cat([S[..., :2], torch.zeros_like(S[..., 2:])], -1)) @ Vh3
        F64 = torch.linalg.svd(F.cpu().double())
        F2_64 = F64.U[..., :2] @ torch.diag_embed(F64.S[..., :2]) @ F64.Vh[..., :2, :]
        S64 = F64.S
        # best rank-2 approximation: ‖ΔF₂‖ <= ‖ΔF‖ (1 + 2σ₁/(σ₂ − σ₃)), ‖ΔF‖ <= c·3·u·σ₁
        r2 = (F2.cpu().double() - F2_64).flatten(-2).norm(dim=-1) / (
            3 * U32 * S64[..., 0] * (1 + 2 * S64[..., 0] / (S64[..., 1] - S64[..., 2])))
        _, _, VhH = svd(H)
        return {"8-point null vector": _null_ratio(A.cpu(), f.cpu(), 8), "rank-2 projection": r2,
                "det": torch.linalg.det(F2.cpu().double()).abs() / S64[..., 0] ** 3,
                "DLT homography (9x9)": _null_ratio(H.cpu(), VhH[..., -1, :].cpu(), 8)}

    ours, peer = ratios(LA.svd), ratios(torch.linalg.svd)  # torch.linalg against the same bounds
    print(f"{args.batch} samples; max ratio of mpslinalg [torch.linalg], limit 30")
    for name in ("8-point null vector", "rank-2 projection", "DLT homography (9x9)"):
        ratio = ours[name]
        good = float(ratio.max()) < 30
        ok &= good
        print(f"{name:24s} max ratio {float(ratio.max()):7.3f} [{float(peer[name].max()):7.3f}]  "
              f"median {float(ratio.median()):.3f}  {'PASS' if good else 'FAIL'}")
    good = float(ours["det"].max()) < 30 * 9 * U32
    ok &= good
    print(f"{'rank 2: |det F|/σ₁³':24s} max {float(ours['det'].max()):.2e} [{float(peer['det'].max()):.2e}]  "
          f"{'PASS' if good else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
