"""The one-launch float32 SVD of ``n <= m <= 32`` matrices (``mpslinalg.svd.triton_fused``),
through the public ops, with the bounds of ``test_svd_triton.py`` / ``test_svd_accuracy.py``:

* LAPACK ``xDRVBD`` ratios (``‖A − UΣVᵀ‖/(max(m,n)‖A‖u)``, ``U``/``V`` orthogonality, full and
  reduced) below 50 (issue 12), ``S`` non-negative and non-increasing;
* ``S`` within ``30·k·u·σ₁`` of float64 LAPACK (Weyl: every backward-stable SVD is), and so within
  ``2·30·k·u·σ₁`` of the composed path (QR + Jacobi kernel + torch ops, the same algorithm);
* graded ``D₁BD₂``: every ``σ_i`` within ``30·n·κ(B)·u`` *relative* of mpmath (Demmel & Veselić);
* zero / rank-deficient matrices: exactly zero ``σ`` where the matrix is exactly zero, ``U``/``V``
  orthonormal (the in-kernel completion), 1e±30 and 2^-110 scales, NaN/Inf → ``info = 1`` for
  that matrix only (several matrices share a program), one sweep → ``info = 2``;
* ``pinv`` through the fused SVD: the Moore–Penrose ratios of ``test_pinv.py`` below 30;
* several matrices per program give the one-per-program results to rounding; no host sync.

On the CPU the kernel runs in Triton's interpreter (a subprocess, ``svd.harness.run_interpreted``);
on CUDA compiled (marked ``cuda``). Every check asserts that the fused kernel served.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys

import pytest
import torch
from svd.harness import assert_svd_ratios, run_interpreted
from svd.sync_check import no_cuda_sync

import mpslinalg as LA
from reference import matrices
from reference import mp as ref_mp

svdmod = importlib.import_module("mpslinalg.svd")
HERE = os.path.dirname(os.path.abspath(__file__))
RATIO = 50.0
U32 = 2.0 ** -24

# (batch, m, n): wide shapes run as their transposes; (17, 12) and (9, 8) embed Vj in a taller tile
SHAPES = [(3, 9, 8), (3, 8, 9), (2, 5, 1), (2, 7, 5), (2, 17, 12), (2, 16, 16), (1, 32, 32), (2, 6, 31)]


@contextlib.contextmanager
def _served():
    """Dispatch to the fused kernel (``ENABLED``) and count its launches (so a silent fallback fails
    the test)."""
    from mpslinalg.svd import triton_fused as sf

    calls: list[tuple] = []
    real, enabled = sf.svd_tall, sf.ENABLED

    def spy(A, *args):
        calls.append(tuple(A.shape))
        return real(A, *args)

    sf.svd_tall, sf.ENABLED = spy, True
    try:
        yield calls
    finally:
        sf.svd_tall, sf.ENABLED = real, enabled


@contextlib.contextmanager
def _composed():
    from mpslinalg.svd import triton_fused as sf

    saved, sf.ENABLED = sf.ENABLED, False
    try:
        yield
    finally:
        sf.ENABLED = saved


def _pinv(A: torch.Tensor) -> torch.Tensor:
    """``pinv(A)`` by the CUDA route with torch's default cut: the public op on CUDA; on the CPU
    (whose front door takes LAPACK) the same route, ``spectral._pinv_svd`` on ``svd_impl``, called
    directly so that the interpreter runs what the GPU runs."""
    if A.device.type == "cuda":
        return LA.pinv(A)
    spectral = importlib.import_module("mpslinalg.svd.spectral")

    batch = A.shape[:-2]
    rtol = torch.full(batch, torch.finfo(A.dtype).eps * max(A.shape[-2:]), dtype=A.dtype)
    saved = spectral._svd_lapack
    spectral._svd_lapack = lambda X: svdmod.svd_impl(X, False, True)  # svd_parts' CPU branch
    try:
        return spectral._pinv_svd(A, torch.zeros(batch, dtype=A.dtype), rtol)
    finally:
        spectral._svd_lapack = saved


def _check_ratios(A, U, S, Vh, what):
    assert_svd_ratios(A, U, S, Vh, RATIO, what)


def _accuracy(device: str, shapes=SHAPES) -> None:
    for b, m, n in shapes:
        A = matrices.with_condition(min(m, n), 1e3, m=max(m, n), batch=(b,), dtype=torch.float32, seed=m * 7 + n)
        A = (A if m >= n else A.mH.contiguous()).to(device)
        A0 = A.clone()
        for full in (True, False):
            with _served() as calls:
                U, S, Vh, info = LA.svd_ex(A, full_matrices=full)
            assert len(calls) == 1 and torch.equal(A, A0) and info.tolist() == [0] * b, (m, n, calls)
            _check_ratios(A.cpu(), U.cpu(), S.cpu(), Vh.cpu(), (m, n, full))
        tol = 30 * min(m, n) * U32 * float(S.max())
        S_ref = torch.linalg.svdvals(A.cpu().double())
        assert float((S.cpu().double() - S_ref).abs().max()) <= tol, (m, n)
        with _served() as calls:
            Sv = LA.svdvals(A)  # the no-vector variant
        assert len(calls) == 1 and float((Sv - S).abs().max()) <= 2 * tol
        with _served() as calls, _composed():
            S_comp = LA.svdvals(A)
        assert not calls and float((S_comp - S).abs().max()) <= 2 * tol, (m, n)


def _graded_relative(device: str) -> None:
    """Two-sided graded float32 matrices: every σ to 30·n·κ(B)·u relative (mpmath reference)."""
    from svd.test_svd_accuracy import _graded

    for n in (8, 16):
        A, kappa_B = _graded(n, n, 7.0, "both", torch.float32, seed=n + 3)
        S_ref = ref_mp.svdvals(A, dps=30)
        assert float((S_ref[:, -1] / S_ref[:, 0]).min()) < 1e-5  # really graded
        with _served() as calls:
            S = LA.svdvals(A.to(device)).cpu().double()
        assert len(calls) == 1
        rel = ((S - S_ref).abs() / S_ref).amax(-1)
        bound = 30 * n * kappa_B * U32
        assert bool((rel <= bound).all()), (n, float((rel / bound).max()))


def _special(device: str, shapes=((9, 8), (6, 6), (12, 5))) -> None:
    """Zero, rank-deficient, scaled and non-finite matrices; the sweep bound. Default shapes: square,
    tall, and Vj embedded in a taller tile (the CUDA test adds 16x16, a tile without padding, which
    ``_accuracy`` also checks; the interpreter takes ~14 s for it here)."""
    for m, n in shapes:
        Z = torch.zeros(2, m, n, device=device)
        R = matrices.rank_deficient(m, n, 1, batch=(2,), dtype=torch.float32, seed=m * n).to(device)
        C = torch.zeros(2, m, n, device=device)
        C[:, :, 0] = 1.0  # rank one with exactly zero columns
        # 2^-110: max |a| below 2^-100, the kernel's pre-scaling by 2^64 (smaller scales make the
        # entries themselves subnormal: u·‖A‖ below their spacing, no ratio can be met)
        for X in (Z, R, C, R * 1e30, R * 1e-30, R * 2.0 ** -110):
            with _served() as calls:
                U, S, Vh, info = LA.svd_ex(X, full_matrices=True)
            assert len(calls) == 1 and info.tolist() == [0, 0] and bool(torch.isfinite(S).all()), (m, n)
            _check_ratios(X.cpu(), U.cpu(), S.cpu(), Vh.cpu(), (m, n))
        with _served() as calls:
            assert bool((LA.svdvals(Z) == 0).all())
            S = LA.svdvals(C).cpu()
        assert len(calls) == 2
        assert bool((S[:, 1:] == 0).all()) and float((S[:, 0] - m ** 0.5).abs().max()) <= 4 * m * U32
        B = torch.randn(5, m, n, generator=torch.Generator().manual_seed(m)).to(device)
        B[1, 0, -1] = float("nan")
        B[3, -1, 0] = float("inf")
        with _served() as calls:
            U, S, Vh, info = LA.svd_ex(B)
        assert len(calls) == 1
        assert info.tolist() == [0, 1, 0, 1, 0], (m, n)
        for k in (1, 3):
            assert bool(torch.isnan(S[k]).all() and torch.isnan(U[k]).all() and torch.isnan(Vh[k]).all())
        good = [0, 2, 4]
        _check_ratios(B[good].cpu(), U[good].cpu(), S[good].cpu(), Vh[good].cpu(), (m, n, "beside NaN"))
    saved = svdmod.TUNING.triton_sweeps
    svdmod.TUNING.triton_sweeps = 1
    try:
        A = torch.randn(2, 10, 8, generator=torch.Generator().manual_seed(3)).to(device)
        with _served() as calls:
            U, S, Vh, info = LA.svd_ex(A)
        assert len(calls) == 1 and info.tolist() == [2, 2] and bool(torch.isfinite(S).all())
    finally:
        svdmod.TUNING.triton_sweeps = saved


def _packing(device: str) -> None:
    """``MB`` matrices per program (a partly filled last program) give the ``MB = 1`` results to
    rounding: ``S`` within ``2·30·n·u·σ₁``, the same LAPACK ratios bound."""
    from mpslinalg.svd import triton_fused as sf

    A = torch.randn(7, 9, 8, generator=torch.Generator().manual_seed(11)).to(device)
    out = {}
    saved = dict(sf.CONFIG)
    try:
        for mb, warps in ((1, 1), (4, 2), (2, 1)):
            sf.CONFIG[8] = (mb, warps)
            out[mb] = sf.svd_tall(A, True, True, 30)
    finally:
        sf.CONFIG.clear()
        sf.CONFIG.update(saved)
    for mb in (2, 4):
        U, S, V, info = out[mb]
        assert info.tolist() == [0] * 7
        assert float((S - out[1][1]).abs().max()) <= 2 * 30 * 8 * U32 * float(S.max())
        _check_ratios(A.cpu(), U.cpu(), S.cpu(), V.mT.cpu(), ("MB", mb))


def _pinv_check(device: str) -> None:
    if HERE not in sys.path:  # test_pinv imports its neighbours by their plain names
        sys.path.insert(0, HERE)
    from svd.test_pinv import mp_ratios

    for b, m, n in ((2, 9, 8), (2, 8, 9), (2, 12, 12)):
        A = matrices.with_condition(min(m, n), 1e2, m=max(m, n), batch=(b,), dtype=torch.float32, seed=m + n)
        A = A if m >= n else A.mH.contiguous()
        with _served() as calls:
            X = _pinv(A.to(device))
        assert len(calls) == 1
        ratios = mp_ratios(A, X.cpu())
        assert max(ratios.values()) < 30.0, (m, n, ratios)


def _no_host_sync_cpu() -> None:
    from svd.sync_check import no_host_sync

    for shape in ((3, 9, 8), (2, 8, 9), (2, 12, 12)):
        A = torch.randn(shape, generator=torch.Generator().manual_seed(1))
        with no_host_sync(), _served() as calls:
            LA.svd_ex(A)
            svdmod.svd_impl(A, False, False)
            _pinv(A)
        assert len(calls) == 3


def test_fused_accuracy_interpreted():
    run_interpreted("svd.test_svd_triton_fused", "t._accuracy('cpu')")


def test_fused_graded_special_interpreted():
    run_interpreted("svd.test_svd_triton_fused", "t._graded_relative('cpu'); t._special('cpu')")


def test_fused_packing_pinv_no_sync_interpreted():
    run_interpreted("svd.test_svd_triton_fused", "t._packing('cpu'); t._pinv_check('cpu'); t._no_host_sync_cpu()")


def test_fits_and_rejects():
    pytest.importorskip("triton")
    from mpslinalg.svd import triton_fused as sf

    assert sf.fits(32, 32, torch.float32) and sf.fits(9, 8, torch.float32)
    assert not sf.fits(33, 8, torch.float32) and not sf.fits(8, 9, torch.float32)
    assert not sf.fits(8, 8, torch.complex64) and not sf.fits(40, 33, torch.float32)
    with pytest.raises(ValueError, match="n <= m"):
        sf.svd_tall(torch.zeros(1, 4, 5), False, True, 30)


@pytest.mark.cuda
def test_fused_cuda():
    """The interpreter's checks on the compiled kernel, plus a 4096x32x32 and a 100000x8x9 batch (the
    benchmark shapes: ratios over the whole batch, info all zero)."""
    _accuracy("cuda", [(3, 9, 8), (3, 8, 9), (2, 17, 12), (2, 32, 32)])  # fewer shapes: fewer builds
    _graded_relative("cuda")
    _special("cuda", ((9, 8), (16, 16)))
    _packing("cuda")
    _pinv_check("cuda")
    for shape in ((4096, 32, 32), (100000, 8, 9)):
        A = torch.randn(shape, device="cuda", generator=torch.Generator("cuda").manual_seed(4))
        with _served() as calls:
            U, S, Vh, info = LA.svd_ex(A, full_matrices=False)
        assert len(calls) == 1 and int(info.count_nonzero()) == 0, shape
        _check_ratios(A.cpu(), U.cpu(), S.cpu(), Vh.cpu(), shape)


@pytest.mark.cuda
def test_fused_cuda_no_host_sync():
    calls = []
    for shape in ((4096, 32, 32), (512, 8, 9), (512, 17, 12)):
        A = torch.randn(shape, device="cuda")
        calls += [lambda A=A: LA.svd_ex(A), lambda A=A: svdmod.svd_impl(A, False, False), lambda A=A: LA.pinv(A)]
    with _served() as served:
        no_cuda_sync(calls)
    assert len(served) == 2 * len(calls)
