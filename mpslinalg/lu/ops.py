"""The LU family's op declarations (:func:`mpslinalg.oplayer.defop`): each op's implementation, fake
and derivatives (PyTorch's formulas, ``FunctionsManual.cpp``; conjugate Wirtinger), side by side."""

from __future__ import annotations

import torch

from ..oplayer import defop
from ..oplayer import derivatives as D
from ..oplayer import functorch_active as _functorch
from ..svd import svd  # the project's SVD for det's singular gradient (no CPU fallback on mps)
from . import torch_cpu as _torch
from .algorithm import (
    _det_parts,
    _direct_torch,
    _eye,
    _getrf,
    _inv_impl,
    _lu_solve_impl,
    _lu_solve_left,
    _slogdet_from_lu,
    _solve_impl,
    _solve_tri,
    _trsm,
)
from .kernels import _perm_from_pivots

# --------------------------------------------------------------------------------------------------
# Custom ops: fake implementations and autograd (PyTorch's formulas, FunctionsManual.cpp)
# --------------------------------------------------------------------------------------------------


def _tr_solve(A: torch.Tensor, dA: torch.Tensor) -> torch.Tensor:
    """``tr(A⁻¹ dA)`` (one solve with our differentiable op)."""
    return _solve_ex_op(A, dA, True)[0].diagonal(dim1=-2, dim2=-1).sum(-1)


def _lu_factor_ex_op_impl(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    LU, piv, info = _getrf(A)
    return LU.contiguous(), piv.contiguous(), info.contiguous()


def _lu_factor_ex_op_shape(A):
    return [(A.shape[-2:], A.dtype), ((min(A.shape[-2], A.shape[-1]),), torch.int32), ((), torch.int32)]


def _apply_P(piv: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """``P @ X`` for ``A = P L U`` (``(PᵀX)[r] = X[perm[r]]``, so ``P X`` scatters rows back)."""
    m = X.shape[-2]
    perm = _perm_from_pivots(piv, m)
    inv = torch.argsort(perm, dim=-1)
    batch = torch.broadcast_shapes(inv.shape[:-1], X.shape[:-2])
    idx = inv.expand(*batch, m)[..., None].expand(*batch, m, X.shape[-1])
    return X.expand(*batch, *X.shape[-2:]).gather(-2, idx)


def _unpack(LU: torch.Tensor):
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    L = LU[..., :, :k].tril(-1) + torch.eye(m, k, dtype=LU.dtype, device=LU.device)
    U = LU[..., :k, :].triu()
    return L, U


def _lu_factor_setup(ctx, inputs, output):
    LU, piv, _ = output
    ctx.save_for_backward(LU, piv)


def _lu_factor_backward(ctx, gLU, gpiv, ginfo):
    # linalg_lu_backward (square / wide / tall) with L_grad = gLU[..., :, :k], U_grad = gLU[..., :k, :]
    LU, piv = ctx.saved_tensors
    if gLU is None:
        return None
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    L, U = _unpack(LU)
    gL = gLU[..., :, :k]
    gU = gLU[..., :k, :]
    if m == n:
        gA = (L.mH @ gL).tril(-1) + (gU @ U.mH).triu()
        gA = _solve_tri(U.mH, gA, upper=False, left=False)
        gA = _solve_tri(L.mH, gA, upper=True, left=True, unitriangular=True)
    elif m < n:
        U1, gU1, gU2 = U[..., :, :k], gU[..., :, :k], gU[..., :, k:]
        gA = (L.mH @ gL) - gU.triu() @ U.mH
        gA = _solve_tri(U1.mH, gA.tril(-1), upper=False, left=False)
        gA = torch.cat([gA + gU1.triu(), gU2], dim=-1)
        gA = _solve_tri(L.mH, gA, upper=True, left=True, unitriangular=True)
    else:
        L1, gL1, gL2 = L[..., :k, :], gL[..., :k, :], gL[..., k:, :]
        gA = gU @ U.mH - L.mH @ gL.tril(-1)
        gA = _solve_tri(L1.mH, gA.triu(), upper=True, left=True, unitriangular=True)
        gA = torch.cat([gA + gL1.tril(-1), gL2], dim=-2)
        gA = _solve_tri(U.mH, gA, upper=False, left=False)
    return _apply_P(piv, gA)


def _lu_factor_jvp(inputs, outputs, tangents):
    # square A = P L U:  M = L⁻¹ Pᵀ dA U⁻¹,  dL = L tril(M, -1),  dU = triu(M) U
    (A,), (LU, piv, _), (dA,) = inputs, outputs, tangents
    if A.shape[-1] != A.shape[-2]:
        raise NotImplementedError(
            "linalg.lu_factor: forward-mode derivatives (jvp, jacfwd, hessian) of rectangular "
            "factorisations are not implemented; use reverse mode (grad, jacrev)")
    L, U = _unpack(LU)
    M = _solve_tri(L, _apply_Pt(piv, D.or_zeros(dA, A)), upper=False, left=True, unitriangular=True)
    M = _solve_tri(U, M, upper=True, left=False)
    return L @ M.tril(-1) + M.triu() @ U, None, None


_lu_factor_ex_op = defop("lu_factor_ex", impl=_lu_factor_ex_op_impl, shape=_lu_factor_ex_op_shape,
                          setup=_lu_factor_setup, backward=_lu_factor_backward, jvp=_lu_factor_jvp, ranks=(2,))


def _lu_solve_op_impl(LU: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, left: bool,
                 adjoint: bool) -> torch.Tensor:
    return _lu_solve_impl(LU, pivots, B, left, adjoint).contiguous()


def _lu_solve_op_shape(LU, pivots, B, left, adjoint):
    return (B.shape[-2:], B.dtype)


def _lu_solve_setup(ctx, inputs, output):
    LU, piv, B, left, adjoint = inputs
    ctx.flags = (left, adjoint)
    ctx.shapes = (LU.shape, B.shape)
    ctx.save_for_backward(LU, piv, output)


def _lu_solve_backward(ctx, gX):
    LU, piv, X = ctx.saved_tensors
    left, adjoint = ctx.flags
    lu_shape, b_shape = ctx.shapes
    gLU = gB = None
    if ctx.needs_input_grad[2]:
        gB = _lu_solve_op(LU, piv, gX, left, not adjoint).sum_to_size(b_shape)
    if ctx.needs_input_grad[0]:
        L, U = _unpack(LU)
        if left != adjoint:
            # gR = U^{-H} op(-gX) op(X)^H ; gL = (L^{-H} gR U^H).tril(-1)
            rhs = -((gX if left else gX.mH) @ (X.mH if left else X))
            gR = _solve_tri(U.mH, rhs, upper=False, left=True)
            gL = _solve_tri(L.mH, gR @ U.mH, upper=True, left=True, unitriangular=True).tril(-1)
            gLU = gL + gR.triu()
        else:
            # gR = -P^T op(X) op(gX)^H P ; gR = gR L^{-H} ; gU = (L^H gR U^{-H}).triu()
            inner = (X if left else X.mH) @ (gX.mH if left else gX)
            PtI = _apply_Pt(piv, inner)
            gR = -_apply_Pt(piv, PtI.mH).mH  # (-Pᵀ inner P)
            gR = _solve_tri(L.mH, gR, upper=True, left=False, unitriangular=True)
            gU = _solve_tri(U.mH, L.mH @ gR, upper=False, left=False).triu()
            gLU = gR.tril(-1) + gU
        gLU = gLU.sum_to_size(lu_shape)
    return gLU, None, gB, None, None


def _apply_Pt(piv: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """``Pᵀ @ X``: rows ``X[perm[r]]``."""
    m = X.shape[-2]
    perm = _perm_from_pivots(piv, m)
    batch = torch.broadcast_shapes(perm.shape[:-1], X.shape[:-2])
    idx = perm.expand(*batch, m)[..., None].expand(*batch, m, X.shape[-1])
    return X.expand(*batch, *X.shape[-2:]).gather(-2, idx)


def _lu_solve_jvp(inputs, outputs, tangents):
    # op(A) X = B: dX = op(A)⁻¹ (dB − op(dA) X);  X op(A) = B: dX = (dB − X op(dA)) op(A)⁻¹,
    # with dA = P (dL U + L dU) from the tangent of the packed LU
    (LU, piv, _, left, adjoint), (X,), (dLU, _, dB, _, _) = inputs, outputs, tangents
    R = dB.expand_as(X) if dB is not None else torch.zeros_like(X)
    if dLU is not None:
        L, U = _unpack(LU)
        dA = _apply_P(piv, dLU.tril(-1) @ U + L @ dLU.triu())
        dA = dA.mH if adjoint else dA
        R = R - (dA @ X if left else X @ dA)
    return (_lu_solve_op(LU, piv, R, left, adjoint),)


_lu_solve_op = defop("lu_solve", impl=_lu_solve_op_impl, shape=_lu_solve_op_shape, setup=_lu_solve_setup,
                      backward=_lu_solve_backward, jvp=_lu_solve_jvp, ranks=(2, 1, 2))


def _solve_ex_op_impl(A: torch.Tensor, B: torch.Tensor, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return _solve_impl(A, B, left)


_solve_ex_op = defop("solve_ex", impl=_solve_ex_op_impl,
                     **D.solve_rules(lambda A, B, left: _solve_ex_op(A, B, left)[0]), ranks=(2, 2))


def _inv_ex_op_impl(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    X, info = _inv_impl(A)
    return X.contiguous(), info


_inv_ex_op = defop("inv_ex", impl=_inv_ex_op_impl, **D.inv_rules(), ranks=(2,))


def _det_op_impl(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # LU and pivots (of Aᵀ) are internal outputs (the public det drops them): the backward reuses
    # them. Aᵀ as torch.linalg.det factors it (LAPACK reads row-major A as Aᵀ): the same det, and
    # the same pattern of inf/NaN for non-finite input at every size (the small family does too).
    # LU is saved transposed: LAPACK's column-major LU is then contiguous (no copy here) and its
    # transpose in the backward is the layout getrs takes without a copy (det fwd+bwd, issue 13)
    if _direct_torch(A) and not _functorch() and (A.is_complex() or not A.mT.is_contiguous()):
        # torch's own forward, one call (its LU of a real contiguous argument would be of the
        # transpose: Aᵀ is passed only where it is not contiguous, so this LU is always Aᵀ's)
        d, LU, piv = _torch.linalg_det(A.mT)
        return d, LU.mT.contiguous(), piv.contiguous()
    LU, piv, _ = _getrf(A.mT)
    d, sign = _det_parts(LU, piv)
    return d.prod(-1) * sign, LU.mT.contiguous(), piv.contiguous()


def _det_op_shape(A):
    return [((), A.dtype), (A.shape[-2:], A.dtype), (A.shape[-1:], torch.int32)]


def _det_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], *output)


def _adjoint_solve_diag(LU: torch.Tensor, piv: torch.Tensor, diag: torch.Tensor) -> torch.Tensor:
    """``A^{-H} diag(diag)`` from the saved factorisation of ``M = Aᵀ`` (one getrs, no
    refactorisation): ``A^{-H} = conj(M⁻¹)``, so ``A^{-H} D = conj(M⁻¹ conj(D))``."""
    n = LU.shape[-1]
    D = torch.diag_embed(diag.conj()[..., None].expand(*diag.shape, n))  # conj(D), one small conj
    return _lu_solve_left(LU, piv, D, "N").conj()


def _exclusive_prod(S: torch.Tensor) -> torch.Tensor:
    """``out[..., i] = prod_{j != i} S[..., j]`` without division (exact for zeros)."""
    ones = torch.ones_like(S[..., :1])
    pre = torch.cumprod(torch.cat([ones, S[..., :-1]], dim=-1), dim=-1)
    suf = torch.cumprod(torch.cat([ones, S.flip(-1)[..., :-1]], dim=-1), dim=-1).flip(-1)
    return pre * suf


def _pivot_column(LU: torch.Tensor, piv: torch.Tensor, onehot: torch.Tensor) -> torch.Tensor:
    """``v = P L e_k`` (``[..., n, 1]``) from packed factors, ``k`` where ``onehot`` is set."""
    n = LU.shape[-1]
    k = onehot.to(torch.int64).argmax(-1, keepdim=True)
    col = LU.gather(-1, k[..., None, :].expand(*LU.shape[:-1], 1))
    below = torch.arange(n, device=LU.device)[:, None] > k[..., None, :]
    Lk = torch.where(below, col, torch.zeros_like(col)) + onehot.to(LU.dtype)[..., None]
    return _apply_P(piv, Lk)


def _cpu_worst_count(LU: torch.Tensor) -> int:
    """The most negligible pivots of any element of a CPU ``LU`` (``D.det_negligible_pivots``),
    read on the host (CPU memory: no device synchronisation); 2 while tracing or under
    ``torch.func`` (both branches are then taken, masked). A plain tensor is read through NumPy:
    the same test in a few µs instead of six torch calls (~10% of det fwd+bwd at 64x32x32)."""
    if torch.compiler.is_compiling() or _functorch():
        return 2
    try:
        a = abs(LU.detach().diagonal(dim1=-2, dim2=-1).resolve_conj().numpy())
    except Exception:  # noqa: BLE001 - a tensor subclass / fake tensor: torch's ops, then the value
        try:
            count = D.det_negligible_pivots(LU)
            return int(count.max()) if count.numel() else 0
        except Exception:  # noqa: BLE001 - data-dependent value under fake/functional tracing
            return 2
    if a.size == 0:
        return 0
    tol = LU.shape[-1] * torch.finfo(LU.real.dtype if LU.is_complex() else LU.dtype).eps
    return int((a <= tol * a.max(-1, keepdims=True)).sum(-1).max())


def _host_any(mask: torch.Tensor) -> bool:
    """``mask.any()`` read on the host (on GPUs a synchronisation); True while tracing or under
    ``torch.func`` (both branches are then taken, masked)."""
    if torch.compiler.is_compiling() or _functorch():
        return True
    try:
        return bool(mask.any())
    except Exception:  # noqa: BLE001 - data-dependent value under fake/functional tracing
        return True


def _det_backward(ctx, g, gLU=None, gpiv=None):
    A, d, LU_t, piv = ctx.saved_tensors
    return _det_adjugate_h(g, A, d, LU_t.mT, piv, differentiable=torch.is_grad_enabled())


def _det_adjugate_h(g: torch.Tensor, A: torch.Tensor, d: torch.Tensor, LU: torch.Tensor, piv: torch.Tensor,
                    differentiable: bool) -> torch.Tensor:
    """``g · adj(A)ᴴ`` from the forward's ``d``, ``LU``/``piv`` (of ``Aᵀ``): det's backward, and with
    ``g = 1`` its forward mode (``d det = tr(adj(A) dA) = Σ conj(adj(A)ᴴ) ⊙ dA``), so both modes
    agree at and near singular matrices. ``differentiable``: through our differentiable ops (a
    create_graph backward, or a jvp whose result is differentiated again)."""
    # linalg_det_backward: gA = g * adj(A)ᴴ. Invertible: g conj(det) A⁻ᴴ from the forward's LU.
    # Singular: the adjugate.
    # CPU (LAPACK's LU): the count of negligible pivots is read (host memory, no device sync). None:
    #   torch's formula. One: the rank-1 pivot replacement (oplayer.derivatives, "det: the adjugate
    #   from the forward's LU"; exact at rank n - 1). Two or more (LU has not revealed the rank):
    #   the SVD adjugate A = U S Vᴴ, adj(A)ᴴ = conj(det U det Vᴴ) U diag(prod_{j != i} s_j) Vᴴ
    #   (Higham, "What is the adjugate"), for those elements.
    # GPUs: any negligible pivot sends that element to the SVD (one host read: a synchronisation).
    #   The sync-free rank-1 formula for every element was measured on the H200 (evening rounds 1-2):
    #   0.47x torch, against 0.59x with the read (69 small launches, host-bound). It was also wrong
    #   where the device's getrf met an exactly zero pivot before the last column (cuBLAS's
    #   small-matrix kernel: a zero row of A gave a gradient 3x off). docs/evidence/routing.md has the numbers.
    cpu = A.device.type == "cpu"
    if cpu:
        worst = _cpu_worst_count(LU)
        sing = None
    else:
        sing = D.det_negligible_pivots(LU) >= 1
        worst = 2 if _host_any(sing) else 0
    if differentiable:  # through our differentiable det and inverse
        v = _pivot_column(LU, piv, D.det_pivot_replacement(LU)[0])
        gA = D.det_backward_lu_differentiable(g, A, LU, v, det=lambda X: _det_op(X)[0],
                                              inv=lambda X: _inv_ex_op(X)[0])
    else:  # first order: the forward's LU
        rank1 = {"solve_upper": lambda U, B: _trsm(U, B, upper=True, left=True, unitriangular=False),
                 "sign": _det_parts(LU, piv)[1].to(d.dtype)} if worst and cpu else {}
        gA = D.det_backward_lu(g, d, LU, piv, lu_solve_adjoint=lambda F, p, B: _lu_solve_left(F, p, B, "C"),
                               **rank1)
    if worst >= 2:
        if sing is None:
            sing = D.det_negligible_pivots(LU) >= 2
        A_sing = torch.where(sing[..., None, None], A, _eye(A.shape[-1], A))
        U, S, Vh = svd(A_sing)
        alpha = (_det_op(U)[0] * _det_op(Vh)[0]).conj() * g
        Dg = alpha[..., None] * _exclusive_prod(S).to(A.dtype)
        gA = torch.where(sing[..., None, None], (U * Dg[..., None, :]) @ Vh, gA)
    return gA


def _det_jvp(inputs, outputs, tangents):
    # d det = tr(adj(A) dA), with the adjugate of the backward (exact at singular matrices, where
    # det · tr(A⁻¹ dA) is NaN, and the same formula as reverse mode near them)
    (A,), (d, LU_t, piv), (dA,) = inputs, outputs, tangents
    dA = D.or_zeros(dA, A)
    differentiable = _functorch() or (torch.is_grad_enabled() and (A.requires_grad or dA.requires_grad))
    adj_h = _det_adjugate_h(torch.ones_like(d), A, d, LU_t.mT, piv, differentiable)
    return (adj_h.conj() * dA).sum((-2, -1)), torch.zeros_like(LU_t), None


_det_op = defop("det", impl=_det_op_impl, shape=_det_op_shape, setup=_det_setup,
                 backward=_det_backward, jvp=_det_jvp, ranks=(2,))


def _slogdet_op_impl(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    # LU and pivots of Aᵀ (as det) are internal outputs: the backward reuses them
    LU, piv, _ = _getrf(A.mT)
    s, la = _slogdet_from_lu(LU, piv)
    return s, la, LU.contiguous(), piv.contiguous()


def _slogdet_op_shape(A):
    real = A.real.dtype if A.is_complex() else A.dtype
    return [((), A.dtype), ((), real), (A.shape[-2:], A.dtype), (A.shape[-1:], torch.int32)]


def _slogdet_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], output[0], output[2], output[3])


def _slogdet_backward(ctx, gsign, glogabs, gLU=None, gpiv=None):
    # slogdet_backward: gA = g A^{-H}
    A, sign, LU, piv = ctx.saved_tensors
    g = D.slogdet_cotangent(A, sign, gsign, glogabs)
    if torch.is_grad_enabled():  # create_graph: through our differentiable inverse
        return g[..., None, None] * _inv_ex_op(A)[0].mH
    return _adjoint_solve_diag(LU, piv, g)


def _slogdet_jvp(inputs, outputs, tangents):
    (A,), (sign, logabs, LU, _), (dA,) = inputs, outputs, tangents
    t = _tr_solve(A, D.or_zeros(dA, A))
    return (*D.slogdet_jvp(t, sign, logabs, A.is_complex()), torch.zeros_like(LU), None)


_slogdet_op = defop("slogdet", impl=_slogdet_op_impl, shape=_slogdet_op_shape, setup=_slogdet_setup,
                     backward=_slogdet_backward, jvp=_slogdet_jvp, ranks=(2,))


