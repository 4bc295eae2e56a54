"""The QDWH SVD (:mod:`mpslinalg.svd.qdwh`): polar factor, SVD, routing through ``TUNING.large_driver``.

Bounds (``u = eps/2``: ``2^-24`` float32, ``2^-53`` float64), all LAPACK ``xDRVBD``-style:

* ``‖A − UΣVᴴ‖₁/(max(m,n)‖A‖₁u)``, ``‖I − UᴴU‖₁/(m u)``, ``‖I − VᴴV‖₁/(n u)`` below ``RATIO = 30``
  (LAPACK's own threshold): QDWH is backward stable (N–H 2012 §5: each QR/Cholesky step is,
  and ``Up``'s orthogonality error after the last step is ``O(u)``), so is the Hermitian
  eigensolver, and the QR repair of a rank-deficient ``U`` is Householder (``O(m n u)``).
* ``σ``: **absolute** ``|σ̂_i − σ_i| <= 30·n·u·σ_max`` against float64 LAPACK (Weyl: a backward
  error ``‖ΔA‖₂ <= 30 n u ‖A‖₂`` moves every ``σ_i`` by at most that). QDWH is not relatively
  accurate: a graded matrix's small ``σ`` meet only this absolute bound.
* Polar: ``‖UpᴴUp − I‖₁/(n u) < 30`` at full rank; ``H`` Hermitian exactly (symmetrised) and
  ``λ_min(H) >= −30 n u ‖A‖₂`` (PSD to the backward error).
"""

from __future__ import annotations

import importlib

import pytest
import torch

import mpslinalg as LA
from mpslinalg.svd import qdwh
from reference import matrices, metrics

svd_mod = importlib.import_module("mpslinalg.svd")

RATIO = 30.0
SIGMA_C = 30.0


def _u(dtype):
    return metrics.unit_roundoff(dtype)


def _ref_svals(A):
    wide = torch.complex128 if A.is_complex() else torch.float64
    return torch.linalg.svdvals(A.to(wide))


def _scaled_input(A):
    """``svd_qdwh``'s input contract from ``A``: ``(As, e, finite)`` with ``As`` zeroed where non-finite."""
    from mpslinalg.svd.algorithm import pow2_scale

    As, e, finite = pow2_scale(A)
    return As.masked_fill(~finite[:, None, None], 0), e, finite


def _check_svd(A, U, S, V, label):
    r = metrics.svd_ratios(A, U, S, V.mH)
    for name, x in zip(("recon", "u_orth", "v_orth"), r[:3], strict=True):
        assert float(x.max()) < RATIO, (label, name, float(x.max()))  # LAPACK's threshold 30
    assert float(r.order.max()) == 0, label  # non-negative, non-increasing
    S0 = _ref_svals(A)
    n = A.shape[-1]
    # absolute: a backward error of 30 n u ‖A‖₂ moves each σ by at most that (Weyl)
    bound = SIGMA_C * n * _u(S.dtype) * S0[..., :1]
    assert bool(((S.to(S0.dtype) - S0).abs() <= bound).all()), (label, float(((S - S0).abs() / S0[..., :1]).max()))


def _hard(m, n, dtype, seed):
    """A batch mixing the sweep classes: κ=1e3, graded columns (8 decades; float32: 6), near-singular,
    exactly rank-deficient (rank n/2), a 1e±30 scaled one (float32 range-safe after the exact 2^e)."""
    dec = 6.0 if dtype in (torch.float32, torch.complex64) else 12.0
    parts = [
        matrices.with_condition(n, 1e3, m=m, batch=(1,), dtype=dtype, seed=seed),
        matrices.graded(n, m=m, decades=dec, side="cols", base="gaussian", batch=(1,), dtype=dtype, seed=seed),
        matrices.rank_deficient(m, n, n // 2, batch=(1,), dtype=dtype, seed=seed),
        matrices.with_condition(n, 1e3, m=m, batch=(1,), dtype=dtype, seed=seed + 1) * 1e30,
        matrices.with_condition(n, 1e3, m=m, batch=(1,), dtype=dtype, seed=seed + 2) * 1e-30,
    ]
    if m == n:
        parts.append(matrices.near_singular(n, 0.0, batch=(1,), dtype=dtype, seed=seed))
    return torch.cat(parts)


def test_iterations():
    """The host recurrence: float32 4 and float64 6 iterations from ``l0 = u`` (N–H–G 2010 Table 3.1:
    6 for ``l0 = 1e-16``); ``l`` reaches 1 within ``5u`` and the first steps are QR-based (``c > 100``)."""
    assert qdwh.iterations(torch.float32) == 4
    assert qdwh.iterations(torch.complex64) == 4
    assert qdwh.iterations(torch.float64) == 6
    assert qdwh.iterations(torch.float64, l0=0.5) <= 3
    coefs = qdwh.coefficients(qdwh.l0_of(torch.float64), 5 * 2.0**-52)
    assert [c > qdwh.QR_C for _, _, c in coefs] == [True, True, False, False, False, False]
    # the last steps are Halley's (a, b, c) -> (3, 1, 3) as l -> 1
    assert abs(coefs[-1][0] - 3) < 1e-6 and abs(coefs[-1][2] - 3) < 1e-6


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128])
@pytest.mark.parametrize("m,n", [(40, 40), (44, 40), (72, 40)])  # square, m <= 1.15 n, QR first
def test_polar(dtype, m, n):
    A = matrices.with_condition(n, 1e4, m=m, batch=(2,), dtype=dtype, seed=m + n)
    Up, H, iters = qdwh.polar(A)
    u = _u(dtype)
    assert float(metrics.orthogonality_ratio(Up).max()) < RATIO  # xORT01, LAPACK's 30
    assert torch.equal(H, H.mH)  # symmetrised exactly
    w = torch.linalg.eigvalsh(H.to(torch.complex128 if dtype.is_complex else torch.float64))
    # PSD to the backward error: λ_min >= −30 n u ‖A‖₂ (‖A‖₂ = 1 here)
    assert float(w.min()) >= -SIGMA_C * n * u
    # A = Up H to the backward error: ‖A − Up H‖₁ <= 30 n u ‖A‖₁
    E = (A.to(H.dtype) - Up @ H).abs().sum(-2).amax(-1)
    assert bool((E <= SIGMA_C * n * u * A.abs().sum(-2).amax(-1)).all())
    assert int(iters.max()) <= qdwh.iterations(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128])
@pytest.mark.parametrize("m,n", [(48, 48), (52, 48), (80, 48)])
@pytest.mark.parametrize("full", [False, True], ids=["reduced", "full"])
def test_svd_hard_inputs(dtype, m, n, full):
    A = _hard(m, n, dtype, seed=m * 7 + n)
    As, e, finite = _scaled_input(A)
    U, S, V = qdwh.svd_qdwh(As, e, finite, full, True)
    assert U.shape == (A.shape[0], m, m if full else n) and V.shape == (A.shape[0], n, n)
    _check_svd(A, U, S, V, (dtype, m, n, full))
    _, S2, _ = qdwh.svd_qdwh(As, e, finite, full, False)
    # svdvals: the same polar factor and eigenvalues (eigvalsh instead of eigh): within the σ bound
    assert float((S2 - S).abs().max() / S.max()) <= SIGMA_C * n * _u(S.dtype)


def test_zero_and_nonfinite():
    """A zero matrix: σ = 0, orthonormal ``U`` (the QR repair). A NaN/inf matrix: NaN outputs and
    ``info = 1`` through ``svd_ex``; its neighbours in the batch are untouched."""
    n = 40
    A = matrices.with_condition(n, 10.0, batch=(4,), dtype=torch.float32, seed=1)
    A[1] = 0
    A[2, 3, 4] = float("nan")
    A[3, 0, 0] = float("inf")
    As, e, finite = _scaled_input(A)
    U, S, V = qdwh.svd_qdwh(As, e, finite, False, True)
    assert bool(S[1].eq(0).all()) and float(metrics.orthogonality_ratio(U[1])) < RATIO
    for k in (2, 3):
        assert bool(S[k].isnan().all() and U[k].isnan().all() and V[k].isnan().all())
    _check_svd(A[:1], U[:1], S[:1], V[:1], "good neighbour")


@pytest.fixture
def qdwh_selected(monkeypatch):
    """``TUNING.large_driver = "qdwh"`` with the Jacobi ranges lowered to 32 (test orders 40-80)."""
    monkeypatch.setattr(svd_mod.TUNING, "large_driver", "qdwh")
    for key in ("cpu", "cuda", "metal"):
        monkeypatch.setitem(svd_mod.TUNING.jacobi_max, key, 32)
    return svd_mod.TUNING


def test_routed_end_to_end(backend, backend_device, qdwh_selected, monkeypatch):
    """``mpslinalg.svd``/``svdvals``/``svd_ex`` run QDWH (checked by spying on ``svd_qdwh``), wide and
    tall, with the family's non-finite rule."""
    calls = []
    real = qdwh.svd_qdwh
    monkeypatch.setattr(qdwh, "svd_qdwh", lambda *a: calls.append(a[0].shape) or real(*a))
    dtypes = [torch.float32, torch.complex64] + ([torch.float64] if backend == "torch" else [])
    for dtype in dtypes:
        # the emulator runs every QR/Cholesky/solve as Metal kernels (slow): square and wide there
        for m, n in ((40, 40), (36, 48), (64, 40))[: 2 if backend == "emulator" else 3]:
            A = _hard(m, n, dtype, seed=m + n) if m >= n else _hard(n, m, dtype, seed=m + n).mT.contiguous()
            A = A.to(backend_device)
            for full in (False, True):
                U, S, Vh = LA.svd(A, full_matrices=full)
                _check_svd(A.cpu(), U.cpu(), S.cpu(), Vh.mH.cpu(), (backend, dtype, m, n, full))
            Sv = LA.svdvals(A)
            assert float((Sv - S).abs().max() / S.max()) <= SIGMA_C * min(m, n) * _u(S.dtype)
    assert calls, "QDWH was not used"
    A = matrices.with_condition(40, 10.0, batch=(2,), dtype=torch.float32, seed=5).to(backend_device)
    A[1, 0, 0] = float("nan")
    U, S, Vh, info = LA.svd_ex(A)
    assert info.tolist() == [0, 1] and bool(S[1].isnan().all()) and not bool(S[0].isnan().any())


def test_default_routes_unchanged():
    """Without ``"qdwh"`` no path takes it: the CPU's LAPACK, CUDA's cuSOLVER, Metal's Jacobi stay
    the defaults (QDWH is absolute-accuracy only and unmeasured on a GPU)."""
    assert svd_mod.TUNING.large_driver is None
