"""The register-resident one-matrix-per-program Jacobi kernels of
:func:`mpslinalg.svd.triton_jacobi.jacobi` (``svd_triton.TILE_KERNEL``): ``X`` (and ``V``) stay in the
program's registers for the whole iteration; no global-memory round trip or barrier of ours per round.

``jacobi_reg_kernel`` (``"registers"``) keeps ``X`` as one ``[n, n]`` tile in slot order, splits it
into the pairs' ``p`` and ``q`` columns every round and moves the columns between rounds by a
gather over all ``n`` slots. Triton lays that tile out with a pair's two slots in one thread's two
registers, so each gathered element costs two warp shuffles and a select (the source register is
not known statically).

``jacobi_pairs_kernel`` (``"pairs"``): the ``p`` columns (``P [n, n/2]``) and the ``q`` columns
(``Q``) stay two tiles of the same layout for the whole iteration, and the circle method's move
between rounds

    new P[0] = P[0],  new P[k] = P[k+1] (1 <= k <= h-2),  new P[h-1] = Q[h-1],
    new Q[0] = P[1],  new Q[k] = Q[k-1] (1 <= k <= h-1)                      (h = n/2)

is two gathers with one source register each (``G = P[k+1]`` gives both ``new P[k]`` and
``new Q[0] = G[0]``; ``new P[h-1] = Q[h-1]`` is the same thread's register): one shuffle per element.
The pairs, rotations, stopping rule and column layout (round 0 pairs columns ``k`` and ``n-1-k``;
after ``n-1`` rounds every column is back in place) are those of ``jacobi_reg_kernel``.

``jacobi_halving_kernel`` (``TILE_KERNEL = "halving"``, ``n`` a power of two) orders the pairs so
that ``P`` never moves within a sweep's levels and ``Q`` moves by a roll (one shuffle per element,
no select): level 0 pairs ``P[i]`` with ``Q[(i + r) mod h]`` for ``r < h`` (every p-q pair); then
each half of ``P`` and of ``Q`` still needs its own pairs, so the halves are regrouped (``P`` block
``j`` and ``Q`` block ``j`` become ``P`` blocks ``2j, 2j+1`` = their low halves and ``Q`` blocks =
their high halves) and level 1 rolls ``Q`` within blocks of ``h/2``; and so on down to blocks of one:
``h + h/2 + ... + 1 = n - 1`` rounds, every pair once (a cyclic ordering, as the circle method, with
the same rotations and stopping rule, so the same convergence theory). A sweep leaves the columns
permuted; the kernel tracks which column each position holds and stores them in place.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .triton_rot import _rotate_complex, _rotate_real, _rotation, _rotation_p, _rotation_t, _store_pq

__all__ = ["jacobi_halving_kernel", "jacobi_pairs_kernel", "jacobi_reg_kernel"]


@triton.jit
def _sum4(a0, b0, c0, d0, a1, b1, c1, d1):
    return a0 + a1, b0 + b1, c0 + c1, d0 + d1


@triton.jit
def jacobi_reg_kernel(X, V, ROT, n, sweeps, tol, ctol,
                       COMPLEX: tl.constexpr, WANT_V: tl.constexpr, NP: tl.constexpr, JOINT: tl.constexpr):
    """The tile kernel's contract with the matrix in registers: columns kept in *slot* order (pair
    ``k`` = slots ``2k, 2k+1``, split off by a reshape), moved between rounds by the circle method's
    fixed slot permutation (``tl.gather``), loaded and stored in round 0's slot order. No
    global-memory round trip or barrier of ours per round.

    Round 0 pairs ``(k, n − 1 − k)``; between rounds new slot ``j`` takes old slot ``perm[j]``:
    ``0 -> 0``, ``1 -> 2``, odd ``2k+1 -> 2k−1``, even ``2k -> 2k+2`` except ``n−2 -> n−1`` (the
    identity for ``n = 2`` and on the padding), as :func:`_players` (a wrong map would leave the columns
    out of place after a sweep: the tests compare with the memory variant at several orders).
    """
    b = tl.program_id(0).to(tl.int64)
    CW: tl.constexpr = 2 if COMPLEX else 1
    HP: tl.constexpr = NP // 2
    h = n // 2
    rows = tl.arange(0, NP)
    slots = tl.arange(0, NP)
    pairs = tl.arange(0, HP)
    live = pairs < h
    inside = (rows[:, None] < n) & (slots[None, :] < n)
    half = slots // 2
    odd = (slots % 2) == 1
    lay = tl.where(odd, n - 1 - half, half)
    perm = tl.where(odd, tl.where(half == 0, 2, 2 * half - 1),
                    tl.where(half == 0, 0, tl.where(slots == n - 2, n - 1, slots + 2)))
    perm = tl.where((slots < n) & (n > 2), perm, slots)
    perm = tl.broadcast_to(perm[None, :], (NP, NP))
    off = (rows[:, None] * n + lay[None, :]) * CW
    xb = X + b * n * n * CW
    vb = V + b * n * n * CW
    xr = tl.load(xb + off, mask=inside, other=0.0)
    xi = xr
    vr = xr
    vi = xr
    if COMPLEX:
        xi = tl.load(xb + off + 1, mask=inside, other=0.0)
    if WANT_V:
        vr = tl.load(vb + off, mask=inside, other=0.0)
        if COMPLEX:
            vi = tl.load(vb + off + 1, mask=inside, other=0.0)
    last = tl.zeros([HP], dtype=tl.int32)
    busy = tl.max(live.to(tl.int32), axis=0)
    sweep = 0
    while (sweep < sweeps) & (busy > 0):
        mine = tl.zeros([HP], dtype=tl.int32)
        for _r in range(0, n - 1):
            xpr, xqr = tl.split(tl.reshape(xr, [NP, HP, 2]))
            if COMPLEX:
                xpi, xqi = tl.split(tl.reshape(xi, [NP, HP, 2]))
                if JOINT:  # the four column sums in one reduction (one exchange between warps)
                    a, bb, gr, gi = tl.reduce((xpr * xpr + xpi * xpi, xqr * xqr + xqi * xqi, xpr * xqr + xpi * xqi,
                                               xpr * xqi - xpi * xqr), 0, _sum4)
                else:
                    a = tl.sum(xpr * xpr + xpi * xpi, axis=0)
                    bb = tl.sum(xqr * xqr + xqi * xqi, axis=0)
                    gr = tl.sum(xpr * xqr + xpi * xqi, axis=0)
                    gi = tl.sum(xpr * xqi - xpi * xqr, axis=0)
                sig, c, sr, si = _rotation(a, bb, gr, gi, tol, ctol, live, COMPLEX)
                xpr, xpi, xqr, xqi = _rotate_complex(xpr, xpi, xqr, xqi, c[None, :], sr[None, :], si[None, :])
                xi = tl.gather(tl.reshape(tl.join(xpi, xqi), [NP, NP]), perm, axis=1)
            else:
                a = tl.sum(xpr * xpr, axis=0)
                bb = tl.sum(xqr * xqr, axis=0)
                gr = tl.sum(xpr * xqr, axis=0)
                sig, c, sr, si = _rotation(a, bb, gr, gr, tol, ctol, live, COMPLEX)
                xpr, xqr = _rotate_real(xpr, xqr, c[None, :], sr[None, :])
            xr = tl.gather(tl.reshape(tl.join(xpr, xqr), [NP, NP]), perm, axis=1)
            if WANT_V:
                vpr, vqr = tl.split(tl.reshape(vr, [NP, HP, 2]))
                if COMPLEX:
                    vpi, vqi = tl.split(tl.reshape(vi, [NP, HP, 2]))
                    vpr, vpi, vqr, vqi = _rotate_complex(vpr, vpi, vqr, vqi, c[None, :], sr[None, :], si[None, :])
                    vi = tl.gather(tl.reshape(tl.join(vpi, vqi), [NP, NP]), perm, axis=1)
                else:
                    vpr, vqr = _rotate_real(vpr, vqr, c[None, :], sr[None, :])
                vr = tl.gather(tl.reshape(tl.join(vpr, vqr), [NP, NP]), perm, axis=1)
            mine = mine | sig.to(tl.int32)
        last = mine
        busy = tl.max(mine, axis=0)
        sweep += 1
    tl.store(xb + off, xr, mask=inside)
    if COMPLEX:
        tl.store(xb + off + 1, xi, mask=inside)
    if WANT_V:
        tl.store(vb + off, vr, mask=inside)
        if COMPLEX:
            tl.store(vb + off + 1, vi, mask=inside)
    tl.store(ROT + b, tl.max(last, axis=0))


@triton.jit
def _move(P, Q, k, h, idx_g, idx_q):
    """The circle method's move between rounds on the tiles ``P``, ``Q`` (``[NP, HP]``)."""
    G = tl.gather(P, idx_g, axis=1)  # G[k] = P[k+1]
    newP = tl.where((k >= 1) & (k < h - 1), G, tl.where((k == h - 1) & (h > 1), Q, P))
    newQ = tl.where((k == 0) & (h > 1), G, tl.where((k >= 1) & (k < h), tl.gather(Q, idx_q, axis=1), Q))
    return newP, newQ


@triton.jit
def jacobi_pairs_kernel(X, V, ROT, n, sweeps, tol, ctol,
                        COMPLEX: tl.constexpr, WANT_V: tl.constexpr, NP: tl.constexpr, JOINT: tl.constexpr,
                        FAST: tl.constexpr):
    """One matrix per program; see the module docstring. ``X``, ``V``: ``[B, n, n]`` (interleaved
    pairs for complex), rotated in place; ``ROT [B]``: a significant rotation in the last sweep."""
    b = tl.program_id(0).to(tl.int64)
    CW: tl.constexpr = 2 if COMPLEX else 1
    HP: tl.constexpr = NP // 2
    h = n // 2
    rows = tl.arange(0, NP)
    k1 = tl.arange(0, HP)
    live = k1 < h
    k = tl.broadcast_to(k1[None, :], (NP, HP))
    inside = (rows[:, None] < n) & live[None, :]
    idx_g = tl.where((k + 1 < h) & (k < h), k + 1, k)
    idx_q = tl.where((k >= 1) & (k < h), k - 1, k)
    off_p = (rows[:, None] * n + k1[None, :]) * CW
    off_q = (rows[:, None] * n + (n - 1 - k1)[None, :]) * CW
    xb = X + b * n * n * CW
    vb = V + b * n * n * CW
    xpr = tl.load(xb + off_p, mask=inside, other=0.0)
    xqr = tl.load(xb + off_q, mask=inside, other=0.0)
    xpi = xpr
    xqi = xqr
    vpr = xpr
    vqr = xqr
    vpi = xpr
    vqi = xqr
    if COMPLEX:
        xpi = tl.load(xb + off_p + 1, mask=inside, other=0.0)
        xqi = tl.load(xb + off_q + 1, mask=inside, other=0.0)
    if WANT_V:
        vpr = tl.load(vb + off_p, mask=inside, other=0.0)
        vqr = tl.load(vb + off_q, mask=inside, other=0.0)
        if COMPLEX:
            vpi = tl.load(vb + off_p + 1, mask=inside, other=0.0)
            vqi = tl.load(vb + off_q + 1, mask=inside, other=0.0)
    last = tl.zeros([HP], dtype=tl.int32)
    busy = tl.max(live.to(tl.int32), axis=0)
    sweep = 0
    while (sweep < sweeps) & (busy > 0):
        mine = tl.zeros([HP], dtype=tl.int32)
        for _r in range(0, n - 1):
            if COMPLEX:
                if JOINT:  # the four column sums in one reduction (one exchange between warps)
                    a, bb, gr, gi = tl.reduce((xpr * xpr + xpi * xpi, xqr * xqr + xqi * xqi, xpr * xqr + xpi * xqi,
                                               xpr * xqi - xpi * xqr), 0, _sum4)
                else:
                    a = tl.sum(xpr * xpr + xpi * xpi, axis=0)
                    bb = tl.sum(xqr * xqr + xqi * xqi, axis=0)
                    gr = tl.sum(xpr * xqr + xpi * xqi, axis=0)
                    gi = tl.sum(xpr * xqi - xpi * xqr, axis=0)
                sig, c, sr, si = _rotation_p(a, bb, gr, gi, tol, ctol, live, COMPLEX, FAST)
                xpr, xpi, xqr, xqi = _rotate_complex(xpr, xpi, xqr, xqi, c[None, :], sr[None, :], si[None, :])
                xpi, xqi = _move(xpi, xqi, k, h, idx_g, idx_q)
                if WANT_V:
                    vpr, vpi, vqr, vqi = _rotate_complex(vpr, vpi, vqr, vqi, c[None, :], sr[None, :], si[None, :])
                    vpi, vqi = _move(vpi, vqi, k, h, idx_g, idx_q)
            else:
                a = tl.sum(xpr * xpr, axis=0)
                bb = tl.sum(xqr * xqr, axis=0)
                gr = tl.sum(xpr * xqr, axis=0)
                sig, c, sr, si = _rotation_p(a, bb, gr, gr, tol, ctol, live, COMPLEX, FAST)
                xpr, xqr = _rotate_real(xpr, xqr, c[None, :], sr[None, :])
                if WANT_V:
                    vpr, vqr = _rotate_real(vpr, vqr, c[None, :], sr[None, :])
            xpr, xqr = _move(xpr, xqr, k, h, idx_g, idx_q)
            if WANT_V:
                vpr, vqr = _move(vpr, vqr, k, h, idx_g, idx_q)
            mine = mine | sig.to(tl.int32)
        last = mine
        busy = tl.max(mine, axis=0)
        sweep += 1
    _store_pq(xb, vb, off_p, off_q, xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, inside, COMPLEX, WANT_V)
    tl.store(ROT + b, tl.max(last, axis=0))


# --------------------------------------------------------------------------------------------------
# n a power of two: the recursive-halving ordering (no column of P ever moves within a level)
# --------------------------------------------------------------------------------------------------


@triton.jit
def _roll(Q, idx_roll):
    """``Q[k] <- Q[next k]`` within the level's blocks (one shuffle per element, no select)."""
    return tl.gather(Q, idx_roll, axis=1)


@triton.jit
def _halve(P, Q, src, odd, t):
    """The move between levels: ``P`` block ``j`` and ``Q`` block ``j`` (size ``2t``) become ``P`` blocks
    ``2j, 2j+1`` = (low half of ``P_j``, low half of ``Q_j``) and ``Q`` blocks = the high halves."""
    newP = tl.where(odd, tl.gather(Q, src, axis=1), tl.gather(P, src, axis=1))
    newQ = tl.where(odd, tl.gather(Q, src + t, axis=1), tl.gather(P, src + t, axis=1))
    return newP, newQ


@triton.jit
def _apply_pair(c, sr, si, xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, COMPLEX: tl.constexpr, WANT_V: tl.constexpr):
    """The round's rotations ``(c, se)`` (one per pair) applied to the ``P``/``Q`` tiles of ``X`` (and ``V``)."""
    if COMPLEX:
        xpr, xpi, xqr, xqi = _rotate_complex(xpr, xpi, xqr, xqi, c[None, :], sr[None, :], si[None, :])
        if WANT_V:
            vpr, vpi, vqr, vqi = _rotate_complex(vpr, vpi, vqr, vqi, c[None, :], sr[None, :], si[None, :])
    else:
        xpr, xqr = _rotate_real(xpr, xqr, c[None, :], sr[None, :])
        if WANT_V:
            vpr, vqr = _rotate_real(vpr, vqr, c[None, :], sr[None, :])
    return xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi


@triton.jit
def _rotate_pair(xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, tol, ctol, live,
                 COMPLEX: tl.constexpr, WANT_V: tl.constexpr, JOINT: tl.constexpr, FAST: tl.constexpr):
    """One round's rotations of the pairs ``(P[:, k], Q[:, k])`` of ``X`` (and ``V``)."""
    if COMPLEX:
        if JOINT:
            a, bb, gr, gi = tl.reduce((xpr * xpr + xpi * xpi, xqr * xqr + xqi * xqi, xpr * xqr + xpi * xqi,
                                       xpr * xqi - xpi * xqr), 0, _sum4)
        else:
            a = tl.sum(xpr * xpr + xpi * xpi, axis=0)
            bb = tl.sum(xqr * xqr + xqi * xqi, axis=0)
            gr = tl.sum(xpr * xqr + xpi * xqi, axis=0)
            gi = tl.sum(xpr * xqi - xpi * xqr, axis=0)
    else:
        a = tl.sum(xpr * xpr, axis=0)
        bb = tl.sum(xqr * xqr, axis=0)
        gr = tl.sum(xpr * xqr, axis=0)
        gi = gr
    sig, c, sr, si = _rotation_p(a, bb, gr, gi, tol, ctol, live, COMPLEX, FAST)
    xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi = _apply_pair(c, sr, si, xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi,
                                                         COMPLEX, WANT_V)
    return sig, xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi


@triton.jit
def _sum2(a0, b0, a1, b1):
    return a0 + a1, b0 + b1


@triton.jit
def _norms2(xpr, xpi, xqr, xqi, COMPLEX: tl.constexpr):
    """The squared column norms of the ``P`` and ``Q`` tiles (one reduction)."""
    if COMPLEX:
        nP, nQ = tl.reduce((xpr * xpr + xpi * xpi, xqr * xqr + xqi * xqi), 0, _sum2)
    else:
        nP, nQ = tl.reduce((xpr * xpr, xqr * xqr), 0, _sum2)
    return nP, nQ


#: LAPACK xGSVJ0's ROOTEPS test on squared norms: an updated norm² below sqrt(u) (u = 2^-24) of
#: its old value lost digits to cancellation in ``a − t|g|`` (LAPACK then recomputes it).
_ROOTEPS = tl.constexpr(2.0**-12)


@triton.jit
def _rotate_pair_tracked(xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, tol, ctol, live,
                         COMPLEX: tl.constexpr, WANT_V: tl.constexpr, FAST: tl.constexpr):
    """:func:`_rotate_pair` with the squared column norms ``nP``, ``nQ`` carried (LAPACK ``xGSVJ0``'s
    ``SVA``): only ``g = x_pᴴ x_q`` is a column sum, and the rotated pair's norms become ``a − t|g|``,
    ``b + t|g|``.

    A norm whose update fell below ``ROOTEPS`` of its old value (cancellation) is marked stale (−1)
    instead of summed again (a branch here made ptxas spill the tiles): a pair with a stale column is
    not rotated, and counts as work left, until the level's fresh sums (``jacobi_halving_kernel``), so
    no rotation ever uses an inaccurate norm and no sweep that skipped a pair ends the iteration."""
    if COMPLEX:
        gr, gi = tl.reduce((xpr * xqr + xpi * xqi, xpr * xqi - xpi * xqr), 0, _sum2)
    else:
        gr = tl.sum(xpr * xqr, axis=0)
        gi = gr
    stale_in = (nP < 0.0) | (nQ < 0.0)
    sig, c, sr, si, tg = _rotation_t(tl.abs(nP), tl.abs(nQ), gr, gi, tol, ctol, live & ~stale_in, COMPLEX, FAST)
    sig = sig | (stale_in & live)
    xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi = _apply_pair(c, sr, si, xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi,
                                                         COMPLEX, WANT_V)
    nP1, nQ1 = _update_norms(nP, nQ, tg)
    return sig, xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP1, nQ1


@triton.jit
def _update_norms(nP, nQ, tg):
    """The rotated pair's squared norms ``a − t|g|``, ``b + t|g|``; ``-1`` (stale) where the update cancelled
    below ``ROOTEPS`` of the old norm (``tg = 0`` where nothing rotated: stale marks stay)."""
    nP1 = nP - tg
    nQ1 = nQ + tg
    nP1 = tl.where((tg != 0.0) & (nP1 <= _ROOTEPS * nP), -1.0, nP1)
    nQ1 = tl.where((tg != 0.0) & (nQ1 <= _ROOTEPS * nQ), -1.0, nQ1)
    return nP1, nQ1


@triton.jit
def _axpy_pair(xpr, xpi, xqr, xqi, ar, ai, br, bi, COMPLEX: tl.constexpr):
    """``(y_p − α y_q, y_q + β y_p)`` with ``α = ar − i·ai``, ``β = br + i·bi`` (per pair): two
    multiply-adds per real output (the scaled rotation's form, no multiply by ``c``), written as ``tl.fma``:
    the launch contracts nothing (:data:`svd_triton_rot.UNIFORM`)."""
    if COMPLEX:
        npr = tl.fma(-ai, xqi, tl.fma(-ar, xqr, xpr))
        npi = tl.fma(ai, xqr, tl.fma(-ar, xqi, xpi))
        nqr = tl.fma(-bi, xpi, tl.fma(br, xpr, xqr))
        nqi = tl.fma(bi, xpr, tl.fma(br, xpi, xqi))
    else:
        npr = tl.fma(-ar, xqr, xpr)
        npi = xpi
        nqr = tl.fma(br, xpr, xqr)
        nqi = xqi
    return npr, npi, nqr, nqi


@triton.jit
def _rotate_pair_scaled(xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, dP, dQ, tol, ctol, live,
                        COMPLEX: tl.constexpr, WANT_V: tl.constexpr, FAST: tl.constexpr):
    """:func:`_rotate_pair_tracked` on scaled columns (LAPACK ``xGSVJ0``'s fast scaled rotations, its
    ``D``): the tiles hold ``y`` with ``x = d·y`` (``dP``, ``dQ`` per column), so the rotation
    ``x_p' = c x_p − conj(se) x_q``, ``x_q' = se x_p + c x_q`` becomes ``d_p' = c d_p``, ``y_p' = y_p − α y_q``,
    ``d_q' = c d_q``, ``y_q' = y_q + β y_p`` with ``α = conj(se)·d_q/(c d_p)``, ``β = se·d_p/(c d_q)``: two
    multiply-adds per real output instead of three. ``g = d_p d_q·(y_pᴴ y_q)``; the norms are carried
    as in :func:`_rotate_pair_tracked`. ``c ≥ 1/√2`` (the smaller angle), so ``d ≥ 2^-16`` after the at
    most 32 rotations of a level, at whose end the kernel multiplies ``d`` back in."""
    if COMPLEX:
        gr, gi = tl.reduce((xpr * xqr + xpi * xqi, xpr * xqi - xpi * xqr), 0, _sum2)
    else:
        gr = tl.sum(xpr * xqr, axis=0)
        gi = gr
    dd = dP * dQ
    stale_in = (nP < 0.0) | (nQ < 0.0)
    sig, c, sr, si, tg = _rotation_t(tl.abs(nP), tl.abs(nQ), gr * dd, gi * dd, tol, ctol, live & ~stale_in,
                                     COMPLEX, FAST)
    sig = sig | (stale_in & live)
    cP = c * dP
    cQ = c * dQ
    if FAST:
        ra = dQ / cP
        rb = dP / cQ
    else:
        ra = tl.math.div_rn(dQ, cP)
        rb = tl.math.div_rn(dP, cQ)
    ar = (sr * ra)[None, :]
    ai = (si * ra)[None, :]
    br = (sr * rb)[None, :]
    bi = (si * rb)[None, :]
    xpr, xpi, xqr, xqi = _axpy_pair(xpr, xpi, xqr, xqi, ar, ai, br, bi, COMPLEX)
    if WANT_V:
        vpr, vpi, vqr, vqi = _axpy_pair(vpr, vpi, vqr, vqi, ar, ai, br, bi, COMPLEX)
    nP1, nQ1 = _update_norms(nP, nQ, tg)
    return sig, xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP1, nQ1, cP, cQ


@triton.jit
def _scale_pair(xpr, xpi, xqr, xqi, dP, dQ, COMPLEX: tl.constexpr):
    """The ``P`` and ``Q`` tiles' columns times their scales ``dP``, ``dQ``."""
    xpr = xpr * dP[None, :]
    xqr = xqr * dQ[None, :]
    if COMPLEX:
        xpi = xpi * dP[None, :]
        xqi = xqi * dQ[None, :]
    return xpr, xpi, xqr, xqi


@triton.jit
def _round(xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, dP, dQ, mine, idx_roll, idx_roll1, tol, ctol, live,
           COMPLEX: tl.constexpr, WANT_V: tl.constexpr, JOINT: tl.constexpr, FAST: tl.constexpr,
           TRACK: tl.constexpr, SCALED: tl.constexpr, ROLL):
    """One round of the halving kernel: the pairs rotated (:func:`_rotate_pair_scaled` with ``SCALED``,
    :func:`_rotate_pair_tracked` with ``TRACK``, else :func:`_rotate_pair`), then, with ``ROLL``, ``Q``
    (and its norms and scales) rolled within the blocks."""
    if SCALED:
        sig, xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, dP, dQ = _rotate_pair_scaled(
            xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, dP, dQ, tol, ctol, live, COMPLEX, WANT_V, FAST)
    elif TRACK:
        sig, xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ = _rotate_pair_tracked(
            xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, tol, ctol, live, COMPLEX, WANT_V, FAST)
    else:
        sig, xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi = _rotate_pair(
            xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, tol, ctol, live, COMPLEX, WANT_V, JOINT, FAST)
    mine = mine | sig.to(tl.int32)
    if ROLL:
        if TRACK or SCALED:
            nQ = tl.gather(nQ, idx_roll1, axis=0)
        if SCALED:
            dQ = tl.gather(dQ, idx_roll1, axis=0)
        xqr = _roll(xqr, idx_roll)
        if COMPLEX:
            xqi = _roll(xqi, idx_roll)
        if WANT_V:
            vqr = _roll(vqr, idx_roll)
            if COMPLEX:
                vqi = _roll(vqi, idx_roll)
    return xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, dP, dQ, mine


@triton.jit
def jacobi_halving_kernel(X, V, ROT, n, sweeps, tol, ctol,
                          COMPLEX: tl.constexpr, WANT_V: tl.constexpr, NP: tl.constexpr, JOINT: tl.constexpr,
                          FAST: tl.constexpr, TRACK: tl.constexpr = False, UNROLL2: tl.constexpr = False,
                          SCALED: tl.constexpr = False):
    """One matrix per program, ``n = NP`` a power of two, the recursive-halving ordering (module
    docstring); the contract of :func:`jacobi_pairs_kernel`. ``TRACK``: the squared column norms are
    summed at the start of each level and updated after each rotation (:func:`_rotate_pair_tracked`),
    so a round sums only ``g``. ``SCALED`` (implies the tracked norms): the scaled rotations of
    :func:`_rotate_pair_scaled`, the scales multiplied back in at the end of each level."""
    b = tl.program_id(0).to(tl.int64)
    CW: tl.constexpr = 2 if COMPLEX else 1
    HP: tl.constexpr = NP // 2
    rows = tl.arange(0, NP)
    k1 = tl.arange(0, HP)
    live = k1 < HP
    k = tl.broadcast_to(k1[None, :], (NP, HP))
    idP = k1  # the column each position of P holds (Q: HP + k at the start)
    idQ = k1 + HP
    off_p = (rows[:, None] * NP + k1[None, :]) * CW
    off_q = (rows[:, None] * NP + (k1 + HP)[None, :]) * CW
    xb = X + b * NP * NP * CW
    vb = V + b * NP * NP * CW
    xpr = tl.load(xb + off_p)
    xqr = tl.load(xb + off_q)
    xpi = xpr
    xqi = xqr
    vpr = xpr
    vqr = xqr
    vpi = xpr
    vqi = xqr
    if COMPLEX:
        xpi = tl.load(xb + off_p + 1)
        xqi = tl.load(xb + off_q + 1)
    if WANT_V:
        vpr = tl.load(vb + off_p)
        vqr = tl.load(vb + off_q)
        if COMPLEX:
            vpi = tl.load(vb + off_p + 1)
            vqi = tl.load(vb + off_q + 1)
    last = tl.zeros([HP], dtype=tl.int32)
    busy = tl.max(live.to(tl.int32), axis=0)
    nP = tl.zeros([HP], dtype=tl.float32)  # the tracked norms (TRACK, SCALED; else unused)
    nQ = nP
    dP = tl.full([HP], 1.0, tl.float32)  # the columns' scales (SCALED; else unused)
    dQ = dP
    sweep = 0
    while (sweep < sweeps) & (busy > 0):
        mine = tl.zeros([HP], dtype=tl.int32)
        s = HP  # level: pairs P block j x Q block j (blocks of s positions), Q rolled s times
        while s >= 1:
            idx_roll = (k // s) * s + (k % s + 1) % s
            idx_roll1 = (k1 // s) * s + (k1 % s + 1) % s
            if TRACK or SCALED:  # fresh sums at each level: the updates' errors never pile up past a level
                nP, nQ = _norms2(xpr, xpi, xqr, xqi, COMPLEX)
            if UNROLL2:  # two rounds per iteration (s even above the last level): fewer register copies
                for _r in range(0, s // 2):
                    xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, dP, dQ, mine = _round(
                        xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, dP, dQ, mine, idx_roll, idx_roll1, tol,
                        ctol, live, COMPLEX, WANT_V, JOINT, FAST, TRACK, SCALED, True)
                    xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, dP, dQ, mine = _round(
                        xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, dP, dQ, mine, idx_roll, idx_roll1, tol,
                        ctol, live, COMPLEX, WANT_V, JOINT, FAST, TRACK, SCALED, True)
                if s == 1:
                    xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, dP, dQ, mine = _round(
                        xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, dP, dQ, mine, idx_roll, idx_roll1, tol,
                        ctol, live, COMPLEX, WANT_V, JOINT, FAST, TRACK, SCALED, False)
            else:
                for _r in range(0, s):
                    xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, dP, dQ, mine = _round(
                        xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, nP, nQ, dP, dQ, mine, idx_roll, idx_roll1, tol,
                        ctol, live, COMPLEX, WANT_V, JOINT, FAST, TRACK, SCALED, s > 1)
            if SCALED:  # x = d·y back in the tiles (d = 1) before the columns move between levels
                xpr, xpi, xqr, xqi = _scale_pair(xpr, xpi, xqr, xqi, dP, dQ, COMPLEX)
                if WANT_V:
                    vpr, vpi, vqr, vqi = _scale_pair(vpr, vpi, vqr, vqi, dP, dQ, COMPLEX)
                dP = dP * 0.0 + 1.0  # not tl.full: Triton 3.6's layout pass crashed on that loop-carried constant
                dQ = dQ * 0.0 + 1.0
            t = s // 2
            if t >= 1:
                odd = ((k // t) % 2) == 1
                src = (k // (2 * t)) * (2 * t) + k % t
                xpr, xqr = _halve(xpr, xqr, src, odd, t)
                if COMPLEX:
                    xpi, xqi = _halve(xpi, xqi, src, odd, t)
                if WANT_V:
                    vpr, vqr = _halve(vpr, vqr, src, odd, t)
                    if COMPLEX:
                        vpi, vqi = _halve(vpi, vqi, src, odd, t)
                odd1 = ((k1 // t) % 2) == 1
                src1 = (k1 // (2 * t)) * (2 * t) + k1 % t
                nidP = tl.where(odd1, tl.gather(idQ, src1, axis=0), tl.gather(idP, src1, axis=0))
                idQ = tl.where(odd1, tl.gather(idQ, src1 + t, axis=0), tl.gather(idP, src1 + t, axis=0))
                idP = nidP
            s = t
        last = mine
        busy = tl.max(mine, axis=0)
        sweep += 1
    off_p = (rows[:, None] * NP + idP[None, :]) * CW
    off_q = (rows[:, None] * NP + idQ[None, :]) * CW
    _store_pq(xb, vb, off_p, off_q, xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, None, COMPLEX, WANT_V)
    tl.store(ROT + b, tl.max(last, axis=0))
