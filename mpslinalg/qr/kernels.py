"""The QR family's kernels and tuning (used by :mod:`mpslinalg.qr`): the Householder building
blocks in torch ops (``larfg``, ``geqr2``, ``larft``) and the two kernel implementations — torch ops
for the ``torch`` backend (Triton on CUDA for small batches), ``metal/qr.metal`` for the ``metal``
and ``emulator`` backends — behind one contract.

Kernel contracts (identical on every backend)
---------------------------------------------
``small(A, tau[, Q])``
    ``geqr2`` of every matrix of the contiguous ``[B, M, N]`` buffer ``A`` in place (packed
    ``R``/``v``); writes ``tau [B, min(M, N)]`` (the kernel backends and Triton also write the thin
    ``Q [B, M, min(M, N)]`` when given: ``qr`` of a small batch in one dispatch).
``panel(A, tau, o, w) -> (V, T)``
    ``geqr2`` of rows ``[o, M)`` x columns ``[o, o+w)`` of every matrix of ``A`` (``w <= M - o``),
    in place; writes ``tau[:, o:o+w]``; returns ``V [B, M-o, w]`` (the reflectors, unit lower
    trapezoidal, explicit) and the upper triangular ``T [B, w, w]`` of the compact WY form
    ``H_o ... H_{o+w-1} = I - V T Vᴴ`` (LAPACK ``larft``, forward, columnwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..kernels import backend_for, kernel_name, load_library
from ..oplayer import checks as E
from ..oplayer import functorch_active as _functorch


@dataclass
class Tuning:
    """Block sizes and routing of the QR family (``benchmarks/bench_qr.py`` measures them).

    Attributes
    ----------
    nb : int
        Panel width of the blocked algorithms (``geqrf``, ``householder_product``, ``ormqr``).
    small_bytes : int
        Kernel backends: matrices with ``M, N <= 64`` and ``(M * N + 64) * itemsize`` up to this
        many bytes are one ``qr_small`` dispatch (tile and ``tau`` in threadgroup memory).
    torch_small_max : int
        ``torch`` backend: batches of matrices with ``max(M, N)`` up to this are factored by the
        batch-vectorised Householder loop (or Triton on CUDA float32).
    torch_batch_min : int
        ``torch`` backend: ... and at least this many matrices; smaller batches and larger matrices
        call the device's ``geqrf`` (LAPACK on CPU, cuSOLVER on CUDA), per matrix.
    torch_blocked : bool
        ``torch`` backend: run the blocked compact-WY algorithm instead of the device's ``geqrf``
        for large matrices (tests use it to check the blocked code on the torch backend).
    tsqr_ratio : dict
        Per device type: ``qr`` uses TSQR when ``M >= ratio * N`` (and ``N <= tsqr_max_n``).
    tsqr_max_n : int
        Widest matrix for TSQR.
    tsqr_leaf : int
        Rows per TSQR leaf (a multiple of ``N`` is not needed; at least ``N``).
    triton : bool
        Use the Triton whole-matrix kernel on CUDA (float32/complex64, ``M, N <= 64``).
    """

    nb: int = 32
    small_bytes: int = 32768
    torch_small_max: int = 64
    # CPU: LAPACK's per-matrix loop beat the batch-vectorised loop at every batched size measured
    # (2-core CPU, 512 x 32x32: 50x; 10000 x 3x4: 7x), so the CPU never takes it
    torch_batch_min: dict = field(default_factory=lambda: {"cpu": 2**62, "cuda": 2})
    torch_blocked: bool = False
    tsqr_ratio: dict = field(default_factory=lambda: {"cpu": 2**62, "cuda": 64, "mps": 16})
    tsqr_max_n: int = 64
    tsqr_leaf: int = 256
    triton: bool = True


#: The tuning in use (module-level, mutable: benchmarks and tests adjust it).
TUNING = Tuning()


# --------------------------------------------------------------------------------------------------
# Householder building blocks in torch ops (vectorised over the batch)
# --------------------------------------------------------------------------------------------------


def _scaled_norm(x: torch.Tensor) -> torch.Tensor:
    """2-norm over the last dim without under/overflow of the squares (LAPACK ``nrm2``'s purpose):
    scale by the largest magnitude first (float32 squares of 1e-30 vanish)."""
    big = x.abs().amax(-1)
    s = torch.where(big > 0, big, torch.ones_like(big))
    return s * torch.linalg.vector_norm(x / s[..., None], dim=-1)


def _larfg(alpha: torch.Tensor, x2: torch.Tensor):
    """LAPACK ``larfg`` for a batch of columns ``[alpha; x2]``.

    Returns ``(beta, tau, v2)``: ``beta`` real (in the dtype of ``alpha``), ``H = I - tau v vᴴ``
    with ``v = [1; v2]`` and ``Hᴴ [alpha; x2] = [beta; 0]``. A column with ``x2 = 0`` and a real
    ``alpha`` gets ``tau = 0`` and ``beta = alpha`` (LAPACK: ``H = I``, nothing negated).
    """
    xnorm = _scaled_norm(x2) if x2.shape[-1] > 0 else alpha.real.abs() * 0
    re = alpha.real if alpha.is_complex() else alpha
    im = alpha.imag if alpha.is_complex() else torch.zeros_like(alpha)
    mag = torch.hypot(alpha.abs(), xnorm)
    beta_r = torch.where(re >= 0, -mag, mag)  # -sign(Re alpha) * ||x||, sign(0) = +1
    skip = (xnorm == 0) & (im == 0)
    beta_r = torch.where(skip, re, beta_r)
    safe_b = torch.where(skip, torch.ones_like(beta_r), beta_r)
    beta = beta_r.to(alpha.dtype)
    tau = torch.where(skip, torch.zeros_like(alpha), (beta - alpha) / safe_b.to(alpha.dtype))
    denom = torch.where(skip, torch.ones_like(alpha), alpha - beta)
    v2 = x2 / denom[..., None]
    v2 = torch.where(skip[..., None], x2, v2)
    return beta, tau, v2


def _geqr2_torch(P: torch.Tensor, tau: torch.Tensor) -> None:
    """``geqr2`` of the ``[B, R, W]`` view ``P`` in place (``tau [B, min(R, W)]`` a view), one
    column at a time, vectorised over the batch."""
    R, W = P.shape[-2], P.shape[-1]
    for j in range(min(R, W)):
        beta, t, v2 = _larfg(P[:, j, j], P[:, j + 1:, j])
        P[:, j + 1:, j] = v2
        P[:, j, j] = beta
        tau[:, j] = t
        if j + 1 < W:
            v = torch.cat([v2.new_ones(v2.shape[0], 1), v2], dim=-1)
            C = P[:, j:, j + 1:]
            w = torch.matmul(v.conj().unsqueeze(-2), C)  # vᴴ C, [B, 1, W-j-1]
            C.sub_((t.conj()[:, None, None] * v[:, :, None]) * w)


def _unit_lower(P: torch.Tensor) -> torch.Tensor:
    """The reflectors ``V`` (unit lower trapezoidal) stored below the diagonal of ``P [..., r, w]``."""
    r, w = P.shape[-2], P.shape[-1]
    return P.tril(-1) + torch.eye(r, w, dtype=P.dtype, device=P.device)


def _larft(V: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """``T`` of ``H_1 ... H_w = I - V T Vᴴ`` (LAPACK ``larft``, forward, columnwise).

    LAPACK's recursion ``T[:i, i] = -tau_i T[:i, :i] V[:, :i]ᴴ v_i`` is the triangular solve
    ``T = (I + D N)⁻¹ D`` with ``D = diag(tau)``, ``N = striu(Vᴴ V)`` (``T⁻¹ = N + D⁻¹`` where tau
    is invertible; this form also holds for ``tau_i = 0``, where column ``i`` of ``T`` is zero):
    one matrix product and one unit-triangular solve instead of ``w`` dependent steps.
    """
    w = V.shape[-1]
    G = torch.matmul(V.mH, V).triu(1)
    M = G * tau[..., :, None] + torch.eye(w, dtype=V.dtype, device=V.device)
    return _trsm(M, torch.diag_embed(tau), upper=True)


def _trsm(A: torch.Tensor, B: torch.Tensor, *, upper: bool) -> torch.Tensor:
    """Unit-triangular solve ``A X = B`` through the triangular family (its kernels on mps)."""
    if _functorch():
        return torch.linalg.solve_triangular(A, B, upper=upper, unitriangular=True)
    from ..triangular import trsm

    return trsm(A, B, upper=upper, left=True, unitriangular=True)


# --------------------------------------------------------------------------------------------------
# Kernels: torch ops for the torch backend, metal/qr.metal for metal and the emulator
# --------------------------------------------------------------------------------------------------


class _TorchKernels:
    """The kernel contracts with torch ops (any device and dtype)."""

    name = "torch"

    def small(self, A: torch.Tensor, tau: torch.Tensor) -> None:
        if _triton_ok(A):
            from .triton import geqrf_small

            geqrf_small(A, tau)
            return
        _geqr2_torch(A, tau)

    def panel(self, A: torch.Tensor, tau: torch.Tensor, o: int, w: int) -> tuple[torch.Tensor, torch.Tensor]:
        P = A[:, o:, o:o + w]
        _geqr2_torch(P, tau[:, o:o + w])
        V = _unit_lower(P)
        return V, _larft(V, tau[:, o:o + w])


class _MetalKernels:
    """The kernel contracts with ``metal/qr.metal`` (``metal`` on mps, ``emulator`` on CPU)."""

    name = "metal"

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        self.lib = load_library("qr", device)
        self.dtype = dtype

    def small(self, A: torch.Tensor, tau: torch.Tensor, Q: torch.Tensor | None = None) -> None:
        B, M, N = A.shape
        getattr(self.lib, kernel_name("qr_small", self.dtype))(A, tau, tau if Q is None else Q, M, N,
                                                                int(Q is not None), threads=B * 32,
                                                                group_size=32)

    def panel(self, A: torch.Tensor, tau: torch.Tensor, o: int, w: int) -> tuple[torch.Tensor, torch.Tensor]:
        B, M, N = A.shape
        K = tau.shape[-1]
        T = A.new_empty(B, w, w)  # written whole by the kernel: no fill dispatch
        V = A.new_empty(B, M - o, w)
        g = 256
        getattr(self.lib, kernel_name("qr_panel", self.dtype))(A, tau, T, V, M, N, K, o, w, threads=B * g,
                                                                group_size=g)
        return V, T


_TORCH_KERNELS = _TorchKernels()


def _on_kernels(x: torch.Tensor) -> bool:
    """``x`` is served by the ``.metal`` kernels (metal/emulator backend, float32/complex64, no
    ``torch.func`` transform); else by torch ops."""
    return x.dtype in E.GPU_DTYPES and backend_for(x.device) != "torch" and not _functorch()


def _kernels(x: torch.Tensor):
    return _MetalKernels(x.device, x.dtype) if _on_kernels(x) else _TORCH_KERNELS


def _triton_ok(A: torch.Tensor) -> bool:
    M, N = A.shape[-2], A.shape[-1]
    if not (TUNING.triton and A.device.type == "cuda" and A.dtype in E.GPU_DTYPES and not _functorch()):
        return False
    from .triton import fits

    return fits(M, N)


def _small_on_kernels(M: int, N: int, dtype: torch.dtype) -> bool:
    size = 8 if dtype.is_complex else 4
    return M <= 64 and N <= 64 and (M * N + 64) * size <= TUNING.small_bytes
