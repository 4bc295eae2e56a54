"""Batched inverses, determinants and solves of matrices up to 4×4 (camera geometry).

Camera poses (4×4), homographies and intrinsics (3×3) come in batches of thousands to millions. A
general LU per matrix wastes almost all of its time on launch and bookkeeping; here every matrix is
handled by straight-line code — one GPU thread per matrix in ``metal/small.metal``, and the same
arithmetic as an elementwise program on CPU/CUDA (torch ops, or the same program printed as C or
Triton and compiled once).

Algorithm (DESIGN §6), identical on every backend:

1. **Power-of-two equilibration** (exact: only exponents change; magnitudes are LAPACK's
   ``cabs1 = |Re| + |Im|``). Eliminations scale the **columns** only, ``A_s = A C``: Gaussian
   elimination with partial pivoting is invariant to column scaling, so the pivot order and the
   accuracy are LAPACK's on graded and badly scaled inputs (scaling rows too changed the pivots:
   10–1000× LAPACK's componentwise errors, issue 14.4), and ``|A_s| < 2`` rules out overflow. The
   2×2 adjugate paths scale rows and columns, ``A_s = R A C``, with the exponents computed in
   integers from the entries' own exponents and applied as up to three same-sign powers of two, so
   no intermediate over- or underflows (issue 14.3).
2. ``n = 1``: a division. ``n = 2``: the adjugate with a determinant computed in doubled precision
   (error-free products, Ogita–Rump–Oishi ``Dot2``), so ``inv = adj(A)/det`` has a relative error of
   a few ``u`` per entry (``inv`` and finite ``det``; ``solve`` uses elimination, which is backward
   stable). ``n = 3, 4``: unrolled Gaussian elimination with partial pivoting (pivot = largest
   ``cabs1``, smallest index on ties, like LAPACK's ``i?amax``), then LAPACK's ``getri`` inverse
   (``inv(U)`` then ``X L = inv(U)``, then the column interchanges), whose *left* residual
   ``‖I − XA‖`` — the quantity LAPACK's test ratio measures — is small.
3. Results are unscaled exactly: ``inv(A) = C inv(A_s) (R)``, ``x = C solve(A_s, b)``, and the
   determinant is kept as ``mantissa × 2^exponent`` (each pivot split into its power of two), so
   ``slogdet`` never overflows or underflows and ``det`` overflows only when the true value does.
   The determinant factors ``Aᵀ``, as torch's does (LAPACK reads the row-major storage as ``Aᵀ``).

Non-finite input (one rule for every backend, docs/ops/small.md): an Inf/NaN entry makes the whole
inverse or solution of that matrix NaN (``nan+nanj`` for complex); det/slogdet are what LU
arithmetic gives, equal to torch's for real dtypes.

``info`` follows LAPACK's rule: the 1-based index of the first pivot that is exactly zero in the
partial-pivoted elimination (for ``n = 2`` inverses: 1 when the first column is zero, else 2 when
the doubled-precision determinant is exactly zero), 0 otherwise. Elimination continues past a zero
pivot as in ``getf2``.

This module is the engine behind :func:`mpslinalg.inv`, :func:`mpslinalg.det`, ... for ``n <= 4``
(the LU family routes to it); its functions take already checked square inputs.

Backend selection (DESIGN §4): ``mps`` tensors run the Metal kernels, CPU tensors run them through
:mod:`mpslinalg.emulator` when that backend is selected, otherwise the torch path runs the program.
The inverse and determinant kernels come in two load variants with identical results (``direct``:
per-thread vector loads; ``staged``: through threadgroup memory), chosen per device type by
:data:`TUNING` (``TUNING.load["mps"] = "staged"`` switches a Mac; docs/ops/small.md says why
``direct`` is the default).
The program is written once, over a few primitives, and executed three ways: as torch ops
(reference, any device), printed as one C function per matrix size (CPU: every matrix in registers,
4/8 matrices per SIMD vector; compiled once by the emulator's compiler and cached on disk, see
:mod:`mpslinalg.small.c`) and printed as one Triton kernel (CUDA,
:mod:`mpslinalg.small.triton`). Where no compiler exists the CPU path is torch.linalg
itself (measured fastest without one; a warning says so once, :func:`cpu_path` reports it);
``torch.compile`` of the program is available too (see :func:`set_compile`).

Modules: ``program.py`` (the elimination / adjugate program and its executions), ``ops.py`` (internal
declarations; det's gradient from the cofactor adjugate), ``workloads.py`` (main-job rows), ``c.py``
(the program as C: the CPU path), ``triton.py`` (the program as Triton: CUDA).
"""

from __future__ import annotations

from ..oplayer.family import Family
from . import program
from .ops import adjugate, det_op, inv_ex_op, slogdet_op, solve_ex_op
from .program import MAX_N, TUNING, Program, Tuning, cpu_path, lapack_leaf_serves, set_compile

__all__ = ["FAMILY", "MAX_N", "TUNING", "Program", "Tuning", "adjugate", "cpu_path", "det_op", "inv_ex_op",
           "lapack_leaf_serves", "program",
           "set_compile", "slogdet_op", "solve_ex_op"]

#: No public ops of its own (the LU family's ops route n <= 4 here); its kernels and main-job rows.
FAMILY = Family(name="small", order=20, ops=(), metal=("small",), workloads="mpslinalg.small.workloads")
