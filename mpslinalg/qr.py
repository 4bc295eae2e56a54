"""The QR family: ``qr``, ``geqrf``, ``householder_product`` (``orgqr``), ``ormqr`` with torch's
signatures and semantics (DESIGN §6, §7).

LAPACK's Householder conventions exactly, so results equal torch's/SciPy's up to rounding, signs
included: ``larfg`` gives ``beta`` real, ``tau`` complex with ``1 <= Re tau <= 2``, ``tau = 0`` for
an already-zero column (``H = I``); ``geqrf`` packs ``R`` on and above the diagonal and the
reflectors ``v`` (unit first entry implied) below; ``Q = H_1 H_2 ... H_k``, ``H_i = I - tau_i v_i
v_iᴴ``; ``R`` has a real diagonal.

Algorithm
---------
``geqrf`` of a batch ``[B, M, N]`` (a copy of the input, factored in place):

* small matrices are one **whole-matrix** call (``small``: the ``qr_small`` Metal kernel with the
  matrix in threadgroup memory; on CUDA float32/complex64 the Triton kernel of
  :mod:`mpslinalg._qr_triton`; else a Householder loop over columns vectorised over the batch);
  ``qr`` has both kernels form the thin ``Q`` in the same launch;
* larger ones are **compact-WY blocked** (LAPACK ``geqrf``): factor an ``nb``-wide panel
  (``panel``: ``geqr2`` plus its ``T`` factor, ``larft``), then apply ``Qᴴ = I - V Tᴴ Vᴴ`` to the
  trailing columns by three matrix products (``larfb``);
* on the ``torch`` backend, single large matrices call the device's ``geqrf`` (LAPACK on CPU,
  cuSOLVER on CUDA) — never slower than ``torch.linalg`` —, see ``qr_kernels.Tuning``.

``householder_product`` and ``ormqr`` apply the blocks by matrix products (backward accumulation
for ``Q``, touching only the trailing part); the thin ``Q`` never forms the ``m x m`` one.
Tall-skinny ``qr`` (``m >= Tuning.tsqr_ratio * n``) is a Householder **TSQR** (:mod:`._qr_tsqr`):
batched small QRs in a tree, then LAPACK's signs recovered from the first ``n`` rows of ``Q``.

Internal entry points (no checks; torch conventions; used by the SVD family):
:func:`geqrf_impl`, :func:`householder_product_impl`, :func:`ormqr_impl`, :func:`qr_impl`,
:func:`qr_plain` (no TSQR route).

The kernels, their contracts and the tuning live in :mod:`mpslinalg.qr_kernels`.
"""

from __future__ import annotations

import math

import torch

from .oplayer import checks as E
from .oplayer import defop
from .oplayer import functorch_active as _functorch
from .qr_kernels import (  # noqa: F401  (_larft, _unit_lower: used by the tests through this module)
    TUNING,
    _kernels,
    _larft,
    _MetalKernels,
    _on_kernels,
    _small_on_kernels,
    _triton_ok,
    _unit_lower,
)

__all__ = [
    "TUNING",
    "geqrf",
    "geqrf_impl",
    "householder_product",
    "householder_product_impl",
    "ormqr",
    "ormqr_impl",
    "qr",
    "qr_impl",
]

_RT = torch.return_types


# --------------------------------------------------------------------------------------------------
# The algorithms (internal entry points: no checks, torch conventions)
# --------------------------------------------------------------------------------------------------


def _torch_leaf(A: torch.Tensor) -> bool:
    """The ``torch`` backend hands ``A`` to the device's own ``geqrf`` (not batched-small)."""
    if _functorch():
        return True
    M, N = A.shape[-2], A.shape[-1]
    B = math.prod(A.shape[:-2])
    fits = max(M, N) <= TUNING.torch_small_max or _triton_ok(A)
    small = fits and B >= TUNING.torch_batch_min.get(A.device.type, 2)
    return not small and not TUNING.torch_blocked


def geqrf_impl(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.geqrf`` without checks: ``(QR [..., M, N], tau [..., min(M, N)])``, fresh tensors.

    LAPACK's packed layout and ``larfg`` conventions (module docstring). Any batch shape; the input
    is never modified. Under ``torch.func`` transforms it is ``torch.geqrf``.
    """
    batch = A.shape[:-2]
    M, N = A.shape[-2], A.shape[-1]
    K = min(M, N)
    if not _on_kernels(A) and _torch_leaf(A):
        QR, tau = torch.geqrf(A)
        return QR, tau
    QR, tau, _ = _geqrf_blocks(A)
    return QR.reshape(*batch, M, N), tau.reshape(*batch, K)


def _geqrf_blocks(A: torch.Tensor):
    """``(QR [B, M, N], tau [B, K], blocks)`` of ``A`` flattened to one batch dim; ``blocks`` are the
    panels' ``(j, w, V, T)`` when the blocked algorithm ran (``orgqr`` reuses them), else empty."""
    M, N = A.shape[-2], A.shape[-1]
    QR = E.resolved(A).reshape(-1, M, N).clone()
    tau = QR.new_zeros(QR.shape[0], min(M, N))
    blocks: list = []
    if QR.shape[0] > 0 and min(M, N) > 0:
        _geqrf3(QR, tau, blocks)
    return QR, tau, blocks


def _geqrf3(QR: torch.Tensor, tau: torch.Tensor, blocks: list | None = None) -> None:
    """``geqrf`` of the contiguous ``[B, M, N]`` buffer in place (whole-matrix kernel or blocked);
    the panels' ``(j, w, V, T)`` are appended to ``blocks`` if given."""
    B, M, N = QR.shape
    K = min(M, N)
    kern = _kernels(QR)
    if kern.name == "metal" and _small_on_kernels(M, N, QR.dtype):
        kern.small(QR, tau)
        return
    if kern.name == "torch" and (max(M, N) <= TUNING.torch_small_max or _triton_ok(QR)):
        kern.small(QR, tau)
        return
    nb = TUNING.nb
    for j in range(0, K, nb):
        w = min(nb, K - j)
        V, T = kern.panel(QR, tau, j, w)
        if blocks is not None:
            blocks.append((j, w, V, T))
        if j + w < N:  # larfb: C -= V (Tᴴ (Vᴴ C)), three matrix products
            C = QR[:, j:, j + w:]
            C.baddbmm_(V, torch.matmul(T.mH, torch.matmul(V.mH, C)), alpha=-1)


def _blocks(k: int, nb: int) -> list[tuple[int, int]]:
    return [(j, min(nb, k - j)) for j in range(0, k, nb)]


def _block_reflector(V: torch.Tensor, tau: torch.Tensor, j: int, w: int):
    """``(V_b, T_b)`` of reflectors ``j .. j+w-1`` stored in ``V [B, m, *]`` (rows ``j:``)."""
    Vb = _unit_lower(V[:, j:, j:j + w])
    return Vb, _larft(Vb, tau[:, j:j + w])


def householder_product_impl(V: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """``torch.linalg.householder_product`` without checks: the first ``n`` columns of
    ``H_1 ... H_k`` for ``V [..., m, n]`` (``n <= m``) and ``tau [..., k]`` (``k <= n``).

    Blocked backward accumulation: ``Q = I[:, :n]``, then for each block of ``nb`` reflectors from
    the last, ``Q[j:, j:] -= V_b (T_b (V_bᴴ Q[j:, j:]))`` (rows and columns before ``j`` are
    untouched by the later blocks). Batch dims of ``V`` and ``tau`` broadcast.
    """
    m, n = V.shape[-2], V.shape[-1]
    k = tau.shape[-1]
    batch = torch.broadcast_shapes(V.shape[:-2], tau.shape[:-1])
    if not _on_kernels(V) and _torch_leaf(V.expand(*batch, m, n)):
        return torch.linalg.householder_product(V.expand(*batch, m, n), tau.expand(*batch, k))
    nbat = math.prod(batch)
    V3 = E.resolved(V.expand(*batch, m, n)).reshape(nbat, m, n)
    t3 = E.resolved(tau.expand(*batch, k)).reshape(nbat, k)
    Q = torch.eye(m, n, dtype=V.dtype, device=V.device).expand(nbat, m, n).clone()
    for j, w in reversed(_blocks(k, TUNING.nb)):
        Vb, T = _block_reflector(V3, t3, j, w)
        C = Q[:, j:, j:]
        C.sub_(torch.matmul(Vb, torch.matmul(T, torch.matmul(Vb.mH, C))))
    return Q.reshape(*batch, m, n)


def ormqr_impl(V: torch.Tensor, tau: torch.Tensor, C: torch.Tensor, left: bool,
               transpose: bool) -> torch.Tensor:
    """``torch.ormqr`` without checks: ``op(Q) C`` (``left``) or ``C op(Q)``, ``op(Q) = Qᴴ`` when
    ``transpose`` (the conjugate transpose for complex), ``Q = H_1 ... H_k`` of order ``mn``
    (``V [..., mn, k']``, ``tau [..., k]``). Batch dims broadcast."""
    mn = V.shape[-2]
    k = tau.shape[-1]
    batch = torch.broadcast_shapes(V.shape[:-2], tau.shape[:-1], C.shape[:-2])
    r, c = C.shape[-2], C.shape[-1]
    out_shape = (*batch, r, c)
    nbat = math.prod(batch)
    if nbat == 0 or r == 0 or c == 0:
        return C.new_zeros(out_shape) + C.expand(out_shape)
    if not _on_kernels(C) and _torch_leaf(V.expand(*batch, *V.shape[-2:])):
        return torch.ormqr(V.expand(*batch, *V.shape[-2:]), tau.expand(*batch, k), C.expand(out_shape),
                           left=left, transpose=transpose)
    V3 = E.resolved(V.expand(*batch, *V.shape[-2:])).reshape(nbat, mn, V.shape[-1])
    t3 = E.resolved(tau.expand(*batch, k)).reshape(nbat, k)
    X = E.resolved(C.expand(out_shape)).reshape(nbat, r, c).clone()
    blocks = _blocks(k, TUNING.nb)
    # Q C and C Qᴴ apply the last block first; Qᴴ C and C Q the first block first
    if left != transpose:
        blocks = blocks[::-1]
    for j, w in blocks:
        Vb, T = _block_reflector(V3, t3, j, w)
        Tb = T.mH if transpose else T
        if left:  # rows j: of X  <-  (I - V Tb Vᴴ) X
            Xs = X[:, j:, :]
            Xs.sub_(torch.matmul(Vb, torch.matmul(Tb, torch.matmul(Vb.mH, Xs))))
        else:  # columns j: of X  <-  X (I - V Tb Vᴴ)
            Xs = X[:, :, j:]
            Xs.sub_(torch.matmul(torch.matmul(torch.matmul(Xs, Vb), Tb), Vb.mH))
    return X.reshape(out_shape)


def _r_from(QR: torch.Tensor, rows: int) -> torch.Tensor:
    return QR[..., :rows, :].triu().contiguous()


def qr_impl(A: torch.Tensor, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.qr`` without checks: ``(Q, R)``; ``mode="r"`` returns an empty ``Q``.

    Tall-skinny matrices go through TSQR (:mod:`mpslinalg._qr_tsqr`); everything else is
    :func:`geqrf_impl` followed by :func:`householder_product_impl` on the first ``k`` columns
    (reduced) or on ``[QR | 0]`` (complete, ``m > n``).
    """
    if _functorch():
        Q, R = torch.linalg.qr(A, mode=mode)
        return Q, R
    if mode == "reduced" and _use_tsqr(A):
        from ._qr_tsqr import tsqr

        return tsqr(A)
    return qr_plain(A, mode)


def qr_plain(A: torch.Tensor, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`qr_impl` without the TSQR route (the leaves of TSQR)."""
    M, N = A.shape[-2], A.shape[-1]
    K = min(M, N)
    if not _on_kernels(A) and _torch_leaf(A):
        # the device's own geqrf + orgqr (LAPACK / cuSOLVER) in one call: what we would run anyway,
        # without two dispatches and a copy of R
        Q, R = torch.linalg.qr(A, mode=mode)
        return Q, R
    if mode != "complete" or M <= N:
        fused = _qr_small_fused(A, mode)
        if fused is not None:
            return fused
    batch = A.shape[:-2]
    QR, tau, blocks = _geqrf_blocks(A)
    rows = M if mode == "complete" else K
    R = _r_from(QR, rows).reshape(*batch, rows, N)
    if mode == "r":
        return A.new_empty(0), R
    if blocks:  # the panels' V and T again: orgqr is three matrix products per block
        Q = torch.eye(M, rows, dtype=A.dtype, device=A.device).expand(QR.shape[0], M, rows).clone()
        for j, _w, V, T in reversed(blocks):
            C = Q[:, j:, j:]
            C.baddbmm_(V, torch.matmul(T, torch.matmul(V.mH, C)), alpha=-1)
        return Q.reshape(*batch, M, rows), R
    if mode == "complete" and M > N:
        V = torch.cat([QR, QR.new_zeros(*QR.shape[:-1], M - N)], dim=-1)
    else:
        V = QR[..., :, :K]
    return householder_product_impl(V, tau).reshape(*batch, M, rows), R


def _use_tsqr(A: torch.Tensor) -> bool:
    M, N = A.shape[-2], A.shape[-1]
    dev = "mps" if _on_kernels(A) else A.device.type
    return (0 < N <= TUNING.tsqr_max_n and M >= TUNING.tsqr_ratio.get(dev, 2**62) * N
            and tsqr_leaf_limit(A) >= 2 * N)


def tsqr_leaf_limit(A: torch.Tensor) -> int:
    """Most rows of a TSQR leaf for ``A``'s backend: what one whole-matrix kernel call holds."""
    N = A.shape[-1]
    if _on_kernels(A):
        size = 8 if A.is_complex() else 4
        return min(TUNING.tsqr_leaf, 64, (TUNING.small_bytes // size - 64) // max(N, 1))
    if _triton_ok(A[..., :1, :]):
        return 256 if N <= 32 else 128
    return TUNING.tsqr_leaf


# --------------------------------------------------------------------------------------------------
# Ops: fake implementations and derivatives (PyTorch's linalg_qr_backward / linalg_qr_jvp)
# --------------------------------------------------------------------------------------------------


def _solve_tri(A: torch.Tensor, B: torch.Tensor, *, upper: bool, left: bool) -> torch.Tensor:
    """Differentiable triangular solve for the derivative formulas (our op; torch's under
    ``torch.func``, which the triangular custom op does not serve)."""
    if _functorch():
        return torch.linalg.solve_triangular(A, B, upper=upper, left=left)
    from .triangular import solve_triangular

    return solve_triangular(A, B, upper=upper, left=left)


_Q_MISSING = ("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
              "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
_COMPLETE_TALL = "The QR decomposition is not differentiable when mode='complete' and nrows > ncols."


def _qr_fake(A: torch.Tensor, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    M, N = A.shape[-2], A.shape[-1]
    K = min(M, N)
    rows = M if mode == "complete" else K
    Q = A.new_empty(0) if mode == "r" else A.new_empty((*A.shape[:-2], M, rows))
    return Q, A.new_empty((*A.shape[:-2], rows, N))


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


def _geqrf_fake(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return A.new_empty(A.shape), A.new_empty((*A.shape[:-2], min(A.shape[-2], A.shape[-1])))


def _hp_fake(V: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    return V.new_empty(V.shape)


def _ormqr_fake(V: torch.Tensor, tau: torch.Tensor, C: torch.Tensor, left: bool, transpose: bool) -> torch.Tensor:
    return C.new_empty(C.shape)


def _qr_op_impl(A: torch.Tensor, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    return qr_impl(A, mode)


_qr = defop("qr", impl=_qr_op_impl, fake=_qr_fake, setup=_qr_setup, backward=_qr_backward, jvp=_qr_jvp)
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
_geqrf = defop("geqrf", impl=geqrf_impl, fake=_geqrf_fake)
_householder_product = defop("householder_product", impl=householder_product_impl, fake=_hp_fake,
                             setup=_save_inputs, backward=_hp_backward, jvp=_hp_jvp)
_ormqr = defop("ormqr", impl=ormqr_impl, fake=_ormqr_fake, setup=_save_inputs, backward=_ormqr_backward,
               jvp=_ormqr_jvp)


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def qr(A: torch.Tensor, mode: str = "reduced", *, out=None):
    """QR decomposition ``A = Q R``, like :func:`torch.linalg.qr`.

    Householder QR with LAPACK's conventions (``R`` has a real diagonal whose signs follow
    ``larfg``), so ``Q`` and ``R`` equal torch's/SciPy's up to rounding.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``, float32/complex64 on any device, float64/complex128 on CPU/CUDA.
    mode : {"reduced", "complete", "r"}
        ``"reduced"``: ``Q (*, m, k)``, ``R (*, k, n)`` with ``k = min(m, n)``; ``"complete"``:
        ``Q (*, m, m)``, ``R (*, m, n)``; ``"r"``: ``R`` only (``Q`` is empty).
    out : tuple of torch.Tensor, optional
        ``(Q, R)`` to write into.

    Returns
    -------
    torch.return_types.linalg_qr
        ``(Q, R)``.

    Raises
    ------
    RuntimeError
        Bad mode, rank below 2, unsupported dtype; in backward, ``mode="r"`` and ``"complete"`` with
        ``m > n`` (torch's messages).

    Examples
    --------
    >>> A = torch.randn(4, 3)
    >>> Q, R = qr(A)
    >>> torch.allclose(Q @ R, A, atol=1e-5)
    True
    """
    op = "linalg.qr"
    E.check_matrix(op, "A", A)
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr received unrecognized mode {mode!r} but expected one of 'reduced' (default), "
                         "'r', or 'complete'")
    return E.store(op, out, _qr(A, mode), A, kind=_RT.linalg_qr)


def geqrf(A: torch.Tensor, *, out=None):
    """Householder QR in LAPACK's packed form, like :func:`torch.geqrf`.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``.
    out : tuple of torch.Tensor, optional

    Returns
    -------
    torch.return_types.geqrf
        ``(a, tau)``: ``R`` on and above the diagonal of ``a``, the reflectors' ``v`` (unit first
        entry implied) below it; ``tau (*, min(m, n))``. Use :func:`householder_product` or
        :func:`ormqr` to form or apply ``Q``. Not differentiable (as torch's).

    Examples
    --------
    >>> a, tau = geqrf(torch.randn(5, 3))
    >>> householder_product(a, tau).shape
    torch.Size([5, 3])
    """
    op = "torch.geqrf"
    E.check_matrix(op, "input", A)
    return E.store(op, out, _geqrf(A), A, kind=_RT.geqrf)


def _check_reflectors(op: str, V: torch.Tensor, tau: torch.Tensor) -> None:
    E.check_matrix(op, "input", V)
    E.check_tensor(op, "tau", tau)
    if tau.ndim != V.ndim - 1:
        raise E.ShapeError(f"{op}: Expected tau to have one dimension less than input, but got tau.ndim "
                           f"equal to {tau.ndim} and input.ndim is equal to {V.ndim}")
    if tau.shape[:-1] != V.shape[:-2]:
        raise E.ShapeError(f"{op}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"{list(tau.shape[:-1])}")
    E.check_same(op, ("input", "tau"), V, tau)


def householder_product(A: torch.Tensor, tau: torch.Tensor, *, out=None) -> torch.Tensor:
    """The first ``n`` columns of ``H_1 ... H_k``, like :func:`torch.linalg.householder_product`
    (LAPACK ``orgqr``/``ungqr``).

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)`` with ``m >= n``: the reflectors below the diagonal (as :func:`geqrf` packs them).
    tau : torch.Tensor
        ``(*, k)`` with ``k <= n``, same batch shape and dtype.
    out : torch.Tensor, optional

    Returns
    -------
    torch.Tensor
        ``(*, m, n)`` with orthonormal columns. Differentiable in ``A`` (its strictly lower part)
        and ``tau``, forward and reverse mode.

    Examples
    --------
    >>> a, tau = geqrf(torch.randn(6, 4))
    >>> Q = householder_product(a, tau)
    >>> torch.allclose(Q.mT @ Q, torch.eye(4), atol=1e-5)
    True
    """
    op = "torch.linalg.householder_product"
    E.check_tensor(op, "input", A)
    if A.ndim < 2:
        raise E.ShapeError(f"{op}: input must have at least 2 dimensions.")
    if A.shape[-2] < A.shape[-1]:
        raise E.ShapeError(f"{op}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    E.check_tensor(op, "tau", tau)
    if A.shape[-1] < tau.shape[-1]:
        raise E.ShapeError(f"{op}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    _check_reflectors(op, A, tau)
    return E.store(op, out, _householder_product(A, tau), A, tau)


def ormqr(A: torch.Tensor, tau: torch.Tensor, other: torch.Tensor, left: bool = True, transpose: bool = False,
          *, out=None) -> torch.Tensor:
    """Multiply ``other`` by ``Q = H_1 ... H_k`` of :func:`geqrf`, like :func:`torch.ormqr`
    (LAPACK ``ormqr``/``unmqr``), without forming ``Q``.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, mn, k')``: the reflectors (as :func:`geqrf` packs them); ``Q`` is ``mn x mn``.
    tau : torch.Tensor
        ``(*, k)``, ``k = min(mn, k')``.
    other : torch.Tensor
        ``(*, m, n)``: ``m = mn`` if ``left`` else ``n = mn``; same batch shape and dtype.
    left : bool
        ``op(Q) @ other`` if True, else ``other @ op(Q)``.
    transpose : bool
        ``op(Q) = Qᴴ`` (the conjugate transpose for complex) if True, else ``Q``.
    out : torch.Tensor, optional

    Returns
    -------
    torch.Tensor
        ``(*, m, n)``. Differentiable in ``A`` (its strictly lower part), ``tau`` and ``other``.

    Examples
    --------
    >>> A = torch.randn(5, 3)
    >>> a, tau = geqrf(A)
    >>> R = ormqr(a, tau, A, transpose=True)[:3]
    >>> torch.allclose(R.tril(-1), torch.zeros(3, 3), atol=1e-5)
    True
    """
    op = "torch.ormqr"
    E.check_tensor(op, "input", A)
    E.check_tensor(op, "other", other)
    if A.ndim < 2:
        raise E.ShapeError(f"{op}: input must have at least 2 dimensions.")
    if other.ndim < 2:
        raise E.ShapeError(f"{op}: other must have at least 2 dimensions.")
    E.check_bool(op, "left", left)
    E.check_bool(op, "transpose", transpose)
    side = -2 if left else -1
    if other.shape[side] != A.shape[-2]:
        raise E.ShapeError(f"{op}: other.shape[{side}] must be equal to input.shape[-2]")
    E.check_tensor(op, "tau", tau)
    if tau.shape[-1] != min(other.shape[side], A.shape[-1]):
        raise E.ShapeError(f"{op}: tau.shape[-1] must be equal to min(other.shape[{side}], input.shape[-1])")
    if other.ndim != A.ndim:
        raise E.ShapeError(f"{op}: Expected other to have the same number of dimensions as input, but got "
                           f"other.ndim equal to {other.ndim} and input.ndim is equal to {A.ndim}")
    _check_reflectors(op, A, tau)
    if other.shape[:-2] != A.shape[:-2]:
        raise E.ShapeError(f"{op}: Expected batch dimensions of other to be equal to input.shape[:-2], but got "
                           f"{list(other.shape[:-2])}")
    E.check_same(op, ("input", "other"), A, other)
    return E.store(op, out, _ormqr(A, tau, other, left, transpose), A, tau, other)


def _qr_small_fused(A: torch.Tensor, mode: str):
    """``(Q, R)`` of a batch of small matrices with ``Q`` formed in the factorising launch (the
    ``qr_small`` Metal kernel, or Triton on CUDA), or None."""
    M, N = A.shape[-2], A.shape[-1]
    if _on_kernels(A):
        if not _small_on_kernels(M, N, A.dtype):
            return None
        run = _MetalKernels(A.device, A.dtype).small
    elif _triton_ok(A) and not _torch_leaf(A):
        from ._qr_triton import geqrf_small as run
    else:
        return None
    K = min(M, N)
    batch = A.shape[:-2]
    QR = E.resolved(A).reshape(-1, M, N).clone()
    tau = QR.new_empty(QR.shape[0], K)
    Q = None if mode == "r" else QR.new_empty(QR.shape[0], M, K)
    if QR.shape[0] > 0 and K > 0:
        run(QR, tau, Q)
    R = _r_from(QR, K).reshape(*batch, K, N)
    return (A.new_empty(0) if Q is None else Q.reshape(*batch, M, K)), R
