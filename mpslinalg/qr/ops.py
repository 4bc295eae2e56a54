"""The QR family's op declarations: implementations, fakes and derivatives (PyTorch's
``linalg_qr_backward``/``linalg_qr_jvp``; ``householder_product``/``ormqr`` by reflector calculus)."""

from __future__ import annotations

import torch

from ..oplayer import defop
from ..oplayer import functorch_active as _functorch
from .algorithm import _use_tsqr, geqrf_impl, householder_product_impl, ormqr_impl, qr_plain
from .tsqr import tsqr


def qr_impl(A: torch.Tensor, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.qr`` without checks: ``(Q, R)``; ``mode="r"`` returns an empty ``Q``.

    Tall-skinny matrices go through TSQR (:mod:`mpslinalg.qr.tsqr`); everything else is
    :func:`geqrf_impl` followed by :func:`householder_product_impl` on the first ``k`` columns
    (reduced) or on ``[QR | 0]`` (complete, ``m > n``).
    """
    if _functorch():
        Q, R = torch.linalg.qr(A, mode=mode)
        return Q, R
    if mode == "reduced" and _use_tsqr(A):
        return tsqr(A)
    return qr_plain(A, mode)


# --------------------------------------------------------------------------------------------------
# Ops: fake implementations and derivatives (PyTorch's linalg_qr_backward / linalg_qr_jvp)
# --------------------------------------------------------------------------------------------------


def _solve_tri(A: torch.Tensor, B: torch.Tensor, *, upper: bool, left: bool) -> torch.Tensor:
    """Differentiable triangular solve for the derivative formulas (our op; torch's under
    ``torch.func``, which the triangular custom op does not serve)."""
    if _functorch():
        return torch.linalg.solve_triangular(A, B, upper=upper, left=left)
    from ..triangular import solve_triangular

    return solve_triangular(A, B, upper=upper, left=left)


_Q_MISSING = ("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
              "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
_COMPLETE_TALL = "The QR decomposition is not differentiable when mode='complete' and nrows > ncols."


def _qr_shape(A: torch.Tensor, mode: str):
    M, N = A.shape[-2], A.shape[-1]
    rows = M if mode == "complete" else min(M, N)
    return [(None if mode == "r" else (M, rows), A.dtype), ((rows, N), A.dtype)]


def _qr_setup(ctx, inputs, output) -> None:
    ctx.mode = inputs[1]
    ctx.save_for_backward(*output)


def _check_differentiable(mode: str, m: int, n: int) -> None:
    if mode == "r":
        raise RuntimeError(_Q_MISSING)
    if mode == "complete" and m > n:
        raise RuntimeError(_COMPLETE_TALL)


def _tril_im(X: torch.Tensor) -> torch.Tensor:
    """Strictly lower part of ``X`` plus ``i Im(diag X)``: the lower half of a skew-Hermitian
    matrix whose strictly lower part and imaginary diagonal are those of ``X``."""
    L = X.tril(-1)
    if X.is_complex():
        L = L + torch.diag_embed(1j * X.diagonal(dim1=-2, dim2=-1).imag)
    return L


def _qr_backward(ctx, gQ, gR):
    """``linalg_qr_backward`` (PyTorch, FunctionsManual.cpp), conjugate-Wirtinger convention."""
    Q, R = ctx.saved_tensors
    if ctx.mode == "r":
        raise RuntimeError(_Q_MISSING)
    m, n = Q.shape[-2], R.shape[-1]
    _check_differentiable(ctx.mode, m, n)
    if gQ is None and gR is None:
        return None, None
    gA = gR @ R.mH if gR is not None else None
    if gQ is not None:
        gA = -(Q.mH @ gQ) if gA is None else gA - Q.mH @ gQ
    if m >= n:
        # Q (triu(gA) + triu(gA)ᴴ with the real diagonal halved) + gQ, then · R⁻ᴴ
        S = gA.triu()
        S = S + S.mH
        S = S - torch.diag_embed(0.5 * S.diagonal(dim1=-2, dim2=-1).real.to(S.dtype))
        X = Q @ S
        if gQ is not None:
            X = X + gQ
        return _solve_tri(R.mH, X, upper=False, left=False), None
    # wide: skew-Hermitian part from the lower triangle, through the leading square block of R
    L = (gA.mH - gA).tril()  # the adjoint of X -> Qᴴ dQ (see _qr_jvp), M = -gA
    L = L - torch.diag_embed(0.5 * L.diagonal(dim1=-2, dim2=-1))
    X = _solve_tri(R[..., :, :m].mH, Q @ L, upper=False, left=False)
    X = torch.cat([X, X.new_zeros(*X.shape[:-1], n - m)], dim=-1)
    if gR is not None:
        X = X + Q @ gR
    return X, None


def _qr_jvp(inputs, outputs, tangents):
    """``linalg_qr_jvp``: ``dA = dQ R + Q dR`` with ``Qᴴ dQ`` skew-Hermitian and ``dR R⁻¹`` upper
    triangular with a real diagonal."""
    A, mode = inputs
    Q, R = outputs
    dA = tangents[0]
    m, n = A.shape[-2], A.shape[-1]
    _check_differentiable(mode, m, n)
    if dA is None:
        return torch.zeros_like(Q), torch.zeros_like(R)
    if m >= n:
        dARinv = _solve_tri(R, dA, upper=True, left=False)
        X = Q.mH @ dARinv
        C = _tril_im(X) - X.tril(-1).mH  # Qᴴ dQ
        dR = (X - C) @ R
        dQ = dARinv - Q @ (X - C)
        return dQ, dR
    QhdA = Q.mH @ dA
    X = _solve_tri(R[..., :, :m], QhdA[..., :, :m], upper=True, left=False)
    C = _tril_im(X) - X.tril(-1).mH
    return Q @ C, QhdA - C @ R


def _geqrf_shape(A: torch.Tensor):
    return [(A.shape[-2:], A.dtype), ((min(A.shape[-2], A.shape[-1]),), A.dtype)]


def _hp_shape(V: torch.Tensor, tau: torch.Tensor):
    return (V.shape[-2:], V.dtype)


def _ormqr_shape(V: torch.Tensor, tau: torch.Tensor, C: torch.Tensor, left: bool, transpose: bool):
    return (C.shape[-2:], C.dtype)


# The ops' outputs are contiguous, as their fakes (``new_empty``) declare: the torch leaf's LAPACK
# results are column-major, and inductor checks a custom op's strides against its fake ("incorrect
# fake kernel", issue 33). A copy of O(mn) after O(mn²) work; ``.contiguous()`` is free where the
# kernels already wrote row-major.


def _contiguous(*ts: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(t.contiguous() for t in ts)


def _qr_op_impl(A: torch.Tensor, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    return _contiguous(*qr_impl(A, mode))


def _geqrf_op_impl(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _contiguous(*geqrf_impl(A))


def _hp_op_impl(V: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    return householder_product_impl(V, tau).contiguous()


def _ormqr_op_impl(V: torch.Tensor, tau: torch.Tensor, C: torch.Tensor, left: bool, transpose: bool) -> torch.Tensor:
    return ormqr_impl(V, tau, C, left, transpose).contiguous()


_qr = defop("qr", impl=_qr_op_impl, shape=_qr_shape, setup=_qr_setup, backward=_qr_backward, jvp=_qr_jvp, ranks=(2,))
# householder_product / ormqr: the derivatives of the reflector-by-reflector products written in
# torch ops (each H_i = I - tau_i v_i v_iᴴ once), differentiated by torch.func (vjp/jvp). Exact (no
# formula of our own to get wrong) and differentiable again (double backward), at O(k) small
# products per call: the derivative path, not the fast forward.


def _reflectors(V: torch.Tensor, k: int) -> torch.Tensor:
    """``v_1 .. v_k`` as the columns of a unit lower trapezoidal matrix (only ``V``'s strictly lower
    part enters, as in LAPACK)."""
    m = V.shape[-2]
    return V[..., :, :k].tril(-1) + torch.eye(m, k, dtype=V.dtype, device=V.device)


def _apply_reflectors(V: torch.Tensor, tau: torch.Tensor, C: torch.Tensor, left: bool,
                      transpose: bool) -> torch.Tensor:
    """``op(Q) C`` or ``C op(Q)`` one reflector at a time (the differentiable reference)."""
    k = tau.shape[-1]
    Vl = _reflectors(V, k)
    order = range(k) if left == transpose else range(k - 1, -1, -1)
    for i in order:
        v = Vl[..., :, i:i + 1]
        t = tau[..., i, None, None]
        t = t.conj() if transpose else t
        C = C - v @ (t * (v.mH @ C)) if left else C - ((C @ v) * t) @ v.mH
    return C


def _hp_reference(V: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    m, n = V.shape[-2], V.shape[-1]
    eye = torch.eye(m, n, dtype=V.dtype, device=V.device).expand(*V.shape[:-2], m, n)
    return _apply_reflectors(V, tau, eye, True, False)


def _save_inputs(ctx, inputs, output) -> None:
    ctx.flags = [x for x in inputs if not isinstance(x, torch.Tensor)]
    ctx.save_for_backward(*[x for x in inputs if isinstance(x, torch.Tensor)])


def _vjp(fn, tensors, grad):
    _, pullback = torch.func.vjp(fn, *tensors)
    return pullback(grad)


def _hp_backward(ctx, gQ):
    V, tau = ctx.saved_tensors
    return _vjp(_hp_reference, (V, tau), gQ)


def _reflectors_jvp(V, tau, C, dV, dtau, dC, left: bool, transpose: bool) -> torch.Tensor:
    """The tangent of :func:`_apply_reflectors` (product rule, reflector by reflector; a nested
    ``torch.func.jvp`` is not allowed inside forward-mode AD)."""
    k = tau.shape[-1]
    Vl, dVl = _reflectors(V, k), dV[..., :, :k].tril(-1)
    order = range(k) if left == transpose else range(k - 1, -1, -1)
    for i in order:
        v, dv = Vl[..., :, i:i + 1], dVl[..., :, i:i + 1]
        t, dt = tau[..., i, None, None], dtau[..., i, None, None]
        if transpose:
            t, dt = t.conj(), dt.conj()
        if left:
            w, dw = v.mH @ C, dv.mH @ C + v.mH @ dC
            C, dC = C - v @ (t * w), dC - dv @ (t * w) - v @ (dt * w + t * dw)
        else:
            w, dw = C @ v, dC @ v + C @ dv
            C, dC = C - (w * t) @ v.mH, dC - (dw * t + w * dt) @ v.mH - (w * t) @ dv.mH
    return dC


def _zeros_for_none(values, tangents):
    return tuple(torch.zeros_like(x) if t is None else t for x, t in zip(values, tangents))


def _hp_jvp(inputs, outputs, tangents):
    V, tau = inputs
    dV, dtau = _zeros_for_none((V, tau), tangents)
    eye = torch.eye(V.shape[-2], V.shape[-1], dtype=V.dtype, device=V.device).expand(outputs[0].shape)
    return (_reflectors_jvp(V, tau, eye, dV, dtau, torch.zeros_like(eye), True, False),)


def _ormqr_backward(ctx, gX):
    V, tau, C = ctx.saved_tensors
    left, transpose = ctx.flags
    return (*_vjp(lambda a, b, c: _apply_reflectors(a, b, c, left, transpose), (V, tau, C), gX), None, None)


def _ormqr_jvp(inputs, outputs, tangents):
    V, tau, C, left, transpose = inputs
    dV, dtau, dC = _zeros_for_none((V, tau, C), tangents[:3])
    return (_reflectors_jvp(V, tau, C, dV, dtau, dC, left, transpose),)


# torch.geqrf has no derivative (neither has torch's)
_geqrf = defop("geqrf", impl=_geqrf_op_impl, shape=_geqrf_shape, ranks=(2,))
_householder_product = defop("householder_product", impl=_hp_op_impl, shape=_hp_shape,
                             setup=_save_inputs, backward=_hp_backward, jvp=_hp_jvp, ranks=(2, 1))
_ormqr = defop("ormqr", impl=_ormqr_op_impl, shape=_ormqr_shape, setup=_save_inputs, backward=_ormqr_backward,
               jvp=_ormqr_jvp, ranks=(2, 1, 2))


