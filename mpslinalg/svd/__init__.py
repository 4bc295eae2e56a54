"""The SVD family: ``svd``, ``svd_ex``, ``svdvals``, and the ops built on singular values, ``pinv``,
``matrix_rank``, ``cond``, ``matrix_norm``, ``lstsq``, with ``torch.linalg``'s semantics (DESIGN §6).

Algorithm (Drmač & Veselić's preconditioned one-sided Jacobi, LAPACK ``xGEJSV``/``xGESVJ``)
--------------------------------------------------------------------------------------------
For a batch ``[B, m, n]`` (wide matrices are handled as ``Aᴴ``, so ``m >= n``):

1. **Scale** every matrix by a power of two so that its largest ``|a_ij|`` is in ``[1/2, 1)``
   (exact; 1e±30 float32 inputs neither overflow nor underflow); non-finite input sets
   ``info = 1`` and gives NaN outputs.
2. **Precondition**: sort the rows by decreasing max-norm and the columns by decreasing 2-norm
   (Powell–Reid/Cox–Higham row sorting plus a static stand-in for column pivoting), Householder
   QR ``Pr A Pc = Q R``. ``R`` is then row-graded, so ``X = Rᴴ`` is column-graded: one-sided
   Jacobi on ``X`` is relatively accurate (Demmel & Veselić 1992) for two-sided graded ``A``.
3. **One-sided Jacobi** on the columns of ``X`` (``n × n``): round-robin (circle-method) parallel
   ordering, ``n/2`` disjoint pairs per round, ``n − 1`` rounds per sweep, all pairs of all
   matrices rotated at once. A pair is rotated when ``|x_pᴴ x_q| > tol·√α_p·√α_q`` (square roots
   taken separately: the product of the two squared norms can overflow/underflow),
   ``tol = √n·u`` (``xGESVJ``'s ``CTOL``; :func:`mpslinalg.svd.kernels.thresholds`, the one
   definition every backend is given). That is below the rounding noise of the computed dot
   product (``γ_n ≈ n·u``), so rounding alone can keep a converged matrix rotating by tiny angles
   (2 of 10000 random float32 3x3 matrices did, to the sweep bound): convergence counts only
   rotations with ``|x_pᴴ x_q| > ctol·√α_p·√α_q``, ``ctol = 2n·u``. Rotation: Rutishauser's
   ``t = sign(ζ)/(|ζ| + hypot(1, ζ))`` with the complex phase of ``x_pᴴ x_q`` split off.
4. **Sweep bound**: at most :attr:`Tuning.max_sweeps` sweeps (30, as ``xGESVJ``). On the CPU
   the loop stops after the first sweep without a rotation (checking is free there); on GPUs
   the number of sweeps is fixed in advance (:attr:`Tuning.gpu_sweeps`), so ``svd_ex`` never
   synchronises; a matrix that still rotated in its last sweep gets ``info = 2``.
5. ``σ_j = ‖w_j‖`` of the rotated columns ``W = X V``, sorted descending; ``A = U Σ Vᴴ`` with
   ``U = Prᵀ Q V`` and ``V = Pc W Σ⁻¹``. Columns of ``W Σ⁻¹`` with ``σ_j = 0`` are completed by a
   Householder QR of the computed columns, so ``V`` is orthonormal for rank-deficient and zero
   matrices; ``full_matrices=True`` takes ``U``'s extra columns from the complete ``Q``.

Never the Gram-matrix eigensolver: it squares κ, and singular values below ``√u·σ₁`` lose every
digit.

Kernel contract (identical on every backend)
--------------------------------------------
``jacobi(X, V, sweeps, tol, ctol, early_exit) -> (X', V', rotated)``
    One-sided Jacobi on the columns of the contiguous ``[B, n, n]`` buffer ``X`` (``n`` even; a
    zero padding column is never rotated), the same rotations applied to the columns of ``V``
    (``[B, n, n]`` or ``None``), for at most ``sweeps`` sweeps: pairs above ``tol`` are rotated,
    a sweep with no rotation above ``ctol`` is converged (with ``early_exit`` the loop stops
    there). Returns the rotated ``X``, ``V`` (the Metal kernels rotate the fresh buffers in place
    and return them; the torch kernels return new tensors, as ``torch.func`` needs) and a ``[B]``
    bool tensor: the matrix made a rotation above ``ctol`` in the last sweep run.

Modules
-------
``kernels.py`` (tuning, thresholds, the ``jacobi`` contract with torch ops and ``metal/svd.metal``),
``algorithm.py`` (steps 1-5, written once over a device path), ``paths.py`` (the device paths and
the one choice among them), ``ops.py`` (``svd_impl``, the declaration and derivatives), ``api.py``
(front doors), ``spectral.py`` (``pinv``, ``matrix_rank``, ``cond``, ``matrix_norm``), ``lstsq.py``,
``workloads.py`` (the main job's rows), ``qdwh.py`` (the QDWH polar decomposition and SVD of large
orders, opt-in by ``TUNING.large_driver = "qdwh"``: absolute accuracy only);
generated-code backends: ``c.py`` (the CPU's C kernel; its text in ``c_source.py``,
``c_lanes_source.py``, ``c_gelsy_source.py``), ``cuda.py`` (CUDA dispatch) and the Triton kernels
``triton_jacobi.py``, ``triton_regs.py``, ``triton_rot.py``, ``triton_fused.py``,
``triton_complete.py``, ``triton_square.py``.

Internal entry points (no checks; torch conventions): :func:`svd_impl`.
"""

from __future__ import annotations

import torch

from ..oplayer.family import Family, Grid, Route, takes
from ..oplayer.table import EVERY_SIZE
from .api import SVDExResult, svd, svd_ex, svdvals
from .c import cpu_path
from .kernels import TUNING, Tuning
from .lstsq import lstsq
from .ops import svd_impl
from .spectral import cond, matrix_norm, matrix_rank, pinv

__all__ = [
    "FAMILY",
    "TUNING",
    "SVDExResult",
    "Tuning",
    "cond",
    "cpu_path",
    "lstsq",
    "matrix_norm",
    "matrix_rank",
    "pinv",
    "svd",
    "svd_ex",
    "svd_impl",
    "svdvals",
]


def _route_svd(op, A, full_matrices=True, driver=None):
    return op(A, full_matrices=full_matrices) if driver is None and takes(A) else None


def _route_svdvals(op, A, driver=None):
    return op(A) if driver is None and takes(A) else None


def _route_lstsq(op, A, B, rcond=None, driver=None):
    return op(A, B, rcond=rcond) if driver is None and takes(A, B) else None


def _route_pinv(op, A, atol=None, rtol=None, hermitian=False):
    return op(A, atol=atol, rtol=rtol, hermitian=hermitian) if takes(A) else None


FAMILY = Family(
    name="svd",
    order=50,
    ops=("svd", "svd_ex", "svdvals", "pinv", "lstsq", "matrix_rank", "cond", "matrix_norm"),
    routes=(
        Route("svd", "linalg_svd", _route_svd),
        Route("svdvals", "linalg_svdvals", _route_svdvals),
        Route("pinv", "linalg_pinv.atol_rtol_tensor", _route_pinv),
        Route("lstsq", "linalg_lstsq", _route_lstsq),
    ),
    # mps: torch.linalg's SVD runs on the CPU there (docs/calibrate.md)
    when={"mps": {op: {torch.float32: EVERY_SIZE, torch.complex64: EVERY_SIZE}
                  for op in ("svd", "svdvals", "pinv", "lstsq")}},
    grid={"lstsq": Grid(inputs=lambda A: (A, A[..., :1].clone()))},
    metal=("svd",),
    workloads="mpslinalg.svd.workloads",
)
