"""torch's semantics of the Cholesky family's public ops on every path (``path`` fixture): shapes,
batching and broadcasting, empty shapes, strided and conjugate views, ``out=``, error classes and
messages, no host synchronisation in ``cholesky_ex``, the inputs never modified; and
``psd_safe_cholesky`` against the hand-written jitter loop; and ``enable()`` routing torch's calls.

Bounds: where two results are compared they are either bit for bit equal (the same operations on
the same values: a view and its contiguous copy, a broadcast batch and its explicit expansion) or
compared through LAPACK's ratios (< 30, see test_cholesky_accuracy.py).
"""

from __future__ import annotations

import pytest
import torch
from helpers import NoHostSync

import mpslinalg as LA
from mpslinalg import routing
from reference import matrices, metrics

DTYPES = [torch.float32, torch.complex64]


def _pd(n, batch=(), dtype=torch.float32, seed=0, kappa=100.0):
    return matrices.positive_definite(n, kappa, batch=batch, dtype=dtype, seed=seed)


def test_return_types_and_out(path):
    A = _pd(6, (2,), seed=1)
    res = LA.cholesky_ex(A)
    assert isinstance(res, torch.return_types.linalg_cholesky_ex)
    L0, i0 = res
    L, info = torch.empty(0), torch.empty(0, dtype=torch.int32)
    got = LA.cholesky_ex(A, out=(L, info))
    assert got.L is L and got.info is info and torch.equal(L, L0) and torch.equal(info, i0)
    out = torch.empty(2, 6, 6)
    assert LA.cholesky(A, out=out) is out and torch.equal(out, L0)
    B = torch.randn(2, 6, 3)
    out = torch.empty(2, 6, 3)
    assert LA.cholesky_solve(B, L0, out=out) is out and torch.equal(out, LA.cholesky_solve(B, L0))
    out = torch.empty(2, 6, 6)
    assert LA.cholesky_inverse(L0, out=out) is out and torch.equal(out, LA.cholesky_inverse(L0))
    with pytest.raises(RuntimeError, match="dtype"):
        LA.cholesky_ex(A, out=(torch.empty(0, dtype=torch.float64), info))
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        LA.cholesky(A.requires_grad_(), out=torch.empty(0))


def test_inputs_never_modified(path):
    for dtype in DTYPES:
        A = _pd(20, (2,), dtype, seed=2)
        A[:, 0, 5] = 7.0  # the unread triangle too
        B = torch.randn(2, 20, 2, dtype=dtype)
        keep = (A.clone(), B.clone())
        L = LA.cholesky(A)
        Lk = L.clone()
        LA.cholesky_solve(B, L)
        LA.cholesky_inverse(L)
        LA.psd_safe_cholesky(A)
        assert torch.equal(A, keep[0]) and torch.equal(B, keep[1]) and torch.equal(L, Lk)


def test_empty_shapes(path):
    for shape in [(0, 0), (3, 0, 0), (0, 4, 4), (2, 0, 3, 3)]:
        A = torch.empty(shape)
        L, info = LA.cholesky_ex(A)
        ref = torch.linalg.cholesky_ex(A)
        assert L.shape == ref.L.shape and info.shape == ref.info.shape and info.dtype == torch.int32
        assert LA.cholesky_inverse(A).shape == torch.cholesky_inverse(A).shape
        B = torch.empty(*shape[:-1], 2)
        assert LA.cholesky_solve(B, A).shape == torch.cholesky_solve(B, A).shape
    L = LA.cholesky(_pd(3, seed=3))
    assert LA.cholesky_solve(torch.empty(3, 0), L).shape == (3, 0)
    assert LA.psd_safe_cholesky(torch.empty(2, 0, 0)).L.shape == (2, 0, 0)


def test_views_equal_contiguous(path):
    """Transposed, conjugated, sliced and broadcast inputs give the answers of their contiguous copies."""
    for dtype in DTYPES:
        big = _pd(30, (3,), dtype, seed=4)
        for view in (big.mT, big.conj(), big[:, ::2, ::2], big.mH[1:], big[:1].expand(3, 30, 30)):
            L, info = LA.cholesky_ex(view)
            L2, info2 = LA.cholesky_ex(view.clone().resolve_conj().contiguous())
            assert torch.equal(L, L2) and torch.equal(info, info2)
        L = LA.cholesky(big)
        B = torch.randn(3, 30, 2, dtype=dtype)
        for Lv, Bv in ((L.conj().conj(), B.mT.contiguous().mT), (L.mH.mH, B.conj())):
            assert torch.equal(LA.cholesky_solve(Bv, Lv), LA.cholesky_solve(Bv.resolve_conj().contiguous(),
                                                                            Lv.resolve_conj().contiguous()))
        U = L.mH  # a transposed conjugate view as the upper factor
        assert torch.equal(LA.cholesky_inverse(U, upper=True), LA.cholesky_inverse(U.resolve_conj().contiguous(),
                                                                                   upper=True))


def test_cholesky_solve_broadcasts(path):
    for dtype in DTYPES:
        L = LA.cholesky(_pd(9, (3,), dtype, seed=5))
        B = torch.randn(2, 1, 9, 4, dtype=dtype)
        X = LA.cholesky_solve(B, L)
        assert X.shape == (2, 3, 9, 4)
        X2 = LA.cholesky_solve(B.expand(2, 3, 9, 4).contiguous(), L.expand(2, 3, 9, 9).contiguous())
        A = L @ L.mH
        assert float(metrics.solve_ratio(A.expand(2, 3, 9, 9), X, B.expand(2, 3, 9, 4)).max()) < 30
        # two solutions with xPOT02 ratios < 30 differ by <= 2 · 30 κ₂ u ‖X‖ (Frobenius: √k more)
        kappa = float(torch.linalg.cond(A.to(torch.complex128 if A.is_complex() else torch.float64)).max())
        bound = 60 * 2 * kappa * metrics.unit_roundoff(dtype) * X.double().norm(dim=(-2, -1))
        assert bool(((X - X2).double().norm(dim=(-2, -1)) <= bound).all())
        assert torch.cholesky_solve(B, L).shape == X.shape


def test_errors_match_torch_classes(path):
    cases = [
        (lambda: LA.cholesky(torch.randn(3)), lambda: torch.linalg.cholesky(torch.randn(3)), RuntimeError),
        (lambda: LA.cholesky(torch.randn(3, 4)), lambda: torch.linalg.cholesky(torch.randn(3, 4)), RuntimeError),
        (lambda: LA.cholesky(torch.ones(2, 2, dtype=torch.int64)),
         lambda: torch.linalg.cholesky(torch.ones(2, 2, dtype=torch.int64)), RuntimeError),
        (lambda: LA.cholesky_ex(torch.eye(2), check_errors=1), None, TypeError),
        (lambda: LA.cholesky(-torch.eye(2)), lambda: torch.linalg.cholesky(-torch.eye(2)), torch.linalg.LinAlgError),
        (lambda: LA.cholesky_ex(-torch.eye(2), check_errors=True),
         lambda: torch.linalg.cholesky_ex(-torch.eye(2), check_errors=True), torch.linalg.LinAlgError),
        (lambda: LA.cholesky_solve(torch.randn(4, 1), torch.eye(3)),
         lambda: torch.cholesky_solve(torch.randn(4, 1), torch.eye(3)), RuntimeError),
        (lambda: LA.cholesky_solve(torch.randn(3), torch.eye(3)),
         lambda: torch.cholesky_solve(torch.randn(3), torch.eye(3)), RuntimeError),
        (lambda: LA.cholesky_solve(torch.randn(3, 1, dtype=torch.float64), torch.eye(3)),
         lambda: torch.cholesky_solve(torch.randn(3, 1, dtype=torch.float64), torch.eye(3)), RuntimeError),
        (lambda: LA.cholesky_solve(torch.randn(2, 3, 1), torch.eye(3).expand(4, 3, 3)),
         lambda: torch.cholesky_solve(torch.randn(2, 3, 1), torch.eye(3).expand(4, 3, 3)), RuntimeError),
        (lambda: LA.cholesky_inverse(torch.randn(3, 4)), lambda: torch.cholesky_inverse(torch.randn(3, 4)),
         RuntimeError),
        (lambda: LA.psd_safe_cholesky(torch.eye(3), jitter=(1e-4, 1e-6)), None, ValueError),
    ]
    for ours, theirs, cls in cases:
        if theirs is not None:
            with pytest.raises(cls):
                theirs()
        with pytest.raises(cls):
            ours()
    with pytest.raises(torch.linalg.LinAlgError, match="order 1 is not positive-definite"):
        LA.cholesky(-torch.eye(2))
    with pytest.raises(RuntimeError, match="L"):  # names the argument
        LA.cholesky_solve(torch.randn(4, 1), torch.eye(3))


def test_no_host_sync(path):
    """cholesky_ex, cholesky_solve, cholesky_inverse and psd_safe_cholesky read no value on the
    host (helpers.NoHostSync fails on item/bool/nonzero/...): failures included."""
    for dtype in DTYPES:
        A = torch.stack([_pd(20, dtype=dtype, seed=6), -torch.eye(20, dtype=dtype)])
        B = torch.randn(2, 20, 3, dtype=dtype)
        with NoHostSync():
            L, info = LA.cholesky_ex(A)
            LA.cholesky_solve(B, L)
            LA.cholesky_inverse(L)
            LA.psd_safe_cholesky(A)
        assert info.tolist() == [0, 1]


def _hand_written(A, levels, relative):
    """The loop users write (gpytorch's psd_safe_cholesky, one matrix at a time: retry with the
    next level until the factorization works), as the reference."""
    Ls, used = [], []
    for M in A.reshape(-1, *A.shape[-2:]):
        scale = M.diagonal().real.abs().mean() if relative else torch.tensor(1.0, dtype=M.real.dtype)
        scale = scale if scale > 0 else torch.ones_like(scale)
        for j in [0.0, *levels]:
            L, info = torch.linalg.cholesky_ex(M + j * scale * torch.eye(M.shape[-1], dtype=M.dtype))
            if info == 0:
                Ls.append(L)
                used.append(j * scale)
                break
        else:
            Ls.append(None)
            used.append(float("nan"))
    return Ls, used


@pytest.mark.parametrize("relative", [True, False], ids=["relative", "absolute"])
def test_psd_safe_cholesky_matches_the_loop(path, relative):
    """Per matrix, the smallest level that works (the loop's choice) and the factor of that shifted
    matrix (xPOT01 ratio < 30 against A + δI)."""
    x = torch.linspace(0, 1, 24, dtype=torch.float64)
    K = torch.exp(-((x[:, None] - x[None, :]) ** 2) / 0.5)  # RBF kernel: numerically rank-deficient
    for dtype in DTYPES:
        scales = [1.0, 1e3, 1e-3]
        A = torch.stack([(K * s).to(dtype) for s in scales]
                        + [_pd(24, dtype=dtype, seed=7), -torch.eye(24, dtype=dtype)])
        levels = (1e-6, 1e-5, 1e-4, 1e-3)
        L, used = LA.psd_safe_cholesky(A, levels, relative=relative)
        ref_L, ref_used = _hand_written(A, levels, relative)
        assert used.dtype == A.real.dtype and used.shape == (5,)
        for b in range(5):
            if ref_L[b] is None:
                assert bool(torch.isnan(used[b]))
                continue
            assert float(used[b]) == pytest.approx(float(ref_used[b]), rel=1e-6)
            shifted = A[b] + used[b].to(dtype) * torch.eye(24, dtype=dtype)
            assert float(metrics.cholesky_ratio(shifted, L[b])) < metrics.PASS_RATIO
        assert float(used[3]) == 0.0 and bool(torch.isnan(used[4]))
        if relative:  # scale invariant: the same relative level for every scaling of K
            rel = [float(used[b]) / float(A[b].diagonal().real.mean()) for b in range(3)]
            assert max(rel) == pytest.approx(min(rel), rel=1e-5) and rel[0] > 0
        with pytest.raises(torch.linalg.LinAlgError, match=r"Batch element 4"):
            LA.psd_safe_cholesky(A, levels, relative=relative, check_errors=True)


def test_psd_safe_cholesky_gradient_flows(path):
    A = _pd(6, (2,), torch.float64 if path != "emulator" else torch.float32, seed=8).requires_grad_()
    L, used = LA.psd_safe_cholesky(A)
    (g,) = torch.autograd.grad(L.sum(), A)
    (g_ref,) = torch.autograd.grad(LA.cholesky(A).sum(), A)  # nothing failed: the plain factor's gradient
    assert torch.equal(used, torch.zeros_like(used))
    assert _grad_close(g, g_ref, A)


def _grad_close(g, g_ref, A) -> bool:
    """Two backward-stable evaluations of the same gradient formula (a product and two triangular
    solves with L, κ(L)² = κ(A)): relative 1-norm difference <= 2 · 30 n κ₂(A) u (first order)."""
    n = A.shape[-1]
    kappa = float(torch.linalg.cond(A.detach().double()).max())
    u = metrics.unit_roundoff(g.dtype)
    diff = torch.linalg.matrix_norm((g - g_ref).double(), ord=1)
    return bool((diff <= 60 * n * kappa * u * torch.linalg.matrix_norm(g_ref.double(), ord=1)).all())


@pytest.fixture
def _routing_off():
    routing.disable()
    routing.reset_stats()
    yield
    routing.disable()
    routing.reset_stats()


def test_enable_routes_torch_calls(_routing_off):
    """torch.linalg.cholesky(_ex), torch.cholesky_solve and torch.cholesky_inverse run mpslinalg's
    ops under enable(devices="cpu", when="always") (routing.stats counts them), with the same
    results (bit for bit: on the CPU our torch path ends in the same LAPACK calls) and our
    derivatives recorded."""
    A = _pd(12, (3,), torch.float64, seed=9)
    B = torch.randn(3, 12, 2, dtype=torch.float64)
    ref = (torch.linalg.cholesky(A), torch.linalg.cholesky_ex(A, upper=True))
    with LA.enabled(devices="cpu", when="always"):
        L = torch.linalg.cholesky(A)
        U, info = torch.linalg.cholesky_ex(A, upper=True)
        X = torch.cholesky_solve(B, L)
        Ainv = torch.cholesky_inverse(L)
        with pytest.raises(torch.linalg.LinAlgError):
            torch.linalg.cholesky(-torch.eye(3, dtype=torch.float64))
        Ag = A.clone().requires_grad_()
        torch.linalg.cholesky(Ag).sum().backward()
    stats = routing.stats()
    assert stats["cholesky_ex"]["ours"] == 4 and stats["cholesky_solve"]["ours"] == 1
    assert stats["cholesky_inverse"]["ours"] == 1
    assert torch.equal(L, ref[0]) and torch.equal(U, ref[1].L) and torch.equal(info, ref[1].info)
    assert float(metrics.solve_ratio(A, X, B).max()) < 30 and float(metrics.inverse_ratio(A, Ainv).max()) < 30
    Ar = A.clone().requires_grad_()
    (g_ref,) = torch.autograd.grad(torch.linalg.cholesky(Ar).sum(), Ar)  # torch's, routing off
    assert _grad_close(Ag.grad, g_ref, A)
