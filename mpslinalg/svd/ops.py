"""The SVD family's internal entry point :func:`svd_impl` and the op ``mpslinalg::svd``: its
declaration, fake and derivatives (PyTorch's ``svd_backward`` / ``linalg_svd_jvp``)."""

from __future__ import annotations

import torch

from ..oplayer import defop
from ..oplayer.derivatives import svd_backward, svd_jvp
from .algorithm import plain, svd_tall
from .paths import path_for

__all__ = ["svd_impl", "svd_op"]


def _empty_svd(A: torch.Tensor, full: bool, compute_uv: bool):
    *batch, m, n = A.shape
    rdt = A.real.dtype if A.is_complex() else A.dtype
    S = torch.zeros(*batch, 0, dtype=rdt, device=A.device)
    info = torch.zeros(batch, dtype=torch.int32, device=A.device)
    if not compute_uv:
        return A.new_empty(0), S, A.new_empty(0), info

    def eye(k: int, cols: int) -> torch.Tensor:
        return torch.eye(k, cols, dtype=A.dtype, device=A.device).expand(*batch, k, cols).clone()

    U = eye(m, m) if full else eye(m, 0)
    Vh = eye(n, n) if full else eye(0, n)
    return U, S, Vh, info


def svd_impl(A: torch.Tensor, full_matrices: bool, compute_uv: bool
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Batched SVD ``A = U diag(S) Vh`` with torch's conventions; no input checks, no host sync.

    The internal entry point of the SVD family (``pinv``, ``lstsq``, ``matrix_rank``, ``cond`` and
    ``matrix_norm`` build on it). Not differentiable by itself: the public ops are. The device path
    is chosen here, once (:func:`mpslinalg.svd.paths.path_for`).

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``, float32/float64/complex64/complex128 (not modified).
    full_matrices : bool
        ``U`` is ``(*, m, m)`` and ``Vh`` ``(*, n, n)`` if true, else ``(*, m, k)`` and ``(*, k, n)``,
        ``k = min(m, n)``.
    compute_uv : bool
        If false, ``U`` and ``Vh`` are empty tensors (as ``torch.linalg.svd``'s internals).

    Returns
    -------
    U, S, Vh, info : torch.Tensor
        ``S`` real, ``(*, k)``, descending, non-negative. ``info`` int32 ``(*)``: 0 success,
        1 non-finite input (outputs NaN), 2 no convergence within the sweep bound.
    """
    *batch, m, n = A.shape
    if m == 0 or n == 0:
        return _empty_svd(A, full_matrices, compute_uv)
    wide = m < n
    X = A.reshape(-1, m, n)
    X = (X.mH if wide else X).contiguous()
    U, S, V, info = svd_tall(X, full_matrices, compute_uv, path_for(X))
    S, info = _shaped(S, *batch, min(m, n)), _shaped(info, *batch)
    if not compute_uv:
        empty = A.new_empty(0)
        return empty, S, empty, info
    if wide:  # A = (U' S V'ᴴ)ᴴ = V' S U'ᴴ
        U, V = V, U
    Vh = plain(V.mH)  # fresh, plain layout (tangents get the same)
    return _shaped(U.contiguous(), *batch, m, U.shape[-1]), S, _shaped(Vh, *batch, Vh.shape[-2], n), info


def _shaped(t: torch.Tensor, *shape: int) -> torch.Tensor:
    """``t.reshape(shape)``, but ``t`` itself when already so shaped (the op would copy a view)."""
    return t if tuple(t.shape) == shape else t.reshape(shape)


def _svd_op_impl(A: torch.Tensor, full_matrices: bool, compute_uv: bool
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    U, S, Vh, info = svd_impl(A, full_matrices, compute_uv)
    if not compute_uv:  # custom ops must not return the same tensor twice
        U, Vh = A.new_empty(0), A.new_empty(0)
    # outputs are fresh tensors, never views of intermediates (forward-mode layouts, custom ops)
    return tuple(t.clone() if t._base is not None else t for t in (U, S, Vh, info))


def _svd_shape(A, full_matrices, compute_uv):
    m, n = A.shape[-2:]
    k = min(m, n)
    S, info = ((k,), A.real.dtype if A.is_complex() else A.dtype), ((), torch.int32)
    if not compute_uv:
        return [(None, A.dtype), S, (None, A.dtype), info]
    uc, vr = (m, n) if full_matrices else (k, k)
    return [((m, uc), A.dtype), S, ((vr, n), A.dtype), info]


def _svd_setup(ctx, inputs, output):
    A, full_matrices, compute_uv = inputs
    U, S, Vh, _ = output
    ctx.full_matrices, ctx.compute_uv = full_matrices, compute_uv
    ctx.save_for_backward(U, S, Vh)


def _svd_backward(ctx, gU, gS, gVh, ginfo=None):
    if not ctx.compute_uv:
        raise RuntimeError("linalg.svd: the derivative needs the singular vectors; call svd or svdvals "
                           "(which compute them when A requires grad)")
    U, S, Vh = ctx.saved_tensors
    k = S.shape[-1]
    if ctx.full_matrices:  # torch differentiates only the first k columns of U and rows of Vh
        U, Vh = U[..., :k], Vh[..., :k, :]
        gU = None if gU is None else gU[..., :k]
        gVh = None if gVh is None else gVh[..., :k, :]
    return svd_backward(gU, gS, gVh, U, S, Vh), None, None


def _svd_jvp(inputs, outputs, tangents):
    A, full_matrices, compute_uv = inputs
    U, S, Vh, _ = outputs
    dA = tangents[0]
    if dA is None:
        return None, None, None, None
    dU, dS, dVh = svd_jvp(dA, U, S, Vh, full_matrices)
    return dU, dS, dVh, None


svd_op = defop("svd", impl=_svd_op_impl, shape=_svd_shape, setup=_svd_setup, backward=_svd_backward,
               jvp=_svd_jvp, ranks=(2,))
