"""Parity with ``torch.linalg``: return types, named tuples, output dtypes, values, rectangular LU,
shapes (broadcasting, vector right-hand sides, ``left=False``), keyword-only arguments and defaults.
Bounds derived in ``tests/parity/common.py``.
"""

from __future__ import annotations

import math

import pytest
import torch
from parity.common import (
    ALL_DTYPES,
    DTYPE_IDS,
    _det_bound,
    _gauss,
    _lu_ratio,
    _mat,
    _real,
    _rel,
    _rhs,
    _solve_bound,
    _u,
)

import mpslinalg as LA

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
    """n <= 4 takes the small-matrix path, n = 12 the LU path; bounds in tests/parity/common.py."""
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
