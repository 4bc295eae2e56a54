"""How the LU kernel tests call a factorisation kernel of ``mpslinalg.lu.kernels._MetalKernels``."""

from __future__ import annotations

import torch


def factor(kern, kernel: str, A: torch.Tensor, panel_cols: int | None = None):
    """Factor a copy of the batch ``A`` (``(b, m, n)``) in place by ``lu_small`` (``kernel ==
    "small"``) or by ``lu_panel`` on its first ``panel_cols`` columns (``"panel"``).

    Returns
    -------
    LU, piv, info
        The factored copy, int32 ``(b, min(m, n))`` pivots (1-based; a panel fills its own
        columns') and int32 ``(b,)`` info, all allocated zero before the launch.
    """
    b, m, n = A.shape
    LU = A.clone()
    piv = torch.zeros(b, min(m, n), dtype=torch.int32)
    info = torch.zeros(b, dtype=torch.int32)
    if kernel == "small":
        kern.small(LU, piv, info)
    else:
        kern.panel(LU, piv, info, 0, panel_cols)
    return LU, piv, info
