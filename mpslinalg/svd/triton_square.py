"""CUDA (Triton) SVD of batches of square matrices of even order up to 64 in seven launches: the route of
:func:`mpslinalg.svd.cuda.whole_kernel` for the orders the one-kernel SVDs do not serve
(complex64 4096 x 64x64 is issue 12's target).

The algorithm is :mod:`mpslinalg.svd`'s (steps 1-5), its torch-op passes fused:

1. :func:`_prep_kernel`: the power-of-two scaling (``max |a_ij|`` into ``[1/2, 1)``; a non-finite
   matrix zeroed), the row sort (max modulus) and column sort (2-norm, scaled by the column's largest
   part: no square under- or overflows), both stable descending, written as the permuted matrix and
   the permutations (torch ops: ~20 launches and ~8 passes over the batch);
2. the Householder QR (:data:`QR_KERNEL`), writing ``Q``, and ``X = Rᴴ`` (``triu`` and a transposed copy:
   :data:`SMALL_QR_WRITES_X`);
3. :func:`mpslinalg.svd.triton_jacobi.jacobi` on ``X`` with ``V = Q`` (so ``V`` ends as ``U``'s columns);
4. :func:`mpslinalg.svd.triton_complete.finish` with the row permutation: ``S``, ``info``,
   ``V_A`` and ``U_A`` (rows put back, NaN for a non-finite input) in one launch.

5. :func:`mpslinalg.svd.triton_complete.complete_inplace`: ``V``'s zero-σ columns completed
   (the programs of matrices without one return at once).
Imported lazily on CUDA (and under ``TRITON_INTERPRET=1`` in the tests).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..kernels.triton_prims import cload as _cload
from ..kernels.triton_prims import cstore as _cstore
from ..qr import geqrf_square, geqrf_square_fits, square_qr_into
from .kernels import thresholds
from .triton_rot import UNIFORM, _pow2i

__all__ = ["COMPLETES_V", "ENABLED", "QR_KERNEL", "SMALL_QR_WRITES_X", "fits", "prep", "svd_tall"]

#: Whether :func:`mpslinalg.svd.cuda.whole_kernel` routes square batches here.
ENABLED = True
#: The preconditioner's QR: ``"small"`` (:func:`mpslinalg.qr.square_qr_into`, the QR family's
#: unblocked kernel in registers; H200 round 1 at 1024 x c64 64x64: Q and R 1.90 ms, R only 1.15) or
#: ``"blocked"`` (:func:`mpslinalg.qr.geqrf_square`: 2.72 / 2.05 at 8 warps, 19.9 / 10.7 at 4:
#: its ``tl.dot`` products of inner size 64 spill, 8.7 KB of stack a thread at 4 warps).
QR_KERNEL = "small"
#: With ``"small"``: the kernel stores ``X = Rᴴ`` itself (``WANT_X``). H200 round 2, c64 4096 x 64x64: the
#: kernel took 8.88 ms with it against 7.38 without (its transposed store from a tile at 255 registers),
#: while ``triu`` + a transposed copy cost ~0.2 ms: off.
SMALL_QR_WRITES_X = False
#: ``V``'s zero-σ columns are completed here (:func:`mpslinalg.svd.triton_complete.complete_inplace`).
COMPLETES_V = True


def fits(m: int, n: int, dtype: torch.dtype) -> bool:
    """Square, even order ``<= 64`` (the Jacobi kernel's and the blocked QR's limits), float32/complex64."""
    return m == n and n % 2 == 0 and geqrf_square_fits(n) and dtype in (torch.float32, torch.complex64)


@triton.jit
def _exponent(x):
    """``floor(log2 x)`` of positive normal float32 ``x`` (int32), from its bits."""
    return ((x.to(tl.int32, bitcast=True) >> 23) & 255) - 127


@triton.jit
def _prep_kernel(A, W, RPERM, CPERM, EXP, FIN, n, COMPLEX: tl.constexpr, NP: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    CW: tl.constexpr = 2 if COMPLEX else 1
    rows = tl.arange(0, NP)
    cols = tl.arange(0, NP)
    inside = (rows[:, None] < n) & (cols[None, :] < n)
    off = (rows[:, None] * n + cols[None, :]) * CW
    ar, ai = _cload(A + b * n * n * CW, off, inside, COMPLEX)
    # each part tested (tl.maximum drops a NaN operand); NaN compares false
    ok = (tl.abs(ar) <= 3.4028234663852886e38) & (tl.abs(ai) <= 3.4028234663852886e38)
    fin = tl.min(tl.min(ok.to(tl.int32), axis=1), axis=0) != 0
    big_part = tl.maximum(tl.abs(ar), tl.abs(ai))
    # |a_ij| = mx sqrt(1 + (mn/mx)^2): no square under- or overflows (row keys, the scale exponent)
    mn = tl.minimum(tl.abs(ar), tl.abs(ai))
    q = mn / tl.where(big_part > 0.0, big_part, 1.0)
    mod = tl.where(fin, big_part * tl.sqrt(1.0 + q * q), 0.0)
    amax = tl.max(tl.max(mod, axis=1), axis=0)
    # e: amax = f 2^e, f in [1/2, 1) (frexp); amax may be subnormal: read its exponent after 2^64
    usable = fin & (amax > 0.0)
    tiny = amax < 1.1754943508222875e-38
    e = _exponent(tl.where(tiny, amax * 18446744073709551616.0, tl.where(usable, amax, 1.0))) + 1
    e = tl.where(usable, tl.where(tiny, e - 64, e), 0)
    # 2^-e as one factor where it is a normal float (one rounding, as torch's A * 2^-e), else two
    h = tl.where((e > 126) | (e < -127), -e // 2, -e)
    s1 = _pow2i(h)
    s2 = _pow2i(-e - h)
    ar = tl.where(fin, ar * s1 * s2, 0.0)
    ai = tl.where(fin, ai * s1 * s2, 0.0)
    # row keys: max modulus (of A itself: the order is scale-invariant); column keys: 2-norms of the
    # scaled columns, each scaled again by 2^-k, 2^k <= the column's largest part
    rk = tl.where(rows < n, tl.max(mod, axis=1), -1.0)
    cbig = tl.max(tl.maximum(tl.abs(ar), tl.abs(ai)), axis=0)
    k = _exponent(cbig)  # zero or subnormal column: k = -127, 2^127 scales (exact)
    sc = _pow2i(tl.minimum(-k, 127))
    yr = ar * sc[None, :]
    yi = ai * sc[None, :]
    ck = tl.where(cols < n, tl.sqrt(tl.sum(yr * yr + yi * yi, axis=0)) / sc, -1.0)
    # stable descending ranks
    before = rows[:, None] < cols[None, :]
    rrank = tl.sum(((rk[:, None] > rk[None, :]) | ((rk[:, None] == rk[None, :]) & before)).to(tl.int32), axis=0)
    crank = tl.sum(((ck[:, None] > ck[None, :]) | ((ck[:, None] == ck[None, :]) & before)).to(tl.int32), axis=0)
    dst = (b * n * n + rrank[:, None] * n + crank[None, :]) * CW  # W[rank of row i, rank of column j]
    _cstore(W, dst, ar, ai, inside, COMPLEX)
    tl.store(RPERM + b * n + rrank, cols.to(tl.int64), mask=cols < n)  # rrank, crank: indexed by cols
    tl.store(CPERM + b * n + crank, cols.to(tl.int64), mask=cols < n)
    tl.store(EXP + b, e)
    tl.store(FIN + b, fin.to(tl.int32))


def prep(A: torch.Tensor):
    """Steps 1-2 of :mod:`mpslinalg.svd` on the square batch ``A [B, n, n]`` (not modified).

    Returns
    -------
    (W, rperm, cperm, e, finite)
        ``W = Pr (A 2^-e) Pc`` (zero for a non-finite matrix), the stable descending row order by
        max modulus and column order by 2-norm (``[B, n]`` int64: ``W[i, j] = A[rperm[i], cperm[j]]
        2^-e``), the exponents ``e [B]`` int32 and ``finite [B]`` bool.
    """
    Bn, n, _ = A.shape
    A = A.resolve_conj().resolve_neg().contiguous()  # the kernel reads memory: conj/neg bits materialised
    W = torch.empty_like(A)
    rperm = torch.empty(Bn, n, dtype=torch.int64, device=A.device)
    cperm = torch.empty_like(rperm)
    e = torch.empty(Bn, dtype=torch.int32, device=A.device)
    fin = torch.empty(Bn, dtype=torch.int32, device=A.device)
    if Bn > 0:
        cplx = A.is_complex()
        view = torch.view_as_real if cplx else (lambda t: t)
        np_ = max(2, 1 << (n - 1).bit_length())
        tile = np_ * np_ * (2 if cplx else 1)
        warps = 8 if tile >= 8192 else (4 if tile >= 2048 else (2 if tile >= 512 else 1))
        _prep_kernel[(Bn,)](view(A), view(W), rperm, cperm, e, fin, n, COMPLEX=cplx, NP=np_, num_warps=warps,
                            **UNIFORM)
    return W, rperm, cperm, e, fin != 0


def svd_tall(A: torch.Tensor, full: bool, compute_uv: bool, sweeps: int):
    """SVD of the square batch ``A [B, n, n]`` (:func:`fits`; contiguous, not modified) in seven launches.

    Parameters
    ----------
    A : torch.Tensor
        ``[B, n, n]`` float32/complex64.
    full : bool
        Unused: square, so full and reduced factors coincide.
    compute_uv : bool
        Whether ``U`` and ``V`` are computed.
    sweeps : int
        Sweep bound of the Jacobi kernel.

    Returns
    -------
    U, S, V, info : torch.Tensor
        ``V``, not ``Vh`` (zero-σ columns completed); ``U``/``V`` None without
        ``compute_uv``; NaN outputs and ``info = 1`` for a non-finite matrix, ``info = 2`` not converged.
    """
    from . import triton_complete, triton_jacobi

    Bn, n, _ = A.shape
    W, rperm, cperm, e, finite = prep(A)
    tau = W.new_empty(Bn, n)
    Q = torch.empty_like(W) if compute_uv else None
    X = torch.empty_like(W)
    if QR_KERNEL == "blocked":
        geqrf_square(W, tau, Q, X)
    elif SMALL_QR_WRITES_X:
        square_qr_into(W, tau, Q, X)
    else:
        square_qr_into(W, tau, Q, None)
        X.copy_(W.triu().mH)  # two launches (~0.2 ms), cheaper than the kernel's own transposed store
    X, V, rotated = triton_jacobi.jacobi(X, Q, sweeps, *thresholds(n, torch.float32))
    _, S_out, info, V_A, U_A = triton_complete.finish(X, V, cperm, e, finite, rotated, rperm=rperm)
    if compute_uv:
        triton_complete.complete_inplace(V_A, S_out)
    return U_A, S_out, V_A, info
