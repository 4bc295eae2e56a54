"""How the LU kernel tests call a factorisation kernel of ``mpslinalg.lu.kernels._MetalKernels`` and
check what it wrote (``assert_panel``, ``assert_nans_match_torch``)."""

from __future__ import annotations

import torch

from reference import lapack, metrics


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


def assert_nans_match_torch(n: int, dtype: torch.dtype, g: torch.Generator, setups) -> None:
    """For each setup (a list of ``(i, j, value)``) planted in a fresh Gaussian ``n x n`` matrix from
    ``g``: the public ``lu_factor_ex`` on the emulator backend gives exactly the pivots and the NaN
    pattern of torch's CPU LAPACK, and ``info`` 0 (discrete facts: no tolerance)."""
    import mpslinalg

    for setup in setups:
        A = torch.randn(n, n, generator=g, dtype=dtype)
        for i, j, v in setup:
            A[i, j] = v
        LUt, pivt, _ = torch.linalg.lu_factor_ex(A)
        with mpslinalg.use_backend("emulator"):
            LU, piv, info = mpslinalg.lu_factor_ex(A)
        assert torch.equal(piv, pivt), setup
        assert torch.equal(LU.isnan(), LUt.isnan()), setup
        assert int(info) == 0, setup


def assert_panel(A, LU, piv, info, o, w):
    """A panel factored at column offset ``o``, width ``w``: LAPACK's pivots, the xGET01 ratio below
    metrics.PASS_RATIO (30), everything outside the panel's rows and columns untouched, info 0 (batch of 2)."""
    M = A.shape[-2]
    kl = min(M - o, w)
    panel = A[:, o:, o:o + w]
    assert torch.equal(piv[:, o:o + kl] - o, lapack.getrf_pivots(panel))
    assert float(metrics.lu_factor_ratio(panel, LU[:, o:, o:o + w], piv[:, o:o + kl] - o).max()) < metrics.PASS_RATIO
    assert torch.equal(LU[:, :, :o], A[:, :, :o])
    assert torch.equal(LU[:, :, o + w:], A[:, :, o + w:])
    assert torch.equal(LU[:, :o, :], A[:, :o, :])
    assert torch.equal(info, torch.zeros(2, dtype=torch.int32))
