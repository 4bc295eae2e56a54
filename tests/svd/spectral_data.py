"""Test matrices with prescribed singular values for the ops built on the SVD (pinv, lstsq, ...)."""

from __future__ import annotations

import torch


def matrix(shape, dtype, rank=None, cond=10.0, seed=0):
    """``(*, m, n)`` with prescribed singular values ``1 … 1/cond`` (``rank`` of them nonzero),
    built in float64 then rounded to ``dtype``."""
    g = torch.Generator().manual_seed(seed)
    *batch, m, n = shape
    k = min(m, n)
    r = k if rank is None else rank
    wide = torch.complex128 if dtype.is_complex else torch.float64

    def orth(p):
        Z = torch.randn(*batch, p, p, generator=g, dtype=torch.float64)
        if dtype.is_complex:
            Z = torch.complex(Z, torch.randn(*batch, p, p, generator=g, dtype=torch.float64))
        return torch.linalg.qr(Z)[0]

    s = torch.zeros(k, dtype=torch.float64)
    s[:r] = torch.logspace(0, -torch.log10(torch.tensor(cond)).item(), r, dtype=torch.float64)
    S = torch.zeros(m, n, dtype=torch.float64)
    S[:k, :k] = torch.diag(s)
    return (orth(m) @ S.to(wide) @ orth(n)).to(dtype)
