"""Drop-in: one line makes an unmodified camera-geometry library run mpslinalg (issue 13).

``support/posekit.py`` (next to this file) is ordinary torch code — ``torch.linalg.inv``, ``Tensor.inverse``,
``torch.det``, ``lu_factor_ex`` + ``lu_solve``, ``solve``, ``logdet`` — that knows nothing of
mpslinalg. The user turns routing on and calls it::

    python examples/dropin_camera.py                  # mps on a Mac, else the CPU
    MPSLINALG_BACKEND=emulator python examples/dropin_camera.py   # CPU: our Metal kernels, emulated

It checks that the calls reached mpslinalg and that every result agrees with posekit run in
float64 on the same inputs, to ``30 n κ₁ u`` relative (u = 2^-24; a backward-stable float32 solve or
inverse of an n×n system, plus the float32 rounding of its inputs, which is a backward error of the
same size); exit status 1 when a check fails.
"""

import sys

import torch
from support import posekit

import mpslinalg

device = "mps" if torch.backends.mps.is_available() else "cpu"
poses = posekit.random_poses(4096, device=device)
src = torch.rand(2048, 4, 2, device=device)
dst = src + 0.05 * torch.randn_like(src)

mpslinalg.enable(devices=(device,), when="always")   # the one line ("always": also small calls)
world_to_cam = posekit.invert_poses(poses)
H, info = posekit.homography_dlt(src, dst)
g = torch.Generator().manual_seed(1)
J, res = torch.randn(256, 24, 12, generator=g).to(device), torch.randn(256, 24, 1, generator=g).to(device)
step = posekit.damped_normal_step(J, res)
mpslinalg.disable()

ran = {op: c["ours"] for op, c in mpslinalg.routing.stats().items() if c["ours"]}
print("calls that ran mpslinalg:", ran)
print("max |T^-1 T - I|:", (world_to_cam @ poses - torch.eye(4, device=device)).abs().max().item())
print("degenerate DLT samples:", int((info > 0).sum()), "of", info.numel())

# The same posekit calls in float64 (torch.linalg, routing off) on the same float32 inputs.
u = 2.0**-24
ok = all(op in ran for op in ("inv_ex", "lu_factor_ex", "lu_solve", "solve"))
checks = [
    ("pose inverse", world_to_cam, posekit.invert_poses(poses.double().cpu()), poses.double().cpu()),
    ("DLT homography", H, posekit.homography_dlt(src.double().cpu(), dst.double().cpu())[0],
     posekit.dlt_system(src.double().cpu(), dst.double().cpu())[0]),
    # JᵀJ is formed in float32 (a backward error of ~m u |J|ᵀ|J|, m = 24 = 2n): within the same bound.
    ("damped normal step", step, posekit.damped_normal_step(J.double().cpu(), res.double().cpu()),
     J.double().cpu().mT @ J.double().cpu() + 1e-3 * torch.eye(12, dtype=torch.float64)),
]
for name, ours, truth, A in checks:
    kappa = torch.linalg.cond(A, 1)
    err = (ours.double().cpu() - truth).abs().sum(-2).amax(-1) / truth.abs().sum(-2).amax(-1)  # 1-norm
    ratio = float((err / (A.shape[-1] * kappa * u)).max())
    ok &= ratio <= 30
    print(f"{name}: max ‖ours - float64‖₁/(‖float64‖₁ n κ₁ u) = {ratio:.3f} (limit 30)")
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
