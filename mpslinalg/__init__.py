"""mpslinalg: numerical linear algebra for PyTorch on Apple-silicon GPUs, with the torch.linalg API.

Ops run Metal kernels on ``mps`` tensors and torch-op kernels on CPU/CUDA; the same Metal kernels
run on the CPU through :mod:`mpslinalg.emulator` (``use_backend("emulator")``).
"""

from __future__ import annotations

from .eigh import eigh, eigh_ex, eigvalsh
from .kernels import BackendUnavailableError, use_backend
from .lstsq import lstsq
from .lu import det, inv, inv_ex, lu, lu_factor, lu_factor_ex, lu_solve, slogdet, solve, solve_ex
from .qr import geqrf, householder_product, ormqr, qr
from .routing import disable, enable, enabled
from .spectral import cond, matrix_norm, matrix_rank, pinv
from .svd import svd, svd_ex, svdvals
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
]
