"""A Triton test kernel around ``svd_triton_regs._rotate_pair_tracked`` (imported only where Triton is:
``test_svd_triton_complex._tracked_update``)."""

from __future__ import annotations

import triton
import triton.language as tl

from mpslinalg.svd import triton_regs as regs


@triton.jit
def rotate_tracked(P, Q, OUT, SIG, tol, ctol, NP: tl.constexpr, HP: tl.constexpr, STALE0: tl.constexpr):
    """One round of the tracked rotation on the complex ``[NP, HP]`` column tiles ``P``, ``Q``
    (interleaved, rotated in place). ``OUT [4, HP]``: the updated norms ``nP1``, ``nQ1`` and the rotated
    columns' summed squared norms; ``SIG [HP]``: work left. ``STALE0``: pair 0 enters marked stale."""
    rows = tl.arange(0, NP)
    k = tl.arange(0, HP)
    off = (rows[:, None] * HP + k[None, :]) * 2
    pr = tl.load(P + off)
    pi = tl.load(P + off + 1)
    qr = tl.load(Q + off)
    qi = tl.load(Q + off + 1)
    nP, nQ = regs._norms2(pr, pi, qr, qi, True)
    if STALE0:
        nP = tl.where(k == 0, -1.0, nP)
    sig, pr, pi, qr, qi, _vpr, _vpi, _vqr, _vqi, nP1, nQ1 = regs._rotate_pair_tracked(
        pr, pi, qr, qi, pr, pi, qr, qi, nP, nQ, tol, ctol, k < HP, True, False, False)
    fP, fQ = regs._norms2(pr, pi, qr, qi, True)
    tl.store(P + off, pr)
    tl.store(P + off + 1, pi)
    tl.store(Q + off, qr)
    tl.store(Q + off + 1, qi)
    tl.store(OUT + k, nP1)
    tl.store(OUT + HP + k, nQ1)
    tl.store(OUT + 2 * HP + k, fP)
    tl.store(OUT + 3 * HP + k, fQ)
    tl.store(SIG + k, sig.to(tl.int32))
