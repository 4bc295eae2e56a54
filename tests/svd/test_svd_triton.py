"""The SVD family's Triton kernels (``mpslinalg.svd.triton_jacobi``), through the public ops.

Four kernels serve the torch backend on CUDA: the whole SVD of ``n <= m <= 4`` float32 matrices
(complex64 ``m <= 2``) one matrix per lane, the whole SVD of float32 ``n <= m <= 32`` one matrix
per program (``svd_triton_fused``), the Jacobi iteration one matrix per lane (float32 ``n <= 8``,
complex64 ``n <= 4``) and one matrix per program (``n <= 64``) for the rest. Each is checked against the bounds of
``test_svd_accuracy.py`` (same derivations, restated):

* LAPACK ``xDRVBD`` ratios (reconstruction ``‖A − UΣVᴴ‖/(max(m,n)‖A‖u)``, ``U``/``V``
  orthogonality) below 50 (issue 12), ``S`` non-negative and non-increasing;
* ``S`` within ``30·k·u·σ₁`` of LAPACK's in float64 (Weyl: every backward-stable SVD is);
* graded ``D₁BD₂``: every ``σ_i`` within ``30·n·κ(B)·u`` *relative* of mpmath (Demmel & Veselić;
  the QR-preconditioned Jacobi is backward stable in the row/column-scaled sense);
* ``full_matrices=True`` orthonormal for zero and rank-deficient matrices, NaN/Inf → ``info = 1``,
  too few sweeps → ``info = 2``, inputs never modified, no host synchronisation.

On the CPU the kernels run in Triton's interpreter (a subprocess: ``TRITON_INTERPRET`` is read
when Triton is imported) with the C kernel switched off, so the dispatch of ``mpslinalg.svd`` is
the CUDA one; on CUDA they run compiled (marked ``cuda``). Each check also asserts that the
intended kernel ran (no silent fallback to the torch-op path).
"""

from __future__ import annotations

import contextlib
import importlib
import warnings

import pytest
import torch
from svd.harness import assert_svd_ratios, run_interpreted
from svd.sync_check import no_cuda_sync

import mpslinalg as LA
from mpslinalg.svd import cuda as svd_cuda
from reference import matrices
from reference import mp as ref_mp

svdmod = importlib.import_module("mpslinalg.svd")
RATIO = 50.0

# (m, n, dtype, kernel that serves it): wide shapes run as their transposes; "fused|lane": the fused
# kernel while svd_triton_fused.ENABLED, else the lane kernel
CASES = [
    (3, 3, torch.float32, "whole"), (4, 4, torch.float32, "whole"), (2, 4, torch.float32, "whole"),
    (3, 1, torch.float32, "whole"), (2, 2, torch.complex64, "whole"),
    (7, 3, torch.float32, "fused|lane"), (8, 9, torch.float32, "fused|lane"), (12, 10, torch.float32, "fused|tile"),
    (34, 6, torch.float32, "lane"), (2, 40, torch.float32, "lane"), (5, 4, torch.complex64, "lane"),
    (36, 10, torch.float32, "tile"), (9, 9, torch.complex64, "tile"),
]


def _u(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps / 2


def _gpu_schedule(device, dtype, n=32):
    """The fixed sweep count of GPUs (no host reads), also on the CPU."""
    return svdmod.Tuning().sweeps(torch.device("cuda"), dtype, n)


@contextlib.contextmanager
def _recording():
    """Record which Triton kernel served each call: "whole", "fused", "lane" or "tile"."""
    from mpslinalg.svd import triton_fused as sf
    from mpslinalg.svd import triton_jacobi as st

    seen: list[str] = []
    real_whole, real_jacobi, real_fused = st.svd_tall, st.jacobi, sf.svd_tall

    def whole(A, *args):
        seen.append("whole")
        return real_whole(A, *args)

    def fused(A, *args):
        seen.append("fused")
        return real_fused(A, *args)

    def jacobi(X, *args):
        seen.append("lane" if X.shape[-1] <= st.LANE_MAX[X.dtype] else "tile")
        return real_jacobi(X, *args)

    st.svd_tall, st.jacobi, sf.svd_tall = whole, jacobi, fused
    try:
        yield seen
    finally:
        st.svd_tall, st.jacobi, sf.svd_tall = real_whole, real_jacobi, real_fused


def _check_ratios(A, U, S, Vh, what):
    assert_svd_ratios(A, U, S, Vh, RATIO, what)


def _accuracy(device: str, cases=CASES) -> None:
    """LAPACK ratios, S against float64 LAPACK and the torch-op path, inputs unchanged."""
    from mpslinalg.svd import triton_fused as sf

    for m, n, dtype, kind in cases:
        kind = kind.split("|")[0 if sf.ENABLED else -1]
        A = matrices.with_condition(min(m, n), 1e3, m=max(m, n), batch=(3,), dtype=dtype, seed=m * 7 + n)
        A = (A if m >= n else A.mH.contiguous()).to(device)
        A0 = A.clone()
        for full in (True, False):
            with _recording() as seen:
                U, S, Vh, info = LA.svd_ex(A, full_matrices=full)
            assert seen == [kind], (m, n, dtype, seen)  # the intended kernel, no fallback
            assert torch.equal(A, A0) and info.tolist() == [0, 0, 0], (m, n, dtype)
            _check_ratios(A.cpu(), U.cpu(), S.cpu(), Vh.cpu(), (m, n, dtype, full))
        k = min(m, n)
        tol = 30 * k * _u(torch.float32)
        S_ref = torch.linalg.svdvals(A.cpu().to(torch.complex128 if dtype.is_complex else torch.float64))
        assert float((S.cpu().double() - S_ref).abs().max()) <= tol * float(S_ref.max())
        with _recording() as seen:
            Sv = LA.svdvals(A)  # the no-vector variants of the kernels
        assert seen == [kind] and float((Sv - S).abs().max()) <= tol * float(S_ref.max())
        svdmod.TUNING.triton = False
        try:  # the same algorithm on the CPU: the torch-op Jacobi (interpreter runs) or the C kernel
            S_cpu = LA.svdvals(A.cpu())
        finally:
            svdmod.TUNING.triton = True
        assert float((S.cpu() - S_cpu).abs().max()) <= tol * float(S_ref.max())


def _graded_relative(device: str) -> None:
    """Every singular value of two-sided graded float32 matrices to 30·n·κ(B)·u relative (whole-SVD
    kernel at 3x3 and 4x4, fused kernel at 8x8)."""
    from svd.test_svd_accuracy import _graded

    for n in (3, 4, 8):
        A, kappa_B = _graded(n, n, 7.0, "both", torch.float32, seed=n + 1)
        S_ref = ref_mp.svdvals(A, dps=30)
        assert float((S_ref[:, -1] / S_ref[:, 0]).min()) < 1e-5  # really graded
        S = LA.svdvals(A.to(device)).cpu().double()
        rel = ((S - S_ref).abs() / S_ref).amax(-1)
        bound = 30 * n * kappa_B * _u(torch.float32)
        assert bool((rel <= bound).all()), (n, float((rel / bound).max()))


def _special(device: str) -> None:
    """Zero, rank-deficient and scaled matrices, non-finite input, the sweep bound."""
    for m, n, dtype in ((3, 3, torch.float32), (4, 2, torch.float32), (2, 2, torch.complex64),
                        (6, 6, torch.float32), (5, 4, torch.complex64), (10, 10, torch.float32)):
        Z = torch.zeros(2, m, n, dtype=dtype, device=device)
        R = matrices.rank_deficient(m, n, 1, batch=(2,), dtype=dtype, seed=m * n).to(device)
        C = torch.zeros(2, m, n, dtype=dtype, device=device)
        C[:, :, 0] = 1.0  # rank one with exactly zero columns
        for X in (Z, R, C, R * 1e30, R * 1e-30):
            U, S, Vh, info = LA.svd_ex(X, full_matrices=True)
            assert info.tolist() == [0, 0] and bool(torch.isfinite(S).all()), (m, n, dtype)
            _check_ratios(X.cpu(), U.cpu(), S.cpu(), Vh.cpu(), (m, n, dtype))
        assert bool((LA.svdvals(Z) == 0).all())
        S = LA.svdvals(C).cpu()
        assert bool((S[:, 1:] == 0).all()) and float((S[:, 0] - m ** 0.5).abs().max()) <= 4 * m * _u(torch.float32)
        B = torch.randn(3, m, n, dtype=dtype, device=device)
        B[1, 0, -1] = float("nan")
        B[2, -1, 0] = float("inf")
        U, S, Vh, info = LA.svd_ex(B)
        assert info.tolist() == [0, 1, 1]
        assert bool(torch.isnan(S[1:]).all() and torch.isnan(U[1:]).all() and torch.isnan(Vh[1:]).all())
        assert bool(torch.isfinite(S[0]).all())
    saved = svdmod.TUNING.triton_sweeps
    svdmod.TUNING.triton_sweeps = 1
    try:
        for shape in ((2, 3, 3), (2, 8, 8), (2, 36, 12)):  # whole, fused, tile kernels
            A = torch.randn(shape, generator=torch.Generator().manual_seed(3)).to(device)
            U, S, Vh, info = LA.svd_ex(A)
            assert info.tolist() == [2, 2] and bool(torch.isfinite(S).all()), shape
    finally:
        svdmod.TUNING.triton_sweeps = saved


def _check(device: str) -> None:
    _accuracy(device)
    _graded_relative(device)
    _special(device)


def _no_host_sync_cpu() -> None:
    """The Triton paths of ``svd_ex`` read nothing on the host (GPU schedule, CPU interpreter)."""
    from svd.sync_check import no_host_sync

    svdmod.TUNING.sweeps = _gpu_schedule
    for shape, dtype in (((4, 3, 3), torch.float32), ((4, 7, 3), torch.float32), ((2, 9, 8), torch.float32),
                         ((2, 5, 4), torch.complex64), ((2, 12, 10), torch.float32)):
        A = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(1))
        with no_host_sync():
            LA.svd_ex(A)
            svdmod.svd_impl(A, False, False)


def _fallback_warns() -> None:
    """A Triton kernel that fails to build switches the Triton path off with one warning; the torch
    ops then give the same results."""
    from mpslinalg.svd import triton_jacobi as st

    A = torch.randn(2, 3, 3, generator=torch.Generator().manual_seed(5))
    good = LA.svdvals(A)
    real = st.svd_tall

    def broken(*args):
        raise RuntimeError("planted build failure")

    st.svd_tall = broken
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            S = LA.svdvals(A)
        assert any("planted build failure" in str(w.message) for w in caught)
        assert svd_cuda._triton_state["ok"] is False
        assert float((S - good).abs().max()) <= 30 * 3 * _u(torch.float32) * float(good.max())
    finally:
        st.svd_tall = real
        svd_cuda._triton_state.clear()


def _registers_variant(device: str) -> None:
    """The register-resident tile kernel (``TILE_KERNEL = "registers"``) gives the memory one's
    results to rounding: ``X0 V = X`` to ``30 n u ‖X0‖``, ``V`` orthonormal to ``30 n u``, the same
    column norms."""
    import math

    from mpslinalg.svd import triton_jacobi as st

    u = _u(torch.float32)
    for n, dtype in ((10, torch.float32), (6, torch.complex64), (2, torch.float32), (4, torch.complex64),
                     (14, torch.float32)):
        X0 = torch.randn(3, n, n, dtype=dtype, generator=torch.Generator().manual_seed(n)).to(device)
        eye = torch.eye(n, dtype=dtype, device=device).expand(3, n, n)
        out = {}
        for kernel in ("memory", "registers"):
            saved = st.TILE_KERNEL, dict(st.LANE_MAX)
            st.TILE_KERNEL, st.LANE_MAX = kernel, {torch.float32: 0, torch.complex64: 0}
            try:
                out[kernel] = st.jacobi(X0.clone(), eye.contiguous(), 30, math.sqrt(n) * u, 2 * n * u)
            finally:
                st.TILE_KERNEL, st.LANE_MAX = saved
        X, V, rot = out["registers"]
        scale = float(X0.abs().max()) * n
        assert not bool(rot.any())
        assert float((X0 @ V - X).abs().max()) <= 30 * n * u * scale
        assert float((V.mH @ V - torch.eye(n, device=device)).abs().max()) <= 30 * n * u
        norms = [torch.linalg.vector_norm(out[k][0], dim=-2).sort(-1)[0] for k in out]
        assert float((norms[0] - norms[1]).abs().max()) <= 30 * n * u * scale


def _interpreted(code: str) -> None:
    run_interpreted("svd.test_svd_triton", code)


def test_triton_accuracy_interpreted():
    # complex64 9x9 (the tile kernel at an odd order: padded, the pairs ordering) as 5x5, the same route
    # (12 s -> 3 s in the interpreter); the CUDA test keeps 9x9
    _interpreted("import torch\n"
                 "t._accuracy('cpu', [c if c[:3] != (9, 9, torch.complex64) else (5, 5, *c[2:]) for c in t.CASES])")


def test_triton_graded_and_special_interpreted():
    _interpreted("t._graded_relative('cpu'); t._special('cpu')")


def test_triton_no_host_sync_and_fallback_interpreted():
    _interpreted("t._no_host_sync_cpu(); t._fallback_warns(); t._registers_variant('cpu')")


def test_sources_reject_bad_orders():
    pytest.importorskip("triton")
    from mpslinalg.svd import triton_jacobi as st

    with pytest.raises(ValueError, match="even"):
        st.lane_source(3, False, True)
    with pytest.raises(ValueError, match="n <= m"):
        st.fused_source(2, 3, False, True, False)
    with pytest.raises(ValueError, match="n even"):
        st.jacobi(torch.zeros(1, 5, 5), None, 1, 1e-7, 1e-6)
    assert not st.fused_fits(3, 3, torch.complex64) and st.fused_fits(3, 3, torch.float32)


@pytest.mark.cuda
def test_triton_cuda():
    _check("cuda")
    _registers_variant("cuda")


@pytest.mark.cuda
def test_triton_cuda_no_host_sync():
    """``svd_ex``, ``svdvals``' no-vector path and ``pinv`` under CUDA's sync debug mode, one shape per
    Triton kernel (compiled first: a first launch may build)."""
    calls = []
    for shape, dtype in (((4096, 3, 3), torch.float32), ((512, 7, 3), torch.float32),
                         ((512, 8, 9), torch.float32), ((64, 32, 32), torch.float32),
                         ((16, 64, 64), torch.complex64), ((64, 2, 2), torch.complex64)):
        A = torch.randn(shape, dtype=dtype, device="cuda")
        calls += [lambda A=A: LA.svd_ex(A), lambda A=A: svdmod.svd_impl(A, False, False),
                  lambda A=A: LA.pinv(A)]
    no_cuda_sync(calls)
    assert svd_cuda._triton_state.get("ok") is True, svd_cuda._triton_state
