"""Camera geometry with batched ≤4×4 linear algebra (mpslinalg.small).

Three things a multi-view pipeline does millions of times:

1. **world ↔ camera pose inversion**: 10⁶ rigid 4×4 poses T = [R t; 0 1] (with a per-camera scale
   and the intrinsics folded in, so the general inverse is needed);
2. **homography normalisation**: a RANSAC batch of 2048 3×3 homography hypotheses is normalised to
   det(H) = 1 (slogdet: no overflow even when entries are far from 1), then inverted for the
   backward transfer;
3. **point transfer**: each hypothesis maps 2048 point pairs through H⁻¹ (solve with many
   right-hand sides), and the symmetric transfer error is checked.

Every result is checked against ``torch.linalg`` (the relative difference must be at the level of
the matrices' condition number times the unit roundoff) and timed::

    python examples/camera_geometry.py            # CPU, smaller batches
    python examples/camera_geometry.py --device cuda --poses 10000000
    MPSLINALG_BACKEND=emulator python examples/camera_geometry.py --poses 4096   # the Metal kernels

Exit status 0 when every check passes.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

import mpslinalg as LA


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


def timed(fn, device: torch.device, repeat: int = 3) -> tuple[object, float]:
    """Result of ``fn()`` and its best wall time in ms over ``repeat`` runs after one warm-up."""
    out = fn()
    _sync(device)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return out, best * 1e3


def random_rotations(n: int, g: torch.Generator) -> torch.Tensor:
    """n uniformly random rotations from normalised quaternions, float64 (n, 3, 3)."""
    q = torch.randn(n, 4, generator=g, dtype=torch.float64)
    q = q / q.norm(dim=-1, keepdim=True)
    w, x, y, z = q.unbind(-1)
    return torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
        2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
        2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y),
    ], dim=-1).reshape(n, 3, 3)


def make_poses(n: int, g: torch.Generator) -> torch.Tensor:
    """World-to-camera transforms P = [s K R  K t; 0 1] (float32, (n, 4, 4)): a rotation, a
    translation of up to 100 m, a focal length of 500–2000 px and a scale, as a camera rig stores
    them. Entries span 1e-3…1e5, the badly scaled case equilibration handles."""
    R = random_rotations(n, g)
    t = 100 * torch.rand(n, 3, 1, generator=g, dtype=torch.float64)
    f = 500 + 1500 * torch.rand(n, generator=g, dtype=torch.float64)
    K = torch.zeros(n, 3, 3, dtype=torch.float64)
    K[:, 0, 0] = f
    K[:, 1, 1] = f
    K[:, 0, 2] = 320
    K[:, 1, 2] = 240
    K[:, 2, 2] = 1
    s = torch.exp2(torch.randint(-3, 4, (n, 1, 1), generator=g).double())
    P = torch.zeros(n, 4, 4, dtype=torch.float64)
    P[:, :3, :3] = s * (K @ R)
    P[:, :3, 3:] = K @ t
    P[:, 3, 3] = 1
    return P.float()


def make_homographies(n: int, g: torch.Generator) -> torch.Tensor:
    """RANSAC hypotheses: H = K (R + t nᵀ/d) K⁻¹ for random small motions, in pixel units."""
    R = random_rotations(n, g)
    R = torch.linalg.matrix_exp(0.05 * (R - R.mT))  # small rotations
    t = 0.1 * torch.randn(n, 3, 1, generator=g, dtype=torch.float64)
    nrm = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64).expand(n, 1, 3)
    K = torch.tensor([[800.0, 0, 320], [0, 800.0, 240], [0, 0, 1]], dtype=torch.float64)
    H = K @ (R + t @ nrm / 5.0) @ torch.linalg.inv(K)
    return (H * 1e3).float()  # an arbitrary overall scale, as DLT produces


def rel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-matrix relative difference max|a−b|/max|b| (batch of matrices or vectors)."""
    dims = tuple(range(1, a.dim()))
    return (a - b).abs().amax(dims) / b.abs().amax(dims)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--poses", type=int, default=None, help="number of poses (default 1e6 on GPU, 1e5 on CPU)")
    p.add_argument("--hypotheses", type=int, default=2048)
    p.add_argument("--points", type=int, default=2048)
    args = p.parse_args(argv)
    dev = torch.device(args.device)
    n_poses = args.poses or (10**6 if dev.type != "cpu" else 10**5)
    g = torch.Generator().manual_seed(0)
    u = 2.0**-24
    ok = True

    # 1. pose inversion --------------------------------------------------------------------
    P = make_poses(n_poses, g).to(dev)
    (Pinv, info), t_ours = timed(lambda: LA.inv_ex(P), dev)
    Pinv_ref, t_ref = timed(lambda: torch.linalg.inv(P), dev)
    kappa = torch.linalg.cond(P[:4096].double().cpu(), 1)
    # both are backward-stable inverses: they differ by at most ~2·c·κ·u (c = 4n·2^(n-1) = 128)
    err = rel(Pinv[:4096].cpu().double(), Pinv_ref[:4096].cpu().double())
    good = bool((info == 0).all()) and bool((err <= 2 * 128 * kappa * u).all())
    ok &= good
    print(f"pose inversion   {n_poses:>9} x 4x4 : ours {t_ours:8.2f} ms  torch.linalg.inv {t_ref:8.2f} ms  "
          f"ratio {t_ref / t_ours:5.2f}x  max rel diff {err.max():.2e} (κ ≤ {kappa.max():.1e})  "
          f"{'OK' if good else 'FAIL'}")

    # 2. homography normalisation: H / det(H)^(1/3) via slogdet, then H^-1 -------------------
    H = make_homographies(args.hypotheses, g).to(dev)
    (sign, logabs), t_ours = timed(lambda: LA.slogdet(H), dev)
    (sign_r, logabs_r), t_ref = timed(lambda: torch.linalg.slogdet(H), dev)
    Hn = H * (sign * torch.exp(-logabs / 3)).reshape(-1, 1, 1)
    det_n = LA.det(Hn)
    kH = torch.linalg.cond(H.double().cpu(), 1)
    # |Δ log|det|| <= c·n·κ·u (relative condition of det <= n·κ): det(Hn) = 1 to that accuracy
    good = bool(((det_n.cpu().double() - 1).abs() <= 128 * 3 * kH * u * 4).all()) and bool(
        ((logabs - logabs_r).abs().cpu() <= 128 * 3 * kH * u * logabs_r.abs().cpu().clamp_min(1)).all())
    ok &= good
    print(f"homography norm. {args.hypotheses:>9} x 3x3 : ours {t_ours:8.2f} ms  "
          f"torch.linalg.slogdet {t_ref:8.2f} ms  ratio {t_ref / t_ours:5.2f}x  "
          f"max |det(Hn)-1| {(det_n - 1).abs().max():.1e}  {'OK' if good else 'FAIL'}")

    # 3. point transfer: x' = H x, then back through H^-1 (a solve with many right-hand sides) --
    X = torch.cat([640 * torch.rand(args.hypotheses, 1, args.points, generator=g),
                   480 * torch.rand(args.hypotheses, 1, args.points, generator=g),
                   torch.ones(args.hypotheses, 1, args.points)], dim=1).to(dev)
    Xp = Hn @ X
    (Xb, info), t_ours = timed(lambda: LA.solve_ex(Hn, Xp), dev)
    Xb_ref, t_ref = timed(lambda: torch.linalg.solve(Hn, Xp), dev)
    back = Xb[:, :2] / Xb[:, 2:]
    transfer = (back - X[:, :2]).norm(dim=1).amax(-1)  # pixels
    kHn = torch.linalg.cond(Hn.double().cpu(), 1)
    # forward error of the solve: <= c·κ·u relative to |x| (~640 px), plus the rounding of Hn @ X
    good = bool((info == 0).all()) and bool((transfer.cpu() <= 2 * 128 * kHn * u * 800).all())
    ok &= good
    print(f"point transfer   {args.hypotheses:>9} x 3x3, {args.points} pts : ours {t_ours:8.2f} ms  "
          f"torch.linalg.solve {t_ref:8.2f} ms  ratio {t_ref / t_ours:5.2f}x  max transfer error "
          f"{transfer.max():.2e} px  {'OK' if good else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
