"""CUDA (Triton) kernels of the SVD family's Jacobi contract (``mpslinalg.svd``: ``jacobi``).

Imported lazily by :mod:`mpslinalg.svd` on CUDA (Triton ships with CUDA builds of torch), and on
the CPU under ``TRITON_INTERPRET=1`` (the tests). One launch runs the whole one-sided Jacobi
iteration of every matrix of the batch — what the torch-op kernel does in ``~35 x (n - 1)`` small
launches per sweep and ``metal/svd.metal``'s ``svd_jacobi_small`` does on Apple GPUs:

* the same round-robin (circle-method) ordering: in round ``r`` the players are ``0`` and
  ``1 + (j - 1 + r) mod (n - 1)``, pair ``i`` is ``(player(i), player(n - 1 - i))``;
* the same rotation (:func:`_rotation`: rotate when ``|g| > tol·√a·√b``, square roots taken
  separately; only ``|g| > ctol·√a·√b`` counts as work left; Rutishauser's smaller angle; the
  complex phase split off), correctly rounded divisions and square roots as torch and Metal;
* the same stopping rule as ``svd_jacobi_small``: a matrix stops after its first sweep without a
  significant rotation, at most ``sweeps`` sweeps (decided on the GPU: no host sync), and
  ``rotated[b]`` says whether matrix ``b`` still rotated in its last sweep (``info = 2``).

Two kernels, by the (even, padded) order ``n``:

``n <= 4`` — one matrix per lane
    Generated source (:func:`lane_source`): every entry of ``X`` and ``V`` is a register of its
    lane, the ``n − 1`` rounds of ``n/2`` pairs are unrolled. 128 matrices per program.
``6 <= n <= 64`` — one matrix per program
    All ``n/2`` disjoint pairs of a round at once as ``[n, n/2]`` tiles: the columns of the round's
    ``p`` and ``q`` players are gathered from the matrix (kept in its own ``X``/``V`` buffer, which
    stays in L1/L2), their Gram entries are column sums, the rotation is elementwise, and the
    rotated columns are written back in place; a barrier separates the rounds.

float32 and complex64 (interleaved pairs, as ``torch.view_as_real``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .small_triton import BLOCK, load_generated

__all__ = ["LANE_MAX", "MAX_N", "fits", "jacobi", "lane_source"]

#: Largest (even) order of the one-matrix-per-lane kernel.
LANE_MAX = 4
#: Largest (even) order of the one-matrix-per-program kernel.
MAX_N = 64


def fits(n: int) -> bool:
    """Whether ``n x n`` (``n`` even) matrices are served by one of the kernels."""
    return n % 2 == 0 and 2 <= n <= MAX_N


@triton.jit
def _rotation(a, b, gr, gi, tol, ctol, active, COMPLEX: tl.constexpr):
    """Jacobi rotation of pairs with ``a = |x_p|², b = |x_q|², g = x_pᴴ x_q = gr + i·gi``.

    Returns ``(sig, c, sr, si)``: ``sig`` the rotation counts against convergence, ``c`` and
    ``se = sr + i·si`` with ``x_p' = c x_p − conj(se) x_q``, ``x_q' = se x_p + c x_q`` (``c = 1``,
    ``se = 0`` where nothing is rotated: an exact no-op).
    """
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
    return sig, c, sr, si


@triton.jit
def _rotate_real(p, q, c, s):
    """``(c p − s q, s p + c q)``: a real rotation of two columns (or entries)."""
    return c * p - s * q, s * p + c * q


@triton.jit
def _rotate_complex(pr, pi, qr, qi, c, sr, si):
    """``(c p − conj(se) q, se p + c q)`` with ``se = sr + i si``, in real and imaginary parts."""
    npr = c * pr - (sr * qr + si * qi)
    npi = c * pi - (sr * qi - si * qr)
    nqr = (sr * pr - si * pi) + c * qr
    nqi = (sr * pi + si * pr) + c * qi
    return npr, npi, nqr, nqi


# --------------------------------------------------------------------------------------------------
# 6 <= n <= 64: one matrix per program
# --------------------------------------------------------------------------------------------------


@triton.jit
def _jacobi_tile_kernel(X, V, ROT, n, sweeps, tol, ctol,
                        COMPLEX: tl.constexpr, WANT_V: tl.constexpr, NP: tl.constexpr, HP: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    CW: tl.constexpr = 2 if COMPLEX else 1  # floats per element
    h = n // 2
    rows = tl.arange(0, NP)
    pairs = tl.arange(0, HP)
    live = pairs < h
    inside = (rows[:, None] < n) & live[None, :]
    xb = X + b * n * n * CW
    vb = V + b * n * n * CW
    last = tl.zeros([HP], dtype=tl.int32)
    busy = tl.max(live.to(tl.int32), axis=0)
    sweep = 0
    while (sweep < sweeps) & (busy > 0):
        mine = tl.zeros([HP], dtype=tl.int32)
        for r in range(0, n - 1):
            p = tl.where(pairs == 0, 0, 1 + (pairs - 1 + r) % (n - 1))
            q = 1 + (n - 2 - pairs + r) % (n - 1)
            op = (rows[:, None] * n + p[None, :]) * CW
            oq = (rows[:, None] * n + q[None, :]) * CW
            xpr = tl.load(xb + op, mask=inside, other=0.0)
            xqr = tl.load(xb + oq, mask=inside, other=0.0)
            if WANT_V:
                vpr = tl.load(vb + op, mask=inside, other=0.0)
                vqr = tl.load(vb + oq, mask=inside, other=0.0)
            if COMPLEX:
                xpi = tl.load(xb + op + 1, mask=inside, other=0.0)
                xqi = tl.load(xb + oq + 1, mask=inside, other=0.0)
                a = tl.sum(xpr * xpr + xpi * xpi, axis=0)
                bb = tl.sum(xqr * xqr + xqi * xqi, axis=0)
                gr = tl.sum(xpr * xqr + xpi * xqi, axis=0)
                gi = tl.sum(xpr * xqi - xpi * xqr, axis=0)
                sig, c, sr, si = _rotation(a, bb, gr, gi, tol, ctol, live, COMPLEX)
                xpr, xpi, xqr, xqi = _rotate_complex(xpr, xpi, xqr, xqi, c[None, :], sr[None, :], si[None, :])
                if WANT_V:
                    vpi = tl.load(vb + op + 1, mask=inside, other=0.0)
                    vqi = tl.load(vb + oq + 1, mask=inside, other=0.0)
                    vpr, vpi, vqr, vqi = _rotate_complex(vpr, vpi, vqr, vqi, c[None, :], sr[None, :], si[None, :])
            else:
                a = tl.sum(xpr * xpr, axis=0)
                bb = tl.sum(xqr * xqr, axis=0)
                gr = tl.sum(xpr * xqr, axis=0)
                sig, c, sr, si = _rotation(a, bb, gr, gr, tol, ctol, live, COMPLEX)
                xpr, xqr = _rotate_real(xpr, xqr, c[None, :], sr[None, :])
                if WANT_V:
                    vpr, vqr = _rotate_real(vpr, vqr, c[None, :], sr[None, :])
            mine = mine | sig.to(tl.int32)
            tl.debug_barrier()  # every thread has read the round's columns before any is rewritten
            tl.store(xb + op, xpr, mask=inside)
            tl.store(xb + oq, xqr, mask=inside)
            if COMPLEX:
                tl.store(xb + op + 1, xpi, mask=inside)
                tl.store(xb + oq + 1, xqi, mask=inside)
            if WANT_V:
                tl.store(vb + op, vpr, mask=inside)
                tl.store(vb + oq, vqr, mask=inside)
                if COMPLEX:
                    tl.store(vb + op + 1, vpi, mask=inside)
                    tl.store(vb + oq + 1, vqi, mask=inside)
            tl.debug_barrier()  # the next round reads what this one wrote
        last = mine
        busy = tl.max(mine, axis=0)
        sweep += 1
    tl.store(ROT + b, tl.max(last, axis=0))


# --------------------------------------------------------------------------------------------------
# n <= 4: one matrix per lane (generated, unrolled)
# --------------------------------------------------------------------------------------------------


def _players(n: int, r: int) -> list[tuple[int, int]]:
    """The pairs of round ``r`` of the circle method (as ``metal/svd.metal``'s ``svd_player``)."""
    def player(j: int) -> int:
        return 0 if j == 0 else 1 + (j - 1 + r) % (n - 1)
    return [(player(i), player(n - 1 - i)) for i in range(n // 2)]


def lane_source(n: int, is_complex: bool, want_v: bool) -> str:
    """Source of the one-matrix-per-lane Jacobi kernel for even ``n <= LANE_MAX``.

    ``kernel(X, V, ROT, B, sweeps, tol, ctol, BLOCK)``: the contract of :func:`jacobi` on the
    contiguous ``[B, n, n]`` buffers (interleaved pairs for complex64), ``BLOCK`` matrices per
    program. Rotations and their parameters are :func:`_rotation`, :func:`_rotate_real` and
    :func:`_rotate_complex`, shared with the tile kernel.
    """
    if n % 2 or not 2 <= n <= LANE_MAX:
        raise ValueError(f"lane_source: n must be even and in [2, {LANE_MAX}], got {n}")
    w = 2 if is_complex else 1
    parts = ("r", "i") if is_complex else ("r",)
    mats = ("x", "v") if want_v else ("x",)
    L = [
        "# Generated by mpslinalg.kernels.svd_triton.lane_source: do not edit.",
        "import triton",
        "import triton.language as tl",
        "",
        "from mpslinalg.kernels.svd_triton import _rotate_complex, _rotate_real, _rotation",
        "",
        "",
        "@triton.jit",
        "def kernel(X, V, ROT, B, sweeps, tol, ctol, BLOCK: tl.constexpr):",
        "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
        "    mask = offs < B",
        f"    base = offs * {n * n * w}",
    ]
    ptr = {"x": "X", "v": "V"}
    for mname in mats:
        for i in range(n):
            for j in range(n):
                for c, part in enumerate(parts):
                    L.append(f"    {mname}{i}_{j}{part} = tl.load({ptr[mname]} + base + {(i * n + j) * w + c}, "
                             "mask=mask, other=0.0)")
    L += [
        "    busy = mask",
        "    last = tl.zeros([BLOCK], dtype=tl.int1)",
        "    anybusy = tl.max(busy.to(tl.int32), axis=0)",
        "    sweep = 0",
        "    while (sweep < sweeps) & (anybusy > 0):",
        "        mine = tl.zeros([BLOCK], dtype=tl.int1)",
    ]
    I8 = " " * 8
    for r in range(n - 1):
        for p, q in _players(n, r):
            xp = [f"x{i}_{p}" for i in range(n)]
            xq = [f"x{i}_{q}" for i in range(n)]
            if is_complex:
                a = " + ".join(f"{e}r * {e}r + {e}i * {e}i" for e in xp)
                bq = " + ".join(f"{e}r * {e}r + {e}i * {e}i" for e in xq)
                gr = " + ".join(f"{ep}r * {eq}r + {ep}i * {eq}i" for ep, eq in zip(xp, xq))
                gi = " + ".join(f"{ep}r * {eq}i - {ep}i * {eq}r" for ep, eq in zip(xp, xq))
            else:
                a = " + ".join(f"{e}r * {e}r" for e in xp)
                bq = " + ".join(f"{e}r * {e}r" for e in xq)
                gr = " + ".join(f"{ep}r * {eq}r" for ep, eq in zip(xp, xq))
                gi = "gr"
            L += [f"{I8}# round {r}, pair ({p}, {q})", f"{I8}a = {a}", f"{I8}bb = {bq}", f"{I8}gr = {gr}"]
            if is_complex:
                L.append(f"{I8}gi = {gi}")
            L += [f"{I8}sig, c, sr, si = _rotation(a, bb, gr, {gi}, tol, ctol, busy, {is_complex})",
                  f"{I8}mine = mine | sig"]
            for mname in mats:
                for i in range(n):
                    ep, eq = f"{mname}{i}_{p}", f"{mname}{i}_{q}"
                    if is_complex:
                        L.append(f"{I8}{ep}r, {ep}i, {eq}r, {eq}i = _rotate_complex({ep}r, {ep}i, {eq}r, {eq}i, "
                                 "c, sr, si)")
                    else:
                        L.append(f"{I8}{ep}r, {eq}r = _rotate_real({ep}r, {eq}r, c, sr)")
    L += [
        f"{I8}last = tl.where(busy, mine, last)",
        f"{I8}busy = busy & mine",
        f"{I8}anybusy = tl.max(busy.to(tl.int32), axis=0)",
        f"{I8}sweep += 1",
    ]
    for mname in mats:
        for i in range(n):
            for j in range(n):
                for c, part in enumerate(parts):
                    L.append(f"    tl.store({ptr[mname]} + base + {(i * n + j) * w + c}, {mname}{i}_{j}{part}, "
                             "mask=mask)")
    L.append("    tl.store(ROT + offs, last.to(tl.int32), mask=mask)")
    return "\n".join(L) + "\n"


_LANE_KERNELS: dict[tuple[int, bool, bool], object] = {}


def _lane_kernel(n: int, is_complex: bool, want_v: bool):
    key = (n, is_complex, want_v)
    fn = _LANE_KERNELS.get(key)
    if fn is None:
        stem = f"svd_jacobi_lane_{n}_{'c' if is_complex else 'f'}{'_v' if want_v else ''}"
        fn = load_generated(lane_source(n, is_complex, want_v), stem).kernel
        _LANE_KERNELS[key] = fn
    return fn


# --------------------------------------------------------------------------------------------------
# Launch
# --------------------------------------------------------------------------------------------------


def _pow2(x: int) -> int:
    return max(2, 1 << (max(x, 1) - 1).bit_length())


def jacobi(X: torch.Tensor, V: torch.Tensor | None, sweeps: int, tol: float, ctol: float
           ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """One-sided Jacobi on the columns of every ``X`` of the batch, in place, in one launch.

    Parameters
    ----------
    X : torch.Tensor
        Contiguous ``[B, n, n]`` float32/complex64, ``n`` even, ``n <= MAX_N`` (:func:`fits`);
        rotated in place.
    V : torch.Tensor or None
        Contiguous ``[B, n, n]`` (usually the identity) receiving the same column rotations, in
        place; None to skip.
    sweeps : int
        Most sweeps per matrix (each matrix stops after a sweep without a significant rotation).
    tol, ctol : float
        Rotation and convergence thresholds (see :mod:`mpslinalg.svd`).

    Returns
    -------
    (X, V, rotated)
        ``X`` and ``V`` (the same tensors) and ``rotated`` ``[B]`` bool: the matrix made a
        significant rotation in its last sweep (not converged within ``sweeps``).
    """
    Bn, rows, n = X.shape
    if rows != n or not fits(n):
        raise ValueError(f"svd_triton.jacobi: X must be [B, n, n] with n even and <= {MAX_N}, got "
                         f"{tuple(X.shape)}")
    if X.dtype not in (torch.float32, torch.complex64) or not X.is_contiguous():
        raise ValueError(f"svd_triton.jacobi: X must be contiguous float32/complex64, got {X.dtype}")
    if V is not None and (V.shape != X.shape or V.dtype != X.dtype or not V.is_contiguous()):
        raise ValueError("svd_triton.jacobi: V must be a contiguous tensor of X's shape and dtype")
    rot = torch.empty(Bn, dtype=torch.int32, device=X.device)
    if Bn == 0:
        return X, V, rot.bool()
    cplx = X.is_complex()
    x = torch.view_as_real(X) if cplx else X
    v = (torch.view_as_real(V) if cplx else V) if V is not None else x
    sweeps = int(sweeps)
    if n <= LANE_MAX:
        kern = _lane_kernel(n, cplx, V is not None)
        kern[(-(-Bn // BLOCK),)](x, v, rot, Bn, sweeps, float(tol), float(ctol), BLOCK=BLOCK, num_warps=4)
    else:
        np_, hp = _pow2(n), _pow2(n // 2)
        tile = np_ * hp * (2 if cplx else 1) * (2 if V is not None else 1)
        warps = 1 if tile <= 512 else (2 if tile <= 2048 else 4)
        _jacobi_tile_kernel[(Bn,)](x, v, rot, n, sweeps, float(tol), float(ctol), COMPLEX=cplx,
                                   WANT_V=V is not None, NP=np_, HP=hp, num_warps=warps)
    return X, V, rot != 0
