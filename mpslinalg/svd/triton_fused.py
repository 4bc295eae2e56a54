"""The whole SVD of small float32 matrices in one Triton launch (CUDA; ``TRITON_INTERPRET=1`` tests).

:func:`svd_tall` runs :mod:`mpslinalg.svd`'s algorithm for ``m x n`` matrices, ``n <= m <= MAX_M``,
``n <= MAX_N``, with every matrix in the registers of one program (``MB`` matrices per program for
small orders): no intermediate tensor, one launch instead of the ~90 of the composed path
(power-of-two scaling, two sorts, QR, Jacobi, norms, sort, completion, ``Q Vj``, permutations).

Steps, per matrix (the tiles are ``[MB, MP, NP]``, powers of two, zero padded):

1. Power-of-two scaling of ``max |a_ij|`` into ``[1/2, 1)`` (exact); a non-finite entry zeroes the
   matrix, sets ``info = 1`` and makes every output NaN.
2. Rows sorted by decreasing max-modulus, columns by decreasing 2-norm (stable: ranks counted with
   the index as tie-break, moved by ``tl.gather``).
3. Householder QR (LAPACK ``xgeqr2``/``xlarfg`` conventions, ``tau = 0`` for a zero column), the
   reflectors kept in a tile for ``U``.
4. One-sided Jacobi on ``X = Rᵀ`` (padded to an even order ``npad``) with ``V = I``: the circle
   method's pairs of :mod:`mpslinalg.svd.triton_jacobi`, but the columns stay in place: in round
   ``r`` column ``c`` finds its partner arithmetically (its slot in the circle, the player opposite)
   and gathers it, so one ``tl.gather`` of ``X`` and one of ``V`` per round replace the
   split/join/permute of the slot-order kernel. Both columns of a pair compute the same ``(c, s)``
   from the same sums (:func:`mpslinalg.svd.triton_rot._rotation`, the same thresholds), so the
   rotation is :mod:`mpslinalg.svd`'s. A matrix stops after its first sweep without a significant
   rotation, at most ``sweeps`` sweeps (decided on the GPU), ``info = 2`` if it still rotated.
5. ``σ_j = ‖w_j‖`` (scaled by the column's largest entry: no underflow of the squares), sorted
   (stable, descending), scaled back by ``2^e``.
6. ``V_A = Pc W Σ⁻¹``; columns with ``σ_j <= √tiny·σ₁`` from the Householder QR of ``W Σ⁻¹``
   (:func:`mpslinalg.svd._complete`'s rule; the QR runs only in programs that have such a column).
7. ``U_A = Prᵀ Q [Vj 0; 0 I]`` (``full_matrices``: all ``m`` columns) by the reflectors applied
   from the last (LAPACK ``xorm2r``); rows and columns land at their permuted places in the stores.

float32 only (complex64 takes :mod:`mpslinalg.svd.triton_jacobi`'s kernels).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .kernels import thresholds
from .triton_jacobi import _alloc_svd_outputs
from .triton_rot import UNIFORM, _pow2i, _rotate_real, _rotation

__all__ = ["COMPLETES_V", "ENABLED", "MAX_M", "MAX_N", "fits", "launch_config", "svd_tall"]

#: Largest ``n`` (columns, ``n <= m``) and ``m`` served (registers: ~3 ``MP x NP`` tiles a matrix).
MAX_N = 32
MAX_M = 32
#: :func:`mpslinalg.svd.cuda.whole_kernel` dispatches here (False: the composed path, QR +
#: Jacobi kernel + torch ops). H200 round 2: right with the default VARIANT (tests/svd/
#: test_svd_triton_fused.py's cuda tests pass; 4096x32x32 svd_impl 1.36 ms vs torch.linalg 4.39).
ENABLED = True
#: :func:`svd_tall` returns ``V`` completed (no ``mpslinalg.svd._complete`` after it).
COMPLETES_V = True
#: ``(matrices per program, warps)`` by padded order ``NP`` (None entries: :func:`launch_config`'s
#: default). Benchmarks override it.
CONFIG: dict[int, tuple[int, int]] = {}
#: The Jacobi rounds (:func:`_sweeps`): "partner" (columns in place) or "slots" (columns moved).
JACOBI = "partner"
#: Code-shape switches, same results: "joint" a round's three column sums in one multi-operand
#: ``tl.reduce`` (else three ``tl.sum``); "gather" a QR column by ``tl.gather`` (else a masked sum);
#: "reload" the row/column sorts by reloading ``A`` at permuted addresses (else ``tl.gather``);
#: "scatter" the σ sort by storing every column at its place (else ``tl.gather`` before the stores).
#: H200 (Triton 3.6), ``bench_svd.py --fused``, 4096x32x32: "reload" False (the sorts by register
#: gathers) gives wrong results there (471 of 4096 matrices not converged, ratios 3e5; the interpreter
#: is right); every other switch is right: "joint" 1.31 ms vs 1.28 default, "gather" 1.66, "scatter"
#: False 1.19 (kept True: the same kind of register permutation as the broken one). Those runs predate
#: ``svd_triton_rot.UNIFORM`` (lanes disagreeing on a sum's last bit, issue 12's fault): likely the same
#: cause, not re-measured.
VARIANT = {"joint": False, "gather": False, "reload": True, "scatter": True}
_SQRT_TINY = tl.constexpr(float(torch.finfo(torch.float32).tiny) ** 0.5)  # read inside the kernel


def _pow2(x: int) -> int:
    return max(2, 1 << (max(x, 1) - 1).bit_length())


def fits(m: int, n: int, dtype: torch.dtype) -> bool:
    """Whether :func:`svd_tall` serves ``m x n`` matrices (``m >= n``) of ``dtype``."""
    return dtype == torch.float32 and 1 <= n <= MAX_N and n <= m <= MAX_M


def launch_config(m: int, n: int) -> tuple[int, int]:
    """``(MB, warps)``: matrices per program and warps for ``m x n`` (:data:`CONFIG` first).

    One warp a program, one matrix (two for ``n <= 8``) by default: compiled for sm_90, a 32x32 Jacobi round is ~560
    SASS instructions on one warp with no barrier (each lane owns a column: its sums stay in the
    thread) against ~420 a warp and 8 barriers on two (the cross-warp sums); the H200 timing of the
    other shapes is ``bench_svd.py --fused``'s table (docs/evidence/svd.md).
    """
    np_ = _pow2(n)
    if np_ in CONFIG:
        return CONFIG[np_]
    return (2, 1) if np_ <= 8 else (1, 1)  # H200 round 1, 100000x9x8: 2 a program 1.38 ms, 1: 1.66, 4: 1.49


@triton.jit
def _rank_desc(key, K: tl.constexpr):
    """Stable descending ranks of ``key [MB, K]`` and the inverse permutation ``src`` (``src[d]`` is
    the index of rank ``d``)."""
    idx = tl.arange(0, K)
    ki = key[:, :, None]
    kk = key[:, None, :]
    before = (kk > ki) | ((kk == ki) & (idx[None, None, :] < idx[None, :, None]))
    rank = tl.sum(before.to(tl.int32), axis=2)
    src = tl.sum(tl.where(rank[:, None, :] == idx[None, :, None], idx[None, None, :], 0), axis=2)
    # checked only under TRITON_DEBUG=1 (issue 12's fault hunt: src addresses loads and stores)
    tl.device_assert((src >= 0) & (src < K), "_rank_desc: an index out of range")
    tl.device_assert(tl.sum(src, axis=1) == K * (K - 1) // 2, "_rank_desc: not a permutation")
    return rank, src


@triton.jit
def _column(t, cols, j, GATHER: tl.constexpr):
    """Column ``j`` of a ``[MB, R, C]`` tile as ``[MB, R]``: a ``tl.gather`` (one shuffle a register
    where a warp holds the row) or an exact masked sum (a reduction across the columns)."""
    if GATHER:
        idx = tl.zeros([t.shape[0], t.shape[1], 1], dtype=tl.int32) + j
        return tl.reshape(tl.gather(t, idx, axis=2), [t.shape[0], t.shape[1]])
    else:
        return tl.sum(tl.where(cols[None, None, :] == j, t, 0.0), axis=2)


@triton.jit
def _norm_rows(x, axis: tl.constexpr):
    """2-norms along ``axis`` of ``x``, the entries scaled by a power of two near the largest
    magnitude first (exact, and no underflow or overflow of the squares)."""
    mx = tl.max(tl.abs(x), axis=axis)
    eb = (mx.to(tl.int32, bitcast=True) >> 23) & 255  # biased exponent (0: zero or subnormal)
    down = _pow2i(tl.minimum(127 - eb, 126))  # mx * down in [1, 2) (subnormal mx: at most 1)
    up = _pow2i(tl.maximum(eb - 127, -126))
    y = x * tl.expand_dims(down, axis)
    return tl.sqrt_rn(tl.sum(y * y, axis=axis)) * up


@triton.jit
def _geqr2(a, rows, cols, nq, MB: tl.constexpr, R: tl.constexpr, C: tl.constexpr, GATHER: tl.constexpr):
    """Householder QR of the first ``nq`` columns of ``a [MB, R, C]`` (LAPACK ``xgeqr2``/``xlarfg``:
    ``beta = -sign(alpha)·‖x‖``, ``tau = (beta − alpha)/beta``, ``v = x / (alpha − beta)`` by the
    reciprocal as ``xscal``, ``tau = 0`` for a zero column).

    Returns ``(r, h, tau)``: ``r`` with ``R`` on and above the diagonal (zeros below), reflector ``j``
    in column ``j`` of ``h`` (unit entry at row ``j``, zeros above), ``tau [MB, C]``. Step ``j`` updates
    only the columns after ``j`` (no select on the tile), so column ``j`` keeps ``x`` below the
    diagonal and the reflectors are formed from it once at the end, as step ``j`` formed ``v``.
    """
    r3 = rows[None, :, None]
    c3 = cols[None, None, :]
    tau = tl.zeros([MB, C], dtype=tl.float32)
    diag = tl.zeros([MB, C], dtype=tl.float32)
    rcp = tl.zeros([MB, C], dtype=tl.float32)
    for j in range(0, nq):
        x = _column(a, cols, j, GATHER)  # [MB, R]
        xb = tl.where(rows[None, :] > j, x, 0.0)
        xn = _norm_rows(xb, 1)
        alpha = tl.sum(tl.where(rows[None, :] == j, x, 0.0), axis=1)
        wm = tl.maximum(tl.abs(alpha), xn)
        ws = tl.where(wm > 0.0, wm, 1.0)
        ra = tl.math.div_rn(alpha, ws)
        rn = tl.math.div_rn(xn, ws)
        mag = wm * tl.sqrt_rn(ra * ra + rn * rn)
        skip = xn == 0.0
        beta = tl.where(alpha >= 0.0, -mag, mag)
        tj = tl.where(skip, 0.0, tl.math.div_rn(beta - alpha, tl.where(skip, 1.0, beta)))
        rj = tl.math.div_rn(1.0, tl.where(skip, 1.0, alpha - beta))
        v = tl.where(rows[None, :] == j, 1.0, xb * rj[:, None])  # zeros above j
        # trailing columns: A[:, c] -= tau v (vᵀ A[:, c]) for c > j (f = 0 elsewhere: exact no-op)
        w = tl.sum(v[:, :, None] * a, axis=1)  # [MB, C]
        f = tl.where(cols[None, :] > j, tj[:, None] * w, 0.0)
        a = a - v[:, :, None] * f[:, None, :]
        here = cols[None, :] == j
        diag = tl.where(here, tl.where(skip, alpha, beta)[:, None], diag)
        rcp = tl.where(here, rj[:, None], rcp)
        tau = tl.where(here, tj[:, None], tau)
    r = tl.where(r3 < c3, a, tl.where(r3 == c3, diag[:, None, :], 0.0))
    h = tl.where(r3 > c3, a * rcp[:, None, :], tl.where(r3 == c3, 1.0, 0.0))
    return r, h, tau


@triton.jit
def _apply_q(y, h, tau, rows, cols_h, nq, GATHER: tl.constexpr):
    """``Y <- H_0 ... H_{nq-1} Y`` (LAPACK ``xorm2r``, the reflectors from the last) for ``y [MB, R, K]``
    and :func:`_geqr2`'s ``h [MB, R, C]``, ``tau [MB, C]``."""
    for jj in range(0, nq):
        j = nq - 1 - jj
        v = _column(h, cols_h, j, GATHER)  # [MB, R]
        tj = tl.sum(tl.where(cols_h[None, :] == j, tau, 0.0), axis=1)
        w = tl.sum(v[:, :, None] * y, axis=1)  # [MB, K]
        y = y - v[:, :, None] * (tj[:, None] * w)[:, None, :]
    return y


@triton.jit
def _add3(a0, b0, c0, a1, b1, c1):
    return a0 + a1, b0 + b1, c0 + c1


@triton.jit
def _sweeps(x, vj, busy, cols, npad, sweeps, tol, ctol, MB: tl.constexpr, NP: tl.constexpr,
            WANT_UV: tl.constexpr, SLOTS: tl.constexpr, JOINT: tl.constexpr):
    """The Jacobi sweeps on ``x`` (and ``vj``) ``[MB, NP, NP]``, matrices with ``busy`` set: the
    circle method on ``npad`` columns, at most ``sweeps`` sweeps, each matrix stopping after a sweep
    without a rotation above ``ctol``. Returns ``(x, vj, last)``, ``last [MB]``: rotated in its last
    sweep. ``SLOTS``: columns moved between rounds as in ``svd_triton._jacobi_reg_kernel`` (pairs
    split off by a reshape, a ``tl.gather`` by the slot permutation); else columns in place, each
    gathering its partner (module docstring). The same pairs and rotations either way."""
    HP: tl.constexpr = NP // 2
    c3 = cols[None, None, :]
    half = cols // 2
    odd = (cols % 2) == 1
    inner = cols < npad
    if SLOTS:
        lay = tl.where(inner, tl.where(odd, npad - 1 - half, half), cols)  # slot -> column, round 0
        home = tl.where(inner, tl.where(cols < npad // 2, 2 * cols, 2 * (npad - 1 - cols) + 1), cols)
        perm = tl.where(odd, tl.where(half == 0, 2, 2 * half - 1),
                        tl.where(half == 0, 0, tl.where(cols == npad - 2, npad - 1, cols + 2)))
        perm = tl.broadcast_to(tl.where(inner & (npad > 2), perm, cols)[None, None, :], (MB, NP, NP))
        x = tl.gather(x, tl.broadcast_to(lay[None, None, :], (MB, NP, NP)), axis=2)
        if WANT_UV:
            vj = tl.gather(vj, tl.broadcast_to(lay[None, None, :], (MB, NP, NP)), axis=2)
        livep = tl.arange(0, HP) < npad // 2
    last = tl.zeros([MB], dtype=tl.int1)
    anybusy = tl.max(busy.to(tl.int32), axis=0)
    sweep = 0
    while (sweep < sweeps) & (anybusy > 0):
        busy3 = busy[:, None, None]
        if SLOTS:
            mine = tl.zeros([MB, HP], dtype=tl.int1)
        else:
            mine = tl.zeros([MB, NP], dtype=tl.int1)
        for rnd in range(0, npad - 1):
            if SLOTS:
                xp, xq = tl.split(tl.reshape(x, [MB, NP, HP, 2]))
                if JOINT:  # one cross-warp exchange
                    a, b, g = tl.reduce((xp * xp, xq * xq, xp * xq), 1, _add3)
                else:
                    a = tl.sum(xp * xp, axis=1)
                    b = tl.sum(xq * xq, axis=1)
                    g = tl.sum(xp * xq, axis=1)
                sig, c, s, _ = _rotation(a, b, g, g, tol, ctol, busy[:, None] & livep[None, :], False)
                xp, xq = _rotate_real(xp, xq, c[:, None, :], s[:, None, :])
                x = tl.gather(tl.reshape(tl.join(xp, xq), [MB, NP, NP]), perm, axis=2)
                if WANT_UV:
                    vp, vq = tl.split(tl.reshape(vj, [MB, NP, HP, 2]))
                    vp, vq = _rotate_real(vp, vq, c[:, None, :], s[:, None, :])
                    vj = tl.gather(tl.reshape(tl.join(vp, vq), [MB, NP, NP]), perm, axis=2)
            else:  # [1, 1, NP] / [MB, 1, NP] per-column values: the tile's own layout, no conversions
                slot = tl.where(c3 == 0, 0, 1 + (c3 - 1 - rnd + (npad - 1)) % (npad - 1))
                oslot = npad - 1 - slot
                partner = tl.where(c3 < npad, tl.where(oslot == 0, 0, 1 + (oslot - 1 + rnd) % (npad - 1)), c3)
                isp = slot < npad // 2
                pidx = tl.broadcast_to(partner, (MB, NP, NP))
                xq = tl.gather(x, pidx, axis=2)
                if JOINT:  # one cross-warp exchange
                    sq, sqq, g = tl.reduce((x * x, xq * xq, x * xq), 1, _add3, keep_dims=True)
                else:
                    sq = tl.sum(x * x, axis=1, keep_dims=True)
                    sqq = tl.sum(xq * xq, axis=1, keep_dims=True)
                    g = tl.sum(x * xq, axis=1, keep_dims=True)
                ap = tl.where(isp, sq, sqq)
                aq = tl.where(isp, sqq, sq)
                sig, c, s, _ = _rotation(ap, aq, g, g, tol, ctol, busy3 & (c3 < npad), False)
                # x_p' = c x_p − s x_q, x_q' = s x_p + c x_q: each column its own side
                sj = tl.where(isp, -s, s)
                x = c * x + sj * xq
                if WANT_UV:
                    vq = tl.gather(vj, pidx, axis=2)
                    vj = c * vj + sj * vq
                sig = tl.reshape(sig, (MB, NP))
            mine = mine | sig
        done = tl.max(mine.to(tl.int32), axis=1) > 0
        last = tl.where(busy, done, last)
        busy = busy & done
        anybusy = tl.max(busy.to(tl.int32), axis=0)
        sweep += 1
    if SLOTS:  # after whole sweeps the columns are in round 0's slots again
        x = tl.gather(x, tl.broadcast_to(home[None, None, :], (MB, NP, NP)), axis=2)
        if WANT_UV:
            vj = tl.gather(vj, tl.broadcast_to(home[None, None, :], (MB, NP, NP)), axis=2)
    return x, vj, last


@triton.jit
def _svd_fused_kernel(A, U, S, V, INFO, B, m, n, npad, ucols, sweeps, tol, ctol,
                      MB: tl.constexpr, MP: tl.constexpr, NP: tl.constexpr, UP: tl.constexpr,
                      WANT_UV: tl.constexpr, SLOTS: tl.constexpr, JOINT: tl.constexpr, GATHER: tl.constexpr,
                      RELOAD: tl.constexpr, SCATTER: tl.constexpr):
    mats = tl.program_id(0).to(tl.int64) * MB + tl.arange(0, MB)
    live_b = mats < B
    rows = tl.arange(0, MP)
    cols = tl.arange(0, NP)
    r3 = rows[None, :, None]
    c3 = cols[None, None, :]
    inside = live_b[:, None, None] & (r3 < m) & (c3 < n)
    a = tl.load(A + mats[:, None, None] * (m * n) + r3 * n + c3, mask=inside, other=0.0)

    # 1. power-of-two scaling (exact); a non-finite matrix is zeroed and flagged
    bad = tl.max(tl.max((~(tl.abs(a) <= 3.4028234663852886e38)).to(tl.int32), axis=2), axis=1)
    fin = bad == 0
    a = tl.where(fin[:, None, None], a, 0.0)
    amax = tl.max(tl.max(tl.abs(a), axis=2), axis=1)
    tiny = amax < 7.888609052210118e-31  # 2^-100: lift subnormal maxima by 2^64 first
    pre = tl.where(tiny, 1.8446744073709552e19, 1.0)
    am = amax * pre
    e1 = tl.where(am > 0.0, ((am.to(tl.int32, bitcast=True) >> 23) & 255) - 126, 0)
    k1 = tl.minimum(tl.maximum(-e1, -126), 126)
    f1 = _pow2i(k1)
    f2 = _pow2i(-e1 - k1)
    ex = e1 - tl.where(tiny, 64, 0)
    a = a * pre[:, None, None] * f1[:, None, None] * f2[:, None, None]  # one factor at a time: exact

    # 2. rows by decreasing max-modulus, columns by decreasing 2-norm (stable)
    rkey = tl.where(rows[None, :] < m, tl.max(tl.abs(a), axis=2), -1.0)
    _, rp = _rank_desc(rkey, MP)  # sorted row d is row rp[d] of A
    if RELOAD:  # permuted by reloading A (L1/L2) with permuted addresses: no register gathers
        ckey = tl.where(cols[None, :] < n, _norm_rows(a, 1), -1.0)  # column norms: any row order
        _, cp = _rank_desc(ckey, NP)  # sorted column d is column cp[d] of A
        a = tl.load(A + mats[:, None, None] * (m * n) + rp[:, :, None] * n + cp[:, None, :], mask=inside, other=0.0)
        a = tl.where(fin[:, None, None], a, 0.0)
        a = a * pre[:, None, None] * f1[:, None, None] * f2[:, None, None]
    else:
        a = tl.gather(a, tl.broadcast_to(rp[:, :, None], (MB, MP, NP)), axis=1)
        ckey = tl.where(cols[None, :] < n, _norm_rows(a, 1), -1.0)
        _, cp = _rank_desc(ckey, NP)
        a = tl.gather(a, tl.broadcast_to(cp[:, None, :], (MB, MP, NP)), axis=2)

    # 3. Householder QR; 4. X = Rᵀ (the first NP rows of R: the rest are zero)
    r, h, tau = _geqr2(a, rows, cols, n, MB, MP, NP, GATHER)
    if MP > NP:
        r = tl.sum(tl.reshape(r, (MB, MP // NP, NP, NP)), axis=1)
    x = tl.permute(r, (0, 2, 1))
    vj = tl.where(cols[None, :, None] == c3, 1.0, 0.0) + tl.zeros([MB, NP, NP], dtype=tl.float32)

    # 4. one-sided Jacobi (module docstring)
    x, vj, last = _sweeps(x, vj, live_b & fin, cols, npad, sweeps, tol, ctol, MB, NP, WANT_UV, SLOTS, JOINT)

    # 5. σ (scaled norms), sorted (stable, descending; padding columns last)
    sig_raw = _norm_rows(x, 1)
    skey = tl.where(cols[None, :] < n, sig_raw, -1.0)
    srank, order = _rank_desc(skey, NP)  # column j goes to place srank[j]; place k holds order[k]
    k2 = tl.minimum(tl.maximum(ex, -126), 126)
    up1 = _pow2i(k2)[:, None]
    up2 = _pow2i(ex - k2)[:, None]
    smask = live_b[:, None] & (cols[None, :] < n)
    if SCATTER:  # every column stored at its place: no register permutation
        sv = sig_raw
        spos = tl.where(cols[None, :] < n, srank, cols[None, :])  # [MB, NP]
        tl.store(S + mats[:, None] * n + spos, tl.where(fin[:, None], sv * up1 * up2, float("nan")), mask=smask)
    else:
        sv = tl.gather(sig_raw, order, axis=1)
        tl.store(S + mats[:, None] * n + cols[None, :], tl.where(fin[:, None], sv * up1 * up2, float("nan")),
                 mask=smask)
    tl.store(INFO + mats, tl.where(fin, tl.where(last, 2, 0), 1), mask=live_b)
    if WANT_UV:
        nanv = tl.where(fin, 0.0, float("nan"))[:, None, None]
        vmask = live_b[:, None, None] & (cols[None, :, None] < n) & (c3 < n)
        vrows = V + mats[:, None, None] * (n * n) + cp[:, :, None] * n  # row i of W goes to row cp[i]
        if SCATTER:
            w = x
        else:
            oidx = tl.broadcast_to(order[:, None, :], (MB, NP, NP))
            w = tl.gather(x, oidx, axis=2)
            vj = tl.gather(vj, oidx, axis=2)
        # 6. V_A = Pc W Σ⁻¹, negligible columns completed (mpslinalg.svd._complete)
        sd = tl.where(sv > 0.0, sv, 1.0)
        ux = tl.math.div_rn(w, sd[:, None, :])
        s0 = tl.max(tl.where(cols[None, :] < n, sv, 0.0), axis=1)
        zc = (sv <= _SQRT_TINY * s0[:, None]) & (cols[None, :] < n)
        nzc = tl.sum(zc.to(tl.int32), axis=1)  # negligible columns: the last nzc places
        if SCATTER:
            tl.store(vrows + spos[:, None, :], ux + nanv, mask=vmask)
        if tl.max(nzc, axis=0) > 0:  # completion: Householder QR of the columns in sorted order
            if SCATTER:
                tl.debug_barrier()
                ux = tl.load(vrows + c3, mask=vmask, other=0.0)
                tl.debug_barrier()  # read before rewritten below
            rc, hc, tc = _geqr2(ux, cols, cols, n, MB, NP, NP, GATHER)  # rc (R) unused
            qc = tl.where(cols[None, :, None] == c3, 1.0, 0.0) + tl.zeros([MB, NP, NP], dtype=tl.float32)
            qc = _apply_q(qc, hc, tc, cols, cols, n, GATHER)
            ux = tl.where((c3 >= n - nzc[:, None, None]) & (c3 < n), qc, ux)
            if SCATTER:
                tl.store(vrows + c3, ux + nanv, mask=vmask)
        if not SCATTER:
            tl.store(vrows + c3, ux + nanv, mask=vmask)
        # 7. U_A = Prᵀ Q [Vj 0; 0 I]
        ucol = tl.arange(0, UP)
        u3 = ucol[None, None, :]
        ubase = U + mats[:, None, None] * (m * ucols)
        if MP == NP and UP == NP:
            y = vj  # [Vj 0; 0 I]: the padding columns never rotate and sort last
            if SCATTER:
                ucol3 = tl.where(c3 < n, spos[:, None, :], c3)
            else:
                ucol3 = u3
        else:  # embed Vj (n x n) in the MP x UP tile through U's own rows (scratch), in sorted order
            if SCATTER:
                vcol3 = spos[:, None, :]
            else:
                vcol3 = c3
            tl.store(ubase + cols[None, :, None] * ucols + vcol3, vj,
                     mask=live_b[:, None, None] & (cols[None, :, None] < n) & (c3 < n))
            tl.debug_barrier()
            emb = live_b[:, None, None] & (r3 < n) & (u3 < n)
            y = tl.load(ubase + r3 * ucols + u3, mask=emb, other=0.0)
            y = tl.where((r3 >= n) & (r3 == u3), 1.0, y)
            tl.debug_barrier()  # every row read before any is overwritten below
            ucol3 = u3
        y = _apply_q(y, h, tau, rows, cols, n, GATHER)
        umask = live_b[:, None, None] & (r3 < m) & (u3 < ucols)
        tl.store(ubase + rp[:, :, None] * ucols + ucol3, y + nanv, mask=umask)


def svd_tall(A: torch.Tensor, full: bool, compute_uv: bool, max_sweeps: int
             ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """The whole SVD of every matrix of ``A [B, m, n]`` (:func:`fits`) in one launch.

    The contract of :func:`mpslinalg.svd.triton_jacobi.svd_tall`: ``U`` ``[B, m, m]`` (``full``) or
    ``[B, m, n]``, ``S [B, n]`` (descending), ``V`` (not ``Vᵀ``) ``[B, n, n]`` orthonormal
    (:data:`COMPLETES_V`), ``info [B]`` int32 (0; 1 non-finite input, outputs NaN; 2 not converged
    within ``max_sweeps``); ``U``, ``V`` None unless ``compute_uv``. ``A`` is not modified.

    Parameters
    ----------
    A : torch.Tensor
        ``[B, m, n]`` float32 with ``n <= m`` (:func:`fits`).
    full : bool
        ``U`` with all ``m`` columns.
    compute_uv : bool
        Compute ``U`` and ``V``.
    max_sweeps : int
        Most Jacobi sweeps per matrix.

    Returns
    -------
    (U, S, V, info)
    """
    Bn, m, n = A.shape
    if not fits(m, n, A.dtype):
        raise ValueError(f"svd_triton_fused.svd_tall: [B, m, n] float32 with n <= m <= {MAX_M}, n <= {MAX_N}, "
                         f"got {tuple(A.shape)} {A.dtype}")
    A = A.contiguous()
    ucols = m if full else n
    U, S, V, info = _alloc_svd_outputs(A, full, compute_uv)
    if Bn == 0:
        return U, S, V, info
    mb, warps = launch_config(m, n)
    npad = n + n % 2
    tol, ctol = thresholds(npad, torch.float32)
    _svd_fused_kernel[(-(-Bn // mb),)](
        A, U if compute_uv else A, S, V if compute_uv else A, info, Bn, m, n, npad, ucols, int(max_sweeps),
        tol, ctol, MB=mb, MP=_pow2(m), NP=_pow2(n), UP=_pow2(ucols), WANT_UV=compute_uv,
        SLOTS=JACOBI == "slots", JOINT=VARIANT["joint"], GATHER=VARIANT["gather"], RELOAD=VARIANT["reload"],
        SCATTER=VARIANT["scatter"], num_warps=warps, **UNIFORM)
    return U, S, V, info
