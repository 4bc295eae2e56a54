"""CUDA (Triton) kernels of the SVD family's Jacobi contract (``mpslinalg.svd``: ``jacobi``).

Imported lazily by :mod:`mpslinalg.svd` on CUDA (Triton ships with CUDA builds of torch), and on
the CPU under ``TRITON_INTERPRET=1`` (the tests). One launch runs the whole one-sided Jacobi
iteration of every matrix of the batch — what the torch-op kernel does in ``~35 x (n - 1)`` small
launches per sweep and ``metal/svd.metal``'s ``svd_jacobi_small`` does on Apple GPUs:

* the same round-robin (circle-method) ordering: in round ``r`` the players are ``0`` and
  ``1 + (j - 1 + r) mod (n - 1)``, pair ``i`` is ``(player(i), player(n - 1 - i))``;
* the same rotation (``svd_triton_rot._rotation``: rotate when ``|g| > tol·√a·√b``, square roots
  taken separately; only ``|g| > ctol·√a·√b`` counts as work left; Rutishauser's smaller angle; the
  complex phase split off), correctly rounded divisions and square roots as torch and Metal;
* the same stopping rule as ``svd_jacobi_small``: a matrix stops after its first sweep without a
  significant rotation, at most ``sweeps`` sweeps (decided on the GPU: no host sync), and
  ``rotated[b]`` says whether matrix ``b`` still rotated in its last sweep (``info = 2``).

Three kernels:

whole SVD, ``n <= m <= 4`` (float32; complex64 ``m <= 2``) — one matrix per lane
    Generated source (:func:`fused_source`): scaling, row/column sorting, Householder QR, the
    Jacobi sweeps, sorting of ``σ`` and the products for ``U`` and ``V``, all in the lane's
    registers: one launch for the SVD of a batch of 3x3 matrices (:func:`svd_tall`, the contract of
    the CPU's :mod:`mpslinalg.svd.c`).
Jacobi, ``n <= 8`` (float32; complex64 ``n <= 4``) — one matrix per lane
    Generated source (:func:`lane_source`): every entry of ``X`` and ``V`` is a register of its
    lane; one round of ``n/2`` pairs is unrolled inside the loop over rounds (the circle method
    moves the columns by the same slot permutation every round). 128 matrices per program.
Jacobi, ``n <= 64`` — one matrix per program
    All ``n/2`` disjoint pairs of a round at once as ``[n, n/2]`` tiles: the columns of the round's
    ``p`` and ``q`` players are gathered from the matrix (kept in its own ``X``/``V`` buffer, which
    stays in L1/L2), their Gram entries are column sums, the rotation is elementwise, and the
    rotated columns are written back in place; a barrier separates the rounds. (Gathering by a
    permutation product instead would cost ``n³`` flops a round, more than the rotations.)

float32 and complex64 (interleaved pairs, as ``torch.view_as_real``).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ..kernels.codegen import load_generated, warn_once
from .kernels import thresholds
from .triton_rot import UNIFORM, _rotate_complex, _rotate_real, _rotation, _store_pq

__all__ = ["FUSED_MAX", "LANE_MAX", "MAX_N", "fits", "fused_fits", "fused_source", "jacobi", "lane_source", "svd_tall"]

#: Largest (even) order of the one-matrix-per-lane Jacobi kernel, by dtype (its registers: 2n² floats
#: per lane for float32 with V).
#: Matrices per Triton program of the one-matrix-per-lane kernels (one lane each).
BLOCK = 128
LANE_MAX = {torch.float32: 8, torch.complex64: 4}
#: Largest (even) order of the one-matrix-per-program kernel.
MAX_N = 64
#: Warps of the one-matrix-per-program kernel (None: by tile size, ~16 floats of each tile a thread).
TILE_WARPS: int | None = None
#: Register cap per thread of the register-resident kernels (Triton's ``maxnreg``; None: ptxas' choice).
TILE_MAXNREG: int | None = None
#: Which one-matrix-per-program kernel (the register-resident ones: :mod:`mpslinalg.svd.triton_regs`):
#: "registers" (one ``[n, n]`` tile in slot order), "pairs" (the pairs' columns as two tiles), "halving"
#: (the recursive-halving ordering for n a power of two, "pairs" otherwise), "auto" (complex: "halving",
#: float32: "registers") or "memory" (columns gathered from the matrix's buffer every round,
#: :func:`_jacobi_tile_kernel`). H200 (Triton 3.6), Jacobi alone, complex64 4096x64x64: registers 18.95 ms,
#: pairs 16.4, halving 14.25 (joint sums, fast angle; without them 30.6 / 550: keep both on), memory 470;
#: float32 4096x32x32: registers 2.27, memory 30.8 (benchmarks/bench_svd_c64.py, docs/evidence/svd.md).
TILE_KERNEL = "auto"
#: The register-resident choices of TILE_KERNEL (the memory one aside).
REG_KERNELS = ("auto", "registers", "pairs", "halving")
#: Complex register kernels: the four column sums of a round as one ``tl.reduce`` (one exchange
#: between warps) instead of four ``tl.sum``.
REG_JOINT_REDUCE = True
#: The halving kernel: the rotation angle from approximate division and square roots (:func:`_rotation_p`).
REG_FAST_ROTATION = True
#: The halving kernel: squared column norms carried and updated after each rotation (LAPACK xGSVJ0's
#: SVA, summed again at each level and after cancellation), so a round sums only ``x_pᴴ x_q``.
#: Off until measured on the GPU (environment: MPSLINALG_SVD_TRACK_NORMS=1).
REG_TRACK_NORMS = os.environ.get("MPSLINALG_SVD_TRACK_NORMS", "0") == "1"
#: The halving kernel: two rounds per loop iteration (same operations in the same order); sm_90 SASS
#: (Triton 3.6) had ~64 register copies a round for the rolled Q tiles, ~16 unrolled. On (environment
#: MPSLINALG_SVD_UNROLL2=0 turns it off): with REG_SCALED_ROTATIONS the H200's fastest (below).
REG_UNROLL2 = os.environ.get("MPSLINALG_SVD_UNROLL2", "1") == "1"
#: The halving kernel: LAPACK xGSVJ0's fast scaled rotations (columns kept as ``x = d·y``: two
#: multiply-adds per real output instead of three; the norms tracked as REG_TRACK_NORMS). sm_90 SASS
#: (Triton 3.6) per round, unrolled and tracked: 625 instructions vs 1013 before. H200 (2026-12-01 round 2,
#: complex64 4096x64x64, Jacobi with V): 10.01 ms vs 14.09 (graded 8.46 vs 11.87; tracked + unrolled
#: 10.91; at 8 warps 12.25), svd_impl 19.75 vs 23.80, same sweeps, LAPACK ratios 10.5 / 5.52 (< 50).
#: On (environment MPSLINALG_SVD_SCALED=0 turns it off).
REG_SCALED_ROTATIONS = os.environ.get("MPSLINALG_SVD_SCALED", "1") == "1"
_REG_FAILED: list[str] = []  # why the register variant did not build, once it did not
#: Largest ``m`` (and ``n <= m``) of the one-matrix-per-lane kernel of the whole SVD (generated code
#: grows as m²n² and so does the compile time: complex64 4x4 took ~4 min of Triton + ptxas on a loaded
#: 2-core machine, 3x3 ~70 s; complex64 4x4 takes the QR + tile-kernel path instead).
FUSED_MAX = {torch.float32: 4, torch.complex64: 2}


def fits(n: int) -> bool:
    """Whether ``n x n`` (``n`` even) matrices are served by one of the kernels."""
    return n % 2 == 0 and 2 <= n <= MAX_N


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
            xpi, xqi, vpr, vqr, vpi, vqi = xpr, xqr, xpr, xqr, xpr, xqr  # unused unless COMPLEX / WANT_V
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
            _store_pq(xb, vb, op, oq, xpr, xpi, xqr, xqi, vpr, vpi, vqr, vqi, inside, COMPLEX, WANT_V)
            tl.debug_barrier()  # the next round reads what this one wrote
        last = mine
        busy = tl.max(mine, axis=0)
        sweep += 1
    tl.store(ROT + b, tl.max(last, axis=0))


# --------------------------------------------------------------------------------------------------
# Small orders: one matrix per lane (generated)
# --------------------------------------------------------------------------------------------------


def _players(n: int, r: int) -> list[tuple[int, int]]:
    """The pairs of round ``r`` of the circle method (as ``metal/svd.metal``'s ``svd_player``)."""
    def player(j: int) -> int:
        return 0 if j == 0 else 1 + (j - 1 + r) % (n - 1)
    return [(player(i), player(n - 1 - i)) for i in range(n // 2)]


def _jacobi_lines(n: int, is_complex: bool, mats: tuple[str, ...], busy: str) -> list[str]:
    """The sweep loop on the lane's registers ``x{i}_{j}{r,i}`` (and ``v...``): while some lane of
    the program is busy and fewer than ``sweeps`` sweeps ran, one sweep of the ``n − 1`` rounds;
    ``busy`` (a ``[BLOCK]`` bool) masks the lanes that have stopped. Leaves ``last``: the lane
    rotated significantly in its last sweep.

    The columns live in *slots* (pair ``k`` of a round = slots ``2k, 2k+1``); the circle method moves
    them between rounds by the same slot permutation every round, so one round's code is written
    once inside a loop of ``n − 1`` iterations that ends with that permutation (a register renaming),
    instead of ``n − 1`` unrolled copies (which took minutes to compile at n = 6). After a sweep the
    columns are back in their first slots."""
    parts = ("r", "i") if is_complex else ("r",)
    lay0 = [c for pq in _players(n, 0) for c in pq]  # slot -> column in round 0
    lay1 = [c for pq in _players(n, 1) for c in pq] if n > 2 else lay0
    perm = [lay0.index(c) for c in lay1]  # new slot j takes old slot perm[j] (the same every round)
    names = [(m, i, p) for m in mats for i in range(n) for p in parts]
    L = [f"    s{m}{i}_{k}{p} = {m}{i}_{lay0[k]}{p}" for m, i, p in names for k in range(n)]
    L += [
        f"    busy = {busy}",
        "    last = tl.zeros([BLOCK], dtype=tl.int1)",
        "    anybusy = tl.max(busy.to(tl.int32), axis=0)",
        "    sweep = 0",
        "    while (sweep < sweeps) & (anybusy > 0):",
        "        mine = tl.zeros([BLOCK], dtype=tl.int1)",
        f"        for r in range(0, {n - 1}):",
    ]
    ind = " " * 12
    for k in range(n // 2):
        xp = [f"sx{i}_{2 * k}" for i in range(n)]
        xq = [f"sx{i}_{2 * k + 1}" for i in range(n)]
        if is_complex:
            a = " + ".join(f"{e}r * {e}r + {e}i * {e}i" for e in xp)
            bq = " + ".join(f"{e}r * {e}r + {e}i * {e}i" for e in xq)
            gr = " + ".join(f"{ep}r * {eq}r + {ep}i * {eq}i" for ep, eq in zip(xp, xq))
            gi = " + ".join(f"{ep}r * {eq}i - {ep}i * {eq}r" for ep, eq in zip(xp, xq))
        else:
            a = " + ".join(f"{e}r * {e}r" for e in xp)
            bq = " + ".join(f"{e}r * {e}r" for e in xq)
            gr = " + ".join(f"{ep}r * {eq}r" for ep, eq in zip(xp, xq))
        L += [f"{ind}# pair {k}: slots ({2 * k}, {2 * k + 1})", f"{ind}a = {a}", f"{ind}bb = {bq}", f"{ind}gr = {gr}",
              f"{ind}gi = {gi}" if is_complex else f"{ind}gi = gr",
              f"{ind}sig, c, sr, si = _rotation(a, bb, gr, gi, tol, ctol, busy, {is_complex})",
              f"{ind}mine = mine | sig"]
        for m in mats:
            for i in range(n):
                ep, eq = f"s{m}{i}_{2 * k}", f"s{m}{i}_{2 * k + 1}"
                if is_complex:
                    L.append(f"{ind}{ep}r, {ep}i, {eq}r, {eq}i = "
                             f"_rotate_complex({ep}r, {ep}i, {eq}r, {eq}i, c, sr, si)")
                else:
                    L.append(f"{ind}{ep}r, {eq}r = _rotate_real({ep}r, {eq}r, c, sr)")
    if perm != list(range(n)):
        for m, i, p in names:
            L.append(f"{ind}{', '.join(f's{m}{i}_{k}{p}' for k in range(n))} = "
                     f"{', '.join(f's{m}{i}_{perm[k]}{p}' for k in range(n))}")
    ind = " " * 8
    L += [
        f"{ind}last = tl.where(busy, mine, last)",
        f"{ind}busy = busy & mine",
        f"{ind}anybusy = tl.max(busy.to(tl.int32), axis=0)",
        f"{ind}sweep += 1",
    ]
    return L + [f"    {m}{i}_{lay0[k]}{p} = s{m}{i}_{k}{p}" for m, i, p in names for k in range(n)]


_HEAD = [
    "import triton",
    "import triton.language as tl",
    "",
    "from mpslinalg.svd.triton_rot import _pow2i, _rotate_complex, _rotate_real, _rotation",
    "",
    "",
    "@triton.jit",
]


def lane_source(n: int, is_complex: bool, want_v: bool) -> str:
    """Source of the one-matrix-per-lane Jacobi kernel for even ``n`` (used up to ``LANE_MAX``).

    ``kernel(X, V, ROT, B, sweeps, tol, ctol, BLOCK)``: the contract of :func:`jacobi` on the
    contiguous ``[B, n, n]`` buffers (interleaved pairs for complex64), ``BLOCK`` matrices per
    program. Rotations and their parameters are :mod:`mpslinalg.svd.triton_rot`'s
    ``_rotation``, ``_rotate_real`` and ``_rotate_complex``, shared with the tile kernel.
    """
    if n % 2 or n < 2:
        raise ValueError(f"lane_source: n must be even and >= 2, got {n}")
    w = 2 if is_complex else 1
    parts = ("r", "i") if is_complex else ("r",)
    mats = ("x", "v") if want_v else ("x",)
    L = ["# Generated by mpslinalg.svd.triton_jacobi.lane_source: do not edit.", *_HEAD,
         "def kernel(X, V, ROT, B, sweeps, tol, ctol, BLOCK: tl.constexpr):",
         "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
         "    mask = offs < B",
         f"    base = offs * {n * n * w}"]
    ptr = {"x": "X", "v": "V"}
    for mname in mats:
        for i in range(n):
            for j in range(n):
                for c, part in enumerate(parts):
                    L.append(f"    {mname}{i}_{j}{part} = tl.load({ptr[mname]} + base + {(i * n + j) * w + c}, "
                             "mask=mask, other=0.0)")
    L += _jacobi_lines(n, is_complex, mats, "mask")
    for mname in mats:
        for i in range(n):
            for j in range(n):
                for c, part in enumerate(parts):
                    L.append(f"    tl.store({ptr[mname]} + base + {(i * n + j) * w + c}, {mname}{i}_{j}{part}, "
                             "mask=mask)")
    L.append("    tl.store(ROT + offs, last.to(tl.int32), mask=mask)")
    return "\n".join(L) + "\n"


def _bubble(L: list[str], keys: list[str], items: list[list[str]]) -> None:
    """Stable descending sort of ``keys`` carrying ``items`` (variables swapped with their key):
    the bubble network of adjacent compare-exchanges, swapping only on a strictly larger key."""
    k = len(keys)
    for done in range(k - 1):
        for i in range(k - 1 - done):
            L.append(f"    sw = {keys[i + 1]} > {keys[i]}")
            for a, b in zip([keys[i], *items[i]], [keys[i + 1], *items[i + 1]]):
                L.append(f"    {a}, {b} = tl.where(sw, {b}, {a}), tl.where(sw, {a}, {b})")


def _norm(L: list[str], name: str, parts: list[str]) -> None:
    """``name`` = the 2-norm of the entries ``parts`` (real parts and imaginary parts), scaled by their
    largest magnitude (no underflow of the squares)."""
    L.append(f"    {name}_m = tl.abs({parts[0]})")
    for x in parts[1:]:
        L.append(f"    {name}_m = tl.maximum({name}_m, tl.abs({x}))")
    L.append(f"    {name}_s = tl.where({name}_m > 0.0, {name}_m, 1.0)")
    ss = " + ".join(f"tl.math.div_rn({x}, {name}_s) * tl.math.div_rn({x}, {name}_s)" for x in parts)
    L.append(f"    {name} = {name}_m * tl.sqrt_rn({ss})")


def _geqr2_lines(L: list[str], a: str, h: str, t: str, m: int, n: int, cx: bool) -> None:
    """Householder QR (LAPACK ``xgeqr2``/``xlarfg``: ``beta`` real, ``tau = 0`` for a zero column) of
    the lane's ``m x n`` registers ``{a}{i}_{j}{r,i}`` in place (``R`` on and above the diagonal);
    reflector ``j`` in ``{h}{i}_{j}`` (``i > j``, unit ``h_jj``), ``tau_j = {t}r{j} + i·{t}i{j}``."""
    P = ("r", "i") if cx else ("r",)

    def parts(e: str) -> list[str]:
        return [e + p for p in P]

    for j in range(n):
        below = list(range(j + 1, m))
        if below:
            _norm(L, "xn", [x for i in below for x in parts(f"{a}{i}_{j}")])
        else:
            L.append("    xn = zero")
        ar, ai = f"{a}{j}_{j}r", (f"{a}{j}_{j}i" if cx else "zero")
        L += [f"    wm = tl.maximum(tl.maximum(tl.abs({ar}), tl.abs({ai})), xn)",
              "    ws = tl.where(wm > 0.0, wm, 1.0)",
              f"    mag = wm * tl.sqrt_rn(tl.math.div_rn({ar}, ws) * tl.math.div_rn({ar}, ws) + "
              f"tl.math.div_rn({ai}, ws) * tl.math.div_rn({ai}, ws) + tl.math.div_rn(xn, ws) * tl.math.div_rn(xn, ws))",
              f"    skip = (xn == 0.0) & ({ai} == 0.0)",
              f"    beta = tl.where({ar} >= 0.0, -mag, mag)",
              "    sbeta = tl.where(skip, 1.0, beta)",
              f"    {t}r{j} = tl.where(skip, 0.0, tl.math.div_rn(beta - {ar}, sbeta))",
              f"    {t}i{j} = tl.where(skip, 0.0, tl.math.div_rn(-{ai}, sbeta))"]
        if cx:  # v = x / (alpha - beta), the denominator scaled (its squared modulus may underflow)
            L += [f"    dr = {ar} - beta", f"    di = {ai}",
                  "    ds = tl.maximum(tl.abs(dr), tl.abs(di))",
                  "    ds = tl.where(skip | (ds == 0.0), 1.0, ds)",
                  "    dr = tl.math.div_rn(dr, ds)", "    di = tl.math.div_rn(di, ds)",
                  "    dq = (dr * dr + di * di) * ds"]
            for i in below:
                xr, xi = f"{a}{i}_{j}r", f"{a}{i}_{j}i"
                L += [f"    {h}{i}_{j}r = tl.where(skip, {xr}, tl.math.div_rn({xr} * dr + {xi} * di, dq))",
                      f"    {h}{i}_{j}i = tl.where(skip, {xi}, tl.math.div_rn({xi} * dr - {xr} * di, dq))"]
        else:
            L.append(f"    dd = tl.where(skip, 1.0, {ar} - beta)")
            L += [f"    {h}{i}_{j}r = tl.math.div_rn({a}{i}_{j}r, dd)" for i in below]
        L.append(f"    {ar} = tl.where(skip, {ar}, beta)")
        if cx:
            L.append(f"    {ai} = tl.where(skip, {ai}, 0.0)")
        for c in range(j + 1, n):  # A[j:, c] -= v (conj(tau) vᴴ A[j:, c])
            _reflect_lines(L, a, h, t, j, c, below, cx, conj_tau=True)

def _reflect_lines(L: list[str], a: str, h: str, t: str, j: int, c: int, below: list[int], cx: bool,
                   conj_tau: bool) -> None:
    """``a[j:, c] -= tau' v (vᴴ a[j:, c])`` on the lane's registers, ``v = (1, h[j+1:, j])``, with
    ``tau' = conj(tau)`` (``xgeqr2``'s update of the trailing columns) or ``tau`` (``xorm2r``)."""
    wr = " + ".join([f"{a}{j}_{c}r"] + [f"{h}{i}_{j}r * {a}{i}_{c}r"
                                        + (f" + {h}{i}_{j}i * {a}{i}_{c}i" if cx else "") for i in below])
    L.append(f"    wr = {wr}")
    if cx:
        wi = " + ".join([f"{a}{j}_{c}i"] + [f"{h}{i}_{j}r * {a}{i}_{c}i - {h}{i}_{j}i * {a}{i}_{c}r"
                                            for i in below])
        s1, s2 = ("+", "-") if conj_tau else ("-", "+")
        L += [f"    wi = {wi}", f"    fr = {t}r{j} * wr {s1} {t}i{j} * wi",
              f"    fi = {t}r{j} * wi {s2} {t}i{j} * wr",
              f"    {a}{j}_{c}r = {a}{j}_{c}r - fr", f"    {a}{j}_{c}i = {a}{j}_{c}i - fi"]
        for i in below:
            L += [f"    {a}{i}_{c}r = {a}{i}_{c}r - ({h}{i}_{j}r * fr - {h}{i}_{j}i * fi)",
                  f"    {a}{i}_{c}i = {a}{i}_{c}i - ({h}{i}_{j}r * fi + {h}{i}_{j}i * fr)"]
    else:
        L += [f"    fr = {t}r{j} * wr", f"    {a}{j}_{c}r = {a}{j}_{c}r - fr"]
        L += [f"    {a}{i}_{c}r = {a}{i}_{c}r - {h}{i}_{j}r * fr" for i in below]


def _apply_q_lines(L: list[str], y: str, h: str, t: str, m: int, ncols: int, k: int, cx: bool) -> None:
    """``Y <- H_0 ... H_{k-1} Y`` on the lane's ``m x ncols`` registers ``{y}{i}_{c}{r,i}`` (the
    reflectors of :func:`_geqr2_lines` applied from the last: LAPACK ``xorm2r``)."""
    for j in reversed(range(k)):
        below = list(range(j + 1, m))
        for c in range(ncols):  # Y[j:, c] -= tau v (vᴴ Y[j:, c])
            _reflect_lines(L, y, h, t, j, c, below, cx, conj_tau=False)

def fused_source(m: int, n: int, is_complex: bool, want_uv: bool, full: bool) -> str:
    """Source of the one-matrix-per-lane kernel of the *whole* SVD of ``m x n`` matrices,
    ``n <= m <= FUSED_MAX`` (:func:`svd_tall`'s contract, the algorithm of :mod:`mpslinalg.svd`):

    Power-of-two scaling (``max(|Re|, |Im|)`` into ``[1/2, 1)``; non-finite input gives ``info = 1``
    and NaN outputs), rows sorted by max-modulus and columns by 2-norm (stable, descending),
    Householder QR with LAPACK's ``xlarfg`` conventions, the Jacobi sweeps on ``X = Rᴴ`` (padded to
    an even order; :func:`_jacobi_lines`), ``σ`` sorted (stable, descending), ``V = Pc W Σ⁻¹`` (zero
    columns where ``σ_j <= √tiny·σ₁`` replaced by those of the Householder QR of ``W Σ⁻¹``, as
    :func:`mpslinalg.svd._complete`), ``U = Prᵀ Q [Vj 0; 0 I]`` by the reflectors.
    """
    if not 1 <= n <= m:
        raise ValueError(f"fused_source: need 1 <= n <= m, got {m} x {n}")
    cx = is_complex
    w = 2 if cx else 1
    P = ("r", "i") if cx else ("r",)
    npad = n + n % 2
    ucols = m if full else n

    def parts(e: str) -> list[str]:
        return [e + p for p in P]

    L = ["# Generated by mpslinalg.svd.triton_jacobi.fused_source: do not edit.", *_HEAD,
         "def kernel(A, U, S, V, INFO, B, sweeps, tol, ctol, BLOCK: tl.constexpr):",
         "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
         "    mask = offs < B",
         "    zero = tl.zeros([BLOCK], dtype=tl.float32)",
         "    one = zero + 1.0",
         "    nan = zero + float('nan')",
         "    fin = mask | True"]
    ents = [f"a{i}_{j}" for i in range(m) for j in range(n)]
    for i in range(m):
        for j in range(n):
            for c, p in enumerate(P):
                L.append(f"    a{i}_{j}{p} = tl.load(A + offs * {m * n * w} + {(i * n + j) * w + c}, mask=mask, "
                         "other=0.0)")
    # 1. power-of-two scaling (exact); non-finite matrices are zeroed and flagged
    allp = [x for e in ents for x in parts(e)]
    L.append(f"    amax = tl.abs({allp[0]})")
    for x in allp:
        L += [f"    amax = tl.maximum(amax, tl.abs({x}))", f"    fin = fin & (tl.abs({x}) <= 3.4028234663852886e38)"]
    L += ["    amax = tl.where(fin, amax, 0.0)",
          "    tiny = amax < 7.888609052210118e-31",  # 2^-100: lift by 2^64 first (subnormal maxima)
          "    pre = tl.where(tiny, 1.8446744073709552e19, 1.0)",
          "    am = amax * pre",
          "    e1 = tl.where(am > 0.0, ((am.to(tl.int32, bitcast=True) >> 23) & 255) - 126, 0)",
          "    k1 = tl.minimum(tl.maximum(-e1, -126), 126)",
          "    f1 = _pow2i(k1)",
          "    f2 = _pow2i(-e1 - k1)",
          "    ex = e1 - tl.where(tiny, 64, 0)"]
    L += [f"    {x} = tl.where(fin, {x} * pre * f1 * f2, 0.0)" for x in allp]
    # 2. rows by decreasing max-modulus, columns by decreasing 2-norm (stable)
    for i in range(m):
        mods = [f"tl.sqrt_rn(a{i}_{j}r * a{i}_{j}r + a{i}_{j}i * a{i}_{j}i)" if cx else f"tl.abs(a{i}_{j}r)"
                for j in range(n)]
        L.append(f"    rk{i} = {mods[0]}")
        L += [f"    rk{i} = tl.maximum(rk{i}, {x})" for x in mods[1:]]
        L.append(f"    rp{i} = tl.full([BLOCK], {i}, tl.int32)")
    _bubble(L, [f"rk{i}" for i in range(m)], [[*(x for j in range(n) for x in parts(f"a{i}_{j}")), f"rp{i}"]
                                               for i in range(m)])
    for j in range(n):
        L.append(f"    ck{j} = tl.sqrt_rn({' + '.join(f'{x} * {x}' for i in range(m) for x in parts(f'a{i}_{j}'))})")
        L.append(f"    cp{j} = tl.full([BLOCK], {j}, tl.int32)")
    _bubble(L, [f"ck{j}" for j in range(n)], [[*(x for i in range(m) for x in parts(f"a{i}_{j}")), f"cp{j}"]
                                               for j in range(n)])
    # 3. Householder QR (LAPACK xgeqr2/xlarfg): reflector j is h{i}_{j} (i > j, h_jj = 1), tau t{j}
    _geqr2_lines(L, "a", "h", "t", m, n, cx)
    # 4. Jacobi on X = Rᴴ (npad x npad, zero padded) with V = I
    for i in range(npad):
        for j in range(npad):
            inside = j <= i < n
            L.append(f"    x{i}_{j}r = {f'a{j}_{i}r' if inside else 'zero'}")
            if cx:
                L.append(f"    x{i}_{j}i = {f'-a{j}_{i}i' if inside else 'zero'}")
            if want_uv:
                L += [f"    v{i}_{j}{p} = {'one' if (i == j and p == 'r') else 'zero'}" for p in P]
    L += _jacobi_lines(npad, cx, ("x", "v") if want_uv else ("x",), "mask")
    # 5. sigma = column norms of W = X V (first n columns; the padding never rotates), sorted
    for j in range(n):
        _norm(L, f"s{j}", [x for i in range(n) for x in parts(f"x{i}_{j}")])
    _bubble(L, [f"s{j}" for j in range(n)],
            [[x for i in range(n) for x in parts(f"x{i}_{j}") + (parts(f"v{i}_{j}") if want_uv else [])]
             for j in range(n)])
    L += ["    k2 = tl.minimum(tl.maximum(ex, -126), 126)", "    up1 = _pow2i(k2)", "    up2 = _pow2i(ex - k2)"]
    L += [f"    tl.store(S + offs * {n} + {j}, tl.where(fin, s{j} * up1 * up2, nan), mask=mask)" for j in range(n)]
    L.append("    tl.store(INFO + offs, tl.where(fin, tl.where(last, 2, 0), 1), mask=mask)")
    if not want_uv:
        return "\n".join(L) + "\n"
    # 6. V_A = Pc W Σ⁻¹ (row i of W Σ⁻¹ is row cp{i} of V_A); columns with σ_j <= √tiny·σ₁ (zero or
    # below what Jacobi can orthogonalise) from Householder QR of W Σ⁻¹ (mpslinalg.svd._complete's rule)
    for j in range(n):
        L += [f"    sd{j} = tl.where(s{j} > 0.0, s{j}, 1.0)", f"    zc{j} = s{j} <= {_SQRT_TINY!r} * s0"]
    for i in range(n):
        for j in range(n):
            for p in P:
                L += [f"    w{i}_{j}{p} = tl.math.div_rn(x{i}_{j}{p}, sd{j})", f"    c{i}_{j}{p} = w{i}_{j}{p}",
                      f"    q{i}_{j}{p} = {'one' if (i == j and p == 'r') else 'zero'}"]
    _geqr2_lines(L, "c", "g", "k", n, n, cx)
    _apply_q_lines(L, "q", "g", "k", n, n, n, cx)
    for i in range(n):
        for j in range(n):
            for c, p in enumerate(P):
                L.append(f"    tl.store(V + offs * {n * n * w} + (cp{i} * {n} + {j}) * {w} + {c}, "
                         f"tl.where(fin, tl.where(zc{j}, q{i}_{j}{p}, w{i}_{j}{p}), nan), mask=mask)")
    # 7. U = Prᵀ Q [Vj 0; 0 I]: the reflectors applied from the last, rows stored at rp{i}
    for i in range(m):
        for c in range(ucols):
            for p in P:
                val = (f"v{i}_{c}{p}" if (i < n and c < n) else
                       ("one" if (i == c and p == "r" and c >= n) else "zero"))
                L.append(f"    y{i}_{c}{p} = {val}")
    _apply_q_lines(L, "y", "h", "t", m, ucols, n, cx)
    for i in range(m):
        for c in range(ucols):
            for k, p in enumerate(P):
                L.append(f"    tl.store(U + offs * {m * ucols * w} + (rp{i} * {ucols} + {c}) * {w} + {k}, "
                         f"tl.where(fin, y{i}_{c}{p}, nan), mask=mask)")
    return "\n".join(L) + "\n"


_FUSED_KERNELS: dict[tuple, object] = {}
_SQRT_TINY = float(torch.finfo(torch.float32).tiny) ** 0.5
#: :func:`svd_tall` returns ``V`` completed (no ``mpslinalg.svd._complete`` after it).
COMPLETES_V = True


def fused_fits(m: int, n: int, dtype: torch.dtype) -> bool:
    """Whether :func:`svd_tall` (one matrix per lane) serves ``m x n`` matrices of ``dtype`` (``m >= n``)."""
    return 1 <= n <= m <= FUSED_MAX.get(dtype, 0)


def _alloc_svd_outputs(A: torch.Tensor, full: bool, compute_uv: bool
                       ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """The uninitialised outputs ``(U, S, V, info)`` of a one-launch SVD of ``A [B, m, n]`` (the
    :func:`svd_tall` contract): ``U [B, m, m]`` (``full``) or ``[B, m, n]`` and ``V [B, n, n]`` of ``A``'s
    dtype (None unless ``compute_uv``), ``S [B, n]`` float32, ``info [B]`` int32, on ``A``'s device."""
    Bn, m, n = A.shape
    ucols = m if full else n
    S = torch.empty(Bn, n, dtype=torch.float32, device=A.device)
    info = torch.empty(Bn, dtype=torch.int32, device=A.device)
    U = torch.empty(Bn, m, ucols, dtype=A.dtype, device=A.device) if compute_uv else None
    V = torch.empty(Bn, n, n, dtype=A.dtype, device=A.device) if compute_uv else None
    return U, S, V, info


def svd_tall(A: torch.Tensor, full: bool, compute_uv: bool, max_sweeps: int
             ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """The whole SVD of every matrix of ``A [B, m, n]`` (:func:`fused_fits`) in one launch.

    The contract of :func:`mpslinalg.svd.c.svd_tall` (the CPU's C kernel): ``U`` ``[B, m, m]``
    (``full``) or ``[B, m, n]``, ``S [B, n]`` (real, descending), ``V`` (not ``Vᴴ``) ``[B, n, n]``
    orthonormal (unlike the C kernel, the columns with ``σ_j <= √tiny·σ₁`` are completed here, by
    :func:`mpslinalg.svd._complete`'s rule: :data:`COMPLETES_V`), ``info [B]`` int32 (0, 1
    non-finite input, 2 not converged within ``max_sweeps``); ``U``, ``V`` None unless
    ``compute_uv``. float32/complex64; ``A`` is not modified.
    """
    Bn, m, n = A.shape
    if not fused_fits(m, n, A.dtype):
        raise ValueError(f"svd_triton.svd_tall: [B, m, n] with n <= m <= {FUSED_MAX} by dtype, got "
                         f"{tuple(A.shape)} {A.dtype}")
    A = A.resolve_conj().resolve_neg().contiguous()
    cplx = A.is_complex()
    U, S, V, info = _alloc_svd_outputs(A, full, compute_uv)
    if Bn == 0:
        return U, S, V, info
    key = (m, n, cplx, compute_uv, full and compute_uv)
    fn = _FUSED_KERNELS.get(key)
    if fn is None:
        stem = f"svd_fused_{m}x{n}_{'c' if cplx else 'f'}{'_uv' if compute_uv else ''}{'_full' if key[4] else ''}"
        fn = load_generated(fused_source(m, n, cplx, compute_uv, key[4]), stem).kernel
        _FUSED_KERNELS[key] = fn
    view = torch.view_as_real if cplx else (lambda t: t)
    a = view(A)
    tol, ctol = thresholds(n + n % 2, torch.float32)
    fn[(-(-Bn // BLOCK),)](a, view(U) if compute_uv else a, S, view(V) if compute_uv else a, info, Bn,
                           int(max_sweeps), tol, ctol, BLOCK=BLOCK, num_warps=4)
    return U, S, V, info


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
    if n <= LANE_MAX[X.dtype]:
        kern = _lane_kernel(n, cplx, V is not None)
        kern[(-(-Bn // BLOCK),)](x, v, rot, Bn, sweeps, float(tol), float(ctol), BLOCK=BLOCK, num_warps=4)
    elif TILE_KERNEL in REG_KERNELS and not _REG_FAILED:
        np_ = _pow2(n)
        # ~32 of the floats held a thread, at most 4 warps (H200: f32 32x32 2.27 ms at 2 warps, 2.53 at 4,
        # 7.69 at 1; c64 64x64 19.0 ms at 4, 28.6 at 8, 25.9 at 2)
        state = np_ * np_ * (2 if cplx else 1) * (2 if V is not None else 1)
        warps = TILE_WARPS or min(4, max(1, state // 1024))
        try:  # tl.gather needs a recent Triton: the memory variant serves where it does not build
            from . import triton_regs as regs

            kernel = TILE_KERNEL
            if kernel == "auto":
                kernel = "halving" if cplx else "registers"
            kern = regs.jacobi_reg_kernel
            if kernel != "registers":
                kern = regs.jacobi_halving_kernel if kernel == "halving" and n == np_ else regs.jacobi_pairs_kernel
            extra = {}
            if kern is not regs.jacobi_reg_kernel:
                extra["FAST"] = REG_FAST_ROTATION and kern is regs.jacobi_halving_kernel
            if kern is regs.jacobi_halving_kernel:
                extra["TRACK"] = REG_TRACK_NORMS
                extra["UNROLL2"] = REG_UNROLL2
                extra["SCALED"] = REG_SCALED_ROTATIONS
            if TILE_MAXNREG:  # a register cap: two programs of 8 warps on an SM instead of one
                extra["maxnreg"] = TILE_MAXNREG
            kern[(Bn,)](x, v, rot, n, sweeps, float(tol), float(ctol), COMPLEX=cplx, WANT_V=V is not None, NP=np_,
                        JOINT=REG_JOINT_REDUCE and cplx, num_warps=warps, **extra, **UNIFORM)
        except Exception as exc:  # noqa: BLE001 - a build failure (before the launch: X untouched)
            _REG_FAILED.append(repr(exc))
            warn_once("triton:svd-registers", f"mpslinalg: the register-resident SVD Jacobi kernel failed to build "
                      f"({type(exc).__name__}: {exc}); using the memory variant")
            return jacobi(X, V, sweeps, tol, ctol)
    else:
        np_, hp = _pow2(n), _pow2(n // 2)
        tile = np_ * hp * (2 if cplx else 1) * (2 if V is not None else 1)
        warps = TILE_WARPS or (1 if tile <= 512 else (2 if tile <= 2048 else (4 if tile <= 4096 else 8)))
        _jacobi_tile_kernel[(Bn,)](x, v, rot, n, sweeps, float(tol), float(ctol), COMPLEX=cplx,
                                   WANT_V=V is not None, NP=np_, HP=hp, num_warps=warps, **UNIFORM)
    return X, V, rot != 0
