"""CUDA (Triton) completion of ``V``'s zero-σ columns for the SVD family (:func:`mpslinalg.svd._complete`).

The rule is :func:`mpslinalg.svd._complete`'s: the columns ``j`` of ``Ux [B, n, n]`` with
``σ_j <= √tiny·σ_1`` are replaced by the same columns of the ``Q`` of a Householder QR of ``Ux``.
Without a host read the torch-op route factorises every matrix of the batch (a complex64 64x64 QR
costs about as much as the QR preconditioner); here one launch runs the QR family's Triton
``geqr2`` + ``orgqr`` (:func:`mpslinalg.kernels.qr_triton._qr_small_kernel`, called as a function)
only in the programs whose matrix has such a column, and the others do nothing.

Imported lazily by :mod:`mpslinalg.svd` on CUDA (and under ``TRITON_INTERPRET=1`` in the tests).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .qr_triton import _pow2, _qr_small_kernel, fits

__all__ = ["complete", "fits"]


@triton.jit
def _complete_kernel(A, TAU, Q, NEED, M, N, K, COMPLEX: tl.constexpr, MP: tl.constexpr, NP: tl.constexpr):
    if tl.load(NEED + tl.program_id(0)) != 0:
        _qr_small_kernel(A, TAU, Q, M, N, K, COMPLEX=COMPLEX, WANT_Q=True, MP=MP, NP=NP)


def complete(Ux: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
    """``Ux`` with the columns flagged in ``zero`` taken from the ``Q`` of its Householder QR.

    Parameters
    ----------
    Ux : torch.Tensor
        ``[B, n, n]`` float32/complex64 (:func:`fits`); not modified.
    zero : torch.Tensor
        ``[B, n]`` bool: the columns to replace (``σ_j`` negligible).

    Returns
    -------
    torch.Tensor
        A new ``[B, n, n]`` tensor; matrices without a flagged column are ``Ux``'s, untouched by the
        QR (their programs return at once).
    """
    Bn, m, n = Ux.shape
    if not fits(m, n):
        raise ValueError(f"svd_triton_complete.complete: {m} x {n} matrices do not fit the QR kernel")
    need = zero.any(-1).to(torch.int32)
    QR = Ux.resolve_conj().contiguous().clone()  # the kernel factorises in place
    tau = QR.new_empty(Bn, min(m, n))
    Q = torch.empty_like(QR)  # written only where needed; torch.where below reads it only there
    if Bn > 0:
        cplx = QR.is_complex()
        view = torch.view_as_real if cplx else (lambda t: t)
        mp, np_ = _pow2(m), _pow2(n)
        warps = 1 if mp * np_ <= 256 else (4 if mp * np_ <= 2048 else 8)  # as geqrf_small
        _complete_kernel[(Bn,)](view(QR), view(tau), view(Q), need, m, n, min(m, n), COMPLEX=cplx, MP=mp,
                                NP=np_, num_warps=warps)
    return torch.where(zero[:, None, :], Q, Ux)
