"""torch.linalg semantics of eigh / eigvalsh / eigh_ex: shapes, dtypes, views, out=, errors, the
named triangle, non-finite input, no host sync, the drop-in routes."""

from __future__ import annotations

import importlib

import pytest
import torch
from helpers import NoHostSync

import mpslinalg
from mpslinalg import routing
from reference import metrics

eighmod = importlib.import_module("mpslinalg.eigh")


def _herm(n, batch=(), dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(*batch, n, n, generator=g, dtype=dtype)
    return A + A.mH


def _close_spectra(w, ref, dtype, n, A):
    """Weyl: two backward-stable solvers agree to 2·30·n·u·‖A‖₁ (see test_eigh_accuracy)."""
    tol = 2 * metrics.PASS_RATIO * max(n, 1) * metrics.unit_roundoff(dtype) * float(metrics.norm1(A).max())
    assert float((w.double() - ref.double()).abs().max()) <= tol


@pytest.mark.parametrize("shape", [(0, 3, 3), (2, 0, 0), (0, 0), (4, 1, 1), (2, 3, 4, 4)])
def test_shapes(backend, backend_device, shape):
    A = torch.randn(shape)
    A = (A + A.mT).to(backend_device)
    w, V = mpslinalg.eigh(A)
    assert w.shape == shape[:-1] and V.shape == shape and w.dtype == torch.float32
    assert mpslinalg.eigvalsh(A).shape == shape[:-1]
    w2, V2, info = mpslinalg.eigh_ex(A)
    assert info.shape == shape[:-2] and info.dtype == torch.int32
    if A.numel():
        _close_spectra(w.cpu(), torch.linalg.eigvalsh(A.cpu().double()), torch.float32, shape[-1], A.cpu())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128])
def test_dtypes_and_result_types(dtype):
    A = _herm(5, (2,), dtype)
    res = mpslinalg.eigh(A)
    assert isinstance(res, torch.return_types.linalg_eigh)
    assert res.eigenvalues.dtype == torch.empty(0, dtype=dtype).real.dtype and res.eigenvectors.dtype == dtype
    ex = mpslinalg.eigh_ex(A)
    assert ex.eigenvalues is ex[0] and ex.info is ex[2]
    _close_spectra(res.eigenvalues, torch.linalg.eigvalsh(A), dtype, 5, A)


@pytest.mark.parametrize("uplo", ["L", "U", "l", "u"])
def test_only_the_named_triangle_is_read(backend, backend_device, gpu_dtype, uplo):
    """Garbage (and NaN) in the other triangle and in the diagonal's imaginary part changes nothing."""
    A = _herm(6, (2,), gpu_dtype)
    upper = uplo.upper() == "U"
    other = torch.ones(6, 6, dtype=torch.bool).tril(-1) if upper else torch.ones(6, 6, dtype=torch.bool).triu(1)
    junk = torch.where(other, torch.full_like(A, float("nan")), A)
    if gpu_dtype.is_complex:
        junk = junk + 1j * torch.eye(6) * 3.0
    w, V = mpslinalg.eigh(A.to(backend_device), UPLO=uplo)
    wj, Vj = mpslinalg.eigh(junk.to(backend_device), UPLO=uplo)
    torch.testing.assert_close(wj, w, rtol=0, atol=0)
    torch.testing.assert_close(Vj, V, rtol=0, atol=0)


def test_views_and_input_untouched(backend, backend_device, gpu_dtype):
    """Transposed, strided and conjugate views give the answers of their contiguous copies."""
    base = _herm(8, (3,), gpu_dtype).to(backend_device)
    keep = base.clone()
    views = [base.mT, base[:, ::1, :].transpose(-1, -2), base.conj(), base[::2]]
    for v in views:
        w, V = mpslinalg.eigh(v)
        w0, V0 = mpslinalg.eigh(v.resolve_conj().contiguous())
        torch.testing.assert_close(w, w0, rtol=0, atol=0)
        torch.testing.assert_close(V, V0, rtol=0, atol=0)
    assert torch.equal(base, keep)


def test_out(backend, backend_device):
    A = _herm(4, (2,)).to(backend_device)
    wo, Vo = torch.empty(0, device=backend_device), torch.empty(0, device=backend_device)
    res = mpslinalg.eigh(A, out=(wo, Vo))
    assert res.eigenvalues is wo and res.eigenvectors is Vo
    torch.testing.assert_close(wo, mpslinalg.eigvalsh(A), rtol=0, atol=0)
    o = torch.empty(0, device=backend_device)
    assert mpslinalg.eigvalsh(A, out=o) is o
    info = torch.empty(0, dtype=torch.int32, device=backend_device)
    mpslinalg.eigh_ex(A, out=(torch.empty(0, device=backend_device), torch.empty(0, device=backend_device), info))
    assert info.tolist() == [0, 0]
    with pytest.raises(RuntimeError):
        mpslinalg.eigh(A, out=(torch.empty(0, dtype=torch.int64), Vo))


def test_errors():
    with pytest.raises(RuntimeError, match="Expected UPLO argument to be 'L' or 'U', but got X"):
        mpslinalg.eigh(torch.eye(3), "X")
    with pytest.raises(TypeError, match="UPLO"):
        mpslinalg.eigh(torch.eye(3), 1)
    with pytest.raises(RuntimeError, match="square"):
        mpslinalg.eigh(torch.ones(2, 3))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        mpslinalg.eigvalsh(torch.ones(3))
    with pytest.raises((RuntimeError, TypeError)):
        mpslinalg.eigh(torch.ones(3, 3, dtype=torch.long))
    with pytest.raises(TypeError, match="check_errors"):
        mpslinalg.eigh_ex(torch.eye(2), check_errors=1)


@pytest.mark.parametrize("n", [3, 70])
def test_non_finite(backend, backend_device, gpu_dtype, n):
    """NaN/Inf in the read triangle: eigh_ex gives info = 1 and NaN outputs for that matrix only
    (the others untouched); eigh/eigvalsh raise torch's LinAlgError naming the batch element."""
    A = _herm(n, (3,), gpu_dtype).to(backend_device)
    bad = A.clone()
    bad[1, n - 1, 0] = float("nan")
    bad[2, 1, 1] = float("inf")
    w, V, info = mpslinalg.eigh_ex(bad)
    assert info.tolist() == [0, eighmod.INFO_NONFINITE, eighmod.INFO_NONFINITE]
    assert bool(w[1:].isnan().all() and V[1:].isnan().all())
    # the finite neighbour is solved as usual
    w0 = torch.linalg.eigvalsh(A[:1].cpu().to(torch.complex128 if gpu_dtype.is_complex else torch.float64))
    _close_spectra(w[:1].cpu(), w0, gpu_dtype, n, A[:1].cpu())
    with pytest.raises(torch.linalg.LinAlgError, match=r"\(Batch element 1\).*failed to converge.*error code: 1"):
        mpslinalg.eigh(bad)
    with pytest.raises(torch.linalg.LinAlgError, match="linalg.eigh"):
        mpslinalg.eigvalsh(bad)
    with pytest.raises(torch.linalg.LinAlgError):
        mpslinalg.eigh_ex(bad, check_errors=True)


def test_eigh_ex_never_syncs(monkeypatch):
    """With the GPUs' fixed sweep count (what CUDA runs), eigh_ex reads nothing on the host, on
    both paths (the CPU's early exit is the only host read, and it is off here)."""
    monkeypatch.setattr(eighmod.TUNING, "gpu_sweeps", dict(eighmod.TUNING.gpu_sweeps))
    real_sweeps = eighmod.Tuning.sweeps

    def fixed(self, device, dtype, n):
        return real_sweeps(self, torch.device("cuda"), dtype, n)

    monkeypatch.setattr(eighmod.Tuning, "sweeps", fixed)
    for n in (3, 20):
        A = _herm(n, (4,))
        with NoHostSync():
            w, V, info = mpslinalg.eigh_ex(A)
        recon, orth = metrics.eigh_ratios(A, w, V)
        assert float(recon.max()) < metrics.PASS_RATIO and info.tolist() == [0] * 4


def test_sweep_bound_reports_info(monkeypatch):
    """A Jacobi cut off after one sweep reports info = 2 (not converged); eigh raises."""
    monkeypatch.setattr(eighmod.TUNING, "max_sweeps", 1)
    A = _herm(16, (2,))
    _, _, info = mpslinalg.eigh_ex(A)
    assert info.tolist() == [eighmod.INFO_NOCONV] * 2
    with pytest.raises(torch.linalg.LinAlgError, match="error code: 2"):
        mpslinalg.eigh(A)


def test_routes(routing_table):
    """enable(devices="cpu", when="always") sends torch.linalg.eigh/eigvalsh to mpslinalg."""
    A = _herm(5, (3,))
    routing.reset_stats()
    with routing.enabled(devices="cpu", ops=("eigh", "eigvalsh"), when="always"):
        w, V = torch.linalg.eigh(A, UPLO="U")
        w2 = torch.linalg.eigvalsh(A)
    stats = routing.stats()
    assert stats["eigh"]["ours"] == 1 and stats["eigvalsh"]["ours"] == 1
    recon, _ = metrics.eigh_ratios(A, w, V, upper=True)
    assert float(recon.max()) < metrics.PASS_RATIO
    _close_spectra(w2, torch.linalg.eigvalsh(A.double()), torch.float32, 5, A)


def test_front_door_outside_the_table_is_torch(routing_table):
    """when={} on the CPU: the front doors make one torch.linalg call (and keep eigh_ex's contract)."""
    from mpslinalg.oplayer import table

    table.reset_decisions()
    A = _herm(4, (2,))
    w, V = mpslinalg.eigh(A)
    ref = torch.linalg.eigh(A)
    torch.testing.assert_close(w, ref.eigenvalues, rtol=0, atol=0)
    bad = A.clone()
    bad[0, 0, 0] = float("nan")
    w, V, info = mpslinalg.eigh_ex(bad)
    assert info.tolist() == [1, 0] and bool(w[0].isnan().all())
    torch.testing.assert_close(w[1], ref.eigenvalues[1], rtol=0, atol=0)
    assert table.decisions()["eigh"]["torch"] >= 1
