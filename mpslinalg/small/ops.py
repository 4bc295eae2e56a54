"""The small family's op declarations (internal: :func:`mpslinalg.inv`, :func:`mpslinalg.det`, ...
route ``n <= 4`` here after their checks) and the cofactor adjugate that gives det's exact gradient."""

from __future__ import annotations

import torch

from ..oplayer import checks as E
from ..oplayer import defop
from ..oplayer import derivatives as D
from .program import MAX_N, _det_impl, _inv_impl, _real_dtype, _slogdet_impl, _solve_impl

__all__ = ["adjugate", "det_op", "inv_ex_op", "slogdet_op", "solve_ex_op"]


# ---------------------------------------------------------------------------------------------
# Op declarations (the implementation behind mpslinalg.inv/inv_ex/det/slogdet/solve/solve_ex for
# n <= 4: those public ops check the inputs once and route here; derivatives are the shared
# formulas of mpslinalg.oplayer.derivatives, det's from the cofactor adjugate)
# ---------------------------------------------------------------------------------------------


def _inv_ex(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _inv_impl(A)


#: ``A -> (A⁻¹, info)`` for ``n <= 4`` (no checks: the public ``inv``/``inv_ex`` check).
inv_ex_op = defop("small_inv_ex", impl=_inv_ex, **D.inv_rules(), ranks=(2,))


def _det(A: torch.Tensor) -> torch.Tensor:
    return _det_impl(A)


def _det_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _det_backward(ctx, g):
    # d det = tr(adj(A) dA): grad = g * adj(A)^H (= g conj(det) A^{-H}), exact for singular A too,
    # and a polynomial in A, so differentiable to any order
    (A,) = ctx.saved_tensors
    return g[..., None, None] * adjugate(A).mH


def _det_jvp(inputs, outputs, tangents):
    (A,), (dA,) = inputs, tangents
    return ((adjugate(A) * D.or_zeros(dA, A).mT).sum((-2, -1)),)


#: ``A -> det(A)`` for ``n <= 4``.
det_op = defop("small_det", impl=_det, shape=lambda A: ((), A.dtype), setup=_det_setup,
               backward=_det_backward, jvp=_det_jvp, ranks=(2,))


def _slogdet(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _slogdet_impl(A)


def _slogdet_shape(A):
    return [((), A.dtype), ((), _real_dtype(A.dtype))]


def _slogdet_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], output[0])


def _slogdet_backward(ctx, gsign, glogabs):
    A, sign = ctx.saved_tensors
    g = D.slogdet_cotangent(A, sign, gsign, glogabs)
    return g[..., None, None] * inv_ex_op(A)[0].mH


def _slogdet_jvp(inputs, outputs, tangents):
    (A,), (sign, logabs), (dA,) = inputs, outputs, tangents
    t = (inv_ex_op(A)[0] * D.or_zeros(dA, A).mT).sum((-2, -1))  # tr(A⁻¹ dA)
    return D.slogdet_jvp(t, sign, logabs, A.is_complex())


#: ``A -> (sign, logabsdet)`` for ``n <= 4``.
slogdet_op = defop("small_slogdet", impl=_slogdet, shape=_slogdet_shape, setup=_slogdet_setup,
                   backward=_slogdet_backward, jvp=_slogdet_jvp, ranks=(2,))


def _solve_ex(A: torch.Tensor, B: torch.Tensor, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return _solve_impl(A, B, left)


#: ``(A, B, left) -> (X, info)`` for ``n <= 4``, ``B`` a matrix (``info`` of ``A``'s batch).
solve_ex_op = defop("small_solve_ex", impl=_solve_ex,
                    **D.solve_rules(lambda A, B, left: solve_ex_op(A, B, left)[0]), ranks=(2, 2))


# ---------------------------------------------------------------------------------------------
# Adjugate by cofactors (polynomial in A: exact gradient of det for singular matrices too)
# ---------------------------------------------------------------------------------------------


def _det_poly(m: torch.Tensor) -> torch.Tensor:
    """Determinant of (..., k, k), k <= 3, by its polynomial (differentiable to any order)."""
    k = m.shape[-1]
    if k == 0:
        return torch.ones(m.shape[:-2], dtype=m.dtype, device=m.device)
    if k == 1:
        return m[..., 0, 0]
    if k == 2:
        return m[..., 0, 0] * m[..., 1, 1] - m[..., 0, 1] * m[..., 1, 0]
    a = m[..., 0, :]
    return (a[..., 0] * (m[..., 1, 1] * m[..., 2, 2] - m[..., 1, 2] * m[..., 2, 1])
            - a[..., 1] * (m[..., 1, 0] * m[..., 2, 2] - m[..., 1, 2] * m[..., 2, 0])
            + a[..., 2] * (m[..., 1, 0] * m[..., 2, 1] - m[..., 1, 1] * m[..., 2, 0]))


def adjugate(A: torch.Tensor) -> torch.Tensor:
    """The adjugate ``adj(A)`` (``adj(A) A = det(A) I``) of (..., n, n) with n <= 4, by cofactors.

    Parameters
    ----------
    A : torch.Tensor
        Shape ``(*, n, n)``, ``n <= 4``, any floating/complex dtype.

    Returns
    -------
    torch.Tensor
        Same shape and dtype; ``adj(A)[j, i] = (-1)^(i+j) det(A without row i and column j)``.
        Differentiable to any order (a polynomial in ``A``); defined for singular ``A``.
    """
    n = A.shape[-1]
    if n > MAX_N:
        raise E.ShapeError(f"adjugate: n <= {MAX_N} expected, got shape {tuple(A.shape)}")
    if n == 0:
        return A.clone()
    if n == 1:
        return torch.ones_like(A)
    idx = [[j for j in range(n) if j != i] for i in range(n)]
    cof_rows = []
    for i in range(n):
        row = []
        for j in range(n):
            minor = A[..., idx[i], :][..., :, idx[j]]
            d = _det_poly(minor)
            row.append(d if (i + j) % 2 == 0 else -d)
        cof_rows.append(torch.stack(row, dim=-1))
    cof = torch.stack(cof_rows, dim=-2)
    return cof.mT
