"""posekit: a small camera-geometry library written the way kornia / pytorch3d / roma are: plain ``torch``
and ``torch.linalg`` calls, no knowledge of mpslinalg.

``examples/dropin_camera.py`` and ``tests/test_routing.py`` run it unmodified with
``mpslinalg.enable()`` on, to show that the routing reaches code like this.
"""

from __future__ import annotations

import torch


def random_poses(batch: int, *, dtype=torch.float32, device="cpu", generator=None) -> torch.Tensor:
    """``(batch, 4, 4)`` rigid transforms ``[R t; 0 1]`` (R from the QR of a Gaussian)."""
    G = torch.randn(batch, 3, 3, dtype=torch.float64, generator=generator)
    Q, R = torch.linalg.qr(G)
    Q = Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1)).unsqueeze(-2)
    Q[:, :, 0] *= torch.sign(torch.det(Q)).unsqueeze(-1)  # a rotation, det +1
    T = torch.zeros(batch, 4, 4, dtype=torch.float64)
    T[:, :3, :3] = Q
    T[:, :3, 3] = torch.randn(batch, 3, dtype=torch.float64, generator=generator)
    T[:, 3, 3] = 1
    return T.to(dtype=dtype, device=device)


def invert_poses(T: torch.Tensor) -> torch.Tensor:
    """World-to-camera from camera-to-world (pytorch3d's ``Transform3d.inverse`` style)."""
    return torch.linalg.inv(T)


def relative_pose(T_a: torch.Tensor, T_b: torch.Tensor) -> torch.Tensor:
    """Pose of b in a's frame, ``T_a^{-1} T_b`` (``Tensor.inverse``, as older code writes it)."""
    return T_a.inverse() @ T_b


def unproject(K: torch.Tensor, pixels: torch.Tensor) -> torch.Tensor:
    """Rays ``K^{-1} [u, v, 1]^T`` for ``(B, 3, 3)`` intrinsics and ``(B, N, 2)`` pixels."""
    homog = torch.cat([pixels, torch.ones_like(pixels[..., :1])], dim=-1)
    return (torch.inverse(K) @ homog.mT).mT


def is_right_handed(R: torch.Tensor) -> torch.Tensor:
    """``det(R) > 0`` per rotation (``torch.det``)."""
    return torch.det(R) > 0


def dlt_system(src: torch.Tensor, dst: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The 9x9 DLT system ``A h = b`` of a homography from 4 point pairs ``(B, 4, 2)``.

    Eight rows of the direct linear transform and a ninth that fixes ``h_33 = 1``.
    """
    x, y = src[..., 0], src[..., 1]
    u, v = dst[..., 0], dst[..., 1]
    one, zero = torch.ones_like(x), torch.zeros_like(x)
    r1 = torch.stack([x, y, one, zero, zero, zero, -u * x, -u * y, -u], dim=-1)
    r2 = torch.stack([zero, zero, zero, x, y, one, -v * x, -v * y, -v], dim=-1)
    A = torch.cat([r1, r2], dim=-2)  # (B, 8, 9)
    last = torch.zeros_like(A[..., :1, :])
    last[..., 0, 8] = 1
    A = torch.cat([A, last], dim=-2)
    b = torch.zeros_like(A[..., :, :1])
    b[..., 8, 0] = 1
    return A, b


def homography_dlt(src: torch.Tensor, dst: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Homographies ``(B, 3, 3)`` mapping ``src`` to ``dst`` and the factorisation ``info``.

    RANSAC-style: ``lu_factor_ex`` (no host sync; degenerate samples show in ``info``) and
    ``lu_solve``.
    """
    A, b = dlt_system(src, dst)
    LU, pivots, info = torch.linalg.lu_factor_ex(A)
    h = torch.linalg.lu_solve(LU, pivots, b)
    return h.reshape(*h.shape[:-2], 3, 3), info


def damped_normal_step(J: torch.Tensor, r: torch.Tensor, damping: float = 1e-3) -> torch.Tensor:
    """One Levenberg-Marquardt step ``(JᵀJ + λ I) δ = -Jᵀ r`` for ``(B, m, p)`` Jacobians."""
    JtJ = J.mT @ J
    eye = torch.eye(JtJ.shape[-1], dtype=J.dtype, device=J.device)
    return torch.linalg.solve(JtJ + damping * eye, -(J.mT @ r))


def pose_log_likelihood(cov: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """Gaussian log-likelihood with ``(B, d, d)`` covariances (``logdet`` and ``solve``)."""
    d = cov.shape[-1]
    maha = (residual.unsqueeze(-2) @ torch.linalg.solve(cov, residual.unsqueeze(-1))).squeeze(-1).squeeze(-1)
    return -0.5 * (maha + torch.logdet(cov) + d * torch.log(torch.tensor(2 * torch.pi, dtype=cov.dtype)))
