"""Derivative formulas of the op declarations, written once and side by side.

Conventions are PyTorch's (``torch/csrc/autograd/FunctionsManual.cpp``): conjugate Wirtinger
calculus, so for a real loss ``L`` the gradient ``G`` of a complex input satisfies
``dL = Re tr(Gᴴ dA)``. Each formula names the PyTorch function it follows. The callers pass the
Ops to use inside (``solve``...), so that a backward runs through differentiable ops and double
backward works.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = [
    "inv_backward",
    "inv_jvp",
    "or_zeros",
    "slogdet_cotangent",
    "slogdet_jvp",
    "solve_backward",
    "solve_jvp",
    "svd_backward",
    "svd_jvp",
]


def or_zeros(t: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """A tangent/cotangent, or zeros where autograd passed ``None``."""
    return torch.zeros_like(like) if t is None else t


def inv_backward(X: torch.Tensor, gX: torch.Tensor | None) -> torch.Tensor | None:
    """``linalg_inv_ex`` backward: ``gA = -Xᴴ gX Xᴴ`` with ``X = A⁻¹``."""
    if gX is None:
        return None
    XH = X.mH
    return -(XH @ gX @ XH)


def inv_jvp(X: torch.Tensor, dA: torch.Tensor | None) -> torch.Tensor:
    """``d(A⁻¹) = -A⁻¹ dA A⁻¹``."""
    return -(X @ or_zeros(dA, X) @ X)


def solve_backward(solve: Callable, A: torch.Tensor, X: torch.Tensor, gX: torch.Tensor | None,
                   left: bool, needs_input_grad, a_shape, b_shape):
    """``linalg_solve_backward``: ``gB = A⁻ᴴ gX`` (left) / ``gX A⁻ᴴ`` (right);
    ``gA = -gB Xᴴ`` / ``-Xᴴ gB``; both reduced to the inputs' (broadcast) shapes.

    ``solve(A, B, left) -> X`` is the differentiable solve to use.
    """
    if gX is None:
        return None, None
    gB_full = solve(A.mH, gX, left)
    gA = gB = None
    if needs_input_grad[1]:
        gB = gB_full.sum_to_size(b_shape)
    if needs_input_grad[0]:
        gA = (-(gB_full @ X.mH) if left else -(X.mH @ gB_full)).sum_to_size(a_shape)
    return gA, gB


def solve_jvp(solve: Callable, A: torch.Tensor, X: torch.Tensor, dA: torch.Tensor | None,
              dB: torch.Tensor | None, left: bool) -> torch.Tensor:
    """``A X = B``: ``dX = A⁻¹ (dB − dA X)``;  ``X A = B``: ``dX = (dB − X dA) A⁻¹``."""
    R = dB.expand_as(X) if dB is not None else torch.zeros_like(X)
    if dA is not None:
        R = R - (dA @ X if left else X @ dA)
    return solve(A, R, left)


def slogdet_cotangent(A: torch.Tensor, sign: torch.Tensor, gsign: torch.Tensor | None,
                      glogabs: torch.Tensor | None) -> torch.Tensor:
    """``slogdet_backward``'s scalar ``g`` with ``gA = g · A⁻ᴴ``:
    ``g = g_logabs − i Im(conj(g_sign) sign)`` (complex; real: ``g_logabs``)."""
    real = A.real.dtype if A.is_complex() else A.dtype
    g = glogabs if glogabs is not None else torch.zeros(sign.shape, dtype=real, device=A.device)
    if A.is_complex():
        g = g.to(A.dtype)
        if gsign is not None:
            g = g - 1j * (gsign.conj() * sign).imag
    return g


def slogdet_jvp(t: torch.Tensor, sign: torch.Tensor, logabs: torch.Tensor, complex_: bool):
    """With ``t = tr(A⁻¹ dA)``: ``d logabsdet = Re t``, ``d sign = i Im(t) sign`` (complex; 0 for real)."""
    if not complex_:
        return torch.zeros_like(sign), t
    return sign * (1j * t.imag), t.real.to(logabs.dtype)


def solve_rules(solve: Callable) -> dict:
    """``setup``/``backward``/``jvp`` of an op ``(A, B, left) -> (X, info)``; ``solve(A, B, left)``
    returns ``X`` through a differentiable op (late-bound: the op may be declared after this call)."""

    def setup(ctx, inputs, output):
        A, B, left = inputs
        ctx.left = left
        ctx.shapes = (A.shape, B.shape)
        ctx.save_for_backward(A, output[0])

    def backward(ctx, gX, ginfo=None):
        A, X = ctx.saved_tensors
        gA, gB = solve_backward(solve, A, X, gX, ctx.left, ctx.needs_input_grad, *ctx.shapes)
        return gA, gB, None

    def jvp(inputs, outputs, tangents):
        (A, _, left), (X, _), (dA, dB, _) = inputs, outputs, tangents
        return solve_jvp(solve, A, X, dA, dB, left), None

    return {"setup": setup, "backward": backward, "jvp": jvp}


def inv_rules() -> dict:
    """``setup``/``backward``/``jvp`` of an op ``A -> (A⁻¹, info)``."""

    def setup(ctx, inputs, output):
        ctx.save_for_backward(output[0])

    def backward(ctx, gX, ginfo=None):
        (X,) = ctx.saved_tensors
        return inv_backward(X, gX)

    def jvp(inputs, outputs, tangents):
        return inv_jvp(outputs[0], tangents[0]), None

    return {"setup": setup, "backward": backward, "jvp": jvp}


# SVD (PyTorch's svd_backward / linalg_svd_jvp; used by svd, svdvals and through them pinv/lstsq)


_GAUGE_ERROR = (
    "svd_backward: The singular vectors in the complex case are specified up to multiplication "
    "by e^{i phi}. The specified loss function depends on this phase term, making it ill-defined."
)


def _gap_matrix(S: torch.Tensor) -> torch.Tensor:
    """``E_jk = S_k² − S_j²`` off the diagonal, 1 on it (the diagonal is divided into zeros)."""
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1)
    return E + torch.eye(S.shape[-1], dtype=S.dtype, device=S.device)


def svd_backward(gU, gS, gVh, U, S, Vh):
    """``gA`` of ``A = U diag(S) Vh`` (reduced factors), torch's formula and gauge check."""
    m, n = U.shape[-2], Vh.shape[-1]
    if gU is None and gVh is None:
        if gS is None:
            return None
        return U @ (gS.unsqueeze(-1).to(U.dtype) * Vh) if m >= n else (U * gS.unsqueeze(-2).to(U.dtype)) @ Vh
    is_complex = U.is_complex()
    UhgU = VhgV = None
    if gU is not None:
        UhgU = U.mH @ gU
        UhgU = UhgU - UhgU.mH
    if gVh is not None:
        VhgV = Vh @ gVh.mH
        VhgV = VhgV - VhgV.mH
    if is_complex:
        im_u = UhgU.diagonal(0, -2, -1).imag if UhgU is not None else torch.zeros_like(S)
        im_v = VhgV.diagonal(0, -2, -1).imag if VhgV is not None else torch.zeros_like(S)
        if not torch.allclose(im_u, -im_v, rtol=1e-2, atol=1e-2):  # torch's lax tolerances
            raise RuntimeError(_GAUGE_ERROR)
    E = _gap_matrix(S)
    Sc = S.to(U.dtype)
    if UhgU is not None and VhgV is not None:
        gA = (UhgU * Sc.unsqueeze(-2) + Sc.unsqueeze(-1) * VhgV) / E
    elif UhgU is not None:
        gA = UhgU * (Sc.unsqueeze(-2) / E)
    else:
        gA = Sc.unsqueeze(-1) * (VhgV / E)
    if gS is not None:
        gA = gA + torch.diag_embed(gS.to(U.dtype))
    if is_complex and UhgU is not None:
        gA = gA + torch.diag_embed(UhgU.diagonal(0, -2, -1) / (2 * Sc))
    if m > n and gU is not None:
        gA = U @ gA
        gUSinv = gU / Sc.unsqueeze(-2)
        gA = (gA + gUSinv - U @ (U.mH @ gUSinv)) @ Vh
    elif m < n and gVh is not None:
        gA = gA @ Vh
        SinvgVh = gVh / Sc.unsqueeze(-1)
        gA = U @ (gA + SinvgVh - (SinvgVh @ Vh.mH) @ Vh)
    else:
        gA = U @ (gA @ Vh) if m >= n else (U @ gA) @ Vh
    return gA


def svd_jvp(dA, U, S, Vh, full_matrices: bool):
    """``(dU, dS, dVh)`` of ``A = U diag(S) Vh`` along ``dA`` (torch's ``linalg_svd_jvp``)."""
    m, n = dA.shape[-2], dA.shape[-1]
    k = S.shape[-1]
    U = U[..., :k] if full_matrices else U
    Vh = Vh[..., :k, :] if full_matrices else Vh
    V = Vh.mH
    Sc = S.to(U.dtype)
    dP = U.mH @ (dA @ V) if m >= n else (U.mH @ dA) @ V
    dS = dP.diagonal(0, -2, -1).real if dA.is_complex() else dP.diagonal(0, -2, -1)
    dP = dP - torch.diag_embed(dS.to(dP.dtype))
    E = _gap_matrix(S)
    dU = dP * Sc.unsqueeze(-2)
    dU = (dU + dU.mH) / E
    dVh = dP * (-Sc).unsqueeze(-1)
    dVh = (dVh + dVh.mH) / E
    if dA.is_complex():
        d2 = torch.diag_embed(dP.diagonal(0, -2, -1) / (2 * Sc))
        dU, dVh = dU + d2, dVh + d2
    dU, dVh = U @ dU, dVh @ Vh
    if m > n:
        dAVSinv = dA @ (V / Sc.unsqueeze(-2))
        dU = dU + dAVSinv - U @ (U.mH @ dAVSinv)
        if full_matrices:
            dU = torch.cat([dU, dU.new_zeros(*dU.shape[:-1], m - n)], dim=-1)
    if m < n:
        UhdASinv = (U.mH / Sc.unsqueeze(-1)) @ dA
        dVh = dVh + UhdASinv - (UhdASinv @ V) @ Vh
        if full_matrices:
            dVh = torch.cat([dVh, dVh.new_zeros(*dVh.shape[:-2], n - m, n)], dim=-2)
    return dU, dS, dVh
