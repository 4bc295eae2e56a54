"""The two-stage reduction of the large-n eigh path (``Tuning.reduction = "two_stage"``): dense ->
band (``reduce_to_band``, LAPACK ``sy2sb``/``he2hb``), band -> tridiagonal (``eigh_band_tridiag``,
bulge chasing, one kernel), ``V = Q1 (Q2 Z)`` (``eigh_band_q2`` and the QR family's ``ormqr``).

Bounds (derived, LAPACK's test ratios with u = 2⁻²⁴ and the pass mark 30, ``metrics.PASS_RATIO``):

* Every stage is a product of Householder reflectors, each applied backward stably (Higham, Thm.
  19.4: ``O(u)`` per reflector in the norm of the matrix it touches), so the whole decomposition
  has backward error ``O(n u ‖A‖)``: ``xHET21``'s ``‖A − VΛVᴴ‖₁/(n‖A‖₁u)`` and ``‖I − VᴴV‖₁/(n u)``
  below 30, and likewise for one stage alone (``‖A − Q1 B Q1ᴴ‖₁/(n‖A‖₁u)``,
  ``‖B − Q2 T Q2ᴴ‖₁/(n‖B‖₁u)``, and the orthogonality of ``Q1``, ``Q2``).
* Eigenvalues (Weyl): a backward error ``‖ΔA‖₂ ≤ 30 n u ‖A‖₁`` moves each eigenvalue by at most
  that, against float64 LAPACK on the rounded input. This holds for graded and clustered spectra
  too (the reduction is absolutely, not relatively, accurate; orthogonality within a cluster is what
  clustered spectra test).
* The band is exact: entries farther than ``nb`` from the diagonal are written as zeros, so they
  must be exactly 0.
* Dispatches: the reduction issues a fixed number of torch ops per panel of ``nb`` columns and
  three kernels in all, so one call's count is at most ``PER_PANEL * n/nb + FIXED``; the one-stage
  ``sytrd`` issues ~55 per column (docs/ops/roofline.md), which this bound rejects.
"""

from __future__ import annotations

import importlib
import math

import pytest
import torch
from helpers import ORDER_IDS as OID
from helpers import ORDERS, InOrder, NoHostSync, require_emulator

import mpslinalg
from benchmarks.dispatches import Dispatches
from mpslinalg.kernels import load_library, use_backend
from mpslinalg.qr import ormqr_impl
from reference import matrices, metrics

kmod = importlib.import_module("mpslinalg.eigh.kernels")
alg = importlib.import_module("mpslinalg.eigh.algorithm")

DTYPES = [torch.float32, torch.complex64]
DID = ["float32", "complex64"]
WIDE = {torch.float32: torch.float64, torch.complex64: torch.complex128}
U = 2.0**-24
P = metrics.PASS_RATIO


@pytest.fixture(scope="module")
def emulator():
    require_emulator()
    with use_backend("emulator"):
        yield


@pytest.fixture
def tuning(monkeypatch):
    """``tuning(nb)``: the two-stage path selected on the kernel backends with bandwidth ``nb``."""

    def set_(nb=32):
        monkeypatch.setattr(kmod.TUNING, "band_nb", nb)
        monkeypatch.setitem(kmod.TUNING.reduction, "metal", {torch.float32: "two_stage", torch.complex64: "two_stage"})

    return set_


def _hermitian(n, batch, dtype, seed):
    A = matrices.random(n, batch=batch, dtype=dtype, seed=seed)
    return A + A.mH


def _with_spectrum(lam, dtype, seed):
    """``Q diag(lam) Qᴴ`` (``Q`` Haar) rounded to ``dtype``."""
    n = lam.shape[-1]
    Q = matrices.haar(n, batch=lam.shape[:-1], dtype=WIDE[dtype], seed=seed)
    return (Q * lam[..., None, :].to(Q.dtype)) @ Q.mH


def _check(A, w, V):
    n = A.shape[-1]
    recon, orth = metrics.eigh_ratios(A, w, V)
    assert float(recon.max()) < P, float(recon.max())
    assert float(orth.max()) < P, float(orth.max())
    ref = torch.linalg.eigvalsh(A.to(WIDE[A.dtype]))
    weyl = P * n * U * metrics.norm1(A.to(WIDE[A.dtype]))
    err = (w.double() - ref).abs().amax(-1)
    assert bool((err <= weyl).all()), (err / weyl).tolist()


def _band(n, nb, batch, dtype, seed):
    A = _hermitian(n, batch, dtype, seed)
    i = torch.arange(n)
    return torch.where((i[:, None] - i[None, :]).abs() <= nb, A, torch.zeros_like(A))


def _tri(d, e, dtype):
    return (torch.diag_embed(d) + torch.diag_embed(e, 1) + torch.diag_embed(e, -1)).to(dtype)


# --------------------------------------------------------------------------------------------------
# The whole path, through the public op on the emulator backend
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("n,nb", [(65, 32), (96, 32), (130, 32), (96, 8), (130, 5)])
def test_two_stage_ratios(emulator, tuning, dtype, n, nb):
    """Odd orders, n not a multiple of nb; nb = 5 and 8: many chase steps a sweep."""
    tuning(nb)
    A = _hermitian(n, (2,), dtype, seed=n + nb)
    assert alg._reduction(A) == "two_stage"
    w, V = mpslinalg.eigh(A)
    _check(A, w, V)
    assert torch.equal(mpslinalg.eigvalsh(A), w)  # the same reduction without the vectors


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_two_stage_graded_and_clustered(emulator, tuning, dtype):
    tuning(16)
    n = 97
    j = torch.arange(n, dtype=torch.float64)
    graded = 10.0 ** (-6 * j / (n - 1)) * torch.where(j % 2 == 0, 1.0, -1.0)  # 6 decades, both signs
    k40 = torch.arange(40.0)
    clustered = torch.cat([1 + 1e-6 * k40, -1 - 1e-6 * k40, torch.linspace(-0.5, 0.5, 17)])  # two tight clusters
    for k, lam in enumerate((graded, clustered)):
        A = _with_spectrum(lam.expand(2, n), dtype, seed=5 + k).to(dtype)
        w, V = mpslinalg.eigh(A)
        _check(A, w, V)


def test_two_stage_never_syncs(emulator, tuning):
    """eigh_ex on the two-stage path reads nothing on the host (DESIGN §10: 0 syncs per _ex call)."""
    tuning(16)
    A = _hermitian(70, (2,), torch.float32, seed=4)
    mpslinalg.eigh_ex(A)  # compile outside the check
    with NoHostSync():
        w, V, info = mpslinalg.eigh_ex(A)
    _check(A, w, V)


def test_two_stage_nonfinite_and_upper(emulator, tuning):
    """NaN in the named triangle: info = 1 and NaN outputs, as the other paths; UPLO = "U"."""
    tuning(32)
    A = _hermitian(70, (2,), torch.float32, seed=3)
    A[1, 50, 3] = float("nan")
    w, V, info = mpslinalg.eigh_ex(A)
    assert info.tolist() == [0, 1] and bool(w[1].isnan().all()) and bool(V[1].isnan().all())
    _check(A[:1], w[:1], V[:1])
    w, V = mpslinalg.eigh(A[:1].triu(), UPLO="U")
    recon, orth = metrics.eigh_ratios(A[:1].triu(), w, V, upper=True)
    assert float(recon.max()) < P and float(orth.max()) < P


# --------------------------------------------------------------------------------------------------
# Stage 1 alone: dense -> band
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("n,nb", [(65, 32), (96, 8), (130, 32)])
def test_band_stage(emulator, dtype, n, nb):
    A = _hermitian(n, (2,), dtype, seed=2 * n)
    Bm, Vp, tau = alg.reduce_to_band(A, nb)
    i = torch.arange(n)
    outside = (i[:, None] - i[None, :]).abs() > nb
    assert bool((Bm[:, outside] == 0).all()), "an entry outside the band is not exactly zero"
    eye = torch.eye(n, dtype=dtype).expand(2, n, n)
    Q1 = torch.cat([eye[:, :nb], ormqr_impl(Vp, tau, eye[:, nb:].contiguous(), True, False)], dim=1)
    Wd = WIDE[dtype]
    A64, B64, Q64 = A.to(Wd), Bm.to(Wd), Q1.to(Wd)
    recon = metrics.norm1(A64 - Q64 @ B64 @ Q64.mH) / (n * metrics.norm1(A64) * U)
    orth = metrics.norm1(torch.eye(n, dtype=Wd) - Q64.mH @ Q64) / (n * U)
    assert float(recon.max()) < P and float(orth.max()) < P, (recon.tolist(), orth.tolist())


# --------------------------------------------------------------------------------------------------
# Stage 2: the bulge-chasing kernel, in every thread order, against its torch-op twin
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tri_lib():
    require_emulator()
    return load_library("eigh_tridiag", "cpu")


def _stage2_check(Bm, d, e, V2, tau2, nb, q2):
    """T's eigenvalues within Weyl of B's (float64), and B = Q2 T Q2ᴴ with Q2 = q2(I) orthogonal."""
    b, n, _ = Bm.shape
    Wd = WIDE[Bm.dtype]
    B64, T64 = Bm.to(Wd), _tri(d.double(), e.double(), Wd)
    weyl = P * n * U * metrics.norm1(B64)
    err = (torch.linalg.eigvalsh(T64) - torch.linalg.eigvalsh(B64)).abs().amax(-1)
    assert bool((err <= weyl).all()), (err / weyl).tolist()
    Q2 = q2(V2, tau2, torch.eye(n, dtype=Bm.dtype).expand(b, n, n).contiguous(), nb).to(Wd)
    recon = metrics.norm1(B64 - Q2 @ T64 @ Q2.mH) / (n * metrics.norm1(B64) * U)
    orth = metrics.norm1(torch.eye(n, dtype=Wd) - Q2.mH @ Q2) / (n * U)
    assert float(recon.max()) < P and float(orth.max()) < P, (recon.tolist(), orth.tolist())
    return torch.linalg.eigvalsh(T64), weyl


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("n,nb", [(41, 4), (70, 16), (67, 64)])
def test_band_tridiag_kernel(tri_lib, monkeypatch, order, seed, dtype, n, nb):
    monkeypatch.setattr(kmod, "load_library", lambda family, device: InOrder(tri_lib, order, seed))
    kern = kmod._MetalKernels(torch.device("cpu"), dtype)
    Bm = _band(n, nb, (2,), dtype, seed=n)
    before = Bm.clone()
    d, e, V2, tau2 = kern.band_tridiagonal(Bm, nb)
    assert torch.equal(Bm, before), "the input band was modified"
    assert d.shape == (2, n) and e.shape == (2, n - 1)
    lam_k, weyl = _stage2_check(Bm, d, e, V2, tau2, nb, kern.band_q2)
    # the twin: the same contract in torch ops (the same reflectors, applied to whole rows/columns)
    dt, et, Vt, taut = kmod.band_tridiagonal_torch(Bm, nb)
    lam_t, _ = _stage2_check(Bm, dt, et, Vt, taut, nb, kmod.band_q2_torch)
    assert bool(((lam_k - lam_t).abs().amax(-1) <= 2 * weyl).all())
    # Q2 of the same reflectors by the kernel and by the twin, on a random Z: both backward stable
    # products of the same orthogonal factors, so they agree to 2 * 30 n u ||Z||_1
    Z = torch.randn(2, n, n, generator=torch.Generator().manual_seed(1)).to(dtype)
    diff = metrics.norm1((kern.band_q2(Vt, taut, Z, nb) - kmod.band_q2_torch(Vt, taut, Z, nb)).to(WIDE[dtype]))
    assert bool((diff <= 2 * P * n * U * metrics.norm1(Z.to(WIDE[dtype]))).all())


def test_band_tridiag_rejects_wide_band():
    kern = kmod._MetalKernels(torch.device("cpu"), torch.float32)
    with pytest.raises(ValueError, match="exceeds 64"):
        kern.band_tridiagonal(torch.zeros(1, 80, 80), 65)


# --------------------------------------------------------------------------------------------------
# Dispatches: O(n / nb), not O(n)
# --------------------------------------------------------------------------------------------------

#: torch ops a panel (stage 1: geqrf, larft, six products; ormqr's block in the back-transformation)
#: and kernel launches a panel (qr_panel, the trsm of larft twice), measured 39 at n = 512; the bound
#: leaves room for changes inside the QR and triangular families, not for ops per column.
PER_PANEL = 60
FIXED = 60


@pytest.mark.parametrize("n", [130, 258])
def test_two_stage_dispatch_count(emulator, tuning, n):
    tuning(32)
    A = _hermitian(n, (1,), torch.float32, seed=9)
    mpslinalg.eigh(A)  # compile the libraries outside the count
    with Dispatches() as c:
        mpslinalg.eigh(A)
    panels = math.ceil(n / 32)
    assert c.kernels["eigh_band_tridiag_f32"] == 1 and c.kernels["eigh_band_q2_f32"] == 1
    assert c.total <= PER_PANEL * panels + FIXED, (c.total, c.kernels, c.ops.most_common(10))
    # and the one-stage reduction, O(n), breaks that bound (the count can tell the two apart)
    kmod.TUNING.reduction["metal"] = {}
    with Dispatches() as s:
        mpslinalg.eigh(A)
    assert s.total > PER_PANEL * panels + FIXED and s.total > 10 * c.total, (s.total, c.total)


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_two_stage_structured(emulator, tuning, dtype):
    """Zero, diagonal (every reflector the identity: tau = 0 throughout) and an already tridiagonal
    matrix: exact or within the ratios, no NaN from a zero column."""
    tuning(32)
    n = 75
    d = torch.linspace(-2, 3, n)
    T = _tri(d, torch.full((n - 1,), 0.5), torch.float32)
    A = torch.stack([torch.zeros(n, n), torch.diag_embed(d.flip(0)), T]).to(dtype)
    w, V = mpslinalg.eigh(A)
    assert bool(torch.isfinite(w).all()) and bool(torch.isfinite(V).all())
    assert torch.equal(w[0], torch.zeros(n)) and torch.equal(w[1], d)
    _check(A[1:], w[1:], V[1:])
    _, orth = metrics.eigh_ratios(A[:1], w[:1], V[:1])  # ‖A‖ = 0: only the orthogonality ratio exists
    assert float(orth.max()) < P
