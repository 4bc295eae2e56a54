"""API parity of the LU family with ``torch.linalg`` beyond values: ``solve_ex``'s ``info`` shape,
``torch.func`` transforms (``vmap``, ``grad``, ``jacrev``, Hessians), meta tensors, ``out=``, flag
types, non-finite input.

Bounds (float64, ``u = 2^-53``; test matrices ``U diag(s) Vᴴ`` with ``κ₂ = 10``): every op here is a
few backward-stable solves with ``A`` or ``Aᴴ`` (LAPACK ratio < 30); two such evaluations differ by
at most ``2 · 30 √n κ u`` relative per solve, and gradients chain two solves (``κ²``):
``GRAD_C = 60 √n κ² u``, the bound of ``tests/parity/common.py``. A Hessian of ``log|det A|`` is
``-tr(A⁻¹ dA A⁻¹ dA)``: two inverses again, the same bound. n = 6 > 4, so the LU path (not the
small family) is what is checked.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import gaussian

import mpslinalg as LA
from reference import matrices

N = 6
KAPPA = 10.0
U64 = 2.0**-53
GRAD_BOUND = 60 * math.sqrt(N) * KAPPA**2 * U64


def _A(dtype, batch=(3,), seed=0, n=N):
    return matrices.with_condition(n, KAPPA, batch=batch, dtype=dtype, seed=seed)


def _B(shape, dtype, seed=1):
    return gaussian(shape, dtype, seed)


def _rel(x, ref):
    x, ref = x.to(torch.complex128), ref.to(torch.complex128)
    return float((x - ref).abs().max() / ref.abs().max().clamp_min(1e-300))


# ------------------------------------------------------------------------------------------------
# solve_ex: info has A's batch shape (torch), whatever B broadcasts to
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [3, 4, 6], ids=lambda n: f"n{n}")
@pytest.mark.parametrize("ashape,bshape", [((3, 1), (2,)), ((), (3,)), ((2,), (4, 2))], ids=str)
def test_solve_ex_info_shape(backend, backend_device, n, ashape, bshape):
    A = _A(torch.float32, batch=ashape, n=n).to(backend_device)
    B = _B((*bshape, n, 2), torch.float32).to(backend_device)
    if len(ashape) == 2:  # make one element singular: its info must be reported at its index
        A[1, 0, :, 0] = 0
    X, info = LA.solve_ex(A, B)
    Xt, infot = torch.linalg.solve_ex(A.cpu(), B.cpu())
    assert info.shape == infot.shape == ashape and info.dtype == torch.int32
    assert X.shape == Xt.shape
    # info is exact (an exactly zero column): nonzero exactly where torch's is
    assert torch.equal(info.cpu() > 0, infot > 0)


# ------------------------------------------------------------------------------------------------
# torch.func
# ------------------------------------------------------------------------------------------------


def _cases(dtype):
    A = _A(dtype)
    B = _B((3, N, 2), dtype)
    LU, piv = torch.linalg.lu_factor(A)
    return {
        "inv": ((A,), lambda M, a: M.inv(a)),
        "det": ((A,), lambda M, a: M.det(a)),
        "slogdet": ((A,), lambda M, a: M.slogdet(a).logabsdet),
        "solve": ((A, B), lambda M, a, b: M.solve(a, b)),
        "solve_right": ((A, B.mT), lambda M, a, b: M.solve(a, b, left=False)),
        "lu_factor": ((A,), lambda M, a: M.lu_factor(a).LU),
        "lu_P": ((A,), lambda M, a: M.lu(a).P),
        "lu_solve": ((LU, B), lambda M, lu, b: M.lu_solve(lu, piv[0], b, adjoint=True)),
        "lu_solve_right": ((LU, B.mT), lambda M, lu, b: M.lu_solve(lu, piv[0], b, left=False)),
    }


def _run(transform, M, f, args):
    if transform == "vmap":
        return torch.vmap(lambda *a: f(M, *a))(*args)
    if transform == "jvp":  # forward mode, all inputs perturbed, complex included
        g = torch.Generator().manual_seed(9)
        tangents = tuple(torch.randn(a.shape, generator=g, dtype=a.dtype) for a in args)
        return torch.func.jvp(lambda *a: f(M, *a), args, tangents)[1]
    first = tuple(x[0] for x in args)
    if transform == "grad":
        return torch.func.grad(lambda *a: f(M, *a).sum())(*first)
    if transform == "hessian":  # jacfwd(jacrev): forward over reverse
        return torch.func.hessian(lambda *a: f(M, *a).sum())(*first)
    return getattr(torch.func, transform)(lambda *a: f(M, *a))(*first)


# torch.func's grad/jacrev/jacfwd/hessian take real inputs only: complex128 runs vmap and jvp.
_TRANSFORM_CASES = [(t, torch.float64) for t in ("vmap", "grad", "jacrev", "jacfwd", "jvp", "hessian")] + [
    (t, torch.complex128) for t in ("vmap", "jvp")
]


@pytest.mark.parametrize(("transform", "dtype"), _TRANSFORM_CASES,
                         ids=[f"{t}-{'c128' if d.is_complex else 'f64'}" for t, d in _TRANSFORM_CASES])
def test_func_transforms_match_torch(transform, dtype):
    for name, (args, f) in _cases(dtype).items():
        if name == "lu_P" and transform != "vmap":
            continue  # P is piecewise constant: no derivative to compare
        if name.startswith("lu_solve") and transform == "jvp":
            continue  # torch.linalg.lu_solve's own jvp fails on unbatched pivots of a batched LU
        ref, ours = _run(transform, torch.linalg, f, args), _run(transform, LA, f, args)
        assert ours.shape == ref.shape, name
        # LU factors are differentiated: their conditions enter (well below 10x here: Gaussian
        # orthogonal factors, no growth), so the bound is taken 10x wider for lu_* only
        bound = GRAD_BOUND * (10 if name.startswith("lu") else 1)
        assert _rel(ours, ref) <= bound, (name, _rel(ours, ref))


def test_hessian_of_logabsdet_real_and_complex():
    """VMC: second derivatives of log|det| by torch.func (jacrev of jacrev). Complex A = X + iY is
    parametrised by real X, Y (torch.func's jacobians take real inputs)."""
    A = _A(torch.float64, batch=())
    hess = torch.func.jacrev(torch.func.jacrev(lambda a: LA.slogdet(a).logabsdet))(A)
    ref = torch.func.jacrev(torch.func.jacrev(lambda a: torch.linalg.slogdet(a).logabsdet))(A)
    assert hess.shape == (N, N, N, N) and _rel(hess, ref) <= GRAD_BOUND

    Ac = _A(torch.complex128, batch=(), seed=3)

    def f(M):
        return lambda x, y: M.slogdet(torch.complex(x, y)).logabsdet

    args = (Ac.real.contiguous(), Ac.imag.contiguous())
    hc = torch.func.jacrev(torch.func.jacrev(f(LA), argnums=(0, 1)), argnums=(0, 1))(*args)
    # torch.linalg.slogdet cannot do this (no batching rule for aten::_neg_view in its backward);
    # the reference is analytic: d²f = -Re tr(M dA₁ M dA₂), M = A⁻¹, dA = dX + i dY, so with
    # T[p,q,r,s] = M[s,p] M[q,r]: H_XX = -Re T, H_XY = H_YX = Im T, H_YY = Re T.
    M = torch.linalg.inv(Ac)
    T = torch.einsum("sp,qr->pqrs", M, M)
    ref = ((-T.real, T.imag), (T.imag, T.real))
    for i in range(2):
        for j in range(2):
            assert _rel(hc[i][j], ref[i][j]) <= GRAD_BOUND, (i, j)


def test_vmap_singular_still_raises():
    A = _A(torch.float64)
    A[1, :, 2] = 0
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        torch.vmap(LA.inv)(A)
    info = torch.vmap(lambda a: LA.inv_ex(a).info)(A)
    assert info.tolist() == [0, 3, 0]


# ------------------------------------------------------------------------------------------------
# meta tensors
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [3, 6])
def test_meta_tensors(n):
    A = torch.empty(2, n, n, device="meta", dtype=torch.complex64)
    B = torch.empty(2, n, 3, device="meta", dtype=torch.complex64)
    piv = torch.empty(2, n, device="meta", dtype=torch.int32)
    for name, call in {
        "inv": lambda M: M.inv(A), "inv_ex": lambda M: M.inv_ex(A), "det": lambda M: M.det(A),
        "slogdet": lambda M: M.slogdet(A), "solve": lambda M: M.solve(A, B),
        "solve_ex": lambda M: M.solve_ex(A, B), "lu_factor": lambda M: M.lu_factor(A),
        "lu_factor_ex": lambda M: M.lu_factor_ex(A), "lu": lambda M: M.lu(A),
        "lu_solve": lambda M: M.lu_solve(A, piv, B),
    }.items():
        ref, ours = call(torch.linalg), call(LA)
        ref = ref if isinstance(ref, tuple) else (ref,)
        ours = ours if isinstance(ours, tuple) else (ours,)
        assert [(o.shape, o.dtype, o.device.type) for o in ours] == \
            [(r.shape, r.dtype, r.device.type) for r in ref], name


# ------------------------------------------------------------------------------------------------
# out=
# ------------------------------------------------------------------------------------------------


def test_out(backend, backend_device):
    """Written into and returned (tuple ops: each element), resized from empty, same values as
    without out= (bit-equal: the same computation)."""
    A = _A(torch.complex64, batch=(2,)).to(backend_device)
    B = _B((2, N, 3), torch.complex64).to(backend_device)
    LU, piv = LA.lu_factor(A)
    calls = {
        "solve": (lambda **k: LA.solve(A, B, **k), 1),
        "solve_ex": (lambda **k: LA.solve_ex(A, B, **k), 2),
        "inv": (lambda **k: LA.inv(A, **k), 1),
        "inv_ex": (lambda **k: LA.inv_ex(A, **k), 2),
        "det": (lambda **k: LA.det(A, **k), 1),
        "slogdet": (lambda **k: LA.slogdet(A, **k), 2),
        "lu_factor": (lambda **k: LA.lu_factor(A, **k), 2),
        "lu_factor_ex": (lambda **k: LA.lu_factor_ex(A, **k), 3),
        "lu": (lambda **k: LA.lu(A, **k), 3),
        "lu_solve": (lambda **k: LA.lu_solve(LU, piv, B, **k), 1),
    }
    for name, (call, k) in calls.items():
        ref = call()
        refs = tuple(ref) if k > 1 else (ref,)
        outs = tuple(torch.empty(0, dtype=r.dtype, device=r.device) for r in refs)
        res = call(out=outs if k > 1 else outs[0])
        res = tuple(res) if k > 1 else (res,)
        assert all(a is b for a, b in zip(res, outs)), name
        assert all(torch.equal(o, r) for o, r in zip(outs, refs)), name
        if k > 1:
            assert type(call(out=outs)) is type(ref), name  # the same named tuple


def test_out_errors_like_torch(backend, backend_device):
    A = _A(torch.float32, batch=()).to(backend_device)
    # wrong dtype: torch raises RuntimeError ("Expected out tensor to have dtype float ...")
    with pytest.raises(RuntimeError):
        torch.linalg.inv(A.cpu(), out=torch.empty(N, N, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="out"):
        LA.inv(A, out=torch.empty(N, N, dtype=torch.float64, device=backend_device))
    with pytest.raises(RuntimeError, match=r"out\[1\]"):
        LA.slogdet(A, out=(torch.empty(0, device=backend_device), torch.empty(0, dtype=torch.int32)))
    with pytest.raises(TypeError):
        LA.lu_factor(A, out=torch.empty(0, device=backend_device))  # needs a tuple (LU, pivots)
    # an input that requires grad: torch refuses out= (no silent loss of the gradient)
    Ag = A.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        torch.linalg.det(Ag.detach().cpu().requires_grad_(), out=torch.empty(()))
    for call in (lambda o: LA.det(Ag, out=o[0]), lambda o: LA.inv(Ag, out=o[0]),
                 lambda o: LA.lu_factor(Ag, out=o[:2]), lambda o: LA.solve(Ag, Ag, out=o[0])):
        outs = (torch.empty(0, device=backend_device), torch.empty(0, dtype=torch.int32, device=backend_device))
        with pytest.raises(RuntimeError, match="automatic differentiation"):
            call(outs)


# ------------------------------------------------------------------------------------------------
# flags, vector right-hand sides with left=False, non-finite input
# ------------------------------------------------------------------------------------------------


def test_flags_must_be_bool(backend, backend_device):
    A = _A(torch.float32, batch=()).to(backend_device)
    B = _B((N, 2), torch.float32).to(backend_device)
    LU, piv = LA.lu_factor(A)
    for call in (lambda: LA.solve(A, B, left=1), lambda: LA.solve_ex(A, B, check_errors=None),
                 lambda: LA.inv_ex(A, check_errors=0), lambda: LA.lu(A, pivot=1),
                 lambda: LA.lu_factor_ex(A, check_errors="no"), lambda: LA.lu_solve(LU, piv, B, left=1)):
        with pytest.raises(TypeError, match="must be bool"):
            call()


def test_vector_rhs_left_false_raises(backend, backend_device):
    A = _A(torch.float32, batch=(2,)).to(backend_device)
    for B in (torch.ones(N), torch.ones(2, N)):  # a vector, a batch of vectors
        with pytest.raises(RuntimeError, match="left=False"):
            LA.solve(A, B.to(backend_device), left=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["f32", "c64"])
def test_nan_input_slogdet_sign_like_torch(backend, backend_device, dtype):
    """torch: sign = product of sgn(diag U); real sgn(NaN) = 0 (torch.sign), complex NaN."""
    A = _A(dtype, batch=()).to(torch.float64 if dtype == torch.float32 else torch.complex128).to(dtype)
    A[2, 3] = float("nan")
    s, la = LA.slogdet(A.to(backend_device))
    st, lat = torch.linalg.slogdet(A)
    assert bool(la.cpu().isnan()) and bool(lat.isnan())
    if dtype.is_complex:
        assert bool(s.cpu().isnan()) and bool(st.isnan())
    else:
        assert float(s) == 0.0 == float(st)


def test_complex_inf_gives_nan_like_lapack(backend, backend_device):
    """A complex inf pivot: LAPACK (MKL/OpenBLAS) forms 1/p as conj(p)/|p|^2 = NaN, so LU, inv,
    solve, det, logabsdet are NaN; a finite-looking result would hide the bad input."""
    A = _A(torch.complex64, batch=(), n=8)
    A[1, 1] = complex("inf")
    Ad = A.to(backend_device)
    LUt = torch.linalg.lu_factor_ex(A).LU
    assert bool(LUt.isnan().any())  # the premise: torch's LAPACK gives NaN here
    LU = LA.lu_factor_ex(Ad).LU.cpu()
    assert bool((LU.isnan() | ~LUt.isnan()).all())
    assert bool(LA.slogdet(Ad).logabsdet.cpu().isnan())
    assert bool(LA.det(Ad).cpu().isnan())
    assert bool(LA.inv_ex(Ad).inverse.cpu().isnan().any())


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=["f64", "c128"])
@pytest.mark.parametrize("left,adjoint", [(True, False), (True, True), (False, False), (False, True)])
def test_lu_solve_jvp(dtype, left, adjoint):
    """Forward mode through ``lu_solve`` w.r.t. ``LU`` and ``B`` (batched pivots: torch's own jvp
    needs them), against torch.linalg.lu_solve's jvp; bound GRAD_BOUND with the LU factors'
    conditions (10x, as in test_func_transforms_match_torch)."""
    A = _A(dtype)
    LU, piv = torch.linalg.lu_factor(A)
    B = _B((3, N, 2) if left else (3, 2, N), dtype)
    g = torch.Generator().manual_seed(5)
    tangents = tuple(torch.randn(x.shape, generator=g, dtype=dtype) for x in (LU, B))

    def run(M):
        return torch.func.jvp(lambda lu, b: M.lu_solve(lu, piv, b, left=left, adjoint=adjoint),
                              (LU, B), tangents)[1]

    assert _rel(run(LA), run(torch.linalg)) <= 10 * GRAD_BOUND


def test_vmap_float32_on_every_backend(backend, backend_device):
    """Under vmap the kernel backends step aside (BatchedTensors have no raw buffers) and the
    torch-op path serves float32 too. Bound: two backward-stable solves, LAPACK ratio < 30 each,
    differ by <= 2 · 30 √n κ u relative (u = 2^-24), as in tests/parity/common.py."""
    A = _A(torch.float32).to(backend_device)
    B = _B((3, N, 2), torch.float32).to(backend_device)
    X = torch.vmap(LA.solve)(A, B)
    ref = torch.linalg.solve(A.cpu(), B.cpu())
    assert _rel(X.cpu(), ref) <= 60 * math.sqrt(N) * KAPPA * 2.0**-24
    _, la = torch.vmap(LA.slogdet)(A)
    # logabsdet: absolute error <= 60 n² κ u (d log|det| = Re tr(A⁻¹ dA), see tests/parity/common.py)
    err = (la.cpu() - torch.linalg.slogdet(A.cpu()).logabsdet).abs().max()
    assert float(err) <= 60 * N * N * KAPPA * 2.0**-24
