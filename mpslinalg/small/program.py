"""The small family's program (equilibrated elimination / adjugate, written once over primitives),
its runners (torch ops, generated C, Triton, ``torch.compile``) and the Metal kernel calls; see
:mod:`mpslinalg.small` for the algorithm."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..kernels import backend_for, kernel_name, load_library
from ..kernels.codegen import warn_once
from ..kernels.prims import ComplexOps, RealOps, TorchPrims, dot2, exponent, pow2
from ..oplayer import functorch_active
from ..oplayer.checks import broadcast_shapes
from . import c as small_c
from . import triton as small_triton

__all__ = ["MAX_N", "TUNING", "Program", "Tuning", "cpu_path", "set_compile"]

#: Largest matrix order served by this family.
MAX_N = 4

def _det2_accurate(ops, a, b, c, d):
    """``a d − b c`` in doubled precision (the FMA-accurate 2×2 determinant)."""
    factor = ops.P.split_factor
    if not ops.complex:
        return dot2([(1, a, d), (-1, b, c)], factor)
    (ar, ai), (br, bi), (cr, ci), (dr, di) = a, b, c, d
    re = dot2([(1, ar, dr), (-1, ai, di), (-1, br, cr), (1, bi, ci)], factor)
    im = dot2([(1, ar, di), (1, ai, dr), (-1, br, ci), (-1, bi, cr)], factor)
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
        return ComplexOps(TorchPrims(Ar.dtype)), Ar.dtype, a
    At = A.permute(1, 2, 0).contiguous()  # (n, n, B)
    return RealOps(TorchPrims(A.dtype)), A.dtype, [[At[i, j] for j in range(n)] for i in range(n)]


def _assemble(ops, entries, dtype: torch.dtype) -> torch.Tensor:
    """n×m nested list of SoA entries -> (B, n, m) tensor of ``dtype``."""
    if ops.complex:
        t = torch.stack([torch.stack([torch.stack(e, dim=-1) for e in row], dim=1) for row in entries], dim=1)
        return torch.view_as_complex(t).to(dtype)
    return torch.stack([torch.stack(row, dim=-1) for row in entries], dim=-2)


def _equilibrate(ops, a, two_sided: bool):
    """``A_s = R A C`` with power-of-two diagonal ``R = diag(2^-er)``, ``C = diag(2^-ec)``.

    One-sided (``two_sided=False``; ``R = I``): each column's largest ``cabs1`` is brought into
    ``[1, 2)``. Gaussian elimination with partial pivoting is invariant to column scaling (the pivot
    order and every rounding are those of GEPP on ``A``: powers of two are exact), so the
    eliminations keep LAPACK's accuracy on graded and badly scaled inputs, and ``|A_s| < 2``
    rules out overflow. Two-sided (the 2×2 adjugate paths, whose accuracy does not depend on
    pivoting): the row maxima, then the column maxima of ``R A``, both in ``[1, 2)``, so the
    determinant of ``A_s`` cannot underflow unless ``A`` is singular to working precision.

    The exponents are computed from the entries' own exponents (integers), never from the scaled
    values: a row scaling that pushes an entry into the subnormal range would lose its bits before
    the column scaling restores it (issue 14.3: ``[[1e-20, 3e20], [2e-20, 5e20]]``).

    Returns ``(a_s, er, ec)``: the scaled entries and the int exponents (``er`` None if one-sided).
    """
    n = len(a)
    P = ops.P
    mag = [[ops.abs1(e) for e in row] for row in a]
    if not two_sided:
        ec = [_reduce(P.maximum, [mag[i][j] for i in range(n)]) for j in range(n)]
        ec = [P.exponent(m) for m in ec]
        c = [P.pow2(-e) for e in ec]
        return [[ops.scale(a[i][j], c[j]) for j in range(n)] for i in range(n)], None, ec
    er = [P.exponent(_reduce(P.maximum, mag[i])) for i in range(n)]
    # exponent of entry (i, j) of R A, in integers: <= 0, >= -2 emax
    rel = [[P.exponent(mag[i][j]) - er[i] for j in range(n)] for i in range(n)]
    ec = [_reduce(P.imax, [rel[i][j] for i in range(n)]) for j in range(n)]
    a_s = [[_scale_exp(ops, a[i][j], -er[i] - ec[j]) for j in range(n)] for i in range(n)]
    return a_s, er, ec


def _reduce(fn, xs):
    acc = xs[0]
    for x in xs[1:]:
        acc = fn(acc, x)
    return acc


def _scale_exp(ops, x, t):
    """``x · 2^t`` exactly (one rounding, only if the result is subnormal) for an integer ``t`` in
    ``[-emax, 3 emax]``: up to three powers of two of one sign, so no intermediate overflows or
    underflows unless the result does. (Two-sided scaling and unscaling need up to ~3 emax.)"""
    P = ops.P
    t1 = P.iclamp(t, -P.emax, P.emax)
    rest = t - t1
    t2 = P.iclamp(rest, 0, P.emax)
    return ops.scale(ops.scale(ops.scale(x, P.pow2(t1)), P.pow2(t2)), P.pow2(rest - t2))


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


def _inv2(ops, a):
    """2×2 inverse by the adjugate and a doubled-precision determinant; LAPACK-style ``info``."""
    (p, q), (r, s) = a
    d = _det2_accurate(ops, p, q, r, s)
    first_zero = ops.is_zero(p) & ops.is_zero(r)
    info = ops.P.to_i32(ops.P.where(first_zero, 1, ops.P.where(ops.is_zero(d), 2, 0)))
    x = [[ops.div(s, d), ops.neg(ops.div(q, d))], [ops.neg(ops.div(r, d)), ops.div(p, d)]]
    return x, info


def _core_inv(ops, a):
    """The inverse program on n×n entries: ``(x entries, info)`` (contract of ``small_inv``)."""
    n = len(a)
    if n == 2:  # adjugate: two-sided scaling; inv(A) = C inv(A_s) R
        a_s, er, ec = _equilibrate(ops, a, two_sided=True)
        x, info = _inv2(ops, a_s)
        x = [[_scale_exp(ops, x[i][j], -ec[i] - er[j]) for j in range(n)] for i in range(n)]
    else:  # elimination: column scaling only; inv(A) = C inv(A_s)
        a_s, _, ec = _equilibrate(ops, a, two_sided=False)
        if n == 1:
            x = [[ops.div(ops.one_like(a_s[0][0]), a_s[0][0])]]
            info = ops.P.to_i32(ops.is_zero(a_s[0][0]))
        else:
            lu, piv, _, info = _factor(ops, a_s)
            x = _getri(ops, lu, piv)
        c = [ops.P.pow2(-e) for e in ec]
        x = [[ops.scale(x[i][j], c[i]) for j in range(n)] for i in range(n)]
    fin = _all_finite(ops, a)
    x = [[_nan_unless(ops, fin, x[i][j]) for j in range(n)] for i in range(n)]
    return x, info


def _all_finite(ops, a):
    """Flag: every entry of ``a`` is finite."""
    # element-wise (metal/scalar.h's rule): isfinite(|Re| + |Im|) would call 2e38 + 2e38i non-finite
    parts = [p for row in a for e in row for p in (e if ops.complex else (e,))]
    return _reduce(lambda f, g: f & g, [ops.P.isfinite(p) for p in parts])


def _nan_unless(ops, fin, e):
    """``e`` where ``fin``, else NaN: a matrix with an Inf or NaN entry gets an all-NaN inverse or
    solution (LAPACK's elimination spreads the NaN to nearly every entry; a finite-looking number
    there would hide bad input)."""
    nan = ops.P.nans(ops.ref(e))
    return ops.where(fin, e, (nan, nan) if ops.complex else nan)


def _core_det(ops, a):
    """The determinant program: ``(mant, expo, info)`` with det = mant·2^expo (``small_det``).

    Elimination with partial pivoting on the column-scaled matrix; for ``n = 2`` with finite
    entries the doubled-precision ``ad − bc`` of the two-sided scaled matrix instead (more
    accurate). Inf/NaN entries give what LU arithmetic gives: e.g. ``det([[inf, 1], [1, 2]]) =
    inf``, NaN where the elimination meets ``inf − inf`` or ``0·inf``. The matrix factored is
    ``Aᵀ`` (same determinant): torch's det/slogdet hand the row-major storage to LAPACK, which
    reads it as ``Aᵀ``, so on non-finite input this gives torch's answers exactly.
    """
    n = len(a)
    P = ops.P
    a = [[a[j][i] for j in range(n)] for i in range(n)]  # Aᵀ: free, only the entry names change
    a_s, _, ec = _equilibrate(ops, a, two_sided=False)
    lu, _, odd, info = _factor(ops, a_s)
    mant, expo = _mant_expo(ops, [lu[k][k] for k in range(n)], _reduce(lambda x, y: x + y, ec))
    mant = ops.where(odd, ops.neg(mant), mant)
    if n == 2:
        b_s, er, ec2 = _equilibrate(ops, a, two_sided=True)
        d = _det2_accurate(ops, b_s[0][0], b_s[0][1], b_s[1][0], b_s[1][1])
        mant2, expo2 = _mant_expo(ops, [d], er[0] + er[1] + ec2[0] + ec2[1])
        (p, _), (r, _) = b_s
        info2 = P.to_i32(P.where(ops.is_zero(p) & ops.is_zero(r), 1, P.where(ops.is_zero(d), 2, 0)))
        fin = _all_finite(ops, a)
        mant, expo, info = ops.where(fin, mant2, mant), P.where(fin, expo2, expo), P.where(fin, info2, info)
    return mant, expo, info


def _mant_expo(ops, factors, expo):
    """``prod(factors) · 2^expo`` as ``(mant, expo)``: each factor's power of two is moved into the
    integer exponent first, so the product never overflows or underflows."""
    mant = None
    for f in factors:
        g = ops.P.exponent(ops.abs1(f))
        expo = expo + g
        f = ops.scale(f, ops.P.pow2(-g))
        mant = f if mant is None else ops.mul(mant, f)
    return mant, expo


def _program_inv(A: torch.Tensor):
    """(B, n, n) -> (inv (B, n, n), info (B,) int32): the contract of kernel ``small_inv``."""
    ops, _, a = _entries(A)
    x, info = _core_inv(ops, a)
    return _assemble(ops, x, A.dtype), info


def _program_det_parts(A: torch.Tensor):
    """(B, n, n) -> (mant (B,) of A.dtype, expo (B,) int32, info): det(A) = mant * 2^expo.

    ``cabs1(mant)`` lies in ``[2^-n, 2^n)`` (or ``mant`` is 0/NaN): the contract of ``small_det``.
    """
    ops, _, a = _entries(A)
    mant, expo, info = _core_det(ops, a)
    return _assemble(ops, [[mant]], A.dtype)[:, 0, 0], expo, info


def _core_solve_factor(ops, a):
    """Equilibrate and factor for a solve: ``(state, info)``, the state for :func:`_core_solve_rhs`."""
    a_s, _, ec = _equilibrate(ops, a, two_sided=False)
    lu, piv, _, info = _factor(ops, a_s)
    return (lu, piv, _all_finite(ops, a), [ops.P.pow2(-e) for e in ec]), info


def _core_solve_rhs(ops, state, b, bc):
    """``x = C solve(A_s, b)`` for right-hand-side entries ``b`` (a list of n), given the factors.

    ``bc`` broadcasts a per-matrix value against ``b``'s entries (unsqueeze in torch, identity in
    the generated kernels, which handle one column at a time).
    """
    lu, piv, fin, c = state
    n = len(lu)
    b = list(b)
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
    ops, _, a = _entries(A)
    n = len(a)
    state, info = _core_solve_factor(ops, a)
    if ops.complex:
        Br = torch.view_as_real(B)  # (Bt, n, k, 2)
        b = [(Br[:, i, :, 0], Br[:, i, :, 1]) for i in range(n)]
    else:
        b = [B[:, i, :] for i in range(n)]
    x = _core_solve_rhs(ops, state, b, lambda t: t.unsqueeze(-1))
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
        the compile: ~25 s on a 2-core CPU). ``"never"``: no generated code — torch.linalg
        (LAPACK) on the CPU, the eager program on CUDA (see :func:`cpu_path`). Any failure of generated code falls
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


def cpu_path(dtype: torch.dtype = torch.float32) -> str:
    """Which implementation serves ``n <= 4`` inverses, determinants and solves of CPU tensors of
    ``dtype`` on the ``torch`` backend (for the main job's environment report).

    Parameters
    ----------
    dtype : torch.dtype
        float32/complex64 (the generated C serves these) or float64/complex128.

    Returns
    -------
    str
        ``"generated C"`` (the program printed as C, compiled with the emulator's compiler),
        ``"torch.compile"`` (``set_compile("inductor")``) or ``"torch.linalg"`` (LAPACK itself with
        this family's NaN and determinant rules: ``set_compile("never")``, float64/complex128, no C
        compiler, or a failed build, which warns once).

    Examples
    --------
    >>> from mpslinalg import small
    >>> small.cpu_path() in ("generated C", "torch.compile", "torch.linalg")
    True
    """
    mode = _current_compile_mode()
    if mode == "inductor":
        return "torch.compile"
    if (mode == "auto" and dtype in (torch.float32, torch.complex64) and _C.compiler() is not None
            and not _C.failed):
        return "generated C"
    return "torch.linalg"


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
# CPU without generated code: torch.linalg (LAPACK) itself, with the family's rules on top. Measured
# (docs/ops/small.md): torch.linalg.inv_ex/solve_ex beat both the eager program (~hundreds of small
# torch ops) and LAPACK wrapped in this family's equilibration; column scaling does not change
# LAPACK's pivots or roundings anyway (powers of two), only its range at the extremes.
# ---------------------------------------------------------------------------------------------


def lapack_leaf_serves(A: torch.Tensor) -> bool:
    """Whether the CPU batch ``A`` (``n <= 4``) would run the LAPACK leaf below, not the generated C
    (no compiler, a failed build, ``set_compile("never")``, float64/complex128). There the LU
    family's front doors call ``torch.linalg`` itself (``lu.api._route``): the table's CPU regions
    were measured on the generated C, and the leaf is 0.64-0.83x torch.linalg (docs/ops/overhead.md)."""
    mode = _current_compile_mode()
    if not A.is_cpu or mode == "inductor" or _use_kernels(A):
        return False
    return mode == "never" or A.dtype not in _KERNEL_DTYPES or not _C.usable(A.shape[-1], A.is_complex())


def _abs1_t(A: torch.Tensor) -> torch.Tensor:
    return A.real.abs() + A.imag.abs() if A.is_complex() else A.abs()


def _leaf_equilibrate(A: torch.Tensor):
    """Vectorised column scaling ``A_s = A C`` on (B, n, n) (the program's one-sided rule; LAPACK's
    pivots are invariant to it); returns ``(A_s, ec, c)``, ``c = 2^-ec`` of shape (B, n)."""
    ec = exponent(_abs1_t(A).amax(-2))
    c = pow2(-ec, _real_dtype(A.dtype))
    return A * c.unsqueeze(-2), ec, c


def _leaf_inv(A: torch.Tensor):
    X, info = torch.linalg.inv_ex(A)  # getrf + getrs: the pivots and info rule of the program
    return _leaf_nan_unless_finite(A, X.contiguous()), info


def _leaf_nan_unless_finite(A: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """NaN (``nan+nanj`` for complex, as torch) for the whole result of a matrix with an Inf/NaN
    entry (the program's rule), in place on the freshly computed ``X``. One sum per matrix proves
    the finite ones (an Inf/NaN entry makes its sum non-finite; a finite sum has none); only the
    matrices whose sum is not finite (an overflowing sum of finite entries too) are read entry by
    entry: 0.6 against 5.2 ms for ``isfinite(A).all`` at 100000x4x4. CPU only: the host reads CPU
    memory."""
    bad = ~torch.isfinite(A.flatten(-2).sum(-1))
    if not bool(bad.any()):
        return X
    bad[bad.clone()] = ~torch.isfinite(A[bad]).flatten(-2).all(-1)
    nan = complex(float("nan"), float("nan")) if X.is_complex() else float("nan")
    return X.masked_fill_(bad[:, None, None], nan)


def _leaf_det_parts(A: torch.Tensor):
    rdt = _real_dtype(A.dtype)
    n = A.shape[-1]
    As, ec, _ = _leaf_equilibrate(A.mT)  # Aᵀ as the program (and torch's det) factors it
    LU, piv, info = torch.linalg.lu_factor_ex(As)
    d = LU.diagonal(dim1=-2, dim2=-1)
    g = exponent(_abs1_t(d))
    mant = (d * pow2(-g, rdt)).prod(-1)  # Inf/NaN entries: what LU arithmetic gives
    swaps = (piv != torch.arange(1, n + 1, dtype=piv.dtype, device=piv.device)).sum(-1)
    mant = torch.where(swaps % 2 == 1, -mant, mant)
    expo = (ec.sum(-1) + g.sum(-1)).to(torch.int32)
    return mant, expo, info


def _leaf_solve(A: torch.Tensor, B: torch.Tensor):
    X, info = torch.linalg.solve_ex(A, B)
    return _leaf_nan_unless_finite(A, X.contiguous()), info


_LEAVES: dict[str, Callable] = {"inv": _leaf_inv, "det": _leaf_det_parts, "solve": _leaf_solve}


# ---------------------------------------------------------------------------------------------
# Generated code: the program printed as C (CPU) and as Triton (CUDA) by mpslinalg.kernels
# ---------------------------------------------------------------------------------------------


class Program:
    """The small family's program, written once over primitives ``P`` (see :class:`TorchPrims`).

    The torch path runs it on tensors; the code generators of :mod:`mpslinalg.kernels`
    (``small_c``, ``small_triton``) run it on symbolic values that print a kernel. Entries are
    n×n nested lists of SoA values (complex: ``(re, im)`` pairs).
    """

    @staticmethod
    def ops(P, is_complex: bool):
        """Scalar arithmetic over primitives ``P``."""
        return ComplexOps(P) if is_complex else RealOps(P)

    inv = staticmethod(_core_inv)  # (ops, a) -> (x, info)
    det = staticmethod(_core_det)  # (ops, a) -> (mant, expo, info)
    solve_factor = staticmethod(_core_solve_factor)  # (ops, a) -> (state, info)
    solve_rhs = staticmethod(_core_solve_rhs)  # (ops, state, b, bc) -> x


_C = small_c.CKernels(Program, tag="small")
_TRITON = small_triton.TritonKernels(Program)


def _run_program(name: str, *args: torch.Tensor):
    """Run program ``name`` on (B, n, n) inputs by the fastest available route on their device."""
    A = args[0]
    if functorch_active():
        return _PROGRAMS[name](*args)
    mode = _current_compile_mode()
    generated = mode == "auto" and not torch.compiler.is_compiling()
    if generated and _TRITON.usable(name, A):
        out = _TRITON.try_run(name, *args)
        if out is not None:
            return out
    if (generated and A.device.type == "cpu" and A.dtype in (torch.float32, torch.complex64)
            and _C.usable(A.shape[-1], A.is_complex())):
        return _C.run(name, *args)
    want = _want_compile(A.shape[0], A.device)
    if A.device.type == "cpu" and not want and not torch.compiler.is_compiling():
        return _LEAVES[name](*args)
    if want:
        key = f"{name}:{A.device.type}"
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
            except Exception as exc:  # noqa: BLE001 - the eager program computes the same thing
                _compiled.pop(key, None)
                _compile_failed.add(key)
                warn_once(f"compile:{key}", f"mpslinalg: torch.compile of the small-matrix program failed "
                          f"({type(exc).__name__}); using the eager program (same results, slower)")
    return _PROGRAMS[name](*args)

# ---------------------------------------------------------------------------------------------
# Kernel dispatch: torch program, or the Metal kernels (metal / emulator), one call site
# ---------------------------------------------------------------------------------------------

_GROUP = 64  # threads per threadgroup of the Metal kernels (one matrix per thread)
_KERNEL_DTYPES = (torch.float32, torch.complex64)
_LOADS = ("direct", "staged")  # the load variants of small_inv / small_det (metal/small.metal)
_ALIGN = 16  # bytes: the direct accesses are float4 (metal/small.metal, "Load variant direct")


@dataclass
class Tuning:
    """How the family's Metal kernels run on the kernel backends (``metal``, ``emulator``).

    Attributes
    ----------
    load : dict
        Per device type (``"mps"``, and ``"cpu"`` / ``"cuda"`` for the emulator's targets), the
        load variant of ``small_inv`` and ``small_det``: ``"direct"`` (each thread reads its own
        matrix with float4 / float2 loads; the inverse leaves through its simdgroup's slice of
        threadgroup memory, coalesced, after a simdgroup barrier; no threadgroup barrier) or
        ``"staged"`` (a threadgroup's 64 matrices pass through 8 KiB of threadgroup memory both
        ways so that global accesses are coalesced; two threadgroup barriers). Both compute the
        same results with the same arithmetic. Devices not listed use ``"direct"``. Why
        ``"direct"`` is the Mac default, and the H200 measurements of both: docs/ops/small.md,
        "Load variants". To try the other on a Mac: ``mpslinalg.small.TUNING.load["mps"] =
        "staged"``.
    """

    load: dict = field(default_factory=lambda: {"mps": "direct", "cuda": "direct", "cpu": "direct"})


#: The tuning in use (module-level, mutable: benchmarks and tests adjust it).
TUNING = Tuning()


def _load_variant(device: torch.device, load: str | None = None) -> str:
    """``load``, or the tuned variant for ``device``, validated (a bad value is a configuration
    error naming the field)."""
    if load is None:
        if not isinstance(TUNING.load, dict):
            raise ValueError(f"mpslinalg.small.TUNING.load must be a dict of device type -> one of "
                             f"{_LOADS}, got {TUNING.load!r}")
        load = TUNING.load.get(device.type, "direct")
        what = f"mpslinalg.small.TUNING.load[{device.type!r}]"
    else:
        what = "load"
    if load not in _LOADS:
        raise ValueError(f"{what} must be one of {_LOADS} (the load variants of metal/small.metal), "
                         f"got {load!r}")
    return load


def _use_kernels(A: torch.Tensor) -> bool:
    b = backend_for(A.device)
    return b in ("metal", "emulator") and A.dtype in _KERNEL_DTYPES and not functorch_active()


def _padded(batch: int) -> int:
    """Threads for the inverse and determinant kernels: ``batch`` rounded up to whole threadgroups."""
    return -(-batch // _GROUP) * _GROUP


def _aligned(A3: torch.Tensor) -> torch.Tensor:
    """``A3``, or a copy where its first byte is not 16-byte aligned: the kernels' vector accesses
    need it (a contiguous view can start anywhere in its storage). Host metadata only, no sync."""
    if A3.device.type == "mps":  # MTLBuffers are page aligned; the view starts at its offset
        offset = A3.storage_offset() * A3.element_size()
    else:
        offset = A3.data_ptr()
    return A3 if offset % _ALIGN == 0 else A3.clone()


def _kernel_inv(A3: torch.Tensor, load: str | None = None, **launch):
    """Kernel ``small_inv`` on contiguous (B, n, n) ``A3``. ``load``: the variant (default
    :attr:`Tuning.load` of the device); ``launch``: emulator-only keywords (``order``, ``seed``,
    ...) for the kernel tests, which go through this call site."""
    n, batch = A3.shape[-1], A3.shape[0]
    A3 = _aligned(A3)
    X = torch.empty_like(A3)
    info = torch.empty(batch, dtype=torch.int32, device=A3.device)
    lib = load_library("small", A3.device)
    staged = _load_variant(A3.device, load) == "staged"
    name = kernel_name("small_inv_staged", A3.dtype, n) if staged else kernel_name("small_inv_direct", A3.dtype, n)
    getattr(lib, name)(A3, X, info, batch, threads=_padded(batch), group_size=_GROUP, **launch)
    return X, info


def _kernel_det_parts(A3: torch.Tensor, load: str | None = None, **launch):
    """Kernel ``small_det`` (see :func:`_kernel_inv`)."""
    n, batch = A3.shape[-1], A3.shape[0]
    A3 = _aligned(A3)
    mant = torch.empty(batch, dtype=A3.dtype, device=A3.device)
    expo = torch.empty(batch, dtype=torch.int32, device=A3.device)
    info = torch.empty(batch, dtype=torch.int32, device=A3.device)
    lib = load_library("small", A3.device)
    staged = _load_variant(A3.device, load) == "staged"
    name = kernel_name("small_det_staged", A3.dtype, n) if staged else kernel_name("small_det_direct", A3.dtype, n)
    getattr(lib, name)(A3, mant, expo, info, batch, threads=_padded(batch), group_size=_GROUP, **launch)
    return mant, expo, info


def _kernel_solve(A3: torch.Tensor, B3: torch.Tensor, **launch):
    """Kernel ``small_solve`` on (B, n, n) ``A3`` and (B, n, k) ``B3`` (see :func:`_kernel_inv`)."""
    n, batch, k = A3.shape[-1], A3.shape[0], B3.shape[-1]
    A3 = _aligned(A3)
    X = torch.empty_like(B3)
    info = torch.empty(batch, dtype=torch.int32, device=A3.device)
    kern = getattr(load_library("small", A3.device), kernel_name("small_solve", A3.dtype, n))
    kern(A3, B3, X, info, batch, k, threads=batch * max(k, 1), group_size=_GROUP, **launch)
    return X, info


def _resolved3(A: torch.Tensor) -> torch.Tensor:
    """(*, n, m) -> contiguous, conj/neg-resolved (B, n, m)."""
    batch = 1
    for d in A.shape[:-2]:
        batch *= d
    return A.resolve_conj().resolve_neg().reshape(batch, A.shape[-2], A.shape[-1]).contiguous()


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
    return _det_from_parts(mant, expo)


def _det_from_parts(mant: torch.Tensor, expo: torch.Tensor) -> torch.Tensor:
    """``mant · 2^expo`` (overflows/underflows only if the determinant does)."""
    rdt = _real_dtype(mant.dtype)
    e1 = torch.div(expo, 2, rounding_mode="floor")
    return mant * pow2(e1, rdt) * pow2(expo - e1, rdt)


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
    batch_shape = broadcast_shapes(A.shape[:-2], B.shape[:-2])  # the op layer's: torch's costs ~20 us
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
