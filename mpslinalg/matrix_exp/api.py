"""The matrix exponential's public op (``torch.linalg.matrix_exp``): checks once, the table, the op."""

from __future__ import annotations

import torch

from ..oplayer import checks as E
from ..oplayer import table
from .ops import _matrix_exp


def matrix_exp(A: torch.Tensor) -> torch.Tensor:
    """The matrix exponential ``exp(A) = sum_k A^k / k!``, like :func:`torch.linalg.matrix_exp`.

    Scaling and squaring with the optimized Taylor approximants of Bader, Blanes and Casas (2019),
    degree and scaling chosen from the 1-norm (:mod:`mpslinalg.matrix_exp.algorithm`).

    Parameters
    ----------
    A : torch.Tensor
        ``(*, n, n)``: float32/complex64 on any device, float64/complex128 on CPU/CUDA.

    Returns
    -------
    torch.Tensor
        ``(*, n, n)``, same dtype. Differentiable (reverse, forward and higher order).

    Raises
    ------
    RuntimeError
        Rank below 2, non-square matrices, an unsupported dtype (torch's conditions).

    Notes
    -----
    One host read of two integers per call (the batch's approximant degree and its largest squaring
    count: the number of matrix products to issue).

    Examples
    --------
    >>> S = torch.tensor([[0.0, -1.0], [1.0, 0.0]])   # skew-symmetric: exp is a rotation
    >>> Q = matrix_exp(S)
    >>> torch.allclose(Q.mT @ Q, torch.eye(2), atol=1e-6)
    True
    """
    if table.torch_first("matrix_exp", A):  # outside the table (table.WHEN)
        try:
            return torch.linalg.matrix_exp(A)
        except (RuntimeError, TypeError, ValueError, IndexError):  # bad input: our checks say what
            pass
    E.check_matrix("linalg.matrix_exp", "A", A, square=True)
    return _matrix_exp(A)
