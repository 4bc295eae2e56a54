"""The blocked triangular solve, written once over the kernels (see :mod:`mpslinalg.triangular`)."""

from __future__ import annotations

import warnings

import torch

from ..oplayer import checks as E
from ..oplayer import functorch_active
from .kernels import (
    _OP,
    TUNING,
    _triton_state,
    _trsm_small_metal,
    _trsm_small_triton,
    _trtri_diag,
    _use_triton,
    _uses_kernel,
)

# --------------------------------------------------------------------------------------------------
# The blocked algorithm (device agnostic)
# --------------------------------------------------------------------------------------------------


def _mm(a: torch.Tensor, b: torch.Tensor, batch: int) -> torch.Tensor:
    """``a @ b`` for 3-D operands whose batch may be 1 (broadcast) or ``batch``."""
    if a.shape[0] != batch:
        a = a.expand(batch, *a.shape[1:])
    if b.shape[0] != batch:
        b = b.expand(batch, *b.shape[1:])
    return torch.bmm(a, b)


def _fused(t: torch.Tensor) -> bool:
    # cuBLAS fuses C + A B into one GEMM; the CPU baddbmm falls back to a per-matrix loop for
    # strided operands (measured 10x slower than bmm + add), so elsewhere we add separately.
    return t.device.type == "cuda"


def _addmm_into(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """``out = c + a @ b`` (``c`` and ``out`` of the full batch; ``a`` may have batch 1)."""
    if a.shape[0] != out.shape[0]:
        a = a.expand(out.shape[0], *a.shape[1:])
    if _fused(out):
        torch.baddbmm(c, a, b, out=out)
    else:
        torch.add(c, torch.bmm(a, b), out=out)


def _sub_mm(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, batch: int) -> torch.Tensor:
    """``c - a @ b`` as a new tensor of batch ``batch`` (operands may have batch 1)."""
    if c.shape[0] != batch:
        c = c.expand(batch, *c.shape[1:])
    if _fused(c):
        if a.shape[0] != batch:
            a = a.expand(batch, *a.shape[1:])
        if b.shape[0] != batch:
            b = b.expand(batch, *b.shape[1:])
        return torch.baddbmm(c, a, b, alpha=-1)
    return c - _mm(a, b, batch)


def _unit_diagonal_scaling(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A C, c)`` with ``C = diag(c)``, ``c = 2^-e``: every diagonal entry of ``A C`` has modulus
    in [1/2, 1) (``e`` clamped, see below).

    The blocked solve multiplies by inverted diagonal blocks ``D``; at the ends of the float32
    range ``D`` R overflows (``|A| ~ 1e-38``: ``|D| ~ 4e37`` times ``|R| ~ 10``, then ``inf - inf``
    in the refinement) or ``D`` underflows to subnormals (``|A| ~ 1e38``) while ``X`` is
    representable. Column scaling by powers of two is exact, so in the normal range the solve of
    ``(A C) Z = B``, ``X = C Z`` rounds exactly as the unscaled one; it only keeps ``D`` near 1.
    Exponents are clamped to [-126, 126] so ``2^±e`` is a normal float32.
    """
    d = A.diagonal(dim1=-2, dim2=-1).abs()
    e = torch.frexp(d).exponent.clamp_(-126, 126)
    c = torch.ldexp(torch.ones_like(d), -e)
    return A * c[..., None, :], c


def _solve_left(A: torch.Tensor, B: torch.Tensor, X: torch.Tensor, upper: bool, unit: bool,
                use_kernel_leaves: bool, triton: bool = False) -> None:
    """Solve ``A X = B`` for logical triangles ``A [bA, n, n]``, writing ``X [b, n, k]`` (a view).

    ``bA`` and ``B``'s batch are either ``b`` or 1 (broadcast). Only the named triangle of ``A`` is
    read; the diagonal is not read when ``unit``.
    """
    batch, n, _ = X.shape
    t = TUNING
    if use_kernel_leaves and n <= min(t.small_n, 64):  # the fused small-system kernel
        _trsm_small_metal(A, B, X, upper, unit)
        return
    if triton:  # its CUDA counterpart (n <= 64, float32)
        _trsm_small_triton(A, B, X, upper, unit)
        return
    trsm_from = t.trsm_leaf_cpu if X.device.type == "cpu" else t.trsm_leaf
    small_leaves = use_kernel_leaves and t.kernel_leaf == "trsm_small" and t.small_n > 0
    if small_leaves:  # GEMM recursion over leaves of at most small_n rows solved by trsm_small
        leaf_rows, D, nb = min(t.small_n, 64), None, 0
    elif not use_kernel_leaves and trsm_from and n >= trsm_from:
        leaf_rows, D, nb = t.trsm_leaf_rows, None, 0
    else:
        nb = min(t.nb_unit if unit else t.nb, 32, n)
        leaf_rows = nb * t.leaf_blocks
        if not unit:  # solve (A C) Z = B, X = C Z: see _unit_diagonal_scaling
            A, col_scale = _unit_diagonal_scaling(A)
        D, Tb = _trtri_diag(A, nb, upper, unit)  # the one batched dispatch

    def leaf(r0: int, r1: int, Bc: torch.Tensor) -> None:
        # Bc: current right-hand side of rows r0:r1
        if small_leaves:  # views: the kernel takes offsets, strides and broadcast batches
            _trsm_small_metal(A[:, r0:r1, r0:r1], Bc, X[:, r0:r1], upper, unit)
            return
        if D is None:
            Aleaf = A[:, r0:r1, r0:r1]
            if Aleaf.shape[0] != batch or Bc.shape[0] != batch:
                Aleaf = Aleaf.expand(batch, *Aleaf.shape[1:])
                Bc = Bc.expand(batch, *Bc.shape[1:])
            # transposed problem: torch's column-major result is row-major here (a plain copy)
            Xt = torch.linalg.solve_triangular(Aleaf.mT, Bc.mT, upper=not upper, left=False,
                                               unitriangular=unit)
            X[:, r0:r1].copy_(Xt.mT)
            return
        starts = list(range(r0, r1, nb))
        order = starts[::-1] if upper else starts
        done: tuple[int, int] | None = None  # rows already solved within this leaf
        for j0 in order:
            j1 = min(j0 + nb, r1)
            Dj = D[:, j0 // nb, : j1 - j0, : j1 - j0]
            Tj = Tb[:, j0 // nb, : j1 - j0, : j1 - j0]
            Rj = Bc[:, j0 - r0 : j1 - r0]
            if done is not None:
                d0, d1 = done
                Rj = _sub_mm(Rj, A[:, j0:j1, d0:d1], X[:, d0:d1], batch)
            # Y = D R, then one step of refinement X = Y + D (R - T Y): multiplying by an explicit
            # block inverse alone fails LAPACK's residual test on ill-conditioned blocks (ratios
            # up to 1e6 on 16-wide Gaussian triangles); the step restores backward stability.
            Y = _mm(Dj, Rj, batch)
            _addmm_into(Y, Dj, _sub_mm(Rj, Tj, Y, batch), X[:, j0:j1])
            done = (j0, r1) if upper else (r0, j1)

    def rec(r0: int, r1: int, Bc: torch.Tensor) -> None:
        if r1 - r0 <= leaf_rows:
            leaf(r0, r1, Bc)
            return
        half = (r1 - r0) // 2
        unit_rows = leaf_rows if D is None else nb
        mid = r0 + max(unit_rows, (half // unit_rows) * unit_rows)
        if not upper:
            rec(r0, mid, Bc[:, : mid - r0])
            B2 = _sub_mm(Bc[:, mid - r0 :], A[:, mid:r1, r0:mid], X[:, r0:mid], batch)
            rec(mid, r1, B2)
        else:
            rec(mid, r1, Bc[:, mid - r0 :])
            B1 = _sub_mm(Bc[:, : mid - r0], A[:, r0:mid, mid:r1], X[:, mid:r1], batch)
            rec(r0, mid, B1)

    rec(0, n, B)
    if D is not None and not unit:
        X.mul_(col_scale[..., None])


def _as3(x: torch.Tensor, batch: torch.Size) -> torch.Tensor:
    """``x`` with its batch dims flattened to one of size ``prod(batch)``, or 1 when ``x`` has none
    that differ from 1 (broadcast later by stride-0 views); copies only for partial broadcasts."""
    r, c = x.shape[-2:]
    if x.shape[:-2].numel() == 1:
        return x.reshape(1, r, c)
    if x.shape[:-2] == batch:
        return x.reshape(-1, r, c)
    return x.expand(*batch, r, c).reshape(-1, r, c)


def _solve_impl(A: torch.Tensor, B: torch.Tensor, upper: bool, left: bool, unit: bool,
                batch: torch.Size | None = None, contiguous: bool = True) -> torch.Tensor:
    """The solve on any backend; ``A``, ``B`` checked, same dtype/device, broadcastable batches
    (``batch``, their broadcast batch shape, when the caller already has it).

    Under ``torch.func`` transforms (``vmap``, ``grad``, ...) the kernel backends (raw buffers) can't
    run: the solve is then torch's own ``trsm``, the same semantics, batchable by functorch."""
    if functorch_active():
        return torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unit)
    kernel = _uses_kernel(A)
    n = A.shape[-1]
    triton = not kernel and _use_triton(A, n)
    if triton:
        try:
            return _solve_blocked(A, B, upper, left, unit, batch, False, True)
        except Exception as exc:  # noqa: BLE001 - a Triton compile error is raised at launch
            _triton_state["ok"], _triton_state["error"] = False, repr(exc)
            warnings.warn(f"{_OP}: the Triton kernel failed ({exc!r}); using cuBLAS from now on",
                          RuntimeWarning, stacklevel=3)
    if not kernel and n <= TUNING.direct_max.get(A.device.type, 0):
        # one LAPACK/cuBLAS trsm (it broadcasts, honours conj views and strides, and handles empty
        # shapes itself). Posed as the transposed problem because torch returns column-major
        # solutions: the transpose of that is our row-major X, no copy.
        if n > TUNING.direct_transpose_max.get(A.device.type, 0):
            # large systems: torch.linalg's own call (the transposed problem was 0.76-0.88x of it)
            X = torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unit)
            # the custom op and trsm() promise row-major X; the plain eager call may keep torch's
            # layout (as torch.linalg does) and save the copy
            return X.contiguous() if contiguous else X
        Xt = torch.linalg.solve_triangular(A.mT, B.mT, upper=not upper, left=not left,
                                           unitriangular=unit)
        return Xt.mT.contiguous()  # a no-op for the layouts torch returns (kept for safety)
    return _solve_blocked(A, B, upper, left, unit, batch, kernel, False)


def _solve_blocked(A: torch.Tensor, B: torch.Tensor, upper: bool, left: bool, unit: bool,
                   batch: torch.Size | None, kernel: bool, triton: bool) -> torch.Tensor:
    """The blocked algorithm (or a fused small-system kernel) into a new row-major ``X``."""
    if batch is None:
        batch = _batch_shape(A, B)
    X = torch.empty((*batch, *B.shape[-2:]), dtype=A.dtype, device=A.device)
    if X.numel() == 0:
        return X
    A3 = _as3(A, batch)
    B3 = _as3(B, batch)
    X3 = X.view(-1, *B.shape[-2:])
    if left:
        _solve_left(A3, B3, X3, upper, unit, kernel, triton)
    else:  # X A = B  <=>  Aᵀ Xᵀ = Bᵀ, all views
        _solve_left(A3.mT, B3.mT, X3.mT, not upper, unit, kernel, triton)
    return X


def _batch_shape(A: torch.Tensor, B: torch.Tensor) -> torch.Size:
    """Broadcast batch shape of ``A`` and ``B`` (the shared check's error on a mismatch)."""
    return E.broadcast_batch(_OP, ("A", "B"), A, B)


def trsm(A: torch.Tensor, B: torch.Tensor, *, upper: bool, left: bool = True,
         unitriangular: bool = False) -> torch.Tensor:
    """Internal no-checks triangular solve for other families (LU's TRSM steps).

    ``A [*, n, n]`` and ``B`` (``[*, n, k]`` if ``left`` else ``[*, k, n]``) must have the same dtype
    and device and broadcastable batch dimensions; strides and conjugate views are fine. Returns a
    new contiguous ``X`` with ``A X = B`` (``X A = B`` if not ``left``). Runs on the backend selected
    for ``A``'s device, no host synchronisation, not differentiable (use :func:`solve_triangular`).
    """
    return _solve_impl(A, B, upper, left, unitriangular)


