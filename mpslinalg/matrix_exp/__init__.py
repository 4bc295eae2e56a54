"""The matrix exponential family: ``matrix_exp`` with ``torch.linalg.matrix_exp``'s signature and
semantics (DESIGN §6, §7).

Algorithm
---------
Scaling and squaring with the optimized Taylor approximants ``T_m`` (``m`` = 1, 2, 4, 8, 12, 18; 0 to
5 matrix products) of Bader, Blanes and Casas (2019), the degree and the scaling ``2^-s`` chosen
per matrix from the 1-norm so that the approximant's backward error is below ``u``; the batch is
evaluated at the largest degree any matrix needs and squared with per-matrix masks, so every
product is one batched ``matmul`` (on ``mps``: MPS's matrix products; no kernel of our own: the
work is all matrix products). One host read of two integers per call (degree and largest ``s``).
``vmap`` runs the op once on the mapped batch (``ranks=(2,)``); under the other ``torch.func``
transforms the op is ``torch.linalg.matrix_exp``.

Derivatives: the block-triangular identity ``exp([[X, E], [0, X]]) = [[exp X, L(X, E)], [0, exp X]]``
(forward mode ``L(A, dA)``, backward ``L(Aᴴ, G)``), each one exponential of order ``2n`` through
the same op: double backward and ``torch.func`` work.

Modules: ``algorithm.py`` (approximants, degree/θ table, scaling and squaring), ``ops.py`` (the
declaration and derivatives), ``api.py`` (the public op), ``workloads.py`` (main-job rows).
"""

from __future__ import annotations

from ..oplayer.family import Family, Route, takes
from .algorithm import DEGREES, THETAS, matrix_exp_impl, taylor_approximant
from .api import matrix_exp
from .ops import frechet

__all__ = ["DEGREES", "FAMILY", "THETAS", "frechet", "matrix_exp", "matrix_exp_impl", "taylor_approximant"]


def _route_matrix_exp(op, A):
    return op(A) if takes(A) and A.shape[-1] == A.shape[-2] else None


FAMILY = Family(
    name="matrix_exp",
    order=85,
    ops=("matrix_exp",),
    routes=(Route("matrix_exp", "linalg_matrix_exp", _route_matrix_exp),),
    when={},  # torch.linalg's own at every size on CPU/CUDA until measured (the lead fills CUDA)
    metal=(),
    workloads="mpslinalg.matrix_exp.workloads",
)
