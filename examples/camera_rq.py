"""RQ decomposition of a batch of camera projection matrices into intrinsics K, rotation R and
translation t (``P ~ K [R | t]``), with ``mpslinalg.qr``.

A 3x4 projection matrix ``P = s K [R | t]`` (any scale ``s != 0``) splits as: ``M = P[:, :3] = s K R``
is an RQ decomposition (upper-triangular times orthogonal). RQ comes from QR through the row
reversal ``J``: if ``(J M)ᵀ = Q U`` then ``M = (J Uᵀ J)(J Qᵀ)``, so ``K = J Uᵀ J`` (upper
triangular) and ``R = J Qᵀ``. The signs are fixed so ``K`` has a positive diagonal
(``K <- K D``, ``R <- D R`` with ``D = diag(sign K_ii)``) and ``det R = +1`` (``P`` is defined up
to sign: ``R <- -R`` and the scale flips), then ``K`` is normalised to ``K_33 = 1`` and
``t = (s K)⁻¹ P[:, 3]``.

Checks (u = 2^-24, LAPACK's threshold 30), against the same decomposition in float64 of the same
float32 input (LAPACK's QR):

* reconstruction ``‖P − s K [R | t]‖₁ / (4 ‖P‖₁ u) < 30`` per camera (Householder QR is backward
  stable with ``‖ΔM‖ <= 30·3·u‖M‖`` by xQRT01, and the sign fixes and scalings are exact or one
  rounding each);
* forward error of ``K`` and ``R``: QR's perturbation bound ``‖ΔQ‖_F <= √2 κ₂(M) ‖ΔM‖_F/‖M‖₂``
  for two backward-stable factorisations gives ``|ΔK|/‖K‖, |ΔR| <= 2·√2 κ₂(M)·30·3·u·√3``;
* ``K`` upper triangular with a positive diagonal, ``RᵀR = I`` to ``30·3·u`` (xORT01), ``det R = 1``.

::

    python examples/camera_rq.py                          # CPU, 100000 cameras
    python examples/camera_rq.py --device cuda --cameras 1000000
    MPSLINALG_BACKEND=emulator python examples/camera_rq.py --cameras 2048   # the Metal kernels

The same RQ done with ``torch.linalg`` is measured against the same bounds and printed in brackets.
Exit status 0 when every check of ``mpslinalg`` passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import math
import sys

import torch
from support import devices

import mpslinalg as LA
from mpslinalg.kernels import backend_for

U = 2.0**-24
THRESHOLD = 30.0


def random_cameras(n: int, *, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    """``n`` projection matrices ``s K [R | t]``: focal lengths 300..3000 px, principal point near
    the image centre, small skew, Haar rotations, translations ~N(0, 5²), scales ±(0.1..10)."""
    g = torch.Generator().manual_seed(seed)
    f = 300 + 2700 * torch.rand(n, 2, generator=g, dtype=dtype)
    K = torch.zeros(n, 3, 3, dtype=dtype)
    K[:, 0, 0], K[:, 1, 1] = f[:, 0], f[:, 1]
    K[:, 0, 1] = 0.01 * torch.randn(n, generator=g, dtype=dtype) * f[:, 0]
    c = 640 + 20 * torch.randn(n, 2, generator=g, dtype=dtype)
    K[:, 0, 2], K[:, 1, 2] = c[:, 0], c[:, 1]
    K[:, 2, 2] = 1
    Q, Rr = torch.linalg.qr(torch.randn(n, 3, 3, generator=g, dtype=dtype))
    Q = Q * torch.sign(Rr.diagonal(dim1=-2, dim2=-1))[:, None, :]
    Q[:, :, 2] *= torch.sign(torch.linalg.det(Q))[:, None]  # a rotation (det +1)
    t = 5 * torch.randn(n, 3, 1, generator=g, dtype=dtype)
    s = torch.exp(torch.empty(n, 1, 1, dtype=dtype).uniform_(math.log(0.1), math.log(10), generator=g))
    s = s * torch.where(torch.rand(n, 1, 1, generator=g) < 0.5, -1.0, 1.0).to(dtype)
    return s * (K @ torch.cat([Q, t], dim=-1))


def rq_cameras(P: torch.Tensor, la=LA) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(K, R, t, s)`` with ``P = s K [R | t]``, ``K`` upper triangular, positive diagonal,
    ``K_33 = 1``, ``R`` a rotation. ``la`` provides ``qr``, ``det`` and ``solve_triangular``
    (``mpslinalg`` or ``torch.linalg``)."""
    M = P[..., :3]
    JM = M.flip(-2)  # J M
    Q, Ut = la.qr(JM.mT)  # (J M)ᵀ = Q U
    K = Ut.mT.flip(-2).flip(-1)  # J Uᵀ J
    R = Q.mT.flip(-2)  # J Qᵀ
    d = torch.sign(K.diagonal(dim1=-2, dim2=-1))
    d = torch.where(d == 0, torch.ones_like(d), d)
    K = K * d[..., None, :]
    R = R * d[..., :, None]
    flip = torch.sign(la.det(R))  # P ~ -P: a rotation and a negated scale
    R = R * flip[..., None, None]
    s = K[..., 2, 2] * flip
    K = K / K[..., 2:3, 2:3]
    t = la.solve_triangular(K * s[..., None, None], P[..., 3:], upper=True)
    return K, R, t, s


def _max_ratio(num: torch.Tensor, den: torch.Tensor) -> float:
    return float((num / den).max())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu", type=devices.device, help="cpu (default), cuda or mps")
    p.add_argument("--cameras", type=int, default=100000)
    args = p.parse_args(argv)
    dev = torch.device(args.device)

    P64 = random_cameras(args.cameras, seed=1)
    P = P64.to(torch.float32)
    K0, R0, t0, s0 = rq_cameras(P.double(), la=torch.linalg)  # the float64 truth of the same input
    Pd = P.double()
    Md = Pd[..., :3]
    sv = torch.linalg.svdvals(Md)
    kappa = sv[:, 0] / sv[:, -1]
    fwd_unit = 2 * math.sqrt(2) * kappa * 3 * U * math.sqrt(3)

    def ratios(la) -> tuple[dict, bool, bool]:
        """The checks' ratios of the float32 RQ done with ``la``, and the two exact properties."""
        K, R, t, s = (x.cpu().double() for x in rq_cameras(P.to(dev), la=la))
        recon = (Pd - s[:, None, None] * (K @ torch.cat([R, t], dim=-1))).abs().sum(-2).amax(-1)
        orth = (torch.eye(3, dtype=torch.float64) - R.mT @ R).abs().sum(-2).amax(-1)
        upper = bool((K.tril(-1) == 0).all()) and bool((K.diagonal(dim1=-2, dim2=-1) > 0).all())
        det_ok = bool(((torch.linalg.det(R) - 1).abs() < 3 * 30 * 3 * U).all())
        return {
            "‖P − sK[R|t]‖/(4‖P‖u)": _max_ratio(recon, 4 * Pd.abs().sum(-2).amax(-1) * U),
            "|K − K64|/(‖K‖ √2κ·3u√3)": _max_ratio((K - K0).abs().amax((-2, -1)) / K0.abs().amax((-2, -1)),
                                                  fwd_unit),
            "|R − R64|/(√2κ·3u√3)": _max_ratio((R - R0).abs().amax((-2, -1)), fwd_unit),
            "‖I − RᵀR‖/(3u)": _max_ratio(orth, torch.full_like(orth, 3 * U)),
        }, upper, det_ok

    checks, upper, det_ok = ratios(LA)
    peer, _, _ = ratios(torch.linalg)  # the same RQ with torch.linalg, against the same bounds
    ok = upper and det_ok
    print(f"{args.cameras} cameras on {dev} (backend {backend_for(dev)}); max ratio of mpslinalg "
          "[torch.linalg]")
    for name, v in checks.items():
        good = v < THRESHOLD
        ok &= good
        print(f"  {name:28s} max {v:9.3g} [{peer[name]:9.3g}]  {'PASS' if good else 'FAIL'} (< {THRESHOLD:g})")
    print(f"  K upper triangular, positive diagonal: {'PASS' if upper else 'FAIL'}; det R = 1: "
          f"{'PASS' if det_ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
