"""The one-launch Triton kernel for batches of small float32 solves (``mpslinalg.triangular.triton``).

It is blocked forward substitution (LAPACK's blocked ``trsm``: 16-row blocks, ``tl.dot`` updates in
IEEE float32, correctly rounded divisions), so it must pass LAPACK's residual test (``xTRT02``
ratio ``‖b − op(T)x‖₁ / (‖op(T)‖₁ ‖x‖₁ n u) < 30``, u = 2^-24) on Gaussian triangles with
``b = T·x`` — the hard case (κ ~ 2^n) on which one explicit 64×64 inverse fails by 100×.
The other triangle is NaN (and the diagonal too when ``unitriangular``): a single read of it would
make the ratio NaN and fail.

Run through the public function with ``TUNING.triton_max = 64``: on the CPU in Triton's
interpreter (a subprocess, since ``TRITON_INTERPRET`` must be set before Triton is imported), and
on CUDA compiled (marked ``cuda``).
"""

from __future__ import annotations

import itertools

import pytest
import torch
from helpers import run_interpreted

import mpslinalg
from mpslinalg import triangular as tri
from mpslinalg.triangular import kernels as tri_kernels
from reference import matrices, metrics

VARIANTS = list(itertools.product([False, True], repeat=3))  # (upper, left, unit)


def _check(device: str) -> None:
    """All 8 variants, (n, k) in {(1, 3), (16, 40), (45, 3), (64, 70)} (partial and full 16-row
    blocks, one and two right-hand-side tiles), broadcast batch of A, against LAPACK's
    ratio; raises AssertionError on a failure. Also checks the kernel really ran (no fallback)."""
    from mpslinalg import routing

    # our implementation at every size, as the test harness's conftest arranges (this also runs in a
    # subprocess, outside it): the routing table would send these CPU calls to torch.linalg
    with routing.ours_always():
        _check_variants(device)


def _check_variants(device: str) -> None:
    old = tri.TUNING.triton_max
    tri.TUNING.triton_max = 64
    try:
        for (upper, left, unit), (n, k) in itertools.product(VARIANTS, ((1, 3), (16, 40), (45, 3), (64, 70))):
            seed = 100 * n + k + 7 * upper + 3 * left + unit
            T = matrices.triangular(n, upper, unit, "gaussian", batch=(2, 1), dtype=torch.float32, seed=seed,
                                    fill=float("nan"))
            g = torch.Generator().manual_seed(seed + 1)
            x = torch.randn((2, 3, n, k) if left else (2, 3, k, n), generator=g, dtype=torch.float64)
            T64 = metrics.triangle(T, upper=upper, unitriangular=unit)
            B = (T64 @ x if left else x @ T64).to(torch.float32)
            X = mpslinalg.solve_triangular(T.to(device), B.to(device), upper=upper, left=left,
                                           unitriangular=unit)
            assert X.shape == B.shape and X.is_contiguous()
            ratio = float(metrics.triangular_residual_ratio(T, X.cpu(), B, upper, left, unit).max())
            assert ratio < metrics.PASS_RATIO, (upper, left, unit, n, k, ratio)
        assert tri_kernels._triton_state.get("ok") is True, tri_kernels._triton_state
    finally:
        tri.TUNING.triton_max = old


def test_triton_kernel_interpreted():
    # Where Triton is installed (it ships with CUDA builds of torch); the CUDA test below runs the
    # compiled kernel on the H200.
    run_interpreted("import tests.triangular.test_triangular_triton as t; t._check('cpu')", timeout=600)


@pytest.mark.cuda
def test_triton_kernel_cuda():
    _check("cuda")
    # no host synchronisation in the path
    A = matrices.triangular(64, False, True, "well", batch=(64,), dtype=torch.float32, seed=3).cuda()
    B = torch.randn(64, 64, 128, device="cuda")
    old = tri.TUNING.triton_max
    tri.TUNING.triton_max = 64
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        mpslinalg.solve_triangular(A, B, upper=False, unitriangular=True)
    finally:
        torch.cuda.set_sync_debug_mode(0)
        tri.TUNING.triton_max = old
