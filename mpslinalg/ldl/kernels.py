"""The LDL family's kernels (used by :mod:`mpslinalg.ldl`): the Bunch–Kaufman panel in torch ops
(LAPACK ``lasyf``/``lahef``, lower, vectorised over the batch) and the whole-matrix Metal kernel
(``metal/ldl.metal``: LAPACK ``sytf2``/``hetf2``, one matrix per threadgroup) behind one contract.

Kernel contracts (identical on every backend)
---------------------------------------------
``small(A, piv, info, hermitian)``
    Bunch–Kaufman of every whole matrix of the contiguous ``[B, n, n]`` buffer ``A`` (its lower
    triangle), in place: on return ``A``'s lower triangle holds LAPACK's ``LD`` (the upper one is
    zero), ``piv [B, n]`` int32 LAPACK's 1-based pivots (``-p, -p`` for a 2x2 block), ``info [B]``
    int32 the first ``k`` (1-based) whose column is exactly zero (or whose diagonal is NaN), else 0.
``panel(A, state, p, w, hermitian)`` (torch ops only)
    Columns ``[p, p + w)`` of every matrix of ``A`` (full symmetric storage of the unfactored part,
    see :class:`PanelState`), ``lasyf`` style: the columns updated one at a time from the panel's
    own ``L`` and ``W = L D``, then the trailing matrix updated by one matrix product
    ``A22 -= L21 W21ᴴ``, then the panel's rows swapped back to LAPACK's storage (each column of
    ``L`` carries only the interchanges of its own and earlier steps).

The batch runs in lockstep: step ``k`` is the same column for every matrix; a matrix whose step
``k - 1`` chose a 2x2 block skips step ``k`` (``state.skip``). A 2x2 block chosen at a panel's
last column takes one column beyond it (``W`` has ``w + 1`` columns); that matrix then skips the
next panel's first step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..kernels import backend_for, kernel_name, load_library
from ..oplayer import checks as E
from ..oplayer import functorch_active as _functorch

#: Bunch–Kaufman's growth-minimising threshold (1 + sqrt(17)) / 8 (LAPACK ``sytrf``).
ALPHA = (1.0 + math.sqrt(17.0)) / 8.0


@dataclass
class Tuning:
    """Block sizes of the LDL family (``benchmarks/bench_ldl.py`` measures them).

    Attributes
    ----------
    nb : int
        Panel width of the blocked factorization (torch ops, every backend).
    small_max : int
        ``torch`` backend: matrices up to this order are one panel (no trailing update).
    small_bytes : int
        Kernel backends: matrices with ``n * n * itemsize`` up to this are one ``ldl_small`` dispatch
        (must match ``LDL_SMALL_BYTES`` of ``metal/ldl.metal``).
    """

    nb: int = 32
    small_max: int = 64
    small_bytes: int = 16384


#: The tuning in use (module-level, mutable: benchmarks and tests adjust it).
TUNING = Tuning()


# --------------------------------------------------------------------------------------------------
# Element helpers (LAPACK's measures)
# --------------------------------------------------------------------------------------------------


def _abs1(x: torch.Tensor) -> torch.Tensor:
    """LAPACK's ``cabs1`` (``|Re| + |Im|``, the measure of ``i?amax``); ``|x|`` for real."""
    return x.real.abs() + x.imag.abs() if x.is_complex() else x.abs()


def _abs_diag(x: torch.Tensor, hermitian: bool) -> torch.Tensor:
    """The diagonal measure: ``|Re|`` for Hermitian (``hetf2``), ``cabs1`` for complex symmetric."""
    return x.real.abs() if hermitian and x.is_complex() else _abs1(x)


def _real(x: torch.Tensor, hermitian: bool) -> torch.Tensor:
    """``x`` with its imaginary part dropped where LAPACK's ``hetrf`` does (``DBLE``)."""
    return torch.complex(x.real, torch.zeros_like(x.real)) if hermitian and x.is_complex() else x


def _op(x: torch.Tensor, hermitian: bool) -> torch.Tensor:
    """``conj`` for Hermitian factorizations (``L D Lᴴ``), identity for symmetric (``L D Lᵀ``)."""
    return x.conj() if hermitian and x.is_complex() else x


def symmetric_from_lower(A: torch.Tensor, hermitian: bool) -> torch.Tensor:
    """The full symmetric (Hermitian: real diagonal) matrix whose lower triangle is ``A``'s (LAPACK
    reads only that triangle)."""
    low = A.tril(-1)
    diag = torch.diag_embed(_real(A.diagonal(dim1=-2, dim2=-1), hermitian))
    return low + diag + _op(low.mT, hermitian)


def _swap_rows(X: torch.Tensor, i: torch.Tensor, j: torch.Tensor, dim: int) -> None:
    """Swap, per matrix ``b``, the slices ``i[b]`` and ``j[b]`` of ``X [B, ., .]`` along ``dim``
    (1: rows, 2: columns) in place; ``i == j`` leaves it alone. Two gathers and two scatters of
    one row each: no pass over the matrix."""
    if X.shape[1] == 0 or X.shape[2] == 0:
        return
    shape = list(X.shape)
    shape[dim] = 1
    view = (-1, 1, 1)
    ii, jj = i.view(view).expand(shape), j.view(view).expand(shape)
    ri, rj = X.gather(dim, ii), X.gather(dim, jj)
    X.scatter_(dim, ii, rj)
    X.scatter_(dim, jj, ri)


# --------------------------------------------------------------------------------------------------
# The torch-op panel (lasyf / lahef, lower), vectorised over the batch
# --------------------------------------------------------------------------------------------------


@dataclass
class PanelState:
    """What the lockstep factorization carries from step to step, per matrix.

    Attributes
    ----------
    piv : Tensor ``[B, n]`` int32
        LAPACK's pivots so far.
    info : Tensor ``[B]`` int32
        LAPACK's ``info`` so far.
    skip : Tensor ``[B]`` bool
        The current step is the second column of a 2x2 block chosen at the previous one.
    """

    piv: torch.Tensor
    info: torch.Tensor
    skip: torch.Tensor


def _gather_col(X: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Column ``idx[b]`` of every ``X[b]`` (``[B, R, C] -> [B, R]``)."""
    return X.gather(2, idx.view(-1, 1, 1).expand(X.shape[0], X.shape[1], 1))[..., 0]


def _gather_row(X: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Row ``idx[b]`` of every ``X[b]`` (``[B, R, C] -> [B, C]``)."""
    return X.gather(1, idx.view(-1, 1, 1).expand(X.shape[0], 1, X.shape[2]))[:, 0]


def _first_max(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(max, first index of it)`` over the last dim (``i?amax``'s smallest index on ties)."""
    big = x.amax(-1)
    ar = torch.arange(x.shape[-1], device=x.device)
    first = torch.where(x == big[..., None], ar, x.shape[-1]).amin(-1)
    return big, first.clamp(max=x.shape[-1] - 1)


def panel(A: torch.Tensor, state: PanelState, p: int, w: int, hermitian: bool) -> None:
    """Factor columns ``[p, p + w)`` of every matrix of ``A [B, n, n]`` in place (module docstring).

    ``A[:, p:, p:]`` must hold the unfactored matrix in full symmetric storage on entry; on return
    columns ``[p, p + w)`` (and ``p + w`` for a matrix that took a 2x2 block there) hold LAPACK's
    ``L`` and ``D`` in their lower part, and ``A[:, q:, q:]`` (``q = p + w``) the updated
    trailing matrix, again in full symmetric storage.
    """
    B, n, _ = A.shape
    dev, dt = A.device, A.dtype
    m = n - p
    W = A.new_zeros(B, m, w + 1)
    swaps: list[tuple[int, torch.Tensor, torch.Tensor]] = []
    piv, info = state.piv, state.info
    for j in range(w):
        k = p + j
        act = ~state.skip
        Lp = A[:, k:, p:k]  # the panel's L so far, rows k..n-1
        wk = A[:, k:, k] - (Lp @ _op(W[:, j, :j], hermitian)[..., None])[..., 0]
        wk[:, 0] = _real(wk[:, 0], hermitian)
        absakk = _abs_diag(wk[:, 0], hermitian)
        if k + 1 < n:
            colmax, ix = _first_max(_abs1(wk[:, 1:]))
            imax = k + 1 + ix
        else:
            colmax, imax = torch.zeros_like(absakk), torch.full((B,), k, device=dev, dtype=torch.long)
        zero = (torch.maximum(absakk, colmax) == 0) | absakk.isnan()
        need2 = ~zero & (absakk < ALPHA * colmax)
        # the updated column imax (LAPACK copies it to W(:, k+1) only when needed; all matrices here)
        colimax = _gather_col(A[:, k:, :], imax)
        wimax = _gather_row(W[:, :, :j], imax - p)
        w2 = colimax - (Lp @ _op(wimax, hermitian)[..., None])[..., 0]
        rel = (imax - k)[:, None]
        pos = torch.arange(n - k, device=dev)[None, :]
        w2 = torch.where(pos == rel, _real(w2, hermitian), w2)
        a2 = _abs1(w2)
        rowmax = torch.where(pos == rel, torch.zeros_like(a2), a2).amax(-1)
        diag2 = _abs_diag(w2.gather(1, rel)[:, 0], hermitian)
        c1 = absakk >= ALPHA * colmax * (colmax / rowmax)
        c2 = diag2 >= ALPHA * rowmax
        two = act & need2 & ~c1 & ~c2
        swap1 = act & need2 & ~c1 & c2
        kk = k + two.long()
        kp = torch.where(swap1 | two, imax, kk)
        # W's new columns (rows k..): column j = w_k, or w_imax for a 1x1 swap; column j+1 = w_imax
        colj = torch.where(swap1[:, None], w2, wk)
        W[:, j:, j] = torch.where(act[:, None], colj, W[:, j:, j])
        W[:, j:, j + 1] = torch.where(two[:, None], w2, W[:, j:, j + 1])
        # interchange kk <-> kp: rows of the panel's L and the trailing matrix, columns of the
        # trailing matrix (full storage), rows of W
        kps = torch.where(act, kp, kk)
        _swap_rows(A[:, k:, p:], kk - k, kps - k, 1)
        _swap_rows(A[:, k:, k:], kk - k, kps - k, 2)
        _swap_rows(W[:, j:, : j + 2], kk - k, kps - k, 1)
        swaps.append((k, kk, torch.where(act, kp, kk)))
        _store(A, W, k, j, act, zero, two, hermitian)
        W[:, j:, j] = torch.where((act & zero)[:, None], torch.zeros((), dtype=dt, device=dev), W[:, j:, j])
        one = torch.where(two, -(kp + 1), kp + 1).to(torch.int32)
        piv[:, k] = torch.where(act, one, piv[:, k])
        if k + 1 < n:
            piv[:, k + 1] = torch.where(two, one, piv[:, k + 1])
        info.copy_(torch.where(act & zero & (info == 0), k + 1, info).to(torch.int32))
        state.skip = two
    q = p + w
    if q < n:
        over = state.skip  # a 2x2 block took column q
        L21 = torch.cat([A[:, q:, p:q], torch.where(over[:, None], A[:, q:, q], 0)[..., None]], dim=-1)
        W21 = W[:, w:, :].clone()
        W21[:, :, w] = torch.where(over[:, None], W21[:, :, w], 0)
        L21[:, 0] = torch.where(over[:, None], 0, L21[:, 0])
        W21[:, 0] = torch.where(over[:, None], 0, W21[:, 0])
        T = A[:, q:, q:]
        T.sub_(L21 @ _op(W21, hermitian).mT)
        T.copy_(symmetric_from_lower(T, hermitian))
    _undo(A, swaps, p)


def _store(A: torch.Tensor, W: torch.Tensor, k: int, j: int, act: torch.Tensor, zero: torch.Tensor,
           two: torch.Tensor, hermitian: bool) -> None:
    """Write step ``k``'s columns of ``L`` and ``D`` into ``A`` (lasyf's store, masked per matrix)."""
    n = A.shape[-1]
    wk = W[:, j:, j]
    d = wk[:, 0]
    r1 = 1 / (d.real if hermitian and d.is_complex() else d)
    one = torch.cat([d[:, None], wk[:, 1:] * r1[:, None]], dim=-1)
    col = torch.where(zero[:, None], wk, one)
    if k + 1 < n:
        wk1 = W[:, j:, j + 1]
        d21 = wk[:, 1]
        d11 = wk1[:, 1] / d21
        d22 = wk[:, 0] / _op(d21, hermitian)
        prod = d11 * d22
        t = 1 / ((prod.real if hermitian and prod.is_complex() else prod) - 1)
        d21 = t / d21
        lk = _op(d21, hermitian)[:, None] * (d11[:, None] * wk[:, 2:] - wk1[:, 2:])
        lk1 = d21[:, None] * (d22[:, None] * wk1[:, 2:] - wk[:, 2:])
        col2 = torch.cat([wk[:, :2], lk], dim=-1)
        col = torch.where(two[:, None], col2, col)
        A[:, k + 1:, k + 1] = torch.where(two[:, None], torch.cat([wk1[:, 1:2], lk1], dim=-1), A[:, k + 1:, k + 1])
    A[:, k:, k] = torch.where(act[:, None], col, A[:, k:, k])


def _undo(A: torch.Tensor, swaps, p: int) -> None:
    """LAPACK's storage of ``L``: undo, newest first, each of the panel's interchanges on the
    panel's columns left of its block (``lasyf``'s "partially undoing the interchanges")."""
    for k, kk, kp in reversed(swaps):
        if k > p:
            _swap_rows(A[:, :, p:k], kk, kp, 1)


def factor_torch(A: torch.Tensor, hermitian: bool, nb: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Blocked Bunch–Kaufman of ``A [B, n, n]`` (its lower triangle) in torch ops: ``(LD, piv, info)``."""
    B, n, _ = A.shape
    S = symmetric_from_lower(A, hermitian).contiguous()
    state = PanelState(piv=torch.zeros(B, n, dtype=torch.int32, device=A.device),
                       info=torch.zeros(B, dtype=torch.int32, device=A.device),
                       skip=torch.zeros(B, dtype=torch.bool, device=A.device))
    width = n if n <= TUNING.small_max else nb
    for p in range(0, n, width):
        panel(S, state, p, min(width, n - p), hermitian)
    return S.tril(), state.piv, state.info


# --------------------------------------------------------------------------------------------------
# Kernels: torch ops for the torch backend, metal/ldl.metal for metal and the emulator
# --------------------------------------------------------------------------------------------------


class _TorchKernels:
    """The ``small`` contract with torch ops (one panel over the whole matrix)."""

    name = "torch"

    def small(self, A: torch.Tensor, piv: torch.Tensor, info: torch.Tensor, hermitian: bool) -> None:
        LD, p, i = factor_torch(A, hermitian, A.shape[-1])
        A.copy_(LD)
        piv.copy_(p)
        info.copy_(i)


class _MetalKernels:
    """The ``small`` contract with ``metal/ldl.metal`` (``metal`` on mps, ``emulator`` on CPU)."""

    name = "metal"
    #: Threads per threadgroup of ``ldl_small`` (LDL_SMALL_THREADS in metal/ldl.metal).
    group = 64

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        self.lib = load_library("ldl", device)
        self.dtype = dtype

    def small(self, A: torch.Tensor, piv: torch.Tensor, info: torch.Tensor, hermitian: bool) -> None:
        B, n, _ = A.shape
        if B == 0 or n == 0:
            return
        getattr(self.lib, kernel_name("ldl_small", self.dtype))(A, piv, info, n, int(hermitian),
                                                                 threads=B * self.group, group_size=self.group)


_TORCH_KERNELS = _TorchKernels()


def small_fits(n: int, dtype: torch.dtype) -> bool:
    """Whether an ``n x n`` matrix fits ``ldl_small``'s threadgroup tile."""
    size = 8 if dtype.is_complex else 4
    return n * n * size <= TUNING.small_bytes


def on_kernels(x: torch.Tensor) -> bool:
    """``x`` is served by the ``.metal`` kernels (metal/emulator backend, float32/complex64, no
    ``torch.func`` transform); else by torch ops."""
    return x.dtype in E.GPU_DTYPES and backend_for(x.device) != "torch" and not _functorch()


def kernels_for(x: torch.Tensor):
    """The kernel object serving ``x`` (chosen once, outside the algorithm)."""
    return _MetalKernels(x.device, x.dtype) if on_kernels(x) else _TORCH_KERNELS
