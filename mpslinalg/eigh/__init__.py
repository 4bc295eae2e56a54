"""The eigh family: ``eigh``, ``eigvalsh`` with torch's signatures and semantics, and ``eigh_ex``
(per-matrix ``info``, no host synchronisation) — Hermitian and real symmetric eigenproblems
(DESIGN §6, §7).

Contract
--------
Only the triangle named by ``UPLO`` is read (and the diagonal's real part, as LAPACK); eigenvalues
are real and ascending, eigenvectors orthonormal columns ``A = V diag(L) Vᴴ``; float32/complex64 on
every device, float64/complex128 on CPU/CUDA; batched, broadcast, empty shapes, views, ``out=``. A
matrix with a non-finite entry in its triangle gets ``info = 1`` and NaN outputs (``eigh`` raises
torch's ``LinAlgError``); never a hang.

Algorithm
---------
For a batch ``[B, n, n]`` (:mod:`mpslinalg.eigh.algorithm`):

1. **Scale** every matrix by a power of two so that its largest ``|a_ij|`` is in ``[1/2, 1)``
   (exact: 1e±30 float32 inputs neither overflow nor underflow).
2. ``n <= Tuning.jacobi_max`` (64): **batched cyclic two-sided Jacobi**, round-robin (circle method)
   ordering, ``n/2`` disjoint pairs a round, all pairs of all matrices rotated at once;
   Rutishauser's rotation with the complex phase split off; **relative stopping rule** (Demmel &
   Veselić 1992): a pair is rotated when ``|a_pq| > tol·√|a_pp|·√|a_qq|``, ``tol = √n·u``, so the
   eigenvalues of a positive-definite ``A = D M D`` are accurate to ``O(n u κ(M))`` relatively,
   however graded ``D`` is. ``n <= 4`` (the 3x3 covariances of point-cloud normals): the
   ``jacobi_small`` contract, one matrix per thread in registers on Metal (``eigh_small``), same
   rotation and rule. Odd orders are padded by a zero row and column that no rotation touches.
3. larger ``n``: **Householder tridiagonalisation**, on the kernel backends (``metal``, ``emulator``;
   float32 and complex64) by the **two-stage reduction** (``Tuning.reduction = "two_stage"``, the
   default there): dense -> band of width ``Tuning.band_nb`` (LAPACK ``sy2sb``/``he2hb``: per panel a
   QR of the sub-panel and the two-sided compact-WY update, a fixed number of torch ops a panel),
   then band -> tridiagonal by Householder bulge chasing in one kernel (``sb2st``/``hb2st``,
   ``eigh_band_tridiag``; larfg's real ``beta`` makes a complex band's tridiagonal real), with
   ``V = Q1 (Q2 Z)`` (``eigh_band_q2`` over ``Z``'s columns, then ``ormqr``); else (the ``torch``
   backend, or ``"sytrd"`` selected) the one-stage LAPACK ``sytrd``/``latrd`` (panels of ``nb``
   columns, trailing rank-``2nb`` updates by matrix products, ~58 torch ops per column); then the
   **implicit QL** with Wilkinson shifts on the tridiagonal (a kernel: ``metal/eigh_tridiag.metal`` —
   one threadgroup per matrix, the shifts and rotations of a sweep by one thread, the rotations
   applied to the rows of ``Z`` by all threads; on the ``torch`` backend the device's own
   tridiagonal leaf), and the **blocked back-transformation** ``V = Q Z`` by the QR family's
   ``ormqr_impl`` (compact-WY products).
4. Sort ascending; ``info = 2`` for a matrix still rotating in its last Jacobi sweep (fixed sweep
   count on GPUs, :meth:`Tuning.sweeps`; the CPU stops after the first quiet sweep) or a
   tridiagonal eigenvalue past the QL iteration bound.

On the ``torch`` backend (CPU/CUDA) a front door makes one ``torch.linalg`` call outside the
measured table (``FAMILY.when``); ``eigh_ex`` keeps its contract there (non-finite matrices are
replaced by the identity before the call and flagged). Under ``torch.func`` transforms the op is
that same torch.linalg call.

Kernel contracts: :mod:`mpslinalg.eigh.kernels` (``jacobi``, ``jacobi_small``, ``tridiagonal``,
``band_tridiagonal``, ``band_q2``).

Derivatives: PyTorch's ``linalg_eig_backward``/``linalg_eig_jvp`` for the Hermitian case, with the
complex gauge check and its error; ``eigvalsh`` computes the eigenvectors when a derivative may be
taken (torch's ``_may_require_fw_or_bw_grad``).

Modules: ``kernels.py`` (tuning, the kernel contracts, torch and Metal kernels), ``algorithm.py``,
``ops.py`` (declaration and derivatives), ``api.py`` (public ops), ``workloads.py`` (main-job rows).
"""

from __future__ import annotations

from ..oplayer.family import Family, Route, takes
from .algorithm import INFO_NOCONV, INFO_NONFINITE, eigh_impl, eigh_via_torch, reduce_to_band, tridiagonalize
from .api import EighExResult, eigh, eigh_ex, eigvalsh
from .kernels import TUNING, Tuning
from .ops import eigh_backward, eigh_jvp

__all__ = [
    "FAMILY",
    "INFO_NOCONV",
    "INFO_NONFINITE",
    "TUNING",
    "EighExResult",
    "Tuning",
    "eigh",
    "eigh_backward",
    "eigh_ex",
    "eigh_impl",
    "eigh_jvp",
    "eigh_via_torch",
    "eigvalsh",
    "reduce_to_band",
    "tridiagonalize",
]


def _route_eigh(op, A, UPLO="L"):
    return op(A, UPLO) if takes(A) else None


def _route_eigvalsh(op, A, UPLO="L"):
    return op(A, UPLO) if takes(A) else None


FAMILY = Family(
    name="eigh",
    order=70,
    ops=("eigh", "eigh_ex", "eigvalsh"),
    routes=(Route("eigh", "linalg_eigh", _route_eigh), Route("eigvalsh", "linalg_eigvalsh", _route_eigvalsh)),
    when={},  # not measured yet: torch.linalg on CPU/CUDA outside ours_always / enable(when="always")
    metal=("eigh", "eigh_tridiag"),
    workloads="mpslinalg.eigh.workloads",
)
