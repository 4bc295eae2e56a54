"""The eigh family's op declaration: the implementation, its fake, and PyTorch's derivatives for the
Hermitian case (``linalg_eig_backward`` and ``linalg_eig_jvp`` with ``is_hermitian=true``,
FunctionsManual.cpp), side by side."""

from __future__ import annotations

import torch

from ..oplayer import defop
from .algorithm import _real_dtype, eigh_impl

_GAUGE = ("linalg_eigh_backward: The eigenvectors in the complex case are specified up to multiplication by "
          "e^{i phi}. The specified loss function depends on this quantity, so it is ill-defined.")


def _eigh_op_impl(A: torch.Tensor, uplo: str, compute_v: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return eigh_impl(A, uplo, compute_v)


def _eigh_shape(A: torch.Tensor, uplo: str, compute_v: bool):
    n = A.shape[-1]
    return [((n,), _real_dtype(A.dtype)), ((n, n) if compute_v else None, A.dtype), ((), torch.int32)]


def _eigh_setup(ctx, inputs, output) -> None:
    ctx.compute_v = inputs[2]
    # an unused output's gradient stays None (not zeros): a loss of the eigenvalues only then has
    # torch's finite gradient V diag(gw) Vᴴ at repeated eigenvalues, not 0/0 from the gV term
    ctx.set_materialize_grads(False)
    w, V, _ = output
    ctx.save_for_backward(w, V)


def _econj(w: torch.Tensor) -> torch.Tensor:
    """``E[i, j] = w_j - w_i`` with ones on the diagonal (torch's ``Econj``, Hermitian case)."""
    E = w.unsqueeze(-2) - w.unsqueeze(-1)
    return E + torch.diag_embed(torch.ones_like(w))


def eigh_backward(gw: torch.Tensor | None, gV: torch.Tensor | None, w: torch.Tensor, V: torch.Tensor):
    """``linalg_eig_backward(gL, gV, L, V, is_hermitian=true)``: ``gA = V (gVhgV + diag(gw)) Vᴴ``
    with ``gVhgV = skew(Vᴴ gV) / E`` (``E_ij = w_j - w_i``); only ``gw``: ``V diag(gw) Vᴴ``.
    Repeated eigenvalues divide by zero, as torch's (the loss must not depend on the basis of a
    degenerate eigenspace). Complex: the gauge check on ``Im diag(Vᴴ gV)`` and its error."""
    if gw is None and gV is None:
        return None
    if gV is None:
        return torch.matmul(V * gw.unsqueeze(-2).to(V.dtype), V.mH)
    VhgV = torch.matmul(V.mH, gV)
    if V.is_complex():
        im = VhgV.diagonal(dim1=-2, dim2=-1).imag
        if not torch.allclose(im, torch.zeros_like(im), rtol=1e-2, atol=1e-2):
            raise RuntimeError(_GAUGE)
    VhgV = 0.5 * (VhgV - VhgV.mH)
    gA = VhgV / _econj(w).to(VhgV.dtype)
    if gw is not None:
        gA = gA - torch.diag_embed(gA.diagonal(dim1=-2, dim2=-1)) + torch.diag_embed(gw.to(gA.dtype))
    return torch.matmul(V, torch.matmul(gA, V.mH))


def _eigh_backward(ctx, gw, gV, ginfo=None):
    w, V = ctx.saved_tensors
    if not ctx.compute_v:
        raise RuntimeError("linalg.eigh: the eigenvalues-only op has no derivative (mpslinalg's eigvalsh "
                           "computes the eigenvectors when a derivative is needed)")
    return eigh_backward(gw, gV, w, V), None, None


def eigh_jvp(dA: torch.Tensor, w: torch.Tensor, V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``linalg_eig_jvp(dA, L, V, is_hermitian=true)``: ``dP = Vᴴ dA V``, ``dw = Re diag(dP)``,
    ``dV = V (dP / E)`` with a zero diagonal."""
    dP = torch.matmul(torch.matmul(V.mH, dA), V)
    dw = dP.diagonal(dim1=-2, dim2=-1)
    dw = dw.real if dw.is_complex() else dw
    X = dP / _econj(w).to(dP.dtype)
    X = X - torch.diag_embed(X.diagonal(dim1=-2, dim2=-1))
    return dw, torch.matmul(V, X)


def _eigh_jvp(inputs, outputs, tangents):
    A, uplo, compute_v = inputs
    w, V, _ = outputs
    dA = tangents[0]
    if not compute_v:
        raise RuntimeError("linalg.eigh: the eigenvalues-only op has no derivative")
    if dA is None:
        return torch.zeros_like(w), torch.zeros_like(V), None
    dw, dV = eigh_jvp(dA, w, V)
    # tangents in the primals' (contiguous) layout: forward AD requires it of view outputs
    return dw.contiguous(), dV.contiguous(), None


_eigh = defop("eigh", impl=_eigh_op_impl, shape=_eigh_shape, setup=_eigh_setup, backward=_eigh_backward,
              jvp=_eigh_jvp, ranks=(2,))
