"""Ops on singular values: ``pinv``, ``matrix_rank``, ``matrix_norm``, ``cond`` with
``torch.linalg``'s signatures and semantics (issue 12). ``lstsq`` lives in :mod:`mpslinalg.svd.lstsq`.

Everything here is a composition of the SVD family (:mod:`mpslinalg.svd`) and torch ops; there is
no kernel of its own, so there is no kernel contract: the ``metal``/``emulator``/``torch`` backend
choice happens inside the SVD. :func:`svd_parts` and :func:`svdvals_grad` are the only doors to the
SVD (and :func:`qr_reduced` to QR, used by ``lstsq``): until a family's module exists they use
``torch.linalg`` on CPU/CUDA and refuse ``mps`` (no silent CPU fallback).

Tolerances follow torch's ``get_atol_rtol``: ``atol`` defaults to 0; ``rtol`` defaults to
``eps·max(m, n)`` (``eps`` of ``A``'s dtype), or to 0 when ``atol > 0`` is given; singular values
``σ > max(atol, rtol·σ₁)`` count. They are tensors on ``A``'s device (float64 on CPU/CUDA as torch,
float32 on mps), built without reading any value on the host: ``pinv`` never synchronises.

Gradients
---------
``pinv`` is one op with PyTorch's ``pinv_backward`` / ``pinv_jvp`` (``FunctionsManual.cpp``), the
derivative of ``A⁺`` on the manifold of matrices of ``A``'s rank. It does not go through the SVD's
backward, so repeated or zero singular values (an orthogonal or rank-deficient ``A``) do not give
infinite gradients, unlike ``torch.linalg.pinv``, which differentiates its SVD. ``hermitian=True``
uses only the lower triangle, and the gradient says so (zero for the strict upper triangle).
``matrix_norm(ord=2|-2|'nuc')`` and ``cond(p=None|2|-2)`` differentiate through ``svdvals``;
the other orders through torch ops and ``inv_ex``.
"""

from __future__ import annotations

import math

import torch

from ..kernels import backend_for
from ..oplayer import checks as E
from ..oplayer import declared, defop, functorch_active
from ..qr import qr
from . import c as _svd_c
from .algorithm import ldexp
from .api import svdvals
from .kernels import TUNING
from .ops import svd_impl

__all__ = ["cond", "matrix_norm", "matrix_rank", "pinv"]


# --------------------------------------------------------------------------------------------------
# Doors to the SVD and QR families
# --------------------------------------------------------------------------------------------------


def svd_parts(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reduced SVD ``(U, S, Vh, info)`` of ``A`` for use inside op implementations (not
    differentiable, no host sync).

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``, resolved or not.

    Returns
    -------
    tuple of torch.Tensor
        ``U (*, m, k)``, ``S (*, k)`` real descending, ``Vh (*, k, n)``, ``k = min(m, n)``;
        ``info (*)`` int32, ``> 0`` where the SVD failed (non-finite input, no convergence).
    """
    if A.device.type == "cpu" and backend_for(A.device) == "torch":
        return _svd_lapack(A)
    return svd_impl(A, False, True)


def _svd_lapack(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """LAPACK's SVD for the CPU torch backend, with the SVD family's non-finite rule (NaN outputs and
    ``info = 1`` instead of an exception; finite matrices untouched).

    Why not the SVD family here: pinv, ranks and least squares cut the singular values below
    ``rtol·σ₁``, where LAPACK's absolute accuracy suffices (it is what torch.linalg.pinv/lstsq use),
    and on the CPU the relative-accurate Jacobi of :func:`mpslinalg.svd` is 30-300x slower
    (docs/ops/svd.md): never slower than torch.linalg. On GPUs the family's own SVD runs (no host
    sync, no CPU fallback on mps)."""
    finite = torch.isfinite(A).all(-1).all(-1)
    A0 = torch.where(finite[..., None, None], A, torch.zeros((), dtype=A.dtype))
    # scaled by a power of two into range first, as the SVD family does (exact: the same digits
    # come out at 2^±100, and 1e±30 float32 inputs neither overflow nor underflow inside LAPACK)
    amax = A0.abs().amax((-2, -1)) if A0.numel() else A0.abs().sum((-2, -1))
    expo = torch.frexp(amax).exponent
    U, S, Vh = torch.linalg.svd(ldexp(A0, -expo[..., None, None]), full_matrices=False)
    S = ldexp(S, expo[..., None])
    bad = ~finite
    nan = float("nan")
    U = torch.where(bad[..., None, None], nan, U)
    Vh = torch.where(bad[..., None, None], nan, Vh)
    S = torch.where(bad[..., None], nan, S)
    return U, S, Vh, bad.to(torch.int32)


def _lapack_pinv(A: torch.Tensor) -> bool:
    """``pinv`` of ``A`` is ``torch.linalg.pinv``'s (CPU torch backend, no ``torch.func`` transform,
    finite ``A``: the host read is of CPU memory, no synchronisation). Its SVD is LAPACK's, as in
    :func:`_svd_lapack`, and it keeps ``σ > max(atol, rtol·σ₁)`` as :func:`_keep`; it skips the
    scaling and non-finite wrapping that a single call does not need (LAPACK scales into range
    itself; non-finite matrices take the wrapped path), 1.5-3x faster on small matrices."""
    # a finite sum proves every entry finite (one reduction); a sum that overflows only sends a
    # finite A down the wrapped path
    return _cpu_lapack(A) and A.numel() > 0 and math.isfinite(abs(complex(A.sum())))


#: Most entries of one matrix whose default ``pinv`` is ``torch.linalg.pinv`` itself, not the QR route
#: (issue 34.7: 8x8 56 against torch.linalg's 31 µs; even at 20x20 float32: docs/ops/overhead.md).
PINV_TORCH_MAX = 400
#: Most entries of one CPU matrix whose default ``pinv`` is the C Jacobi's (:func:`mpslinalg.svd.c.pinv_one`):
#: faster than ``torch.linalg.pinv`` up to 16x16 in every dtype (docs/ops/overhead.md).
PINV_ONE_MAX = 256


def _cpu_lapack(A: torch.Tensor) -> bool:
    """The CPU torch backend outside ``torch.func`` transforms: LAPACK serves the ops whose
    contract is a cut below ``rtol·σ₁`` (host reads are of CPU memory)."""
    return A.device.type == "cpu" and backend_for(A.device) == "torch" and not functorch_active()


def _pinv_by_qr(A: torch.Tensor, atol, rtol) -> tuple[torch.Tensor, torch.Tensor]:
    """``pinv`` of a CPU batch through LAPACK's QR, valid for the matrices that provably keep all
    their singular values: ``(X, ok)``, ``ok`` per matrix (batch of ``A`` and the tolerances).

    Tall ``A = QR`` (reduced; wide: ``Aᴴ = QR``): ``σ₁ <= ‖R‖_F`` and ``σ_k >= 1/‖R⁻¹‖_F``, so
    where ``2·max(atol, rtol·‖R‖_F)·‖R⁻¹‖_F < 1`` every ``σ_j`` exceeds twice torch's cut
    ``max(atol, rtol·σ₁)`` and ``A⁺ = R⁻¹Qᴴ`` (wide: ``Q R⁻ᴴ``), as backward stable as the SVD's
    ``V Σ⁻¹ Uᴴ`` (each column a least-squares solution by Householder QR). A QR, a small
    triangular solve and one product instead of the SVD with vectors: 1.4-2x faster at 128x32 and
    512x128 (docs/evidence/svd.md). The bounds' slack (a factor ``<= k``) only sends nearly
    rank-deficient matrices to the SVD; a non-finite matrix gives ``ok = False``.
    """
    m, n = A.shape[-2:]
    T = A if m >= n else A.mH
    Q, R = torch.linalg.qr(T)
    Rinv = torch.linalg.solve_triangular(R, torch.eye(R.shape[-1], dtype=A.dtype), upper=True)
    cut = rtol * torch.linalg.matrix_norm(R)  # Frobenius norms (real, float64 tolerances broadcast)
    cut = torch.maximum(cut, atol) if isinstance(atol, torch.Tensor) else cut.clamp_min(atol)
    ok = 2 * cut * torch.linalg.matrix_norm(Rinv) < 1  # NaN/inf compare False
    return (Rinv @ Q.mH if m >= n else Q @ Rinv.mH), ok


def _pinv_cpu(A: torch.Tensor, atol, rtol, otherwise, rest=None) -> torch.Tensor:
    """The CPU torch backend's ``pinv``: :func:`_pinv_by_qr` where it is valid, ``otherwise()``
    (the SVD's pinv of the whole batch) for the rest, chosen per matrix, so a matrix's result does
    not depend on the others of its batch. The host read of ``ok`` is of CPU memory.

    ``rest(B)``, where given (tolerances that do not vary over the batch), is the SVD's pinv of the
    sub-batch ``B``: only the matrices the QR cannot serve take it. Without it one ill-conditioned
    matrix cost the whole batch's SVD on top of its QR: 1M Gaussian 3x3 at 0.79x torch.linalg, 20000
    8x8 at 0.68x (issue 34.7; docs/ops/overhead.md)."""
    X, ok = _pinv_by_qr(A, atol, rtol)
    if ok.shape == A.shape[:-2] and bool(ok.all()):
        return X
    if rest is None or ok.shape != A.shape[:-2]:
        return torch.where(ok[..., None, None], X, otherwise())
    bad = (~ok).reshape(-1).nonzero().squeeze(1)
    flat = X.reshape(-1, *X.shape[-2:])
    flat = flat.index_copy(0, bad, rest(A.reshape(-1, *A.shape[-2:]).index_select(0, bad)))
    return flat.reshape(X.shape)


def svdvals_grad(A: torch.Tensor) -> torch.Tensor:
    """Singular values of ``A`` (descending), differentiable (the SVD family's ``svdvals``)."""
    return svdvals(A)


def qr_reduced(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Reduced Householder QR ``(Q (*, m, k), R (*, k, n))`` (the QR family's ``qr``)."""
    return tuple(qr(A, mode="reduced"))


# --------------------------------------------------------------------------------------------------
# Tolerances (torch's get_atol_rtol)
# --------------------------------------------------------------------------------------------------


def _tol_dtype(A: torch.Tensor) -> torch.dtype:
    # torch compares singular values with float64 tolerances; Apple GPUs have no float64
    return torch.float32 if A.device.type == "mps" else torch.float64


def _tol_tensor(op: str, name: str, value, A: torch.Tensor) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        if value.is_complex():
            raise TypeError(f"{op}: {name} tensor of complex type is not supported. Got {value.dtype}")
        return value.to(device=A.device, dtype=_tol_dtype(A))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{op}: expected {name} to be a float or a real tensor, got {type(value).__name__}")
    return torch.full((), float(value), dtype=_tol_dtype(A), device=A.device)


def tolerances(op: str, A: torch.Tensor, atol, rtol) -> tuple[torch.Tensor, torch.Tensor]:
    """``(atol, rtol)`` as real tensors on ``A``'s device, with torch's defaults (no host read).

    Parameters
    ----------
    op : str
        The calling op (for error messages).
    A : torch.Tensor
        ``(*, m, n)``.
    atol, rtol : float, torch.Tensor or None
        As given by the user.

    Returns
    -------
    tuple of torch.Tensor
        Broadcastable to ``A``'s batch shape.
    """
    default = torch.finfo(A.dtype).eps * max(A.shape[-2], A.shape[-1])
    atol_t = _tol_tensor(op, "atol", 0.0 if atol is None else atol, A)
    if rtol is not None:
        return atol_t, _tol_tensor(op, "rtol", rtol, A)
    if atol is None:
        return atol_t, _tol_tensor(op, "rtol", default, A)
    if not isinstance(atol, torch.Tensor):
        return atol_t, _tol_tensor(op, "rtol", 0.0 if atol > 0 else default, A)
    return atol_t, torch.where(atol_t > 0, torch.zeros_like(atol_t), torch.full_like(atol_t, default))


def _keep(S: torch.Tensor, atol: torch.Tensor, rtol: torch.Tensor) -> torch.Tensor:
    """Mask of the singular values that count: ``σ > max(atol, rtol·σ₁)``."""
    tol = torch.maximum(atol.unsqueeze(-1), rtol.unsqueeze(-1) * S[..., :1])
    return S > tol


def hermitian_from_lower(A: torch.Tensor) -> torch.Tensor:
    """The Hermitian matrix that the lower triangle of ``A`` defines (real diagonal), as torch's
    ``hermitian=True`` ops read it. Differentiable torch ops, so gradients see only the triangle."""
    L = A.tril(-1)
    d = torch.diagonal(A, dim1=-2, dim2=-1)
    if A.is_complex():
        d = d.real.to(A.dtype)
    return L + L.mH + torch.diag_embed(d)


# --------------------------------------------------------------------------------------------------
# pinv
# --------------------------------------------------------------------------------------------------


def _batch_of(A: torch.Tensor, *tols: torch.Tensor) -> torch.Size:
    return torch.broadcast_shapes(A.shape[:-2], *(t.shape for t in tols))


def _pinv_impl(A: torch.Tensor, atol: torch.Tensor, rtol: torch.Tensor) -> torch.Tensor:
    m, n = A.shape[-2:]
    if m == 0 or n == 0:
        return A.new_zeros(_batch_of(A, atol, rtol) + (n, m))
    if _lapack_pinv(A):  # CPU: torch.linalg.pinv is LAPACK's SVD with the same cut, one call
        return _pinv_cpu(A, atol, rtol, lambda: torch.linalg.pinv(A, atol=atol, rtol=rtol))
    if _cpu_lapack(A):  # CPU, non-finite entries: the same per-matrix choice, NaN from the SVD's
        return _pinv_cpu(A, atol, rtol, lambda: _pinv_svd(A, atol, rtol))
    return _pinv_svd(A, atol, rtol)


def _pinv_svd(A: torch.Tensor, atol: torch.Tensor, rtol: torch.Tensor) -> torch.Tensor:
    U, S, Vh, _ = svd_parts(A)  # a failed SVD has NaN factors: NaN comes out (no host sync)
    keep = _keep(S, atol, rtol)
    # 1/σ only where kept: the where() never divides by a dropped (possibly zero) value
    Sinv = torch.where(keep, 1.0 / torch.where(keep, S, 1.0), 0.0).to(S.dtype).to(A.dtype)
    return torch.matmul(Vh.mH * Sinv.unsqueeze(-2), U.mH)


def _pinv_shape(A, atol, rtol):
    m, n = A.shape[-2:]
    return ((n, m), A.dtype)


def _pinv_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], output)


def pinv_backward(g: torch.Tensor, P: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """PyTorch's ``pinv_backward``: the cotangent of ``A`` from that of ``P = A⁺``.

    Parameters
    ----------
    g : torch.Tensor
        ``(*, n, m)`` cotangent of ``P``.
    P : torch.Tensor
        ``(*, n, m)`` the pseudo-inverse (an output of a differentiable op, for double backward).
    A : torch.Tensor
        ``(*, m, n)``.

    Returns
    -------
    torch.Tensor
        ``(*, m, n)``.
    """
    m, n = A.shape[-2:]
    Ph, gh = P.mH, g.mH
    if m <= n:  # products of the smaller dimension
        K = gh @ P
        KPh = K @ Ph
        return -(P @ K).mH + KPh - (A @ P) @ KPh + (Ph @ P) @ (gh - K @ A)
    K = P @ gh
    PhK = Ph @ K
    return -(K @ P).mH + (gh - A @ K) @ P @ Ph + PhK - PhK @ P @ A


def pinv_jvp(A: torch.Tensor, P: torch.Tensor, dA: torch.Tensor) -> torch.Tensor:
    """PyTorch's ``pinv_jvp``: the tangent of ``P = A⁺`` along ``dA``."""
    m, n = A.shape[-2:]
    dAh, Ph = dA.mH, P.mH
    if m <= n:
        K = Ph @ dAh
        return P @ (K - K.mH - K @ (A @ P)) + (dAh - P @ (A @ dAh)) @ (Ph @ P)
    K = P @ dA
    Kh = K.mH
    return (Kh - K - (P @ A) @ Kh) @ P + (P @ Ph) @ (dAh - (dAh @ A) @ P)


def _pinv_backward(ctx, g):
    A, P = ctx.saved_tensors
    if g is None:
        return None, None, None
    return pinv_backward(g, P, A).sum_to_size(A.shape), None, None


def _pinv_jvp(inputs, outputs, tangents):
    A, P = inputs[0], outputs[0]
    dA = tangents[0]
    return (torch.zeros_like(P) if dA is None else pinv_jvp(A, P, dA),)


_pinv = defop("pinv", impl=_pinv_impl, shape=_pinv_shape, setup=_pinv_setup,
              backward=_pinv_backward, jvp=_pinv_jvp, ranks=(2, 0, 0))


def pinv(A: torch.Tensor, rcond=None, hermitian: bool = False, *, atol=None, rtol=None,
         out: torch.Tensor | None = None) -> torch.Tensor:
    """Moore–Penrose pseudo-inverse, like ``torch.linalg.pinv``.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``; float32/complex64 on every device, float64/complex128 on CPU/CUDA.
    rcond : float or torch.Tensor, optional
        Deprecated positional form of ``rtol`` (then ``atol = 0``), as torch's overload.
    hermitian : bool
        ``A`` is Hermitian: only its lower triangle is read (as torch).
    atol, rtol : float or torch.Tensor, optional
        Singular values ``σ <= max(atol, rtol·σ₁)`` are dropped; tensors broadcast with the batch.
        Defaults: ``atol = 0``, ``rtol = eps·max(m, n)`` (0 if ``atol > 0`` is given).
    out : torch.Tensor, optional
        Output tensor.

    Returns
    -------
    torch.Tensor
        ``(*, n, m)``. No host synchronisation.

    Examples
    --------
    >>> import torch, mpslinalg as LA
    >>> X = LA.pinv(torch.randn(8, 5, 3))
    """
    op = "linalg.pinv"
    E.check_matrix(op, "A", A, square=hermitian is True)
    E.check_bool(op, "hermitian", hermitian)
    if rcond is None and atol is None and rtol is None and not hermitian and _pinv.direct(A):
        # torch's defaults, nothing needs the op: no op layer (issue 13's host overhead)
        if (A.dim() == 2 and 0 < A.numel() <= PINV_ONE_MAX and _svd_c.usable(A) and backend_for(A.device) == "torch"
                and (P := _svd_c.pinv_one(A, torch.finfo(A.dtype).eps * max(A.shape), TUNING.max_sweeps)) is not None):
            return E.store(op, out, P, A)  # one small matrix: one C call (NaN for a non-finite A)
        if _lapack_pinv(A):  # LAPACK
            if A.dim() == 2 and A.shape[0] * A.shape[1] <= PINV_TORCH_MAX:
                # one small matrix: torch.linalg.pinv's one gesdd costs less than the QR route's small ops
                return E.store(op, out, torch.linalg.pinv(A), A)
            rtol_default = torch.finfo(A.dtype).eps * max(A.shape[-2:])
            return E.store(op, out, _pinv_cpu(A, 0.0, rtol_default, None, torch.linalg.pinv), A)
    if rcond is not None:
        if atol is not None or rtol is not None:
            raise TypeError(f"{op}: the deprecated rcond cannot be combined with atol or rtol (use rtol)")
        atol, rtol = 0.0, rcond
    atol_t, rtol_t = tolerances(op, A, atol, rtol)
    X = _pinv(hermitian_from_lower(A) if hermitian else A, atol_t, rtol_t)
    return E.store(op, out, X, A)


# --------------------------------------------------------------------------------------------------
# matrix_rank
# --------------------------------------------------------------------------------------------------


def _svdvals_nograd(A: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return svdvals_abs(A)


def svdvals_abs(A: torch.Tensor) -> torch.Tensor:
    """Singular values for ``matrix_rank``, ``matrix_norm`` and ``cond``: LAPACK's
    ``torch.linalg.svdvals`` on the CPU torch backend when nothing needs the declared op (no
    autograd, compile, ``torch.func``, dual tensor), which raises on non-finite input as
    :func:`mpslinalg.svdvals` does; else the family's (differentiable, relatively accurate).

    On the CPU these ops then have torch.linalg's accuracy (each σ to ``c·u·σ₁``; issue 13: never
    slower than torch.linalg, the Jacobi costs 1.5-4x there): the relatively accurate small
    singular values of graded matrices are :func:`mpslinalg.svdvals`'s (issue 12), e.g.
    ``S = svdvals(A); S[..., 0] / S[..., -1]`` for a condition number that is right at κ ≫ 1/u."""
    # direct() first: under torch.compile it is False, and backend_for (a ContextVar) is not traced
    if A.device.type == "cpu" and _pinv.direct(A) and backend_for(A.device) == "torch":
        return torch.linalg.svdvals(A)
    return svdvals_grad(A)


def matrix_rank(A: torch.Tensor, tol=None, hermitian: bool = False, *, atol=None, rtol=None,
                out: torch.Tensor | None = None) -> torch.Tensor:
    """Numerical rank, like ``torch.linalg.matrix_rank``: the number of ``σ > max(atol, rtol·σ₁)``.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``.
    tol : float or torch.Tensor, optional
        Deprecated positional form of ``atol`` (then ``rtol = 0``), as torch's overload.
    hermitian : bool
        ``A`` is Hermitian: only its lower triangle is read.
    atol, rtol : float or torch.Tensor, optional
        As :func:`pinv`.
    out : torch.Tensor, optional
        int64 output tensor.

    Returns
    -------
    torch.Tensor
        int64 ``(*)``. No host synchronisation.
    """
    op = "linalg.matrix_rank"
    E.check_matrix(op, "A", A, square=hermitian is True)
    E.check_bool(op, "hermitian", hermitian)
    if (tol is None and atol is None and rtol is None and not hermitian and A.numel() > 0
            and A.device.type == "cpu" and _pinv.direct(A) and backend_for(A.device) == "torch"):
        # torch's defaults are this op's and its singular values LAPACK's (svdvals_abs): one call
        return E.store(op, out, torch.linalg.matrix_rank(A), A)
    if tol is not None:
        if atol is not None or rtol is not None:
            raise TypeError(f"{op}: the deprecated tol cannot be combined with atol or rtol (use atol)")
        atol, rtol = tol, 0.0
    atol_t, rtol_t = tolerances(op, A, atol, rtol)
    m, n = A.shape[-2:]
    if m == 0 or n == 0:
        rank = torch.zeros(_batch_of(A, atol_t, rtol_t), dtype=torch.int64, device=A.device)
    else:
        S = _svdvals_nograd(hermitian_from_lower(A) if hermitian else A)
        rank = _keep(S, atol_t, rtol_t).sum(-1)
    return E.store(op, out, rank, A)


# --------------------------------------------------------------------------------------------------
# matrix_norm and cond
# --------------------------------------------------------------------------------------------------

_SVD_ORDS = (2, -2, "nuc")
_ORDS = (*_SVD_ORDS, "fro", 1, -1, math.inf, -math.inf)


def _is_ord(ord_, allowed) -> bool:
    if isinstance(ord_, str):
        return ord_ in [o for o in allowed if isinstance(o, str)]
    if isinstance(ord_, bool) or not isinstance(ord_, (int, float)):
        return False
    return any(ord_ == o for o in allowed if not isinstance(o, str))


def _norm_last2(A: torch.Tensor, ord_) -> torch.Tensor:
    """Matrix norm over the last two dims of ``A`` (ord already validated)."""
    if ord_ == "fro":
        return torch.linalg.vector_norm(A, 2, dim=(-2, -1))
    if isinstance(ord_, str) or abs(ord_) == 2:
        S = svdvals_abs(A)
        if ord_ == "nuc":
            return S.sum(-1)
        if S.shape[-1] == 0:
            if ord_ == 2:  # torch: the 2-norm of an empty matrix is 0, its -2 "norm" has no minimum
                return S.sum(-1)
            raise RuntimeError("linalg.matrix_norm: ord=-2 of an empty matrix (no smallest singular value)")
        return S[..., 0] if ord_ == 2 else S[..., -1]
    along = -2 if abs(ord_) == 1 else -1  # 1: max column sum; inf: max row sum
    sums = A.abs().sum(along)
    if ord_ > 0:  # torch: 0 for an empty matrix (the minimum orders raise, as torch's amin)
        return sums.amax(-1) if sums.shape[-1] else sums.sum(-1)
    return sums.amin(-1)


def matrix_norm(A: torch.Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *,
                dtype: torch.dtype | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """Matrix norm, like ``torch.linalg.matrix_norm``.

    Parameters
    ----------
    A : torch.Tensor
        Tensor with at least 2 dimensions.
    ord : {'fro', 'nuc', 2, -2, 1, -1, inf, -inf}
        ``2``/``-2``/``'nuc'`` are the largest/smallest/sum of the singular values (through the SVD
        family's ``svdvals``, differentiable); the others are torch reductions.
    dim : tuple of two ints
        The matrix dimensions.
    keepdim : bool
        Keep ``dim`` as size-1 dimensions.
    dtype : torch.dtype, optional
        Cast ``A`` to this dtype first (complex inputs need a complex dtype).
    out : torch.Tensor, optional
        Output tensor.

    Returns
    -------
    torch.Tensor
        Real, ``A``'s shape without ``dim`` (or with size-1 ``dim`` if ``keepdim``).
    """
    op = "linalg.matrix_norm"
    E.check_matrix(op, "A", A)
    E.check_bool(op, "keepdim", keepdim)
    if not _is_ord(ord, _ORDS):
        raise RuntimeError(f"{op}: Order {ord} not supported.")
    if (not isinstance(dim, (tuple, list)) or len(dim) != 2
            or not all(isinstance(d, int) and not isinstance(d, bool) for d in dim)):
        raise TypeError(f"{op}: dim must be a 2-tuple of ints. Got {dim}")
    d0, d1 = (d % A.ndim if -A.ndim <= d < A.ndim else None for d in dim)
    if d0 is None or d1 is None:
        raise IndexError(f"{op}: dim {tuple(dim)} out of range for a tensor of {A.ndim} dimensions")
    if d0 == d1:
        raise RuntimeError(f"{op}: dims must be different. Got {tuple(dim)}")
    if dtype is not None:
        if A.is_complex() and not dtype.is_complex:
            raise RuntimeError(f"{op}: dtype should be complex for complex inputs, but got {dtype}")
        if dtype not in E.supported_dtypes(A.device):
            raise E.DTypeError(f"{op}: dtype {dtype} is not supported on {A.device.type}")
        A = A.to(dtype)
    result = _norm_last2(A.movedim((d0, d1), (-2, -1)), ord)
    if keepdim:
        for d in sorted((d0, d1)):
            result = result.unsqueeze(d)
    return E.store(op, out, result, A)


def cond(A: torch.Tensor, p=None, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Condition number, like ``torch.linalg.cond``.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``; square unless ``p`` is None/2/-2.
    p : {None, 2, -2, 'fro', 'nuc', inf, -inf, 1, -1}
        ``None``/``2``: ``σ₁/σₙ``; ``-2``: ``σₙ/σ₁`` (singular values, any shape). The others:
        ``‖A‖_p ‖A⁻¹‖_p`` with ``inv_ex``; ``inf`` for singular matrices (as torch).
    out : torch.Tensor, optional
        Output tensor.

    Returns
    -------
    torch.Tensor
        Real, ``(*)``. Zeros for empty matrices (as torch).
    """
    op = "linalg.cond"
    E.check_matrix(op, "A", A)
    p_ = 2 if p is None else p
    if not _is_ord(p_, _ORDS):
        raise RuntimeError(f"{op} got an invalid norm type: {p}")
    real = A.real.dtype if A.is_complex() else A.dtype
    if not isinstance(p_, str) and abs(p_) == 2:
        if A.numel() == 0:
            result = torch.zeros(A.shape[:-2], dtype=real, device=A.device)
        else:
            S = svdvals_abs(A)
            result = S[..., 0] / S[..., -1] if p_ == 2 else S[..., -1] / S[..., 0]
        return E.store(op, out, result, A)
    E.check_matrix(f"{op}(ord={p_})", "A", A, square=True)
    if A.numel() == 0:
        return E.store(op, out, torch.zeros(A.shape[:-2], dtype=real, device=A.device), A)
    Ainv, info = declared("inv_ex")(A)  # the LU family's op (lu imports svd: no import back)
    singular = info > 0
    # a singular matrix's condition number is inf (torch fills its inverse with inf; here the
    # inverse's norm is not taken of non-finite values, which the SVD orders would refuse)
    Ainv = torch.where(singular[..., None, None], 0.0, Ainv)
    result = torch.where(singular, math.inf, _norm_last2(A, p_) * _norm_last2(Ainv, p_))
    return E.store(op, out, result.nan_to_num(math.inf, math.inf, -math.inf), A)
