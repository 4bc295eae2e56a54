"""The Cholesky family's tuning and its two kernels behind one contract: torch ops for the ``torch``
backend, ``metal/cholesky.metal`` for the ``metal`` and ``emulator`` backends.

Kernel contracts (identical on every backend)
---------------------------------------------
``small(L, info)``
    ``potf2`` of every matrix of the contiguous ``[B, n, n]`` buffer ``L`` in place (its lower
    triangle holds the input, zeros above); writes ``info [B]`` (int32, 1-based order of the first
    non-positive or NaN pivot, 0 on success). On return a failed matrix (``info = k > 0``) has its
    first ``k - 1`` columns factored and zeros in the others.
``panel(L, info, o, w)``
    ``potf2`` of the diagonal block rows/columns ``[o, o + w)`` of every matrix of ``L [B, n, n]``
    in place (only that block's lower triangle is read and written); ``info[b] = o + k`` where the
    block fails first at its order ``k`` and ``info[b]`` was 0. Columns from a failure on are
    garbage (finite or not); the algorithm clears them at the end.

A failed pivot is replaced by 1 and the factorization goes on (no data-dependent branch, so no host
synchronisation and, in the kernels, no divergent barrier).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..kernels import backend_for, kernel_name, load_library
from ..oplayer import checks as E
from ..oplayer import functorch_active as _functorch


@dataclass
class Tuning:
    """Block sizes and leaf choices of the Cholesky family (``benchmarks/bench_cholesky.py``).

    Attributes
    ----------
    nb : int
        Largest diagonal block of the recursive algorithm (a ``panel`` call); at most 64 on the
        kernel backends (``CHOL_PANEL_MAX``).
    small_max : int
        Kernel backends: matrices up to this order are one ``cholesky_small`` dispatch (at most 64).
    torch_small : dict
        ``torch`` backend, per device type: ``"potf2"`` factors batches of matrices up to
        ``torch_small_max`` (and the diagonal blocks) by the column loop vectorised over the batch;
        ``"potrf"`` hands them to the device's own ``potrf`` (``torch.linalg.cholesky_ex``: LAPACK on
        the CPU, cuSOLVER on CUDA), which has the same ``info`` semantics. The CPU's LAPACK loop was
        faster at every batched size measured here (2-core CPU, 2026-12; see docs/ops/cholesky.md).
    torch_small_max : int
        ``torch`` backend: largest order of the vectorised ``potf2``.
    torch_direct_max : dict
        ``torch`` backend, per device type: matrices up to this order are one device ``potrf`` call
        (no blocking); larger ones are blocked with the device's ``potrf`` or ``potf2`` on the
        diagonal blocks. 0: always blocked (tests).
    """

    nb: int = 32
    small_max: int = 64
    torch_small: dict = field(default_factory=lambda: {"cpu": "potrf", "cuda": "potf2"})
    torch_small_max: int = 32
    torch_direct_max: dict = field(default_factory=lambda: {"cpu": 2**62, "cuda": 2**62})


#: The tuning in use (module-level, mutable: benchmarks and tests adjust it).
TUNING = Tuning()

#: cholesky_small's widths (NMAX), its threadgroup budget and largest group (metal/cholesky.metal).
_SMALL_WIDTHS = (8, 16, 32, 64)
_SMALL_BYTES = 16384
_SMALL_MAX_PER = 8
_PANEL_THREADS = 256
_PANEL_MAX = 64


def small_width(n: int) -> int:
    """The instantiated ``cholesky_small`` width ``NMAX >= n``."""
    return next(w for w in _SMALL_WIDTHS if w >= n)


def small_per_group(nmax: int, dtype: torch.dtype) -> int:
    """Matrices per ``cholesky_small`` threadgroup (``CHOL_PER`` of the kernel source)."""
    size = 8 if dtype.is_complex else 4
    return max(1, min(_SMALL_MAX_PER, _SMALL_BYTES // (nmax * nmax * size)))


# --------------------------------------------------------------------------------------------------
# potf2 in torch ops (vectorised over the batch)
# --------------------------------------------------------------------------------------------------


def _potf2_torch(P: torch.Tensor, info: torch.Tensor, o: int) -> None:
    """``potf2`` of the ``[B, w, w]`` view ``P`` in place (right-looking, one column at a time over
    the whole batch); ``info[b] = o + j + 1`` at the first failed pivot ``j`` if it was 0. Only the
    lower triangle is read; the strict upper triangle of ``P`` is left zero."""
    w = P.shape[-1]
    for j in range(w):
        d = P[:, j, j].real if P.is_complex() else P[:, j, j]
        ok = d > 0  # False for NaN
        info.masked_fill_((info == 0) & ~ok, o + j + 1)
        p = torch.where(ok, d, torch.ones_like(d)).sqrt()
        P[:, j, j] = p
        if j + 1 < w:
            col = P[:, j + 1:, j] / p[:, None]
            P[:, j + 1:, j] = col
            # the whole trailing square (a batched outer product); its strict upper part is cleared below
            P[:, j + 1:, j + 1:] -= col[:, :, None] * col.conj()[:, None, :]
    if w > 1:
        P.masked_fill_(torch.ones(w, w, dtype=torch.bool, device=P.device).triu(1), 0)


def _potrf_device(P: torch.Tensor, info: torch.Tensor, o: int) -> None:
    """The device's ``potrf`` on the ``[B, w, w]`` view ``P`` in place (same contract as
    :func:`_potf2_torch`)."""
    F, bad = torch.linalg.cholesky_ex(P)
    P.copy_(F)
    info.copy_(torch.where((info == 0) & (bad > 0), bad + o, info))


def clear_failed(L: torch.Tensor, info: torch.Tensor) -> torch.Tensor:
    """``L [B, n, n]`` with zeros in the columns ``k - 1 ..`` of every matrix with ``info = k > 0``
    (those columns are garbage after a failed pivot), in place."""
    n = L.shape[-1]
    cols = torch.arange(n, device=L.device, dtype=info.dtype)
    bad = (info[:, None] > 0) & (cols[None, :] >= info[:, None] - 1)
    return L.masked_fill_(bad[:, None, :], 0)


# --------------------------------------------------------------------------------------------------
# Kernels: torch ops for the torch backend, metal/cholesky.metal for metal and the emulator
# --------------------------------------------------------------------------------------------------


class _TorchKernels:
    """The kernel contracts with torch ops (any device and dtype)."""

    name = "torch"

    def _leaf(self, P: torch.Tensor, info: torch.Tensor, o: int) -> None:
        how = TUNING.torch_small.get(P.device.type, "potrf")
        if how == "potf2" and P.shape[-1] <= TUNING.torch_small_max:
            _potf2_torch(P, info, o)
        else:
            _potrf_device(P, info, o)

    def small(self, L: torch.Tensor, info: torch.Tensor) -> None:
        self._leaf(L, info, 0)
        clear_failed(L, info)

    def panel(self, L: torch.Tensor, info: torch.Tensor, o: int, w: int) -> None:
        self._leaf(L[:, o:o + w, o:o + w], info, o)


class _MetalKernels:
    """The kernel contracts with ``metal/cholesky.metal`` (``metal`` on mps, ``emulator`` on CPU)."""

    name = "metal"

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        self.lib = load_library("cholesky", device)
        self.dtype = dtype

    def small(self, L: torch.Tensor, info: torch.Tensor) -> None:
        B, n, _ = L.shape
        nmax = small_width(n)
        per = small_per_group(nmax, self.dtype)
        groups = -(-B // per)
        getattr(self.lib, kernel_name("cholesky_small", self.dtype, nmax))(
            L, info, n, B, threads=groups * per * 32, group_size=per * 32)

    def panel(self, L: torch.Tensor, info: torch.Tensor, o: int, w: int) -> None:
        B, n, _ = L.shape
        if w > _PANEL_MAX:
            raise ValueError(f"cholesky_panel: block width {w} exceeds {_PANEL_MAX} (mpslinalg bug: please report)")
        getattr(self.lib, kernel_name("cholesky_panel", self.dtype))(
            L, info, n, o, w, threads=B * _PANEL_THREADS, group_size=_PANEL_THREADS)


_TORCH_KERNELS = _TorchKernels()


def on_kernels(x: torch.Tensor) -> bool:
    """``x`` is served by the ``.metal`` kernels (metal/emulator backend, float32/complex64, no
    ``torch.func`` transform); else by torch ops."""
    return x.dtype in E.GPU_DTYPES and backend_for(x.device) != "torch" and not _functorch()


def kernels_for(x: torch.Tensor):
    """The kernel object serving ``x`` (the device choice, made once per call)."""
    return _MetalKernels(x.device, x.dtype) if on_kernels(x) else _TORCH_KERNELS
