"""Derivative formulas of the op declarations, written once and side by side.

Conventions are PyTorch's (``torch/csrc/autograd/FunctionsManual.cpp``): conjugate Wirtinger
calculus, so for a real loss ``L`` the gradient ``G`` of a complex input satisfies
``dL = Re tr(Gᴴ dA)``. Each formula names the PyTorch function it follows. The callers pass the
Ops to use inside (``solve``...), so that a backward runs through differentiable ops and double
backward works. ``solve_rules``/``inv_rules`` bundle an op shape's rules with its shape rule (meta)
implementation, for the families that declare that shape (LU, small).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = [
    "det_backward_lu",
    "det_backward_lu_differentiable",
    "det_negligible_pivots",
    "det_pivot_replacement",
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
    """``fake``/``setup``/``backward``/``jvp`` of an op ``(A, B, left) -> (X, info)`` (``X`` of the
    broadcast batch, ``info`` of ``A``'s); ``solve(A, B, left)`` returns ``X`` through a differentiable
    op (late-bound: the op may be declared after this call)."""

    def shape(A, B, left):  # X of B's core shape and the broadcast batch, info of A's batch
        return [(B.shape[-2:], B.dtype), ((), torch.int32, 0)]

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

    return {"shape": shape, "setup": setup, "backward": backward, "jvp": jvp}


def inv_rules() -> dict:
    """``fake``/``setup``/``backward``/``jvp`` of an op ``A -> (A⁻¹, info)``."""

    def shape(A):
        return [(A.shape[-2:], A.dtype), ((), torch.int32)]

    def setup(ctx, inputs, output):
        ctx.save_for_backward(output[0])

    def backward(ctx, gX, ginfo=None):
        (X,) = ctx.saved_tensors
        return inv_backward(X, gX)

    def jvp(inputs, outputs, tangents):
        return inv_jvp(outputs[0], tangents[0]), None

    return {"shape": shape, "setup": setup, "backward": backward, "jvp": jvp}


# det: the adjugate from the forward's LU, without a host read of a "singular" mask
#
# The gradient of det is G = g · adj(A)ᴴ (linalg_det_backward). torch uses g · conj(det) A⁻ᴴ, which
# is zero at an exactly singular A, where adj(A) (rank 1 at rank n − 1) is not. From the forward's
# factorisation M = P L U of M = Aᵀ (adj(Aᵀ) = adj(A)ᵀ, so G = g · conj(adj(M))), let k index U's
# smallest pivot |d_k| and let M' = P L U', U' = U + t e_k e_kᵀ with t = 2 max|d_i| (1 for a zero U):
# |d_k + t| >= max|d_i|, so U' is as well scaled as U's other pivots. Then M' = M + t v e_kᵀ with
# v = P L e_k, and Sherman-Morrison on M = M' − t v e_kᵀ gives, for every M (singular or not)
#     adj(M) = det(M) M'⁻¹ + t det(M') (M'⁻¹ v)(e_kᵀ M'⁻¹),   M'⁻¹ v = U'⁻¹ e_k =: x,
# det(M') = sign(P) (d_k + t) ∏_{i≠k} d_i: no division by d_k, so it holds at d_k = 0. The cost is
# torch's one adjoint getrs plus one triangular solve with one right-hand side. It is accurate
# when U' is well conditioned, i.e. when LU shows at most one negligible pivot: every nonsingular
# matrix and the usual rank n − 1 singularities (two equal rows or columns, a zero row or column).
# With two or more negligible pivots (|d_i| <= n eps max|d|, "degenerate") LU has not revealed
# the rank: such a matrix may still have rank n − 1 (a nilpotent Jordan block) and needs the SVD
# adjugate, which the caller adds where selecting those elements costs no device synchronisation.
# Every other exactly-zero pivot gets + t too, so that U' is invertible: their terms then vanish
# exactly (det(M) = det(M') = 0), leaving 0, the adjugate of every matrix of rank <= n − 2.


def det_negligible_pivots(LU: torch.Tensor) -> torch.Tensor:
    """How many pivots of ``LU`` (``[..., n, n]``) are negligible, ``|d_i| <= n eps max |d|``
    (int ``[...]``): 0 nonsingular to working precision, 1 the rank-1 formula's case, 2+ degenerate."""
    a = LU.diagonal(dim1=-2, dim2=-1).abs()
    return (a <= LU.shape[-1] * torch.finfo(a.dtype).eps * a.amax(-1, keepdim=True)).sum(-1)


def det_pivot_replacement(LU: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(e_k, t)`` of the rank-1 pivot replacement above: ``e_k`` bool ``[..., n]`` marks the
    smallest pivot (the first on ties), ``t = 2 max |d_i|`` (1 if ``U = 0``), real ``[..., 1]``."""
    a = LU.diagonal(dim1=-2, dim2=-1).abs()
    amax = a.amax(-1, keepdim=True)
    onehot = torch.arange(LU.shape[-1], device=LU.device) == a.argmin(-1, keepdim=True)
    return onehot, 2 * amax + (amax == 0)


def det_backward_lu(g: torch.Tensor, det: torch.Tensor, LU: torch.Tensor, piv: torch.Tensor, *,
                    lu_solve_adjoint: Callable, solve_upper: Callable | None = None,
                    sign: torch.Tensor | None = None) -> torch.Tensor:
    """First-order ``g · adj(A)ᴴ`` from the forward's ``LU``/``piv`` of ``M = Aᵀ`` (see above).

    With ``conj(g) adj(M) = (c₁ I + c₂ x e_kᵀ) M'⁻¹`` (``c₁ = conj(g) det``,
    ``c₂ = conj(g) t det(M')``): ``Gᵀ = M'⁻ᴴ (conj(c₁) I + conj(c₂) e_k xᴴ)``, one adjoint solve
    whose right-hand side is torch's diagonal plus one row.

    Parameters
    ----------
    g, det : Tensor ``[...]``
        The cotangent and the forward's determinant.
    LU, piv : Tensor
        The forward's factors of ``M = Aᵀ``.
    lu_solve_adjoint : callable
        ``(LU, piv, B) -> X`` with ``M'ᴴ X = B`` for the factorisation ``LU``/``piv`` of ``M'``.
    solve_upper : callable, optional
        ``(U, B) -> X`` with ``U X = B``, reading only the upper triangle. Without it (and
        ``sign``) the pivot replacement is skipped: torch's ``g · conj(det) A⁻ᴴ``, for callers that
        know no pivot is negligible.
    sign : Tensor ``[...]``, optional
        ``sign(P)``, ±1 in ``LU``'s dtype.
    """
    n = LU.shape[-1]
    h1 = g * det.conj()
    R = torch.diag_embed(h1[..., None].expand(*h1.shape, n))
    if solve_upper is None:
        return lu_solve_adjoint(LU, piv, R).mT
    onehot, t = det_pivot_replacement(LU)
    d = LU.diagonal(dim1=-2, dim2=-1)
    LUp = LU.clone()
    LUp.diagonal(dim1=-2, dim2=-1).add_(t * (onehot | (d == 0)))
    ek = onehot.to(LU.dtype)
    x = solve_upper(LUp, ek[..., None])  # U'⁻¹ e_k
    h2 = g * (sign * t[..., 0] * (d + t * onehot).prod(-1)).conj()  # g conj(t det(M'))
    R.add_(ek[..., :, None] * (h2[..., None, None] * x.mH))
    return lu_solve_adjoint(LUp, piv, R).mT


def det_backward_lu_differentiable(g: torch.Tensor, A: torch.Tensor, LU: torch.Tensor, v: torch.Tensor, *,
                                   det: Callable, inv: Callable) -> torch.Tensor:
    """``g · adj(A)ᴴ`` through differentiable ops (double backward), from the same identity.

    ``LU`` factors ``M = Aᵀ`` and ``v = P L e_k`` (``[..., n, 1]``, ``k`` of
    :func:`det_pivot_replacement`). ``k``, ``t`` and ``v`` are held constant: the identity
    ``adj(M) = det(M') [(1 − t e_kᵀ M'⁻¹ v) M'⁻¹ + t M'⁻¹ v e_kᵀ M'⁻¹]`` holds for every ``M``
    near this one (wherever ``M'`` is invertible), so its derivative is the adjugate's. ``det``
    and ``inv`` are the differentiable ops; ``A' = M'ᵀ = A + t e_k vᵀ``.
    """
    onehot, t = det_pivot_replacement(LU)
    ek = onehot.to(A.dtype)[..., :, None]
    t = t[..., None]
    Ap = A + (t * ek) * v.mT
    Z = inv(Ap).mT  # M'⁻¹
    y = Z @ v
    adjM = det(Ap)[..., None, None] * ((1 - t * (ek.mT @ y)) * Z + t * (y @ (ek.mT @ Z)))
    return g[..., None, None] * adjM.conj()


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
