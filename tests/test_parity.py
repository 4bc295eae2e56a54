"""Parity of the public API with ``torch.linalg`` (black-box: only ``mpslinalg.<op>`` is called).

Every op of ``mpslinalg.__all__`` is compared with the ``torch.linalg`` op of the same name on the
CPU, on every backend (``backend`` fixture: ``torch``, ``emulator``, ``metal`` on a Mac): return
types and named-tuple fields, output dtypes, shapes (batch broadcasting, vector right-hand sides,
``left=False``, empty matrices and batches), keyword-only arguments and defaults, ``out=``,
strided / transposed / conjugate-view inputs, singular input (``info`` values, ``LinAlgError``),
error types for bad input, inputs never modified, and gradients.

Numerical pass marks (derived, never tuned; ``u`` = unit roundoff of the dtype, 2^-24 for
float32/complex64, 2^-53 for float64/complex128):

* Test matrices are ``A = U diag(s) Vᴴ`` with Haar-like ``U``, ``V`` (QR of Gaussians, float64) and
  ``s`` geometric from 1 to ``1/κ``, so ``κ₂(A) = κ`` up to the rounding of ``A`` to the dtype.
* **Solutions** (``solve``, ``lu_solve``, ``solve_triangular``, columns of ``inv``): LAPACK's
  backward-error ratio ``‖B − AX‖/(‖A‖‖X‖u)`` is below 30 for both torch and us
  (``TESTING/ctest.in``), so each forward error is ``≤ 30 κ u`` (``‖x − x̂‖ ≤ ‖A⁻¹‖‖r‖``), and the
  two results differ by ``≤ 2·30·κ·u`` relative, in the 2-norm; Frobenius norms over ``k`` columns
  add at most a factor ``√n`` (norm equivalence, ``k ≤ n`` here): ``SOLVE_C = 60 √n``.
* **Determinants**: ``d det / det = tr(A⁻¹ dA)``, so a backward error ``‖ΔA‖ ≤ 30 n u ‖A‖``
  (LAPACK's LU ratio ``‖PA − LU‖/(n‖A‖u) < 30``) moves ``det`` by at most ``n · κ · 30 n u``
  relative (``|tr M| ≤ n‖M‖₂``); two results differ by twice that: ``60 n² κ u``. The same bounds
  the absolute error of ``logabsdet`` and of ``sign``.
* **LU factors**: pivots are compared for equality (Gaussian input has no ties: with probability
  one no two candidates have equal ``|Re| + |Im|``), factors through LAPACK's ratio
  ``‖PA − LU‖/(n‖A‖u) < 30``.
* **Gradients** (float64): each backward is a few solves with ``A`` or ``Aᴴ`` (condition ``κ``)
  and one product with ``A⁻¹``-like factors; a first-order bound for the difference of two
  backward-stable evaluations is ``2 · 30 √n · κ² u`` relative (``κ`` per solve with ``A``, two
  solves in a row for ``inv``/``solve``/``lu_solve``): ``GRAD_C = 60 √n κ²``.
"""

from __future__ import annotations

import math

import pytest
import torch

import mpslinalg as LA

ALL_DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]
DTYPE_IDS = ["f32", "f64", "c64", "c128"]
KAPPA = 10.0


def _u(dtype: torch.dtype) -> float:
    return 2.0**-24 if dtype in (torch.float32, torch.complex64) else 2.0**-53


def _real(dtype: torch.dtype) -> torch.dtype:
    return {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(dtype, dtype)


def _gauss(shape, dtype, g):
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if dtype.is_complex:
        x = torch.complex(x, torch.randn(shape, generator=g, dtype=torch.float64)) / math.sqrt(2)
    return x


def _mat(batch, n, dtype, seed, kappa=KAPPA):
    """``U diag(s) Vᴴ``, ``κ₂ = kappa`` (see the module docstring)."""
    g = torch.Generator().manual_seed(seed)
    cdt = torch.complex128 if dtype.is_complex else torch.float64
    U = torch.linalg.qr(_gauss((*batch, n, n), dtype, g).to(cdt))[0]
    V = torch.linalg.qr(_gauss((*batch, n, n), dtype, g).to(cdt))[0]
    s = torch.logspace(0, -math.log10(kappa), n, dtype=torch.float64) if n > 1 else torch.ones(n, dtype=torch.float64)
    return ((U * s.to(cdt)) @ V.mH).to(dtype)


def _rhs(shape, dtype, seed):
    return _gauss(shape, dtype, torch.Generator().manual_seed(seed)).to(dtype)


def _rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    """Largest relative Frobenius difference over the batch (trailing two dims are the matrix)."""
    x, ref = x.cpu().to(torch.complex128), ref.cpu().to(torch.complex128)
    if ref.numel() == 0:
        return 0.0
    if ref.ndim < 2:
        return float((x - ref).abs().max() / ref.abs().max().clamp_min(1e-300))
    d = torch.linalg.matrix_norm(x - ref)
    r = torch.linalg.matrix_norm(ref).clamp_min(1e-300)
    return float((d / r).max())


def _solve_bound(n, dtype, kappa=KAPPA):
    return 60 * math.sqrt(max(n, 1)) * kappa * _u(dtype)


def _det_bound(n, dtype, kappa=KAPPA):
    return 60 * n * n * kappa * _u(dtype)


def _lu_ratio(A, P, L, U):
    """LAPACK's ``‖PᵀA − LU‖₁ / (n ‖A‖₁ u)`` per batch element, max (torch: ``A = P L U``)."""
    A64 = A.cpu().to(torch.complex128)
    R = A64 - P.cpu().to(torch.complex128) @ L.cpu().to(torch.complex128) @ U.cpu().to(torch.complex128)
    n = max(A.shape[-1], A.shape[-2], 1)
    nrm = torch.linalg.matrix_norm(A64, ord=1).clamp_min(1e-300)
    return float((torch.linalg.matrix_norm(R, ord=1) / (n * nrm * _u(A.dtype))).max())


# ------------------------------------------------------------------------------------------------
# Return types, named tuples, output dtypes
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DTYPE_IDS)
def test_return_types_and_dtypes(backend, backend_device, dtype):
    if backend_device.type == "mps" and dtype in (torch.float64, torch.complex128):
        pytest.skip("mps has no float64 (covered by test_float64_on_mps_raises)")
    A = _mat((2,), 5, dtype, 1)
    B = _rhs((2, 5, 3), dtype, 2)
    Ad, Bd = A.to(backend_device), B.to(backend_device)
    cases = {
        "lu_factor_ex": ((A,), {}),
        "lu_factor": ((A,), {}),
        "lu": ((A,), {}),
        "solve_ex": ((A, B), {}),
        "solve": ((A, B), {}),
        "det": ((A,), {}),
        "slogdet": ((A,), {}),
        "inv": ((A,), {}),
        "inv_ex": ((A,), {}),
        "solve_triangular": ((A.triu(), B), {"upper": True}),
    }
    for name, (args, kw) in cases.items():
        ref = getattr(torch.linalg, name)(*args, **kw)
        ours = getattr(LA, name)(*(a.to(backend_device) for a in args), **kw)
        assert type(ours) is type(ref), f"{name}: {type(ours)} vs torch {type(ref)}"
        if isinstance(ref, tuple):
            assert len(ours) == len(ref)
            for i, (o, r) in enumerate(zip(ours, ref)):
                assert o.dtype == r.dtype, f"{name}[{i}]: dtype {o.dtype} vs torch {r.dtype}"
                assert o.shape == r.shape, f"{name}[{i}]: shape {o.shape} vs torch {r.shape}"
                assert o.device == Ad.device
        else:
            assert ours.dtype == ref.dtype and ours.shape == ref.shape, name
            assert ours.device == Ad.device
    # named-tuple attribute access, as torch's users write it
    r = LA.lu_factor_ex(Ad)
    assert r.LU is r[0] and r.pivots is r[1] and r.info is r[2]
    assert r.pivots.dtype == torch.int32 and r.info.dtype == torch.int32 and r.info.shape == (2,)
    r = LA.lu_factor(Ad)
    assert r.LU is r[0] and r.pivots is r[1]
    r = LA.lu(Ad)
    assert r.P is r[0] and r.L is r[1] and r.U is r[2]
    r = LA.solve_ex(Ad, Bd)
    assert r.result is r[0] and r.info is r[1] and r.info.dtype == torch.int32
    r = LA.inv_ex(Ad)
    assert r.inverse is r[0] and r.info is r[1] and r.info.dtype == torch.int32
    r = LA.slogdet(Ad)
    assert r.sign is r[0] and r.logabsdet is r[1]
    assert r.logabsdet.dtype == _real(dtype) and r.sign.dtype == dtype


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 12])
def test_values_match_torch(backend, backend_device, dtype, n):
    """n <= 4 takes the small-matrix path, n = 12 the LU path; bounds in the module docstring."""
    if backend_device.type == "mps" and dtype in (torch.float64, torch.complex128):
        pytest.skip("mps has no float64")
    A = _mat((3,), n, dtype, 10 + n)
    B = _rhs((3, n, 2), dtype, 11)
    Ad, Bd = A.to(backend_device), B.to(backend_device)
    sb, db = _solve_bound(n, dtype), _det_bound(n, dtype)

    LU, piv, info = LA.lu_factor_ex(Ad)
    LUt, pivt, _ = torch.linalg.lu_factor_ex(A)
    assert torch.equal(piv.cpu(), pivt), f"pivots {piv.tolist()} vs torch {pivt.tolist()}"
    assert torch.equal(info.cpu(), torch.zeros(3, dtype=torch.int32))
    P, L, U = torch.lu_unpack(LU.cpu(), piv.cpu())
    assert _lu_ratio(A, P, L, U) < 30

    P, L, U = LA.lu(Ad)
    Pt, _, _ = torch.linalg.lu(A)
    assert torch.equal(P.cpu(), Pt)
    assert torch.equal(L.cpu().diagonal(dim1=-2, dim2=-1), torch.ones(3, n, dtype=dtype))
    assert (P.shape, L.shape, U.shape) == ((3, n, n),) * 3 and P.dtype == L.dtype == U.dtype == dtype
    assert torch.equal(L.cpu().triu(1), torch.zeros_like(L.cpu()))
    assert torch.equal(U.cpu().tril(-1), torch.zeros_like(U.cpu()))
    assert _lu_ratio(A, P, L, U) < 30

    assert _rel(LA.solve(Ad, Bd), torch.linalg.solve(A, B)) <= sb
    assert _rel(LA.solve_ex(Ad, Bd).result, torch.linalg.solve(A, B)) <= sb
    assert _rel(LA.inv(Ad), torch.linalg.inv(A)) <= sb
    assert _rel(LA.inv_ex(Ad).inverse, torch.linalg.inv(A)) <= sb
    assert _rel(LA.det(Ad), torch.linalg.det(A)) <= db
    s, la = LA.slogdet(Ad)
    st, lat = torch.linalg.slogdet(A)
    assert float((s.cpu() - st).abs().max()) <= db
    assert float((la.cpu() - lat).abs().max()) <= db
    for left in (True, False):
        for adjoint in (False, True):
            Bl = B if left else B.mT
            X = LA.lu_solve(LU, piv, Bl.to(backend_device), left=left, adjoint=adjoint)
            Xt = torch.linalg.lu_solve(LUt, pivt, Bl, left=left, adjoint=adjoint)
            assert _rel(X, Xt) <= sb, (left, adjoint)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["f32", "c64"])
@pytest.mark.parametrize("m,n", [(7, 4), (4, 7), (5, 1), (1, 5)])
def test_rectangular_lu(backend, backend_device, dtype, m, n):
    g = torch.Generator().manual_seed(m * 10 + n)
    A = _gauss((2, m, n), dtype, g).to(dtype)
    LU, piv, info = LA.lu_factor_ex(A.to(backend_device))
    LUt, pivt, infot = torch.linalg.lu_factor_ex(A)
    assert LU.shape == LUt.shape and piv.shape == pivt.shape == (2, min(m, n))
    assert torch.equal(piv.cpu(), pivt) and torch.equal(info.cpu(), infot)
    P, L, U = LA.lu(A.to(backend_device))
    Pt, Lt, Ut = torch.linalg.lu(A)
    assert (P.shape, L.shape, U.shape) == (Pt.shape, Lt.shape, Ut.shape)
    assert P.dtype == Pt.dtype and torch.equal(P.cpu(), Pt)
    assert _lu_ratio(A, P, L, U) < 30


@pytest.mark.parametrize("m,n", [(6, 4), (4, 6)])
def test_rectangular_lu_grads(backend, m, n):
    """Gradients of ``lu``'s L and U for full-rank rectangular input equal torch's (float64,
    complex128); bound GRAD_C κ² u with κ = κ(A) κ(L) κ(U) measured, as for the square factors."""
    if backend == "metal":
        pytest.skip("float64 on the CPU")
    for dtype in (torch.float64, torch.complex128):
        g = torch.Generator().manual_seed(m + 7 * n)
        A = _gauss((2, m, n), dtype, g).to(dtype)
        k = min(m, n)
        GL, GU = _rhs((2, m, k), dtype, 120), _rhs((2, k, n), dtype, 121)
        grads = []
        for M in (torch.linalg, LA):
            a = A.clone().requires_grad_()
            _, L, U = M.lu(a)
            ((L * GL.conj()).real.sum() + (U * GU.conj()).real.sum()).backward()
            grads.append(a.grad)
        _, L, U = torch.linalg.lu(A)
        cond = torch.linalg.cond
        kappa = float((cond(A) * cond(L[..., :k, :k]) * cond(U[..., :k, :k])).max())
        assert _rel(grads[1], grads[0]) <= 60 * math.sqrt(max(m, n)) * kappa**2 * _u(dtype)


# ------------------------------------------------------------------------------------------------
# Shapes: broadcasting, vector right-hand sides, left=False
# ------------------------------------------------------------------------------------------------

_SOLVE_SHAPES = [
    # (A shape, B shape, left)
    ((4, 4), (4,), True),             # 1-D B: a vector
    ((2, 4, 4), (4,), True),          # 1-D B broadcast over A's batch
    ((2, 4, 4), (2, 4), True),        # B.shape == A.shape[:-1]: a batch of vectors
    ((1, 4, 4), (4,), True),
    ((3, 1, 4, 4), (2, 4, 5), True),  # batch broadcasting both ways
    ((4, 4), (3, 4, 2), True),        # unbatched A, batched B
    ((2, 1, 4, 4), (3, 2, 4), False),  # left=False: X A = B, B is (*, k, n)
    ((4, 4), (4, 4), True),           # square B is a matrix, not a batch of vectors
    ((3, 3), (3, 3), False),          # small path, left=False
    ((2, 3, 3), (2, 3), True),        # small path, batch of vectors
    ((5, 2, 2), (2,), True),          # small path, 1-D B
    ((4, 4), (0, 4, 2), True),        # empty batch of B
    ((0, 4, 4), (4,), True),          # empty batch of A, 1-D B
    ((0, 3, 3), (0, 3), True),        # empty batch, batch of vectors
]


@pytest.mark.parametrize("ashape,bshape,left", _SOLVE_SHAPES)
def test_solve_shapes(backend, backend_device, ashape, bshape, left):
    dtype = torch.float32
    n = ashape[-1]
    A = _mat(ashape[:-2], n, dtype, 3)
    B = _rhs(bshape, dtype, 4)
    ref = torch.linalg.solve(A, B, left=left)
    X = LA.solve(A.to(backend_device), B.to(backend_device), left=left)
    assert X.shape == ref.shape and X.dtype == ref.dtype
    assert _rel(X, ref) <= _solve_bound(n, dtype)
    Xe, info = LA.solve_ex(A.to(backend_device), B.to(backend_device), left=left)
    refe, infot = torch.linalg.solve_ex(A, B, left=left)
    assert Xe.shape == refe.shape and info.shape == infot.shape and info.dtype == torch.int32


@pytest.mark.parametrize("ashape,bshape", [((1, 1), (1,)), ((2, 1, 1), (2, 1)), ((3, 3), (3,))])
def test_solve_vector_rhs_with_left_false_raises_like_torch(backend, backend_device, ashape, bshape):
    """torch: 'Vector broadcasting of the left hand side is not supported for left=False' (a
    RuntimeError) whenever B is a vector, including n = 1 where the shapes would happen to fit."""
    A = _mat(ashape[:-2], ashape[-1], torch.float32, 5)
    B = _rhs(bshape, torch.float32, 6)
    with pytest.raises(RuntimeError):
        torch.linalg.solve(A, B, left=False)
    with pytest.raises(RuntimeError):
        LA.solve(A.to(backend_device), B.to(backend_device), left=False)
    with pytest.raises(RuntimeError):
        LA.solve_ex(A.to(backend_device), B.to(backend_device), left=False)


@pytest.mark.parametrize("left", [True, False], ids=["left", "right"])
@pytest.mark.parametrize("adjoint", [False, True], ids=["A", "AH"])
def test_lu_solve_broadcast(backend, backend_device, left, adjoint):
    dtype = torch.complex64
    n = 6
    A = _mat((2,), n, dtype, 7)
    LU, piv = torch.linalg.lu_factor(A)
    B = _rhs((3, 1, n, 2) if left else (3, 1, 2, n), dtype, 8)
    ref = torch.linalg.lu_solve(LU, piv, B, left=left, adjoint=adjoint)
    X = LA.lu_solve(LU.to(backend_device), piv.to(backend_device), B.to(backend_device), left=left,
                    adjoint=adjoint)
    assert X.shape == ref.shape == (3, 2, *B.shape[-2:])
    assert _rel(X, ref) <= _solve_bound(n, dtype)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular_matches_torch(backend, backend_device, upper, left, unit):
    """Triangles from the LU of a κ = 10 matrix (|L| <= 1, U well conditioned with it); the
    condition of the triangle is measured in float64 and used in the bound."""
    dtype = torch.complex64
    n = 20
    A = _mat((2, 1), n, dtype, 9)
    LUf, _ = torch.linalg.lu_factor(A)
    T = LUf.triu() if upper else LUf.tril()
    if unit:
        T = T - torch.diag_embed(T.diagonal(dim1=-2, dim2=-1)) + torch.eye(n, dtype=dtype)
    T_used = T.clone()
    nan = torch.full_like(T, float("nan"))
    T = T + (nan.tril(-1) if upper else nan.triu(1))
    kappa = float(torch.linalg.cond(T_used.to(torch.complex128)).max())
    B = _rhs((3, n, 4) if left else (3, 4, n), dtype, 10)
    ref = torch.linalg.solve_triangular(T_used, B, upper=upper, left=left, unitriangular=unit)
    # the other triangle holds NaN: it must not be read (torch does not read it either)
    X = LA.solve_triangular(T.to(backend_device), B.to(backend_device), upper=upper, left=left,
                            unitriangular=unit)
    assert X.shape == ref.shape == (2, 3, *B.shape[-2:])
    assert _rel(X, ref) <= _solve_bound(n, dtype, kappa)


def test_solve_triangular_keyword_contract(backend, backend_device):
    A = _mat((), 4, torch.float32, 11).triu().to(backend_device)
    B = _rhs((4, 2), torch.float32, 12).to(backend_device)
    for M, a, b in ((torch.linalg, A.cpu(), B.cpu()), (LA, A, B)):
        with pytest.raises(TypeError):
            M.solve_triangular(a, b)  # upper is required
        with pytest.raises(TypeError):
            M.solve_triangular(a, b, True)  # and keyword-only
    # defaults: left=True, unitriangular=False
    X = LA.solve_triangular(A, B, upper=True)
    Xr = torch.linalg.solve_triangular(A.cpu(), B.cpu(), upper=True, left=True, unitriangular=False)
    assert _rel(X, Xr) <= _solve_bound(4, torch.float32, float(torch.linalg.cond(A.cpu().double())))


def test_keyword_only_and_defaults(backend, backend_device):
    A = _mat((), 5, torch.float32, 13).to(backend_device)
    B = _rhs((5, 2), torch.float32, 14).to(backend_device)
    with pytest.raises(TypeError):
        LA.lu_factor(A, True)
    with pytest.raises(TypeError):
        LA.lu_factor_ex(A, True)
    with pytest.raises(TypeError):
        LA.lu(A, True)
    with pytest.raises(TypeError):
        LA.solve(A, B, True)
    with pytest.raises(TypeError):
        LA.solve_ex(A, B, True)
    with pytest.raises(TypeError):
        LA.inv_ex(A, True)
    LU, piv = LA.lu_factor(A)
    with pytest.raises(TypeError):
        LA.lu_solve(LU, piv, B, True)
    # explicit defaults give the same answers as omitted ones
    assert torch.equal(LA.lu_factor(A, pivot=True).pivots, piv)
    assert torch.equal(LA.lu_factor_ex(A, pivot=True, check_errors=False).pivots, piv)
    assert torch.equal(LA.lu_solve(LU, piv, B, left=True, adjoint=False), LA.lu_solve(LU, piv, B))
    assert torch.equal(LA.solve_ex(A, B, left=True, check_errors=False).result, LA.solve_ex(A, B).result)
    assert torch.equal(LA.inv_ex(A, check_errors=False).inverse, LA.inv_ex(A).inverse)


def test_pivot_false_raises_runtime_error(backend, backend_device):
    """torch on CPU: 'LU without pivoting is not implemented on the CPU' (RuntimeError)."""
    A = _mat((), 4, torch.float32, 15).to(backend_device)
    for f in (LA.lu_factor, LA.lu_factor_ex, LA.lu):
        with pytest.raises(RuntimeError):
            f(A, pivot=False)


# ------------------------------------------------------------------------------------------------
# out=
# ------------------------------------------------------------------------------------------------


def test_out_argument(backend, backend_device):
    """``out=`` is supported (same answer, written into and returned as ``out``) or refused with a
    TypeError; never silently ignored."""
    dtype = torch.float32
    A = _mat((2,), 5, dtype, 16).to(backend_device)
    B = _rhs((2, 5, 3), dtype, 17).to(backend_device)
    T = A.triu()
    ref = torch.linalg.solve_triangular(T.cpu(), B.cpu(), upper=True)
    out = torch.empty(0, dtype=dtype, device=backend_device)
    X = LA.solve_triangular(T, B, upper=True, out=out)
    assert X is out and out.shape == ref.shape
    assert _rel(out, ref) <= _solve_bound(5, dtype, float(torch.linalg.cond(T.cpu().double()).max()))
    with pytest.raises(RuntimeError):  # torch: "expected scalar type Float but found Double"
        LA.solve_triangular(T, B, upper=True, out=torch.empty(2, 5, 3, dtype=torch.float64))
    for name, args in (("solve", (A, B)), ("inv", (A,)), ("det", (A,)), ("lu_factor", (A,)),
                       ("lu_solve", (*torch.linalg.lu_factor(A.cpu()), B.cpu()))):
        args = tuple(a.to(backend_device) for a in args)
        ref = getattr(torch.linalg, name)(*(a.cpu() for a in args))
        out = tuple(torch.empty_like(r) for r in ref) if isinstance(ref, tuple) else torch.empty_like(ref)
        try:
            res = getattr(LA, name)(*args, out=out)
        except TypeError:
            continue  # refused clearly
        if isinstance(ref, tuple):
            assert all(r is o for r, o in zip(res, out))
        else:
            assert res is out


def test_out_with_requires_grad_raises_like_torch(backend, backend_device):
    """torch: 'functions with out=... arguments don't support automatic differentiation, but one
    of the arguments requires grad' (RuntimeError). Silently returning a result without a graph
    would drop the gradient."""
    A = _mat((), 4, torch.float32, 18).triu().to(backend_device).requires_grad_()
    B = _rhs((4, 2), torch.float32, 19).to(backend_device)
    with pytest.raises(RuntimeError):
        torch.linalg.solve_triangular(A.detach().cpu().requires_grad_(), B.cpu(), upper=True, out=torch.empty(4, 2))
    with pytest.raises(RuntimeError):
        LA.solve_triangular(A, B, upper=True, out=torch.empty(4, 2, device=backend_device))


# ------------------------------------------------------------------------------------------------
# Empty shapes
# ------------------------------------------------------------------------------------------------

_EMPTY = [(0, 0), (0, 3, 3), (2, 0, 0), (3, 0, 0, 0), (0, 2, 2)]


@pytest.mark.parametrize("shape", _EMPTY, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["f32", "c64"])
def test_empty_square(backend, backend_device, shape, dtype):
    A = torch.zeros(shape, dtype=dtype)
    n = shape[-1]
    B = torch.zeros((*shape[:-2], n, 2), dtype=dtype)
    Bd = B.to(backend_device)
    for name, args, kw in (("det", (A,), {}), ("slogdet", (A,), {}), ("inv", (A,), {}),
                           ("inv_ex", (A,), {}), ("lu_factor", (A,), {}), ("lu_factor_ex", (A,), {}),
                           ("lu", (A,), {}), ("solve", (A, B), {}), ("solve_ex", (A, B), {}),
                           ("solve_triangular", (A, B), {"upper": False})):
        ref = getattr(torch.linalg, name)(*args, **kw)
        ours = getattr(LA, name)(*(a.to(backend_device) for a in args), **kw)
        refs = ref if isinstance(ref, tuple) else (ref,)
        ourss = ours if isinstance(ours, tuple) else (ours,)
        assert type(ours) is type(ref), name
        for o, r in zip(ourss, refs):
            assert o.shape == r.shape and o.dtype == r.dtype, (name, o.shape, r.shape, o.dtype, r.dtype)
            assert torch.equal(o.cpu(), r), (name, o, r)  # exact: empty, or det(0x0) = 1, info = 0
    LU, piv = torch.linalg.lu_factor(A)
    X = LA.lu_solve(LU.to(backend_device), piv.to(backend_device), Bd)
    assert X.shape == torch.linalg.lu_solve(LU, piv, B).shape


@pytest.mark.parametrize("shape", [(3, 0), (0, 3), (2, 4, 0), (2, 0, 4)], ids=str)
def test_empty_rectangular_lu(backend, backend_device, shape):
    A = torch.zeros(shape)
    for name in ("lu_factor_ex", "lu"):
        ref = getattr(torch.linalg, name)(A)
        ours = getattr(LA, name)(A.to(backend_device))
        for o, r in zip(ours, ref):
            assert o.shape == r.shape and o.dtype == r.dtype, (name, o.shape, r.shape)
            assert torch.equal(o.cpu(), r), name  # P of an m x 0 matrix is the identity


def test_zero_rhs_columns(backend, backend_device):
    A = _mat((2,), 5, torch.float32, 20)
    B = torch.zeros(2, 5, 0)
    for X, ref in ((LA.solve(A.to(backend_device), B.to(backend_device)), torch.linalg.solve(A, B)),
                   (LA.solve_triangular(A.triu().to(backend_device), B.to(backend_device), upper=True),
                    torch.linalg.solve_triangular(A.triu(), B, upper=True))):
        assert X.shape == ref.shape


# ------------------------------------------------------------------------------------------------
# Strided, transposed, conjugate, expanded views; inputs never modified
# ------------------------------------------------------------------------------------------------


def _views(A: torch.Tensor):
    """(name, view) pairs of the same-shaped matrices ``A``-like, none of them plain contiguous."""
    n = A.shape[-1]
    big = torch.zeros((*A.shape[:-2], 2 * n, 2 * n), dtype=A.dtype)
    big[..., ::2, ::2] = A
    out = [("transposed", A.mT.contiguous().mT), ("strided", big[..., ::2, ::2]),
           ("expanded", A[:1].expand_as(A))]
    if A.is_complex():
        out += [("conj", A.conj().resolve_conj().conj()), ("mH", A.mH.resolve_conj().mH)]
    else:
        out += [("neg", torch._neg_view(-A))]
    return out


@pytest.mark.parametrize("n", [3, 8])
def test_views_give_torch_answers_and_are_not_modified(backend, backend_device, n):
    dtype = torch.complex64
    A = _mat((2,), n, dtype, 21 + n)
    B = _rhs((2, n, 2), dtype, 22)
    sb, db = _solve_bound(n, dtype), _det_bound(n, dtype)
    for name, V in _views(A):
        if backend_device.type != "cpu":
            V = V.to(backend_device)
        Vs = V.clone()
        conj = V.is_conj()
        for Bv in (B, B.mT.contiguous().mT, B.conj().resolve_conj().conj(), B[:1].expand_as(B)):
            Bs = Bv.clone()
            bconj = Bv.is_conj()
            assert _rel(LA.solve(V, Bv), torch.linalg.solve(V.cpu(), Bv)) <= sb, name
            assert _rel(LA.solve(V, Bv.mT, left=False), torch.linalg.solve(V.cpu(), Bv.mT, left=False)) <= sb, name
            T = V.triu() if name != "expanded" else V
            assert _rel(LA.solve_triangular(V, Bv, upper=True),
                        torch.linalg.solve_triangular(V.cpu(), Bv, upper=True)) <= _solve_bound(
                n, dtype, float(torch.linalg.cond(T.cpu().triu().to(torch.complex128)).max())), name
            assert torch.equal(Bv, Bs) and Bv.is_conj() == bconj
        assert _rel(LA.inv(V), torch.linalg.inv(V.cpu())) <= sb, name
        assert _rel(LA.det(V), torch.linalg.det(V.cpu())) <= db, name
        s, la = LA.slogdet(V)
        st, lat = torch.linalg.slogdet(V.cpu())
        assert float((s.cpu() - st).abs().max()) <= db and float((la.cpu() - lat).abs().max()) <= db, name
        LU, piv = LA.lu_factor(V)
        LUt, pivt = torch.linalg.lu_factor(V.cpu())
        assert torch.equal(piv.cpu(), pivt), name
        X = LA.lu_solve(LU, piv, B.to(backend_device), adjoint=True)
        assert _rel(X, torch.linalg.lu_solve(LUt, pivt, B, adjoint=True)) <= sb, name
        # lu_solve with conj / transposed views of the factors themselves
        LUc = LU.conj()
        X = LA.lu_solve(LUc, piv, B.to(backend_device))
        assert _rel(X, torch.linalg.lu_solve(LUt.conj(), pivt, B)) <= sb, name
        assert torch.equal(V, Vs) and V.is_conj() == conj, f"{name} view was modified"


def test_inputs_never_modified(backend, backend_device):
    """Every op on every kind of input, then compare with a clone (bit-exact: nothing may write)."""
    for dtype in (torch.float32, torch.complex64):
        for n in (2, 4, 7):
            A = _mat((2,), n, dtype, 30 + n).to(backend_device)
            A[1, :, 0] = 0  # a singular batch element too
            B = _rhs((2, n, 3), dtype, 31).to(backend_device)
            inputs = [A, A.conj(), A.mT, A.mH]
            for V in inputs:
                Vs, Bs = V.clone(), B.clone()
                LA.lu_factor_ex(V)
                LA.lu(V)
                LA.solve_ex(V, B)
                LA.solve_ex(V, B.mT, left=False)
                LA.det(V)
                LA.slogdet(V)
                LA.inv_ex(V)
                LA.solve_triangular(V, B, upper=False)
                LA.solve_triangular(V, B.mT, upper=True, left=False, unitriangular=True)
                LU, piv, _ = LA.lu_factor_ex(V)
                LUs, pivs = LU.clone(), piv.clone()
                LA.lu_solve(LU, piv, B, adjoint=True)
                LA.lu_solve(LU.mH, piv, B)
                assert torch.equal(LU, LUs) and torch.equal(piv, pivs)
                assert torch.equal(V, Vs) and torch.equal(B, Bs)


# ------------------------------------------------------------------------------------------------
# Singular input: info values, LinAlgError, det = 0, slogdet = (0, -inf)
# ------------------------------------------------------------------------------------------------


def _singular_batch(n, dtype):
    """Exactly singular matrices whose zero pivot is exact in any rounding (see comments)."""
    A = _mat((5,), n, dtype, 40 + n)
    A[1, :, n // 2] = 0        # zero column j: U[:j, j] solves to 0, pivot j is exactly 0, info = j+1
    A[2, n - 1, :] = 0         # zero row: never chosen as pivot until last; info = n
    A[3] = 0                   # zero matrix: info = 1
    A[4, :, 0] = 0             # zero first column: info = 1
    A[4, :, n - 1] = 0         # (and a later one: info is the first)
    return A


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.float64], ids=["f32", "c64", "f64"])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 6])
def test_singular_info_det_slogdet(backend, backend_device, dtype, n):
    if backend_device.type == "mps" and dtype == torch.float64:
        pytest.skip("mps has no float64")
    A = _singular_batch(n, dtype)
    Ad = A.to(backend_device)
    B = _rhs((5, n, 2), dtype, 41).to(backend_device)
    _, _, info_t = torch.linalg.lu_factor_ex(A)
    assert info_t[0] == 0 and (info_t[1:] > 0).all()  # the construction is what it claims
    _, _, info = LA.lu_factor_ex(Ad)
    assert torch.equal(info.cpu(), info_t), f"lu_factor_ex info {info.tolist()} vs torch {info_t.tolist()}"
    _, info = LA.solve_ex(Ad, B)
    assert torch.equal(info.cpu(), torch.linalg.solve_ex(A, B.cpu()).info), f"solve_ex info {info.tolist()}"
    _, info = LA.inv_ex(Ad)
    assert torch.equal(info.cpu(), torch.linalg.inv_ex(A).info), (
        f"inv_ex info {info.tolist()} vs torch {torch.linalg.inv_ex(A).info.tolist()}")
    d = LA.det(Ad).cpu()
    dt = torch.linalg.det(A)
    assert torch.equal(d[1:], torch.zeros(4, dtype=dtype)), f"det of singular: {d[1:].tolist()}"
    assert _rel(d[:1], dt[:1]) <= _det_bound(n, dtype)
    s, la = LA.slogdet(Ad)
    assert torch.equal(s.cpu()[1:], torch.zeros(4, dtype=dtype)), f"slogdet sign {s.tolist()}"
    assert torch.equal(la.cpu()[1:], torch.full((4,), -math.inf, dtype=_real(dtype))), f"logabsdet {la.tolist()}"
    # the non-singular element is unaffected by its singular neighbours
    X, _ = LA.solve_ex(Ad, B)
    assert _rel(X[0], torch.linalg.solve(A[0], B[0].cpu())) <= _solve_bound(n, dtype)


@pytest.mark.parametrize("n", [3, 6])
def test_singular_raises_linalg_error(backend, backend_device, n):
    A = _singular_batch(n, torch.float32).to(backend_device)
    B = _rhs((5, n, 2), torch.float32, 42).to(backend_device)
    calls = [
        lambda: LA.solve(A, B), lambda: LA.inv(A), lambda: LA.lu_factor(A),
        lambda: LA.solve_ex(A, B, check_errors=True), lambda: LA.inv_ex(A, check_errors=True),
        lambda: LA.lu_factor_ex(A, check_errors=True),
    ]
    for call in calls:
        with pytest.raises(torch.linalg.LinAlgError, match="singular"):  # torch's messages say so
            call()
    # LinAlgError is a RuntimeError: code written against torch catches it either way
    assert issubclass(torch.linalg.LinAlgError, RuntimeError)
    # these never raise on singular input (as torch)
    LA.lu(A)
    LA.det(A)
    LA.slogdet(A)
    LA.lu_factor_ex(A)
    LA.solve_ex(A, B)
    LA.inv_ex(A)
    LA.solve_triangular(torch.zeros(n, n, device=backend_device), B, upper=True)


# ------------------------------------------------------------------------------------------------
# Bad input: error types (torch raises RuntimeError for shapes/dtypes, TypeError for non-tensors)
# ------------------------------------------------------------------------------------------------


def _bad_calls(dev):
    A = torch.randn(3, 3, device=dev)
    B = torch.randn(3, 2, device=dev)
    LU, piv = torch.linalg.lu_factor(A.cpu())
    LU, piv = LU.to(dev), piv.to(dev)
    return {
        "inv 1-D": lambda M: M.inv(torch.randn(3, device=dev)),
        "inv non-square": lambda M: M.inv(torch.randn(3, 2, device=dev)),
        "inv_ex non-square": lambda M: M.inv_ex(torch.randn(2, 3, 2, device=dev)),
        "det non-square": lambda M: M.det(torch.randn(3, 2, device=dev)),
        "slogdet non-square": lambda M: M.slogdet(torch.randn(3, 2, device=dev)),
        "det int": lambda M: M.det(torch.ones(3, 3, dtype=torch.int64, device=dev)),
        "inv bool": lambda M: M.inv(torch.ones(3, 3, dtype=torch.bool, device=dev)),
        "inv half": lambda M: M.inv(torch.eye(3, dtype=torch.float16, device=dev)),
        "lu_factor 1-D": lambda M: M.lu_factor(torch.randn(3, device=dev)),
        "lu_factor int": lambda M: M.lu_factor(torch.ones(3, 3, dtype=torch.int32, device=dev)),
        "lu 1-D": lambda M: M.lu(torch.randn(3, device=dev)),
        "solve non-square A": lambda M: M.solve(torch.randn(3, 2, device=dev), B),
        "solve rows": lambda M: M.solve(A, torch.randn(4, 2, device=dev)),
        "solve cols left=False": lambda M: M.solve(A, torch.randn(2, 4, device=dev), left=False),
        "solve batch": lambda M: M.solve(torch.randn(2, 3, 3, device=dev), torch.randn(4, 3, 1, device=dev)),
        "solve dtypes": lambda M: M.solve(A, B.to(torch.float64) if dev.type != "mps" else B.to(torch.complex64)),
        "solve int": lambda M: M.solve(A.int(), B.int()),
        "solve 0-d B": lambda M: M.solve(A, torch.tensor(1.0, device=dev)),
        "solve_ex rows": lambda M: M.solve_ex(A, torch.randn(4, device=dev)),
        "lu_solve 1-D B": lambda M: M.lu_solve(LU, piv, torch.randn(3, device=dev)),
        "lu_solve int64 pivots": lambda M: M.lu_solve(LU, piv.long(), B),
        "lu_solve rows": lambda M: M.lu_solve(LU, piv, torch.randn(4, 2, device=dev)),
        "lu_solve non-square LU": lambda M: M.lu_solve(torch.randn(3, 4, device=dev), piv, B),
        "lu_solve pivots shape": lambda M: M.lu_solve(LU, piv[:2], B),
        "lu_solve dtypes": lambda M: M.lu_solve(LU, piv, B.to(torch.complex64)),
        "solve_triangular non-square": lambda M: M.solve_triangular(torch.randn(3, 2, device=dev), B, upper=True),
        "solve_triangular rows": lambda M: M.solve_triangular(A, torch.randn(4, 2, device=dev), upper=True),
        "solve_triangular 1-D B": lambda M: M.solve_triangular(A, torch.randn(3, device=dev), upper=True),
        "solve_triangular batch": lambda M: M.solve_triangular(torch.randn(2, 3, 3, device=dev),
                                                               torch.randn(4, 3, 1, device=dev), upper=True),
        "solve_triangular int": lambda M: M.solve_triangular(A.int(), B.int(), upper=True),
    }


def test_bad_input_raises_runtime_error_like_torch(backend, backend_device):
    """Wherever torch raises a RuntimeError, ours must be catchable as RuntimeError."""
    problems = []
    for name, call in _bad_calls(backend_device).items():
        try:
            call(torch.linalg if backend_device.type == "cpu" else LA)
            torch_raised = None
        except Exception as e:  # noqa: BLE001
            torch_raised = e
        try:
            call(LA)
            ours = None
        except Exception as e:  # noqa: BLE001
            ours = e
        if ours is None:
            problems.append(f"{name}: no error (torch: {type(torch_raised).__name__})")
        elif isinstance(torch_raised, RuntimeError) and not isinstance(ours, RuntimeError):
            problems.append(f"{name}: {type(ours).__name__} is not a RuntimeError (torch raises one)")
        elif (torch_raised is not None and not isinstance(ours, type(torch_raised))
              and not isinstance(ours, RuntimeError)):
            problems.append(f"{name}: {type(ours).__name__} vs torch {type(torch_raised).__name__}")
    assert not problems, problems


def test_non_tensor_input_raises_type_error(backend):
    for call in (lambda: LA.det([[1.0, 0.0], [0.0, 1.0]]), lambda: LA.inv(None),
                 lambda: LA.solve(torch.eye(2), [1.0, 2.0]), lambda: LA.lu_factor(3.0),
                 lambda: LA.solve_triangular(torch.eye(2), [[1.0], [2.0]], upper=True)):
        with pytest.raises(TypeError):
            call()


# ------------------------------------------------------------------------------------------------
# Gradients equal torch's (float64 / complex128) and float32 gradients within κ-scaled bounds
# ------------------------------------------------------------------------------------------------


def _grad_cases(n, dtype):
    A = _mat((2,), n, dtype, 50 + n)
    B = _rhs((2, n, 2), dtype, 51)
    LU, piv = torch.linalg.lu_factor(A)
    T = LU.triu()
    return {
        "solve": ((A, B), lambda M, a, b: M.solve(a, b)),
        "solve_left_false": ((A, B.mT), lambda M, a, b: M.solve(a, b, left=False)),
        "solve_vector": ((A, B[..., 0]), lambda M, a, b: M.solve(a, b)),
        "solve_ex": ((A, B), lambda M, a, b: M.solve_ex(a, b).result),
        "inv": ((A,), lambda M, a: M.inv(a)),
        "inv_ex": ((A,), lambda M, a: M.inv_ex(a).inverse),
        "det": ((A,), lambda M, a: M.det(a)),
        "slogdet_sign": ((A,), lambda M, a: M.slogdet(a).sign),  # constant (±1) when real
        "logabsdet": ((A,), lambda M, a: M.slogdet(a).logabsdet),
        "lu_factor": ((A,), lambda M, a: M.lu_factor(a).LU),
        "lu": ((A,), lambda M, a: torch.cat([M.lu(a).L, M.lu(a).U], -1)),
        "lu_solve": ((LU, B), lambda M, lu, b: M.lu_solve(lu, piv, b)),
        "lu_solve_adjoint_right": ((LU, B.mT), lambda M, lu, b: M.lu_solve(lu, piv, b, left=False, adjoint=True)),
        "solve_triangular": ((T, B), lambda M, t, b: M.solve_triangular(t, b, upper=True)),
        "solve_triangular_right_unit": ((T, B.mT), lambda M, t, b: M.solve_triangular(
            t, b, upper=True, left=False, unitriangular=True)),
    }


def _zero_if_none(g, like):
    """torch leaves ``.grad`` None where an output does not depend on an input (the sign of a real
    determinant is locally constant); zeros are the same derivative."""
    return torch.zeros_like(like) if g is None else g


def _grads(M, args, f, seed):
    leaves = [a.detach().clone().requires_grad_() for a in args]
    y = f(M, *leaves)
    g = _rhs(y.shape, y.dtype, seed) if y.is_complex() else _rhs(y.shape, y.dtype, seed)
    (y * g.conj() if y.is_complex() else y * g).real.sum().backward()
    return y.detach(), [x.grad for x in leaves]


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=["f64", "c128"])
@pytest.mark.parametrize("n", [3, 6])
def test_grads_equal_torch_float64(backend, dtype, n):
    """Bound: GRAD_C κ² u relative (module docstring); for lu/lu_factor the factors' own condition
    enters, bounded here by κ(L)κ(U) measured in float64."""
    if backend == "metal":
        pytest.skip("float64 gradients run on the CPU")
    for name, (args, f) in _grad_cases(n, dtype).items():
        y, g = _grads(LA, args, f, 60)
        yt, gt = _grads(torch.linalg, args, f, 60)
        LU = torch.linalg.lu_factor(args[0])[0]
        kL = float(torch.linalg.cond(LU.tril(-1) + torch.eye(n, dtype=dtype)).max())
        kU = float(torch.linalg.cond(LU.triu()).max())
        kappa = KAPPA * (kL * kU if name in ("lu", "lu_factor", "lu_solve", "lu_solve_adjoint_right") else 1)
        bound = 60 * math.sqrt(n) * kappa**2 * _u(dtype)
        assert _rel(y, yt) <= bound, f"{name}: value"
        for i, (a, b) in enumerate(zip(g, gt)):
            a, b = _zero_if_none(a, args[i]), _zero_if_none(b, args[i])
            assert a.shape == b.shape and a.dtype == b.dtype, f"{name}: grad {i} shape/dtype"
            assert _rel(a, b) <= bound, f"{name}: grad {i} rel diff {_rel(a, b):.2e} > {bound:.2e}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["f32", "c64"])
def test_grads_float32_near_torch_float64(backend, backend_device, dtype):
    n = 5
    wide = torch.complex128 if dtype.is_complex else torch.float64
    for name, (args, f) in _grad_cases(n, dtype).items():
        if name in ("lu", "lu_factor", "lu_solve", "lu_solve_adjoint_right", "solve_triangular",
                    "solve_triangular_right_unit"):
            continue  # condition of the factors, not κ(A), governs these; covered in float64 above
        y, g = _grads(LA, tuple(a.to(backend_device) for a in args), f, 61)
        yt, gt = _grads(torch.linalg, tuple(a.to(wide) for a in args), f, 61)
        bound = 60 * math.sqrt(n) * KAPPA**2 * _u(dtype)
        for i, (a, b) in enumerate(zip(g, gt)):
            a, b = _zero_if_none(a, args[i]), _zero_if_none(b, args[i].to(wide))
            assert a.dtype == dtype, f"{name}: grad {i}"
            assert _rel(a, b) <= bound, f"{name}: grad {i} rel diff {_rel(a, b):.2e} > {bound:.2e}"


# ------------------------------------------------------------------------------------------------
# Devices
# ------------------------------------------------------------------------------------------------


def test_mixed_devices_raise():
    if not torch.cuda.is_available():
        pytest.skip("needs a second device (CUDA) to mix with the CPU")
    A = torch.randn(3, 3)
    B = torch.randn(3, 2, device="cuda")
    with pytest.raises(RuntimeError):
        LA.solve(A, B)
    with pytest.raises(RuntimeError):
        LA.solve_triangular(A, B, upper=True)


# ------------------------------------------------------------------------------------------------
# Non-finite input: NaN wherever LAPACK (torch) gives NaN
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("val", [math.inf, math.nan], ids=["inf", "nan"])
@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_nonfinite_input_nan_where_torch_nan(backend, backend_device, n, val):
    """DESIGN §7: 'results are NaN where LAPACK's would be'. A finite, plausible-looking number
    where LAPACK's result is NaN hides bad input, so wherever torch's output is NaN ours must be
    NaN too (ours may be NaN in more places: that is not checked)."""
    problems = []
    for dtype in (torch.float32, torch.complex64):
        A = _mat((), n, dtype, 70 + n)
        A[1, 1] = val
        B = _rhs((n, 2), dtype, 71)
        Ad, Bd = A.to(backend_device), B.to(backend_device)
        pairs = {
            "det": (LA.det(Ad), torch.linalg.det(A)),
            "slogdet.logabsdet": (LA.slogdet(Ad).logabsdet, torch.linalg.slogdet(A).logabsdet),
            "inv_ex": (LA.inv_ex(Ad).inverse, torch.linalg.inv_ex(A).inverse),
            "solve_ex": (LA.solve_ex(Ad, Bd).result, torch.linalg.solve_ex(A, B).result),
            "lu_factor_ex": (LA.lu_factor_ex(Ad).LU, torch.linalg.lu_factor_ex(A).LU),
        }
        for name, (ours, ref) in pairs.items():
            ours = ours.cpu()
            missing = ref.isnan() & ~ours.isnan()
            if missing.any():
                problems.append(f"{dtype} {name}: torch {ref.flatten()[:4].tolist()} ours "
                                f"{ours.flatten()[:4].tolist()} ({int(missing.sum())} entries not NaN)")
    assert not problems, problems


# ------------------------------------------------------------------------------------------------
# compile_shader: the emulator against torch.mps.compile_shader's contract
# (torch/csrc/mps/Module.cpp: argument i binds buffer(i); threads defaults to numel of the first
# tensor argument; group_size defaults to min(threads, max_threads_per_threadgroup) in 1-D;
# threads/group_size/arg_casts are keyword-only; every TORCH_CHECK failure is a RuntimeError).
# Only what tests/emulator/ does not already cover.
# ------------------------------------------------------------------------------------------------

_SHADER = """
#include <metal_stdlib>
using namespace metal;

kernel void fill(device float* out [[buffer(0)]], constant float& v [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) {
    out[i] = v;
}

// the first *tensor* argument is buffer(1): default threads = its numel
kernel void fill_second(constant float& v [[buffer(0)]], device float* out [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
    out[i] = v;
}

kernel void groups(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]],
                   uint g [[threadgroup_position_in_grid]],
                   uint d [[dispatch_threads_per_threadgroup]]) {
    out[2 * i] = g;
    out[2 * i + 1] = d;
}
"""


@pytest.fixture(params=["emulator", pytest.param("metal", marks=pytest.mark.mps)])
def compile_shader(request):
    if request.param == "emulator":
        from helpers import require_emulator

        require_emulator()
        from mpslinalg import emulator

        return emulator.compile_shader, torch.device("cpu")
    return torch.mps.compile_shader, torch.device("mps")


def test_shader_dir_and_default_threads(compile_shader):
    compile, dev = compile_shader
    lib = compile(_SHADER)
    assert {"fill", "fill_second", "groups"} <= set(dir(lib))
    assert not {"fill", "fill_second", "groups"} ^ {k for k in dir(lib) if not k.startswith("_")}
    x = torch.zeros(37, device=dev)
    lib.fill_second(2.5, x)  # threads = numel of x although x is argument 1
    assert torch.equal(x.cpu(), torch.full((37,), 2.5))
    for threads in (5, [5], (5,)):  # an int or a sequence of 1-3 ints
        y = torch.zeros(8, device=dev)
        lib.fill(y, 1.0, threads=threads)
        assert y.cpu().tolist() == [1.0] * 5 + [0.0] * 3


def test_shader_default_group_size(compile_shader):
    compile, dev = compile_shader
    lib = compile(_SHADER)
    k = lib.groups
    n = 2 * k.max_threads_per_threadgroup + 7
    out = torch.zeros(2 * n, dtype=torch.int32, device=dev)
    k(out, threads=n)  # group_size defaults to min(threads, max_threads_per_threadgroup)
    out = out.cpu().reshape(n, 2)
    gs = min(n, k.max_threads_per_threadgroup)
    assert torch.equal(out[:, 1], torch.full((n,), gs, dtype=torch.int32))
    assert torch.equal(out[:, 0], torch.arange(n, dtype=torch.int32) // gs)


def test_shader_empty_library(compile_shader):
    compile, _ = compile_shader
    lib = compile("// Empty library\n")
    assert [k for k in dir(lib) if not k.startswith("_")] == []


def test_shader_torch_check_failures_are_runtime_errors(compile_shader):
    """Each call below fails a TORCH_CHECK in torch (a RuntimeError); code written against
    torch.mps catches RuntimeError, so the emulator's error must be one (it may also be a
    ValueError/TypeError, like mpslinalg's own errors)."""
    compile, dev = compile_shader
    lib = compile(_SHADER)
    x = torch.zeros(4, device=dev)
    calls = {
        "no tensor and no threads": lambda: lib.fill([1.0, 2.0], 1.0),
        "4-D threads": lambda: lib.fill(x, 1.0, threads=[1, 1, 1, 1]),
        "group_size rank != threads rank": lambda: lib.fill(x, 1.0, threads=[4, 1], group_size=[4]),
        "arg_casts of wrong type": lambda: lib.fill(x, 1.0, arg_casts=["fp16"]),
        "unsupported cast": lambda: lib.fill(x, 1.0, arg_casts="fp8"),
        "str argument": lambda: lib.fill(x, "1.0"),
        "empty list argument": lambda: lib.fill(x, []),
        "list of str argument": lambda: lib.fill(x, ["a"]),
        "unknown kernel": lambda: lib.no_such_kernel,
    }
    problems = []
    for name, call in calls.items():
        try:
            call()
        except RuntimeError:
            continue
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: {type(e).__name__} ({type(e).__mro__[1].__name__}) is not a RuntimeError")
        else:
            problems.append(f"{name}: no error")
    assert not problems, problems


def test_shader_unknown_keyword_is_type_error(compile_shader):
    compile, dev = compile_shader
    lib = compile(_SHADER)
    with pytest.raises(TypeError):  # pybind rejects unknown keywords with a TypeError
        lib.fill(torch.zeros(4, device=dev), 1.0, thread=4)


def test_shader_source_errors_are_runtime_errors(compile_shader):
    """torch: a source Metal rejects fails in DynamicMetalShaderLibrary (TORCH_CHECK, a
    RuntimeError; SyntaxError in some versions). ``double`` does not exist in MSL, so a kernel
    using it is rejected at compile time on a Mac."""
    compile, _ = compile_shader
    bad = {
        "syntax": "kernel void k(device float* x [[buffer(0)]] { x[0] = 1; }",
        "double": ("kernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) "
                   "{ double d = 1.0; x[i] = d; }"),
    }
    problems = []
    for name, src in bad.items():
        try:
            compile(src)
        except (RuntimeError, SyntaxError):
            continue
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: {type(e).__name__} is not a RuntimeError")
        else:
            problems.append(f"{name}: compiled")
    assert not problems, problems


def test_outputs_do_not_alias_inputs(backend, backend_device):
    """Writing into a result must never change an input (torch returns fresh tensors), including
    trivial cases (1x1, zero right-hand-side columns) where returning a view would be tempting."""
    for n, k in ((1, 1), (3, 2), (6, 2), (5, 0)):
        A = _mat((2,), n, torch.float32, 80 + n).to(backend_device)
        B = _rhs((2, n, k), torch.float32, 81).to(backend_device)
        T = A.triu()
        LU, piv = LA.lu_factor(A)
        A0, B0, T0, LU0, piv0 = A.clone(), B.clone(), T.clone(), LU.clone(), piv.clone()
        outs = [LA.solve(A, B), LA.solve_ex(A, B).result, LA.inv(A), LA.inv_ex(A).inverse, LA.det(A),
                *LA.slogdet(A), *LA.lu_factor_ex(A), *LA.lu(A), LA.lu_solve(LU, piv, B),
                LA.solve_triangular(T, B, upper=True), LA.solve_triangular(T, B, upper=True, unitriangular=True)]
        for o in outs:
            o.fill_(7)
        assert torch.equal(A, A0) and torch.equal(B, B0) and torch.equal(T, T0)
        assert torch.equal(LU, LU0) and torch.equal(piv, piv0)


def test_grads_with_batch_broadcasting(backend):
    """Gradients of broadcast inputs are reduced to each input's own shape, as torch's; values
    within the float64 bound GRAD_C κ² u of the module docstring."""
    if backend == "metal":
        pytest.skip("float64 gradients run on the CPU")
    n, dtype = 5, torch.float64
    A = _mat((2, 1), n, dtype, 90)
    B = _rhs((3, n, 2), dtype, 91)
    b = _rhs((n,), dtype, 92)
    LU, piv = torch.linalg.lu_factor(A)
    bound = 60 * math.sqrt(n) * KAPPA**2 * _u(dtype)
    cases = {
        "solve": ((A, B), lambda M, a, x: M.solve(a, x)),
        "solve_vector": ((A, b), lambda M, a, x: M.solve(a, x)),
        "solve_triangular": ((A, B), lambda M, a, x: M.solve_triangular(a, x, upper=False, unitriangular=True)),
    }
    for name, (args, f) in cases.items():
        _, g = _grads(LA, args, f, 93)
        _, gt = _grads(torch.linalg, args, f, 93)
        for i, (x, y) in enumerate(zip(g, gt)):
            assert x.shape == y.shape == args[i].shape, f"{name}: grad {i} shape {x.shape} vs {y.shape}"
            assert _rel(x, y) <= bound, f"{name}: grad {i}"
    _, g = _grads(LA, (LU, B), lambda M, lu, x: M.lu_solve(lu, piv, x), 94)
    _, gt = _grads(torch.linalg, (LU, B), lambda M, lu, x: M.lu_solve(lu, piv, x), 94)
    for x, y in zip(g, gt):
        assert x.shape == y.shape
        kL = float(torch.linalg.cond(LU.tril(-1) + torch.eye(n, dtype=dtype)).max())
        kU = float(torch.linalg.cond(LU.triu()).max())
        assert _rel(x, y) <= 60 * math.sqrt(n) * (KAPPA * kL * kU) ** 2 * _u(dtype)


def test_torch_compile_fullgraph(backend, backend_device):
    """torch.linalg ops trace without graph breaks; ours are custom ops with fake implementations
    (DESIGN §6), so fullgraph=True must hold. aot_eager: the same code path as inductor's tracing
    without a C++ build. Results within the solve/det bounds of the module docstring."""
    dtype, n = torch.float32, 6
    A = _mat((2,), n, dtype, 95).to(backend_device)
    B = _rhs((2, n, 2), dtype, 96).to(backend_device)

    def f(A, B):
        X = LA.solve(A, B)
        Y = LA.solve_triangular(A.triu(), B, upper=True)
        LU, piv, info = LA.lu_factor_ex(A)
        Z = LA.lu_solve(LU, piv, B)
        s, la = LA.slogdet(A)
        return X, Y, Z, LA.inv(A), LA.det(A), s, la, info

    torch._dynamo.reset()
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(A, B)
    ref = f(A, B)
    kT = float(torch.linalg.cond(A.cpu().triu().double()).max())
    for i, (x, y) in enumerate(zip(got, ref)):
        assert x.shape == y.shape and x.dtype == y.dtype, i
        bound = _solve_bound(n, dtype, kT if i == 1 else KAPPA) if i < 4 else _det_bound(n, dtype)
        assert _rel(x, y) <= bound, i


# ------------------------------------------------------------------------------------------------
# torch.func transforms (vmap, grad, jacrev) and meta tensors, which torch.linalg supports
# ------------------------------------------------------------------------------------------------


def _func_cases(n, dtype):
    A = _mat((3,), n, dtype, 100 + n)
    B = _rhs((3, n, 2), dtype, 101)
    LU, piv = torch.linalg.lu_factor(A)
    return {
        "inv": ((A,), lambda M, a: M.inv(a)),
        "inv_ex": ((A,), lambda M, a: M.inv_ex(a).inverse),
        "det": ((A,), lambda M, a: M.det(a)),
        "slogdet": ((A,), lambda M, a: M.slogdet(a).logabsdet),
        "solve": ((A, B), lambda M, a, b: M.solve(a, b)),
        "solve_ex": ((A, B), lambda M, a, b: M.solve_ex(a, b).result),
        "solve_triangular": ((A.triu(), B), lambda M, a, b: M.solve_triangular(a, b, upper=True)),
        "lu_factor": ((A,), lambda M, a: M.lu_factor(a).LU),
        "lu_factor_ex": ((A,), lambda M, a: M.lu_factor_ex(a).LU),
        "lu": ((A,), lambda M, a: M.lu(a).U),
        "lu_solve": ((LU, B), lambda M, lu, b: M.lu_solve(lu, piv[0], b)),
    }


def _factor_kappa(A):
    LU = torch.linalg.lu_factor(A)[0]
    n = A.shape[-1]
    kL = float(torch.linalg.cond(LU.tril(-1) + torch.eye(n, dtype=A.dtype)).max())
    return KAPPA * kL * float(torch.linalg.cond(LU.triu()).max())


def _transform_problems(transform, backend):
    """Run ``transform`` on each op for torch.linalg and for us; list the ops where ours fails or
    differs by more than GRAD_C κ² u (float64; κ includes the LU factors' conditions where the
    factors are differentiated)."""
    n, dtype = 4, torch.float64
    problems = []
    for name, (args, f) in _func_cases(n, dtype).items():
        ref = transform(lambda *a, f=f: f(torch.linalg, *a), args)
        try:
            ours = transform(lambda *a, f=f: f(LA, *a), args)
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: {type(e).__name__}: {str(e)[:100]}")
            continue
        kappa = _factor_kappa(args[0]) if name.startswith("lu") else KAPPA
        bound = 60 * math.sqrt(n) * kappa**2 * _u(dtype)
        if ours.shape != ref.shape or _rel(ours, ref) > bound:
            problems.append(f"{name}: shape {tuple(ours.shape)} vs {tuple(ref.shape)}, rel {_rel(ours, ref):.1e}")
    return problems


def test_vmap(backend):
    """torch.vmap over a batch dimension gives the batched result, as for torch.linalg."""
    if backend == "metal":
        pytest.skip("float64 on the CPU")
    problems = _transform_problems(lambda f, args: torch.vmap(f)(*args), backend)
    assert not problems, problems


def test_func_grad_and_jacrev(backend):
    """torch.func.grad / jacrev (VMC codes take Hessians of log-determinants this way)."""
    if backend == "metal":
        pytest.skip("float64 on the CPU")
    problems = _transform_problems(
        lambda f, args: torch.func.grad(lambda *a: f(*a).sum())(*(x[0] for x in args)), backend)
    problems += _transform_problems(
        lambda f, args: torch.func.jacrev(f)(*(x[0] for x in args)), backend)
    assert not problems, problems


def test_meta_tensors():
    """torch.linalg ops on meta tensors return outputs of the right shape and dtype (shape
    inference without data); the default backend serves meta tensors."""
    problems = []
    for dtype in (torch.float32, torch.complex64):
        for name, (args, f) in _func_cases(4, dtype).items():
            meta = [a.to("meta") for a in args]
            if name == "lu_solve":  # pivots of the batched LU
                piv = torch.ones(3, 4, dtype=torch.int32, device="meta")
                ref = torch.linalg.lu_solve(meta[0], piv, meta[1])
                call = lambda m=meta, p=piv: LA.lu_solve(m[0], p, m[1])  # noqa: E731
            else:
                ref = f(torch.linalg, *meta)
                call = lambda f=f, m=meta: f(LA, *m)  # noqa: E731
            try:
                ours = call()
            except Exception as e:  # noqa: BLE001
                problems.append(f"{dtype} {name}: {type(e).__name__}: {str(e)[:100]}")
                continue
            if ours.shape != ref.shape or ours.dtype != ref.dtype or ours.device.type != "meta":
                problems.append(f"{dtype} {name}: {ours.shape} {ours.dtype} {ours.device} vs {ref.shape} {ref.dtype}")
    assert not problems, problems


def test_flag_arguments_must_be_bool(backend, backend_device):
    """torch's bindings reject non-bool flags with a TypeError ("argument 'left' must be bool,
    not int"); silently taking truthiness (pivot="no" is truthy) hides mistakes."""
    A = _mat((), 5, torch.float32, 110).to(backend_device)
    B = _rhs((5, 2), torch.float32, 111).to(backend_device)
    LU, piv = LA.lu_factor(A)
    calls = {
        "solve left=1": lambda M: M.solve(A, B, left=1),
        "solve_ex left=None": lambda M: M.solve_ex(A, B, left=None),
        "solve_ex check_errors=1": lambda M: M.solve_ex(A, B, check_errors=1),
        "lu_factor pivot=1": lambda M: M.lu_factor(A, pivot=1),
        "lu_factor_ex check_errors=0": lambda M: M.lu_factor_ex(A, check_errors=0),
        "lu pivot='yes'": lambda M: M.lu(A, pivot="yes"),
        "lu_solve adjoint=1": lambda M: M.lu_solve(LU, piv, B, adjoint=1),
        "lu_solve left=0": lambda M: M.lu_solve(LU, piv, B, left=0),
        "inv_ex check_errors=1": lambda M: M.inv_ex(A, check_errors=1),
        "solve_triangular unitriangular=1": lambda M: M.solve_triangular(A, B, upper=True, unitriangular=1),
    }
    problems = []
    for name, call in calls.items():
        with pytest.raises(TypeError):
            call(torch.linalg)  # the rule, as torch applies it
        try:
            call(LA)
        except TypeError:
            continue
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: {type(e).__name__}")
        else:
            problems.append(f"{name}: accepted")
    assert not problems, problems
