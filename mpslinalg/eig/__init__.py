"""The general eigenproblem family: ``eig``, ``eigvals`` with ``torch.linalg``'s signatures and
semantics, and ``eig_ex`` (per-matrix ``info``, beyond torch) (DESIGN §6, §7).

Algorithm (:mod:`mpslinalg.eig.algorithm`, over the kernel contract of
:mod:`mpslinalg.eig.kernels`): non-finite matrices set aside (``info = n + 1``); scaling by a power
of two; balancing (``gebal``, scaling only); the Schur form by the kernel (Householder Hessenberg
reduction, then shifted QR iteration with deflation and exceptional shifts: Francis' double shift
for real input, Wilkinson's single shift for complex input); eigenvalues from the (quasi-)triangular
form (exact conjugate pairs for real input); eigenvectors by back-substitution on the triangular
form (``trevc``), back-transformed and normalized as ``geev`` (unit 2-norm, largest component real).

Kernel contract: ``schur(A, want_z) -> (T, Z, m)`` (see the kernels module), twice: with torch ops
(any device and dtype; on ``mps`` its QR steps use the QR family's kernels) and with
``metal/eig.metal``'s ``eig_schur_small`` (the ``metal``/``emulator`` backends, float32/complex64,
n <= 64 (complex64: n <= 62): Householder Hessenberg reduction and LAPACK ``lahqr``'s implicit
Francis double-shift (real) / Wilkinson single-shift (complex) QR with the whole matrix in
threadgroup memory, one simdgroup per matrix, one dispatch per batch).

On CPU/CUDA the front doors call ``torch.linalg.eig``/``eigvals`` (the table's ``when`` is empty:
LAPACK was faster at every size measured on the CPU); ``eig_ex`` always runs ours. Derivatives:
PyTorch's ``linalg_eig_backward``/``linalg_eig_jvp`` (:mod:`mpslinalg.eig.ops`).

Modules: ``kernels.py`` (kernel contract, the torch-op Schur kernel, Hessenberg reduction, the Metal
kernel's launch code),
``algorithm.py`` (scaling, balancing, eigenvalues, eigenvectors), ``ops.py`` (declarations and
derivatives), ``api.py`` (public ops), ``workloads.py`` (main-job rows).
"""

from __future__ import annotations

from ..oplayer.family import Family, Route, takes
from .algorithm import eig_impl
from .api import EigEx, eig, eig_ex, eigvals

__all__ = ["FAMILY", "EigEx", "eig", "eig_ex", "eig_impl", "eigvals"]


def _route_unary(op, A):
    return op(A) if takes(A) and A.shape[-1] == A.shape[-2] else None


FAMILY = Family(
    name="eig",
    order=80,
    ops=("eig", "eigvals", "eig_ex"),
    routes=(Route("eig", "linalg_eig", _route_unary), Route("eigvals", "linalg_eigvals", _route_unary)),
    # CPU, 2-core box, one thread: 512x10x10 float64 ours 0.41 s vs LAPACK 0.02 s; torch.linalg everywhere
    when={},
    metal=("eig",),
    workloads="mpslinalg.eig.workloads",
)
