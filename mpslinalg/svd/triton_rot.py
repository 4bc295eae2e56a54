"""The Jacobi rotation helpers shared by the SVD family's Triton kernels.

:mod:`mpslinalg.svd.triton_jacobi` (the memory tile kernel and the generated one-matrix-per-lane
sources), :mod:`mpslinalg.svd.triton_regs` (the register-resident kernels),
:mod:`mpslinalg.svd.triton_fused` and :mod:`mpslinalg.svd.triton_complete` take them
from here: one module that imports no other of the family, so none of them imports another in a circle.

* :func:`_rotation` / :func:`_rotation_p`: the angle of a pair from its column sums, the rotate and
  convergence thresholds (``mpslinalg.svd``'s rule);
* :func:`_rotate_real` / :func:`_rotate_complex`: the rotation applied to two columns (or entries);
* :func:`_store_pq`: the ``p`` and ``q`` column tiles of ``X`` (and ``V``) written back;
* :func:`_pow2i`: an exact power of two from its exponent;
* :data:`UNIFORM`: the launch option every kernel of the family with a matrix spread over lanes takes.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__: list[str] = []  # Triton helpers of the family's kernels, not a public API

#: Launch options of the family's kernels that spread a matrix over a warp's lanes (no FMA contraction).
#: Triton reduces within a warp by butterfly shuffles and leaves a copy of the sum in every lane that
#: holds the column. With contraction a lane fuses its own product with its partner's rounded one
#: (``FFMA x_L x_L shfl(x_K²)``), so two copies can differ in the last bit; a rotation or convergence
#: test at its threshold, a σ rank or a norm order then disagrees between lanes. On the H200 (Triton 3.6)
#: that split the Jacobi sweep loop's exit inside a warp, and the next round's shuffles ran with lanes
#: missing: stores to garbage addresses and hangs (issue 12, docs/evidence/svd.md). Without contraction both
#: lanes of a butterfly step add the same two rounded values (IEEE addition commutes): every copy is
#: bit-identical, as the kernels assume. The one-matrix-per-lane kernels keep their sums in one thread
#: and do not need it.
UNIFORM = {"enable_fp_fusion": False}


@triton.jit
def _rotation(a, b, gr, gi, tol, ctol, active, COMPLEX: tl.constexpr):
    """Jacobi rotation of pairs with ``a = |x_p|², b = |x_q|², g = x_pᴴ x_q = gr + i·gi``.

    Returns ``(sig, c, sr, si)``: ``sig`` the rotation counts against convergence, ``c`` and
    ``se = sr + i·si`` with ``x_p' = c x_p − conj(se) x_q``, ``x_q' = se x_p + c x_q`` (``c = 1``,
    ``se = 0`` where nothing is rotated: an exact no-op).
    """
    return _rotation_p(a, b, gr, gi, tol, ctol, active, COMPLEX, False)


@triton.jit
def _rotation_p(a, b, gr, gi, tol, ctol, active, COMPLEX: tl.constexpr, FAST: tl.constexpr):
    """:func:`_rotation`; with ``FAST`` the angle (``t``, ``c``, ``se``) from the hardware's approximate
    division, square root and reciprocal square root (a few ulps: the rotation stays unitary to
    ``O(u)``), while the rotate/convergence decisions and ``ζ`` keep the correctly rounded ones
    (``sqrt.approx`` flushes subnormal norms to zero: the thresholds must not see that)."""
    sig, c, sr, si, _tg = _rotation_t(a, b, gr, gi, tol, ctol, active, COMPLEX, FAST)
    return sig, c, sr, si


@triton.jit
def _rotation_t(a, b, gr, gi, tol, ctol, active, COMPLEX: tl.constexpr, FAST: tl.constexpr):
    """:func:`_rotation_p` and ``tg = t·|g|`` (0 where nothing is rotated): the rotated pair's squared
    column norms are ``a − tg`` and ``b + tg`` (``t`` the smaller root of ``t² + 2ζt − 1 = 0``), the
    update of LAPACK ``xGSVJ0``'s ``SVA`` that the norm-tracking kernels use instead of two sums."""
    if COMPLEX:
        gm = tl.maximum(tl.abs(gr), tl.abs(gi))  # |g| without underflow of the squares
        gs = tl.where(gm > 0.0, gm, 1.0)
        hr = tl.math.div_rn(gr, gs)
        hi = tl.math.div_rn(gi, gs)
        ag = gm * tl.sqrt_rn(hr * hr + hi * hi)
    else:
        ag = tl.abs(gr)
    scale = tl.sqrt_rn(a) * tl.sqrt_rn(b)  # never sqrt(a * b): a * b can overflow or underflow
    rot = (ag > tol * scale) & active
    sig = (ag > ctol * scale) & active
    safe = tl.where(rot, ag, 1.0)
    zeta = tl.math.div_rn(b - a, 2.0 * safe)
    az = tl.abs(zeta)
    # 1 + zeta^2 overflows above ~1.8e19; there t = 1 / (2|zeta|) to float precision
    huge = az >= 1.0e18
    if FAST:
        t = tl.where(huge, 0.5 / tl.where(huge, az, 1.0), 1.0 / (az + tl.sqrt(1.0 + az * az)))
        t = tl.where(zeta >= 0.0, t, -t)
        c = tl.math.rsqrt(1.0 + t * t)
        ct = c * t
        sr = tl.where(rot, ct * (gr / safe), 0.0)
        si = sr
        if COMPLEX:
            si = tl.where(rot, ct * (gi / safe), 0.0)
    else:
        t = tl.where(huge, tl.math.div_rn(0.5, tl.where(huge, az, 1.0)),
                     tl.math.div_rn(1.0, az + tl.sqrt_rn(1.0 + az * az)))
        t = tl.where(zeta >= 0.0, t, -t)
        c = tl.math.div_rn(1.0, tl.sqrt_rn(1.0 + t * t))
        ct = c * t
        sr = tl.where(rot, ct * tl.math.div_rn(gr, safe), 0.0)
        si = sr
        if COMPLEX:
            si = tl.where(rot, ct * tl.math.div_rn(gi, safe), 0.0)
    c = tl.where(rot, c, 1.0)
    return sig, c, sr, si, tl.where(rot, t * ag, 0.0)


@triton.jit
def _rotate_real(p, q, c, s):
    """``(c p − s q, s p + c q)``: a real rotation of two columns (or entries); the multiply-adds are
    explicit (:data:`UNIFORM` launches contract nothing)."""
    return tl.fma(c, p, -(s * q)), tl.fma(s, p, c * q)


@triton.jit
def _rotate_complex(pr, pi, qr, qi, c, sr, si):
    """``(c p − conj(se) q, se p + c q)`` with ``se = sr + i si``, in real and imaginary parts."""
    npr = tl.fma(c, pr, -tl.fma(sr, qr, si * qi))
    npi = tl.fma(c, pi, -tl.fma(sr, qi, -(si * qr)))
    nqr = tl.fma(c, qr, tl.fma(sr, pr, -(si * pi)))
    nqi = tl.fma(c, qi, tl.fma(sr, pi, si * pr))
    return npr, npi, nqr, nqi


@triton.jit
def _pow2i(k):
    """``2**k`` as float32 for int32 ``k`` in ``[-126, 127]``, built from its bits (exact)."""
    return ((k + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def _store_pq(xb, vb, off_p, off_q, xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, mask,
              COMPLEX: tl.constexpr, WANT_V: tl.constexpr):
    """Write the ``p`` and ``q`` column tiles of ``X`` (at ``xb``) and, with ``WANT_V``, of ``V`` (at ``vb``)
    back: ``off_p``/``off_q`` are the tiles' float offsets (the real part; ``+ 1`` the imaginary part of
    interleaved complex), ``mask`` the live entries (None: every entry)."""
    tl.store(xb + off_p, xpr, mask=mask)
    tl.store(xb + off_q, xqr, mask=mask)
    if COMPLEX:
        tl.store(xb + off_p + 1, xpi, mask=mask)
        tl.store(xb + off_q + 1, xqi, mask=mask)
    if WANT_V:
        tl.store(vb + off_p, vpr, mask=mask)
        tl.store(vb + off_q, vqr, mask=mask)
        if COMPLEX:
            tl.store(vb + off_p + 1, vpi, mask=mask)
            tl.store(vb + off_q + 1, vqi, mask=mask)
