"""The SVD's C kernel on the CPU (mpslinalg/svd/c.py) and the torch-op path it replaces there.

Thresholds are LAPACK's (``TESTING/ctest.in``): the SVD ratios ``‖A − UΣVᴴ‖/(max(m,n)‖A‖u)``,
``‖I − UᴴU‖/(m u)``, ``‖I − VᴴV‖/(n u)`` below 30, with ``u = 2^-24`` (float32) / ``2^-53``
(float64). Singular values of column-scaled matrices: one-sided Jacobi is relatively accurate for
``A = B D`` with ``D`` diagonal, to ``c·κ(B)·u`` (Demmel & Veselić 1992); with ``B`` orthonormal to
working precision (``κ(B) = 1 + O(u)``) every ``σ_j = d_j`` to ``30·n·u`` relative.

The CPU runs the C kernel by default, so the torch-op Jacobi (the fallback without a compiler, and
the CUDA path's algorithm) is exercised here with the C route switched off: the ``torch_ops``
fixture.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest
import torch
from helpers import gaussian
from svd.harness import assert_svd_ratios

import mpslinalg as LA
from reference.metrics import unit_roundoff

svd_mod = importlib.import_module("mpslinalg.svd")
svd_c = importlib.import_module("mpslinalg.svd.c")

THRESHOLD = 30.0
HOST = [torch.float32, torch.float64, torch.complex64, torch.complex128]

pytestmark = pytest.mark.skipif(svd_c.SVD_C.compiler() is None, reason="no C compiler (clang >= 17) for the C kernel")


@pytest.fixture(params=["c", "torch-ops"])
def path(request, monkeypatch):
    """Run a test on the C kernel and on the torch-op Jacobi (C route switched off)."""
    if request.param == "torch-ops":
        paths = importlib.import_module("mpslinalg.svd.paths")
        monkeypatch.setattr(paths, "_C", paths.TorchPath(torch.empty(0)))  # the C path served by torch ops
    return request.param


def _assert_svd(A, U, S, Vh):
    assert_svd_ratios(A, U, S, Vh, THRESHOLD)


def test_the_cpu_runs_the_c_kernel(monkeypatch):
    calls = []
    real = svd_c.svd_tall
    monkeypatch.setattr(svd_c, "svd_tall", lambda *a, **k: calls.append(a[0].shape) or real(*a, **k))
    A = gaussian((4, 6, 5), torch.float32, 0)
    LA.svd(A)
    LA.svdvals(A.mT)
    assert calls == [(4, 6, 5), (4, 6, 5)]  # the wide one as its conjugate transpose


@pytest.mark.parametrize("dtype", HOST, ids=str)
@pytest.mark.parametrize("shape", [(3, 8, 8), (5, 9, 8), (4, 8, 9), (2, 40, 17), (3, 1, 1), (2, 5, 1), (2, 33, 33)],
                         ids=str)
@pytest.mark.parametrize("full", [True, False])
def test_lapack_ratios_both_paths(path, dtype, shape, full):
    A = gaussian(shape, dtype, 1)
    A0 = A.clone()
    U, S, Vh = LA.svd(A, full_matrices=full)
    assert torch.equal(A, A0)
    m, n = shape[-2:]
    assert U.shape[-1] == (m if full else min(m, n)) and Vh.shape[-2] == (n if full else min(m, n))
    _assert_svd(A, U, S, Vh)
    torch.testing.assert_close(LA.svdvals(A), S, rtol=0, atol=0)  # same kernel, same bits


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
def test_tiny_columns_are_relatively_accurate(dtype):
    # columns below 2^-450 take the scaled dot products and norms (their squares would underflow);
    # the smallest stays above 1e-300 so that no product in the rotations is subnormal
    n = 5
    d = torch.tensor([1.0, 1e-80, 1e-160, 1e-200, 1e-250], dtype=torch.float64)
    Q, _ = torch.linalg.qr(gaussian((7, n), dtype, 2))
    S = LA.svdvals(Q * d.to(dtype))
    u = unit_roundoff(dtype)
    rel = ((S - d) / d).abs().max()
    assert float(rel) < THRESHOLD * n * u, float(rel)
    U, S2, Vh = LA.svd(Q * d.to(dtype), full_matrices=False)
    _assert_svd(Q * d.to(dtype), U, S2, Vh)


@pytest.mark.parametrize("dtype", HOST, ids=str)
def test_zero_and_rank_deficient(path, dtype):
    A = torch.zeros(2, 6, 4, dtype=dtype)
    A[1, :, :2] = gaussian((6, 2), dtype, 3)
    U, S, Vh = LA.svd(A)
    assert torch.equal(S[0], torch.zeros(4, dtype=S.dtype)) and bool((S[1, 2:] == 0).all())
    _assert_svd(A, U, S, Vh)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")], ids=["nan", "inf"])
@pytest.mark.parametrize("dtype", HOST, ids=str)
def test_nonfinite_info_1_and_nan(dtype, bad):
    A = gaussian((3, 5, 4), dtype, 4)
    A[1, 2, 3] = bad
    U, S, Vh, info = LA.svd_ex(A)
    assert info.tolist() == [0, 1, 0]
    assert torch.isnan(S[1]).all() and torch.isnan(U[1]).all() and torch.isnan(Vh[1]).all()
    assert torch.isfinite(S[[0, 2]]).all()
    with pytest.raises(torch.linalg.LinAlgError, match="non-finite"):
        LA.svdvals(A)


def test_sweep_bound_gives_info_2(monkeypatch):
    # one sweep cannot orthogonalise a random 16x16 (de Rijk's cyclic Jacobi needs ~5): info 2
    monkeypatch.setattr(svd_mod.TUNING, "max_sweeps", 1)
    U, S, Vh, info = LA.svd_ex(gaussian((3, 16, 16), torch.float32, 5))
    assert info.tolist() == [2, 2, 2]
    monkeypatch.setattr(svd_mod.TUNING, "max_sweeps", 30)
    assert LA.svd_ex(gaussian((3, 16, 16), torch.float32, 5)).info.tolist() == [0, 0, 0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=str)
def test_extreme_scales_same_digits(path, dtype):
    # scaling by a power of two is exact: the same digits come out at 2^±100
    A = gaussian((2, 7, 5), dtype, 6)
    S = LA.svdvals(A)
    for s in (2.0**100, 2.0**-100):
        torch.testing.assert_close(LA.svdvals(A * s), S * s, rtol=0, atol=0)


def test_graded_relative_accuracy_both_paths(path):
    # two-sided graded A = D1 B D2, B well conditioned: every σ to c·κ(B)·u relative (Demmel &
    # Veselić); rows and columns are sorted before the QR (a reversed order loses the grading)
    n = 8
    B = gaussian((n, n), torch.float64, 7)
    kB = float(torch.linalg.cond(B))
    g = torch.logspace(0, -3, n, dtype=torch.float64)
    A = (g[:, None] * B * g[None, :]).flip(0)
    ref = torch.linalg.svdvals(A.to(torch.float64))  # σ_min/σ_max ~ 1e-6: float64 LAPACK to 1e-10 rel
    S = LA.svdvals(A.to(torch.float32)).double()
    rel = float(((S - ref) / ref).abs().max())
    assert rel < THRESHOLD * kB * unit_roundoff(torch.float32), (rel, kB)


_NO_COMPILER_CHILD = r"""
import warnings, torch, mpslinalg
from mpslinalg.svd import c as svd_c
from mpslinalg.svd.workloads import cpu_path_line as _svd_cpu_path
A = torch.randn(4, 6, 5)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    U, S, Vh = mpslinalg.svd(A, full_matrices=False)
    S2 = mpslinalg.svdvals(A)
ours = [w for w in caught if "generated C for svd" in str(w.message)]
assert len(ours) == 1 and "LAPACK's SVD" in str(ours[0].message), [str(w.message) for w in caught]
# LAPACK's SVD of A itself (in LAPACK's safe range): torch.linalg's bits
ref = torch.linalg.svd(A, full_matrices=False)
assert torch.equal(S, ref.S) and torch.equal(U, ref.U) and torch.equal(Vh, ref.Vh)
assert torch.equal(S2, torch.linalg.svdvals(A))
# the family's non-finite rule still holds on this route: info 1 and NaN for that matrix only
B = A.clone(); B[2, 0, 0] = float("inf")
res = mpslinalg.svd_ex(B)
assert res.S[2].isnan().all() and torch.isfinite(res.S[[0, 1, 3]]).all() and res.info.tolist() == [0, 0, 1, 0]
assert svd_c.cpu_path() == "LAPACK's SVD" and "no C compiler" in _svd_cpu_path(), _svd_cpu_path()
# one matrix (the front door's own LAPACK call, issue 34.7): the same bits, and the same rule
one = mpslinalg.svd(A[0])
ref1 = torch.linalg.svd(A[0])
assert all(torch.equal(x, y) for x, y in zip(one, ref1))
assert torch.equal(mpslinalg.svdvals(A[0]), torch.linalg.svdvals(A[0]))  # gesdd without vectors: its own bits
assert int(mpslinalg.svd_ex(B[2]).info) == 1 and mpslinalg.svd_ex(B[2]).S.isnan().all()
big = A[0] * 2.0 ** 100  # outside LAPACK's safe range: the op's exact power-of-two scaling
assert torch.equal(mpslinalg.svdvals(big), ldexp_ref := torch.linalg.svdvals(A[0]) * 2.0 ** 100), ldexp_ref
print("ok")
"""


def test_without_a_compiler_lapacks_svd_serves_and_warns_once(tmp_path):
    # issue 15: without the compiled path, what is fastest: LAPACK's SVD (the torch-op Jacobi ran at
    # 0.00-0.14x torch.linalg there); the warning and the main job's environment block say so
    env = dict(os.environ, MPSLINALG_CXX=str(tmp_path / "no-such-compiler"), MPSLINALG_CACHE_DIR=str(tmp_path))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    res = subprocess.run([sys.executable, "-c", _NO_COMPILER_CHILD], env=env, capture_output=True, text=True,
                         timeout=300, cwd=root)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


_NO_COMPILER_GELSY = r"""
import torch, mpslinalg, importlib
lstsq_mod = importlib.import_module("mpslinalg.svd.lstsq")
calls = []
pivoted = lstsq_mod._gelsy
lstsq_mod._gelsy = lambda A, B, rcond: (calls.append(A.shape[0]), pivoted(A, B, rcond))[1]
u = 2.0 ** -24
g = torch.Generator().manual_seed(5)
A = torch.randn(5, 40, 6, generator=g)
X0 = torch.randn(5, 6, 2, generator=g)
B = A @ X0  # consistent: the forward error of a backward-stable solve is <= c·κ·u (no residual term)
kappa = float(torch.linalg.cond(A).max())
r = mpslinalg.lstsq(A, B)
assert calls == [] and r.rank.tolist() == [6] * 5, (calls, r.rank)  # every matrix proved: LAPACK's QR only
err = float(((r.solution - X0).abs().amax((-2, -1)) / X0.abs().amax((-2, -1))).max())
assert err < 30 * 40 * kappa * u, (err, kappa)
# the matrices the proof does not cover take the pivoted QR, one by one, the others are unchanged
A2, B2 = A.clone(), B.clone()
A2[1, :, 5] = A2[1, :, 4]  # rank 5
A2[2, 0, 0] = float("nan")  # rank -1, NaN solution
A2[3] *= 2.0 ** 100  # outside LAPACK's safe range: scaled, then pivoted
B2[3] *= 2.0 ** 100
r2 = mpslinalg.lstsq(A2, B2)
assert calls == [3], calls
assert r2.rank.tolist() == [6, 5, -1, 6, 6], r2.rank
assert r2.solution[2].isnan().all() and torch.isfinite(r2.solution[[0, 1, 3, 4]]).all()
assert torch.equal(r2.solution[[0, 4]], r.solution[[0, 4]])
err3 = float((r2.solution[3] - X0[3]).abs().max() / X0[3].abs().max())
assert err3 < 30 * 40 * kappa * u, err3
# the minimum-norm solution of the rank-5 matrix: the pivoted QR's (complete orthogonal factorisation)
ref = torch.linalg.lstsq(A2[1].double(), B2[1].double(), driver="gelsd").solution
err1 = float((r2.solution[1].double() - ref).abs().max() / ref.abs().max())
assert err1 < 30 * 40 * 1e3 * u, err1  # κ of the kept part < 1e3 for this Gaussian A
print("ok")
"""


def test_without_a_compiler_gelsy_takes_lapacks_qr_where_it_proves_full_rank(tmp_path):
    # issue 34.7: without the C kernel, 'gelsy' (the CPU default) ran the torch-op pivoted QR for
    # every matrix: 0.03x torch.linalg.lstsq at 512x128. Now the C path's QR route (the proof of
    # _QR_ROUTE_MARGIN) in torch's LAPACK calls; the pivoted QR only where the proof fails.
    # Bounds: the forward error of a consistent system, 30·m·κ·u (LAPACK's threshold, Higham §20)
    env = dict(os.environ, MPSLINALG_CXX=str(tmp_path / "no-such-compiler"), MPSLINALG_CACHE_DIR=str(tmp_path))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    res = subprocess.run([sys.executable, "-W", "ignore", "-c", _NO_COMPILER_GELSY], env=env, capture_output=True,
                         text=True, timeout=300, cwd=root)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


@pytest.mark.parametrize("driver", ["gels", "gelsd", "gelss"])
def test_lstsq_cpu_drivers_are_lapacks(driver):
    # the CPU route is one LAPACK call: the same bits as torch.linalg.lstsq
    A, B = gaussian((3, 9, 4), torch.float64, 8), gaussian((3, 9, 2), torch.float64, 9)
    ours, theirs = LA.lstsq(A, B, driver=driver), torch.linalg.lstsq(A, B, driver=driver)
    torch.testing.assert_close(ours.solution, theirs.solution, rtol=0, atol=0)
    if driver != "gels":
        assert torch.equal(ours.rank, theirs.rank)


@pytest.mark.parametrize("dtype", HOST, ids=str)
@pytest.mark.parametrize("shape", [(3, 9, 4), (3, 4, 9), (2, 6, 6)], ids=str)
def test_pinv_cpu_full_rank_by_qr_else_lapacks(dtype, shape):
    # well conditioned (κ < 1e3): LAPACK's QR route, A⁺ = R⁻¹Qᴴ; it and torch's V Σ⁻¹ Uᴴ are both
    # within c·κ·u of A⁺ (perturbation of a full-rank pseudo-inverse, Wedin), so they agree to
    # 2·30·κ·u relative; the Moore–Penrose conditions are test_pinv.py's
    A = gaussian(shape, dtype, 10)
    kappa = float(torch.linalg.cond(A).max())
    X, P = LA.pinv(A), torch.linalg.pinv(A)
    assert kappa < 1e3 and not torch.equal(X, P)  # the QR route ran (different rounding)
    assert float((X - P).abs().max() / P.abs().max()) < 2 * THRESHOLD * kappa * unit_roundoff(dtype)
    # rank-deficient (a repeated column of a tall A, row of a wide one) in one matrix of the batch:
    # the QR route declines for it alone, torch.linalg.pinv's bits there, the others unchanged
    if shape[-2] >= shape[-1]:
        A[1, :, -1] = A[1, :, 0]
    else:
        A[1, -1, :] = A[1, 0, :]
    X2 = LA.pinv(A)
    torch.testing.assert_close(X2[1], torch.linalg.pinv(A)[1], rtol=0, atol=0)
    torch.testing.assert_close(X2[[0, 2]] if shape[0] == 3 else X2[0], X[[0, 2]] if shape[0] == 3 else X[0],
                               rtol=0, atol=0)


def test_rank_norm_cond_cpu_use_lapacks_singular_values():
    # absolute accuracy is their contract (as torch.linalg's): the CPU takes LAPACK's svdvals, so the
    # results are torch's bit for bit; with autograd the family's differentiable svdvals serves
    A = gaussian((3, 9, 4), torch.float64, 11)
    S = torch.linalg.svdvals(A)
    assert torch.equal(LA.matrix_rank(A), torch.linalg.matrix_rank(A))
    assert torch.equal(LA.matrix_norm(A, 2), S[..., 0]) and torch.equal(LA.matrix_norm(A, "nuc"), S.sum(-1))
    assert torch.equal(LA.cond(A), S[..., 0] / S[..., -1])
    Ag = A.clone().requires_grad_()
    LA.cond(Ag).sum().backward()
    assert Ag.grad is not None and torch.isfinite(Ag.grad).all()


@pytest.mark.parametrize("dtype", HOST, ids=str)
@pytest.mark.parametrize("shape", [(3, 8, 5), (2, 5, 8), (2, 6, 6)], ids=str)
def test_gelsy_in_c_equals_the_torch_op_version(monkeypatch, dtype, shape):
    # the same algorithm (pivots, rank rule, minimum-norm solve): the same rank, and solutions
    # equal to rounding. Full rank (cond 1e2 Gaussian-like) and rank 3 (exact rank deficiency):
    # forward-error bound c·κ·u with κ <= 1e2 of the kept part -> 30·n·κ·u relative
    lstsq_mod = importlib.import_module("mpslinalg.svd.lstsq")
    from spectral_data import matrix as _matrix

    u = unit_roundoff(dtype)
    for rank in (None, 3):
        A = _matrix(shape, dtype, rank=rank, cond=100.0, seed=12)
        B = gaussian((*shape[:-1], 2), dtype, 13)
        A[0, 1, 1] = float("nan")  # a non-finite matrix: rank -1, NaN solution
        ours = LA.lstsq(A, B, driver="gelsy")
        with monkeypatch.context() as mp:
            mp.setattr(lstsq_mod.svd_c, "usable", lambda A: False)
            ref = LA.lstsq(A, B, driver="gelsy")
        assert ours.rank.tolist() == ref.rank.tolist() and ours.rank[0] == -1
        assert torch.isnan(ours.solution[0]).all()
        err = (ours.solution[1:] - ref.solution[1:]).abs().amax() / ref.solution[1:].abs().amax()
        assert float(err) < THRESHOLD * max(shape[-2:]) * 100.0 * u, float(err)
