"""The LU family's algorithm, written once over a kernel object: blocked ``getrf`` on the kernel
backends, recursive ``getrf2`` on the torch backend, ``getrs``, inverses and determinants from the
factors (see :mod:`mpslinalg.lu`)."""

from __future__ import annotations

import math

import torch

from ..oplayer import checks as E
from ..oplayer import functorch_active as _functorch
from ..triangular import solve_triangular, trsm, trsm_small_metal
from . import torch_cpu as _torch
from .kernels import (
    _TORCH_KERNELS,
    DISPATCHES,
    SWAP_TRSM_MAX,
    TUNING,
    _kernels,
    _MetalKernels,
    _on_kernels,
    _swaps_to_perm,
)
from .kernels import SMALL_SOLVE_MAX_RHS as _SOLVE_RHS

# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------


def _trsm(A: torch.Tensor, B: torch.Tensor, *, upper: bool, left: bool, unitriangular: bool) -> torch.Tensor:
    """Internal triangular solve of the triangular family (no checks, not differentiable)."""
    if _functorch():
        return torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)
    return trsm(A, B, upper=upper, left=left, unitriangular=unitriangular)


def _solve_tri(A: torch.Tensor, B: torch.Tensor, *, upper: bool, left: bool = True,
               unitriangular: bool = False) -> torch.Tensor:
    """Differentiable triangular solve used inside backward formulas (our public op; torch's under
    ``torch.func`` transforms, which the triangular custom op does not support)."""
    if _functorch():
        return torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)
    return solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)


def _gemm_sub(C: torch.Tensor, A: torch.Tensor, B: torch.Tensor, mode: str) -> None:
    """``C -= A @ B`` in place (``C`` a view of a contiguous buffer, batched ``[b, m, n]``).

    Complex products are done as real GEMMs when ``mode`` asks for it (Apple's matrix units are
    float-only): ``"4m"``: ``Cr -= ArBr - AiBi``, ``Ci -= ArBi + AiBr``; ``"embed"``:
    ``[Cr | Ci] -= [Ar | Ai] @ [[Br, Bi], [-Bi, Br]]`` (one real product of twice the size).
    """
    if C.device.type == "cuda" and C.dim() == 3 and (not C.is_complex() or mode == "native"):
        C.baddbmm_(A, B, alpha=-1)  # one cuBLAS call into C (no temporary product, no extra pass)
        return
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


def _eye(n: int, like: torch.Tensor) -> torch.Tensor:
    return torch.eye(n, dtype=like.dtype, device=like.device)

# --------------------------------------------------------------------------------------------------
# The algorithm
# --------------------------------------------------------------------------------------------------


def _split(k: int, nb: int) -> int:
    return max(nb, (k // 2) // nb * nb)


def _getrf_blocked(LU, piv, info, nb: int, kern: _MetalKernels, gemm: str, outer: int = 0) -> None:
    """Right-looking blocked LU (LAPACK ``getrf``) on the kernel backends, in place.

    Per block of ``nb`` columns at ``o``: the panel ``[o, M) x [o, o+nb)`` (``lu_panel_regs`` or
    ``lu_panel``, one threadgroup per matrix, when it has at most ``TUNING.panel_single_rows``
    rows; taller: ``lu_panel_tall``, one threadgroup per matrix, one dispatch, with
    ``TUNING.panel_tall = "one"`` (selectable), else (the default) several threadgroups per matrix:
    ``lu_panel_look``, ``k`` columns per dispatch, where its active rows fit, else ``lu_panel_step``, one dispatch per
    column), its interchanges
    on the columns left and right of the panel (one ``lu_laswp_block``: LAPACK's two ``laswp``
    calls as one gather of the rows they move), ``U12 <- L11^{-1} A12`` (the triangular family's
    ``trsm_small``, in place), ``A22 <- A22 - L21 U12`` (one GEMM).

    ``outer > nb`` (``TUNING.panel_outer``): blocks of ``outer`` columns, each factored as above
    with the interchanges and updates kept inside its columns, then its interchanges on the other
    columns and ONE trailing update of rank ``outer`` (LAPACK's ``getrf`` over a blocked panel):
    the trailing matrix is read and written once per ``outer`` columns instead of once per ``nb``.
    """
    B, M, N = LU.shape
    K = min(M, N)
    NB = outer if outer > nb else nb
    tall = M > TUNING.panel_single_rows and TUNING.panel_tall == "look"
    scratch = kern.panel_scratch(LU, nb) if tall else None
    bufs = kern.look_buffers(LU, nb) if tall and kern.look_cap() > 1 else None
    for O in range(0, K, NB):
        W = min(NB, N - O)
        KW = min(M - O, W)
        for o in range(O, O + KW, nb):
            w = min(nb, O + W - o)
            if M - o <= TUNING.panel_single_rows:
                kern.panel(LU, piv, info, o, w)
            elif not tall:  # TUNING.panel_tall == "one": the tall panel in one dispatch
                kern.panel_tall(LU, piv, info, o, w)
            elif bufs is None or not kern.panel_look(LU, piv, info, o, w, bufs):
                kern.panel_steps(LU, piv, info, o, w, scratch)
            kl = min(M - o, w)
            fused = TUNING.swap_trsm and kl <= SWAP_TRSM_MAX and o + w < O + W
            if NB > nb:  # the rest of the outer block's columns
                kern.swap_around(LU, piv, o, o + kl, w, O, O + W, trsm=fused)
            if o + w < O + W:
                _block_update(LU, o, kl, o + w, O + W, gemm, solved=fused)
        fused = TUNING.swap_trsm and KW <= SWAP_TRSM_MAX and O + W < N
        kern.swap_around(LU, piv, O, O + KW, W, trsm=fused)  # the columns left and right of the outer block
        if O + W < N:
            _block_update(LU, O, KW, O + W, N, gemm, solved=fused)


def _block_update(LU, o: int, kl: int, c0: int, c1: int, gemm: str, solved: bool = False) -> None:
    """Columns ``[c0, c1)`` after the panel at ``o`` with ``kl`` pivots: ``U12 <- L11^{-1} A12``
    (unless ``solved``: the interchanges' dispatch did it) and ``A22 <- A22 - L21 U12`` (kernel
    backends: one ``trsm_small`` dispatch, one GEMM)."""
    A12 = LU[:, o:o + kl, c0:c1]
    if not solved:
        # in place: trsm_small reads a thread's whole column of B before it writes that column of X
        # (and columns are never shared), so X may be B (kl <= 64: one dispatch, no copy)
        trsm_small_metal(LU[:, o:o + kl, o:o + kl], A12, A12, False, True)
        DISPATCHES["trsm"] += 1
    if LU.shape[-2] > o + kl:
        _gemm_sub(LU[:, o + kl:, c0:c1], LU[:, o + kl:, o:o + kl], A12, gemm)
        DISPATCHES["gemm"] += 1


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
    """Recursive LU (``getrf2``) for the torch backend, in place: each sub-problem returns its row
    permutation (of rows ``[o, M)``), composed from the leaves' by one gather per node, so
    interchanges are applied by one gather per block and pivots are turned into permutations only
    at the leaves (``nb`` wide: a few vectorised ops) instead of at every level."""
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
        return _torch.lu_factor_ex(A)
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
            _getrf_blocked(LU, piv, info, TUNING.panel_nb, kern, TUNING.gemm.get(dev, "4m"), TUNING.panel_outer)
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
        return _torch.inv_ex(A)
    LU, piv, info = _getrf(A)
    n = A.shape[-1]
    # the identity as a column-major view (Iᵀ = I): LAPACK/cuSOLVER getrs takes it without a copy
    eye = _eye(n, A).expand_as(A).mT
    return _lu_solve_left(LU, piv, eye, "N"), info


def _small_solve_fused(A: torch.Tensor, B: torch.Tensor):
    """``A X = B`` for ``n <= 32``, ``k <= 8`` in one ``lu_small_solve`` dispatch (kernel backends), or None.

    Same elimination (pivots, ``info``, ``sfmin`` rule) as ``lu_small`` on the rows of ``[A | B]``,
    then back substitution, all in registers (RANSAC's 2048 x 9x9: one dispatch instead of factor
    + interchanges + two triangular solves)."""
    if not _on_kernels(A):
        return None
    n, k = A.shape[-1], B.shape[-1]
    batch = E.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    if not (0 < n <= TUNING.small_max and 0 < k <= _SOLVE_RHS) or A.shape[:-2] != batch or math.prod(batch) == 0:
        return None
    nb = math.prod(batch)
    A3 = E.resolved(A).reshape(nb, n, n)
    B3 = E.resolved(B.expand(*batch, n, k)).reshape(nb, n, k)
    X = torch.empty_like(B3)
    info = torch.empty(nb, dtype=torch.int32, device=A.device)  # the kernel writes every entry
    _MetalKernels(A.device, A.dtype).small_solve(A3, B3, X, info)
    return X.reshape(*batch, n, k), info.reshape(batch)


def _solve_impl(A: torch.Tensor, B: torch.Tensor, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    fused = _small_solve_fused(A, B) if left else None
    if fused is not None:
        return fused
    if _direct_torch(A):  # the device's own getrf + getrs in one call: never slower than torch's
        X, info = _torch.solve_ex(A, B, left)
        return X.contiguous(), info
    LU, piv, info = _getrf(A)
    return _lu_solve_impl(LU, piv, B, left, False).contiguous(), info


