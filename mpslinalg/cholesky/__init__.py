"""The Cholesky family: ``cholesky``, ``cholesky_ex``, ``cholesky_solve``, ``cholesky_inverse`` with
torch's signatures and semantics, and ``psd_safe_cholesky`` (DESIGN §6, §7).

LAPACK's conventions (``potrf``/``potrs``/``potri``): ``A = L Lᴴ`` with ``L`` lower triangular and a
real positive diagonal (``A = Uᴴ U``, ``U = Lᴴ``, with ``upper=True``); only the named triangle of
the input is read and the imaginary part of its diagonal is ignored; ``info`` is the 1-based order
of the first leading minor that is not positive definite — a pivot ``<= 0`` **or NaN** —, per
matrix, computed on the device (no host synchronisation in ``cholesky_ex``).

Algorithm
---------
The factorization of a batch ``[B, n, n]`` (a copy of the input's triangle, factored in place):

* small matrices (``n <= TUNING.small_max``, 64) are one **whole-matrix** dispatch on the kernel
  backends: ``cholesky_small`` with each matrix in threadgroup memory, one simdgroup per matrix
  and several matrices per threadgroup (as many as fit in 16 KiB, at most 8: MAGMA's tiny-matrix
  design, Abdelfattah et al. 2018);
* larger ones are **blocked right-looking**, by LAPACK ``potrf2``'s recursion: split at a multiple
  of ``nb``, factor the leading block, solve ``L21 L11ᴴ = A21`` with the triangular family's
  ``trsm``, update ``A22 -= L21 L21ᴴ`` by one matrix product, factor ``A22``; diagonal blocks of
  at most ``nb`` are the ``panel`` kernel (``cholesky_panel``: ``potf2`` of the block in
  threadgroup memory, one threadgroup per matrix). All but ``O(n² nb)`` of the flops are in the
  solves and GEMMs; ``O(n / nb)`` dispatches.
* on the ``torch`` backend the same algorithm runs over torch-op kernels: the diagonal blocks (and
  small batches) by the device's ``potrf`` or by ``potf2`` vectorised over the batch
  (``TUNING.torch_small``); up to ``TUNING.torch_direct_max`` the whole call is the device's
  ``potrf`` (never slower than ``torch.linalg``).

A failed pivot is replaced by 1 and the factorization continues (no data-dependent branch); the
columns of a failed matrix from its failing order on are cleared at the end.

``cholesky_solve`` is two triangular solves and ``cholesky_inverse`` the triangle's inverse and one
product (``potri``), both through the triangular family. ``psd_safe_cholesky`` tries every jitter
level in one batched factorization and keeps, per matrix, the first that works.

Kernel contracts: :mod:`mpslinalg.cholesky.kernels` (``small``, ``panel``).

Modules: ``kernels.py`` (tuning, the kernel contract, torch and Metal kernels), ``algorithm.py``
(the factorization, solve and inverse), ``ops.py`` (declarations and derivatives), ``api.py``
(public ops and ``psd_safe_cholesky``), ``workloads.py`` (main-job rows).
"""

from __future__ import annotations

import torch

from ..oplayer.family import Family, Grid, Route, takes
from ..oplayer.table import EVERY_SIZE
from .algorithm import cholesky_ex_impl, cholesky_inverse_impl, cholesky_solve_impl
from .api import PsdSafeCholesky, cholesky, cholesky_ex, cholesky_inverse, cholesky_solve, psd_safe_cholesky
from .kernels import TUNING, Tuning

__all__ = [
    "FAMILY",
    "TUNING",
    "PsdSafeCholesky",
    "Tuning",
    "cholesky",
    "cholesky_ex",
    "cholesky_ex_impl",
    "cholesky_inverse",
    "cholesky_inverse_impl",
    "cholesky_solve",
    "cholesky_solve_impl",
    "psd_safe_cholesky",
]


def _route_cholesky_ex(op, A, upper=False, check_errors=False):
    return op(A, upper=upper, check_errors=check_errors) if takes(A) else None


def _route_cholesky_solve(op, B, L, upper=False):
    return op(B, L, upper) if takes(L, B) else None


def _route_cholesky_inverse(op, L, upper=False):
    return op(L, upper) if takes(L) else None


FAMILY = Family(
    name="cholesky",
    order=60,
    ops=("cholesky", "cholesky_ex", "cholesky_solve", "cholesky_inverse", "psd_safe_cholesky"),
    # torch.linalg.cholesky is linalg_cholesky_ex + torch's error check (a composite op): one route
    routes=(Route("cholesky_ex", "linalg_cholesky_ex", _route_cholesky_ex),
            Route("cholesky_solve", "cholesky_solve", _route_cholesky_solve),
            Route("cholesky_inverse", "cholesky_inverse", _route_cholesky_inverse)),
    # no CPU/CUDA region measured faster than torch.linalg yet: the front doors call torch.linalg
    # there (docs/ops/cholesky.md has the CPU measurements); the lead fills CUDA after GPU runs
    when={"mps": {op: {torch.complex64: EVERY_SIZE} for op in ("cholesky_ex", "cholesky_solve", "cholesky_inverse")}},
    grid={"cholesky_solve": Grid(inputs=lambda A: (A[..., :1].clone(), torch.linalg.cholesky(A))),
          "cholesky_inverse": Grid(inputs=lambda A: (torch.linalg.cholesky(A),))},
    metal=("cholesky",),
    workloads="mpslinalg.cholesky.workloads",
)
