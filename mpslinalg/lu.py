"""The LU family: ``lu_factor(_ex)``, ``lu``, ``lu_solve``, ``solve(_ex)``, ``det``, ``slogdet``,
``inv(_ex)`` with ``torch.linalg``'s signatures and semantics (DESIGN §6, §7).

The whole story lives here: input checks, the device-agnostic recursive algorithm, its three
kernel contracts (implemented in ``metal/lu.metal`` for the ``metal``/``emulator`` backends and
with torch ops for the ``torch`` backend), the custom ops with fake implementations and autograd,
and the public wrappers.

Algorithm (LAPACK ``getrf2``, Toledo's recursive LU)
----------------------------------------------------
``_getrf`` factors a batch ``[B, M, N]`` in place into a copy of the input:

* small matrices (``M, N <= 32`` on the kernel backends) are one **whole-matrix kernel** dispatch
  for the whole batch (``lu_small``); on the ``torch`` backend matrices up to
  :attr:`Tuning.direct_max` are one call of the device's LAPACK-like leaf;
* larger ones recurse on column halves ``[A11; A21] | [A12; A22]``: factor the left half, apply
  its row interchanges to the right half (**one dispatch per block**, ``lu_laswp`` or one gather),
  ``A12 <- L11^{-1} A12`` (``mpslinalg.triangular.trsm``), ``A22 <- A22 - A21 A12`` (one GEMM),
  factor ``A22``, apply its interchanges to ``A21``. Nearly all flops are in the GEMMs; the leaf
  is a **fused panel kernel** (``lu_panel``, ``nb`` columns, pivot search, swap, scaling and rank-1
  updates in one dispatch).

Pivots (1-based int32), ``info`` and everything else stay on the device: no ``_ex`` path
synchronises with the host.

Kernel contracts (identical on every backend)
---------------------------------------------
``panel(LU, piv, info, o, w)``
    LAPACK ``getf2`` of rows ``[o, M)`` x columns ``[o, o+w)`` of every matrix of the contiguous
    ``[B, M, N]`` buffer ``LU``, in place. Pivot of column ``j`` = first row of largest
    ``|Re|+|Im|`` (``icamax``), written 1-based and absolute to ``piv[:, j]``; rows are swapped only
    inside the panel's columns; a zero pivot column is not scaled and sets ``info`` (if still 0) to
    ``j + 1``; scaling multiplies by ``1/pivot`` when ``|pivot| >= sfmin``, else divides.
``small(LU, piv, info)``
    the same for the whole matrix (whole rows swapped).
``swap(X, piv, k1, k2, c0, nc, reverse)``
    LAPACK ``laswp``: apply the interchanges ``piv[:, k1:k2]`` (1-based absolute rows) to columns
    ``[c0, c0+nc)`` of the contiguous ``[B, M, N]`` buffer ``X``, in order or in reverse order.

The ``torch`` backend implements ``panel``/``small`` with the device's own LAPACK-like leaf
(``torch.linalg.lu_factor_ex``: LAPACK ``getrf`` on CPU, cuSOLVER/MAGMA on CUDA — the same pivot
rule and ``info``), and ``swap`` with a sync-free permutation gather (:func:`_swaps_to_perm`).

Autograd follows PyTorch's formulas (``FunctionsManual.cpp``), conjugate-Wirtinger; every backward
calls our own differentiable ops, so double backward works. Under ``torch.func`` transforms each op
runs as the equivalent autograd.Function of :mod:`mpslinalg._func` (same backward, generated vmap
rule, forward-mode ``jvp``s below), on the torch-op path. ``det``'s gradient at an exactly
singular matrix is the adjugate (computed from an SVD; ``torch.linalg.svd`` for now, until the
project's own SVD exists), not the zero matrix ``torch.linalg.det`` returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from . import small
from .kernels import backend_for, kernel_name, load_library
from .oplayer import checks as E
from .oplayer import defop
from .oplayer import derivatives as D
from .oplayer import functorch_active as _functorch

__all__ = [
    "TUNING",
    "det",
    "inv",
    "inv_ex",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "slogdet",
    "solve",
    "solve_ex",
]

_RT = torch.return_types


# --------------------------------------------------------------------------------------------------
# Tuning
# --------------------------------------------------------------------------------------------------


@dataclass
class Tuning:
    """Block sizes and strategies of the recursive LU (``benchmarks/bench_lu.py --tune`` measures).

    Attributes
    ----------
    panel_nb : int
        Width of the ``lu_panel`` leaf on the kernel backends (``metal``, ``emulator``).
    small_max : int
        Largest ``M`` and ``N`` handled by the whole-matrix ``lu_small`` kernel (at most 32).
    panel_threads : int
        Threads per threadgroup of ``lu_panel`` (a power of two, 32 to 256).
    direct_max : dict
        ``torch`` backend, per device type: matrices with ``max(M, N)`` up to this are factored by
        one call of the device's leaf (``torch.linalg.lu_factor_ex``); larger ones recurse.
    leaf_nb : dict
        ``torch`` backend, per device type: panel width of the recursion's leaves.
    gemm : dict
        Complex GEMM strategy per device type: ``"native"`` (``torch.matmul`` on complex),
        ``"4m"`` (four real products) or ``"embed"`` (one real product of the 2x2 real block
        embedding). Real dtypes always use ``torch.matmul``.
    small_min_batch : dict
        ``torch`` backend, per device type and op kind (``"inv"``: inv/solve, ``"det"``:
        det/slogdet): ``n <= 4`` batches at least this large go to the small family, smaller ones
        to one ``torch.linalg`` call (faster there: fixed host cost; measured on the 2-core CPU,
        docs/ops/small.md). The kernel backends always use the small family's kernels.
    """

    panel_nb: int = 32
    small_max: int = 32
    panel_threads: int = 256
    # CUDA: cuSOLVER's getrf is the best leaf at every size on the H200 (2026-11-30, complex64
    # n = 4096: one call 15.8 ms, our recursion over 256-wide cuSOLVER leaves 170 ms — host-bound
    # launches), so the torch backend on CUDA never recurses.
    direct_max: dict = field(default_factory=lambda: {"cpu": 512, "cuda": 2**62, "mps": 0})
    leaf_nb: dict = field(default_factory=lambda: {"cpu": 128, "cuda": 256, "mps": 32})
    gemm: dict = field(default_factory=lambda: {"cpu": "native", "cuda": "native", "mps": "4m"})
    small_min_batch: dict = field(default_factory=lambda: {"cpu": {"inv": 256, "det": 2048}})


#: The tuning in use (module-level, mutable: benchmarks and tests adjust it).
TUNING = Tuning()


# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------


def _trsm(A: torch.Tensor, B: torch.Tensor, *, upper: bool, left: bool, unitriangular: bool) -> torch.Tensor:
    """Internal triangular solve of the triangular family (no checks, not differentiable)."""
    if _functorch():
        return torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)
    try:
        from .triangular import trsm
    except ImportError:  # pragma: no cover - the triangular family ships with the package
        return torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)
    return trsm(A, B, upper=upper, left=left, unitriangular=unitriangular)


def _solve_tri(A: torch.Tensor, B: torch.Tensor, *, upper: bool, left: bool = True,
               unitriangular: bool = False) -> torch.Tensor:
    """Differentiable triangular solve used inside backward formulas (our public op; torch's under
    ``torch.func`` transforms, which the triangular custom op does not support)."""
    if _functorch():
        return torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)
    try:
        from .triangular import solve_triangular
    except ImportError:  # pragma: no cover
        return torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)
    return solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)


def _gemm_sub(C: torch.Tensor, A: torch.Tensor, B: torch.Tensor, mode: str) -> None:
    """``C -= A @ B`` in place (``C`` a view of a contiguous buffer, batched ``[b, m, n]``).

    Complex products are done as real GEMMs when ``mode`` asks for it (Apple's matrix units are
    float-only): ``"4m"``: ``Cr -= ArBr - AiBi``, ``Ci -= ArBi + AiBr``; ``"embed"``:
    ``[Cr | Ci] -= [Ar | Ai] @ [[Br, Bi], [-Bi, Br]]`` (one real product of twice the size).
    """
    if not C.is_complex() or mode == "native":
        C.sub_(torch.matmul(A, B))
        return
    Cr = torch.view_as_real(C)
    Ar, Ai, Br, Bi = A.real, A.imag, B.real, B.imag
    if mode == "4m":
        Cr[..., 0].sub_(torch.matmul(Ar, Br) - torch.matmul(Ai, Bi))
        Cr[..., 1].sub_(torch.matmul(Ar, Bi) + torch.matmul(Ai, Br))
        return
    if mode == "embed":
        n = B.shape[-1]
        left = torch.cat([Ar, Ai], dim=-1)
        right = torch.cat([torch.cat([Br, Bi], dim=-1), torch.cat([-Bi, Br], dim=-1)], dim=-2)
        prod = torch.matmul(left, right)
        Cr[..., 0].sub_(prod[..., :n])
        Cr[..., 1].sub_(prod[..., n:])
        return
    raise ValueError(f"unknown complex GEMM mode {mode!r}; expected 'native', '4m' or 'embed'")


def _swaps_to_perm(p: torch.Tensor, m: int, chunk: int = 256) -> torch.Tensor:
    """Permutation of LAPACK interchanges, without a host loop over the pivots' values.

    ``p`` is ``[B, k]`` (int64, 0-based): step ``i`` swaps rows ``i`` and ``p[:, i] >= i`` of an
    ``m``-row matrix, for ``i = 0 .. k-1`` in order. Returns ``perm [B, m]`` (int64) with
    ``new[r] = old[perm[r]]``. Each chunk of ``w`` steps costs ``O(w^2)`` vectorised comparisons and
    ``log2(w)`` pointer-jumping gathers (the content of position ``i`` before step ``i`` follows a
    chain of earlier steps that targeted ``i``); chunks are composed by a gather.
    """
    Bsz, k = p.shape
    dev = p.device
    perm = None
    for off in range(0, k, chunk):
        w = min(chunk, k - off)
        q = p[:, off:off + w]
        idx = torch.arange(w, device=dev)
        earlier = idx[None, :] < idx[:, None]  # [i, k]: k < i
        ranks = idx + 1
        # src(i) = last step k < i whose target p_k is position off+i (else i itself: a root)
        hit = (q[:, None, :] == (off + idx)[None, :, None]) & earlier
        last = (hit * ranks).amax(-1) - 1
        ptr = torch.where(last >= 0, last, idx)
        for _ in range(max(1, math.ceil(math.log2(max(w, 2))))):
            ptr = ptr.gather(-1, ptr)
        c = off + ptr  # original row sitting at position off+i just before step i
        # position off+i finally holds what sat at p_i before step i
        same = q[:, :, None] == q[:, None, :]  # [j, j']: p_j == p_j'
        prev = ((same & earlier) * ranks).amax(-1) - 1
        top = torch.where(prev >= 0, c.gather(-1, prev.clamp(min=0)), q)
        # a target row p_j beyond the chunk finally holds c(last j' with p_j' == p_j)
        lastall = (same * ranks).amax(-1) - 1
        # out of place (scatter, cat), so that torch.vmap can batch it
        step = torch.arange(m, device=dev).expand(Bsz, m).scatter(-1, q, c.gather(-1, lastall))
        step = torch.cat([step[:, :off], top, step[:, off + w:]], dim=-1)
        perm = step if perm is None else perm.gather(-1, step)
    if perm is None:
        perm = torch.arange(m, device=dev).expand(Bsz, m).clone()
    return perm


def _perm_from_pivots(piv: torch.Tensor, m: int) -> torch.Tensor:
    """``perm [..., m]`` (int64) of 1-based LAPACK pivots ``piv [..., k]``: ``(PᵀA)[r] = A[perm[r]]``."""
    batch = piv.shape[:-1]
    flat = piv.reshape(math.prod(batch), piv.shape[-1]).long() - 1
    return _swaps_to_perm(flat, m).reshape(*batch, m)


def _eye(n: int, like: torch.Tensor) -> torch.Tensor:
    return torch.eye(n, dtype=like.dtype, device=like.device)


# --------------------------------------------------------------------------------------------------
# Kernels: one Python call site for metal and the emulator; torch ops for the torch backend
# --------------------------------------------------------------------------------------------------


class _TorchKernels:
    """The kernel contracts with torch ops (CPU/CUDA; any dtype)."""

    name = "torch"

    def small(self, LU: torch.Tensor, piv: torch.Tensor, info: torch.Tensor) -> None:
        lu, p, inf = torch.linalg.lu_factor_ex(LU)
        LU.copy_(lu)
        piv.copy_(p)
        info.copy_(inf)

    def panel(self, LU: torch.Tensor, piv: torch.Tensor, info: torch.Tensor, o: int, w: int) -> None:
        sub = LU[:, o:, o:o + w]
        lu, p, inf = torch.linalg.lu_factor_ex(sub)
        sub.copy_(lu)
        piv[:, o:o + p.shape[-1]].copy_(p + o)
        info.copy_(torch.where((info == 0) & (inf > 0), inf + o, info))

    def swap(self, X: torch.Tensor, piv: torch.Tensor, k1: int, k2: int, c0: int, nc: int,
             reverse: bool = False) -> None:
        if k2 <= k1 or nc <= 0:
            return
        sub = X[:, k1:, c0:c0 + nc]
        perm = _swaps_to_perm(piv[:, k1:k2].long() - 1 - k1, sub.shape[-2])
        if reverse:
            perm = torch.argsort(perm, dim=-1)
        sub.copy_(sub.gather(-2, perm[:, :, None].expand(-1, -1, nc)))


#: Compile-time limits of ``metal/lu.metal`` (LU_PANEL_LANES, LU_PANEL_MAX_THREADS, LU_SMALL_MAX).
_PANEL_THREADS = (32, 256)
_SMALL_MAX = 32
_INT32_MAX = 2**31 - 1


def _check_tuning() -> None:
    """Reject tuning values the kernels cannot run with (a bad one hangs or overflows on a GPU)."""
    g = TUNING.panel_threads
    lo, hi = _PANEL_THREADS
    if not (isinstance(g, int) and lo <= g <= hi and g & (g - 1) == 0):
        raise ValueError(f"mpslinalg.lu.TUNING.panel_threads must be a power of two in [{lo}, {hi}] "
                         f"(lu_panel's compile-time limits), got {g!r}")
    if not (isinstance(TUNING.small_max, int) and 0 <= TUNING.small_max <= _SMALL_MAX):
        raise ValueError(f"mpslinalg.lu.TUNING.small_max must be an int in [0, {_SMALL_MAX}] "
                         f"(lu_small's threadgroup tile), got {TUNING.small_max!r}")
    if not (isinstance(TUNING.panel_nb, int) and TUNING.panel_nb >= 1):
        raise ValueError(f"mpslinalg.lu.TUNING.panel_nb must be a positive int, got {TUNING.panel_nb!r}")


def _check_int32(M: int, N: int) -> None:
    """The kernels index inside a matrix with 32-bit ints (Apple GPUs have no 64-bit multiply)."""
    if M * N > _INT32_MAX:
        raise ValueError(f"mpslinalg: a {M}x{N} matrix has more than 2^31 - 1 entries; the Metal LU "
                         "kernels index a matrix with 32-bit integers")


class _MetalKernels:
    """The kernel contracts with ``metal/lu.metal`` (``metal`` on mps, ``emulator`` on CPU/CUDA)."""

    name = "metal"

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        _check_tuning()
        self.lib = load_library("lu", device)
        self.dtype = dtype

    def _kernel(self, name: str):
        return getattr(self.lib, kernel_name(name, self.dtype))

    def small(self, LU: torch.Tensor, piv: torch.Tensor, info: torch.Tensor) -> None:
        B, M, N = LU.shape
        if max(M, N) > _SMALL_MAX:
            raise ValueError(f"lu_small factors matrices up to {_SMALL_MAX}x{_SMALL_MAX}, got {M}x{N}")
        self._kernel("lu_small")(LU, piv, info, M, N, threads=B * 32, group_size=32)

    def small_solve(self, A: torch.Tensor, B: torch.Tensor, X: torch.Tensor, info: torch.Tensor) -> None:
        nb, n, k = B.shape
        if n > _SMALL_MAX or k > _SMALL_MAX:
            raise ValueError(f"lu_small_solve takes n, k <= {_SMALL_MAX}, got n={n}, k={k}")
        self._kernel("lu_small_solve")(A, B, X, info, n, k, threads=nb * 32, group_size=32)

    def panel(self, LU: torch.Tensor, piv: torch.Tensor, info: torch.Tensor, o: int, w: int) -> None:
        B, M, N = LU.shape
        _check_int32(M, N)
        K = piv.shape[-1]
        g = TUNING.panel_threads
        self._kernel("lu_panel")(LU, piv, info, M, N, K, o, w, threads=B * g, group_size=g)

    def swap(self, X: torch.Tensor, piv: torch.Tensor, k1: int, k2: int, c0: int, nc: int,
             reverse: bool = False) -> None:
        if k2 <= k1 or nc <= 0:
            return
        B, M, N = X.shape
        _check_int32(M, N)
        K = piv.shape[-1]
        total = B * nc
        self._kernel("lu_laswp")(X, piv, M, N, K, k1, k2, c0, nc, int(reverse), B,
                                 threads=total, group_size=min(64, total))


_TORCH_KERNELS = _TorchKernels()


def _on_kernels(x: torch.Tensor) -> bool:
    """``x`` is served by the ``.metal`` kernels (``metal``/``emulator`` backend, float32/complex64,
    no ``torch.func`` transform wrapping it); else by torch ops."""
    return x.dtype in E.GPU_DTYPES and backend_for(x.device) != "torch" and not _functorch()


def _kernels(x: torch.Tensor):
    if _on_kernels(x):
        return _MetalKernels(x.device, x.dtype)
    return _TORCH_KERNELS


# --------------------------------------------------------------------------------------------------
# The algorithm
# --------------------------------------------------------------------------------------------------


def _split(k: int, nb: int) -> int:
    return max(nb, (k // 2) // nb * nb)


def _getrf_rec(LU, piv, info, o: int, w: int, nb: int, kern, gemm: str) -> None:
    """Recursive LU of rows ``[o, M)`` x columns ``[o, o+w)`` (``getrf2``), in place; the
    interchanges are applied with the ``swap`` kernel (one ``lu_laswp`` dispatch per block)."""
    M = LU.shape[-2]
    R = M - o
    if R <= 0 or w <= 0:
        return
    kl = min(R, w)
    if w <= nb or kl <= nb:
        kern.panel(LU, piv, info, o, w)
        return
    n1 = _split(kl, nb)
    n2 = w - n1
    _getrf_rec(LU, piv, info, o, n1, nb, kern, gemm)
    kern.swap(LU, piv, o, o + n1, o + n1, n2)
    _update(LU, o, n1, w, gemm)
    if R > n1:
        _getrf_rec(LU, piv, info, o + n1, n2, nb, kern, gemm)
        kern.swap(LU, piv, o + n1, o + n1 + min(R - n1, n2), o, n1)


def _update(LU, o: int, n1: int, w: int, gemm: str) -> None:
    """``A12 <- L11^{-1} A12`` (TRSM), ``A22 <- A22 - A21 A12`` (GEMM) of the block at ``(o, o)``."""
    A11 = LU[:, o:o + n1, o:o + n1]
    A12 = LU[:, o:o + n1, o + n1:o + w]
    A12.copy_(_trsm(A11, A12, upper=False, left=True, unitriangular=True))
    if LU.shape[-2] > o + n1:
        _gemm_sub(LU[:, o + n1:, o + n1:o + w], LU[:, o + n1:, o:o + n1], A12, gemm)


def _gather_rows(X: torch.Tensor, perm: torch.Tensor) -> None:
    """``X[b] <- X[b][perm[b]]`` in place (one gather, one copy)."""
    X.copy_(X.gather(-2, perm[:, :, None].expand(-1, -1, X.shape[-1])))


def _getrf_rec_perm(LU, piv, info, o: int, w: int, nb: int, gemm: str) -> torch.Tensor | None:
    """``_getrf_rec`` for the torch backend: each sub-problem returns its row permutation (of rows
    ``[o, M)``), composed from the leaves' by one gather per node, so interchanges are applied by
    one gather per block and pivots are turned into permutations only at the leaves (``nb`` wide:
    a few vectorised ops) instead of at every level."""
    M = LU.shape[-2]
    R = M - o
    if R <= 0 or w <= 0:
        return None
    kl = min(R, w)
    if w <= nb or kl <= nb:
        _TORCH_KERNELS.panel(LU, piv, info, o, w)
        return _swaps_to_perm(piv[:, o:o + kl].long() - 1 - o, R, chunk=max(kl, 1))
    n1 = _split(kl, nb)
    n2 = w - n1
    pl = _getrf_rec_perm(LU, piv, info, o, n1, nb, gemm)
    _gather_rows(LU[:, o:, o + n1:o + w], pl)
    _update(LU, o, n1, w, gemm)
    if R <= n1:
        return pl
    pr = _getrf_rec_perm(LU, piv, info, o + n1, n2, nb, gemm)
    _gather_rows(LU[:, o + n1:, o:o + n1], pr)
    head = torch.arange(n1, device=pl.device).expand(pl.shape[0], n1)
    return pl.gather(-1, torch.cat([head, n1 + pr], dim=-1))


def _direct_torch(A: torch.Tensor) -> bool:
    """The ``torch`` backend factors ``A`` with one leaf call (small enough, or a non-GPU dtype)."""
    if _on_kernels(A):
        return False
    if _functorch():
        return True
    return max(A.shape[-2], A.shape[-1]) <= TUNING.direct_max.get(A.device.type, 256)


def _getrf(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LU with partial pivoting of ``A [..., M, N]``: ``(LU, pivots int32 [..., K], info int32 [...])``."""
    batch = A.shape[:-2]
    M, N = A.shape[-2], A.shape[-1]
    K = min(M, N)
    if _direct_torch(A):
        # one call of the device's LAPACK-like leaf (no copy of the input, no extra buffers)
        LU, piv, info = torch.linalg.lu_factor_ex(A)
        return LU, piv, info
    LU = E.resolved(A).reshape(math.prod(batch), M, N).clone()
    B = LU.shape[0]
    piv = torch.zeros(B, K, dtype=torch.int32, device=A.device)
    info = torch.zeros(B, dtype=torch.int32, device=A.device)
    if B > 0 and K > 0:
        kern = _kernels(LU)
        dev = A.device.type
        if kern.name == "torch":
            if max(M, N) <= TUNING.direct_max.get(dev, 256):
                kern.small(LU, piv, info)
            else:
                _getrf_rec_perm(LU, piv, info, 0, N, TUNING.leaf_nb.get(dev, 128),
                                TUNING.gemm.get(dev, "native"))
        elif M <= TUNING.small_max and N <= TUNING.small_max:
            kern.small(LU, piv, info)
        else:
            _getrf_rec(LU, piv, info, 0, N, TUNING.panel_nb, kern, TUNING.gemm.get(dev, "4m"))
    return LU.reshape(*batch, M, N), piv.reshape(*batch, K), info.reshape(batch)


def _getrs(LU: torch.Tensor, piv: torch.Tensor, B: torch.Tensor, trans: str) -> torch.Tensor:
    """Solve ``op(A) X = B`` from ``A = P L U``; ``LU [b, n, n]``, ``piv [b, n]``, ``B [b, n, k]``
    (same leading batch), ``trans`` in ``N`` (``A``), ``T`` (``Aᵀ``), ``C`` (``Aᴴ``)."""
    kern = _kernels(B)
    if kern.name == "torch":
        if trans == "T":
            # LAPACK's getrs 'T' is not exposed; Aᵀ X = B  <=>  Aᴴ conj(X) = conj(B)
            return torch.linalg.lu_solve(LU, piv, B.conj(), adjoint=True).conj()
        return torch.linalg.lu_solve(LU, piv, B, adjoint=trans == "C")
    n = LU.shape[-1]
    X = E.resolved(B).clone()
    pivc = piv.contiguous()
    if trans == "N":
        kern.swap(X, pivc, 0, n, 0, X.shape[-1])
        X = _trsm(LU, X, upper=False, left=True, unitriangular=True)
        return _trsm(LU, X, upper=True, left=True, unitriangular=False)
    op = (lambda t: t.mT) if trans == "T" else (lambda t: t.mH)
    X = _trsm(op(LU), X, upper=False, left=True, unitriangular=False)
    X = _trsm(op(LU), X, upper=True, left=True, unitriangular=True).contiguous()
    kern.swap(X, pivc, 0, n, 0, X.shape[-1], reverse=True)
    return X


def _lu_solve_impl(LU: torch.Tensor, piv: torch.Tensor, B: torch.Tensor, left: bool,
                   adjoint: bool) -> torch.Tensor:
    """``X`` with ``op(A) X = B`` (``left``) or ``X op(A) = B``; ``B`` already 2-D per batch."""
    if not left:
        # X A = B <=> Aᵀ Xᵀ = Bᵀ;  X Aᴴ = B <=> A Xᴴ = Bᴴ
        if adjoint:
            return _lu_solve_impl(LU, piv, B.mH, True, False).mH
        return _lu_solve_left(LU, piv, B.mT, "T").mT
    return _lu_solve_left(LU, piv, B, "C" if adjoint else "N")


def _lu_solve_left(LU: torch.Tensor, piv: torch.Tensor, B: torch.Tensor, trans: str) -> torch.Tensor:
    n = LU.shape[-1]
    k = B.shape[-1]
    batch = E.broadcast_shapes(LU.shape[:-2], B.shape[:-2])
    if n == 0 or k == 0 or math.prod(batch) == 0:
        return B.new_zeros((*batch, n, k))
    if not _on_kernels(B):
        # torch backend: the device's getrs takes strides, conj views and broadcasting as they are
        # (no copies: torch's LU is column-major, a row-major copy would cost two transposes)
        if trans == "T":  # Aᵀ X = B  <=>  Aᴴ conj(X) = conj(B)
            return torch.linalg.lu_solve(LU, piv, B.conj(), adjoint=True).conj()
        return torch.linalg.lu_solve(LU, piv, B, adjoint=trans == "C")
    LU3 = E.resolved(LU.expand(*batch, n, n)).reshape(-1, n, n)
    P3 = piv.expand(*batch, n).reshape(-1, n).contiguous()
    B3 = E.resolved(B.expand(*batch, n, k)).reshape(-1, n, k)
    X = _getrs(LU3, P3, B3, trans)
    return X.reshape(*batch, n, k)


def _det_parts(LU: torch.Tensor, piv: torch.Tensor):
    """``(diag(U), permutation sign)`` of a factorisation."""
    n = LU.shape[-1]
    d = LU.diagonal(dim1=-2, dim2=-1)
    ar = torch.arange(1, n + 1, device=piv.device, dtype=piv.dtype)
    odd = ((piv != ar).sum(-1) % 2).to(d.real.dtype if d.is_complex() else d.dtype)
    return d, 1 - 2 * odd


def _slogdet_from_lu(LU: torch.Tensor, piv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    d, sign = _det_parts(LU, piv)
    absd = d.abs()
    logabs = absd.log().sum(-1)
    if not d.is_complex():  # torch.sign, as torch.linalg.slogdet: a NaN diagonal gives sign 0
        return d.sign().prod(-1) * sign, logabs
    safe = torch.where(absd == 0, torch.ones_like(absd), absd)
    phase = torch.where(absd == 0, torch.zeros_like(d), d / safe)
    return phase.prod(-1) * sign, logabs


def _inv_impl(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if _direct_torch(A):  # the device's own getrf + getri in one call: never slower than torch's
        return torch.linalg.inv_ex(A)
    LU, piv, info = _getrf(A)
    n = A.shape[-1]
    # the identity as a column-major view (Iᵀ = I): LAPACK/cuSOLVER getrs takes it without a copy
    eye = _eye(n, A).expand_as(A).mT
    return _lu_solve_left(LU, piv, eye, "N"), info


def _small_solve_fused(A: torch.Tensor, B: torch.Tensor):
    """``A X = B`` for ``n, k <= 32`` in one ``lu_small_solve`` dispatch (kernel backends), or None.

    Same elimination (pivots, ``info``, ``sfmin`` rule) as ``lu_small`` on the augmented ``[A | B]``,
    then back substitution, all in threadgroup memory (RANSAC's 2048 x 9x9: one dispatch instead
    of factor + interchanges + two triangular solves)."""
    if not _on_kernels(A):
        return None
    n, k = A.shape[-1], B.shape[-1]
    batch = E.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    if not (0 < n <= TUNING.small_max and 0 < k <= 32) or A.shape[:-2] != batch or math.prod(batch) == 0:
        return None
    nb = math.prod(batch)
    A3 = E.resolved(A).reshape(nb, n, n)
    B3 = E.resolved(B.expand(*batch, n, k)).reshape(nb, n, k)
    X = torch.empty_like(B3)
    info = torch.zeros(nb, dtype=torch.int32, device=A.device)
    _MetalKernels(A.device, A.dtype).small_solve(A3, B3, X, info)
    return X.reshape(*batch, n, k), info.reshape(batch)


def _solve_impl(A: torch.Tensor, B: torch.Tensor, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    fused = _small_solve_fused(A, B) if left else None
    if fused is not None:
        return fused
    if _direct_torch(A):  # the device's own getrf + getrs in one call: never slower than torch's
        X, info = torch.linalg.solve_ex(A, B, left=left)
        return X.contiguous(), info
    LU, piv, info = _getrf(A)
    return _lu_solve_impl(LU, piv, B, left, False).contiguous(), info


# --------------------------------------------------------------------------------------------------
# Custom ops: fake implementations and autograd (PyTorch's formulas, FunctionsManual.cpp)
# --------------------------------------------------------------------------------------------------


def _tr_solve(A: torch.Tensor, dA: torch.Tensor) -> torch.Tensor:
    """``tr(A⁻¹ dA)`` (one solve with our differentiable op)."""
    return _solve_ex_op(A, dA, True)[0].diagonal(dim1=-2, dim2=-1).sum(-1)


def _lu_factor_ex_op_impl(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    LU, piv, info = _getrf(A)
    return LU.contiguous(), piv.contiguous(), info.contiguous()


def _lu_factor_ex_op_fake(A):
    K = min(A.shape[-2], A.shape[-1])
    return (A.new_empty(A.shape), A.new_empty((*A.shape[:-2], K), dtype=torch.int32),
            A.new_empty(A.shape[:-2], dtype=torch.int32))


def _apply_P(piv: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """``P @ X`` for ``A = P L U`` (``(PᵀX)[r] = X[perm[r]]``, so ``P X`` scatters rows back)."""
    m = X.shape[-2]
    perm = _perm_from_pivots(piv, m)
    inv = torch.argsort(perm, dim=-1)
    batch = torch.broadcast_shapes(inv.shape[:-1], X.shape[:-2])
    idx = inv.expand(*batch, m)[..., None].expand(*batch, m, X.shape[-1])
    return X.expand(*batch, *X.shape[-2:]).gather(-2, idx)


def _unpack(LU: torch.Tensor):
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    L = LU[..., :, :k].tril(-1) + torch.eye(m, k, dtype=LU.dtype, device=LU.device)
    U = LU[..., :k, :].triu()
    return L, U


def _lu_factor_setup(ctx, inputs, output):
    LU, piv, _ = output
    ctx.save_for_backward(LU, piv)


def _lu_factor_backward(ctx, gLU, gpiv, ginfo):
    # linalg_lu_backward (square / wide / tall) with L_grad = gLU[..., :, :k], U_grad = gLU[..., :k, :]
    LU, piv = ctx.saved_tensors
    if gLU is None:
        return None
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    L, U = _unpack(LU)
    gL = gLU[..., :, :k]
    gU = gLU[..., :k, :]
    if m == n:
        gA = (L.mH @ gL).tril(-1) + (gU @ U.mH).triu()
        gA = _solve_tri(U.mH, gA, upper=False, left=False)
        gA = _solve_tri(L.mH, gA, upper=True, left=True, unitriangular=True)
    elif m < n:
        U1, gU1, gU2 = U[..., :, :k], gU[..., :, :k], gU[..., :, k:]
        gA = (L.mH @ gL) - gU.triu() @ U.mH
        gA = _solve_tri(U1.mH, gA.tril(-1), upper=False, left=False)
        gA = torch.cat([gA + gU1.triu(), gU2], dim=-1)
        gA = _solve_tri(L.mH, gA, upper=True, left=True, unitriangular=True)
    else:
        L1, gL1, gL2 = L[..., :k, :], gL[..., :k, :], gL[..., k:, :]
        gA = gU @ U.mH - L.mH @ gL.tril(-1)
        gA = _solve_tri(L1.mH, gA.triu(), upper=True, left=True, unitriangular=True)
        gA = torch.cat([gA + gL1.tril(-1), gL2], dim=-2)
        gA = _solve_tri(U.mH, gA, upper=False, left=False)
    return _apply_P(piv, gA)


def _lu_factor_jvp(inputs, outputs, tangents):
    # square A = P L U:  M = L⁻¹ Pᵀ dA U⁻¹,  dL = L tril(M, -1),  dU = triu(M) U
    (A,), (LU, piv, _), (dA,) = inputs, outputs, tangents
    if A.shape[-1] != A.shape[-2]:
        raise NotImplementedError(
            "linalg.lu_factor: forward-mode derivatives (jvp, jacfwd, hessian) of rectangular "
            "factorisations are not implemented; use reverse mode (grad, jacrev)")
    L, U = _unpack(LU)
    M = _solve_tri(L, _apply_Pt(piv, D.or_zeros(dA, A)), upper=False, left=True, unitriangular=True)
    M = _solve_tri(U, M, upper=True, left=False)
    return L @ M.tril(-1) + M.triu() @ U, None, None


_lu_factor_ex_op = defop("lu_factor_ex", impl=_lu_factor_ex_op_impl, fake=_lu_factor_ex_op_fake, setup=_lu_factor_setup,
                          backward=_lu_factor_backward, jvp=_lu_factor_jvp)


def _lu_solve_op_impl(LU: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, left: bool,
                 adjoint: bool) -> torch.Tensor:
    return _lu_solve_impl(LU, pivots, B, left, adjoint).contiguous()


def _lu_solve_op_fake(LU, pivots, B, left, adjoint):
    batch = torch.broadcast_shapes(LU.shape[:-2], B.shape[:-2])
    return B.new_empty((*batch, *B.shape[-2:]))


def _lu_solve_setup(ctx, inputs, output):
    LU, piv, B, left, adjoint = inputs
    ctx.flags = (left, adjoint)
    ctx.shapes = (LU.shape, B.shape)
    ctx.save_for_backward(LU, piv, output)


def _lu_solve_backward(ctx, gX):
    LU, piv, X = ctx.saved_tensors
    left, adjoint = ctx.flags
    lu_shape, b_shape = ctx.shapes
    gLU = gB = None
    if ctx.needs_input_grad[2]:
        gB = _lu_solve_op(LU, piv, gX, left, not adjoint).sum_to_size(b_shape)
    if ctx.needs_input_grad[0]:
        L, U = _unpack(LU)
        if left != adjoint:
            # gR = U^{-H} op(-gX) op(X)^H ; gL = (L^{-H} gR U^H).tril(-1)
            rhs = -((gX if left else gX.mH) @ (X.mH if left else X))
            gR = _solve_tri(U.mH, rhs, upper=False, left=True)
            gL = _solve_tri(L.mH, gR @ U.mH, upper=True, left=True, unitriangular=True).tril(-1)
            gLU = gL + gR.triu()
        else:
            # gR = -P^T op(X) op(gX)^H P ; gR = gR L^{-H} ; gU = (L^H gR U^{-H}).triu()
            inner = (X if left else X.mH) @ (gX.mH if left else gX)
            PtI = _apply_Pt(piv, inner)
            gR = -_apply_Pt(piv, PtI.mH).mH  # (-Pᵀ inner P)
            gR = _solve_tri(L.mH, gR, upper=True, left=False, unitriangular=True)
            gU = _solve_tri(U.mH, L.mH @ gR, upper=False, left=False).triu()
            gLU = gR.tril(-1) + gU
        gLU = gLU.sum_to_size(lu_shape)
    return gLU, None, gB, None, None


def _apply_Pt(piv: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """``Pᵀ @ X``: rows ``X[perm[r]]``."""
    m = X.shape[-2]
    perm = _perm_from_pivots(piv, m)
    batch = torch.broadcast_shapes(perm.shape[:-1], X.shape[:-2])
    idx = perm.expand(*batch, m)[..., None].expand(*batch, m, X.shape[-1])
    return X.expand(*batch, *X.shape[-2:]).gather(-2, idx)


def _lu_solve_jvp(inputs, outputs, tangents):
    # op(A) X = B: dX = op(A)⁻¹ (dB − op(dA) X);  X op(A) = B: dX = (dB − X op(dA)) op(A)⁻¹,
    # with dA = P (dL U + L dU) from the tangent of the packed LU
    (LU, piv, _, left, adjoint), (X,), (dLU, _, dB, _, _) = inputs, outputs, tangents
    R = dB.expand_as(X) if dB is not None else torch.zeros_like(X)
    if dLU is not None:
        L, U = _unpack(LU)
        dA = _apply_P(piv, dLU.tril(-1) @ U + L @ dLU.triu())
        dA = dA.mH if adjoint else dA
        R = R - (dA @ X if left else X @ dA)
    return (_lu_solve_op(LU, piv, R, left, adjoint),)


_lu_solve_op = defop("lu_solve", impl=_lu_solve_op_impl, fake=_lu_solve_op_fake, setup=_lu_solve_setup,
                      backward=_lu_solve_backward, jvp=_lu_solve_jvp)


def _solve_ex_op_impl(A: torch.Tensor, B: torch.Tensor, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return _solve_impl(A, B, left)


def _solve_ex_op_fake(A, B, left):
    batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    return B.new_empty((*batch, *B.shape[-2:])), A.new_empty(A.shape[:-2], dtype=torch.int32)


_solve_ex_op = defop("solve_ex", impl=_solve_ex_op_impl, fake=_solve_ex_op_fake,
                     **D.solve_rules(lambda A, B, left: _solve_ex_op(A, B, left)[0]))


def _inv_ex_op_impl(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    X, info = _inv_impl(A)
    return X.contiguous(), info


def _inv_ex_op_fake(A):
    return A.new_empty(A.shape), A.new_empty(A.shape[:-2], dtype=torch.int32)


_inv_ex_op = defop("inv_ex", impl=_inv_ex_op_impl, fake=_inv_ex_op_fake, **D.inv_rules())


def _det_op_impl(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # LU and pivots are internal outputs (the public det drops them): the backward reuses them
    LU, piv, _ = _getrf(A)
    d, sign = _det_parts(LU, piv)
    return d.prod(-1) * sign, LU.contiguous(), piv.contiguous()


def _det_op_fake(A):
    return (A.new_empty(A.shape[:-2]), A.new_empty(A.shape),
            A.new_empty(A.shape[:-1], dtype=torch.int32))


def _det_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], *output)


def _adjoint_solve_diag(LU: torch.Tensor, piv: torch.Tensor, diag: torch.Tensor) -> torch.Tensor:
    """``A^{-H} diag(diag)`` from the saved factorisation of ``A`` (one getrs, no refactorisation)."""
    n = LU.shape[-1]
    D = torch.diag_embed(diag[..., None].expand(*diag.shape, n))
    return _lu_solve_left(LU, piv, D, "C")


def _exclusive_prod(S: torch.Tensor) -> torch.Tensor:
    """``out[..., i] = prod_{j != i} S[..., j]`` without division (exact for zeros)."""
    ones = torch.ones_like(S[..., :1])
    pre = torch.cumprod(torch.cat([ones, S[..., :-1]], dim=-1), dim=-1)
    suf = torch.cumprod(torch.cat([ones, S.flip(-1)[..., :-1]], dim=-1), dim=-1).flip(-1)
    return pre * suf


def _any(mask: torch.Tensor) -> bool:
    """``mask.any()`` on the host; ``True`` while tracing (compile takes both branches, masked)."""
    if torch.compiler.is_compiling():
        return True
    try:
        return bool(mask.any())
    except Exception:  # data-dependent value under fake/functional tracing
        return True


def _det_backward(ctx, g, gLU=None, gpiv=None):
    # linalg_det_backward: gA = g * adj(A)ᴴ. Invertible: adj(A)ᴴ = conj(det) A^{-H}.
    # Singular to working precision: adj(A) from the SVD A = U S Vᴴ (an identity for every A),
    #   adj(A)ᴴ = conj(det U det Vᴴ) U diag(prod_{j != i} s_j) Vᴴ  (Higham, "What is the adjugate").
    # "Singular" is judged scale-invariantly on U's diagonal, min |u_ii| <= n·eps·max |u_ii|, not by
    # det == 0: a rank-deficient matrix often factors to a rounding-level det (7e-14 for an integer
    # 5x5 of rank 4), whose d·A⁻ᴴ has no correct digits and whose second derivative is garbage.
    A, d, LU, piv = ctx.saved_tensors
    n = A.shape[-1]
    udiag = LU.diagonal(dim1=-2, dim2=-1).abs()
    sing = udiag.amin(-1) <= n * torch.finfo(udiag.dtype).eps * udiag.amax(-1)
    eye = _eye(n, A)
    if torch.is_grad_enabled():  # create_graph: through our differentiable inverse (double backward)
        A_safe = torch.where(sing[..., None, None], eye, A)
        gA = (g * d.conj())[..., None, None] * inv_ex(A_safe)[0].mH
    else:  # first order only: reuse the forward's LU (singular elements are replaced below)
        gA = _adjoint_solve_diag(LU, piv, g * d.conj())
    if _any(sing):
        A_sing = torch.where(sing[..., None, None], A, eye)
        U, S, Vh = torch.linalg.svd(A_sing)
        alpha = (torch.linalg.det(U) * torch.linalg.det(Vh)).conj() * g
        D = alpha[..., None] * _exclusive_prod(S).to(A.dtype)
        gS = (U * D[..., None, :]) @ Vh
        gA = torch.where(sing[..., None, None], gS, gA)
    return gA


def _det_jvp(inputs, outputs, tangents):
    # d det = det · tr(A⁻¹ dA) (invertible A; at an exactly singular A this is NaN: forward mode
    # has no adjugate branch, use reverse mode there)
    (A,), (d, LU, _), (dA,) = inputs, outputs, tangents
    return d * _tr_solve(A, D.or_zeros(dA, A)), torch.zeros_like(LU), None


_det_op = defop("det", impl=_det_op_impl, fake=_det_op_fake, setup=_det_setup,
                 backward=_det_backward, jvp=_det_jvp)


def _slogdet_op_impl(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    # LU and pivots are internal outputs (the public slogdet drops them): the backward reuses them
    LU, piv, _ = _getrf(A)
    s, la = _slogdet_from_lu(LU, piv)
    return s, la, LU.contiguous(), piv.contiguous()


def _slogdet_op_fake(A):
    real = A.real.dtype if A.is_complex() else A.dtype
    return (A.new_empty(A.shape[:-2]), A.new_empty(A.shape[:-2], dtype=real), A.new_empty(A.shape),
            A.new_empty(A.shape[:-1], dtype=torch.int32))


def _slogdet_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], output[0], output[2], output[3])


def _slogdet_backward(ctx, gsign, glogabs, gLU=None, gpiv=None):
    # slogdet_backward: gA = g A^{-H}
    A, sign, LU, piv = ctx.saved_tensors
    g = D.slogdet_cotangent(A, sign, gsign, glogabs)
    if torch.is_grad_enabled():  # create_graph: through our differentiable inverse
        return g[..., None, None] * inv_ex(A)[0].mH
    return _adjoint_solve_diag(LU, piv, g)


def _slogdet_jvp(inputs, outputs, tangents):
    (A,), (sign, logabs, LU, _), (dA,) = inputs, outputs, tangents
    t = _tr_solve(A, D.or_zeros(dA, A))
    return (*D.slogdet_jvp(t, sign, logabs, A.is_complex()), torch.zeros_like(LU), None)


_slogdet_op = defop("slogdet", impl=_slogdet_op_impl, fake=_slogdet_op_fake, setup=_slogdet_setup,
                     backward=_slogdet_backward, jvp=_slogdet_jvp)


# --------------------------------------------------------------------------------------------------
# Routing of n <= 4 to the small family
# --------------------------------------------------------------------------------------------------


def _route(op, kind: str | None, A: torch.Tensor, *more: torch.Tensor) -> str:
    """Where a front door sends a checked call (one backend lookup per call):

    * ``"small"``: ``n <= 4`` and ``kind`` given (``"inv"`` for inv/solve, ``"det"`` for
      det/slogdet): the small family — always on the kernel backends, on the torch backend from a
      batch size on (:attr:`Tuning.small_min_batch`);
    * ``"torch"``: the torch backend would make exactly one ``torch.linalg`` call
      (:func:`_direct_torch`) and nothing needs the declared ``op`` (no autograd, compile,
      ``torch.func``, dual tensor): the front door makes that call itself, skipping the op layer;
    * ``"op"``: the declared op. Under ``torch.func`` transforms and on meta tensors the LU path
      serves ``n <= 4`` too (it supports them).
    """
    if _functorch() or A.device.type == "meta":
        return "op"
    if torch.compiler.is_compiling():  # no backend lookup while tracing (a ContextVar read)
        return "small" if kind is not None and 0 < A.shape[-1] <= 4 else "op"
    kernels = _on_kernels(A)
    if kind is not None and 0 < A.shape[-1] <= 4:
        least = 1 if kernels else TUNING.small_min_batch.get(A.device.type, {}).get(kind, 1)
        if least <= 1 or math.prod(A.shape[:-2]) >= least:
            return "small"
    if (not kernels and max(A.shape[-2], A.shape[-1]) <= TUNING.direct_max.get(A.device.type, 256)
            and op.direct(A, *more)):
        return "torch"
    return "op"


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def _check_pivot_values(op: str, pivots: torch.Tensor, n: int) -> None:
    """torch's check that pivots came from ``lu_factor`` (``1 <= p <= n``), with its messages. Like
    torch's ``lu_solve`` (not an ``_ex`` op) this reads two numbers back from the device; the
    kernels never index out of range even without it. Skipped where values can't be read (meta
    tensors, ``torch.compile`` tracing, ``torch.func`` transforms)."""
    if (pivots.numel() == 0 or pivots.device.type == "meta" or torch.compiler.is_compiling()
            or _functorch()):
        return
    lo, hi = torch.aminmax(pivots)
    if int(lo) < 1:
        raise E.LinAlgError(f"{op}: Pivots given to lu_solve must all be greater or equal to 1. "
                            "Did you properly pass the result of lu_factor?")
    if int(hi) > n:
        raise E.LinAlgError(f"{op}: Pivots given to lu_solve must all be smaller or equal to LU.size(-2). "
                            "Did you properly pass the result of lu_factor?")


def _check_pivot(op: str, pivot: bool) -> None:
    if not pivot:
        raise E.ShapeError(
            f"{op}: pivot=False (LU without pivoting) is not supported by mpslinalg; partial "
            "pivoting is what makes LU stable. Use pivot=True (the default)."
        )


def lu_factor_ex(A: torch.Tensor, *, pivot: bool = True, check_errors: bool = False, out=None):
    r"""LU factorisation with partial pivoting, without host synchronisation (``torch.linalg.lu_factor_ex``).

    Parameters
    ----------
    A : Tensor, shape ``(*, m, n)``
        Batches of (possibly rectangular) matrices; float32/complex64 on every device,
        float64/complex128 on CPU/CUDA. Never modified.
    pivot : bool, optional
        Must be ``True`` (partial pivoting).
    check_errors : bool, optional
        Raise :class:`torch.linalg.LinAlgError` if some ``info > 0`` (synchronises).
    out : tuple of Tensor, optional
        ``(LU, pivots, info)`` to write the results into (resized; not differentiable, as in torch).

    Returns
    -------
    LU : Tensor, shape ``(*, m, n)``
        ``L`` (unit lower, diagonal not stored) and ``U`` packed, ``A = P L U``.
    pivots : Tensor, shape ``(*, min(m, n))``, int32
        LAPACK's 1-based row interchanges (first row of largest ``|Re| + |Im|``).
    info : Tensor, shape ``(*)``, int32
        0, or the 1-based index of the first exactly-zero pivot (the factorisation continued).

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> A = torch.randn(3, 4, 4, dtype=torch.complex64)
    >>> LU, piv, info = LA.lu_factor_ex(A)
    """
    op = "linalg.lu_factor_ex"
    E.check_matrix(op, "A", A)
    E.check_bool(op, "pivot", pivot)
    E.check_bool(op, "check_errors", check_errors)
    _check_pivot(op, pivot)
    direct = _route(_lu_factor_ex_op, None, A) == "torch"
    LU, piv, info = torch.linalg.lu_factor_ex(A) if direct else _lu_factor_ex_op(A)
    if check_errors:
        E.raise_for_info(op, info, "U[{info},{info}] is zero (1-based), the matrix is singular.")
    return E.store(op, out, (LU, piv, info), A, kind=_RT.linalg_lu_factor_ex)


def lu_factor(A: torch.Tensor, *, pivot: bool = True, out=None):
    r"""LU factorisation with partial pivoting (``torch.linalg.lu_factor``).

    Like :func:`lu_factor_ex` but raises :class:`torch.linalg.LinAlgError` naming the batch element
    and the zero pivot when a matrix is singular (this synchronises with the device). ``out`` is an
    optional tuple ``(LU, pivots)`` to write into.

    Returns
    -------
    LU : Tensor, shape ``(*, m, n)``
    pivots : Tensor, shape ``(*, min(m, n))``, int32

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> LU, piv = LA.lu_factor(torch.randn(5, 5))
    """
    op = "linalg.lu_factor"
    E.check_matrix(op, "A", A)
    E.check_bool(op, "pivot", pivot)
    _check_pivot(op, pivot)
    direct = _route(_lu_factor_ex_op, None, A) == "torch"
    LU, piv, info = torch.linalg.lu_factor_ex(A) if direct else _lu_factor_ex_op(A)
    E.raise_for_info(op, info, "U[{info},{info}] is zero (1-based pivot {info}), the matrix is singular "
                     "and using it in lu_solve would divide by zero. Use lu_factor_ex or lu to factor it "
                     "anyway.")
    return E.store(op, out, (LU, piv), A, kind=_RT.linalg_lu_factor)


def lu(A: torch.Tensor, *, pivot: bool = True, out=None):
    r"""LU decomposition ``A = P L U`` (``torch.linalg.lu``).

    Parameters
    ----------
    A : Tensor, shape ``(*, m, n)``
    pivot : bool, optional
        Must be ``True`` (partial pivoting).
    out : tuple of Tensor, optional
        ``(P, L, U)`` to write the results into (resized; not differentiable, as in torch).

    Returns
    -------
    P : Tensor, shape ``(*, m, m)``
        Permutation matrix (same dtype as ``A``).
    L : Tensor, shape ``(*, m, k)``
        Unit lower triangular, ``k = min(m, n)``.
    U : Tensor, shape ``(*, k, n)``
        Upper triangular.

    Never raises on singular input. Differentiable with respect to ``A`` (through ``L`` and ``U``).

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> A = torch.randn(4, 3)
    >>> P, L, U = LA.lu(A)
    >>> torch.allclose(P @ L @ U, A, atol=1e-5)
    True
    """
    op = "linalg.lu"
    E.check_matrix(op, "A", A)
    E.check_bool(op, "pivot", pivot)
    _check_pivot(op, pivot)
    direct = _route(_lu_factor_ex_op, None, A) == "torch"
    LU, piv, _ = torch.linalg.lu_factor_ex(A) if direct else _lu_factor_ex_op(A)
    m = A.shape[-2]
    L, U = _unpack(LU)
    perm = _perm_from_pivots(piv, m)
    # P[i, j] = 1 where perm[j] == i (out of place: works under torch.vmap and on meta tensors)
    P = (perm[..., None, :] == torch.arange(m, device=A.device)[:, None]).to(A.dtype)
    return E.store(op, out, (P, L, U), A, kind=_RT.linalg_lu)


def lu_solve(LU: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, *, left: bool = True,
             adjoint: bool = False, out: torch.Tensor | None = None) -> torch.Tensor:
    r"""Solve ``A X = B`` from the LU factorisation of ``A`` (``torch.linalg.lu_solve``).

    Parameters
    ----------
    LU : Tensor, shape ``(*, n, n)``
        From :func:`lu_factor`.
    pivots : Tensor, shape ``(*, n)``, int32
        From :func:`lu_factor`.
    B : Tensor, shape ``(*, n, k)`` (``left``) or ``(*, k, n)``
        Right-hand sides; batch dimensions broadcast with ``LU``'s.
    left : bool, optional
        Solve ``A X = B`` (default) or ``X A = B``.
    adjoint : bool, optional
        Use ``Aᴴ`` instead of ``A``.
    out : Tensor, optional
        Output tensor (resized; not differentiable, as in torch).

    Returns
    -------
    X : Tensor
        Differentiable with respect to ``LU`` and ``B``.

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> A, B = torch.randn(4, 4), torch.randn(4, 2)
    >>> LU, piv = LA.lu_factor(A)
    >>> X = LA.lu_solve(LU, piv, B)
    """
    op = "linalg.lu_solve"
    E.check_bool(op, "left", left)
    E.check_bool(op, "adjoint", adjoint)
    E.check_matrix(op, "LU", LU, square=True)
    E.check_tensor(op, "pivots", pivots)
    E.check_matrix(op, "B", B)
    E.check_same(op, ("LU", "B"), LU, B)
    if pivots.dtype != torch.int32:
        raise E.DTypeError(f"{op}: expected pivots to be int32 (as lu_factor returns), got {pivots.dtype}")
    if pivots.device != LU.device:
        raise E.DeviceError(f"{op}: pivots is on {pivots.device} but LU is on {LU.device}")
    if pivots.shape != LU.shape[:-1]:
        raise E.ShapeError(f"{op}: expected pivots of shape {tuple(LU.shape[:-1])} for LU of shape "
                           f"{tuple(LU.shape)}, got {tuple(pivots.shape)}")
    E.check_rhs(op, LU, B, left=left, a_name="LU")
    E.broadcast_batch(op, ("LU", "B"), LU, B)
    _check_pivot_values(op, pivots, LU.shape[-2])
    X = _lu_solve_op(LU, pivots, B, left, adjoint)
    return E.store(op, out, X, LU, B)


def _vector_case(A: torch.Tensor, B: torch.Tensor) -> bool:
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])


def solve_ex(A: torch.Tensor, B: torch.Tensor, *, left: bool = True, check_errors: bool = False,
             out=None):
    r"""Solve ``A X = B`` (or ``X A = B``) without host synchronisation (``torch.linalg.solve_ex``).

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
    B : Tensor, shape ``(*, n)``, ``(*, n, k)`` (or ``(*, k, n)`` if not ``left``)
        A batch of vectors when ``B.ndim == 1`` or ``B.shape == A.shape[:-1]`` (torch's rule).
    left : bool, optional
    check_errors : bool, optional
        Raise :class:`torch.linalg.LinAlgError` for singular ``A`` (synchronises).
    out : tuple of Tensor, optional
        ``(result, info)`` to write into (resized; not differentiable, as in torch).

    Returns
    -------
    result : Tensor
    info : Tensor, int32, shape of ``A``'s batch
        LAPACK's ``info`` of the factorisation of ``A`` (0 = success).

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> X, info = LA.solve_ex(torch.randn(2, 3, 3), torch.randn(2, 3))
    """
    op = "linalg.solve_ex"
    E.check_bool(op, "check_errors", check_errors)
    X, info = _solve_checked(op, A, B, left)
    if check_errors:
        E.raise_for_info(op, info, "The solver failed because the input matrix is singular.")
    return E.store(op, out, (X, info), A, B, kind=_RT.linalg_solve_ex)


def _solve_checked(op: str, A: torch.Tensor, B: torch.Tensor, left: bool):
    E.check_bool(op, "left", left)
    E.check_matrix(op, "A", A, square=True)
    E.check_tensor(op, "B", B)
    if B.ndim < 1:
        raise E.ShapeError(f"{op}: B must have at least 1 dimension, got shape {tuple(B.shape)}")
    E.check_dtype(op, "B", B)
    E.check_same(op, ("A", "B"), A, B)
    vec = _vector_case(A, B)
    if vec and not left:
        raise E.ShapeError(
            f"{op}: vector broadcasting of the left hand side is not supported for left=False "
            f"(B of shape {tuple(B.shape)} is a vector for A of shape {tuple(A.shape)}); in this case "
            "solve is equivalent to B / A.squeeze(-1)"
        )
    B2 = B.unsqueeze(-1) if vec else B
    E.check_rhs(op, A, B2, left=left)
    E.broadcast_batch(op, ("A", "B"), A, B2)
    route = _route(_solve_ex_op, "inv", A, B2)
    if route == "small":
        X, info = small.solve_ex_op(A, B2, left)  # info of A's batch, as torch's
    elif route == "torch":
        X, info = torch.linalg.solve_ex(A, B2, left=left)
    else:
        X, info = _solve_ex_op(A, B2, left)
    return (X.squeeze(-1) if vec else X), info


def solve(A: torch.Tensor, B: torch.Tensor, *, left: bool = True,
          out: torch.Tensor | None = None) -> torch.Tensor:
    r"""Solve ``A X = B`` (or ``X A = B``) by LU with partial pivoting (``torch.linalg.solve``).

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
    B : Tensor, shape ``(*, n)`` or ``(*, n, k)`` (``(*, k, n)`` if not ``left``)
    left : bool, optional
        Solve ``A X = B`` (default) or ``X A = B`` (then ``B`` must be a matrix, as in torch).
    out : Tensor, optional
        Output tensor (resized; not differentiable, as in torch).

    Returns
    -------
    X : Tensor
        Differentiable with respect to ``A`` and ``B``.

    Raises
    ------
    torch.linalg.LinAlgError
        When some ``A`` is singular (names the batch element; synchronises).

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> A = torch.randn(3, 3, dtype=torch.complex64)
    >>> X = LA.solve(A, torch.randn(3, 2, dtype=torch.complex64))
    """
    op = "linalg.solve"
    X, info = _solve_checked(op, A, B, left)
    E.raise_for_info(op, info, "The solver failed because the input matrix is singular "
                     "(U[{info},{info}] is zero).")
    return E.store(op, out, X, A, B)


def inv_ex(A: torch.Tensor, *, check_errors: bool = False, out=None):
    r"""Inverse of square matrices without host synchronisation (``torch.linalg.inv_ex``).

    Complex64 included (a gap of ``torch.linalg.inv`` on mps).

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
    check_errors : bool, optional
        Raise :class:`torch.linalg.LinAlgError` for singular ``A`` (synchronises).
    out : tuple of Tensor, optional
        ``(inverse, info)`` to write into (resized; not differentiable, as in torch).

    Returns
    -------
    inverse : Tensor, shape ``(*, n, n)``
    info : Tensor, int32, shape ``(*)``
        0, or the 1-based index of the first zero pivot (then ``inverse`` holds inf/NaN).

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> Ainv, info = LA.inv_ex(torch.randn(8, 5, 5))
    """
    op = "linalg.inv_ex"
    E.check_bool(op, "check_errors", check_errors)
    E.check_matrix(op, "A", A, square=True)
    route = _route(_inv_ex_op, "inv", A)
    if route == "small":
        X, info = small.inv_ex_op(A)
    elif route == "torch":
        X, info = torch.linalg.inv_ex(A)
    else:
        X, info = _inv_ex_op(A)
    if check_errors:
        E.raise_for_info(op, info, "The diagonal element {info} is zero, the inversion could not be "
                         "completed because the input matrix is singular.")
    return E.store(op, out, (X, info), A, kind=_RT.linalg_inv_ex)


def inv(A: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    r"""Inverse of square matrices (``torch.linalg.inv``), float32 and complex64 on every device.

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
    out : Tensor, optional
        Output tensor (resized; not differentiable, as in torch).

    Returns
    -------
    Tensor, shape ``(*, n, n)``

    Raises
    ------
    torch.linalg.LinAlgError
        When some ``A`` is singular (names the batch element and the zero pivot; synchronises).

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> A = torch.randn(6, 6, dtype=torch.complex64)
    >>> err = (LA.inv(A) @ A - torch.eye(6)).abs().max()
    """
    op = "linalg.inv"
    E.check_matrix(op, "A", A, square=True)
    route = _route(_inv_ex_op, "inv", A)
    if route == "small":
        X, info = small.inv_ex_op(A)
    elif route == "torch":
        X, info = torch.linalg.inv_ex(A)
    else:
        X, info = _inv_ex_op(A)
    E.raise_for_info(op, info, "The diagonal element {info} is zero, the inversion could not be "
                     "completed because the input matrix is singular.")
    return E.store(op, out, X, A)


def det(A: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    r"""Determinant of square matrices (``torch.linalg.det``).

    Differentiable, twice; at an exactly singular matrix the gradient is the true derivative, the
    conjugate-transposed adjugate (``torch.linalg.det`` returns zeros there).

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
    out : Tensor, optional
        Output tensor (resized; not differentiable, as in torch).

    Returns
    -------
    Tensor, shape ``(*)``

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> LA.det(torch.eye(3))
    tensor(1.)
    """
    op = "linalg.det"
    E.check_matrix(op, "A", A, square=True)
    if A.shape[-1] == 0:  # det of 0x0 is 1, differentiable (an empty gradient), as torch's
        d = A.sum((-2, -1)) + 1
    elif (route := _route(_det_op, "det", A)) == "small":
        d = small.det_op(A)
    elif route == "torch":
        d = torch.linalg.det(A)
    else:
        d = _det_op(A)[0]
    return E.store(op, out, d, A)


def slogdet(A: torch.Tensor, *, out=None):
    r"""Sign (phase) and log of the absolute value of the determinant (``torch.linalg.slogdet``).

    ``logabsdet`` is finite for matrices whose determinant over- or underflows the dtype.

    Parameters
    ----------
    A : Tensor, shape ``(*, n, n)``
    out : tuple of Tensor, optional
        ``(sign, logabsdet)`` to write into (resized; not differentiable, as in torch).

    Returns
    -------
    sign : Tensor, shape ``(*)``
        ``±1`` (real) or a unit complex number; 0 for singular matrices.
    logabsdet : Tensor, shape ``(*)``, real
        ``-inf`` for singular matrices.

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> sign, logabsdet = LA.slogdet(1e-20 * torch.eye(50))
    """
    op = "linalg.slogdet"
    E.check_matrix(op, "A", A, square=True)
    if A.shape[-1] == 0:  # (1, 0) for 0x0, differentiable (an empty gradient), as torch's
        zero = A.sum((-2, -1))
        s, la = zero + 1, zero.abs()
    elif (route := _route(_slogdet_op, "det", A)) == "small":
        s, la = small.slogdet_op(A)
    elif route == "torch":
        s, la = torch.linalg.slogdet(A)
    else:
        s, la = _slogdet_op(A)[:2]
    return E.store(op, out, (s, la), A, kind=_RT.linalg_slogdet)
