"""mpslinalg.pinv: the Moore–Penrose conditions, the float64 reference, torch's tolerance rules,
shapes, views, errors, no host sync and gradients.

Bounds (threshold 30, u = 2^-24 for float32/complex64, 2^-53 for float64/complex128)
-----------------------------------------------------------------------------------
``X = V_r Σ_r⁻¹ U_rᴴ`` from a backward-stable SVD (``A + E = U Σ Vᴴ``, ``‖E‖ <= c·max(m,n)·u·‖A‖``,
``U``, ``V`` orthonormal to ``c·max(m,n)·u``). Each Moore–Penrose product multiplies ``Σ_r`` by
``Σ_r⁻¹``, so the relative perturbations are amplified by ``κ = σ₁/σ_r`` (the kept singular
values; ``‖X‖ = 1/σ_r``). First-order bounds, each divided out in a ratio that must be < 30:

* ``‖A X A − A‖_F  <= c·max(m,n)·u·κ·‖A‖₂``
* ``‖X A X − X‖_F  <= c·max(m,n)·u·κ·‖X‖₂``
* ``‖(A X)ᴴ − A X‖_F``, ``‖(X A)ᴴ − X A‖_F <= c·max(m,n)·u·κ``
* ``‖X − X_ref‖_F <= c·max(m,n)·u·κ·‖X_ref‖₂`` (Wedin: a fixed-rank perturbation ``δA`` moves
  ``A⁺`` by at most ``√2·‖A⁺‖²·‖δA‖`` = ``√2·κ·‖A⁺‖·‖δA‖/‖A‖``).

For rank-deficient inputs the dropped singular values (rounding noise ``<= c·u·‖A‖`` when the
matrix is rounded to float32) sit below the default cut ``eps·max(m,n)·σ₁`` by construction, and
add at most ``tol`` to ``‖AXA − A‖``, which the ``κ·u·‖A‖`` scale absorbs.
"""

from __future__ import annotations

import importlib

import pytest
import torch
from spectral_data import matrix as _matrix
from sync_check import no_host_sync

import mpslinalg as LA
from reference import lapack as ref
from reference.metrics import unit_roundoff

spectral = importlib.import_module("mpslinalg.svd.spectral")

THRESHOLD = 30.0
HOST = [torch.float32, torch.float64, torch.complex64, torch.complex128]


def _kappa(A: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """``σ₁/σ_r`` of the singular values that ``X`` inverted (``r`` = rank of ``X``), float64.

    ``X``'s rank counts its singular values above ``THRESHOLD·max(m, n)·u·‖X‖₂``: the rounding of
    ``X = V_r Σ_r⁻¹ U_rᴴ`` leaves the dropped directions at most ``c·max(m, n)·u·‖X‖₂`` (the bound
    the ratios hold, ``c < THRESHOLD``), and a kept ``1/σ_j >= ‖X‖₂/κ`` is above it for every
    ``κ < 1/(THRESHOLD·max(m, n)·u)`` (κ up to ~7e4 in float32 at n = 8)."""
    S = ref.svdvals(A)
    m, n = A.shape[-2:]
    r = torch.linalg.matrix_rank(X.to(torch.complex128 if X.is_complex() else torch.float64),
                                 rtol=THRESHOLD * max(m, n) * unit_roundoff(X.dtype))
    smin = S.gather(-1, (r - 1).clamp_min(0).unsqueeze(-1)).squeeze(-1)
    return S[..., 0] / smin


def mp_ratios(A: torch.Tensor, X: torch.Tensor) -> dict[str, float]:
    """The four Moore–Penrose ratios and the reference ratio (module docstring), worst over the batch."""
    u = unit_roundoff(X.dtype)
    wide = torch.complex128 if A.is_complex() else torch.float64
    A64, X64 = A.to(wide), X.to(wide)
    Xref = ref.pinv(A)
    m, n = A.shape[-2:]
    scale = max(m, n) * u * _kappa(A, X)
    fro = torch.linalg.matrix_norm
    two = lambda M: torch.linalg.matrix_norm(M, 2)  # noqa: E731
    AX, XA = A64 @ X64, X64 @ A64
    r = {
        "AXA=A": fro(AX @ A64 - A64) / (scale * two(A64)),
        "XAX=X": fro(XA @ X64 - X64) / (scale * two(X64)),
        "AX herm": fro(AX.mH - AX) / scale,
        "XA herm": fro(XA.mH - XA) / scale,
        "ref": fro(X64 - Xref) / (scale * two(Xref)),
    }
    return {k: v.max().item() for k, v in r.items()}


def _check_mp(A, X):
    ratios = mp_ratios(A, X)
    assert max(ratios.values()) < THRESHOLD, ratios


SHAPES = [(3, 6, 4), (3, 4, 6), (2, 5, 5), (7, 3)]


@pytest.mark.parametrize("dtype", HOST, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("rank", [None, 2], ids=["full", "rank2"])
def test_moore_penrose_torch_backend(shape, dtype, rank):
    A = _matrix(shape, dtype, rank=rank, cond=1e3 if rank is None else 10.0)
    A0 = A.clone()
    X = LA.pinv(A)
    assert X.shape == (*shape[:-2], shape[-1], shape[-2]) and X.dtype == dtype
    assert torch.equal(A, A0)
    _check_mp(A, X)


@pytest.mark.parametrize("rank", [None, 2], ids=["full", "rank2"])
def test_moore_penrose_every_backend(backend, backend_device, gpu_dtype, rank):
    A = _matrix((2, 6, 4), gpu_dtype, rank=rank, cond=100.0).to(backend_device)
    X = LA.pinv(A)
    _check_mp(A.cpu(), X.cpu())


def test_zero_matrix_gives_zero():
    X = LA.pinv(torch.zeros(2, 3, 4))
    assert X.shape == (2, 4, 3) and torch.equal(X, torch.zeros(2, 4, 3))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 0), (0, 4, 2)], ids=str)
def test_empty_shapes_as_torch(shape):
    A = torch.zeros(shape)
    X = LA.pinv(A)
    assert X.shape == torch.linalg.pinv(A).shape


def test_tolerances_follow_torch():
    # singular values 1, 1e-2, 1e-4, 1e-6: which are dropped is decided by atol/rtol exactly as torch
    A = _matrix((4, 4), torch.float64, cond=1e6)
    cases = [{}, {"rtol": 1e-3}, {"atol": 5e-3}, {"atol": 5e-3, "rtol": 0.5}, {"atol": 0.0},
             {"atol": torch.tensor([5e-3, 5e-5]).unsqueeze(-1)},  # broadcast to a batch of 2
             {"rtol": torch.tensor(1e-5)}]
    for kw in cases:
        X, T = LA.pinv(A, **kw), torch.linalg.pinv(A, **kw)
        assert X.shape == T.shape, kw
        assert torch.linalg.matrix_rank(X, rtol=1e-9).tolist() == torch.linalg.matrix_rank(T, rtol=1e-9).tolist(), kw
        torch.testing.assert_close(X, T, rtol=1e-9, atol=1e-9 * T.abs().max().item())
    # deprecated positional rcond = rtol (atol = 0)
    torch.testing.assert_close(LA.pinv(A, 1e-3), torch.linalg.pinv(A, 1e-3))
    torch.testing.assert_close(LA.pinv(A, rcond=1e-3), torch.linalg.pinv(A, rtol=1e-3))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
def test_hermitian_reads_the_lower_triangle(dtype):
    H = _matrix((2, 5, 5), dtype, rank=4)
    H = (H + H.mH) / 2
    garbage = H.clone()
    garbage[..., 0, 3] = float("nan")  # strict upper triangle: never read
    if dtype.is_complex:
        garbage.diagonal(dim1=-2, dim2=-1).imag.fill_(7.0)  # imaginary part of the diagonal: ignored
    X = LA.pinv(garbage, hermitian=True)
    torch.testing.assert_close(X, LA.pinv(H), rtol=0, atol=1e-12)
    torch.testing.assert_close(X, torch.linalg.pinv(H, hermitian=True), rtol=0, atol=1e-12)


def test_conj_and_strided_views():
    A = _matrix((3, 4, 6), torch.complex64)
    A0 = A.clone()
    for view in (A.conj(), A.mT, A[..., ::2, :], A.mH):
        _check_mp(view.resolve_conj().contiguous(), LA.pinv(view))
    assert torch.equal(A, A0)


def test_out():
    A = _matrix((2, 5, 3), torch.float32)
    out = torch.empty(0)
    r = LA.pinv(A, out=out)
    assert r is out and torch.equal(out, LA.pinv(A))


def test_errors():
    A = torch.randn(3, 3)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        LA.pinv(torch.randn(3))
    with pytest.raises(TypeError, match="floating point or complex"):
        LA.pinv(torch.ones(3, 3, dtype=torch.int64))
    with pytest.raises(TypeError, match="atol tensor of complex type"):
        LA.pinv(A, atol=torch.tensor(1j))
    with pytest.raises(TypeError, match="rcond cannot be combined"):
        LA.pinv(A, 1e-3, atol=0.1)
    with pytest.raises(RuntimeError, match="square"):
        LA.pinv(torch.randn(3, 4), hermitian=True)
    with pytest.raises(TypeError, match="hermitian"):
        LA.pinv(A, hermitian=1)
    with pytest.raises(TypeError, match="atol"):
        LA.pinv(A, atol="big")


def test_no_host_sync_checker_catches_item():
    with pytest.raises(AssertionError, match="_local_scalar_dense"), no_host_sync():
        (torch.ones(3) * 2).sum().item()


@pytest.mark.parametrize("kw", [{}, {"atol": 1e-3}, {"atol": torch.tensor([1e-3, 0.0])}, {"hermitian": True}],
                         ids=["default", "atol", "atol-tensor", "hermitian"])
def test_no_host_sync(kw):
    A = _matrix((2, 4, 4), torch.float32, rank=3)
    A = (A + A.mH) / 2 if kw.get("hermitian") else A
    # exempt: the SVD family's door and the CPU-only LAPACK routes (reads of CPU memory)
    with no_host_sync(exempt=[(spectral, "svd_parts"), (spectral, "_lapack_pinv"),
                              (spectral, "_pinv_cpu")]):
        X = LA.pinv(A, **kw)
    _check_mp(A, X)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
@pytest.mark.parametrize("shape", [(2, 3, 2), (3, 4), (3, 3)], ids=str)
def test_gradcheck(shape, dtype):
    A = _matrix(shape, dtype, cond=5.0).requires_grad_()
    torch.autograd.gradcheck(LA.pinv, (A,), check_forward_ad=True)
    torch.autograd.gradgradcheck(LA.pinv, (A,))


def test_gradient_matches_torch_and_survives_repeated_singular_values():
    A = _matrix((4, 3), torch.float64, cond=3.0).requires_grad_()
    G = torch.randn(3, 4, dtype=torch.float64)
    (ours,) = torch.autograd.grad((LA.pinv(A) * G).sum(), A)
    (theirs,) = torch.autograd.grad((torch.linalg.pinv(A) * G).sum(), A)
    torch.testing.assert_close(ours, theirs)
    # an orthogonal matrix has repeated singular values: torch's SVD backward is not finite there,
    # pinv_backward is (and the derivative of A⁺ = Aᴴ there is the gradient of Aᴴ plus the
    # projection terms, checked numerically by gradcheck)
    Q = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64))[0].requires_grad_()
    torch.autograd.gradcheck(LA.pinv, (Q,))


def test_hermitian_gradient_sees_only_the_lower_triangle():
    H = _matrix((4, 4), torch.float64, cond=4.0)
    H = ((H + H.mT) / 2).requires_grad_()
    (g,) = torch.autograd.grad(LA.pinv(H, hermitian=True).sum(), H)
    assert torch.equal(g.triu(1), torch.zeros_like(g))
    torch.autograd.gradcheck(lambda A: LA.pinv(A, hermitian=True), (H,))


def test_torch_func_transforms():
    A = _matrix((3, 4, 3), torch.float64, cond=4.0)
    torch.testing.assert_close(torch.func.vmap(LA.pinv)(A), LA.pinv(A))
    J = torch.func.jacrev(LA.pinv)(A[0])
    Jf = torch.func.jacfwd(LA.pinv)(A[0])
    torch.testing.assert_close(J, Jf)
    torch.testing.assert_close(J, torch.func.jacrev(torch.linalg.pinv)(A[0]))


def test_compile_fullgraph():
    A = _matrix((2, 5, 3), torch.float32)
    f = torch.compile(lambda x: LA.pinv(x), fullgraph=True, backend="eager")
    torch.testing.assert_close(f(A), LA.pinv(A))


def test_nonfinite_input_gives_nan_only_for_that_matrix():
    A = _matrix((3, 4, 5), torch.float32)
    A[1, 0, 0] = float("nan")
    X = LA.pinv(A)
    assert X[1].isnan().all()
    torch.testing.assert_close(X[[0, 2]], LA.pinv(A[[0, 2]]), rtol=0, atol=0)
