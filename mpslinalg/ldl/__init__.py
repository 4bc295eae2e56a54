"""The LDL family: ``ldl_factor``, ``ldl_factor_ex``, ``ldl_solve`` with ``torch.linalg``'s
signatures and semantics (DESIGN §6, §7): the Bunch–Kaufman factorization of symmetric,
complex symmetric and Hermitian indefinite matrices (KKT and saddle-point systems).

LAPACK's conventions exactly (``sytrf``/``hetrf`` and ``sytrs``/``hetrs``, lower triangle, as
torch), so ``LD`` and ``pivots`` equal torch's up to rounding: Bunch–Kaufman's threshold
``alpha = (1 + sqrt(17)) / 8``; the pivot measure ``|Re| + |Im|`` (``i?amax``), ``|Re|`` on a
Hermitian diagonal; ``pivots`` 1-based int32, ``-p`` at both columns of a 2x2 block; each column
of ``L`` stored with only its own and earlier interchanges applied; ``info = k`` for the first
column ``k`` (1-based) that is exactly zero (``D[k-1, k-1] = 0``) or has a NaN diagonal.

Algorithm
---------
``ldl_factor_ex`` of a batch ``[B, n, n]``:

* small matrices on the kernel backends (``n * n * itemsize <= 16 KiB``: float32 ``n <= 64``,
  complex64 ``n <= 45``) are one ``ldl_small`` dispatch (``metal/ldl.metal``: ``sytf2``/``hetf2``,
  one matrix per threadgroup in threadgroup memory);
* everything else is the blocked ``lasyf``/``lahef`` factorization in torch ops, vectorised over the
  batch (:mod:`mpslinalg.ldl.kernels`): ``nb``-column panels updated column by column from
  ``W = L D``, then the trailing matrix by one matrix product ``A22 -= L21 W21ᴴ``; up to
  ``Tuning.small_max`` one panel covers the whole matrix. The batch runs in lockstep (a matrix
  whose previous step chose a 2x2 block skips a step), so pivots and ``info`` stay on the device.

``ldl_solve`` is ``sytrs``/``hetrs`` in torch ops, vectorised over the batch and the right-hand
sides. Neither op is differentiable; both raise torch's errors when differentiated.

Kernel contract (identical on every backend): ``small(A, piv, info, hermitian)``, see
:mod:`mpslinalg.ldl.kernels`.

Modules: ``kernels.py`` (tuning; the torch-op panel and the Metal ``small``), ``algorithm.py``
(``sytrf`` over the kernels, ``sytrs``), ``ops.py`` (declarations), ``api.py`` (public ops),
``workloads.py`` (main-job rows).
"""

from __future__ import annotations

import torch

from ..oplayer.family import Family, Grid, Route, takes
from ..oplayer.table import EVERY_SIZE
from .algorithm import ldl_factor_impl, ldl_solve_impl
from .api import ldl_factor, ldl_factor_ex, ldl_solve
from .kernels import TUNING, Tuning

__all__ = [
    "FAMILY",
    "TUNING",
    "Tuning",
    "ldl_factor",
    "ldl_factor_ex",
    "ldl_factor_impl",
    "ldl_solve",
    "ldl_solve_impl",
]


def _route_ldl_factor_ex(op, A, hermitian=False, check_errors=False):
    return op(A, hermitian=hermitian, check_errors=check_errors) if takes(A) else None


def _route_ldl_solve(op, LD, pivots, B, hermitian=False):
    import torch

    ok = takes(LD, B) and isinstance(pivots, torch.Tensor) and pivots.dtype == torch.int32
    return op(LD, pivots, B, hermitian=hermitian) if ok else None


FAMILY = Family(
    name="ldl",
    order=65,
    ops=("ldl_factor", "ldl_factor_ex", "ldl_solve"),
    # torch.linalg.ldl_factor is a composite of linalg_ldl_factor_ex
    routes=(Route("ldl_factor_ex", "linalg_ldl_factor_ex", _route_ldl_factor_ex),
            Route("ldl_solve", "linalg_ldl_solve", _route_ldl_solve)),
    # CPU: LAPACK was faster at every size measured here; CUDA: the lead's GPU runs fill it; mps: torch
    # has no LDL there (docs/calibrate.md)
    when={"mps": {op: {torch.float32: EVERY_SIZE, torch.complex64: EVERY_SIZE}
                  for op in ("ldl_factor_ex", "ldl_solve")}},
    grid={"ldl_solve": Grid(inputs=lambda A: (*torch.linalg.ldl_factor(A), A[..., :1].clone()))},
    metal=("ldl",),
    workloads="mpslinalg.ldl.workloads",
)
