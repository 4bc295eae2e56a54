"""The SVD family's CPU kernel in C: the whole preconditioned one-sided Jacobi SVD of a batch.

Why C: the torch-op Jacobi of :mod:`mpslinalg.svd` pays a Python round (~35 small ops) per rotation
round, 0.004-0.14x torch.linalg on the CPU (docs/evidence/svd.md). Here one call does, per matrix, the
algorithm of :mod:`mpslinalg.svd`'s module docstring (DESIGN §6, LAPACK ``xGEJSV``/``xGESVJ``):

1. power-of-two scaling (max |a_ij| in [1/2, 1): exact, 1e±30 inputs neither overflow nor
   underflow); a non-finite entry gives ``info = 1`` and NaN outputs;
2. rows sorted by decreasing max-norm, columns by decreasing 2-norm (stable), unblocked Householder
   QR with LAPACK's ``xlarfg`` conventions (beta real, ``Q = H_0 ... H_{n-1}``);
3. one-sided Jacobi on the columns of ``X = Rᴴ`` (column-major, ``n x n``). A batch runs its
   matrices 8 (float32/complex64) or 4 (float64/complex128) at a time, one per SIMD lane
   (``jacobi_lanes``: every operation is one vector operation over the group, so the pair's chain
   of dot product, divisions and square roots is paid once per group; measured in
   docs/evidence/svd.md), cyclic by rows; from n = 16 with de Rijk's pivoting in each lane (a column
   swap within the lane), below in a fixed order; a lane stops rotating after its own first sweep
   without a significant rotation, so a matrix's result does not depend on its neighbours in the
   batch. The group's QR of step 2 and ``U``'s reflector product of step 5 run in the same lanes
   (``lane_geqr2``, ``lane_apply_q``). A single matrix (batch of one) runs ``jacobi``: cyclic by
   rows with de Rijk's pivoting (the largest remaining column first) at every order, SIMD along
   the columns. Every pair test works with the cosine ``|x_pᴴ x_q| / (‖x_p‖ ‖x_q‖)`` (``xGESVJ``'s
   ``AAPQ``): the dot product is accumulated in double (float32/complex64 products are exact
   there, nothing overflows or underflows), and for float64/complex128 columns below 2^-450 it is
   taken of both columns scaled by the larger one's power of two (one scale: the rotation's angle
   is that of the unscaled pair), so the test cannot overflow or underflow. Rotate when the cosine
   exceeds ``tol``, count the sweep as not converged when it exceeds ``ctol`` (the same ``tol =
   √n·u``, ``ctol = 2n·u`` as the torch kernel); Rutishauser's rotation with the complex phase
   split off. Column norms are recomputed exactly at the start of every sweep and updated after
   each rotation (``xGESVJ``), recomputed when the update cancels (the norm falls below half);
4. at most ``max_sweeps`` sweeps (the caller's :attr:`mpslinalg.svd.Tuning.max_sweeps`, 30 as
   ``xGESVJ``); stop after the first sweep without a significant rotation; ``info = 2`` if the
   last sweep run still had one;
5. ``σ_j = ‖x_j‖`` recomputed exactly, sorted descending (stable); ``V = Pc W Σ⁻¹`` (columns with
   ``σ = 0`` left zero: the caller completes them, :func:`mpslinalg.svd._complete`), and
   ``U = Prᵀ Q [Vj 0; 0 I]`` by applying the reflectors to ``[Vj; 0]`` (reduced) or to
   ``[Vj 0; 0 I]`` (``full_matrices``).

Loops over a column are written for auto-vectorisation (contiguous columns, ``restrict``,
``#pragma omp simd`` reductions with ``-fopenmp-simd``: no OpenMP runtime); the lane kernel uses
the vector extensions of clang/gcc (``vector_size``), which the compiler cannot decline. Built
once per dtype through the shared machinery (:class:`mpslinalg.kernels.codegen.CLibraries`: the emulator's
compiler discovery, the on-disk cache), called through ``ctypes`` over the batch split across
torch's intra-op threads. Without a compiler :func:`usable` is False and the torch-op path runs.

Kernel contract
---------------
``svd_jacobi(A, U, S, V, info, m, n, ucols, want_uv, max_sweeps, tol, ctol, lanes, b0, b1)`` for
matrices ``b0 <= b < b1`` of the contiguous ``[B, m, n]`` ``A`` (``m >= n >= 1``, complex
interleaved): writes ``S [B, n]`` (real, descending, scaled back), ``info [B]`` int32 (0, 1
non-finite, 2 no convergence) and, with ``want_uv``, ``U [B, m, ucols]`` (``ucols`` = ``n`` or
``m``) and ``V [B, n, n]`` (``V``, not ``Vᴴ``). ``lanes`` non-zero: steps 2, 3 and 5 run in SIMD
lanes (``svd_tall`` passes it for batches of more than one matrix). ``A`` is only read.
Returns 0, or -1 when the work space cannot be allocated.

``svd_jacobi_one(A, U, S, V, m, n, ucols, want_uv, max_sweeps, tol, ctol, cut)``: the same for one
matrix, returning the status itself (-1 non-finite, 0, 2 no convergence, 3 a σ to complete).
``pinv_jacobi(A, P, info, m, n, max_sweeps, tol, ctol, rtol)``: ``P = A⁺ [n, m]`` of one matrix
(any ``m, n``) with torch's cut ``σ_k > rtol·σ_1``; NaN ``P`` for a non-finite ``A``; info 2
leaves ``P`` unwritten.
"""

from __future__ import annotations

import ctypes
import math

import torch

from ..kernels.codegen import CLibraries
from .c_source import SVD_C_SOURCE
from .kernels import thresholds

__all__ = ["SVD_C", "SVD_C_SOURCE", "cpu_path", "gelsy", "pinv_one", "svd_one", "svd_tall", "usable"]

_FLAVOURS = {
    torch.float32: ("float", 0, "FLT_MAX"),
    torch.float64: ("double", 0, "DBL_MAX"),
    torch.complex64: ("float", 1, "FLT_MAX"),
    torch.complex128: ("double", 1, "DBL_MAX"),
}


# -fno-math-errno: sqrt as one instruction (vectorisable); it only drops errno, IEEE results and NaNs
# are unchanged (no -ffast-math: non-finite inputs must propagate)
FLAGS = ["-x", "c", "-O3", "-fPIC", "-shared", "-fopenmp-simd", "-fno-fast-math", "-fno-math-errno",
         "-ffp-contract=off", "-Wno-psabi"]


class SVDKernels(CLibraries):
    """The compiled Jacobi SVD, one library per dtype (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__("svd", fallback="LAPACK's SVD for svd/svdvals (torch.linalg's absolute accuracy, not "
                         "the Jacobi's relative accuracy) and the torch-op gelsy for lstsq (docs/ops/svd.md)")

    def source(self, dtype: torch.dtype) -> tuple[str, list[str], str]:
        real, cplx, rmax = _FLAVOURS[dtype]
        head = f"#define REAL {real}\n#define CPLX {cplx}\n#define REAL_MAX {rmax}\n"
        # AVX2 where this CPU has it (the small family's choice; the cache key includes the flags)
        from ..kernels.codegen import lanes_and_flags

        return head + SVD_C_SOURCE, FLAGS + lanes_and_flags()[1], f"svd_c_{str(dtype).split('.')[-1]}"

    def bind(self, lib: ctypes.CDLL, dtype: torch.dtype) -> None:
        i64, vp, f64 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_double
        lib.svd_jacobi.argtypes = [vp, vp, vp, vp, vp, i64, i64, i64, i64, i64, f64, f64, i64, i64, i64]
        lib.svd_jacobi.restype = ctypes.c_int
        lib.lstsq_gelsy.argtypes = [vp, vp, vp, vp, i64, i64, i64, f64, vp, f64, i64, i64]
        lib.lstsq_gelsy.restype = ctypes.c_int
        lib.svd_jacobi_one.argtypes = [vp, vp, vp, vp, i64, i64, i64, i64, i64, f64, f64, f64]
        lib.svd_jacobi_one.restype = ctypes.c_int
        lib.pinv_jacobi.argtypes = [vp, vp, vp, i64, i64, i64, f64, f64, f64]
        lib.pinv_jacobi.restype = ctypes.c_int


#: The process's SVD kernels (built lazily, per dtype).
SVD_C = SVDKernels()


def cpu_path() -> str:
    """Which implementation serves ``svd``/``svdvals``/``svd_ex`` of CPU tensors on the ``torch``
    backend (for the main job's environment report); builds nothing.

    Returns
    -------
    str
        ``"C Jacobi"`` (this module, with the emulator's compiler) or ``"LAPACK's SVD"`` (no C
        compiler, or a failed build, which warns once: :func:`unbuildable`).

    Examples
    --------
    >>> from mpslinalg.svd import c as svd_c
    >>> svd_c.cpu_path() in ("C Jacobi", "LAPACK's SVD")
    True
    """
    return "C Jacobi" if SVD_C.compiler() is not None and not SVD_C.failed else "LAPACK's SVD"


def unbuildable(A: torch.Tensor) -> bool:
    """The C kernel can't be built here for ``A``'s dtype (no compiler, or its build failed; warns
    once). The CPU's svd/svdvals then call LAPACK's SVD (issue 15: without the compiled path, what
    is fastest): the torch-op Jacobi, the algorithm's other form, ran at 0.00-0.14x torch.linalg
    there (docs/evidence/svd.md). A dtype without a C flavour is not unbuildable: the torch ops serve it."""
    return A.dtype in _FLAVOURS and not SVD_C.usable(A.dtype)


def usable(A: torch.Tensor) -> bool:
    """The C kernel serves ``A`` (a CPU tensor of a supported dtype, with a working compiler)."""
    return A.is_cpu and A.dtype in _FLAVOURS and SVD_C.usable(A.dtype)  # is_cpu: a tenth of device.type's cost


def svd_tall(A: torch.Tensor, full: bool, compute_uv: bool, max_sweeps: int
             ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """SVD of the CPU batch ``[B, m, n]`` (``m >= n >= 1``) by the C kernel.

    Parameters
    ----------
    A : torch.Tensor
        float32/float64/complex64/complex128 (not modified; conj/neg views and strides resolved).
    full : bool
        ``U`` is ``[B, m, m]`` (else ``[B, m, n]``).
    compute_uv : bool
        Compute ``U`` and ``V``; else they are None.
    max_sweeps : int
        The sweep bound.

    Returns
    -------
    U, S, V, info
        ``V`` (not ``Vᴴ``) ``[B, n, n]``; columns of ``U``/``V`` whose ``σ`` is zero: see the
        module docstring (``V``'s are zero, the caller completes them). ``info`` int32 ``[B]``.
    """
    A = A.resolve_conj().resolve_neg().contiguous()  # C reads the storage: bits and strides resolved
    Bn, m, n = A.shape
    lib = SVD_C.library(A.dtype)
    rdt = A.real.dtype if A.is_complex() else A.dtype
    ucols = m if full else n
    S = torch.empty(Bn, n, dtype=rdt)
    info = torch.empty(Bn, dtype=torch.int32)
    U = V = None
    if compute_uv:
        U = torch.empty(Bn, m, ucols, dtype=A.dtype)
        V = torch.empty(Bn, n, n, dtype=A.dtype)
    status: list[int] = []

    def run(*args):
        status.append(lib.svd_jacobi(*args))

    SVD_C._parallel(run, Bn, A.data_ptr(), U.data_ptr() if compute_uv else None, S.data_ptr(),
                    V.data_ptr() if compute_uv else None, info.data_ptr(), m, n, ucols, int(compute_uv),
                    max_sweeps, *thresholds(n, rdt), int(Bn > 1), grain=max(1, 2 ** 16 // (m * n)))
    if any(status):
        raise MemoryError(f"linalg.svd: no memory for the work space of a {m}x{n} matrix")
    return U, S, V, info


def svd_one(A: torch.Tensor, full: bool, compute_uv: bool, max_sweeps: int):
    """One CPU matrix ``A (m, n)`` from the front doors, the C kernel's call with nothing around it
    (issue 34.7: the op layer's round, the batch reshapes and the completion check cost +41 µs at
    8x8, the kernel itself ~9 µs). The same call as :func:`svd_tall`'s for a batch of one, so the
    same bits; ``U``, ``Vh`` in torch.linalg's layouts (``Vh`` column-major: the kernel's ``V``,
    row-major, is ``Vhᵀ`` in memory, conjugated in place for complex; no transposing copy).

    Returns
    -------
    (U, S, Vh) or None
        ``U``/``Vh`` None without ``compute_uv``. None where the general path must run: a
        non-finite entry or no convergence (``info != 0``: it raises or reports), or a zero or
        negligible ``σ`` whose column of ``V`` needs completing (that rare call then runs twice).
    """
    wide = A.shape[0] < A.shape[1]  # A = (U' S V'ᴴ)ᴴ = V' S U'ᴴ for the tall X = Aᴴ
    X = _plain(A.mH if wide else A)
    key = (X.shape, X.dtype, full, compute_uv, max_sweeps, wide)
    fn, args, real, nt, u_layout, v_layout = _ONE_PLANS.get(key) or _one_plan(*key)
    S = real.new_empty(nt)  # new_empty of ints: a third of torch.empty(shape, dtype=)'s cost
    if not compute_uv:
        return None if fn(X.data_ptr(), None, S.data_ptr(), None, *args) else (None, S, None)
    Ut = X.new_empty_strided(*u_layout)  # the kernel's U', V' (row-major)
    Vt = X.new_empty_strided(*v_layout)
    if fn(X.data_ptr(), Ut.data_ptr(), S.data_ptr(), Vt.data_ptr(), *args):
        return None  # non-finite, not converged, or a column of V to complete: the op's
    U, Vh = (Vt, Ut) if wide else (Ut, Vt)
    if X.is_complex():  # Vh's memory holds the kernel's V (or U'), Vhᵀ's conjugate
        torch.view_as_real(Vh)[..., 1].neg_()
    return U, S, Vh


#: :func:`svd_one`'s call, per (tall shape, dtype, full, compute_uv, max_sweeps, wide): the work of
#: turning a shape into the kernel's arguments and the output layouts, done once (host overhead).
_ONE_PLANS: dict = {}


def _one_plan(shape, dtype, full, compute_uv, max_sweeps, wide):
    (mt, nt), real = shape, _REAL[dtype]
    ucols = mt if full else nt
    # the buffer read as Aᴴ's factor's conjugate transpose is one of A's factors
    u_layout = ((ucols, mt), (1, ucols)) if wide else ((mt, ucols), (ucols, 1))
    v_layout = ((nt, nt), (nt, 1)) if wide else ((nt, nt), (1, nt))
    # algorithm.complete's cut: σ_n <= √tiny·σ_1 leaves a column of V to complete
    args = (mt, nt, ucols, int(compute_uv), max_sweeps, *thresholds(nt, real), math.sqrt(torch.finfo(real).tiny))
    plan = (SVD_C.library(dtype).svd_jacobi_one, args, torch.empty(0, dtype=real), nt, u_layout, v_layout)
    if len(_ONE_PLANS) < 256:  # bounded: a plan is a few tuples
        _ONE_PLANS[shape, dtype, full, compute_uv, max_sweeps, wide] = plan
    return plan


def pinv_one(A: torch.Tensor, rtol: float, max_sweeps: int) -> torch.Tensor | None:
    """``A⁺`` of one CPU matrix ``A (m, n)`` (``m, n >= 1``) in one C call: the Jacobi SVD of
    :func:`svd_one` and ``V Σ⁺ Uᴴ`` summed in double, keeping ``σ > rtol·σ₁`` as
    ``torch.linalg.pinv`` with ``atol = 0`` (issue 34.7: ``pinv``'s host overhead; no finiteness
    proof, op layer or torch product around it).

    Returns
    -------
    torch.Tensor or None
        ``(n, m)``, NaN for a non-finite ``A`` (the family's rule); None when the Jacobi did not
        converge (the general path reports it).

    Raises
    ------
    MemoryError
        The C work space could not be allocated.
    """
    m, n = A.shape
    X = _plain(A)
    P = torch.empty(n, m, dtype=X.dtype)
    info = ctypes.c_int32(0)
    status = SVD_C.library(X.dtype).pinv_jacobi(X.data_ptr(), P.data_ptr(), ctypes.addressof(info), m, n, max_sweeps,
                                                *thresholds(min(m, n), _REAL[X.dtype]), float(rtol))
    if status:
        raise MemoryError(f"linalg.pinv: no memory for the work space of a {m}x{n} matrix")
    return None if info.value == 2 else P


_REAL = {torch.float32: torch.float32, torch.float64: torch.float64, torch.complex64: torch.float32,
         torch.complex128: torch.float64}


def gelsy(A: torch.Tensor, B: torch.Tensor, rcond: float, lapack_qr: int | None = None, margin: float = 0.0
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """``lstsq``'s ``'gelsy'`` (:mod:`mpslinalg.svd.lstsq`'s algorithm) of CPU batches by the C kernel.

    Parameters
    ----------
    A, B : torch.Tensor
        ``(*, m, n)`` and ``(*, m, k)``, same batch and dtype (not modified). Scaled inside by powers
        of two (max entries in ``[1/2, 1)``, exact), as the torch-op version.
    rcond : float
        Pivots ``|r_jj| <= rcond·|r_00|`` end the rank.
    lapack_qr, margin : int or None, float
        The address of LAPACK's ``geqrf``/``ormqr``/``trsm`` for this dtype (``m >= n`` only;
        :func:`mpslinalg.svd.lstsq._lapack_qr`) and the bound's margin: a matrix whose unpivoted QR
        proves rank ``n`` is solved by those calls (``xgels``'s steps) instead of the pivoted QR.

    Returns
    -------
    X, rank
        ``(*, n, k)`` and int64 ``(*)`` (``-1`` for a matrix with a non-finite entry, whose
        solution is NaN).
    """
    batch, (m, n), k = A.shape[:-2], A.shape[-2:], B.shape[-1]
    Bn = math.prod(batch)
    A, B = _plain(A), _plain(B)
    lib = SVD_C.library(A.dtype)
    X = A.new_empty(*batch, n, k)  # A's dtype; no keyword or Size to parse (lstsq's host overhead)
    rank = torch.empty(batch, dtype=torch.int64)
    args = (A.data_ptr(), B.data_ptr(), X.data_ptr(), rank.data_ptr(), m, n, k, float(rcond), lapack_qr, float(margin))
    if Bn == 1:  # one matrix: no split to arrange (lstsq's host overhead)
        status = [lib.lstsq_gelsy(*args, 0, 1)]
    else:
        status = []
        SVD_C._parallel(lambda *a: status.append(lib.lstsq_gelsy(*a)), Bn, *args, grain=max(1, 2 ** 16 // (m * n)))
    if any(status):
        raise MemoryError(f"linalg.lstsq: no memory for the work space of a {m}x{n} matrix")
    return X, rank


def _plain(T: torch.Tensor) -> torch.Tensor:
    """``T`` with its conj/neg bits resolved and contiguous (C reads the storage), without a call
    for what is already so (lstsq's host overhead at small sizes)."""
    if T.is_conj():
        T = T.resolve_conj()
    if T.is_neg():
        T = T.resolve_neg()
    return T if T.is_contiguous() else T.contiguous()
