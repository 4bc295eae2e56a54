"""The SVD family's tuning and its one kernel contract, ``jacobi``, with torch ops and with
``metal/svd.metal`` (see :mod:`mpslinalg.svd` for the algorithm and the contract).

The thresholds of the one-sided Jacobi are :func:`thresholds`, the one definition every backend
(torch ops, Metal, C, Triton) is given, so that a change to the stopping rule reaches them all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..kernels import backend_for, kernel_name, load_library
from ..oplayer import checks as E
from ..oplayer import functorch_active

__all__ = ["INFO_NOCONV", "INFO_NONFINITE", "SMALL_MAX", "TUNING", "Tuning", "on_kernels", "thresholds"]


@dataclass
class Tuning:
    """Sweep bounds of the one-sided Jacobi (see :mod:`mpslinalg.svd`, step 4) and the device paths'
    switches (:mod:`mpslinalg.svd.paths`).

    Attributes
    ----------
    max_sweeps : int
        Most sweeps run on the CPU (which stops early once converged); ``xGESVJ``'s ``NSWEEP``.
    jacobi_max : dict
        ``torch`` backend, per device type: largest order solved by Jacobi; larger ones take the
        device's own SVD of the preconditioned factor (block Jacobi through matrix products is
        not written yet). The ``metal``/``emulator`` backends always run Jacobi, unless
        ``large_driver == "qdwh"``: then orders above ``jacobi_max["metal"]`` take QDWH.
    compile_max : int
        CUDA, torch backend: largest (padded) order whose Jacobi sweep is fused by ``torch.compile``
        (0 turns it off).
    triton : bool
        CUDA, torch backend, float32/complex64, (padded) order <= 64: the whole Jacobi iteration is
        one Triton launch (:mod:`mpslinalg.svd.triton_jacobi`); False falls back to the sweeps above.
    triton_sweeps : int or None
        Sweep bound of the Triton kernels, which stop each matrix on the GPU after its first sweep
        without a significant rotation (no host read): ``xGESVJ``'s 30, as the CPU, instead of the
        ``gpu_sweeps`` schedule, which one random 8x9 matrix in 100000 exceeded on the H200 (9
        sweeps); None uses the schedule.
    large_driver : str or None
        CUDA, torch backend, orders above ``jacobi_max``: the cuSOLVER driver of ``torch.linalg.svd``
        run on the scaled matrix itself (None: torch's choice); ``"precondition"`` keeps the QR
        preconditioner and runs the device's SVD of its triangular factor instead. ``"qdwh"``
        selects the QDWH polar decomposition and a Hermitian eigensolver
        (:mod:`mpslinalg.svd.qdwh`; matrix products, QR, Cholesky) on every path above its Jacobi
        range: CUDA above ``jacobi_max["cuda"]``, the CPU above ``jacobi_max["cpu"]`` (instead of
        LAPACK), the ``metal``/``emulator`` backends above ``jacobi_max["metal"]`` (instead of
        Jacobi). Absolute accuracy only, as a bidiagonalising SVD. Not the default anywhere: the
        CUDA default stays cuSOLVER because QDWH is unmeasured on a GPU (this repository has no
        GPU timing of it; the CPU's are in docs/ops/svd.md), and Metal's stays Jacobi (relatively
        accurate; QDWH's ``≈ 30 n³`` flops against the Jacobi's ``≈ 2·sweeps·n³`` win only if
        the emulator/GPU ran its QR and Cholesky kernels near GEMM speed, which is unmeasured).
    round_threads : int
        Threads per threadgroup of ``svd_jacobi_round`` (a multiple of 32, at most 256).
    gpu_sweeps : dict
        Devices where checking convergence would synchronise run a fixed ``gpu_sweeps[dtype] +
        ceil(log2 n)`` sweeps (at most ``max_sweeps``). Quadratic convergence after QR
        preconditioning; the sweeps needed on random, graded, κ = 1e6 and clustered spectra are
        in ``docs/evidence/svd.md`` (float32 n = 32: 9 of the 11 run).
    """

    max_sweeps: int = 30
    gpu_sweeps: dict | None = None
    round_threads: int = 64
    compile_max: int = 64
    triton: bool = True
    triton_sweeps: int | None = 30
    large_driver: str | None = None
    jacobi_max: dict = field(default_factory=lambda: {"cpu": 128, "cuda": 64, "metal": 128})

    def sweeps(self, device: torch.device, dtype: torch.dtype, n: int = 32) -> tuple[int, bool]:
        """``(sweeps, early_exit)`` for ``n``-column matrices of real ``dtype`` on ``device``."""
        if device.type == "cpu":
            return self.max_sweeps, True
        extra = (self.gpu_sweeps or {torch.float32: 6, torch.float64: 7}).get(dtype, self.max_sweeps)
        return min(self.max_sweeps, extra + max(1, math.ceil(math.log2(max(n, 2))))), False


#: The tuning in use (module-level, mutable: benchmarks and tests adjust it).
TUNING = Tuning()

# info codes of svd_ex (per matrix)
INFO_NONFINITE = 1
INFO_NOCONV = 2

#: Largest (even) order of the whole-matrix ``svd_jacobi_small`` kernel (its tiles are 32 x 33).
SMALL_MAX = 32


def thresholds(n: int, dtype: torch.dtype) -> tuple[float, float]:
    """``(tol, ctol)`` of the one-sided Jacobi on ``n`` columns of real ``dtype``.

    A pair is rotated when ``|x_pᴴ x_q| > tol·‖x_p‖·‖x_q‖``, ``tol = √n·u`` (``xGESVJ``'s
    ``CTOL``); a sweep counts as not converged only for a rotation above ``ctol = 2n·u``, the
    rounding noise of the computed dot product (``γ_n``), so rounding alone cannot keep a
    converged matrix rotating to the sweep bound. At exit every pair of the rotated columns is
    orthogonal to ``tol`` (the columns of ``U`` to ``tol`` plus their normalisation's rounding):
    the accuracy tests bound ``UᴴU − I`` from this.
    """
    u = torch.finfo(dtype).eps / 2
    return math.sqrt(n) * u, 2 * n * u


def _round_robin(n: int) -> list[torch.Tensor]:
    """Slot permutations of the circle method for even ``n``.

    In every round, slots ``(2k, 2k+1)`` hold a pair; ``perms[r]`` maps the slot layout of round
    ``r`` to that of round ``r + 1`` (``new[..., j] = old[..., perms[r][j]]``); after ``n − 1``
    rounds the layout is the original one again.
    """
    def layout(r: int) -> list[int]:
        rest = list(range(1, n))
        rest = rest[r % (n - 1):] + rest[: r % (n - 1)]
        players = [0, *rest]
        out = []
        for i in range(n // 2):
            out += [players[i], players[n - 1 - i]]
        return out

    perms = []
    for r in range(n - 1):
        cur, nxt = layout(r), layout(r + 1)
        where = {col: slot for slot, col in enumerate(cur)}
        perms.append(torch.tensor([where[col] for col in nxt], dtype=torch.long))
    return perms


_RR_CACHE: dict[tuple[int, str], list[torch.Tensor]] = {}


def _perms(n: int, device: torch.device) -> list[torch.Tensor]:
    key = (n, str(device))
    if key not in _RR_CACHE:
        _RR_CACHE[key] = [p.to(device) for p in _round_robin(n)]
    return _RR_CACHE[key]


def _rotations(xp: torch.Tensor, xq: torch.Tensor, tol: float, ctol: float):
    """Jacobi rotations of column pairs ``(xp, xq)`` (``[..., rows, h]``): ``(c, s·e, rot)``.

    ``x_p' = c x_p − conj(s·e) x_q``, ``x_q' = (s·e) x_p + c x_q`` orthogonalises the pair.
    Each column is scaled by the power of two of its largest entry first (``s_p``, ``s_q``; exact, and
    the same decisions and bits wherever nothing underflows): the cosine ``|g|/(√a·√b)`` is
    invariant, and ``ζ = (b − a)/(2|g|) = (b̃·r − ã/r)/(2|g̃|)`` with ``r = s_p/s_q``. Unscaled,
    the noise columns of an exactly rank-deficient matrix (float32 entries of ~1e-21 beside ~1:
    ``ones(8, 8)``'s) have squares and products below the normal range; their lost digits kept
    such pairs rotating to the sweep bound (``info = 2`` for an accurate result). A column whose
    entries are all below ``tiny/u`` (``2^-102`` in float32) neither rotates nor counts: its digits
    lie in the subnormal range, rotations cannot orthogonalise it (the zero columns of ``ones(64,
    33)`` filled with such noise rotated forever), and its ``σ <= √rows·tiny/u`` is below
    ``√tiny·σ₁`` (``X`` is the factor of a matrix scaled to ``max|a_ij| >= 1/2``, so ``σ₁ >= 1/2``):
    step 5 replaces it by the completion.
    """
    rdt = xp.real.dtype if xp.is_complex() else xp.dtype
    tiny_e = int(math.log2(torch.finfo(rdt).tiny))  # -126 for float32

    def exponent(x):  # of the largest |entry| of each column, at least tiny_e + 1: 2^-e is normal
        big = x.abs().amax(-2)
        return torch.frexp(torch.where(big > 0, big, torch.ones_like(big))).exponent.clamp_min(tiny_e + 1)

    ep, eq = exponent(xp), exponent(xq)
    one = torch.ones_like(ep, dtype=rdt)  # batched like ep under vmap
    xp = xp * torch.ldexp(one, -ep)[..., None, :].to(xp.dtype)
    xq = xq * torch.ldexp(one, -eq)[..., None, :].to(xq.dtype)
    r = torch.ldexp(one, (eq - ep).clamp(tiny_e, -tiny_e))  # s_p / s_q
    a = (xp.real.square() + xp.imag.square()).sum(-2) if xp.is_complex() else xp.square().sum(-2)
    b = (xq.real.square() + xq.imag.square()).sum(-2) if xq.is_complex() else xq.square().sum(-2)
    g = (xp.conj() * xq).sum(-2)
    ag = g.abs()
    scale = a.sqrt() * b.sqrt()  # never √(αβ): αβ can overflow or underflow
    noise = tiny_e - int(math.log2(torch.finfo(rdt).eps)) + 1  # 2^noise = tiny/u: -102 in float32
    live = (ep > noise) & (eq > noise)
    rot = (ag > tol * scale) & live
    sig = (ag > ctol * scale) & live
    safe = torch.where(rot, ag, torch.ones_like(ag))
    zeta = (b * r - a / r) / (2 * safe)
    t = torch.where(zeta >= 0, 1.0, -1.0) / (zeta.abs() + torch.hypot(torch.ones_like(zeta), zeta))
    c = torch.rsqrt(1 + t * t)
    s = c * t
    e = g / safe
    c = torch.where(rot, c, torch.ones_like(c))
    se = torch.where(rot, s * e, torch.zeros_like(e))
    return c, se, rot, sig


def sweep(Y: torch.Tensor, rows: int, perms: tuple[torch.Tensor, ...], tol: float, ctol: float):
    """One sweep (``n − 1`` rounds) of the torch kernel: ``(Y', rotated)``."""
    Bn, _, n = Y.shape
    h = n // 2
    rotated = torch.zeros(Bn, dtype=torch.bool, device=Y.device)
    for perm in perms:
        P = Y.unflatten(-1, (h, 2))
        yp, yq = P[..., 0], P[..., 1]
        c, se, _, sig = _rotations(yp[:, :rows], yq[:, :rows], tol, ctol)
        rotated = rotated | sig.any(-1)
        c, se = c[:, None, :], se[:, None, :]
        new_p = c * yp - se.conj() * yq
        new_q = se * yp + c * yq
        Y = torch.stack([new_p, new_q], dim=-1).flatten(-2).index_select(-1, perm)
    return Y, rotated


class TorchKernels:
    """The kernel contract with torch ops, vectorised over the batch and the pairs of a round.

    ``sweep`` is the function that runs one sweep (:func:`sweep`, or on CUDA its ``torch.compile``d
    form, :func:`mpslinalg.svd.cuda.compiled_sweep`)."""

    name = "torch"

    def jacobi(self, X: torch.Tensor, V: torch.Tensor | None, sweeps: int, tol: float, ctol: float,
               early_exit: bool, one_sweep=sweep):
        Bn, rows, n = X.shape
        perms = tuple(_perms(n, X.device))
        Y = X if V is None else torch.cat([X, V], dim=-2)
        rotated = torch.zeros(Bn, dtype=torch.bool, device=X.device)
        for _ in range(sweeps):
            Y, rotated = one_sweep(Y, rows, perms, tol, ctol)
            if early_exit and not bool(rotated.any()):
                break
        return Y[:, :rows], (None if V is None else Y[:, rows:]), rotated


class MetalKernels:
    """The kernel contract with ``metal/svd.metal`` (``metal`` on mps, ``emulator`` on CPU/CUDA)."""

    name = "metal"

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        self.lib = load_library("svd", device)
        self.dtype = dtype

    def jacobi(self, X: torch.Tensor, V: torch.Tensor | None, sweeps: int, tol: float, ctol: float,
               early_exit: bool):
        Bn, rows, n = X.shape
        want_v = int(V is not None)
        Vb = V if V is not None else X.new_empty(1)
        if rows == n and n <= SMALL_MAX:  # whole iteration in threadgroup memory, stops on the GPU
            rotated = torch.zeros(Bn, dtype=torch.int32, device=X.device)
            kern = getattr(self.lib, kernel_name("svd_jacobi_small", self.dtype))
            kern(X, Vb, rotated, n, sweeps, tol, ctol, want_v, threads=Bn * 32, group_size=32)
            return X, V, rotated != 0
        h = n // 2
        g = TUNING.round_threads
        flags = torch.zeros(Bn, h, dtype=torch.int32, device=X.device)
        kern = getattr(self.lib, kernel_name("svd_jacobi_round", self.dtype))
        for _ in range(sweeps):
            flags.zero_()
            for r in range(n - 1):
                kern(X, Vb, flags, rows, n, r, tol, ctol, want_v, threads=Bn * h * g, group_size=g)
            if early_exit and not bool(flags.any()):
                break
        return X, V, flags.any(-1)


TORCH_KERNELS = TorchKernels()


def on_kernels(x: torch.Tensor) -> bool:
    """``x`` is served by the ``.metal`` kernels (``metal``/``emulator``, float32/complex64, no
    ``torch.func`` transform); else by torch ops."""
    return x.dtype in E.GPU_DTYPES and backend_for(x.device) != "torch" and not functorch_active()
