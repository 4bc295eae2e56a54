"""Drop-in: one line makes an unmodified camera-geometry library run mpslinalg (issue 13).

``posekit`` (next to this file) is ordinary torch code — ``torch.linalg.inv``, ``Tensor.inverse``,
``torch.det``, ``lu_factor_ex`` + ``lu_solve``, ``solve``, ``logdet`` — that knows nothing of
mpslinalg. The user turns routing on and calls it::

    python examples/dropin_camera.py                  # mps on a Mac, else the CPU
    MPSLINALG_BACKEND=emulator python examples/dropin_camera.py   # CPU: our Metal kernels, emulated
"""

import posekit
import torch

import mpslinalg

device = "mps" if torch.backends.mps.is_available() else "cpu"
poses = posekit.random_poses(4096, device=device)
src = torch.rand(2048, 4, 2, device=device)
dst = src + 0.05 * torch.randn_like(src)

mpslinalg.enable(devices=(device,), when="always")   # the one line ("always": also small calls)
world_to_cam = posekit.invert_poses(poses)
H, info = posekit.homography_dlt(src, dst)
step = posekit.damped_normal_step(torch.randn(256, 24, 12, device=device), torch.randn(256, 24, 1, device=device))
mpslinalg.disable()

print("calls that ran mpslinalg:", {op: c["ours"] for op, c in mpslinalg.routing.stats().items() if c["ours"]})
print("max |T^-1 T - I|:", (world_to_cam @ poses - torch.eye(4, device=device)).abs().max().item())
print("degenerate DLT samples:", int((info > 0).sum()), "of", info.numel())
