"""Batched inverses, determinants and solves of matrices up to 4×4 (camera geometry).

Camera poses (4×4), homographies and intrinsics (3×3) come in batches of thousands to millions. A
general LU per matrix wastes almost all of its time on launch and bookkeeping; here every matrix is
handled by straight-line code — one GPU thread per matrix in ``metal/small.metal``, and the same
arithmetic as an elementwise program on CPU/CUDA (torch ops, or the same program printed as C or
Triton and compiled once).

Algorithm (DESIGN §6), identical on every backend:

1. **Power-of-two equilibration**: ``A_s = R A C`` with ``R``, ``C`` diagonal powers of two chosen
   from the row maxima of ``A`` and then the column maxima of ``R A`` (measured with LAPACK's
   ``cabs1 = |Re| + |Im|``). Powers of two are exact, so this only removes the scaling from the
   problem: entries near 1e±30 and rows/columns scaled by 2^±40 cost no accuracy.
2. ``n = 1``: a division. ``n = 2``: the adjugate with a determinant computed in doubled precision
   (error-free products, Ogita–Rump–Oishi ``Dot2``), so ``inv = adj(A)/det`` has a relative error of
   a few ``u`` per entry (``inv`` only; ``solve`` uses elimination, which is backward stable).
   ``n = 3, 4``: unrolled Gaussian elimination with partial pivoting (pivot = largest ``cabs1``,
   smallest index on ties, like LAPACK's ``i?amax``), then LAPACK's ``getri`` inverse
   (``inv(U)`` then ``X L = inv(U)``, then the column interchanges), whose *left* residual
   ``‖I − XA‖`` — the quantity LAPACK's test ratio measures — is small.
3. Results are unscaled exactly: ``inv(A) = C inv(A_s) R``, ``x = C solve(A_s, R b)``, and the
   determinant is kept as ``mantissa × 2^exponent`` (each pivot split into its power of two), so
   ``slogdet`` never overflows or underflows and ``det`` overflows only when the true value does.

``info`` follows LAPACK's rule: the 1-based index of the first pivot that is exactly zero in the
partial-pivoted elimination (for ``n = 2`` inverses: 1 when the first column is zero, else 2 when
the doubled-precision determinant is exactly zero), 0 otherwise. Elimination continues past a zero
pivot as in ``getf2``.

This module is the engine behind :func:`mpslinalg.inv`, :func:`mpslinalg.det`, ... for ``n <= 4``
(the LU family routes to it); its functions take already checked square inputs.

Backend selection (DESIGN §4): ``mps`` tensors run the Metal kernels, CPU tensors run them through
:mod:`mpslinalg.emulator` when that backend is selected, otherwise the torch path runs the program.
The program is written once, over a few primitives, and executed three ways: as torch ops
(reference, any device), printed as one C function per matrix size (CPU: every matrix in registers,
4/8 matrices per SIMD vector; compiled once by the system C compiler and cached on disk) and printed
as one Triton kernel (CUDA). Where no compiler exists the CPU path wraps LAPACK in the same
equilibration; ``torch.compile`` of the program is available too (see :func:`set_compile`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import torch

from . import _errors as E
from ._func import functorch_active, needs_custom_op
from .kernels import backend_for, load_library

__all__ = ["adjugate", "det", "inv_ex", "set_compile", "slogdet", "solve_ex"]

#: Largest matrix order served by this family.
MAX_N = 4

# ---------------------------------------------------------------------------------------------
# Scalar arithmetic on "structure of arrays" entries.
#
# A matrix entry is a tensor of shape (batch,) (real) or a pair (re, im) of such tensors (complex).
# Complex arithmetic is spelled out on real tensors — exactly as metal/complex.h does on float2 —
# so the torch program, the Metal kernel and a torch.compile'd graph (inductor handles real
# tensors best) perform the same operations.
# ---------------------------------------------------------------------------------------------


class _TorchPrims:
    """Primitive element operations on torch tensors (the other backend is :class:`_TritonPrims`)."""

    def __init__(self, real_dtype: torch.dtype):
        self.real_dtype = real_dtype

    where = staticmethod(torch.where)
    maximum = staticmethod(torch.maximum)

    @staticmethod
    def abs(x):
        return x.abs()

    def exponent(self, m):
        return _exponent(m)

    def pow2(self, e):
        return _pow2(e, self.real_dtype)

    @staticmethod
    def izeros(ref):
        return torch.zeros_like(ref, dtype=torch.int32)

    @staticmethod
    def bzeros(ref):
        return torch.zeros_like(ref, dtype=torch.bool)

    @staticmethod
    def iconst(ref, k: int):
        return torch.full_like(ref, k, dtype=torch.int32)

    @staticmethod
    def to_i32(x):
        return x.to(torch.int32)

    @staticmethod
    def zeros(ref):
        return torch.zeros_like(ref)

    @staticmethod
    def ones(ref):
        return torch.ones_like(ref)

    @staticmethod
    def isfinite(x):
        return torch.isfinite(x)

    @staticmethod
    def nans(ref):
        return torch.full_like(ref, float("nan"))


class _RealOps:
    """Scalar arithmetic on real entries, over primitives ``P`` (torch or symbolic Triton)."""

    complex = False

    def __init__(self, P):
        self.P = P

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def mul(self, a, b):
        return a * b

    def div(self, a, b):
        return a / b

    def neg(self, a):
        return -a

    def abs1(self, a):
        return self.P.abs(a)

    def scale(self, a, s):
        """``a * s`` for a real ``s`` (a power of two)."""
        return a * s

    def is_zero(self, a):
        return a == 0.0

    def where(self, c, a, b):
        return self.P.where(c, a, b)

    def zero_like(self, a):
        return self.P.zeros(a)

    def one_like(self, a):
        return self.P.ones(a)

    def unsqueeze(self, a):
        return a.unsqueeze(-1)

    def ref(self, a):
        """A real tensor of the batch shape, to create index/flag tensors like."""
        return a


class _ComplexOps(_RealOps):
    """Complex arithmetic on (re, im) pairs of real entries, as metal/complex.h does on float2."""

    complex = True

    def add(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    def sub(self, a, b):
        return (a[0] - b[0], a[1] - b[1])

    def mul(self, a, b):  # cmul
        return (a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0])

    def div(self, a, b):  # cdiv: Smith's algorithm, both branches evaluated, one selected
        br, bi = b
        big_r = self.P.abs(br) >= self.P.abs(bi)
        r1 = bi / br
        d1 = br + bi * r1
        x1 = (a[0] + a[1] * r1) / d1
        y1 = (a[1] - a[0] * r1) / d1
        r2 = br / bi
        d2 = br * r2 + bi
        x2 = (a[0] * r2 + a[1]) / d2
        y2 = (a[1] * r2 - a[0]) / d2
        return (self.P.where(big_r, x1, x2), self.P.where(big_r, y1, y2))

    def neg(self, a):
        return (-a[0], -a[1])

    def abs1(self, a):
        return self.P.abs(a[0]) + self.P.abs(a[1])

    def scale(self, a, s):
        return (a[0] * s, a[1] * s)

    def is_zero(self, a):
        return (a[0] == 0.0) & (a[1] == 0.0)

    def where(self, c, a, b):
        return (self.P.where(c, a[0], b[0]), self.P.where(c, a[1], b[1]))

    def zero_like(self, a):
        return (self.P.zeros(a[0]), self.P.zeros(a[0]))

    def one_like(self, a):
        return (self.P.ones(a[0]), self.P.zeros(a[0]))

    def unsqueeze(self, a):
        return (a[0].unsqueeze(-1), a[1].unsqueeze(-1))

    def ref(self, a):
        return a[0]


# ---------------------------------------------------------------------------------------------
# Powers of two, by bit manipulation (exact; the same integer arithmetic as the Metal kernel)
# ---------------------------------------------------------------------------------------------

_FMT = {  # real dtype -> (int dtype, mantissa bits, exponent bias, Dekker split factor)
    torch.float32: (torch.int32, 23, 127, 4097.0),
    torch.float64: (torch.int64, 52, 1023, 134217729.0),
}
# Exponents are clamped to [-(bias - 1), bias - 1] so that 2^e is a normal number.


def _exponent(m: torch.Tensor) -> torch.Tensor:
    """``e`` (int32) with ``2^e <= m < 2^(e+1)`` for normal ``m >= 0``, clamped to ``[-emax, emax]``.

    Zero and subnormal ``m`` give ``-emax``; Inf/NaN give ``emax``.
    """
    idt, mbits, bias, _ = _FMT[m.dtype]
    biased = (m.view(idt) >> mbits) & (2 * bias + 1)
    emax = bias - 1
    return (biased - bias).clamp(-emax, emax).to(torch.int32)


def _pow2(e: torch.Tensor, real_dtype: torch.dtype) -> torch.Tensor:
    """``2^e`` exactly, for integer ``e`` (clamped to ``[-emax, emax]``)."""
    idt, mbits, bias, _ = _FMT[real_dtype]
    emax = bias - 1
    return ((e.clamp(-emax, emax).to(idt) + bias) << mbits).view(real_dtype)


# ---------------------------------------------------------------------------------------------
# Doubled-precision dot products (error-free transformations: Dekker's TwoProduct without FMA,
# Knuth's TwoSum). The Metal kernel uses fma() for TwoProduct; both are exact.
# ---------------------------------------------------------------------------------------------


def _split(a: torch.Tensor, factor: float):
    c = a * factor
    hi = c - (c - a)
    return hi, a - hi


def _two_prod(a: torch.Tensor, b: torch.Tensor, factor: float):
    p = a * b
    ah, al = _split(a, factor)
    bh, bl = _split(b, factor)
    err = al * bl - (((p - ah * bh) - al * bh) - ah * bl)
    return p, err


def _dot2(terms, factor: float) -> torch.Tensor:
    """``sum(sign * a * b for sign, a, b in terms)`` as if in doubled precision (Ogita–Rump–Oishi)."""
    s = None
    c = None
    for sign, a, b in terms:
        p, e = _two_prod(a, b, factor)
        if sign < 0:
            p, e = -p, -e
        if s is None:
            s, c = p, e
            continue
        t = s + p
        bb = t - s
        q = (s - (t - bb)) + (p - bb)
        s = t
        c = c + (q + e)
    return s + c


def _det2_accurate(ops, a, b, c, d, factor: float):
    """``a d − b c`` in doubled precision (the FMA-accurate 2×2 determinant)."""
    if not ops.complex:
        return _dot2([(1, a, d), (-1, b, c)], factor)
    (ar, ai), (br, bi), (cr, ci), (dr, di) = a, b, c, d
    re = _dot2([(1, ar, dr), (-1, ai, di), (-1, br, cr), (1, bi, ci)], factor)
    im = _dot2([(1, ar, di), (1, ai, dr), (-1, br, ci), (-1, bi, cr)], factor)
    return (re, im)


# ---------------------------------------------------------------------------------------------
# The program: equilibrate, factor, and the three kernels' contracts (inv, det parts, solve)
# ---------------------------------------------------------------------------------------------


def _entries(A: torch.Tensor):
    """(B, n, n) tensor -> (ops, real dtype, n×n nested list of SoA entries)."""
    n = A.shape[-1]
    if A.is_complex():
        Ar = torch.view_as_real(A).permute(1, 2, 3, 0).contiguous()  # (n, n, 2, B)
        a = [[(Ar[i, j, 0], Ar[i, j, 1]) for j in range(n)] for i in range(n)]
        return _ComplexOps(_TorchPrims(Ar.dtype)), Ar.dtype, a
    At = A.permute(1, 2, 0).contiguous()  # (n, n, B)
    return _RealOps(_TorchPrims(A.dtype)), A.dtype, [[At[i, j] for j in range(n)] for i in range(n)]


def _assemble(ops, entries, dtype: torch.dtype) -> torch.Tensor:
    """n×m nested list of SoA entries -> (B, n, m) tensor of ``dtype``."""
    if ops.complex:
        t = torch.stack([torch.stack([torch.stack(e, dim=-1) for e in row], dim=1) for row in entries], dim=1)
        return torch.view_as_complex(t).to(dtype)
    return torch.stack([torch.stack(row, dim=-1) for row in entries], dim=-2)


def _equilibrate(ops, a):
    """``A_s = R A C`` with power-of-two ``R = diag(2^-er)``, ``C = diag(2^-ec)``.

    Returns ``(a_s, r, c, er, ec)`` with ``r``/``c`` lists of scale tensors and ``er``/``ec`` the
    int32 exponents (``r_i = 2^-er_i``).
    """
    n = len(a)
    er, r = [], []
    rows = []
    for i in range(n):
        m = ops.abs1(a[i][0])
        for j in range(1, n):
            m = ops.P.maximum(m, ops.abs1(a[i][j]))
        e = ops.P.exponent(m)
        s = ops.P.pow2(-e)
        er.append(e)
        r.append(s)
        rows.append([ops.scale(a[i][j], s) for j in range(n)])
    ec, c = [], []
    for j in range(n):
        m = ops.abs1(rows[0][j])
        for i in range(1, n):
            m = ops.P.maximum(m, ops.abs1(rows[i][j]))
        e = ops.P.exponent(m)
        s = ops.P.pow2(-e)
        ec.append(e)
        c.append(s)
    a_s = [[ops.scale(rows[i][j], c[j]) for j in range(n)] for i in range(n)]
    return a_s, r, c, er, ec


def _factor(ops, a):
    """Partial-pivoted LU of the n×n entries ``a`` (getf2, unrolled).

    Returns ``(lu, piv, odd, info)``: ``lu`` holds U on and above the diagonal and the multipliers
    of L below it; ``piv[k]`` (int32) is the row swapped with row k at step k; ``odd`` (bool) says
    whether the permutation is odd; ``info`` (int32) is the first exactly-zero pivot (1-based) or 0.
    """
    n = len(a)
    rows = [list(r) for r in a]
    P = ops.P
    ref = ops.ref(rows[0][0])
    info = P.izeros(ref)
    odd = P.bzeros(ref)
    piv = []
    for k in range(n):
        best = ops.abs1(rows[k][k])
        p = P.iconst(ref, k)
        for i in range(k + 1, n):
            v = ops.abs1(rows[i][k])
            gt = v > best
            best = P.where(gt, v, best)
            p = P.where(gt, i, p)
        piv.append(p)
        for i in range(k + 1, n):
            swap = p == i
            for j in range(n):
                rk, ri = rows[k][j], rows[i][j]
                rows[k][j] = ops.where(swap, ri, rk)
                rows[i][j] = ops.where(swap, rk, ri)
        if k + 1 < n:
            odd = odd ^ (p != k)
        pk = rows[k][k]
        zero = ops.is_zero(pk)
        info = P.where(zero & (info == 0), k + 1, info)
        for i in range(k + 1, n):
            # getf2 leaves the (all-zero) column unscaled when the pivot is zero
            lik = ops.where(zero, rows[i][k], ops.div(rows[i][k], pk))
            rows[i][k] = lik
            for j in range(k + 1, n):
                rows[i][j] = ops.sub(rows[i][j], ops.mul(lik, rows[k][j]))
    return rows, piv, odd, info


def _getri(ops, lu, piv):
    """LAPACK ``getri`` (unblocked): ``inv(U)``, then ``X L = inv(U)``, then column interchanges."""
    n = len(lu)
    zero = ops.zero_like(lu[0][0])
    one = ops.one_like(lu[0][0])
    # trti2: Y = inv(U), column by column
    y = [[zero] * n for _ in range(n)]
    for j in range(n):
        yjj = ops.div(one, lu[j][j])
        y[j][j] = yjj
        ajj = ops.neg(yjj)
        for i in range(j):
            acc = ops.mul(y[i][i], lu[i][j])
            for k in range(i + 1, j):
                acc = ops.add(acc, ops.mul(y[i][k], lu[k][j]))
            y[i][j] = ops.mul(acc, ajj)
    # X L = Y, from the last column to the first
    x = [[zero] * n for _ in range(n)]
    for j in range(n - 1, -1, -1):
        for i in range(n):
            acc = y[i][j] if i <= j else None
            for k in range(j + 1, n):
                t = ops.mul(x[i][k], lu[k][j])
                acc = ops.neg(t) if acc is None else ops.sub(acc, t)
            x[i][j] = acc
    # column interchanges in reverse order
    for j in range(n - 2, -1, -1):
        for k in range(j + 1, n):
            swap = piv[j] == k
            for i in range(n):
                xj, xk = x[i][j], x[i][k]
                x[i][j] = ops.where(swap, xk, xj)
                x[i][k] = ops.where(swap, xj, xk)
    return x


def _inv2(ops, a, factor):
    """2×2 inverse by the adjugate and a doubled-precision determinant; LAPACK-style ``info``."""
    (p, q), (r, s) = a
    d = _det2_accurate(ops, p, q, r, s, factor)
    first_zero = ops.is_zero(p) & ops.is_zero(r)
    info = ops.P.to_i32(ops.P.where(first_zero, 1, ops.P.where(ops.is_zero(d), 2, 0)))
    x = [[ops.div(s, d), ops.neg(ops.div(q, d))], [ops.neg(ops.div(r, d)), ops.div(p, d)]]
    return x, info


def _core_inv(ops, a, factor: float):
    """The inverse program on n×n entries: ``(x entries, info)`` (contract of ``small_inv``)."""
    n = len(a)
    a_s, r, c, _, _ = _equilibrate(ops, a)
    if n == 1:
        x = [[ops.div(ops.one_like(a_s[0][0]), a_s[0][0])]]
        info = ops.P.to_i32(ops.is_zero(a_s[0][0]))
    elif n == 2:
        x, info = _inv2(ops, a_s, factor)
    else:
        lu, piv, _, info = _factor(ops, a_s)
        x = _getri(ops, lu, piv)
    x = [[ops.scale(ops.scale(x[i][j], c[i]), r[j]) for j in range(n)] for i in range(n)]
    fin = _all_finite(ops, a)
    x = [[_nan_unless(ops, fin, x[i][j]) for j in range(n)] for i in range(n)]
    return x, info


def _all_finite(ops, a):
    """Flag: every entry of ``a`` is finite."""
    fin = None
    for row in a:
        for e in row:
            f = ops.P.isfinite(ops.abs1(e))
            fin = f if fin is None else fin & f
    return fin


def _nan_unless(ops, fin, e):
    """``e`` where ``fin``, else NaN: a matrix with an Inf or NaN entry gets an all-NaN inverse or
    solution (LAPACK's elimination spreads the NaN to nearly every entry; a finite-looking number
    there would hide bad input)."""
    nan = ops.P.nans(ops.ref(e))
    return ops.where(fin, e, (nan, nan) if ops.complex else nan)


def _core_det(ops, a, factor: float):
    """The determinant program: ``(mant, expo, info)`` with det = mant·2^expo (``small_det``)."""
    n = len(a)
    a_s, _, _, er, ec = _equilibrate(ops, a)
    expo = er[0] + ec[0]
    for i in range(1, n):
        expo = expo + er[i] + ec[i]
    if n == 2:
        d = _det2_accurate(ops, a_s[0][0], a_s[0][1], a_s[1][0], a_s[1][1], factor)
        (p, _), (r, _) = a_s
        info = ops.P.where(ops.is_zero(p) & ops.is_zero(r), 1, ops.P.where(ops.is_zero(d), 2, 0))
        info = ops.P.to_i32(info)
        pivots = [d]
        odd = None
    else:
        lu, _, odd, info = _factor(ops, a_s)
        pivots = [lu[k][k] for k in range(n)]
    mant = None
    for pk in pivots:
        g = ops.P.exponent(ops.abs1(pk))
        f = ops.scale(pk, ops.P.pow2(-g))
        expo = expo + g
        mant = f if mant is None else ops.mul(mant, f)
    if odd is not None:
        mant = ops.where(odd, ops.neg(mant), mant)
    # an Inf/NaN entry: the determinant is undefined (Inf − Inf in the expansion), NaN
    mant = _nan_unless(ops, _all_finite(ops, a), mant)
    return mant, expo, info


def _program_inv(A: torch.Tensor):
    """(B, n, n) -> (inv (B, n, n), info (B,) int32): the contract of kernel ``small_inv``."""
    ops, rdt, a = _entries(A)
    x, info = _core_inv(ops, a, _FMT[rdt][3])
    return _assemble(ops, x, A.dtype), info


def _program_det_parts(A: torch.Tensor):
    """(B, n, n) -> (mant (B,) of A.dtype, expo (B,) int32, info): det(A) = mant * 2^expo.

    ``cabs1(mant)`` lies in ``[2^-n, 2^n)`` (or ``mant`` is 0/NaN): the contract of ``small_det``.
    """
    ops, rdt, a = _entries(A)
    mant, expo, info = _core_det(ops, a, _FMT[rdt][3])
    return _assemble(ops, [[mant]], A.dtype)[:, 0, 0], expo, info


def _core_solve_factor(ops, a):
    """Equilibrate and factor for a solve: ``(lu, piv, (r, fin), c, info)``."""
    a_s, r, c, _, _ = _equilibrate(ops, a)
    lu, piv, _, info = _factor(ops, a_s)
    return lu, piv, (r, _all_finite(ops, a)), c, info


def _core_solve_rhs(ops, lu, piv, r, c, b, bc):
    """``x = C solve(A_s, R b)`` for right-hand-side entries ``b`` (a list of n), given the factors.

    ``bc`` broadcasts a per-matrix value against ``b``'s entries (unsqueeze in torch, identity in
    the generated kernels, which handle one column at a time).
    """
    n = len(lu)
    r, fin = r
    b = [ops.scale(b[i], bc(r[i])) for i in range(n)]
    for kk in range(n - 1):  # laswp
        for i in range(kk + 1, n):
            swap = bc(piv[kk] == i)
            bk, bi = b[kk], b[i]
            b[kk] = ops.where(swap, bi, bk)
            b[i] = ops.where(swap, bk, bi)
    for kk in range(n):  # L y = b (unit lower)
        for i in range(kk + 1, n):
            b[i] = ops.sub(b[i], ops.mul(_bc_entry(ops, lu[i][kk], bc), b[kk]))
    for i in range(n - 1, -1, -1):  # U x = y
        acc = b[i]
        for j in range(i + 1, n):
            acc = ops.sub(acc, ops.mul(_bc_entry(ops, lu[i][j], bc), b[j]))
        b[i] = ops.div(acc, _bc_entry(ops, lu[i][i], bc))
    return [_nan_unless(ops, bc(fin), ops.scale(b[i], bc(c[i]))) for i in range(n)]


def _bc_entry(ops, e, bc):
    return (bc(e[0]), bc(e[1])) if ops.complex else bc(e)


def _program_solve(A: torch.Tensor, B: torch.Tensor):
    """A (Bt, n, n), B (Bt, n, k) -> (X (Bt, n, k), info (Bt,)): the contract of ``small_solve``."""
    ops, rdt, a = _entries(A)
    n = len(a)
    lu, piv, r, c, info = _core_solve_factor(ops, a)
    if ops.complex:
        Br = torch.view_as_real(B)  # (Bt, n, k, 2)
        b = [(Br[:, i, :, 0], Br[:, i, :, 1]) for i in range(n)]
    else:
        b = [B[:, i, :] for i in range(n)]
    x = _core_solve_rhs(ops, lu, piv, r, c, b, lambda t: t.unsqueeze(-1))
    if ops.complex:
        X = torch.view_as_complex(torch.stack([torch.stack(xi, dim=-1) for xi in x], dim=1).contiguous())
    else:
        X = torch.stack(x, dim=1)
    return X.to(A.dtype), info


# ---------------------------------------------------------------------------------------------
# torch.compile of the program for large batches (CPU/CUDA), compiled lazily once per process
# ---------------------------------------------------------------------------------------------

_COMPILE_ENV = "MPSLINALG_SMALL_COMPILE"
_compile_mode: str | None = None
_compile_min_batch = 1 << 15
_compiled: dict[str, Callable] = {}
_compile_failed: set[str] = set()
_compile_lock = threading.Lock()


def set_compile(mode: str, *, min_batch: int | None = None) -> str:
    """Choose how the torch path (CPU/CUDA) fuses the elementwise program.

    Parameters
    ----------
    mode : {"auto", "inductor", "never"}
        ``"auto"`` (default; also ``$MPSLINALG_SMALL_COMPILE``): on the CPU the program printed as C
        (compiled once, ~0.5–2 s per matrix size and dtype, cached in ``~/.cache/mpslinalg``); on
        CUDA the program printed as a Triton kernel for ``inv``/``det`` and ``torch.compile`` for
        solves of at least ``min_batch`` matrices. ``"inductor"`` (alias ``"always"``):
        ``torch.compile`` of the program on CPU and CUDA for every batch size (the first call pays
        the compile: ~25 s on a 2-core CPU). ``"never"``: no generated code — LAPACK with the same
        equilibration on the CPU, the eager program on CUDA. Any failure of generated code falls
        back to the next option, which computes the same thing.
    min_batch : int, optional
        Batch size from which ``"auto"`` uses ``torch.compile`` on CUDA (default 32768).

    Returns
    -------
    str
        The previous mode.
    """
    global _compile_mode, _compile_min_batch
    if mode == "always":
        mode = "inductor"
    if mode not in ("auto", "inductor", "never"):
        raise ValueError(f"set_compile: mode must be 'auto', 'inductor' or 'never', got {mode!r}")
    previous = _current_compile_mode()
    _compile_mode = mode
    if min_batch is not None:
        _compile_min_batch = int(min_batch)
    return previous


def _current_compile_mode() -> str:
    if _compile_mode is not None:
        return _compile_mode
    env = os.environ.get(_COMPILE_ENV, "auto").strip().lower() or "auto"
    env = "inductor" if env == "always" else env
    return env if env in ("auto", "inductor", "never") else "auto"


_PROGRAMS: dict[str, Callable] = {
    "inv": _program_inv,
    "det": _program_det_parts,
    "solve": _program_solve,
}


def _want_compile(batch: int, device: torch.device) -> bool:
    mode = _current_compile_mode()
    if mode == "never" or device.type not in ("cpu", "cuda"):
        return False
    if mode == "auto" and device.type != "cuda":
        # measured on a 2-core CPU: inductor's code for this program is scalar (strided loads of
        # the (B, n, n) layout) and materialises 40+ batch-sized intermediates, so it gains < 2x
        # after a ~25 s first compile; the generated C does 4-7x (see _c_source)
        return False
    if torch.compiler.is_compiling():
        return False
    return mode == "inductor" or batch >= _compile_min_batch


# ---------------------------------------------------------------------------------------------
# CPU leaf: the same equilibration around LAPACK (getrf's pivots and info rule are ours), used on
# the CPU when the program is not compiled — the eager program is ~hundreds of small torch ops.
# ---------------------------------------------------------------------------------------------


def _abs1_t(A: torch.Tensor) -> torch.Tensor:
    return A.real.abs() + A.imag.abs() if A.is_complex() else A.abs()


def _leaf_equilibrate(A: torch.Tensor):
    """Vectorised ``A_s = R A C`` on (B, n, n); returns ``(A_s, er, ec)`` (int32 exponents (B, n))."""
    rdt = _real_dtype(A.dtype)
    er = _exponent(_abs1_t(A).amax(-1))
    A1 = A * _pow2(-er, rdt).unsqueeze(-1)
    ec = _exponent(_abs1_t(A1).amax(-2))
    return A1 * _pow2(-ec, rdt).unsqueeze(-2), er, ec


def _leaf_inv(A: torch.Tensor):
    rdt = _real_dtype(A.dtype)
    As, er, ec = _leaf_equilibrate(A)
    LU, piv, info = torch.linalg.lu_factor_ex(As)
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand_as(A)
    # X = (A_s^{-H})^H from getrs with the adjoint: its *left* residual ‖I − XA‖ is small
    Xs = torch.linalg.lu_solve(LU, piv, eye, adjoint=True).mH
    X = Xs * _pow2(-ec, rdt).unsqueeze(-1) * _pow2(-er, rdt).unsqueeze(-2)
    return _leaf_nan_unless_finite(A, X), info


def _leaf_nan_unless_finite(A: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """NaN for the whole result of a matrix with an Inf/NaN entry (the program's rule)."""
    fin = torch.isfinite(A).all(-1).all(-1)[:, None, None]
    return torch.where(fin, X, torch.full((), float("nan"), dtype=X.dtype, device=X.device)).contiguous()


def _leaf_det_parts(A: torch.Tensor):
    rdt = _real_dtype(A.dtype)
    n = A.shape[-1]
    As, er, ec = _leaf_equilibrate(A)
    LU, piv, info = torch.linalg.lu_factor_ex(As)
    d = LU.diagonal(dim1=-2, dim2=-1)
    g = _exponent(_abs1_t(d))
    f = d * _pow2(-g, rdt)
    mant = f.prod(-1)
    swaps = (piv != torch.arange(1, n + 1, dtype=piv.dtype, device=piv.device)).sum(-1)
    mant = torch.where(swaps % 2 == 1, -mant, mant)
    mant = torch.where(torch.isfinite(A).all(-1).all(-1), mant, torch.full((), float("nan"), dtype=mant.dtype))
    expo = (er.sum(-1) + ec.sum(-1) + g.sum(-1)).to(torch.int32)
    return mant, expo, info


def _leaf_solve(A: torch.Tensor, B: torch.Tensor):
    rdt = _real_dtype(A.dtype)
    As, er, ec = _leaf_equilibrate(A)
    LU, piv, info = torch.linalg.lu_factor_ex(As)
    Y = torch.linalg.lu_solve(LU, piv, B * _pow2(-er, rdt).unsqueeze(-1))
    return _leaf_nan_unless_finite(A, Y * _pow2(-ec, rdt).unsqueeze(-1)), info


_LEAVES: dict[str, Callable] = {"inv": _leaf_inv, "det": _leaf_det_parts, "solve": _leaf_solve}


# ---------------------------------------------------------------------------------------------
# CUDA: the same program emitted as one Triton kernel (one lane per matrix, everything in
# registers). The program above is run once on symbolic values that print Triton code, so the
# kernel performs exactly the operations of the torch program and the Metal kernel.
# ---------------------------------------------------------------------------------------------


class _SymArith:
    """Operators of a symbolic value of a generated kernel: each builds an expression through the
    subclass's ``_bin(op, other, reflected)`` (shared by the Triton and C generators)."""

    __slots__ = ()

    def __add__(self, o):
        return self._bin("+", o)

    def __radd__(self, o):
        return self._bin("+", o, True)

    def __sub__(self, o):
        return self._bin("-", o)

    def __rsub__(self, o):
        return self._bin("-", o, True)

    def __mul__(self, o):
        return self._bin("*", o)

    def __rmul__(self, o):
        return self._bin("*", o, True)

    def __truediv__(self, o):
        return self._bin("/", o)

    def __rtruediv__(self, o):
        return self._bin("/", o, True)

    def __gt__(self, o):
        return self._bin(">", o)

    def __ge__(self, o):
        return self._bin(">=", o)

    def __lt__(self, o):
        return self._bin("<", o)

    def __eq__(self, o):  # noqa: D105 - builds an expression, like torch tensors do
        return self._bin("==", o)

    def __ne__(self, o):
        return self._bin("!=", o)

    def __and__(self, o):
        return self._bin("&", o)

    def __xor__(self, o):
        return self._bin("^", o)

    __hash__ = None  # type: ignore[assignment]


class _Sym(_SymArith):
    """A value of the Triton kernel being generated: the name of a local variable."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def _bin(self, op: str, other, rev: bool = False):
        a, b = (_sym_arg(other), self.name) if rev else (self.name, _sym_arg(other))
        return _emit(f"({a}) {op} ({b})")

    # Triton's "/" on float32 is an approximate division (2 ulp); div_rn rounds correctly, as
    # torch and Metal (no fast math) do.
    def __truediv__(self, o):
        return _emit(f"tl.math.div_rn({self.name}, {_sym_arg(o)})")

    def __rtruediv__(self, o):
        return _emit(f"tl.math.div_rn({_sym_arg(o)}, {self.name})")

    def __neg__(self):
        return _emit(f"-({self.name})")



_emitter: list[str] | None = None


def _sym_arg(x) -> str:
    if isinstance(x, _Sym):
        return x.name
    if isinstance(x, bool):
        return "True" if x else "False"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return repr(x)
    raise TypeError(f"cannot emit {type(x).__name__}")


def _emit(expr: str) -> _Sym:
    assert _emitter is not None
    name = f"t{len(_emitter)}"
    _emitter.append(f"    {name} = {expr}")
    return _Sym(name)


class _TritonPrims:
    """The primitives of :class:`_TorchPrims`, printed as Triton (float32 only)."""

    @staticmethod
    def where(c, a, b):
        return _emit(f"tl.where({_sym_arg(c)}, {_sym_arg(a)}, {_sym_arg(b)})")

    @staticmethod
    def maximum(a, b):
        return _emit(f"tl.maximum({_sym_arg(a)}, {_sym_arg(b)})")

    @staticmethod
    def abs(x):
        return _emit(f"tl.abs({_sym_arg(x)})")

    @staticmethod
    def exponent(m):
        return _emit(f"tl.minimum(tl.maximum((({_sym_arg(m)}.to(tl.int32, bitcast=True) >> 23) & 255) - 127, "
                     "-126), 126)")

    @staticmethod
    def pow2(e):
        return _emit(f"((tl.minimum(tl.maximum({_sym_arg(e)}, -126), 126) + 127) << 23)"
                     ".to(tl.float32, bitcast=True)")

    @staticmethod
    def izeros(ref):
        return _emit("tl.zeros([BLOCK], dtype=tl.int32)")

    @staticmethod
    def bzeros(ref):
        return _emit("tl.zeros([BLOCK], dtype=tl.int1)")

    @staticmethod
    def iconst(ref, k: int):
        return _emit(f"tl.full([BLOCK], {int(k)}, tl.int32)")

    @staticmethod
    def to_i32(x):
        return _emit(f"({_sym_arg(x)}).to(tl.int32)")

    @staticmethod
    def zeros(ref):
        return _emit("tl.zeros([BLOCK], dtype=tl.float32)")

    @staticmethod
    def ones(ref):
        return _emit("tl.full([BLOCK], 1.0, tl.float32)")

    @staticmethod
    def isfinite(x):
        return _emit(f"tl.abs({_sym_arg(x)}) <= 3.4028234663852886e+38")

    @staticmethod
    def nans(ref):
        return _emit("tl.full([BLOCK], 0x7FC00000, tl.int32).to(tl.float32, bitcast=True)")


def _triton_source(kind: str, n: int, is_complex: bool) -> str:
    """Source of the Triton kernel ``kind`` ("inv", "det", "solve") for n×n float32/complex64."""
    global _emitter
    w = 2 if is_complex else 1
    P = _TritonPrims()
    ops = _ComplexOps(P) if is_complex else _RealOps(P)
    _emitter = []
    try:
        loads = []
        a = []
        for i in range(n):
            row = []
            for j in range(n):
                parts = []
                for c in range(w):
                    name = f"a{i}_{j}_{c}"
                    loads.append(f"    {name} = tl.load(A + base + {(i * n + j) * w + c}, mask=mask, other=0.0)")
                    parts.append(_Sym(name))
                row.append(tuple(parts) if is_complex else parts[0])
            a.append(row)
        stores = []
        if kind == "inv":
            x, info = _core_inv(ops, a, _FMT[torch.float32][3])
            for i in range(n):
                for j in range(n):
                    vals = x[i][j] if is_complex else (x[i][j],)
                    for c in range(w):
                        stores.append(f"    tl.store(OUT0 + base + {(i * n + j) * w + c}, {_sym_arg(vals[c])}, "
                                      "mask=mask)")
            stores.append(f"    tl.store(OUT1 + offs, {_sym_arg(info)}, mask=mask)")
            outs = "OUT0, OUT1"
        elif kind == "det":
            mant, expo, info = _core_det(ops, a, _FMT[torch.float32][3])
            vals = mant if is_complex else (mant,)
            for c in range(w):
                stores.append(f"    tl.store(OUT0 + offs * {w} + {c}, {_sym_arg(vals[c])}, mask=mask)")
            stores.append(f"    tl.store(OUT1 + offs, {_sym_arg(expo)}, mask=mask)")
            stores.append(f"    tl.store(OUT2 + offs, {_sym_arg(info)}, mask=mask)")
            outs = "OUT0, OUT1, OUT2"
        else:  # solve: program (i, c) handles right-hand-side column c of matrices block i
            lu, piv, r, cs, info = _core_solve_factor(ops, a)
            # masks are block-shaped (offs * 0 + col): Triton's interpreter rejects scalar ones
            col_loads = ["    col = tl.program_id(1)", "    cmask = mask & ((offs * 0 + col) < K)",
                         f"    rbase = (offs * {n} * K + col) * {w}"]
            b = []
            for i in range(n):
                parts = []
                for c in range(w):
                    name = f"r{i}_{c}"
                    col_loads.append(f"    {name} = tl.load(RHS + rbase + {i} * K * {w} + {c}, mask=cmask, "
                                     "other=0.0)")
                    parts.append(_Sym(name))
                b.append(tuple(parts) if is_complex else parts[0])
            xs = _core_solve_rhs(ops, lu, piv, r, cs, b, lambda t: t)
            loads.extend(col_loads)
            for i in range(n):
                vals = xs[i] if is_complex else (xs[i],)
                for c in range(w):
                    stores.append(f"    tl.store(OUT0 + rbase + {i} * K * {w} + {c}, {_sym_arg(vals[c])}, "
                                  "mask=cmask)")
            stores.append(f"    tl.store(OUT1 + offs, {_sym_arg(info)}, mask=mask & ((offs * 0 + col) == 0))")
            outs = "RHS, OUT0, OUT1, K"
        body = _emitter
    finally:
        _emitter = None
    head = [
        "# Generated by mpslinalg.small._triton_source: do not edit.",
        "import triton",
        "import triton.language as tl",
        "",
        "",
        "@triton.jit",
        f"def kernel(A, {outs}, B, BLOCK: tl.constexpr):",
        "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
        "    mask = offs < B",
        f"    base = offs * {n * n * w}",
    ]
    return "\n".join(head + loads + body + stores) + "\n"


_TRITON_BLOCK = 128
_triton_kernels: dict[tuple[str, int, bool], Callable] = {}
_triton_failed: set[tuple[str, int, bool]] = set()
_triton_dir: str | None = None


def _triton_kernel(kind: str, n: int, is_complex: bool) -> Callable:
    """The generated kernel, compiled by Triton on first launch (cached per process)."""
    global _triton_dir
    key = (kind, n, is_complex)
    fn = _triton_kernels.get(key)
    if fn is None:
        import importlib.util
        import tempfile

        with _compile_lock:
            if _triton_dir is None:
                _triton_dir = tempfile.mkdtemp(prefix="mpslinalg_small_triton_")
            path = os.path.join(_triton_dir, f"small_{kind}_{n}_{'c' if is_complex else 'f'}.py")
            with open(path, "w") as f:
                f.write(_triton_source(kind, n, is_complex))
            spec = importlib.util.spec_from_file_location(f"mpslinalg_small_triton_{kind}_{n}_{int(is_complex)}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            fn = module.kernel
            _triton_kernels[key] = fn
    return fn


def _triton_run(name: str, A: torch.Tensor, *args: torch.Tensor):
    """Run program ``name`` ("inv", "det" or "solve" with ``B``) as a Triton kernel on contiguous
    (B, n, n) ``A`` (and (B, n, k) right-hand sides)."""
    n, batch = A.shape[-1], A.shape[0]
    cplx = A.is_complex()
    kern = _triton_kernel(name, n, cplx)
    grid = (_cdiv(batch, _TRITON_BLOCK),)
    Af = torch.view_as_real(A) if cplx else A
    info = torch.empty(batch, dtype=torch.int32, device=A.device)
    if name == "inv":
        X = torch.empty_like(A)
        kern[grid](Af, torch.view_as_real(X) if cplx else X, info, batch, BLOCK=_TRITON_BLOCK)
        return X, info
    if name == "solve":
        B = args[0]
        X = torch.empty_like(B)
        k = B.shape[-1]
        view = torch.view_as_real if cplx else (lambda t: t)
        grid2 = (grid[0], max(k, 1))  # k = 0: one column of programs that only writes info
        kern[grid2](Af, view(B), view(X), info, k, batch, BLOCK=_TRITON_BLOCK)
        return X, info
    mant = torch.empty(batch, dtype=A.dtype, device=A.device)
    expo = torch.empty(batch, dtype=torch.int32, device=A.device)
    kern[grid](Af, torch.view_as_real(mant) if cplx else mant, expo, info, batch, BLOCK=_TRITON_BLOCK)
    return mant, expo, info


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _triton_usable(name: str, A: torch.Tensor) -> bool:
    if name not in ("inv", "det", "solve") or A.dtype not in (torch.float32, torch.complex64):
        return False
    if A.device.type != "cuda" or _current_compile_mode() != "auto" or torch.compiler.is_compiling():
        return False
    if (name, A.shape[-1], A.is_complex()) in _triton_failed:
        return False
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# CPU: the same program emitted as C (one loop iteration per matrix, straight-line code in
# registers), compiled once by the system C compiler and cached on disk — what inductor does for
# elementwise graphs, without the intermediate buffers it materialises for this one (measured:
# 40+ batch-sized temporaries, scalar code, < 2x torch.linalg.inv). Falls back to the LAPACK leaf.
# ---------------------------------------------------------------------------------------------


class _CSym(_SymArith):
    """A value of the C function being generated: a local variable and its C type."""

    __slots__ = ("name", "ty")

    def __init__(self, name: str, ty: str):
        self.name = name
        self.ty = ty  # "f" float, "i" int32_t, "b" int used as a flag

    def _bin(self, op: str, other, rev: bool = False):
        o, oty = _c_arg(other)
        a, b = (o, self.name) if rev else (self.name, o)
        if op in (">", ">=", "<", "==", "!="):
            ty = "b"
        elif op in ("&", "^"):
            ty = "b" if self.ty == "b" and oty == "b" else "i"
        else:
            ty = "f" if "f" in (self.ty, oty) else "i"
        return _c_emit(f"({a}) {op} ({b})", ty)


    def __neg__(self):
        return _c_emit(f"-({self.name})", self.ty)



_c_lines: list[str] | None = None
_c_prefix = "t"  # local names of the current phase (distinct per phase: no shadowing in C blocks)
_c_vector = False  # emitting the multi-lane version (GCC/Clang vector extensions)
_VL = 4  # lanes of the vector version being emitted (4: SSE2/NEON; 8 with AVX2)


def _c_type(ty: str) -> str:
    if _c_vector:
        return "vf" if ty == "f" else "vi"
    return "float" if ty == "f" else "int32_t"


def _c_arg(x) -> tuple[str, str]:
    if isinstance(x, _CSym):
        return x.name, x.ty
    if isinstance(x, bool):
        raise TypeError("boolean literal in the program")
    if isinstance(x, int):
        return (f"((vi){{}} + {x})" if _c_vector else str(x)), "i"
    if isinstance(x, float):
        return (f"((vf){{}} + {x!r}f)" if _c_vector else f"{x!r}f"), "f"
    raise TypeError(f"cannot emit {type(x).__name__}")


def _c_emit(expr: str, ty: str) -> _CSym:
    assert _c_lines is not None
    name = f"{_c_prefix}{len(_c_lines)}"
    _c_lines.append(f"      {_c_type(ty)} {name} = {expr};")
    return _CSym(name, ty)


class _CPrims:
    """The primitives of :class:`_TorchPrims`, printed as C (float32) calls of the ``sm_*`` helpers
    of :data:`_C_PRELUDE` (scalar) or :data:`_C_PRELUDE_VEC` (8 lanes: flags are 0/-1 masks)."""

    @staticmethod
    def where(c, a, b):
        (cc, _), (aa, at), (bb, bt) = _c_arg(c), _c_arg(a), _c_arg(b)
        if "f" in (at, bt):
            return _c_emit(f"sm_where_f({cc}, {aa}, {bb})", "f")
        return _c_emit(f"sm_where_i({cc}, {aa}, {bb})", "i")

    @staticmethod
    def maximum(a, b):  # NaN-propagating, like torch.maximum
        return _c_emit(f"sm_max({_c_arg(a)[0]}, {_c_arg(b)[0]})", "f")

    @staticmethod
    def abs(x):
        return _c_emit(f"sm_abs({_c_arg(x)[0]})", "f")

    @staticmethod
    def exponent(m):
        return _c_emit(f"sm_exponent({_c_arg(m)[0]})", "i")

    @staticmethod
    def pow2(e):
        return _c_emit(f"sm_pow2({_c_arg(e)[0]})", "f")

    @staticmethod
    def izeros(ref):
        return _c_emit(_c_arg(0)[0], "i")

    @staticmethod
    def bzeros(ref):
        return _c_emit(_c_arg(0)[0], "b")

    @staticmethod
    def iconst(ref, k: int):
        return _c_emit(_c_arg(int(k))[0], "i")

    @staticmethod
    def to_i32(x):
        name, ty = _c_arg(x)
        return _c_emit(f"sm_flag_to_int({name})" if ty == "b" else name, "i")

    @staticmethod
    def zeros(ref):
        return _c_emit(_c_arg(0.0)[0], "f")

    @staticmethod
    def ones(ref):
        return _c_emit(_c_arg(1.0)[0], "f")

    @staticmethod
    def isfinite(x):
        return _c_emit(f"sm_isfinite({_c_arg(x)[0]})", "b")

    @staticmethod
    def nans(ref):
        return _c_emit("sm_nan()", "f")


_C_PRELUDE = """/* Generated by mpslinalg.small._c_source: do not edit. */
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float sm_where_f(int32_t c, float a, float b) { return c ? a : b; }
static inline int32_t sm_where_i(int32_t c, int32_t a, int32_t b) { return c ? a : b; }
static inline float sm_abs(float x) { return fabsf(x); }
static inline float sm_max(float a, float b) { return (a != a || a > b) ? a : b; }
static inline int32_t sm_flag_to_int(int32_t c) { return c ? 1 : 0; }
static inline int32_t sm_isfinite(float x) { return fabsf(x) <= 3.40282346638528859812e+38f; }
static inline float sm_nan(void) { return NAN; }

static inline int32_t sm_exponent(float m) {
  int32_t b;
  memcpy(&b, &m, 4);
  b = ((b >> 23) & 255) - 127;
  return b < -126 ? -126 : (b > 126 ? 126 : b);
}

static inline float sm_pow2(int32_t e) {
  e = e < -126 ? -126 : (e > 126 ? 126 : e);
  int32_t b = (e + 127) << 23;
  float f;
  memcpy(&f, &b, 4);
  return f;
}
"""

_C_PRELUDE_VEC = """
/* Multi-lane versions (GCC/Clang vector extensions; comparisons give 0/-1 masks, casts between
   same-size vector types reinterpret the bits). */
typedef float vf __attribute__((vector_size(VEC_BYTES)));
typedef int32_t vi __attribute__((vector_size(VEC_BYTES)));

static inline vf vsm_where_f(vi c, vf a, vf b) { return (vf)((c & (vi)a) | (~c & (vi)b)); }
static inline vi vsm_where_i(vi c, vi a, vi b) { return (c & a) | (~c & b); }
static inline vf vsm_abs(vf x) { return (vf)((vi)x & 0x7fffffff); }
static inline vf vsm_max(vf a, vf b) { return vsm_where_f((a != a) | (a > b), a, b); }
static inline vi vsm_flag_to_int(vi c) { return c & 1; }
static inline vi vsm_isfinite(vf x) { return vsm_abs(x) <= ((vf){} + 3.40282346638528859812e+38f); }
static inline vf vsm_nan(void) { return (vf){} + NAN; }
static inline vi vsm_exponent(vf m) {
  vi b = (((vi)m >> 23) & 255) - 127;
  b = vsm_where_i(b < -126, (vi){} - 126, b);
  return vsm_where_i(b > 126, (vi){} + 126, b);
}
static inline vf vsm_pow2(vi e) {
  e = vsm_where_i(e < -126, (vi){} - 126, e);
  e = vsm_where_i(e > 126, (vi){} + 126, e);
  return (vf)((e + 127) << 23);
}
"""


def _c_entries(n: int, w: int, pointer: str, prefix: str, lines: list[str], stride: str = "1",
               lane_stride: int = 0):
    """Load n×n (or, with ``stride``, an n-vector) of entries from ``pointer`` into locals.

    In vector mode lane ``l`` reads ``pointer[l * lane_stride + ...]``.
    """
    out = []
    for i in range(n):
        row = []
        for j in range(n if stride == "1" else 1):
            parts = []
            for c in range(w):
                name = f"{prefix}{i}_{j}_{c}"
                idx = f"{(i * n + j) * w + c}" if stride == "1" else f"{i} * {stride} + {c}"
                if _c_vector:
                    lanes = ", ".join(f"{pointer}[{lane * lane_stride} + {idx}]" for lane in range(_VL))
                    lines.append(f"      vf {name} = {{{lanes}}};")
                else:
                    lines.append(f"      float {name} = {pointer}[{idx}];")
                parts.append(_CSym(name, "f"))
            row.append(tuple(parts) if w == 2 else parts[0])
        out.append(row)
    return out


def _c_store(vals, w: int, pointer: str, index: str, lane_stride: int = 0) -> str:
    parts = vals if w == 2 else (vals,)
    out = []
    for c in range(w):
        v = _c_arg(parts[c])[0]
        if _c_vector:
            out.extend(f"      {pointer}[{lane * lane_stride} + {index} + {c}] = {v}[{lane}];" for lane in range(_VL))
        else:
            out.append(f"      {pointer}[{index} + {c}] = {v};")
    return "\n".join(out)


def _c_int_store(v, pointer: str) -> str:
    name = _c_arg(v)[0]
    if _c_vector:
        return "\n".join(f"      {pointer}[b + {lane}] = {name}[{lane}];" for lane in range(_VL))
    return f"      {pointer}[b] = {name};"


def _c_inv_det(n: int, w: int, ops, suffix: str) -> str:
    """``small_inv<suffix>`` and ``small_det<suffix>`` (one matrix, or 8 per iteration)."""
    global _c_lines
    nn = n * n * w
    factor = _FMT[torch.float32][3]
    step = _VL if _c_vector else 1
    ls = nn if _c_vector else 0
    _c_lines = []
    loads: list[str] = []
    a = _c_entries(n, w, "p", "a", loads, lane_stride=ls)
    x, info = _core_inv(ops, a, factor)
    stores = [_c_store(x[i][j], w, "q", str((i * n + j) * w), ls) for i in range(n) for j in range(n)]
    stores.append(_c_int_store(info, "info"))
    inv = (f"""
static void small_inv{suffix}(const float *A, float *X, int32_t *info, int64_t b0, int64_t b1) {{
  for (int64_t b = b0; b < b1; b += {step}) {{
    const float *p = A + b * {nn};
    float *q = X + b * {nn};
    {{
""" + "\n".join(loads + _c_lines + stores) + "\n    }\n  }\n}\n")
    _c_lines = []
    loads = []
    a = _c_entries(n, w, "p", "a", loads, lane_stride=ls)
    mant, expo, info = _core_det(ops, a, factor)
    stores = [_c_store(mant, w, "mant", f"b * {w}", w), _c_int_store(expo, "expo"), _c_int_store(info, "info")]
    det = (f"""
static void small_det{suffix}(const float *A, float *mant, int32_t *expo, int32_t *info, int64_t b0,
                              int64_t b1) {{
  for (int64_t b = b0; b < b1; b += {step}) {{
    const float *p = A + b * {nn};
    {{
""" + "\n".join(loads + _c_lines + stores) + "\n    }\n  }\n}\n")
    return inv + det


def _c_source(n: int, is_complex: bool, lanes: int = 4) -> str:
    """C source of ``small_inv``, ``small_det`` and ``small_solve`` for n×n float32/complex64:
    the program printed once per matrix (scalar) and once per ``lanes`` matrices (vectors)."""
    global _c_lines, _c_prefix, _c_vector, _VL
    _VL = lanes
    w = 2 if is_complex else 1
    ops = _ComplexOps(_CPrims()) if is_complex else _RealOps(_CPrims())
    nn = n * n * w
    funcs = []
    try:
        funcs.append(_c_inv_det(n, w, ops, "_1"))
        _c_vector = True
        vec = _c_inv_det(n, w, ops, "_v").replace("sm_", "vsm_")
        _c_vector = False
        funcs.append(vec)
        funcs.append(f"""
void small_inv(const float *A, float *X, int32_t *info, int64_t b0, int64_t b1) {{
  int64_t mid = b0 + (b1 - b0) / {lanes} * {lanes};
  small_inv_v(A, X, info, b0, mid);
  small_inv_1(A, X, info, mid, b1);
}}

void small_det(const float *A, float *mant, int32_t *expo, int32_t *info, int64_t b0, int64_t b1) {{
  int64_t mid = b0 + (b1 - b0) / {lanes} * {lanes};
  small_det_v(A, mant, expo, info, b0, mid);
  small_det_1(A, mant, expo, info, mid, b1);
}}
""")
        # solve (scalar): factor once per matrix, then a run-time loop over the k columns
        _c_lines = []
        loads: list[str] = []
        a = _c_entries(n, w, "p", "a", loads)
        lu, piv, r, c, info = _core_solve_factor(ops, a)
        head = loads + _c_lines + [f"      info[b] = {_c_arg(info)[0]};"]
        _c_lines = []
        _c_prefix = "u"
        col_loads: list[str] = []
        bcol = _c_entries(n, w, "rhs", "r", col_loads, stride=f"k * {w}")
        xs = _core_solve_rhs(ops, lu, piv, r, c, [bcol[i][0] for i in range(n)], lambda t: t)
        col_stores = [_c_store(xs[i], w, "out", f"{i} * k * {w}") for i in range(n)]
        funcs.append(f"""
void small_solve(const float *A, const float *B, float *X, int32_t *info, int64_t k, int64_t b0,
                 int64_t b1) {{
  for (int64_t b = b0; b < b1; ++b) {{
    const float *p = A + b * {nn};
    {{
""" + "\n".join(head) + f"""
      for (int64_t col = 0; col < k; ++col) {{
      const float *rhs = B + (b * {n} * k + col) * {w};
      float *out = X + (b * {n} * k + col) * {w};
""" + "\n".join(col_loads + _c_lines + col_stores) + "\n      }\n    }\n  }\n}\n")
    finally:
        _c_lines = None
        _c_prefix = "t"
        _c_vector = False
    return _C_PRELUDE + _C_PRELUDE_VEC.replace("VEC_BYTES", str(4 * lanes)) + "".join(funcs)


_C_FLAGS = ["-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math", "-Wno-psabi"]


def _c_lanes() -> tuple[int, list[str]]:
    """Lanes and extra flags: 8 with AVX2 when this x86-64 CPU has it, else 4 (SSE2 / NEON).

    Measured (one core, float32 4x4, batch 1e6): 4 lanes 34 ms, 8 lanes with AVX2 17 ms, against
    torch.linalg.inv_ex 210-240 ms; 8 lanes without AVX2 is slower than scalar (register spills).
    """
    import platform

    if platform.machine() in ("x86_64", "AMD64"):
        try:
            with open("/proc/cpuinfo") as f:
                flags = next((line for line in f if line.startswith("flags")), "")
        except OSError:
            flags = ""
        if " avx2" in flags:
            return 8, ["-mavx2"]
    return 4, []
_c_libs: dict[tuple[int, bool], object] = {}
_c_failed: set[tuple[int, bool]] = set()
_C_ENV = "MPSLINALG_SMALL_CC"


def _c_compiler() -> str | None:
    import shutil

    env = os.environ.get(_C_ENV)
    if env:
        return env
    for cand in ("cc", "gcc", "clang"):
        path = shutil.which(cand)
        if path:
            return path
    return None


def _c_library(n: int, is_complex: bool):
    """The compiled C functions for (n, complex): built once, cached in ~/.cache/mpslinalg/small."""
    import ctypes
    import hashlib
    import subprocess

    key = (n, is_complex)
    lib = _c_libs.get(key)
    if lib is not None:
        return lib
    with _compile_lock:
        lib = _c_libs.get(key)
        if lib is not None:
            return lib
        cc = _c_compiler()
        if cc is None:
            raise RuntimeError("no C compiler (cc/gcc/clang) found")
        lanes, extra = _c_lanes()
        flags = _C_FLAGS + extra
        src = _c_source(n, is_complex, lanes)
        digest = hashlib.sha256((src + cc + " ".join(flags)).encode()).hexdigest()[:20]
        root = os.environ.get("MPSLINALG_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "mpslinalg")
        cache = os.path.join(root, "small")
        os.makedirs(cache, exist_ok=True)
        so = os.path.join(cache, f"small_{n}_{'c' if is_complex else 'f'}_{digest}.so")
        if not os.path.exists(so):
            # per-process temporaries, then atomic renames: concurrent processes never see a
            # half-written source or library
            tag = f"{os.getpid()}.{threading.get_ident()}"
            c_tmp = f"{so[:-3]}.{tag}.c"
            so_tmp = f"{so}.{tag}.tmp"
            with open(c_tmp, "w") as f:
                f.write(src)
            try:
                subprocess.run([cc, *flags, c_tmp, "-o", so_tmp, "-lm"], check=True, capture_output=True,
                               timeout=120)
                os.replace(so_tmp, so)
                os.replace(c_tmp, so[:-3] + ".c")  # kept for reading
            finally:
                for leftover in (c_tmp, so_tmp):
                    if os.path.exists(leftover):
                        os.remove(leftover)
        lib = ctypes.CDLL(so)
        i64, vp = ctypes.c_int64, ctypes.c_void_p
        lib.small_inv.argtypes = [vp, vp, vp, i64, i64]
        lib.small_det.argtypes = [vp, vp, vp, vp, i64, i64]
        lib.small_solve.argtypes = [vp, vp, vp, vp, i64, i64, i64]
        _c_libs[key] = lib
        return lib


_c_pool = None


def _c_parallel(fn, batch: int, *args) -> None:
    """Run ``fn(*args, b0, b1)`` over the batch split across torch's intra-op thread count (ctypes
    releases the GIL, so the chunks run in parallel)."""
    global _c_pool
    threads = max(1, min(torch.get_num_threads(), batch // 4096))
    if threads == 1:
        fn(*args, 0, batch)
        return
    import concurrent.futures

    if _c_pool is None or _c_pool._max_workers < threads:
        _c_pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads)
    step = -(-batch // threads)
    futures = [_c_pool.submit(fn, *args, b0, min(batch, b0 + step)) for b0 in range(0, batch, step)]
    for f in futures:
        f.result()


def _c_usable(A: torch.Tensor) -> bool:
    return (A.device.type == "cpu" and A.dtype in (torch.float32, torch.complex64)
            and _current_compile_mode() == "auto" and not torch.compiler.is_compiling()
            and (A.shape[-1], A.is_complex()) not in _c_failed)


def _c_run(name: str, *args: torch.Tensor):
    """Run program ``name`` with the generated C on contiguous CPU tensors."""
    A = args[0]
    n, batch = A.shape[-1], A.shape[0]
    lib = _c_library(n, A.is_complex())
    info = torch.empty(batch, dtype=torch.int32)
    if name == "inv":
        X = torch.empty_like(A)
        _c_parallel(lib.small_inv, batch, A.data_ptr(), X.data_ptr(), info.data_ptr())
        return X, info
    if name == "det":
        mant = torch.empty(batch, dtype=A.dtype)
        expo = torch.empty(batch, dtype=torch.int32)
        _c_parallel(lib.small_det, batch, A.data_ptr(), mant.data_ptr(), expo.data_ptr(), info.data_ptr())
        return mant, expo, info
    B = args[1]
    X = torch.empty_like(B)
    _c_parallel(lib.small_solve, batch, A.data_ptr(), B.data_ptr(), X.data_ptr(), info.data_ptr(), B.shape[-1])
    return X, info


def _run_program(name: str, *args: torch.Tensor):
    batch = args[0].shape[0]
    device = args[0].device
    if functorch_active():
        return _PROGRAMS[name](*args)
    if _triton_usable(name, args[0]):
        key = (name, args[0].shape[-1], args[0].is_complex())
        try:
            return _triton_run(name, *args)
        except Exception:  # e.g. an old Triton: the compiled/eager program computes the same thing
            _triton_failed.add(key)
    if _c_usable(args[0]):
        try:
            _c_library(args[0].shape[-1], args[0].is_complex())
        except Exception:  # no compiler, or it failed: the LAPACK leaf below computes the same
            _c_failed.add((args[0].shape[-1], args[0].is_complex()))
        else:
            return _c_run(name, *args)
    want = _want_compile(batch, device)
    if device.type == "cpu" and not want and not torch.compiler.is_compiling():
        return _LEAVES[name](*args)
    if want:
        key = f"{name}:{args[0].device.type}"
        fn = _compiled.get(key)
        if fn is None and key not in _compile_failed:
            with _compile_lock:
                fn = _compiled.get(key)
                if fn is None:
                    fn = torch.compile(_PROGRAMS[name], dynamic=True, fullgraph=True)
                    _compiled[key] = fn
        if fn is not None:
            try:
                return fn(*args)
            except Exception:  # the eager program computes the same thing
                _compiled.pop(key, None)
                _compile_failed.add(key)
    return _PROGRAMS[name](*args)


# ---------------------------------------------------------------------------------------------
# Kernel dispatch: torch program, or the Metal kernels (metal / emulator), one call site
# ---------------------------------------------------------------------------------------------

_GROUP = 64  # threads per threadgroup of the Metal kernels (one matrix per thread)
_KTAG = {torch.float32: "float", torch.complex64: "cfloat"}


def _use_kernels(A: torch.Tensor) -> bool:
    b = backend_for(A.device)
    return b in ("metal", "emulator") and A.dtype in _KTAG and not functorch_active()


def _padded(batch: int) -> int:
    """Threads for the barrier kernels: ``batch`` rounded up to whole threadgroups."""
    return -(-batch // _GROUP) * _GROUP


def _kernel_inv(A3: torch.Tensor):
    n = A3.shape[-1]
    batch = A3.shape[0]
    X = torch.empty_like(A3)
    info = torch.empty(batch, dtype=torch.int32, device=A3.device)
    lib = load_library("small", A3.device)
    getattr(lib, f"small_inv_{_KTAG[A3.dtype]}_{n}")(A3, X, info, batch, threads=_padded(batch),
                                                     group_size=_GROUP)
    return X, info


def _kernel_det_parts(A3: torch.Tensor):
    n = A3.shape[-1]
    batch = A3.shape[0]
    mant = torch.empty(batch, dtype=A3.dtype, device=A3.device)
    expo = torch.empty(batch, dtype=torch.int32, device=A3.device)
    info = torch.empty(batch, dtype=torch.int32, device=A3.device)
    lib = load_library("small", A3.device)
    getattr(lib, f"small_det_{_KTAG[A3.dtype]}_{n}")(A3, mant, expo, info, batch, threads=_padded(batch),
                                                     group_size=_GROUP)
    return mant, expo, info


def _kernel_solve(A3: torch.Tensor, B3: torch.Tensor):
    n = A3.shape[-1]
    batch, k = A3.shape[0], B3.shape[-1]
    X = torch.empty_like(B3)
    info = torch.empty(batch, dtype=torch.int32, device=A3.device)
    lib = load_library("small", A3.device)
    threads = batch * max(k, 1)
    getattr(lib, f"small_solve_{_KTAG[A3.dtype]}_{n}")(A3, B3, X, info, batch, k, threads=threads,
                                                       group_size=_GROUP)
    return X, info


def _resolved3(A: torch.Tensor) -> torch.Tensor:
    """(*, n, m) -> contiguous, conj/neg-resolved (B, n, m)."""
    batch = 1
    for d in A.shape[:-2]:
        batch *= d
    return A.resolve_conj().resolve_neg().reshape(batch, A.shape[-2], A.shape[-1]).contiguous()


def _check_small(op: str, A: torch.Tensor) -> None:
    E.check_matrix(op, "A", A, square=True)
    if A.shape[-1] > MAX_N:
        raise E.ShapeError(f"{op}: the small-matrix path serves n <= {MAX_N}, got n = {A.shape[-1]} "
                           f"(shape {tuple(A.shape)}); use the general LU path")


def _inv_impl(A: torch.Tensor):
    batch_shape, n = A.shape[:-2], A.shape[-1]
    if A.numel() == 0:
        return (torch.empty_like(A, memory_format=torch.contiguous_format),
                torch.zeros(batch_shape, dtype=torch.int32, device=A.device))
    A3 = _resolved3(A)
    X, info = _kernel_inv(A3) if _use_kernels(A) else _run_program("inv", A3)
    return X.reshape(*batch_shape, n, n), info.reshape(batch_shape)


def _det_parts_impl(A: torch.Tensor):
    batch_shape = A.shape[:-2]
    A3 = _resolved3(A)
    mant, expo, info = _kernel_det_parts(A3) if _use_kernels(A) else _run_program("det", A3)
    return mant.reshape(batch_shape), expo.reshape(batch_shape), info.reshape(batch_shape)


def _real_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.empty((), dtype=dtype).real.dtype if dtype.is_complex else dtype


def _det_impl(A: torch.Tensor) -> torch.Tensor:
    batch_shape, n = A.shape[:-2], A.shape[-1]
    if n == 0 or A.numel() == 0:
        return torch.ones(batch_shape, dtype=A.dtype, device=A.device)
    mant, expo, _ = _det_parts_impl(A)
    rdt = _real_dtype(A.dtype)
    e1 = torch.div(expo, 2, rounding_mode="floor")
    return mant * _pow2(e1, rdt) * _pow2(expo - e1, rdt)


# ln 2 split (Cody–Waite) so that expo * LN2_HI is exact for |expo| < 2^11.
_LN2_HI = 0.693145751953125
_LN2_LO = 1.4286068203094172321e-06


def _slogdet_impl(A: torch.Tensor):
    batch_shape, n = A.shape[:-2], A.shape[-1]
    rdt = _real_dtype(A.dtype)
    if n == 0 or A.numel() == 0:
        return (torch.ones(batch_shape, dtype=A.dtype, device=A.device),
                torch.zeros(batch_shape, dtype=rdt, device=A.device))
    mant, expo, _ = _det_parts_impl(A)
    amant = mant.abs()
    ef = expo.to(rdt)
    logabs = ef * _LN2_HI + (torch.log(amant) + ef * _LN2_LO)
    if A.is_complex():
        sign = torch.where(amant == 0, torch.zeros_like(mant), mant / torch.where(amant == 0, 1, amant))
    else:
        sign = torch.sign(mant)
    return sign, logabs


def _solve_impl(A: torch.Tensor, B: torch.Tensor, left: bool):
    if not left:  # X A = B  <=>  A^T X^T = B^T
        X, info = _solve_impl(A.mT, B.mT, True)
        return X.mT.contiguous(), info
    batch_shape = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    a_batch = A.shape[:-2]
    n, k = A.shape[-1], B.shape[-1]
    A = A.expand(*batch_shape, n, n)
    B = B.expand(*batch_shape, n, k)
    if A.numel() == 0:
        X = torch.empty(*batch_shape, n, k, dtype=A.dtype, device=A.device)
        return X, torch.zeros(a_batch, dtype=torch.int32, device=A.device)
    A3 = _resolved3(A)
    B3 = _resolved3(B)
    X, info = _kernel_solve(A3, B3) if _use_kernels(A) else _run_program("solve", A3, B3)
    return X.reshape(*batch_shape, n, k), _info_of_a(info.reshape(batch_shape), a_batch)


def _info_of_a(info: torch.Tensor, a_batch: torch.Size) -> torch.Tensor:
    """``info`` over the broadcast batch -> over ``A``'s own batch shape, as torch.linalg.solve_ex
    reports it (each matrix of ``A`` is factored once; broadcast copies carry the same info)."""
    lead = info.ndim - len(a_batch)
    idx = [0] * lead + [slice(None) if a == b else slice(0, 1) for a, b in zip(a_batch, info.shape[lead:])]
    return info[tuple(idx)].contiguous()


# ---------------------------------------------------------------------------------------------
# Custom ops with autograd (formulas of PyTorch's FunctionsManual.cpp; backward uses our own ops)
# ---------------------------------------------------------------------------------------------


@torch.library.custom_op("mpslinalg::small_inv_ex", mutates_args=())
def _inv_ex_op(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _inv_impl(A)


@_inv_ex_op.register_fake
def _(A):
    return (torch.empty_like(A, memory_format=torch.contiguous_format),
            A.new_empty(A.shape[:-2], dtype=torch.int32))


def _inv_setup(ctx, inputs, output):
    ctx.save_for_backward(output[0])


def _inv_backward(ctx, gX, ginfo):
    (X,) = ctx.saved_tensors
    if gX is None:
        return None
    XH = X.mH
    return -(XH @ gX @ XH)


_inv_ex_op.register_autograd(_inv_backward, setup_context=_inv_setup)


@torch.library.custom_op("mpslinalg::small_det", mutates_args=())
def _det_op(A: torch.Tensor) -> torch.Tensor:
    return _det_impl(A)


@_det_op.register_fake
def _(A):
    return A.new_empty(A.shape[:-2])


def _det_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _det_backward(ctx, g):
    (A,) = ctx.saved_tensors
    # d det = tr(adj(A) dA): grad = g * adj(A)^H (= g conj(det) A^{-H}), valid for singular A too
    return g.unsqueeze(-1).unsqueeze(-1) * adjugate(A).mH


_det_op.register_autograd(_det_backward, setup_context=_det_setup)


@torch.library.custom_op("mpslinalg::small_slogdet", mutates_args=())
def _slogdet_op(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _slogdet_impl(A)


@_slogdet_op.register_fake
def _(A):
    return A.new_empty(A.shape[:-2]), A.new_empty(A.shape[:-2], dtype=_real_dtype(A.dtype))


def _slogdet_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], output[0])


def _slogdet_backward(ctx, gsign, glogabs):
    A, sign = ctx.saved_tensors
    # PyTorch's slogdet_backward: g = glogabs (- i Im(conj(gsign) sign) for complex); grad = g A^{-H}
    if A.is_complex():
        g = torch.zeros_like(sign) if glogabs is None else glogabs.to(A.dtype)
        if gsign is not None:
            g = g - 1j * torch.imag(gsign.conj() * sign)
    else:
        if glogabs is None:
            return None
        g = glogabs
    Ainv, _ = _inv_ex_op(A)
    return g.unsqueeze(-1).unsqueeze(-1) * Ainv.mH


_slogdet_op.register_autograd(_slogdet_backward, setup_context=_slogdet_setup)


@torch.library.custom_op("mpslinalg::small_solve_ex", mutates_args=())
def _solve_ex_op(A: torch.Tensor, B: torch.Tensor, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return _solve_impl(A, B, left)


@_solve_ex_op.register_fake
def _(A, B, left):
    batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    return B.new_empty(*batch, B.shape[-2], B.shape[-1]), A.new_empty(A.shape[:-2], dtype=torch.int32)


def _solve_setup(ctx, inputs, output):
    A, B, left = inputs
    ctx.left = left
    ctx.b_shape = B.shape
    ctx.save_for_backward(A, output[0])


def _sum_to(x: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Reduce broadcast batch dimensions of ``x`` back to ``shape``."""
    if x.shape == shape:
        return x
    lead = x.ndim - len(shape)
    x = x.sum(dim=tuple(range(lead))) if lead > 0 else x
    dims = tuple(i for i, (a, b) in enumerate(zip(x.shape, shape)) if b == 1 and a != 1)
    return x.sum(dim=dims, keepdim=True) if dims else x


def _solve_backward(ctx, gX, ginfo):
    A, X = ctx.saved_tensors
    if gX is None:
        return None, None, None
    left = ctx.left
    # left:  X = A^{-1} B -> gB = A^{-H} gX, gA = -gB X^H
    # right: X = B A^{-1} -> gB = gX A^{-H}, gA = -X^H gB
    gB, _ = _solve_ex_op(A.mH, gX, left)
    gA = -(gB @ X.mH) if left else -(X.mH @ gB)
    return _sum_to(gA, A.shape), _sum_to(gB, ctx.b_shape), None


_solve_ex_op.register_autograd(_solve_backward, setup_context=_solve_setup)


# ---------------------------------------------------------------------------------------------
# Adjugate by cofactors (polynomial in A: exact gradient of det for singular matrices too)
# ---------------------------------------------------------------------------------------------


def _det_poly(m: torch.Tensor) -> torch.Tensor:
    """Determinant of (..., k, k), k <= 3, by its polynomial (differentiable to any order)."""
    k = m.shape[-1]
    if k == 0:
        return torch.ones(m.shape[:-2], dtype=m.dtype, device=m.device)
    if k == 1:
        return m[..., 0, 0]
    if k == 2:
        return m[..., 0, 0] * m[..., 1, 1] - m[..., 0, 1] * m[..., 1, 0]
    a = m[..., 0, :]
    return (a[..., 0] * (m[..., 1, 1] * m[..., 2, 2] - m[..., 1, 2] * m[..., 2, 1])
            - a[..., 1] * (m[..., 1, 0] * m[..., 2, 2] - m[..., 1, 2] * m[..., 2, 0])
            + a[..., 2] * (m[..., 1, 0] * m[..., 2, 1] - m[..., 1, 1] * m[..., 2, 0]))


def adjugate(A: torch.Tensor) -> torch.Tensor:
    """The adjugate ``adj(A)`` (``adj(A) A = det(A) I``) of (..., n, n) with n <= 4, by cofactors.

    Parameters
    ----------
    A : torch.Tensor
        Shape ``(*, n, n)``, ``n <= 4``, any floating/complex dtype.

    Returns
    -------
    torch.Tensor
        Same shape and dtype; ``adj(A)[j, i] = (-1)^(i+j) det(A without row i and column j)``.
        Differentiable to any order (a polynomial in ``A``); defined for singular ``A``.
    """
    n = A.shape[-1]
    if n > MAX_N:
        raise E.ShapeError(f"adjugate: n <= {MAX_N} expected, got shape {tuple(A.shape)}")
    if n == 0:
        return A.clone()
    if n == 1:
        return torch.ones_like(A)
    idx = [[j for j in range(n) if j != i] for i in range(n)]
    cof_rows = []
    for i in range(n):
        row = []
        for j in range(n):
            minor = A[..., idx[i], :][..., :, idx[j]]
            d = _det_poly(minor)
            row.append(d if (i + j) % 2 == 0 else -d)
        cof_rows.append(torch.stack(row, dim=-1))
    cof = torch.stack(cof_rows, dim=-2)
    return cof.mT


# ---------------------------------------------------------------------------------------------
# Public functions of the family (checked inputs; the LU family routes n <= 4 here)
# ---------------------------------------------------------------------------------------------


def _needs_op(*tensors: torch.Tensor) -> bool:
    """The custom op where :func:`mpslinalg._func.needs_custom_op` says so. Under torch.func
    transforms (vmap, grad, jacrev), which custom-op autograd does not support, the implementation
    runs the program in differentiable torch ops instead (see :func:`mpslinalg._func.functorch_active`)."""
    return not functorch_active() and needs_custom_op(*tensors)


def inv_ex(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverses of a batch of square matrices with ``n <= 4``, and LAPACK's ``info``.

    Parameters
    ----------
    A : torch.Tensor
        Shape ``(*, n, n)`` with ``n <= 4``; float32/complex64 on every device, float64/complex128
        on CPU/CUDA. Not modified; conjugate views and non-contiguous inputs are fine.

    Returns
    -------
    inv : torch.Tensor
        Shape ``(*, n, n)``, dtype of ``A``. Where ``info > 0`` the values are Inf/NaN, as LAPACK's
        ``getri`` would not have produced them.
    info : torch.Tensor
        int32, shape ``(*)``: the 1-based index of the first exactly-zero pivot of the
        partial-pivoted elimination of the equilibrated matrix, or 0. No host synchronisation.

    Raises
    ------
    ValueError
        If ``n > 4`` or ``A`` is not a batch of square matrices.

    Examples
    --------
    >>> import torch
    >>> from mpslinalg import small
    >>> X, info = small.inv_ex(torch.tensor([[4.0, 7.0], [2.0, 6.0]]))
    >>> X
    tensor([[ 0.6000, -0.7000],
            [-0.2000,  0.4000]])
    >>> info
    tensor(0, dtype=torch.int32)
    """
    _check_small("inv_ex", A)
    return _inv_ex_op(A) if _needs_op(A) else _inv_impl(A)


def det(A: torch.Tensor) -> torch.Tensor:
    """Determinants of a batch of square matrices with ``n <= 4``.

    Computed from the equilibrated pivoted factorisation (``n = 2``: doubled-precision ``ad − bc``)
    with the powers of two kept apart, so the result overflows or underflows only if the true
    determinant does. Differentiable (also at singular matrices: the gradient is ``adj(A)^H``).

    Parameters
    ----------
    A : torch.Tensor
        Shape ``(*, n, n)``, ``n <= 4``.

    Returns
    -------
    torch.Tensor
        Shape ``(*)``, dtype of ``A``.

    Examples
    --------
    >>> import torch
    >>> from mpslinalg import small
    >>> small.det(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor(-2.)
    """
    _check_small("det", A)
    return _det_op(A) if _needs_op(A) else _det_impl(A)


def slogdet(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sign (phase) and log of the absolute value of the determinant, ``n <= 4``.

    Entries near 1e±30 work: the determinant's power of two is carried as an integer.

    Parameters
    ----------
    A : torch.Tensor
        Shape ``(*, n, n)``, ``n <= 4``.

    Returns
    -------
    sign : torch.Tensor
        Shape ``(*)``, dtype of ``A`` (``det/|det|``; 0 for singular matrices).
    logabsdet : torch.Tensor
        Shape ``(*)``, real dtype (``-inf`` for singular matrices).

    Examples
    --------
    >>> import torch
    >>> from mpslinalg import small
    >>> sign, logabs = small.slogdet(1e30 * torch.eye(4))
    >>> sign, logabs
    (tensor(1.), tensor(276.3102))
    """
    _check_small("slogdet", A)
    return _slogdet_op(A) if _needs_op(A) else _slogdet_impl(A)


def solve_ex(A: torch.Tensor, B: torch.Tensor, *, left: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Solve ``A X = B`` (``left=True``) or ``X A = B`` for square ``A`` with ``n <= 4``.

    Equilibrated Gaussian elimination with partial pivoting (backward stable).

    Parameters
    ----------
    A : torch.Tensor
        Shape ``(*, n, n)``, ``n <= 4``.
    B : torch.Tensor
        Shape ``(*, n, k)`` (``left=True``) or ``(*, k, n)``; batch dimensions broadcast with ``A``'s;
        same dtype and device as ``A``.
    left : bool
        Which side ``A`` is on.

    Returns
    -------
    X : torch.Tensor
        Shape of ``B`` broadcast to the common batch shape.
    info : torch.Tensor
        int32 of ``A``'s batch shape (as ``torch.linalg.solve_ex``): first exactly-zero pivot
        (1-based) or 0.

    Examples
    --------
    >>> import torch
    >>> from mpslinalg import small
    >>> X, info = small.solve_ex(torch.tensor([[2.0, 0.0], [0.0, 4.0]]), torch.ones(2, 1))
    >>> X.flatten()
    tensor([0.5000, 0.2500])
    """
    _check_small("solve_ex", A)
    E.check_matrix("solve_ex", "B", B)
    E.check_same("solve_ex", ("A", "B"), A, B)
    E.check_rhs("solve_ex", A, B, left=left)
    return _solve_ex_op(A, B, left) if _needs_op(A, B) else _solve_impl(A, B, left)

