"""The LU family: ``lu_factor(_ex)``, ``lu``, ``lu_solve``, ``lu_unpack``, ``solve(_ex)``, ``det``,
``slogdet``, ``inv(_ex)`` with ``torch.linalg``'s signatures and semantics (DESIGN §6, §7).

The whole story lives here: input checks, the device-agnostic algorithm, its kernel
contracts (implemented in ``metal/lu.metal`` for the ``metal``/``emulator`` backends and
with torch ops for the ``torch`` backend), the custom ops with fake implementations and autograd,
and the public wrappers.

Algorithm
---------
``_getrf`` factors a batch ``[B, M, N]`` in place into a copy of the input:

* small matrices (``M, N <= 32`` on the kernel backends) are one **whole-matrix kernel** dispatch
  for the whole batch (``lu_small``); on the ``torch`` backend matrices up to
  :attr:`Tuning.direct_max` are one call of the device's LAPACK-like leaf;
* larger ones, on the kernel backends: LAPACK's right-looking blocked ``getrf`` with blocks of
  ``nb = TUNING.panel_nb`` columns: the panel in one dispatch (``lu_panel``, one threadgroup, for
  short panels; ``lu_panel_tall``, one threadgroup of 1024 threads, for tall ones; with
  ``TUNING.panel_tall = "look"`` several threadgroups: ``lu_panel_look``, k columns per dispatch,
  every group repeating the small LU of the active rows on those columns, or ``lu_panel_step``,
  one), its
  interchanges on the columns left and right of it (one ``lu_laswp_block``: a permutation gather),
  ``U12 <- L11^{-1} A12`` (``mpslinalg.triangular.trsm``), ``A22 <- A22 - L21 U12`` (one GEMM);
* larger ones, on the ``torch`` backend: recursion on column halves (``getrf2``, Toledo 1997)
  with the device's leaf, interchanges applied by one gather per block.

Pivots (1-based int32), ``info`` and everything else stay on the device: no ``_ex`` path
synchronises with the host.

Kernel contracts (identical on every backend)
---------------------------------------------
``panel(LU, piv, info, o, w)`` (and ``panel_steps``: the same, shared by several threadgroups)
    LAPACK ``getf2`` of rows ``[o, M)`` x columns ``[o, o+w)`` of every matrix of the contiguous
    ``[B, M, N]`` buffer ``LU``, in place. Pivot of column ``j`` = first row of largest
    ``|Re|+|Im|`` (``icamax``), written 1-based and absolute to ``piv[:, j]``; rows are swapped only
    inside the panel's columns; a zero pivot column is not scaled and sets ``info`` (if still 0) to
    ``j + 1``; scaling multiplies by ``1/pivot`` when ``|pivot| >= sfmin``, else divides.
``small(LU, piv, info)``
    the same for the whole matrix (whole rows swapped).
``swap(X, piv, k1, k2, c0, nc, reverse)``
    LAPACK ``laswp``: apply the interchanges ``piv[:, k1:k2]`` (1-based absolute rows) to columns
    ``[c0, c0+nc)`` of the contiguous ``[B, M, N]`` buffer ``X``, in order or in reverse order.

The ``torch`` backend implements ``panel``/``small`` with the device's own LAPACK-like leaf
(``torch.linalg.lu_factor_ex``: LAPACK ``getrf`` on CPU, cuSOLVER/MAGMA on CUDA — the same pivot
rule and ``info``), and ``swap`` with a sync-free permutation gather (:func:`_swaps_to_perm`).

Autograd follows PyTorch's formulas (``FunctionsManual.cpp``), conjugate-Wirtinger; every backward
calls our own differentiable ops, so double backward works. Under ``torch.func`` transforms each op
runs as the equivalent autograd.Function of :mod:`mpslinalg._func` (same backward, generated vmap
rule, forward-mode ``jvp``s below), on the torch-op path. ``det``'s gradient at an exactly
singular matrix is the adjugate, not the zero matrix ``torch.linalg.det`` returns: from the
forward's LU with its smallest pivot replaced by a rank-1 update (``oplayer.derivatives``, no host
read), and from the project's SVD where LU shows two or more negligible pivots (CPU).

Modules: ``kernels.py`` (tuning; the ``panel``/``small``/``swap`` contracts with torch ops and with
the Metal sources), ``algorithm.py`` (blocked ``getrf`` on the kernel backends, recursive ``getrf2``
on torch, ``getrs``, inverses and determinants from the factors), ``ops.py`` (declarations and
derivatives), ``api.py`` (front doors), ``unpack.py`` (``lu_unpack``: its op, derivatives and front
door), ``torch_cpu.py`` (torch.linalg's LU calls, looped per matrix where torch's CPU batched getrf
races), ``lapack.py`` (the CPU LAPACK path: SciPy's ``getrf``/``gesv`` for one large CPU matrix,
where ``oplayer.table.LAPACK`` says), ``workloads.py`` (the family's main-job rows).
"""

from __future__ import annotations

import torch

from ..oplayer.family import Family, Grid, Route, takes
from ..oplayer.table import EVERY_SIZE
from . import torch_cpu
from .api import det, inv, inv_ex, lu, lu_factor, lu_factor_ex, lu_solve, slogdet, solve, solve_ex
from .kernels import TUNING, Tuning
from .unpack import lu_unpack

__all__ = [
    "FAMILY",
    "TUNING",
    "Tuning",
    "det",
    "inv",
    "inv_ex",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "lu_unpack",
    "slogdet",
    "solve",
    "solve_ex",
]


# --------------------------------------------------------------------------------------------------
# The family's declaration: its ops, the aten operators enable() replaces, where it is measured faster
# --------------------------------------------------------------------------------------------------


def _route_inv_ex(op, A, check_errors=False):
    return op(A, check_errors=check_errors) if takes(A) else None


def _route_unary(op, A):
    return op(A) if takes(A) else None


def _route_solve_ex(op, A, B, left=True, check_errors=False):
    return op(A, B, left=left, check_errors=check_errors) if takes(A, B) else None


def _route_solve(op, A, B, left=True):
    return op(A, B, left=left) if takes(A, B) else None


def _route_lu_factor_ex(op, A, pivot=True, check_errors=False):
    return op(A, check_errors=check_errors) if pivot and takes(A) else None


def _route_lu(op, A, pivot=True):
    return op(A) if pivot and takes(A) else None


def _route_lu_solve(op, LU, pivots, B, left=True, adjoint=False):
    ok = takes(LU, B) and isinstance(pivots, torch.Tensor) and pivots.dtype == torch.int32
    return op(LU, pivots, B, left=left, adjoint=adjoint) if ok else None


def _route_lu_unpack(op, LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    ok = takes(LU_data) and isinstance(LU_pivots, torch.Tensor) and LU_pivots.dtype == torch.int32
    return op(LU_data, LU_pivots, unpack_data, unpack_pivots) if ok else None


_F32, _C64 = torch.float32, torch.complex64
_SMALL = ("inv_ex", "det", "slogdet", "solve", "solve_ex")  # the small family's closed forms
FAMILY = Family(
    name="lu",
    order=30,
    ops=("lu_factor", "lu_factor_ex", "lu", "lu_solve", "solve", "solve_ex", "det", "slogdet", "inv", "inv_ex",
         "lu_unpack"),
    routes=(
        Route("lu_factor_ex", "linalg_lu_factor_ex", _route_lu_factor_ex, torch_wrong_on_cpu=torch_cpu.unsafe),
        Route("lu", "linalg_lu", _route_lu, torch_wrong_on_cpu=torch_cpu.unsafe),
        Route("lu_solve", "linalg_lu_solve", _route_lu_solve),
        # linalg_solve calls _linalg_solve_ex (which also returns LU and pivots), not linalg_solve_ex:
        # both public ops are routed.
        Route("solve", "linalg_solve", _route_solve, torch_wrong_on_cpu=torch_cpu.unsafe),
        Route("solve_ex", "linalg_solve_ex", _route_solve_ex, torch_wrong_on_cpu=torch_cpu.unsafe),
        Route("det", "linalg_det", _route_unary, grad_ours=True, torch_wrong_on_cpu=torch_cpu.unsafe),
        Route("slogdet", "linalg_slogdet", _route_unary, torch_wrong_on_cpu=torch_cpu.unsafe),
        Route("inv_ex", "linalg_inv_ex", _route_inv_ex, torch_wrong_on_cpu=torch_cpu.unsafe),
        Route("lu_unpack", "lu_unpack", _route_lu_unpack),
    ),
    when={
        # 2026-12-01, torch 2.13 CPU, shared 2-core x86-64: bench_routing.py --threads 1 --blocks 4,
        # kept only where the grid run and a re-measurement (--verify) both had every block >= 0.95x
        "cpu": {
            "inv_ex": {_F32: ((2, 4, 1024),), _C64: ((2, 4, 4096),)},
            "det": {_F32: ((2, 4, 4096),), _C64: ((3, 4, 4096),)},
            "slogdet": {_F32: ((3, 4, 4096),), _C64: ((2, 4, 4096),)},
            "solve": {_F32: ((2, 4, 4096),), _C64: ((2, 3, 4096),)},
            "solve_ex": {_F32: ((2, 3, 4096),), _C64: ((2, 4, 4096),)},
        },
        # 2026-12-01, H200, torch 2.11+cu130 (docs/routing.md, "CUDA"): bench_routing.py --device cuda
        # --blocks 2 (grid) where the median block was >= 1.05x and every block >= 0.95x; the complex
        # 3x3 inverse from the main job's rows (--mainjob: 2.1x routed)
        "cuda": {
            "inv_ex": {_F32: ((2, 4, 65536),), _C64: ((2, 2, 65536), (3, 3, 100000), (4, 4, 65536))},
        },
        # mps, not measured (docs/calibrate.md): complex, which torch rejects there, and the <= 4x4
        # closed forms (memory-bound); torch.linalg elsewhere until `python -m mpslinalg calibrate`
        "mps": {op: {_C64: EVERY_SIZE, **({_F32: ((1, 4, 0),)} if op in _SMALL else {})}
                for op in ("lu_factor_ex", "lu", "lu_solve", "solve", "solve_ex", "det", "slogdet", "inv_ex",
                           "lu_unpack")},
    },
    grid={"solve": Grid(inputs=lambda A: (A, A[..., :1].clone())),
          "solve_ex": Grid(inputs=lambda A: (A, A[..., :1].clone())),
          "lu_solve": Grid(inputs=lambda A: (*torch.linalg.lu_factor(A), A[..., :1].clone())),
          "lu_unpack": Grid(inputs=lambda A: tuple(torch.linalg.lu_factor(A)))},
    metal=("lu_panel", "lu_look", "lu_small", "lu_small_solve", "lu_swap"),  # kernel groups, one library each
    workloads="mpslinalg.lu.workloads",
)
