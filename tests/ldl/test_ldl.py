"""The LDL family's public ops on every backend: LAPACK's pivots and ``info``, LAPACK's test ratios,
the blocked path, singular/indefinite/extreme/NaN input, shapes, ``out=``, errors, autograd errors.

Bounds (u = 2⁻²⁴ for float32/complex64, 2⁻⁵³ for float64/complex128; pass mark 30, LAPACK's
``TESTING/ctest.in``):

* factorization: ``xSYT01``'s ``‖P A Pᵀ − L D Lᴴ‖₁/(n ‖A‖₁ u) < 30``; Bunch–Kaufman's backward error
  is ``p(n) u ‖|L||D||L|ᵀ‖`` (Higham, Accuracy and Stability, Thm 11.3), so the ratio stays below the
  mark while the growth ``‖|L||D||L|ᵀ‖/‖A‖`` (stated with each test) is moderate;
* solves: ``xGET02``'s ``‖B − A X‖₁/(‖A‖₁ ‖X‖₁ u) < 30`` (backward stability of ``sytrs``);
* ``LD`` against torch's on float64: both factorizations are backward stable with the same pivots,
  so the factors differ by at most the first-order factor perturbation ``κ₂(A) · 2 · 30 n u`` times
  ``max |LD|`` (the factors' condition is bounded by ``κ(A)`` for a fixed pivot sequence).
"""

from __future__ import annotations

import pytest
import torch
from helpers import NoHostSync, gaussian

import mpslinalg as M
from mpslinalg.ldl import TUNING
from mpslinalg.ldl import api as ldl_api
from reference import metrics

P = metrics.PASS_RATIO


def _sym(A: torch.Tensor, hermitian: bool) -> torch.Tensor:
    return (A + A.mH) / 2 if hermitian else (A + A.mT) / 2


def _wide(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.complex128 if x.is_complex() else torch.float64)


def _check(A, LD, piv, info, hermitian):
    """Pivots and info equal LAPACK's (float64 of the rounded input); xSYT01 < 30 with the growth
    of these matrices stated: below ``2n + 4``."""
    ref = torch.linalg.ldl_factor_ex(_wide(A), hermitian=hermitian)
    assert torch.equal(piv, ref.pivots)
    assert torch.equal(info, ref.info)
    ok = info == 0
    ratio, growth = metrics.ldl_ratio(A[ok], LD[ok], piv[ok], hermitian=hermitian)
    assert float(growth.max()) < 2 * A.shape[-1] + 4
    assert float(ratio.max()) < P


@pytest.mark.parametrize("hermitian", [False, True], ids=["sym", "herm"])
def test_factor_batched(backend, backend_device, gpu_dtype, hermitian):
    A = gaussian((8, 12, 12), gpu_dtype, 1)
    A[::2].diagonal(dim1=-2, dim2=-1).zero_()  # zero diagonals: 2x2 blocks
    LD, piv, info = M.ldl_factor_ex(A.to(backend_device), hermitian=hermitian)
    assert bool((piv < 0).any())  # 2x2 pivots were exercised
    _check(A, LD.cpu(), piv.cpu(), info.cpu(), hermitian)


@pytest.mark.parametrize("hermitian", [False, True], ids=["sym", "herm"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=["float64", "complex128"])
def test_factor_equals_torch_float64(dtype, hermitian):
    """The torch backend (its lockstep panel) against LAPACK in the same precision: equal pivots,
    ``LD`` within the perturbation bound of the module docstring."""
    A = _sym(gaussian((6, 20, 20), dtype, 2), hermitian)
    A[::3].diagonal(dim1=-2, dim2=-1).zero_()
    LD, piv, info = M.ldl_factor_ex(A, hermitian=hermitian)
    ref = torch.linalg.ldl_factor_ex(A, hermitian=hermitian)
    assert torch.equal(piv, ref.pivots) and torch.equal(info, ref.info)
    kappa = torch.linalg.cond(A).max()
    tol = kappa * 2 * P * 20 * 2.0**-53 * ref.LD.abs().amax()
    assert float((LD - ref.LD).abs().max()) <= float(tol)


@pytest.mark.parametrize("nb", [3, 8])
def test_blocked(nb, monkeypatch):
    """The blocked path (panels of nb columns, a 2x2 block crossing a panel's end, trailing GEMM)."""
    monkeypatch.setattr(TUNING, "small_max", 4)
    monkeypatch.setattr(TUNING, "nb", nb)
    for dtype, hermitian in ((torch.float32, False), (torch.complex64, True), (torch.complex64, False)):
        A = gaussian((5, 40, 40), dtype, 3 + nb)
        A[1:].diagonal(dim1=-2, dim2=-1).mul_(1e-2)
        LD, piv, info = M.ldl_factor_ex(A, hermitian=hermitian)
        assert bool((piv < 0).any())
        _check(A, LD, piv, info, hermitian)


def test_blocked_emulator(monkeypatch):
    """Beyond the kernel's tile (complex64 n = 50 > 45) the emulator backend takes the blocked path."""
    A = gaussian((2, 50, 50), torch.complex64, 4)
    with M.use_backend("emulator"):
        LD, piv, info = M.ldl_factor_ex(A, hermitian=True)
    _check(A, LD, piv, info, True)


def test_singular_info(backend, backend_device, gpu_dtype):
    """info = the first exactly zero column (D[k, k] = 0), per matrix; the rest is still factored."""
    A = gaussian((4, 6, 6), gpu_dtype, 5)
    A = A + A.mT
    A[0] = 0
    A[1, 2, :] = 0
    A[1, :, 2] = 0
    A[2, :, 4:] = 0
    A[2, 4:, :] = 0
    LD, piv, info = M.ldl_factor_ex(A.to(backend_device))
    assert info.cpu().tolist() == [1, 3, 5, 0]
    assert float(LD[1, 2, 2]) == 0
    with pytest.raises(torch.linalg.LinAlgError, match=r"Batch element 0"):
        M.ldl_factor(A.to(backend_device))
    with pytest.raises(torch.linalg.LinAlgError):
        M.ldl_factor_ex(A.to(backend_device), check_errors=True)


def test_indefinite_kkt(backend, backend_device):
    """A saddle-point matrix [[H, Cᵀ], [C, 0]]: indefinite, zero block on the diagonal."""
    H = gaussian((3, 8, 8), torch.float64, 6)
    H = H @ H.mT + torch.eye(8)
    C = gaussian((3, 3, 8), torch.float64, 7)
    K = torch.cat([torch.cat([H, C.mT], -1), torch.cat([C, torch.zeros(3, 3, 3, dtype=torch.float64)], -1)], -2)
    K = K.float()
    LD, piv, info = M.ldl_factor_ex(K.to(backend_device))
    _check(K, LD.cpu(), piv.cpu(), info.cpu(), False)
    B = gaussian((3, 11, 2), torch.float32, 8)
    X = M.ldl_solve(LD, piv, B.to(backend_device)).cpu()
    assert float(metrics.solve_ratio(K, X, B).max()) < P


@pytest.mark.parametrize("scale", [1e-30, 1e30])
def test_extreme_scale(backend, backend_device, scale):
    """1e±30 in float32: the ratios are scale invariant (no squares are formed)."""
    A = gaussian((3, 9, 9), torch.float32, 9)
    A[:, 0, 0] = 0
    A = A * scale
    LD, piv, info = M.ldl_factor_ex(A.to(backend_device))
    _check(A, LD.cpu(), piv.cpu(), info.cpu(), False)


def test_nan(backend, backend_device):
    """NaN input never hangs or crashes; the factors are NaN (a NaN diagonal at step 1 sets info)."""
    A = gaussian((2, 5, 5), torch.float32, 10)
    A = A + A.mT
    A[0, 0, 0] = float("nan")
    A[1, 3, 1] = float("nan")
    LD, piv, info = M.ldl_factor_ex(A.to(backend_device))
    assert int(info[0]) == 1
    assert bool(LD.isnan().any(-1).any(-1).all())
    assert bool(((piv.abs() >= 1) & (piv.abs() <= 5)).all())


@pytest.mark.parametrize("hermitian", [False, True], ids=["sym", "herm"])
def test_solve(backend, backend_device, gpu_dtype, hermitian):
    A = _sym(gaussian((4, 10, 10), gpu_dtype, 11), hermitian)
    A[::2].diagonal(dim1=-2, dim2=-1).zero_()
    B = gaussian((3, 1, 10, 4), gpu_dtype, 12)  # broadcasts with A's batch
    LD, piv = M.ldl_factor(A.to(backend_device), hermitian=hermitian)
    X = M.ldl_solve(LD, piv, B.to(backend_device), hermitian=hermitian).cpu()
    assert X.shape == (3, 4, 10, 4)
    assert float(metrics.solve_ratio(A, X, B).max()) < P
    # torch's path of the front door (torch.linalg.ldl_solve itself crashes on this broadcast)
    Xt = ldl_api._torch_solve(LD.cpu(), piv.cpu(), B, hermitian)
    assert float(metrics.solve_ratio(A, Xt, B).max()) < P


def test_no_host_sync():
    A = gaussian((4, 9, 9), torch.float32, 13)
    with NoHostSync():
        LD, piv, info = M.ldl_factor_ex(A)
        M.ldl_solve(LD, piv, A[..., :2])


def test_lower_triangle_only_and_views(backend, backend_device):
    """Only the lower triangle is read; conj/transposed views give the same answer; inputs untouched."""
    A = gaussian((3, 7, 7), torch.complex64, 14)
    A = A + A.mT
    noisy = A.tril() + torch.randn(3, 7, 7, dtype=torch.complex64).triu(1)
    keep = noisy.clone()
    r1 = M.ldl_factor_ex(noisy.to(backend_device))
    assert torch.equal(noisy, keep)
    r2 = M.ldl_factor_ex(A.to(backend_device))
    assert torch.equal(r1.LD, r2.LD) and torch.equal(r1.pivots, r2.pivots)
    c = M.ldl_factor_ex(A.conj().mT.to(backend_device))  # a conj transposed view of A.conj()
    d = M.ldl_factor_ex(A.conj().resolve_conj().to(backend_device))
    assert torch.allclose(c.LD, d.LD) and torch.equal(c.pivots, d.pivots)


def test_shapes_and_out(backend, backend_device):
    for shape in ((0, 0), (2, 0, 0), (0, 3, 3), (1, 1)):
        A = torch.ones(shape, device=backend_device)
        r, t = M.ldl_factor_ex(A), torch.linalg.ldl_factor_ex(A.cpu())
        assert all(x.shape == y.shape and x.dtype == y.dtype for x, y in zip(r, t))
    A = gaussian((2, 4, 4), torch.float32, 15).to(backend_device)
    outs = (torch.empty(0, device=backend_device), torch.empty(0, dtype=torch.int32, device=backend_device))
    res = M.ldl_factor(A, out=outs)
    assert res.LD is outs[0] and res.LD.shape == (2, 4, 4)
    X = torch.empty(2, 4, 1, device=backend_device)
    assert M.ldl_solve(res.LD, res.pivots, A[..., :1], out=X) is X
    assert isinstance(M.ldl_factor_ex(A), torch.return_types.linalg_ldl_factor_ex)


def test_errors():
    A = torch.randn(4, 4)
    with pytest.raises(RuntimeError, match="square"):
        M.ldl_factor(torch.randn(3, 4))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        M.ldl_factor_ex(torch.randn(4))
    with pytest.raises(TypeError):
        M.ldl_factor_ex(A.int())
    with pytest.raises(TypeError, match="hermitian"):
        M.ldl_factor(A, hermitian=1)
    LD, piv = M.ldl_factor(A + A.T)
    with pytest.raises(RuntimeError, match="pivots"):
        M.ldl_solve(LD, piv[:3], torch.randn(4, 2))
    with pytest.raises(RuntimeError, match="4 rows"):
        M.ldl_solve(LD, piv, torch.randn(3, 2))
    with pytest.raises(TypeError):
        M.ldl_solve(LD, piv, torch.randn(4, 2, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="2 dimensions"):
        M.ldl_solve(LD, piv, torch.randn(4))


def test_not_differentiable_as_torch():
    """torch has no derivative for either op; ours raise the same errors at the same moments."""
    A = (lambda a: a + a.mT)(torch.randn(4, 4, dtype=torch.float64)).requires_grad_()
    LD, piv, info = M.ldl_factor_ex(A)
    with pytest.raises(RuntimeError, match="derivative for aten::linalg_ldl_factor_ex is not implemented"):
        LD.sum().backward()
    B = torch.randn(4, 2, dtype=torch.float64, requires_grad=True)
    X = M.ldl_solve(LD.detach(), piv, B)
    with pytest.raises(RuntimeError, match="derivative for aten::linalg_ldl_solve is not implemented"):
        X.sum().backward()
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level():
        dual = fwad.make_dual(A.detach(), torch.ones(4, 4, dtype=torch.float64))
        with pytest.raises(NotImplementedError, match="forward AD with aten::linalg_ldl_factor_ex"):
            M.ldl_factor_ex(dual)


def test_vmap():
    A = (lambda a: a + a.mT)(torch.randn(3, 5, 5, dtype=torch.float64))
    LD, piv, _ = torch.func.vmap(M.ldl_factor_ex)(A)
    ref = torch.linalg.ldl_factor_ex(A)
    assert torch.equal(piv, ref.pivots) and torch.allclose(LD, ref.LD)


def test_enable_routes_torch_calls(routing_table):
    """``enable()`` sends unmodified torch calls to these ops (and lu_unpack to the LU family's)."""
    A = (lambda a: a + a.mT)(torch.randn(3, 6, 6))
    with M.enabled(devices="cpu", ops=("ldl_factor_ex", "ldl_solve", "lu_unpack"), when="always"):
        LD, piv = torch.linalg.ldl_factor(A)
        X = torch.linalg.ldl_solve(LD, piv, A[..., :2])
        Pm, L, U = torch.lu_unpack(*torch.linalg.lu_factor(A))
        s = M.routing.stats()
    assert s["ldl_factor_ex"]["ours"] == 1 and s["ldl_solve"]["ours"] == 1 and s["lu_unpack"]["ours"] == 1
    assert float(metrics.solve_ratio(A, X, A[..., :2]).max()) < P
    assert torch.allclose(Pm @ L @ U, A, atol=1e-5)
