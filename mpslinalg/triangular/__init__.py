"""Triangular solves whose work is matrix products: :func:`solve_triangular`.

The whole story of the op lives here (DESIGN §6, §11): input checks, the device-agnostic blocked
algorithm, its one kernel, autograd, and the public wrapper.

Algorithm
---------
Every variant is reduced, with *views* only, to a left solve ``op(A) X = B``:

* ``left=False`` (``X A = B``) is ``Aᵀ Xᵀ = Bᵀ`` with ``upper`` flipped; ``Aᵀ``, ``Bᵀ`` and ``Xᵀ`` are
  transposed views (matrix products take them without copies);
* ``upper`` only changes the order in which blocks are visited (bottom-up instead of top-down)
  and, for the diagonal-block kernel, swaps the row and column strides it is handed (an upper block
  is the transpose of a lower one);
* conjugate views stay views: ``torch.matmul`` honours the conj bit, and the kernel takes a
  ``conj`` flag.

The solve itself:

1. **one batched dispatch** inverts all ``nb × nb`` diagonal blocks (``nb ≤ 32``) of every matrix
   in the batch and writes a clean copy of each block (the ``trtri_diag`` kernel contract below);
2. the rest is matrix products, recursively: split the block rows in two halves, solve the first,
   update the right-hand side of the second with one GEMM (``B₂ − A₂₁ X₁``), solve the second.
   A leaf of at most ``leaf_blocks`` blocks is blocked substitution: per block row, ``R = B_j −
   A_j,<j X_<j`` (one GEMM), ``Y = D_j R`` and **one step of refinement**
   ``X_j = Y + D_j (R − T_jj Y)`` (three small GEMMs in all).

Why the refinement step: multiplying by an explicitly inverted block is not backward stable when
the block is ill-conditioned. The residual is ``(I − T_jj D_j) R`` with ``|I − T_jj D_j| ≲
n u |T_jj| |D_j|``, so LAPACK's ratio grows like κ(T_jj). Measured in float32 on Gaussian triangles
with ``b = T x`` (20 systems per size, n = 8…128, all 8 variants, float32 and complex64), the worst
``xTRT02`` ratio (pass mark 30) was:

=====================  ==================  =====================
                       16-wide blocks      32-wide blocks
=====================  ==================  =====================
inverse only           4e5 (unit: 36)      1e6 (unit: 1.9e3)
inverse + 1 refinement 0.7 (unit: 0.6)     205 (unit: 0.4)
LAPACK ``strsm``       0.3                 0.3
=====================  ==================  =====================

(The statement in DESIGN §6 that 16/32-wide inverses alone keep the ratio below 0.02·n holds only
for n = 64/128, where the computed x is so large that it hides the residual; at n = 16…48 they
fail by 10³–10⁶.) Hence ``nb = 16`` for a general diagonal and 32 for a unit one, always with the
refinement step. The explicit inverse of a whole triangle of order 64 or more is never formed.

On the ``metal``/``emulator`` backends, systems with ``n <= 64`` skip all of this: the fused
``trsm_small`` kernel solves them by substitution in one dispatch (bandwidth bound, backward
stable; see ``metal/triangular.metal``). Larger systems there recurse with GEMMs as in step 2 down
to leaves of at most 64 rows, each solved by one ``trsm_small`` dispatch on views (no inverses,
no refinement flops, ``O(n / 64)`` dispatches); ``TUNING.kernel_leaf = "trtri_diag"`` selects
steps 1-2 instead.

On the ``torch`` backend (CPU, CUDA) a vendor ``trsm`` exists, and it wins: systems with ``n``
up to ``TUNING.direct_max[device]`` are ONE ``torch.linalg.solve_triangular`` call (on CUDA at
every size: on the H200 every variant of the blocked path lost to one cuBLAS ``trsm``, see
:class:`Tuning`; on the CPU up to 512, LAPACK's substitution being 2× faster there than the
inverse path with its refinement flops). Larger CPU systems recurse with GEMMs down to
``trsm_leaf_rows``-row LAPACK leaves, which keeps the number of host-side dispatches at
``O(n / leaf)`` while nearly all flops are GEMMs. :data:`TUNING` holds these choices;
``benchmarks/bench_triangular.py --tune`` measures them, ``--count-ops`` counts the ops per call.

Host overhead: the public function runs :func:`_solve_impl` directly unless autograd,
``torch.compile``, tracing or a tensor subclass needs the custom op (:func:`mpslinalg._func.needs_custom_op`); the
custom op's dispatch alone was ~60 µs a call, as much as a whole small solve.

Kernel contract: ``trtri_diag``
-------------------------------
Inputs: a batch of logical ``n × n`` triangles ``A`` given as a storage pointer plus batch, row and
column strides (so transposed and offset views need no copy), ``nb ≤ 32``, ``unit`` (the diagonal
is taken as 1 and never read), ``conj`` (use ``conj(A)``). Only the lower triangle of the logical
matrix is read (an upper triangle is passed with its row and column strides swapped).
Output: a contiguous ``[batch, nblk, nb, nb]`` tensor, ``nblk = ceil(n / nb)``, block ``j`` holding
the inverse of the diagonal block ``A[j nb : (j+1) nb, j nb : (j+1) nb]`` (lower triangular, zeros
above the diagonal); the last block, when ``n % nb != 0``, is padded with the identity. A zero
diagonal entry gives ``inf``/``nan`` (as LAPACK's ``trsm`` does; ``solve_triangular`` has no
``info``). Implementations: ``metal/triangular.metal`` (``metal`` and ``emulator`` backends) and
:func:`_trtri_diag_torch` (``torch`` backend).

Modules: ``kernels.py`` (tuning; ``trtri_diag``/``trsm_small`` on Metal, torch and Triton),
``algorithm.py`` (the blocked solve with one refinement step per block; ``trsm`` for other
families), ``api.py`` (declaration, derivatives, front door), ``workloads.py`` (main-job rows),
``triton.py`` (one-launch small triangular solves on CUDA).
"""

from __future__ import annotations

import torch

from ..oplayer.family import Family, Grid, Route, takes
from ..oplayer.table import EVERY_SIZE
from .algorithm import trsm
from .api import solve_triangular
from .kernels import TUNING, Tuning
from .kernels import _trsm_small_metal as trsm_small_metal

__all__ = ["FAMILY", "TUNING", "Tuning", "solve_triangular", "trsm", "trsm_small_metal"]


def _route_solve_triangular(op, A, B, upper, left=True, unitriangular=False):
    return op(A, B, upper=upper, left=left, unitriangular=unitriangular) if takes(A, B) else None


FAMILY = Family(
    name="triangular",
    order=10,
    ops=("solve_triangular",),
    routes=(Route("solve_triangular", "linalg_solve_triangular", _route_solve_triangular),),
    when={"mps": {"solve_triangular": {torch.complex64: EVERY_SIZE}}},  # torch rejects complex there
    grid={"solve_triangular": Grid(inputs=lambda A: (A.tril(), A[..., :1].clone()), kwargs={"upper": False})},
    metal=("triangular",),
    workloads="mpslinalg.triangular.workloads",
)
