"""The LU family's CPU LAPACK path: SciPy's xGETRF / xGESV on zero-copy numpy views of one square,
contiguous CPU matrix, where :data:`mpslinalg.oplayer.table.LAPACK` says that was measured faster
than torch.linalg (the front doors ask :func:`mpslinalg.oplayer.table.lapack_first`)."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["inv", "lu_factor_ex"]


def lu_factor_ex(lapack, A: torch.Tensor):
    """``(LU, pivots, info)`` of ``A`` as ``torch.linalg.lu_factor_ex``: ``LU`` column-major (as
    torch's), 1-based int32 pivots, int32 ``info`` (``k > 0``: ``U[k-1, k-1]`` is zero)."""
    getrf = lapack.cgetrf if A.dtype is torch.complex64 else lapack.sgetrf
    lu, piv, info = getrf(A.numpy())  # f2py copies the C-ordered matrix into a Fortran one: A is untouched
    piv += 1
    return torch.from_numpy(lu), torch.from_numpy(piv), torch.tensor(info, dtype=torch.int32)


def inv(lapack, A: torch.Tensor):
    """``A⁻¹`` (contiguous), or None when ``A`` is singular (the caller's torch.linalg call raises
    torch's error for it): xGESV of ``Aᵀ`` (``A``'s C-ordered buffer read as Fortran) against ``I``,
    whose Fortran-ordered solution ``(Aᵀ)⁻¹`` is ``A⁻¹`` in C order."""
    gesv = lapack.cgesv if A.dtype is torch.complex64 else lapack.sgesv
    n = A.shape[-1]
    _, _, X, info = gesv(A.numpy().T, np.eye(n, dtype=X_DTYPES[A.dtype], order="F"), overwrite_b=True)
    return torch.from_numpy(X.T) if info == 0 else None


X_DTYPES = {torch.float32: np.float32, torch.complex64: np.complex64}
