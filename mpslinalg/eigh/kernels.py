"""The eigh family's kernels and tuning (used by :mod:`mpslinalg.eigh`): the batched two-sided
Jacobi, the tridiagonal QL and the two-stage reduction's band stage, each behind one contract with
two implementations — torch ops for the ``torch`` backend, ``metal/eigh*.metal`` for the ``metal``
and ``emulator`` backends.

Kernel contracts (identical on every backend)
---------------------------------------------
``jacobi(H, V, sweeps, tol, ctol, early_exit) -> (H', V', rotated)``
    Cyclic two-sided Jacobi on every Hermitian matrix of the contiguous ``[B, n, n]`` buffer ``H``
    (``n`` even; a zero padding row/column is never rotated), the same rotations applied to the
    columns of ``V`` (``[B, n, n]`` or ``None``), for at most ``sweeps`` sweeps of the round-robin
    ordering (``n/2`` disjoint pairs a round, ``n - 1`` rounds a sweep). A pair is rotated when
    ``|h_pq| > tol * sqrt|h_pp| * sqrt|h_qq|`` and ``|h_pq| >`` the smallest normal number
    (Demmel–Veselić's relative rule; the floor only stops rotations by subnormal angles);
    ``rotated [B]`` (bool) says whether a matrix still rotated a pair above ``ctol`` in its last
    sweep (``early_exit``: the loop stops after the first sweep in which no matrix did). The
    diagonal of ``H'`` holds the eigenvalues (real), ``V'`` the eigenvectors, in the same order.
``jacobi_small(H, V, sweeps, tol, ctol, early_exit) -> (H', V', rotated)``
    The ``jacobi`` contract for ``n <= SMALL_MAX`` (4; any ``n``, odd included): Metal: one thread
    per matrix in registers (``eigh_small``, cyclic row ordering); torch: :func:`jacobi_torch` on
    the matrices padded to an even order (the padding row/column is never rotated).
``tridiagonal(d, e, Z, iterations) -> (w, Z', failed)``
    The eigenvalues ``w [B, n]`` (any order) of the real symmetric tridiagonals ``diag(d [B, n]) +
    offdiag(e [B, n - 1])``; ``Z [B, n, n]`` (or ``None``; real or complex) multiplied on the right
    by the orthogonal eigenvector matrix of the tridiagonal (``Z' = Z Q``, columns in ``w``'s
    order); ``failed [B]`` (bool): some eigenvalue took more than ``iterations`` QL chases. Metal:
    implicit QL with Wilkinson shifts (LAPACK ``steqr``'s QL branch, EISPACK ``tql2``); torch: the
    device's tridiagonal leaf (:func:`tridiagonal_torch`).
``band_tridiagonal(A, nb) -> (d, e, V2, tau2)``
    Stage 2 of the two-stage reduction: the Hermitian band matrices ``A [B, n, n]`` (bandwidth
    ``nb <= BAND_MAX_NB``, both triangles stored densely; not modified) reduced to real symmetric
    tridiagonals ``d [B, n]``, ``e [B, n - 1]`` (real, float32 for both dtypes) by Householder bulge
    chasing, ``A = Q2 T Q2ᴴ``, with every reflector recorded: ``V2 [B, n, S, nb]`` (unit first
    entry stored), ``tau2 [B, n, S]``, sweep ``j``, step ``k`` (``S = band_steps(n, nb)``; slots a
    sweep does not reach are not read). Metal: ``eigh_band_tridiag`` (one threadgroup per matrix,
    only the band's reach touched); torch: :func:`band_tridiagonal_torch` (the same reflectors on
    the dense matrix; tests and CPU reference).
``band_q2(V2, tau2, Z, nb) -> Q2 Z``
    ``Z [B, n, n]`` (of ``A``'s dtype) multiplied on the left by ``Q2``. Metal: ``eigh_band_q2``
    (one thread per column, no barriers); torch: :func:`band_q2_torch`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import torch

from ..kernels import backend_for, kernel_name, load_library
from ..oplayer import checks as E
from ..oplayer import functorch_active as _functorch


@dataclass
class Tuning:
    """Paths, bounds and sweep counts of the eigh family (``benchmarks/bench_eigh.py`` measures them).

    Attributes
    ----------
    jacobi_max : dict
        Per backend kind (``"torch"``, ``"metal"``) and dtype: the largest order solved by the
        batched Jacobi; larger matrices are tridiagonalised (Householder) and solved by implicit QL.
        On ``metal`` the bound is what fits the threadgroup memory of ``eigh_jacobi`` (``n <= 64``
        float32, ``n <= 58`` complex64); the ``torch`` bound is measured (the Jacobi costs
        ``O(n^3)`` per sweep over ``n - 1`` dependent rounds).
    max_sweeps : int
        Sweep bound of the Jacobi where convergence is checked on the host (CPU): ``xGESVJ``'s 30.
    gpu_sweeps : dict
        Devices where checking convergence would synchronise run a fixed ``gpu_sweeps[dtype] +
        ceil(log2 n)`` sweeps (at most ``max_sweeps``): no ``_ex`` call reads the device. A matrix
        still rotating in its last sweep gets ``info = 2``.
    ql_iterations : int
        QL iterations allowed per eigenvalue of the tridiagonal solver (LAPACK ``steqr``: 30).
    nb : int
        Panel width of the blocked Householder tridiagonalisation (``sytrd``/``latrd``).
    reduction : dict
        Per backend kind and dtype, the reduction of ``n > jacobi_max``: ``"two_stage"`` (dense ->
        band by matrix products per panel, band -> tridiagonal by one bulge-chasing kernel; a
        dispatch count linear in the panels) or ``"sytrd"`` (one stage, ~58 torch ops per column);
        absent means ``"sytrd"``. The ``torch`` backend keeps ``sytrd`` (its front door calls
        torch.linalg anyway; ``two_stage`` runs there with the slow torch-op twins, for tests).
    band_nb : int
        Bandwidth of the two-stage reduction's band (at most ``BAND_MAX_NB`` = 64).
    """

    jacobi_max: dict = field(default_factory=lambda: {
        "torch": {torch.float32: 64, torch.float64: 64, torch.complex64: 64, torch.complex128: 64},
        "metal": {torch.float32: 64, torch.complex64: 58}})
    max_sweeps: int = 30
    gpu_sweeps: dict = field(default_factory=lambda: {torch.float32: 6, torch.float64: 8})
    ql_iterations: int = 30
    nb: int = 32
    reduction: dict = field(default_factory=lambda: {
        "torch": {},
        "metal": {torch.float32: "two_stage", torch.complex64: "two_stage"}})
    band_nb: int = 32

    def sweeps(self, device: torch.device, dtype: torch.dtype, n: int) -> tuple[int, bool]:
        """``(sweeps, early_exit)`` of the Jacobi for order ``n`` and real ``dtype`` on ``device``."""
        if device.type == "cpu":
            return self.max_sweeps, True
        base = self.gpu_sweeps.get(dtype, self.max_sweeps)
        return min(self.max_sweeps, base + max(1, math.ceil(math.log2(max(n, 2))))), False


#: The tuning in use (module-level, mutable: benchmarks and tests adjust it).
TUNING = Tuning()


# --------------------------------------------------------------------------------------------------
# The round-robin ordering
# --------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _ring_source_list(n: int) -> tuple[int, ...]:
    """The circle method as a fixed position map: round ``r`` pairs positions ``(i, n/2 + i)``; between
    rounds every position but 0 moves one place along the ring ``1 .. n/2-1, n-1 .. n/2``, so after
    ``n - 1`` rounds every pair has met once and the order is the original again.
    ``src[p]`` is the position whose row/column moves to ``p``."""
    h = n // 2
    ring = list(range(1, h)) + list(range(n - 1, h - 1, -1))
    src = list(range(n))
    for k, p in enumerate(ring):
        src[p] = ring[k - 1]
    return tuple(src)


def _ring_source(n: int, device: torch.device) -> torch.Tensor:
    return torch.tensor(_ring_source_list(n), dtype=torch.long, device=device)


# --------------------------------------------------------------------------------------------------
# torch-op kernels
# --------------------------------------------------------------------------------------------------


def _rotation(a, d, b, tol: float, ctol: float):
    """Rutishauser's rotation of the 2x2 Hermitian blocks ``[[a, b], [conj b, d]]`` (``a``, ``d``
    real, ``[B, h]``): ``(t, c, s, w, rot, big)`` with ``J = [[c, s w], [-s conj(w), c]]``,
    ``Jᴴ [[a, b], [b̄, d]] J = diag(a - t|b|, d + t|b|)``, ``w = b/|b|``; ``rot`` the pairs rotated,
    ``big`` those above ``ctol``."""
    ab = b.abs()
    tiny = torch.finfo(ab.dtype).tiny
    thr = a.abs().sqrt() * d.abs().sqrt()  # square roots apart: the product may under/overflow
    rot = (ab > tol * thr) & (ab > tiny)
    big = (ab > ctol * thr) & (ab > tiny)
    safe = torch.where(rot, ab, torch.ones_like(ab))
    zeta = (d - a) / (2 * safe)
    sign = torch.where(zeta >= 0, 1.0, -1.0).to(ab.dtype)
    t = torch.where(rot, sign / (zeta.abs() + torch.hypot(torch.ones_like(zeta), zeta)), torch.zeros_like(zeta))
    c = torch.rsqrt(1 + t * t)
    s = t * c
    w = torch.where(rot, b / safe.to(b.dtype), torch.ones_like(b))
    return t, c, s, w, ab, rot, big


def jacobi_torch(H: torch.Tensor, V: torch.Tensor | None, sweeps: int, tol: float, ctol: float,
                 early_exit: bool):
    """The ``jacobi`` contract in torch ops, vectorised over the batch and the ``n/2`` pairs of a round.

    The matrices are kept in round order: the pairs of every round are the positions ``(i, h + i)``,
    so a round is two half-block rotations (rows, then columns) and the ring move of
    :func:`_ring_source_list` (two gathers)."""
    B, n, _ = H.shape
    h = n // 2
    src = _ring_source(n, H.device)
    rotated = torch.zeros(B, dtype=torch.bool, device=H.device)
    for _ in range(sweeps):
        rotated = torch.zeros(B, dtype=torch.bool, device=H.device)
        for _ in range(n - 1):
            diag = H.diagonal(dim1=-2, dim2=-1)
            diag = diag.real if H.is_complex() else diag
            a, d = diag[:, :h], diag[:, h:]
            b = H[:, :h, h:].diagonal(dim1=-2, dim2=-1)
            t, c, s, w, ab, rot, big = _rotation(a, d, b, tol, ctol)
            rotated |= big.any(-1)
            cc = c.to(H.dtype)
            sw = s * w
            swc = sw.conj()
            top, bot = H[:, :h], H[:, h:]
            H = torch.cat([cc[:, :, None] * top - sw[:, :, None] * bot,
                           swc[:, :, None] * top + cc[:, :, None] * bot], dim=1)
            left, right = H[:, :, :h], H[:, :, h:]
            H = torch.cat([cc[:, None, :] * left - swc[:, None, :] * right,
                           sw[:, None, :] * left + cc[:, None, :] * right], dim=2)
            # the rotated 2x2 blocks exactly (Rutishauser's update: no cancellation on the diagonal)
            tb = t * ab
            H.diagonal(dim1=-2, dim2=-1)[:, :h].copy_(a - tb)
            H.diagonal(dim1=-2, dim2=-1)[:, h:].copy_(d + tb)
            off = H[:, :h, h:].diagonal(dim1=-2, dim2=-1)
            off.copy_(torch.where(rot, torch.zeros_like(b), b))
            H[:, h:, :h].diagonal(dim1=-2, dim2=-1).copy_(off.conj())
            H = H[:, src][:, :, src]
            if V is not None:
                left, right = V[:, :, :h], V[:, :, h:]
                V = torch.cat([cc[:, None, :] * left - swc[:, None, :] * right,
                               sw[:, None, :] * left + cc[:, None, :] * right], dim=2)[:, :, src]
        if early_exit and not bool(rotated.any()):  # CPU only (Tuning.sweeps): the check is free
            break
    return H, V, rotated


def _larfg(alpha: torch.Tensor, x: torch.Tensor):
    """LAPACK ``larfg`` for a batch of columns ``[alpha; x]``: ``(beta real, tau, v2)`` with
    ``Hᴴ [alpha; x] = [beta; 0]``, ``H = I - tau v vᴴ``, ``v = [1; v2]``; ``tau = 0`` when ``x = 0``
    and ``alpha`` is real. The norm is scaled by the largest magnitude (no under/overflow)."""
    big = x.abs().amax(-1) if x.shape[-1] else alpha.real.abs() * 0
    s = torch.where(big > 0, big, torch.ones_like(big))
    xnorm = s * torch.linalg.vector_norm(x / s[..., None].to(x.dtype), dim=-1) if x.shape[-1] else big
    re = alpha.real if alpha.is_complex() else alpha
    im = alpha.imag if alpha.is_complex() else torch.zeros_like(alpha)
    mag = torch.hypot(alpha.abs(), xnorm)
    skip = (xnorm == 0) & (im == 0)
    beta = torch.where(skip, re, torch.where(re >= 0, -mag, mag))
    safe = torch.where(skip, torch.ones_like(beta), beta)
    tau = torch.where(skip, torch.zeros_like(alpha), (beta.to(alpha.dtype) - alpha) / safe.to(alpha.dtype))
    denom = torch.where(skip, torch.ones_like(alpha), alpha - beta.to(alpha.dtype))
    return beta, tau, x / denom[..., None]


def tridiagonal_torch(d: torch.Tensor, e: torch.Tensor, Z: torch.Tensor | None, iterations: int):
    """The ``tridiagonal`` contract on the ``torch`` backend: the device's own symmetric
    tridiagonal eigensolver leaf (DESIGN §4: torch ops may use ``torch.linalg`` for a leaf), i.e.
    LAPACK's on the CPU, cuSOLVER on CUDA, on the tridiagonal formed densely; ``Z Q`` by one product.

    The QL iteration itself is sequential (one bulge chase per iteration, ``O(n^2)`` dependent steps
    a matrix): it is a kernel on the GPU backends (``metal/eigh_tridiag.metal``), not torch ops."""
    T = torch.diag_embed(d) + torch.diag_embed(e, 1) + torch.diag_embed(e, -1)
    ok = torch.isfinite(T).all(-1).all(-1)
    T = torch.where(ok[:, None, None], T, torch.zeros_like(T))
    if Z is None:
        w = torch.linalg.eigvalsh(T)
        return w, None, ~ok
    w, Q = torch.linalg.eigh(T)
    return w, torch.matmul(Z, Q.to(Z.dtype)), ~ok


def band_steps(n: int, nb: int) -> int:
    """``S``: the most bulge-chasing steps of a sweep (sweep 0) for order ``n`` and bandwidth ``nb``."""
    return max(1, -(-(n - 1) // nb))


def band_tridiagonal_torch(A: torch.Tensor, nb: int):
    """The ``band_tridiagonal`` contract in torch ops: the same reflectors in the same order as
    ``eigh_band_tridiag`` (sweep ``j``, step ``k`` reflects rows ``p = j + 1 + k nb .. p + nb - 1`` to
    clear column ``c`` = ``j``, then the previous step's first row), each applied to whole rows and
    columns of the dense matrix (the kernel touches only the band's reach). Tests and the CPU
    reference only: ``~n²/(2 nb)`` steps of a few torch ops each."""
    B, n, _ = A.shape
    A = A.clone()
    S = band_steps(n, nb)
    V = A.new_zeros(B, n, S, nb)
    tau = A.new_zeros(B, n, S)
    for j in range(n - 1):
        c = j
        for k, p in enumerate(range(j + 1, n, nb)):
            L = min(nb, n - p)
            beta, t, v2 = _larfg(A[:, p, c], A[:, p + 1:p + L, c])
            v = torch.cat([torch.ones_like(beta[:, None]).to(A.dtype), v2], dim=-1)
            V[:, j, k, :L] = v
            tau[:, j, k] = t
            rows = A[:, p:p + L, :]  # H^H from the left, H from the right (H = I - tau v v^H)
            rows -= (t.conj()[:, None, None] * v[:, :, None]) * torch.matmul(v.conj()[:, None, :], rows)
            cols = A[:, :, p:p + L]
            cols -= torch.matmul(cols, v[:, :, None]) * (t[:, None, None] * v.conj()[:, None, :])
            col = torch.zeros_like(A[:, p:p + L, c])
            col[:, 0] = beta.to(A.dtype)
            A[:, p:p + L, c] = col
            A[:, c, p:p + L] = col
            c = p
    diag = A.diagonal(dim1=-2, dim2=-1)
    sub = A.diagonal(offset=-1, dim1=-2, dim2=-1)
    real = (lambda x: x.real) if A.is_complex() else (lambda x: x)
    return real(diag).contiguous(), real(sub).contiguous(), V, tau


def band_q2_torch(V: torch.Tensor, tau: torch.Tensor, Z: torch.Tensor, nb: int) -> torch.Tensor:
    """The ``band_q2`` contract in torch ops: ``Q2 Z``, the reflectors of :func:`band_tridiagonal_torch`
    applied to the rows of ``Z`` from the last to the first."""
    B, n, _ = Z.shape
    Z = Z.clone()
    for j in range(n - 2, -1, -1):
        for k, p in reversed(list(enumerate(range(j + 1, n, nb)))):
            L = min(nb, n - p)
            v, t = V[:, j, k, :L], tau[:, j, k]
            rows = Z[:, p:p + L, :]
            rows -= (t[:, None, None] * v[:, :, None]) * torch.matmul(v.conj()[:, None, :], rows)
    return Z


def jacobi_small_torch(H: torch.Tensor, V: torch.Tensor | None, sweeps: int, tol: float, ctol: float,
                       early_exit: bool):
    """The ``jacobi_small`` contract in torch ops: :func:`jacobi_torch` on ``H`` (and ``V``) padded
    to an even order by a zero row and column (never rotated: its off-diagonal entries are zero)."""
    B, n, _ = H.shape
    if n % 2 == 0:
        return jacobi_torch(H, V, sweeps, tol, ctol, early_exit)
    pad = torch.nn.functional.pad
    Vp = None if V is None else pad(V, (0, 1, 0, 1))
    if Vp is not None:
        Vp[:, n, n] = 1
    Hj, Vj, rotated = jacobi_torch(pad(H, (0, 1, 0, 1)), Vp, sweeps, tol, ctol, early_exit)
    return Hj[:, :n, :n], (None if Vj is None else Vj[:, :n, :n]), rotated


class _TorchKernels:
    """The kernel contracts in torch ops (any device and dtype)."""

    name = "torch"

    def jacobi(self, H, V, sweeps, tol, ctol, early_exit):
        return jacobi_torch(H, V, sweeps, tol, ctol, early_exit)

    def jacobi_small(self, H, V, sweeps, tol, ctol, early_exit):
        return jacobi_small_torch(H, V, sweeps, tol, ctol, early_exit)

    def tridiagonal(self, d, e, Z, iterations):
        return tridiagonal_torch(d, e, Z, iterations)

    def band_tridiagonal(self, A, nb):
        return band_tridiagonal_torch(A, nb)

    def band_q2(self, V, tau, Z, nb):
        return band_q2_torch(V, tau, Z, nb)


class _MetalKernels:
    """The kernel contracts with ``metal/eigh.metal`` (``metal`` on mps, ``emulator`` on CPU)."""

    name = "metal"

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        self.device, self.dtype = device, dtype

    @property
    def lib(self):
        return load_library("eigh", self.device)

    @property
    def tri_lib(self):
        return load_library("eigh_tridiag", self.device)

    def jacobi(self, H, V, sweeps, tol, ctol, early_exit):
        B, n, _ = H.shape
        H = H.contiguous().clone()
        want_v = V is not None
        V = V.contiguous().clone() if want_v else H.new_empty(1)
        rotated = torch.empty(B, dtype=torch.int32, device=H.device)
        threads = JACOBI_THREADS
        getattr(self.lib, kernel_name("eigh_jacobi", self.dtype))(
            H, V, rotated, n, sweeps, int(want_v), float(tol), float(ctol), threads=B * threads,
            group_size=threads)
        return H, (V if want_v else None), rotated != 0

    def jacobi_small(self, H, V, sweeps, tol, ctol, early_exit):
        B, n, _ = H.shape
        H = H.contiguous().clone()
        want_v = V is not None
        rotated = torch.empty(B, dtype=torch.int32, device=H.device)
        V = H.new_empty(B, n, n) if want_v else H.new_empty(1)  # the kernel writes V whole
        groups = max(1, -(-B // SMALL_THREADS))
        getattr(self.lib, kernel_name("eigh_small", self.dtype))(
            H, V, rotated, n, B, sweeps, int(want_v), float(tol), float(ctol), threads=groups * SMALL_THREADS,
            group_size=SMALL_THREADS)
        return H, (V if want_v else None), rotated != 0

    def tridiagonal(self, d, e, Z, iterations):
        B, n = d.shape
        d = d.contiguous().clone()
        e_pad = torch.cat([e, e.new_zeros(B, 1)], dim=-1).contiguous()
        want_z = Z is not None
        Zc = E.resolved(Z).clone() if want_z else d.new_empty(1)
        failed = torch.empty(B, dtype=torch.int32, device=d.device)
        scratch = d.new_empty(B, 2 * n)
        getattr(self.tri_lib, kernel_name("eigh_tridiag_ql", Z.dtype if want_z else torch.float32))(
            d, e_pad, Zc, failed, scratch, n, int(want_z), iterations, threads=B * QL_THREADS,
            group_size=QL_THREADS)
        return d, (Zc if want_z else None), failed != 0

    def band_tridiagonal(self, A, nb):
        B, n, _ = A.shape
        if nb > BAND_MAX_NB:
            raise ValueError(f"eigh_band_tridiag: bandwidth nb = {nb} exceeds {BAND_MAX_NB}")
        A = E.resolved(A).clone()
        S = band_steps(n, nb)
        real = torch.float32
        d, e = A.new_empty(B, n, dtype=real), A.new_empty(B, n, dtype=real)
        V, tau = A.new_empty(B, n, S, nb), A.new_empty(B, n, S)  # the kernel writes every slot read
        getattr(self.tri_lib, kernel_name("eigh_band_tridiag", A.dtype))(
            A, d, e, V, tau, n, nb, S, threads=B * BAND_THREADS, group_size=BAND_THREADS)
        return d, e[:, :n - 1], V, tau

    def band_q2(self, V, tau, Z, nb):
        B, n, _ = Z.shape
        Z = E.resolved(Z).clone()
        S = V.shape[2]
        ncols = -(-n // BAND_THREADS) * BAND_THREADS
        getattr(self.tri_lib, kernel_name("eigh_band_q2", Z.dtype))(
            V.contiguous(), tau.contiguous(), Z, n, nb, S, ncols, threads=B * ncols, group_size=BAND_THREADS)
        return Z


#: Threads per threadgroup of ``eigh_jacobi`` (one matrix each) and ``eigh_tridiag_ql``.
JACOBI_THREADS = 64
QL_THREADS = 64
#: Threads per threadgroup of ``eigh_band_tridiag`` (one matrix each) and ``eigh_band_q2``; the widest band.
BAND_THREADS = 64
BAND_MAX_NB = 64
#: Threads per threadgroup of ``eigh_small`` (one matrix per thread) and the largest order it solves.
SMALL_THREADS = 64
SMALL_MAX = 4

_TORCH_KERNELS = _TorchKernels()


def on_kernels(x: torch.Tensor) -> bool:
    """``x`` is served by the ``.metal`` kernels (metal/emulator backend, float32/complex64, no
    ``torch.func`` transform); else by torch ops."""
    return x.dtype in E.GPU_DTYPES and backend_for(x.device) != "torch" and not _functorch()


def kernels_for(x: torch.Tensor):
    """The kernel object serving ``x`` (chosen once, outside the algorithm)."""
    return _MetalKernels(x.device, x.dtype) if on_kernels(x) else _TORCH_KERNELS
