"""The LU family: ``lu_factor(_ex)``, ``lu``, ``lu_solve``, ``solve(_ex)``, ``det``, ``slogdet``,
``inv(_ex)`` with ``torch.linalg``'s signatures and semantics (DESIGN §6, §7).

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
  ``nb = TUNING.panel_nb`` columns: the panel (``lu_panel``, one threadgroup, for short panels;
  several threadgroups for tall ones: ``lu_panel_look``, k columns per dispatch, every group
  repeating the small LU of the active rows on those columns, or ``lu_panel_step``, one), its
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
"""

from __future__ import annotations

from .api import det, inv, inv_ex, lu, lu_factor, lu_factor_ex, lu_solve, slogdet, solve, solve_ex
from .kernels import TUNING, Tuning

__all__ = [
    "TUNING",
    "Tuning",
    "det",
    "inv",
    "inv_ex",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "slogdet",
    "solve",
    "solve_ex",
]
