"""Camera geometry with batched ≤4×4 linear algebra (mpslinalg's n ≤ 4 paths).

Three things a multi-view pipeline does millions of times:

1. **world ↔ camera pose inversion**: 10⁶ rigid 4×4 poses T = [R t; 0 1] (with a per-camera scale
   and the intrinsics folded in, so the general inverse is needed);
2. **homography normalisation**: a RANSAC batch of 2048 3×3 homography hypotheses is normalised to
   det(H) = 1 (slogdet: no overflow even when entries are far from 1), then inverted for the
   backward transfer;
3. **point transfer**: each hypothesis maps 2048 point pairs through H⁻¹ (solve with many
   right-hand sides), and the symmetric transfer error is checked.

Every result of ``mpslinalg`` and of ``torch.linalg`` is compared with a float64 truth computed from
the same float32 inputs, as a LAPACK-style test ratio whose bound (30) is derived next to each check
(u = 2^-24), and both are timed interleaved (median)::

    python examples/camera_geometry.py            # CPU, smaller batches
    python examples/camera_geometry.py --device cuda --poses 10000000
    MPSLINALG_BACKEND=emulator python examples/camera_geometry.py --poses 4096   # the Metal kernels

Exit status 0 when every check of ``mpslinalg`` passes, 1 otherwise (torch.linalg's ratios are
printed against the same bound for comparison).
"""

from __future__ import annotations

import argparse
import sys

import torch
from support import devices

import mpslinalg as LA
from mpslinalg.mainjob.timing import compare, time_interleaved

#: float32 unit roundoff; LAPACK's test-ratio threshold.
U = 2.0**-24
THRESHOLD = 30.0
#: Matrices checked against float64 (all of them up to this many: the truth costs CPU time).
CHECKED = 1 << 17


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


def lu_magnitude(A64: torch.Tensor) -> torch.Tensor:
    """``|P L| |U|`` of the float64 partial-pivoting LU of ``A`` (rows in ``A``'s order).

    Gaussian elimination with partial pivoting computes ``L̂ Û = P(A + ΔA)`` with ``|ΔA| <= γ |L̂||Û|``
    (Higham, *Accuracy and Stability*, Thm 9.3), and the inverse from it (``getri``) satisfies
    ``|X̂A - I| <= c u |X̂||L̂||Û|`` (ibid. §14.3): the bounds below are these, first order, with the
    float64 factors standing in for the computed ones (pivoting is invariant to the power-of-two
    column scaling ``mpslinalg`` applies, so both implementations factor the same way).
    """
    Pm, L, Uf = torch.linalg.lu(A64)
    return (Pm @ L).abs() @ Uf.abs()


def timed_pair(ours, peer, device) -> tuple[str, float, float]:
    """Interleaved median times (ms) of ``ours`` and ``peer`` and a ratio with its verdict."""
    t = time_interleaved({"ours": ours, "peer": peer}, device=device, warmup=1, repeat=15, min_time=0.0,
                         max_time=5.0, min_samples=7)
    c = compare(t["ours"], t["peer"])
    return f"ratio {c.ratio:5.2f}x ({c.verdict})", 1e3 * t["ours"].median, 1e3 * t["peer"].median


def verdict(ok: bool) -> str:
    return "OK" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", type=devices.device, help="cpu (default), cuda or mps")
    p.add_argument("--poses", type=int, default=None, help="number of poses (default 1e6 on GPU, 1e5 on CPU)")
    p.add_argument("--hypotheses", type=int, default=2048)
    p.add_argument("--points", type=int, default=None, help="points per hypothesis (default 2048 on GPU, 256 on CPU)")
    args = p.parse_args(argv)
    dev = torch.device(args.device)
    n_poses = args.poses or (10**6 if dev.type != "cpu" else 10**5)
    args.points = args.points or (2048 if dev.type != "cpu" else 256)
    g = torch.Generator().manual_seed(0)
    ok = True

    # 1. pose inversion --------------------------------------------------------------------
    P = make_poses(n_poses, g).to(dev)
    Pinv, info = LA.inv_ex(P)
    Pinv_ref = torch.linalg.inv(P)
    m = min(n_poses, CHECKED)
    P64 = P[:m].cpu().double()
    truth = torch.linalg.inv(P64)
    # X̂ - X* = (X̂A - I) X*, so |X̂ - X*| <= c u |X*||L||U||X*|: test ratio
    # ‖X̂ - X*‖∞ / (n u ‖ |X*||L||U||X*| ‖∞) <= 30 (κ(A) reaches 1e9 here: a κ·u bound says nothing).
    scale = torch.linalg.matrix_norm(truth.abs() @ lu_magnitude(P64) @ truth.abs(), float("inf"))

    def pose_ratio(X):
        return float((torch.linalg.matrix_norm(X[:m].cpu().double() - truth, float("inf"))
                      / (4 * U * scale)).max())

    r_ours, r_ref = pose_ratio(Pinv), pose_ratio(Pinv_ref)
    good = bool((info == 0).all()) and r_ours <= THRESHOLD
    ok &= good
    ratio, t_ours, t_ref = timed_pair(lambda: LA.inv_ex(P), lambda: torch.linalg.inv(P), dev)
    print(f"pose inversion   {n_poses:>9} x 4x4 : ours {t_ours:8.2f} ms  torch.linalg.inv {t_ref:8.2f} ms  {ratio}")
    print(f"    error vs float64 over {m} poses, ‖X̂-X*‖∞/(n u ‖|X*||L||U||X*|‖∞): ours {r_ours:.3f}, "
          f"torch.linalg {r_ref:.3f}, limit {THRESHOLD:g}  {verdict(good)}")

    # 2. homography normalisation: H / det(H)^(1/3) via slogdet ------------------------------
    H = make_homographies(args.hypotheses, g).to(dev)
    sign, logabs = LA.slogdet(H)
    sign_r, logabs_r = torch.linalg.slogdet(H)
    H64 = H.cpu().double()
    sign64, logabs64 = torch.linalg.slogdet(H64)
    # det(A + ΔA) = det(A)(1 + tr(A⁻¹ΔA)) to first order, and |ΔA| <= γ |L||U|, so
    # |Δ log|det|| <= c u Σ_ij |A⁻¹|_ji (|L||U|)_ij: test ratio |Δ log|det|| / (n u that sum) <= 30,
    # and the sign exactly.
    dscale = (torch.linalg.inv(H64).abs().mT * lu_magnitude(H64)).sum((-2, -1))

    def det_ratio(s_, la):
        same_sign = bool((s_.cpu().double() == sign64).all())
        return float(((la.cpu().double() - logabs64).abs() / (3 * U * dscale)).max()), same_sign

    (r_ours, sg_ours), (r_ref, sg_ref) = det_ratio(sign, logabs), det_ratio(sign_r, logabs_r)
    good = sg_ours and r_ours <= THRESHOLD
    ok &= good
    ratio, t_ours, t_ref = timed_pair(lambda: LA.slogdet(H), lambda: torch.linalg.slogdet(H), dev)
    print(f"homography norm. {args.hypotheses:>9} x 3x3 : ours {t_ours:8.2f} ms  torch.linalg.slogdet {t_ref:8.2f} ms  "
          f"{ratio}")
    print(f"    error vs float64, |Δ log|det||/(n u Σ|A⁻¹|ᵀ∘|L||U|): ours {r_ours:.3f}"
          f"{'' if sg_ours else ' WRONG SIGN'}, torch.linalg {r_ref:.2f}{'' if sg_ref else ' WRONG SIGN'}, "
          f"limit {THRESHOLD:g}  {verdict(good)}")
    Hn = H * (sign * torch.exp(-logabs / 3)).reshape(-1, 1, 1)

    # 3. point transfer: x' = H x, then back through H^-1 (a solve with many right-hand sides) --
    X = torch.cat([640 * torch.rand(args.hypotheses, 1, args.points, generator=g),
                   480 * torch.rand(args.hypotheses, 1, args.points, generator=g),
                   torch.ones(args.hypotheses, 1, args.points)], dim=1).to(dev)
    Xp = Hn @ X
    Xb, info = LA.solve_ex(Hn, Xp)
    Xb_ref = torch.linalg.solve(Hn, Xp)
    Hn64, Xp64 = Hn.cpu().double(), Xp.cpu().double()
    x64 = torch.linalg.solve(Hn64, Xp64)  # the truth of the float32 problem actually posed
    # (A + ΔA) x̂ = b with |ΔA| <= γ |L||U| gives |x̂ - x*| <= c u |A⁻¹||L||U||x̂|: per point, test ratio
    # ‖x̂ - x*‖∞ / (n u ‖ |A⁻¹||L||U||x*| ‖∞) <= 30.
    xscale = (torch.linalg.inv(Hn64).abs() @ lu_magnitude(Hn64) @ x64.abs()).amax(-2)

    def solve_errors(Y):
        Y = Y.cpu().double()
        r = (Y - x64).abs().amax(-2) / (3 * U * xscale)
        px = (Y[:, :2] / Y[:, 2:] - x64[:, :2] / x64[:, 2:]).norm(dim=1)  # in pixels
        return float(r.max()), float(px.max())

    (r_ours, px_ours), (r_ref, px_ref) = solve_errors(Xb), solve_errors(Xb_ref)
    good = bool((info == 0).all()) and r_ours <= THRESHOLD
    ok &= good
    ratio, t_ours, t_ref = timed_pair(lambda: LA.solve_ex(Hn, Xp), lambda: torch.linalg.solve(Hn, Xp), dev)
    print(f"point transfer   {args.hypotheses:>9} x 3x3, {args.points} pts : ours {t_ours:8.2f} ms  "
          f"torch.linalg.solve {t_ref:8.2f} ms  {ratio}")
    print(f"    error vs float64, ‖x̂-x*‖∞/(n u ‖|A⁻¹||L||U||x*|‖∞): ours {r_ours:.3f} ({px_ours:.1e} px), "
          f"torch.linalg {r_ref:.3f} ({px_ref:.1e} px), limit {THRESHOLD:g}  {verdict(good)}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
