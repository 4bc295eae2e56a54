"""``lstsq`` with ``torch.linalg``'s signature and every LAPACK driver on every device (issue 12).

Drivers (all of them on CPU, CUDA and mps; torch offers only ``'gels'`` on GPUs)
------------------------------------------------------------------------------------
On the CPU torch backend ``'gels'``, ``'gelsd'`` and ``'gelss'`` are LAPACK's own
(``torch.linalg.lstsq``: the same algorithms and outputs, faster on small problems: docs/ops/svd.md),
with this module's rules for non-finite input and scaling; ``'gels'`` of a rank-deficient matrix,
where torch raises, takes the version below. ``'gelsy'`` is the version below, on the CPU run in C
(:func:`mpslinalg.svd.c.gelsy`, the same steps with a C compiler, except that the column
norms are downdated as LAPACK's ``xlaqp2`` and a full-rank system is solved by ``R⁻¹ c`` directly;
it is checked against the version below), with one shortcut: a tall matrix (``m·n >= 4096`` or
``m·n·k >= 16384``; below, the C QR is as fast) whose *unpivoted*
LAPACK QR ``A = QR`` proves rank ``n`` (``32·rcond·‖R‖_F·‖R⁻¹‖_F < 1``, ``rcond >= eps·m``:
``_QR_ROUTE_MARGIN`` derives it) is solved by ``xgels``'s calls (``geqrf``, ``ormqr``/``unmqr``,
``trsm`` of the LAPACK linked into torch: ``torch.linalg.lstsq(driver='gels')``'s bits), rank
``n``; the others take the pivoted QR. Each matrix decides on its own entries (a routed result
is the same at every call and in any batch; like torch.linalg's, its last bits may change with
the thread count, MKL's own threading). Not MKL's
``xgelsy`` through ``torch.linalg.lstsq``: torch passes it an uninitialised pivot array and reuses
it along the batch (pytorch#92537, #187411), so its columns are mostly "fixed" (no pivoting: that is
why it is fast), its bits change from call to call and with the batch neighbours, and a zero
leading column gives rank 0 (eye(5) with a zero first row: rank 0 or 4 at random). The versions
below run on the other backends and devices.

``'gels'``  (full rank assumed; default on CUDA and mps, as torch)
    ``m >= n``: ``A = QR`` (the QR family), ``X = R⁻¹ Qᴴ B`` (``solve_triangular``).
    ``m < n``: the minimum-norm solution from ``Aᴴ = QR``: ``X = Q R⁻ᴴ B`` (as LAPACK ``xgels``).
    An exactly rank-deficient ``A`` gives a non-finite solution: torch raises there, which needs a
    host synchronisation; we never synchronise (use a rank-revealing driver).
``'gelsy'`` (default on CPU, as torch)
    Complete orthogonal factorisation, as LAPACK ``xgelsy``: Householder QR with column pivoting
    ``A P = Q R`` (greedy largest remaining column norm, norms recomputed each step, first index on
    ties, as ``xgeqp3``), numerical rank ``r``, then the minimum-norm solution of
    ``R[:r] y = (Qᴴ B)[:r]`` through the QR of ``R[:r]ᴴ`` and ``X = P y``.
    **Rank decision**: ``r`` = the number of leading pivots with ``|r_kk| > rcond·|r_11|``. LAPACK
    instead estimates ``κ(R[:k, :k])`` incrementally (``xlaic1``) and stops when it exceeds
    ``1/rcond``. The pivoted diagonal is non-increasing and ``κ(R[:k, :k]) >= |r_11|/|r_kk|``, so
    our rank is never below LAPACK's; the two agree whenever the pivoted diagonal reveals the gap in
    the singular values, which greedy pivoting does except for Kahan-type matrices (where it also
    misleads LAPACK's estimate of the leading block less often). Written in torch ops (one short
    loop over the ``min(m, n)`` columns), so it runs unchanged on every device.
``'gelsd'``, ``'gelss'``
    The SVD (the SVD family): ``X = V Σ⁺ Uᴴ B``, dropping ``σ <= rcond·σ₁`` (``gelss``: also
    ``σ <= tiny``, and ``eps`` for ``rcond < 0``; ``gelsd``: ``u`` for ``rcond <= 0`` or ``>= 1``,
    as LAPACK). The same minimum-norm solution for both; ``singular_values`` are returned.

``rank = -1`` marks a matrix the driver could not handle: non-finite entries (``'gelsy'``, and
``'gelsd'``/``'gelss'``), or an SVD that did not converge within its sweep bound — the per-matrix
``info`` of issue 12, without a host synchronisation (torch raises or returns LAPACK's garbage).

Outputs follow torch's rules per driver: ``rank`` for every driver but ``'gels'``,
``singular_values`` for ``'gelsd'``/``'gelss'``, ``residuals`` (squared column norms of
``B − A X``) when ``m > n`` and the driver is not ``'gelsy'``; other fields are empty tensors.
**One difference**: torch computes ``residuals`` of ``'gelsd'``/``'gelss'`` only when *every*
matrix has rank ``n`` (a data-dependent output shape, read on the host); we always return them
(for a rank-deficient matrix: the residual of the minimum-norm solution), so nothing synchronises.
Rows of ``'gelsy'`` and ``'gels'`` matrices are scaled by a power of two first (exact), so inputs
near the overflow or underflow threshold work.

Gradients are PyTorch's ``linalg_lstsq_backward`` / ``linalg_lstsq_jvp`` (through ``pinv(A)``,
whatever the driver): ``residuals`` are computed from the solution with torch ops, so they are
differentiable too; ``rank`` and ``singular_values`` are not (as torch).
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import sys

import torch

from ..kernels import backend_for
from ..oplayer import checks as E
from ..oplayer import defop, functorch_active
from ..triangular import solve_triangular
from . import c as svd_c
from .algorithm import lapack_smlnum, ldexp, pow2_exponent, real_divide
from .spectral import _pinv, pinv_backward, pinv_jvp, qr_reduced, svd_parts, tolerances

__all__ = ["lstsq"]

DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


# --------------------------------------------------------------------------------------------------
# Drivers
# --------------------------------------------------------------------------------------------------


def _pow2_exponent(A: torch.Tensor) -> torch.Tensor:
    """Per matrix (kept dims), the exponent ``e`` with ``max|A·2^-e|`` in ``[0.5, 1)`` (0 for
    zero/non-finite matrices): scaling by ``2^-e`` is exact (the family's :func:`ldexp`, subnormal
    matrices included), and squares of scaled column norms cannot overflow."""
    if A.numel() == 0:
        return torch.zeros(A.shape[:-2] + (1, 1), dtype=torch.int32, device=A.device)
    return pow2_exponent(A)[0][..., None, None]


def _gels(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    m, n = A.shape[-2:]
    if m >= n:
        Q, R = qr_reduced(A)
        return solve_triangular(R, Q.mH @ B, upper=True)
    Q, R = qr_reduced(A.mH)
    return Q @ solve_triangular(R.mH, B, upper=False)


def _gelss_floor(A: torch.Tensor) -> torch.Tensor:
    """``xgelss``'s floor ``sfmin`` on the singular values, as LAPACK applies it: to those of ``A``
    scaled into ``[SMLNUM, BIGNUM]`` (``SMLNUM = sfmin/eps``) when its largest entry is outside, so
    the floor of ``A`` itself is ``sfmin·anrm/SMLNUM`` (or ``/BIGNUM``): a subnormal matrix keeps
    its singular values, as with LAPACK."""
    fi = torch.finfo(A.real.dtype if A.is_complex() else A.dtype)
    smlnum = fi.tiny / fi.eps
    anrm = A.abs().amax((-2, -1))
    scale = torch.where((anrm > 0) & (anrm < smlnum), anrm / smlnum, torch.where(anrm > 1 / smlnum, anrm * smlnum, 1.0))
    return fi.tiny * scale


def _svd_solve(A: torch.Tensor, B: torch.Tensor, rcond: float, driver: str):
    U, S, Vh, info = svd_parts(A)
    eps = torch.finfo(S.dtype).eps
    if driver == "gelss":  # xgelss: thr = max(rcond·σ₁, sfmin); rcond < 0 means eps
        thr = torch.maximum((eps if rcond < 0 else rcond) * S[..., :1], _gelss_floor(A).unsqueeze(-1))
    else:  # xlalsd: rcond <= 0 or >= 1 means the unit roundoff
        thr = (eps / 2 if rcond <= 0 or rcond >= 1 else rcond) * S[..., :1]
    keep = S > thr
    # (Uᴴ B)/σ, not (1/σ)·(Uᴴ B): 1/σ of a subnormal σ overflows where the solution does not
    C = real_divide(U.mH @ B, torch.where(keep, S, 1.0).unsqueeze(-1))
    X = Vh.mH @ torch.where(keep.unsqueeze(-1), C, 0.0)
    return X, torch.where(info > 0, -1, keep.sum(-1)), S


def _abs2(x: torch.Tensor) -> torch.Tensor:
    return x.real.square() + x.imag.square() if x.is_complex() else x.square()


def _qrcp(A: torch.Tensor, B: torch.Tensor):
    """Householder QR with column pivoting of ``A`` (``xgeqp3``), with ``Qᴴ`` applied to ``B``.

    ``A (b, m, n)``, ``B (b, m, k)``. Returns ``R (b, K, n)`` upper trapezoidal,
    ``C = (Qᴴ B)[:K] (b, K, k)`` and the permutation ``perm (b, n)`` (column ``i`` of ``A P`` is
    column ``perm[i]`` of ``A``), ``K = min(m, n)``. ``R`` is written in place into a copy of
    ``A`` (batched like ``A``); ``C`` and ``perm`` functionally (under ``torch.func.vmap`` they may
    be batched differently). Per step: one norm pass over the trailing block, a two-column swap and
    one rank-1 update of the trailing block and of ``C``.
    """
    m, n = A.shape[-2:]
    K = min(m, n)
    R, C = A.clone(), B
    cols = torch.arange(n, device=A.device)
    perm = cols.expand(A.shape[:-2] + (n,))
    for j in range(K):
        # pivot: largest norm of the remaining columns (recomputed, no downdating), first on ties.
        # Plain sums of squares (vector_norm over a strided dimension is 10x slower on the CPU):
        # A is scaled to max|a| < 1, so nothing overflows, and what underflows is below u·‖A‖
        rest = R[..., j:, j:]
        p = _abs2(rest).sum(-2).argmax(-1, keepdim=True) + j
        at_p = p.unsqueeze(-2).expand(R.shape[:-1] + (1,))
        col_p = R.gather(-1, at_p)
        R.scatter_(-1, at_p, R[..., j:j + 1].clone())
        R[..., j:j + 1] = col_p
        perm = perm.gather(-1, torch.where(cols == j, p, torch.where(cols == p, j, cols)))
        # xlarfg: H = I - tau v vᴴ with Hᴴ x = beta e1, v[0] = 1
        x = R[..., j:, j]
        alpha = x[..., 0]
        tail2 = _abs2(x[..., 1:]).sum(-1)
        xnorm = tail2.sqrt()
        beta = (_abs2(alpha) + tail2).sqrt()  # max|a| < 1 after scaling: squares cannot overflow
        beta = torch.where(alpha.real >= 0, -beta, beta)
        trivial = xnorm == 0
        if x.is_complex():
            trivial = trivial & (alpha.imag == 0)
        tau = torch.where(trivial, 0.0, (beta - alpha) / torch.where(trivial, 1.0, beta))
        scale = torch.where(trivial, 0.0, 1.0 / torch.where(trivial, 1.0, alpha - beta))
        v = torch.cat([torch.ones_like(x[..., :1]), x[..., 1:] * scale.unsqueeze(-1)], -1).unsqueeze(-1)
        ctv = tau.conj()[:, None, None] * v  # Hᴴ Y = Y - conj(tau) v (vᴴ Y)
        # vᴴ Y and the rank-1 update as broadcast products: for these tiny per-matrix shapes
        # they beat batched GEMM calls (CPU: 3x at 1024x32x32)
        trail = R[..., j:, j + 1:]
        trail.sub_(ctv * (v.conj() * trail).sum(-2, keepdim=True))
        Cj = C[..., j:, :]
        C = torch.cat([C[..., :j, :], Cj - ctv * (v.conj() * Cj).sum(-2, keepdim=True)], -2)
        R[..., j, j] = torch.where(trivial, alpha, beta.to(R.dtype))
    return R[..., :K, :].triu(), C[..., :K, :], perm


def _gelsy(A: torch.Tensor, B: torch.Tensor, rcond: float):
    batch, (m, n), k = A.shape[:-2], A.shape[-2:], B.shape[-1]
    b = math.prod(batch)
    R, C, perm = _qrcp(A.reshape(b, m, n), B.reshape(b, m, k))
    d = torch.diagonal(R, dim1=-2, dim2=-1).abs()
    # leading pivots with |r_kk| > rcond·|r_11| (the diagonal is non-increasing; cumprod makes the
    # first failure final even where rounding breaks that order)
    keep = ((d > rcond * d[..., :1]) & (d[..., :1] > 0)).to(torch.int64).cumprod(-1).bool()
    T = R * keep.unsqueeze(-1)
    C = C * keep.unsqueeze(-1)
    # minimum-norm solution of T y = C: T = R2ᴴ Q2ᴴ. Rows of T beyond the rank are zero, so the
    # matching rows and columns of R2 are exactly zero: a unit diagonal there keeps the solve finite
    # and, with zero right-hand sides in those rows, leaves the solution unchanged.
    Q2, R2 = qr_reduced(T.mH)
    R2 = R2 + torch.diag_embed((~keep).to(R2.dtype))
    Y = Q2 @ solve_triangular(R2.mH, C, upper=False)
    inverse = torch.argsort(perm, dim=-1)
    X = Y.gather(-2, inverse.unsqueeze(-1).expand(Y.shape))
    rank = torch.where(torch.isfinite(A).all(-1).all(-1), keep.sum(-1).reshape(batch), -1)
    return X.reshape(batch + (n, k)), rank


#: The QR route's margin ``c`` (``'gelsy'`` on the CPU, ``m >= n``): LAPACK's unpivoted QR
#: ``A = QR`` serves a matrix when ``c·rcond·‖R‖_F·‖R⁻¹‖_F < 1`` (and ``rcond >= eps·max(m, n)``).
#: Why that proves rank ``n`` for the column-pivoted QR's rule ``|r_kk| > rcond·|r_11|``: the
#: computed ``R`` is exact for ``A + E₂`` and the pivoted one for ``A P + E₁``, with ``‖Eᵢ‖ <=
#: t·max(m, n)·u·‖A‖_F`` at LAPACK's test threshold ``t = 30``; every triangular ``T`` has
#: ``σ_min(T) <= |t_kk| <= σ_max(T)`` (its eigenvalues), so every pivot is at least
#: ``σ_n(A) − ‖E₁‖ >= 1/‖R⁻¹‖_F − ‖E₁‖ − ‖E₂‖`` and the first at most ``‖R‖_F + ‖E₁‖ + ‖E₂‖``.
#: The computed ``R⁻¹`` (``trsm``) is within ``n·u·κ_F <= 1/64`` of the exact one when the bound
#: holds (``n·u <= rcond/2``), so ``1/‖R⁻¹‖_F >= 31.5·rcond·‖R‖_F`` and the pivots pass when
#: ``2·30·max(m, n)·u·(1 + rcond) < 30.5·rcond``: true for ``rcond >= 2·max(m, n)·u``.
_QR_ROUTE_MARGIN = 32.0


def _gelsy_qr(A: torch.Tensor, B: torch.Tensor, rcond: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``'gelsy'`` of a CPU batch without the C kernel (no compiler), ``m >= n``: every matrix inside
    LAPACK's safe range that LAPACK's unpivoted QR proves to have rank ``n`` (``_QR_ROUTE_MARGIN``)
    is solved by ``xgels``'s calls (``geqrf``, ``ormqr``/``unmqr``, ``trsm``: the C path's QR route,
    here through torch's own LAPACK calls), the others (non-finite, out of range, rank unproved) by
    the scaled torch-op pivoted QR. The tests read CPU memory on the host (no device). The torch-op
    pivoted QR for every matrix ran at 0.03x ``torch.linalg.lstsq`` (512x128; docs/ops/overhead.md)."""
    batch, n = A.shape[:-2], A.shape[-1]
    lo = lapack_smlnum(A.dtype)  # as _lapack_lstsq
    amax_a, amax_b = A.abs().amax((-2, -1)), B.abs().amax((-2, -1))
    in_range = (amax_a >= lo) & (amax_a <= 1 / lo) & (amax_b <= 1 / lo)  # NaN: False
    QR, tau = torch.geqrf(A)
    R = QR[..., :n, :].triu()
    Rinv = torch.linalg.solve_triangular(R, torch.eye(n, dtype=A.dtype).expand_as(R), upper=True)
    norms = torch.linalg.matrix_norm(R) * torch.linalg.matrix_norm(Rinv)
    proof = in_range & (_QR_ROUTE_MARGIN * rcond * norms < 1)  # NaN (non-finite, singular R): False
    X = torch.linalg.solve_triangular(R, torch.ormqr(QR, tau, B, left=True, transpose=True)[..., :n, :], upper=True)
    rank = torch.full(batch, n, dtype=torch.int64)
    if not bool(proof.all()):
        rest = ~proof
        Ar, Br = A[rest], B[rest]
        ea, eb = _pow2_exponent(Ar), _pow2_exponent(Br)
        Xr, rank[rest] = _gelsy(ldexp(Ar, -ea), ldexp(Br, -eb), rcond)
        X[rest] = ldexp(Xr, eb - ea)
    return X, rank


class _LapackQR(ctypes.Structure):
    _fields_ = [("geqrf", ctypes.c_void_p), ("ormqr", ctypes.c_void_p), ("trsm", ctypes.c_void_p)]


@functools.cache
def _lapack_qr(dtype: torch.dtype) -> _LapackQR | None:
    """LAPACK's ``xGEQRF``, ``xORMQR``/``xUNMQR`` and ``xTRSM`` of ``dtype`` as linked into torch (the
    routines ``torch.linalg.lstsq(driver='gels')`` runs), found in ``libtorch_cpu``; None where that
    library does not export them (then ``'gelsy'`` runs the pivoted QR for every matrix)."""
    ext = {"linux": ".so", "darwin": ".dylib"}.get(sys.platform)
    prefix = {torch.float32: "s", torch.float64: "d", torch.complex64: "c", torch.complex128: "z"}.get(dtype)
    if ext is None or prefix is None:
        return None
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu" + ext))
        names = ("geqrf_", "unmqr_" if dtype.is_complex else "ormqr_", "trsm_")
        return _LapackQR(*(ctypes.cast(getattr(lib, prefix + name), ctypes.c_void_p) for name in names))
    except (OSError, AttributeError):
        return None


def _gelsy_c(A: torch.Tensor, B: torch.Tensor, rcond: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``'gelsy'`` of a CPU batch in C: tall matrices that LAPACK's unpivoted QR proves to have
    rank ``n`` take that QR (``xgels``'s calls, see ``_QR_ROUTE_MARGIN``), the others the pivoted QR.
    Each matrix decides on its own entries: its result does not depend on its batch neighbours."""
    m, n = A.shape[-2:]
    # small problems: the pivoted C QR is as fast or faster (LAPACK's per-call cost; float32,
    # per matrix: 32x32 with 4 RHS 18.8 against 22.0 us, 16 RHS 32.2 against 26.7; 128x32 with 16
    # RHS 85 against 55; docs/evidence/svd.md)
    big = m * n >= 4096 or m * n * B.shape[-1] >= 16384
    qr = _lapack_qr(A.dtype) if big and m >= n and rcond >= torch.finfo(A.dtype).eps * m else None
    return svd_c.gelsy(A, B, rcond, None if qr is None else ctypes.addressof(qr), _QR_ROUTE_MARGIN)


def _cpu_route(A: torch.Tensor) -> bool:
    """The CPU torch backend (outside ``torch.func`` transforms): LAPACK's drivers, and ``'gelsy'``
    in C."""
    return A.device.type == "cpu" and backend_for(A.device) == "torch" and not functorch_active()


def _lapack_lstsq(A: torch.Tensor, B: torch.Tensor, rcond: float, driver: str):
    """LAPACK's own driver through ``torch.linalg.lstsq`` (CPU), with the family's rules: a matrix
    with a non-finite entry gets ``rank = -1`` and NaN outputs, a non-finite column of ``B`` a NaN
    solution column (LAPACK refuses such input: they are replaced by zeros for the call), and
    matrices outside LAPACK's safe range are scaled by powers of two first (exact: the same digits
    at 2^±100, where LAPACK's own scaling would round). The range test reads CPU memory on the
    host: no synchronisation of any device. ``None`` when ``'gels'`` finds ``A`` rank-deficient
    (torch raises there; the family's ``'gels'`` returns the non-finite solution instead)."""
    amax_a, amax_b = A.abs().amax((-2, -1)), B.abs().amax((-2, -1))
    lo = lapack_smlnum(A.dtype)  # BIGNUM = 1/SMLNUM
    try:
        if bool(((amax_a >= lo) & (amax_a <= 1 / lo) & (amax_b >= lo) & (amax_b <= 1 / lo)).all()):
            X, _, rank, sv = torch.linalg.lstsq(A, B, rcond=rcond, driver=driver)  # the common case
            return X, rank, sv
        bad = ~torch.isfinite(amax_a)
        bad_col = ~torch.isfinite(B).all(-2)
        ea, eb = _pow2_exponent(A), _pow2_exponent(B)
        A0 = torch.where(bad[..., None, None], torch.zeros((), dtype=A.dtype), ldexp(A, -ea))
        B0 = torch.where(bad_col.unsqueeze(-2), torch.zeros((), dtype=B.dtype), ldexp(B, -eb))
        X, _, rank, sv = torch.linalg.lstsq(A0, B0, rcond=rcond, driver=driver)
    except torch.linalg.LinAlgError:
        return None
    X = torch.where(bad[..., None, None] | bad_col.unsqueeze(-2), float("nan"), ldexp(X, eb - ea))
    if driver != "gels":
        rank = torch.where(bad, -1, rank)
    if driver in ("gelsd", "gelss"):
        sv = torch.where(bad.unsqueeze(-1), float("nan"), ldexp(sv, ea.squeeze(-1)))
    return X, rank, sv


# --------------------------------------------------------------------------------------------------
# The op
# --------------------------------------------------------------------------------------------------


def _field_shapes(A: torch.Tensor, driver: str):
    batch, K = A.shape[:-2], min(A.shape[-2], A.shape[-1])
    rank = batch if driver != "gels" else (0,)
    sv = batch + (K,) if driver in ("gelsd", "gelss") else (0,)
    return rank, sv


def _real(dtype: torch.dtype) -> torch.dtype:
    return dtype.to_real() if dtype.is_complex else dtype


def _lstsq_impl(A: torch.Tensor, B: torch.Tensor, rcond: float, driver: str
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # the fake's layout (contiguous): LAPACK's solution is a column-major view, which a compiled
    # graph (inductor) would read with the fake's strides
    return tuple(t.contiguous() for t in _lstsq_solve(A, B, rcond, driver))


def _lstsq_solve(A: torch.Tensor, B: torch.Tensor, rcond: float, driver: str):
    m, n = A.shape[-2:]
    rank_shape, sv_shape = _field_shapes(A, driver)
    empty = torch.empty(0, dtype=torch.int64, device=A.device)
    if m == 0 or n == 0 or A.numel() == 0:
        X = A.new_zeros(A.shape[:-2] + (n, B.shape[-1]))
        return (X, A.new_zeros(rank_shape, dtype=torch.int64),
                A.new_zeros(sv_shape, dtype=_real(A.dtype)))
    # no right-hand side: torch's LAPACK call fails (an illegal-argument assert in torch 2.x)
    if driver != "gelsy" and _cpu_route(A) and B.shape[-1] > 0:
        lapack = _lapack_lstsq(A, B, rcond, driver)
        if lapack is not None:
            return lapack
    if driver in ("gelsd", "gelss"):
        return _svd_solve(A, B, rcond, driver)
    if driver == "gelsy" and _cpu_route(A) and svd_c.usable(A):  # the same algorithm in C, scaling too
        X, rank = _gelsy_c(A, B, rcond)
        return X, rank, A.new_zeros(sv_shape, dtype=_real(A.dtype))
    if (driver == "gelsy" and _cpu_route(A) and m >= n and B.shape[-1] > 0
            and rcond >= torch.finfo(A.dtype).eps * m and svd_c.unbuildable(A)):
        X, rank = _gelsy_qr(A, B, rcond)  # no C compiler: the C path's QR route, in torch's LAPACK calls
        return X, rank, A.new_zeros(sv_shape, dtype=_real(A.dtype))
    ea, eb = _pow2_exponent(A), _pow2_exponent(B)
    As, Bs = ldexp(A, -ea), ldexp(B, -eb)
    if driver == "gels":  # xgels: a zero matrix has the solution 0 (no division by its zero R)
        X, rank = torch.where(A.abs().amax((-2, -1), keepdim=True) == 0, 0.0, _gels(As, Bs)), empty
    else:
        X, rank = _gelsy(As, Bs, rcond)
    # (2^-ea A) X' = 2^-eb B  =>  X = 2^(eb - ea) X'
    return ldexp(X, eb - ea), rank, A.new_zeros(sv_shape, dtype=_real(A.dtype))


def _lstsq_shape(A, B, rcond, driver):  # the fields a driver does not compute: empty (torch's rule)
    return [((A.shape[-1], B.shape[-1]), A.dtype), (None if driver == "gels" else (), torch.int64),
            ((min(A.shape[-2:]),) if driver in ("gelsd", "gelss") else None, _real(A.dtype))]


def _lstsq_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])


def _default_pinv(A: torch.Tensor) -> torch.Tensor:
    # torch's lstsq derivatives use linalg_pinv(A) with default tolerances, whatever the driver
    return _pinv(A, *tolerances("linalg.lstsq", A, None, None))


def _lstsq_backward(ctx, gX, grank=None, gsv=None):
    A, B = ctx.saved_tensors
    if gX is None:
        return None, None, None, None
    P = _default_pinv(A)
    gA = pinv_backward(gX @ B.mH, P, A) if ctx.needs_input_grad[0] else None
    gB = P.mH @ gX if ctx.needs_input_grad[1] else None
    return gA, gB, None, None


def _lstsq_jvp(inputs, outputs, tangents):
    A, B = inputs[0], inputs[1]
    dA, dB = tangents[0], tangents[1]
    P = _default_pinv(A)
    dX = torch.zeros_like(outputs[0])
    if dA is not None:
        dX = dX + pinv_jvp(A, P, dA) @ B
    if dB is not None:
        dX = dX + P @ dB
    return dX, None, torch.zeros_like(outputs[2])


_lstsq = defop("lstsq", impl=_lstsq_impl, shape=_lstsq_shape, setup=_lstsq_setup,
               backward=_lstsq_backward, jvp=_lstsq_jvp, ranks=(2, 2))


def _rhs_layout(op: str, A: torch.Tensor, B: torch.Tensor) -> tuple[bool, torch.Tensor, torch.Size]:
    """``(vector, B as a matrix, B's batch shape)`` by torch.linalg.lstsq's rules exactly.

    ``B`` has ``A.ndim`` or ``A.ndim - 1`` dimensions. It is a (batch of) vector(s) when it has one
    dimension, or when its shape is ``A.shape[:-1]``; else a (batch of) matrix(-ces) ``(*, m, k)``.
    A matrix ``B`` with one dimension fewer than ``A`` is broadcast with ``A``'s batch as if its
    batch were ``B.shape[:-1]`` (torch's rule: ``lstsq(randn(1, 3, 3), randn(3, 3))`` is ``(3, 3, 3)``,
    every matrix of it the solution for ``B``)."""
    dim_diff = A.ndim - B.ndim
    if not 0 <= dim_diff <= 1:
        raise E.ShapeError(f"{op}: input.dim() must be greater or equal to other.dim() and (input.dim() - "
                           f"other.dim()) <= 1 (input {tuple(A.shape)}, other {tuple(B.shape)})")
    vector = B.ndim == 1 or (dim_diff == 1 and B.shape == A.shape[:-1])
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.shape[-2] != A.shape[-2]:
        raise E.ShapeError(f"{op}: input.size(-2) should match other.size({-1 if vector else -2}) "
                           f"(input {tuple(A.shape)}, other {tuple(B.shape)})")
    return vector, Bm, (B.shape[:-1] if dim_diff == 1 and not vector else Bm.shape[:-2])


def lstsq(A: torch.Tensor, B: torch.Tensor, rcond: float | None = None, *, driver: str | None = None):
    """Least-squares solution of ``A X = B``, like ``torch.linalg.lstsq`` (every driver everywhere).

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``; float32/complex64 on every device, float64/complex128 on CPU/CUDA.
    B : torch.Tensor
        ``(*, m, k)``, or ``(m,)`` or ``A.shape[:-1]`` (vectors); same dtype and device as ``A``;
        batch dimensions broadcast, exactly as ``torch.linalg.lstsq`` (a matrix ``B`` with one
        dimension fewer than ``A``: see :func:`_rhs_layout`).
    rcond : float, optional
        Rank cut-off relative to the largest singular value (``'gelsy'``: pivot); default
        ``eps·max(m, n)`` with ``eps`` of ``A``'s dtype. Ignored by ``'gels'``.
    driver : {'gels', 'gelsy', 'gelsd', 'gelss'}, optional
        Default ``'gelsy'`` on CPU, ``'gels'`` elsewhere (torch's defaults). See the module
        docstring for what each does and how ``'gelsy'`` decides the rank.

    Returns
    -------
    torch.return_types.linalg_lstsq
        ``solution (*, n, k)``; ``residuals (*, k)`` if ``m > n`` and the driver is not
        ``'gelsy'``, else empty; ``rank`` int64 ``(*)`` unless ``'gels'``; ``singular_values``
        ``(*, min(m, n))`` for ``'gelsd'``/``'gelss'``. No host synchronisation.

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> X, res, rank, sv = LA.lstsq(torch.randn(4, 6, 3), torch.randn(4, 6, 2), driver="gelsd")
    """
    op = "linalg.lstsq"
    # torch's names in the messages: A is "input", B is "other"
    E.check_matrix(op, "input", A)
    E.check_tensor(op, "other", B)
    if B.ndim < 1:
        raise E.ShapeError(f"{op}: other must have at least 1 dimension, got shape {tuple(B.shape)}")
    E.check_dtype(op, "other", B)
    E.check_same(op, ("input", "other"), A, B)
    vector, Bm, b_batch = _rhs_layout(op, A, B)
    if driver is None:
        driver = "gelsy" if A.is_cpu else "gels"  # is_cpu: a tenth of device.type's cost
    if driver not in DRIVERS:
        raise ValueError(f"{op}: parameter `driver` should be one of {DRIVERS}, got {driver!r}")
    if rcond is not None and (isinstance(rcond, bool) or not isinstance(rcond, (int, float))):
        raise TypeError(f"{op}: expected rcond to be a float, got {type(rcond).__name__}")
    m, n = A.shape[-2:]
    rc = torch.finfo(A.dtype).eps * max(m, n) if rcond is None else float(rcond)
    try:
        batch = E.broadcast_shapes(A.shape[:-2], b_batch)
    except RuntimeError:
        raise E.ShapeError(f"{op}: the batch dimensions of input {tuple(A.shape)} and other {tuple(B.shape)} "
                           f"do not broadcast ({tuple(A.shape[:-2])} and {tuple(b_batch)})") from None
    if (driver == "gelsy" and A.is_cpu and A.shape[:-2] == batch == Bm.shape[:-2] and A.numel() > 0
            and Bm.shape[-1] > 0 and _lstsq.direct(A, Bm) and backend_for(A.device) == "torch"
            and svd_c.usable(A)):
        # the CPU default from the front door, as the op's impl would run it (no op layer, no
        # expand: issue 13's host overhead)
        X, rank = _gelsy_c(A, Bm, rc)
        if A.is_complex():
            real = _real(A.dtype)
            residuals, sv = A.new_empty(0, dtype=real), A.new_empty(0, dtype=real)
        else:  # no dtype keyword to parse (~0.2 µs each)
            residuals, sv = A.new_empty(0), A.new_empty(0)
        return torch.return_types.linalg_lstsq((X.squeeze(-1) if vector else X, residuals, rank, sv))
    A_ = A.expand(batch + A.shape[-2:])
    B_ = Bm.expand(batch + Bm.shape[-2:])
    X, rank, sv = _lstsq(A_, B_, rc, driver)
    if m > n and driver != "gelsy":
        residuals = (B_ - A_ @ X).abs().pow(2).sum(-2)
    else:
        residuals = X.new_empty(0, dtype=_real(A.dtype))
    if vector:
        X = X.squeeze(-1)
    return torch.return_types.linalg_lstsq((X, residuals, rank, sv.detach()))
