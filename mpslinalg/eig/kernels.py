"""The eig family's kernel contract and its torch-op implementation (used by :mod:`mpslinalg.eig`).

Kernel contract
---------------
``schur(A, want_z, sync) -> (T, Z, m)``
    The real (or complex) Schur form of every matrix of the contiguous ``[B, n, n]`` buffer ``A``
    (balanced and scaled to entries of order one by the caller): ``A = Z T Zᴴ`` with ``Z``
    orthogonal/unitary (``None`` unless ``want_z``); ``T`` upper triangular (complex input) or
    quasi-triangular (real input: 2x2 blocks where ``T[i+1, i] != 0``, every entry below the
    quasi-diagonal exactly zero); ``m [B]`` int64, the number of leading eigenvalues that did not
    converge in the iteration budget (0: success; LAPACK's ``info`` of ``geev``).

Two implementations: ``_MetalKernels`` (``metal/eig.metal``'s ``eig_schur_small``: ``lahqr`` in
threadgroup memory, see that file's header; ``m`` is ``lahqr``'s ``info``; it never reads the host)
for float32/complex64 matrices that fit its tile on the metal/emulator backends, and the torch-op
implementation for everything else: Householder reduction to Hessenberg form (``gehrd``, unblocked,
vectorised over the batch), then shifted QR iteration in *explicit* form over the whole batch at
once: per step ``M = (H - s1 I)(H - s2 I)`` (real input: Francis' double shift, the eigenvalues of
the active block's trailing 2x2) or ``M = H - σ I`` (complex input: Wilkinson's shift), restricted
to each matrix's active leading block, ``M = Q R`` (one batched QR), ``H <- Qᴴ H Q``,
``Z <- Z Q``. Every step is an orthogonal similarity (backward stable); the deflated trailing part
is untouched exactly, because ``M``'s block structure makes ``Q`` block diagonal. Deflation
(per matrix, at the bottom of its active block): the last row's (or last two rows') entries left
of the diagonal below ``ulp (|h_kk| + |h_k-1,k-1|)`` (LAPACK ``lahqr``'s test on the whole row,
since the explicit step leaves rounding-level fill below the subdiagonal) are set to zero.
Exceptional shifts after 10 and 20 steps without deflation (``lahqr``'s ``0.75 s``, ``-0.4375 s``).
With ``sync`` the iteration stops when every matrix has deflated (checked on the host: every step
on the CPU, every 4 steps elsewhere) or after ``30 max(10, n)`` steps (LAPACK's ``itmax``); without
(``eig_ex``: no host read) it runs a fixed ``6 n + 30`` steps (2-3 per eigenvalue is typical;
converged matrices pass through unchanged: ``Q = I``), and a matrix still active reports ``m > 0``.
"""

from __future__ import annotations

import torch

from ..kernels import backend_for, kernel_name, load_library
from ..oplayer import checks as E
from ..oplayer import functorch_active

_EXCEPTIONAL = (10, 20)  # lahqr's KEXSH: exceptional shifts after this many steps without deflation


def _ulp(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps


def _tiny(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).tiny


def _scaled_norm(x: torch.Tensor) -> torch.Tensor:
    big = x.abs().amax(-1)
    s = torch.where(big > 0, big, torch.ones_like(big))
    return s * torch.linalg.vector_norm(x / s[..., None], dim=-1)


def _larfg(alpha: torch.Tensor, x: torch.Tensor):
    """LAPACK ``larfg`` of ``[alpha; x]`` per batch row: ``(beta, tau, v)`` with ``v = [1; v2]`` and
    ``(I - tau v vᴴ)ᴴ [alpha; x] = [beta; 0]`` (``tau = 0`` when there is nothing to annihilate)."""
    xnorm = _scaled_norm(x)
    re = alpha.real if alpha.is_complex() else alpha
    im = alpha.imag if alpha.is_complex() else torch.zeros_like(alpha)
    mag = torch.hypot(alpha.abs(), xnorm)
    beta = torch.where(re >= 0, -mag, mag)
    skip = (xnorm == 0) & (im == 0)
    beta = torch.where(skip, re, beta)
    safe = torch.where(skip, torch.ones_like(beta), beta).to(alpha.dtype)
    tau = torch.where(skip, torch.zeros_like(alpha), (beta.to(alpha.dtype) - alpha) / safe)
    denom = torch.where(skip, torch.ones_like(alpha), alpha - beta.to(alpha.dtype))
    v = torch.cat([torch.ones_like(alpha)[:, None], x / denom[:, None]], dim=-1)
    return beta.to(alpha.dtype), tau, v


def hessenberg(H: torch.Tensor, Z: torch.Tensor | None) -> None:
    """``gehrd`` in place: ``H <- Pᴴ H P`` upper Hessenberg, ``Z <- Z P`` (vectorised over the batch)."""
    n = H.shape[-1]
    for k in range(n - 2):
        beta, tau, v = _larfg(H[:, k + 1, k], H[:, k + 2:, k])
        rows = H[:, k + 1:, :]
        rows.sub_((tau.conj()[:, None, None] * v[:, :, None]) * (v.conj()[:, None, :] @ rows))
        cols = H[:, :, k + 1:]
        cols.sub_((cols @ v[:, :, None]) * (tau[:, None, None] * v.conj()[:, None, :]))
        H[:, k + 1, k] = beta
        H[:, k + 2:, k] = 0
        if Z is not None:
            zc = Z[:, :, k + 1:]
            zc.sub_((zc @ v[:, :, None]) * (tau[:, None, None] * v.conj()[:, None, :]))


def _qr_q(M: torch.Tensor) -> torch.Tensor:
    if M.is_mps or (M.is_cpu and _kernel_backend()):
        from ..qr import qr_impl  # our QR's kernels on mps (and the emulator)

        return qr_impl(M, "reduced")[0]
    return torch.linalg.qr(M)[0]


def _kernel_backend() -> bool:
    return backend_for(torch.device("cpu")) != "torch"


def _row_left(H: torch.Tensor, r: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """``max_{j < cols_b} |H[b, r_b, j]|`` per matrix (0 where ``cols_b <= 0``)."""
    B, n, _ = H.shape
    idx = r.clamp(0, n - 1)
    row = H.gather(1, idx[:, None, None].expand(B, 1, n))[:, 0].abs()
    left = torch.arange(n, device=H.device)[None, :] < cols[:, None]
    return torch.where(left, row, torch.zeros_like(row)).amax(-1)


def _diag_at(H: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    n = H.shape[-1]
    d = torch.diagonal(H, dim1=-2, dim2=-1)
    return d.gather(1, i.clamp(0, n - 1)[:, None])[:, 0]


def _entry(H: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    B, n, _ = H.shape
    flat = H.reshape(B, n * n)
    return flat.gather(1, (i.clamp(0, n - 1) * n + j.clamp(0, n - 1))[:, None])[:, 0]


def _zero_rows_left(H: torch.Tensor, rows_from: torch.Tensor, rows_to: torch.Tensor, cols_to: torch.Tensor,
                    where: torch.Tensor) -> torch.Tensor:
    """``H`` with ``H[b, i, j] = 0`` for ``rows_from <= i < rows_to``, ``j < cols_to`` where ``where[b]``."""
    n = H.shape[-1]
    i = torch.arange(n, device=H.device)[None, :, None]
    j = torch.arange(n, device=H.device)[None, None, :]
    mask = (where[:, None, None] & (i >= rows_from[:, None, None]) & (i < rows_to[:, None, None])
            & (j < cols_to[:, None, None]))
    return torch.where(mask, torch.zeros_like(H), H)


class _TorchKernels:
    """The kernel contract with torch ops (any device and dtype)."""

    name = "torch"

    def schur(self, A: torch.Tensor, want_z: bool, sync: bool = True):
        B, n, _ = A.shape
        H = A.clone()
        Z = torch.eye(n, dtype=A.dtype, device=A.device).expand(B, n, n).clone() if want_z else None
        hessenberg(H, Z)
        real = not A.is_complex()
        ulp, tiny = _ulp(A.dtype), _tiny(A.dtype)
        m = torch.full((B,), n, dtype=torch.int64, device=A.device)
        its = torch.zeros_like(m)
        eye = torch.eye(n, dtype=A.dtype, device=A.device)
        ar = torch.arange(n, device=A.device)
        check_every = 1 if A.is_cpu else 4
        # before the first step, deflate as far as the Hessenberg form allows (a triangular matrix
        # entirely: no QR step, so its diagonal is returned exactly); then at most two per step
        H, m, its = self._deflate(H, m, its, real, ulp, tiny, rounds=n if n <= 64 else 2)
        for step in range(30 * max(10, n) if sync else 6 * n + 30):
            H, m, its = self._deflate(H, m, its, real, ulp, tiny)
            if sync and step % check_every == 0 and not bool((m > 0).any()):  # the host read of the iteration
                break
            active = (ar[None, :, None] < m[:, None, None]) & (ar[None, None, :] < m[:, None, None])
            M = self._shifted(H, m, its, real, eye)
            M = torch.where(active, M, eye.expand_as(M))
            Q = _qr_q(M)
            H = Q.mH @ H @ Q
            if Z is not None:
                Z = Z @ Q
            its = its + 1
        H, m, its = self._deflate(H, m, its, real, ulp, tiny)
        return H, Z, m

    @staticmethod
    def _deflate(H, m, its, real, ulp, tiny, rounds=2):
        # at most `rounds` deflations (a 1x1 or a 2x2 each) per call and matrix
        for _ in range(rounds):
            r = m - 1
            tst = _diag_at(H, r).abs() + _diag_at(H, r - 1).abs()
            tst = torch.where(tst == 0, H.abs().amax((-2, -1)), tst)
            one = (m == 1) | ((m > 1) & (_row_left(H, r, r) <= torch.clamp(ulp * tst, min=tiny)))
            H = _zero_rows_left(H, r, m, r, one & (m > 0))
            if real:
                r2 = m - 2
                tst2 = _diag_at(H, r2).abs() + _diag_at(H, r2 - 1).abs()
                tst2 = torch.where(tst2 == 0, H.abs().amax((-2, -1)), tst2)
                left2 = torch.maximum(_row_left(H, r2, r2), _row_left(H, r, r2))
                two = ~one & (m >= 2) & ((m == 2) | (left2 <= torch.clamp(ulp * tst2, min=tiny)))
                # rows m-2 and m-1 left of column m-2 (row m-1's entry at m-2 stays: the 2x2 block)
                H = _zero_rows_left(H, r2, m, r2, two)
            else:
                two = torch.zeros_like(one)
            done = (one | two) & (m > 0)
            m = torch.where(one & (m > 0), m - 1, torch.where(two, m - 2, m))
            its = torch.where(done, torch.zeros_like(its), its)
        return H, m, its

    @staticmethod
    def _shifted(H, m, its, real, eye):
        r = m - 1
        a, b = _entry(H, r - 1, r - 1), _entry(H, r - 1, r)
        c, d = _entry(H, r, r - 1), _entry(H, r, r)
        exceptional = (its == _EXCEPTIONAL[0]) | (its == _EXCEPTIONAL[1])
        s = _entry(H, r, r - 1).abs() + _entry(H, r - 1, r - 2).abs()
        if real:
            h11 = 0.75 * s + d
            a = torch.where(exceptional, h11, a)
            b = torch.where(exceptional, -0.4375 * s, b)
            c = torch.where(exceptional, s, c)
            d = torch.where(exceptional, h11, d)
            # (H - s1 I)(H - s2 I) = H^2 - (s1 + s2) H + s1 s2 I, s1,2 the eigenvalues of [[a, b], [c, d]]
            return H @ H - (a + d)[:, None, None] * H + (a * d - b * c)[:, None, None] * eye
        # Wilkinson: the eigenvalue of the trailing 2x2 closer to d
        p = 0.5 * (a - d)
        disc = torch.sqrt(p * p + b * c)
        disc = torch.where((p.conj() * disc).real < 0, -disc, disc)
        denom = p + disc
        sigma = d - torch.where(denom == 0, torch.zeros_like(denom), b * c / torch.where(denom == 0,
                                                                                       torch.ones_like(denom), denom))
        sigma = torch.where(exceptional, d + 0.75 * s, sigma)
        return H - sigma[:, None, None] * eye


class _MetalKernels:
    """The kernel contract with ``metal/eig.metal`` (``metal`` on mps, ``emulator`` on CPU): the
    whole Schur form of every matrix in one dispatch (``eig_schur_small``: Hessenberg reduction and
    ``lahqr``'s implicit QR in threadgroup memory, one simdgroup per matrix)."""

    name = "metal"

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        self.lib = load_library("eig", device)
        self.dtype = dtype

    def schur(self, A: torch.Tensor, want_z: bool, sync: bool = True):
        B, n, _ = A.shape
        T = torch.empty_like(A)
        Z = torch.empty_like(A) if want_z else T  # a placeholder buffer the kernel never touches
        m = torch.empty(B, dtype=torch.int32, device=A.device)
        getattr(self.lib, kernel_name("eig_schur_small", self.dtype))(A, T, Z, m, n, int(want_z), threads=B * 32,
                                                                      group_size=32)
        return T, (Z if want_z else None), m.to(torch.int64)


#: The largest order ``eig_schur_small`` takes, and its threadgroup tile (``metal/eig.metal``:
#: 32 KiB of elements less 2 x 64 for the reflector scratch: n <= 64 float32, n <= 62 complex64).
METAL_MAX_N = 64


def metal_fits(n: int, dtype: torch.dtype) -> bool:
    """``n x n`` of ``dtype`` fits ``eig_schur_small``'s threadgroup tile."""
    size = 8 if dtype.is_complex else 4
    return n <= METAL_MAX_N and n * n <= 32768 // size - 2 * METAL_MAX_N


_TORCH_KERNELS = _TorchKernels()


def kernels_for(A: torch.Tensor):
    """The kernel object serving ``A``: the Metal kernel on the metal/emulator backends for
    float32/complex64 matrices that fit it (outside ``torch.func`` transforms), else torch ops."""
    n = A.shape[-1]
    if (A.dtype in E.GPU_DTYPES and metal_fits(n, A.dtype) and backend_for(A.device) != "torch"
            and not functorch_active()):
        return _MetalKernels(A.device, A.dtype)
    return _TORCH_KERNELS
