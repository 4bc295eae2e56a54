"""The QR family's algorithm, written once over a kernel object: ``geqrf`` (whole-matrix or
compact-WY blocked), ``householder_product``, ``ormqr`` and the plain ``qr`` (see :mod:`mpslinalg.qr`)."""

from __future__ import annotations

import math

import torch

from ..oplayer import checks as E
from ..oplayer import functorch_active as _functorch
from .kernels import TUNING, _kernels, _larft, _MetalKernels, _on_kernels, _small_on_kernels, _triton_ok, _unit_lower

# --------------------------------------------------------------------------------------------------
# The algorithms (internal entry points: no checks, torch conventions)
# --------------------------------------------------------------------------------------------------


def _torch_leaf(A: torch.Tensor) -> bool:
    """The ``torch`` backend hands ``A`` to the device's own ``geqrf`` (not batched-small)."""
    if _functorch():
        return True
    M, N = A.shape[-2], A.shape[-1]
    B = math.prod(A.shape[:-2])
    fits = max(M, N) <= TUNING.torch_small_max or _triton_ok(A)
    small = fits and B >= TUNING.torch_batch_min.get(A.device.type, 2)
    return not small and not TUNING.torch_blocked


def geqrf_impl(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.geqrf`` without checks: ``(QR [..., M, N], tau [..., min(M, N)])``, fresh tensors.

    LAPACK's packed layout and ``larfg`` conventions (module docstring). Any batch shape; the input
    is never modified. Under ``torch.func`` transforms it is ``torch.geqrf``.
    """
    batch = A.shape[:-2]
    M, N = A.shape[-2], A.shape[-1]
    K = min(M, N)
    if not _on_kernels(A) and _torch_leaf(A):
        QR, tau = torch.geqrf(A)
        return QR, tau
    QR, tau, _ = _geqrf_blocks(A)
    return QR.reshape(*batch, M, N), tau.reshape(*batch, K)


def _geqrf_blocks(A: torch.Tensor):
    """``(QR [B, M, N], tau [B, K], blocks)`` of ``A`` flattened to one batch dim; ``blocks`` are the
    panels' ``(j, w, V, T)`` when the blocked algorithm ran (``orgqr`` reuses them), else empty."""
    M, N = A.shape[-2], A.shape[-1]
    QR = E.resolved(A).reshape(math.prod(A.shape[:-2]), M, N).clone()  # not -1: ambiguous when empty
    tau = QR.new_zeros(QR.shape[0], min(M, N))
    blocks: list = []
    if QR.shape[0] > 0 and min(M, N) > 0:
        _geqrf3(QR, tau, blocks)
    return QR, tau, blocks


def _geqrf3(QR: torch.Tensor, tau: torch.Tensor, blocks: list | None = None) -> None:
    """``geqrf`` of the contiguous ``[B, M, N]`` buffer in place (whole-matrix kernel or blocked);
    the panels' ``(j, w, V, T)`` are appended to ``blocks`` if given."""
    B, M, N = QR.shape
    K = min(M, N)
    kern = _kernels(QR)
    if kern.name == "metal" and _small_on_kernels(M, N, QR.dtype):
        kern.small(QR, tau)
        return
    if kern.name == "torch" and (max(M, N) <= TUNING.torch_small_max or _triton_ok(QR)):
        kern.small(QR, tau)
        return
    nb = TUNING.nb
    for j in range(0, K, nb):
        w = min(nb, K - j)
        V, T = kern.panel(QR, tau, j, w)
        if blocks is not None:
            blocks.append((j, w, V, T))
        if j + w < N:  # larfb: C -= V (Tᴴ (Vᴴ C)), three matrix products
            C = QR[:, j:, j + w:]
            C.baddbmm_(V, torch.matmul(T.mH, torch.matmul(V.mH, C)), alpha=-1)


def _blocks(k: int, nb: int) -> list[tuple[int, int]]:
    return [(j, min(nb, k - j)) for j in range(0, k, nb)]


def _block_reflector(V: torch.Tensor, tau: torch.Tensor, j: int, w: int):
    """``(V_b, T_b)`` of reflectors ``j .. j+w-1`` stored in ``V [B, m, *]`` (rows ``j:``)."""
    Vb = _unit_lower(V[:, j:, j:j + w])
    return Vb, _larft(Vb, tau[:, j:j + w])


def householder_product_impl(V: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """``torch.linalg.householder_product`` without checks: the first ``n`` columns of
    ``H_1 ... H_k`` for ``V [..., m, n]`` (``n <= m``) and ``tau [..., k]`` (``k <= n``).

    Blocked backward accumulation: ``Q = I[:, :n]``, then for each block of ``nb`` reflectors from
    the last, ``Q[j:, j:] -= V_b (T_b (V_bᴴ Q[j:, j:]))`` (rows and columns before ``j`` are
    untouched by the later blocks). Batch dims of ``V`` and ``tau`` broadcast.
    """
    m, n = V.shape[-2], V.shape[-1]
    k = tau.shape[-1]
    batch = torch.broadcast_shapes(V.shape[:-2], tau.shape[:-1])
    if not _on_kernels(V) and _torch_leaf(V.expand(*batch, m, n)):
        return torch.linalg.householder_product(V.expand(*batch, m, n), tau.expand(*batch, k))
    nbat = math.prod(batch)
    V3 = E.resolved(V.expand(*batch, m, n)).reshape(nbat, m, n)
    t3 = E.resolved(tau.expand(*batch, k)).reshape(nbat, k)
    Q = torch.eye(m, n, dtype=V.dtype, device=V.device).expand(nbat, m, n).clone()
    for j, w in reversed(_blocks(k, TUNING.nb)):
        Vb, T = _block_reflector(V3, t3, j, w)
        C = Q[:, j:, j:]
        C.sub_(torch.matmul(Vb, torch.matmul(T, torch.matmul(Vb.mH, C))))
    return Q.reshape(*batch, m, n)


def ormqr_impl(V: torch.Tensor, tau: torch.Tensor, C: torch.Tensor, left: bool,
               transpose: bool) -> torch.Tensor:
    """``torch.ormqr`` without checks: ``op(Q) C`` (``left``) or ``C op(Q)``, ``op(Q) = Qᴴ`` when
    ``transpose`` (the conjugate transpose for complex), ``Q = H_1 ... H_k`` of order ``mn``
    (``V [..., mn, k']``, ``tau [..., k]``). Batch dims broadcast."""
    mn = V.shape[-2]
    k = tau.shape[-1]
    batch = torch.broadcast_shapes(V.shape[:-2], tau.shape[:-1], C.shape[:-2])
    r, c = C.shape[-2], C.shape[-1]
    out_shape = (*batch, r, c)
    nbat = math.prod(batch)
    if nbat == 0 or r == 0 or c == 0:
        return C.new_zeros(out_shape) + C.expand(out_shape)
    if not _on_kernels(C) and _torch_leaf(V.expand(*batch, *V.shape[-2:])):
        return torch.ormqr(V.expand(*batch, *V.shape[-2:]), tau.expand(*batch, k), C.expand(out_shape),
                           left=left, transpose=transpose)
    V3 = E.resolved(V.expand(*batch, *V.shape[-2:])).reshape(nbat, mn, V.shape[-1])
    t3 = E.resolved(tau.expand(*batch, k)).reshape(nbat, k)
    X = E.resolved(C.expand(out_shape)).reshape(nbat, r, c).clone()
    blocks = _blocks(k, TUNING.nb)
    # Q C and C Qᴴ apply the last block first; Qᴴ C and C Q the first block first
    if left != transpose:
        blocks = blocks[::-1]
    for j, w in blocks:
        Vb, T = _block_reflector(V3, t3, j, w)
        Tb = T.mH if transpose else T
        if left:  # rows j: of X  <-  (I - V Tb Vᴴ) X
            Xs = X[:, j:, :]
            Xs.sub_(torch.matmul(Vb, torch.matmul(Tb, torch.matmul(Vb.mH, Xs))))
        else:  # columns j: of X  <-  X (I - V Tb Vᴴ)
            Xs = X[:, :, j:]
            Xs.sub_(torch.matmul(torch.matmul(torch.matmul(Xs, Vb), Tb), Vb.mH))
    return X.reshape(out_shape)


def _r_from(QR: torch.Tensor, rows: int) -> torch.Tensor:
    return QR[..., :rows, :].triu().contiguous()


def qr_plain(A: torch.Tensor, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`qr_impl` without the TSQR route (the leaves of TSQR)."""
    M, N = A.shape[-2], A.shape[-1]
    K = min(M, N)
    if not _on_kernels(A) and _torch_leaf(A):
        # the device's own geqrf + orgqr (LAPACK / cuSOLVER) in one call: what we would run anyway,
        # without two dispatches and a copy of R
        Q, R = torch.linalg.qr(A, mode=mode)
        return Q, R
    if mode != "complete" or M <= N:
        fused = _qr_small_fused(A, mode)
        if fused is not None:
            return fused
    batch = A.shape[:-2]
    QR, tau, blocks = _geqrf_blocks(A)
    rows = M if mode == "complete" else K
    R = _r_from(QR, rows).reshape(*batch, rows, N)
    if mode == "r":
        return A.new_empty(0), R
    if blocks:  # the panels' V and T again: orgqr is three matrix products per block
        Q = torch.eye(M, rows, dtype=A.dtype, device=A.device).expand(QR.shape[0], M, rows).clone()
        for j, _w, V, T in reversed(blocks):
            C = Q[:, j:, j:]
            C.baddbmm_(V, torch.matmul(T, torch.matmul(V.mH, C)), alpha=-1)
        return Q.reshape(*batch, M, rows), R
    if mode == "complete" and M > N:
        V = torch.cat([QR, QR.new_zeros(*QR.shape[:-1], M - N)], dim=-1)
    else:
        V = QR[..., :, :K]
    return householder_product_impl(V, tau).reshape(*batch, M, rows), R


def _use_tsqr(A: torch.Tensor) -> bool:
    M, N = A.shape[-2], A.shape[-1]
    dev = "mps" if _on_kernels(A) else A.device.type
    return (0 < N <= TUNING.tsqr_max_n and M >= TUNING.tsqr_ratio.get(dev, 2**62) * N
            and tsqr_leaf_limit(A) >= 2 * N)


def tsqr_leaf_limit(A: torch.Tensor) -> int:
    """Most rows of a TSQR leaf for ``A``'s backend: what one whole-matrix kernel call holds."""
    N = A.shape[-1]
    if _on_kernels(A):
        size = 8 if A.is_complex() else 4
        return min(TUNING.tsqr_leaf, 64, (TUNING.small_bytes // size - 64) // max(N, 1))
    if _triton_ok(A[..., :1, :]):
        return 256 if N <= 32 else 128
    return TUNING.tsqr_leaf



def _qr_small_fused(A: torch.Tensor, mode: str):
    """``(Q, R)`` of a batch of small matrices with ``Q`` formed in the factorising launch (the
    ``qr_small`` Metal kernel, or Triton on CUDA), or None."""
    M, N = A.shape[-2], A.shape[-1]
    if _on_kernels(A):
        if not _small_on_kernels(M, N, A.dtype):
            return None
        run = _MetalKernels(A.device, A.dtype).small
    elif _triton_ok(A) and not _torch_leaf(A):
        from .triton import geqrf_small as run
    else:
        return None
    K = min(M, N)
    batch = A.shape[:-2]
    QR = E.resolved(A).reshape(math.prod(A.shape[:-2]), M, N).clone()  # not -1: ambiguous when empty
    tau = QR.new_empty(QR.shape[0], K)
    Q = None if mode == "r" else QR.new_empty(QR.shape[0], M, K)
    if QR.shape[0] > 0 and K > 0:
        run(QR, tau, Q)
    R = _r_from(QR, K).reshape(*batch, K, N)
    return (A.new_empty(0) if Q is None else Q.reshape(*batch, M, K)), R

