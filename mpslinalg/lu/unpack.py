"""``torch.lu_unpack`` for the LU family: ``P``, ``L`` and ``U`` from ``lu_factor``'s packed output.

The permutation is built on the device from the pivots (:func:`mpslinalg.lu.kernels._perm_from_pivots`:
the interchanges composed by vectorised comparisons and pointer jumping, no host loop over their
values), and ``P`` from it by one comparison. The derivative is torch's ``lu_unpack_backward``:
the strictly lower part of ``L``'s gradient and the upper part of ``U``'s, placed in an ``m x n``
gradient of ``LU``; ``P`` is not differentiable (as torch's).
"""

from __future__ import annotations

import torch

from ..oplayer import checks as E
from ..oplayer import defop, table
from .kernels import _perm_from_pivots

_RT = torch.return_types
_TORCH_ERRORS = (RuntimeError, TypeError, ValueError, IndexError)


def _factors(LU: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``L (*, m, k)`` unit lower and ``U (*, k, n)`` upper of the packed ``LU``."""
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    L = LU[..., :, :k].tril(-1) + torch.eye(m, k, dtype=LU.dtype, device=LU.device)
    return L, LU[..., :k, :].triu()


def _permutation(LU: torch.Tensor, pivots: torch.Tensor) -> torch.Tensor:
    """``P (*, m, m)`` with ``A = P L U``: ``P[i, j] = 1`` where ``perm[j] == i``."""
    m = LU.shape[-2]
    batch = torch.broadcast_shapes(LU.shape[:-2], pivots.shape[:-1])
    perm = _perm_from_pivots(pivots.expand(*batch, pivots.shape[-1]), m)
    return (perm[..., None, :] == torch.arange(m, device=LU.device)[:, None]).to(LU.dtype)


def _impl(LU: torch.Tensor, pivots: torch.Tensor, unpack_data: bool,
          unpack_pivots: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    empty = LU.new_empty(0)
    P = _permutation(LU, pivots).contiguous() if unpack_pivots else empty
    if not unpack_data:
        return P, empty.clone(), empty.clone()
    L, U = _factors(LU)
    return P, L.contiguous(), U.contiguous()


def _fake(LU, pivots, unpack_data, unpack_pivots):
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    batch = torch.broadcast_shapes(LU.shape[:-2], pivots.shape[:-1])
    P = LU.new_empty((*batch, m, m)) if unpack_pivots else LU.new_empty(0)
    if not unpack_data:
        return P, LU.new_empty(0), LU.new_empty(0)
    return P, LU.new_empty((*LU.shape[:-1], k)), LU.new_empty((*LU.shape[:-2], k, n))


def _setup(ctx, inputs, output) -> None:
    LU, _, unpack_data, _ = inputs
    ctx.shape = LU.shape
    ctx.unpack_data = unpack_data


def _place(gL: torch.Tensor | None, gU: torch.Tensor | None, m: int, n: int) -> torch.Tensor | None:
    """torch's ``lu_unpack_backward``: ``tril(gL, -1)`` and ``triu(gU)`` in an ``m x n`` gradient."""
    k = min(m, n)
    g = None
    if gL is not None:
        g = torch.nn.functional.pad(gL.tril(-1), (0, n - k))
    if gU is not None:
        t = torch.nn.functional.pad(gU.triu(), (0, 0, 0, m - k))
        g = t if g is None else g + t
    return g


def _backward(ctx, gP, gL, gU):
    if not ctx.unpack_data:
        return None, None, None, None
    m, n = ctx.shape[-2], ctx.shape[-1]
    return _place(gL, gU, m, n), None, None, None


def _jvp(inputs, outputs, tangents):
    LU, _, unpack_data, _ = inputs
    P, L, U = outputs
    dLU = tangents[0]
    if dLU is None or not unpack_data:
        return torch.zeros_like(P), torch.zeros_like(L), torch.zeros_like(U)
    k = min(LU.shape[-2], LU.shape[-1])
    return torch.zeros_like(P), dLU[..., :, :k].tril(-1), dLU[..., :k, :].triu()


_lu_unpack_op = defop("lu_unpack", impl=_impl, fake=_fake, setup=_setup, backward=_backward, jvp=_jvp, ranks=(2, 1))


def lu_unpack(LU_data: torch.Tensor, LU_pivots: torch.Tensor, unpack_data: bool = True,
              unpack_pivots: bool = True, *, out=None):
    r"""``P``, ``L``, ``U`` with ``A = P L U`` from :func:`lu_factor`'s output, like :func:`torch.lu_unpack`.

    Parameters
    ----------
    LU_data : torch.Tensor
        ``(*, m, n)`` packed factors.
    LU_pivots : torch.Tensor
        ``(*, k)`` int32, ``k = min(m, n)``, 1-based; the batch broadcasts with ``LU_data``'s (as
        torch). Pivots must come from an LU factorization (values in ``[1, m]``): they are read on
        the device only, never checked on the host.
    unpack_data : bool
        Return ``L`` and ``U`` (else both are empty).
    unpack_pivots : bool
        Return ``P`` (else it is empty).
    out : tuple of torch.Tensor, optional
        ``(P, L, U)``.

    Returns
    -------
    torch.return_types.lu_unpack
        ``P (*, m, m)`` (``LU_data``'s dtype), ``L (*, m, k)``, ``U (*, k, n)``. ``L`` and ``U``
        are differentiable (torch's formula), ``P`` is not.

    Examples
    --------
    >>> A = torch.randn(4, 3)
    >>> P, L, U = lu_unpack(*torch.linalg.lu_factor(A))
    >>> torch.allclose(P @ L @ U, A, atol=1e-5)
    True
    """
    if out is None and table.torch_first("lu_unpack", LU_data):
        try:
            return torch.lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots)
        except _TORCH_ERRORS:  # bad input: the checks below raise mpslinalg's error for it
            pass
    op = "torch.lu_unpack"
    E.check_matrix(op, "LU_data", LU_data)
    E.check_tensor(op, "LU_pivots", LU_pivots)
    E.check_bool(op, "unpack_data", unpack_data)
    E.check_bool(op, "unpack_pivots", unpack_pivots)
    if LU_pivots.dtype != torch.int32:
        raise E.DTypeError(f"{op}: LU_pivots is expected to be a tensor of torch.int32 dtype, got "
                           f"{LU_pivots.dtype}. Note: this function is intended to be used with the output "
                           "produced by torch.linalg.lu_factor")
    k = min(LU_data.shape[-2], LU_data.shape[-1])
    if LU_pivots.ndim < 1 or LU_pivots.shape[-1] != k:
        raise E.ShapeError(f"{op}: expected LU_pivots of shape (*, {k}) (k = min(m, n) of LU_data "
                           f"{tuple(LU_data.shape)}), got {tuple(LU_pivots.shape)}")
    if LU_pivots.device != LU_data.device:
        raise E.DeviceError(f"{op}: expected all tensors on one device, but LU_data is on {LU_data.device} "
                            f"and LU_pivots is on {LU_pivots.device}")
    try:
        torch.broadcast_shapes(LU_data.shape[:-2], LU_pivots.shape[:-1])
    except RuntimeError:
        raise E.ShapeError(f"{op}: the batch dimensions of LU_data {tuple(LU_data.shape)} and LU_pivots "
                           f"{tuple(LU_pivots.shape)} do not broadcast") from None
    if table.torch_is_faster("lu_unpack", LU_data):
        res = torch.lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots)
    else:
        P, L, U = _lu_unpack_op(LU_data, LU_pivots, unpack_data, unpack_pivots)
        res = (P.detach(), L, U)
    return E.store(op, out, tuple(res), LU_data, kind=_RT.lu_unpack)
