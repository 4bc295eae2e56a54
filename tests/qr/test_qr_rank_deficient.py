"""QR of exactly rank-deficient matrices (rank 0, 1, k; zero and repeated columns; a subnormal column),
float32 and complex64, every size class (whole-matrix kernel, blocked panels, TSQR), on the emulator
and on the torch backend's own kernels (not LAPACK's).

The bug (issue: the SVD's ``test_exactly_rank_deficient_matrices_converge[emulator-2-complex]``):
after the first reflector of ``ones(33, 33) · (1 − 2i)/√5`` the columns below the diagonal hold
rounding noise, about ``u`` times the previous column's, so by column 7 they are subnormal. ``larfg``
computed ``beta``, ``tau`` and ``alpha − beta`` from them unscaled, keeping a few bits, and
``H = I − tau v vᴴ`` was no longer unitary: ``‖I − QᴴQ‖ = 0.77``. Now the reflector's arithmetic
runs on the column scaled by a power of two into the normal range (LAPACK's ``1/safmin`` rescaling).

Bounds, per matrix (LAPACK ``xQRT01``, threshold 30 from ``TESTING/ctest.in``, ``u = 2^-24``):
Householder QR is backward stable for ANY input, rank-deficient included (Higham Thm 19.4: the
computed ``R`` is the exact ``R`` of ``A + ΔA`` with ``‖ΔA‖ <= γ_cmn ‖A‖``; Thm 19.13 / Lemma 19.3:
the product of the computed reflectors is unitary to ``O(m n u)``, independently of ``A``'s rank),
so ``‖A − QR‖₁ / (m ‖A‖₁ u) < 30`` and ``‖I − QᴴQ‖₁ / (m u) < 30``. For the zero matrix
``‖A − QR‖ = 0`` (0/0 counts as 0). The subnormal column costs at most its own absolute rounding
(``2^-149`` per entry, far below ``m ‖A‖ u``) in the residual and nothing in ``Q``'s orthogonality.
"""

from __future__ import annotations

import math

import pytest
import torch

import mpslinalg as LA
from mpslinalg.qr import kernels as qrkern
from reference import metrics

PASS = 30.0  # LAPACK's test-ratio threshold


def _ints(shape, cplx: bool, g: torch.Generator) -> torch.Tensor:
    """Small integers (exact in float32, and so are their products below)."""
    x = torch.randint(-3, 4, shape, generator=g).float()
    if cplx:
        x = torch.complex(x, torch.randint(-3, 4, shape, generator=g).float())
    return x


def _cases(m: int, n: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Exactly rank-deficient ``m x n`` matrices, by name."""
    cplx = dtype.is_complex
    g = torch.Generator().manual_seed(31 * m + n)
    phase = (1 - 2j) / math.sqrt(5) if cplx else -1.0
    rand = torch.randn(m, n, generator=g, dtype=dtype)
    k = max(1, min(m, n) // 3)
    cases = {
        "rank0": torch.zeros(m, n, dtype=dtype),
        "rank1_ones": torch.ones(m, n, dtype=dtype) * phase,
        "rank1_outer": _ints((m, 1), cplx, g) @ _ints((1, n), cplx, g),
        f"rank{k}_ints": _ints((m, k), cplx, g) @ _ints((k, n), cplx, g),
    }
    for where, j in (("start", 0), ("middle", n // 2), ("end", n - 1)):
        A = rand.clone()
        A[:, j] = 0
        cases[f"zero_col_{where}"] = A
    A = rand.clone()
    A[:, n // 2:] = A[:, :1]  # repeated columns: exactly zero below the diagonal after column 0
    cases["repeated_cols"] = A
    A = rand.clone()
    A[:, n // 2] *= 2.0**-140  # a subnormal column (float32's normal range ends at 2^-126)
    cases["subnormal_col"] = A
    return {name: A.to(dtype) for name, A in cases.items()}


def _check(m: int, n: int, dtype: torch.dtype) -> None:
    cases = _cases(m, n, dtype)
    A = torch.stack(list(cases.values()))
    Q, R = LA.qr(A)
    QR, tau = LA.geqrf(A)
    Q2 = LA.householder_product(QR[..., :min(m, n)], tau)  # the unfused route: geqrf, then orgqr
    for what, (q, r) in {"qr": (Q, R), "geqrf+householder_product": (Q2, QR[..., :min(m, n), :].triu())}.items():
        recon, orth = metrics.qr_ratios(A, q.cpu(), r.cpu())
        for i, name in enumerate(cases):
            assert float(recon[i]) < PASS and float(orth[i]) < PASS, (
                what, name, (m, n), "backward error", float(recon[i]), "orthogonality", float(orth[i]))


@pytest.fixture(params=["emulator", "torch"])
def own_kernels(request, monkeypatch):
    """The emulator, or the torch backend with its own Householder kernels (the CPU hands single
    matrices to LAPACK otherwise); TSQR allowed on the CPU from ``M >= 16 N``, as on mps."""
    monkeypatch.setitem(qrkern.TUNING.tsqr_ratio, "cpu", 16)
    if request.param == "emulator":
        from helpers import require_emulator

        require_emulator()
    else:
        monkeypatch.setitem(qrkern.TUNING.torch_batch_min, "cpu", 1)
        monkeypatch.setattr(qrkern.TUNING, "torch_blocked", True)
    with LA.use_backend(request.param):
        yield request.param


DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["float32", "complex64"])


@DTYPES
@pytest.mark.parametrize("n", [3, 17, 33])
def test_square_small(own_kernels, dtype, n):
    """Whole-matrix kernel (``qr_small`` / the torch batched ``geqr2``)."""
    _check(n, n, dtype)


@DTYPES
def test_tall_skinny_tsqr_small(own_kernels, dtype):
    _check(48, 3, dtype)


@pytest.mark.slow
@DTYPES
@pytest.mark.parametrize("shape", [(65, 65), (65, 40), (40, 65), (100, 70)], ids=str)
def test_blocked(own_kernels, dtype, shape):
    """Blocked panels (``qr_panel`` and its ``T``; the torch panel and ``larft``)."""
    _check(*shape, dtype)


@pytest.mark.slow
@DTYPES
@pytest.mark.parametrize("n", [17, 33])
def test_tall_skinny_tsqr(own_kernels, dtype, n):
    _check(16 * n, n, dtype)


def test_ones_33_complex_reported_case(own_kernels):
    """The reported matrix, and its orthogonality far below the bound (it was 1.1e6 · m u)."""
    A = torch.ones(33, 33, dtype=torch.complex64) * (1 - 2j) / math.sqrt(5)
    Q, R = LA.qr(A)
    recon, orth = metrics.qr_ratios(A, Q, R)
    assert float(recon) < PASS and float(orth) < PASS, (float(recon), float(orth))


def _triton_check(device: str, sizes=((3, 3), (17, 17), (33, 33), (48, 3)), blocked=(17, 33, 65)) -> None:
    """The Triton kernels on the same matrices: the whole-matrix ``geqrf_small`` (with thin ``Q``) at
    ``sizes`` and the SVD's blocked square ``geqrf_square`` (with ``Q``) at ``blocked``."""
    from mpslinalg.qr import triton_blocked
    from mpslinalg.qr.triton import geqrf_small

    runs = [(geqrf_small, m, n) for m, n in sizes] + [(triton_blocked.geqrf_square, n, n) for n in blocked]
    for dtype in (torch.float32, torch.complex64):
        for kernel, m, n in runs:
            cases = _cases(m, n, dtype)
            A = torch.stack(list(cases.values()))
            k = min(m, n)
            QR, tau = A.clone().to(device), torch.zeros(A.shape[0], k, dtype=dtype, device=device)
            Q = torch.empty(A.shape[0], m, k, dtype=dtype, device=device)
            kernel(QR, tau, Q)
            recon, orth = metrics.qr_ratios(A, Q.cpu(), QR.cpu()[..., :k, :].triu())
            for i, name in enumerate(cases):
                assert float(recon[i]) < PASS and float(orth[i]) < PASS, (
                    kernel.__name__, name, (m, n), dtype, float(recon[i]), float(orth[i]))


@pytest.mark.slow
def test_triton_interpreted():
    from helpers import run_interpreted

    run_interpreted("import qr.test_qr_rank_deficient as t; t._triton_check('cpu', ((3, 3), (17, 17)), (17,))")


@pytest.mark.cuda
def test_triton_cuda():
    _triton_check("cuda")
