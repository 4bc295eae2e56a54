"""mpslinalg: numerical linear algebra for PyTorch on Apple-silicon GPUs, with the torch.linalg API.

Ops run Metal kernels on ``mps`` tensors and torch-op kernels on CPU/CUDA; the same Metal kernels
run on the CPU through :mod:`mpslinalg.emulator` (``use_backend("emulator")``).
"""

from __future__ import annotations

from .cholesky import cholesky, cholesky_ex, cholesky_inverse, cholesky_solve, psd_safe_cholesky
from .eig import eig, eig_ex, eigvals
from .eigh import eigh, eigh_ex, eigvalsh
from .kernels import BackendUnavailableError, use_backend
from .ldl import ldl_factor, ldl_factor_ex, ldl_solve
from .lu import det, inv, inv_ex, lu, lu_factor, lu_factor_ex, lu_solve, lu_unpack, slogdet, solve, solve_ex
from .matrix_exp import matrix_exp
from .qr import geqrf, householder_product, ormqr, qr
from .routing import disable, enable, enabled
from .svd import cond, lstsq, matrix_norm, matrix_rank, pinv, svd, svd_ex, svdvals
from .triangular import solve_triangular

__version__ = "0.1.0"

#: Public ops in the order of the project's families; each is listed once implemented.
__all__ = [
    "BackendUnavailableError",
    "use_backend",
    "enable",
    "disable",
    "enabled",
    "solve_triangular",
    "lu_factor",
    "lu_factor_ex",
    "lu",
    "lu_solve",
    "solve",
    "solve_ex",
    "det",
    "slogdet",
    "inv",
    "inv_ex",
    "lu_unpack",
    "qr",
    "geqrf",
    "householder_product",
    "ormqr",
    "svd",
    "svd_ex",
    "svdvals",
    "pinv",
    "lstsq",
    "matrix_rank",
    "cond",
    "matrix_norm",
    "eigh",
    "eigh_ex",
    "eigvalsh",
    "eig",
    "eigvals",
    "eig_ex",
    "matrix_exp",
    "ldl_factor",
    "ldl_factor_ex",
    "ldl_solve",
    "cholesky",
    "cholesky_ex",
    "cholesky_solve",
    "cholesky_inverse",
    "psd_safe_cholesky",
]
