"""The op layer (mpslinalg/oplayer): what every declared op gets, checked through the public ops.

Each test names the issue item it guards. Tolerances: first-order perturbation theory with
``u = finfo(dtype).eps / 2``; the constants are stated where they are used.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from helpers import NoHostSync, adjugate

import mpslinalg as LA
import reference.matrices as mx
from mpslinalg.oplayer import checks as E
from mpslinalg.oplayer import defop

KAPPA = 10.0


def _dtype(backend):
    # kernel backends run float32/complex64; the torch backend is checked in float64 too
    return torch.float32 if backend == "emulator" else torch.float64


def _ops(B):
    """Every public op as a function of A (B closed over), with torch.linalg's twin (in float64)."""
    Bd = B.double()
    return {
        "det": (LA.det, torch.linalg.det),
        "slogdet": (lambda a: LA.slogdet(a)[1], lambda a: torch.linalg.slogdet(a)[1]),
        "inv": (LA.inv, torch.linalg.inv),
        "inv_ex": (lambda a: LA.inv_ex(a)[0], lambda a: torch.linalg.inv_ex(a)[0]),
        "solve": (lambda a: LA.solve(a, B), lambda a: torch.linalg.solve(a, Bd)),
        "solve_right": (lambda a: LA.solve(a, B.mT, left=False),
                        lambda a: torch.linalg.solve(a, Bd.mT, left=False)),
        "lu_factor": (lambda a: LA.lu_factor(a)[0], lambda a: torch.linalg.lu_factor(a)[0]),
        "lu_solve": (lambda a: LA.lu_solve(*LA.lu_factor(a), B),
                     lambda a: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), Bd)),
        "solve_triangular": (lambda a: LA.solve_triangular(a, B, upper=True),
                             lambda a: torch.linalg.solve_triangular(a, Bd, upper=True)),
    }


@pytest.mark.parametrize("n", [3, 6])
def test_forward_ad_dual_tensors(backend, n):
    # Issue 14.1: dual tensors (torch.autograd.forward_ad) get tangents from every op, at n <= 4
    # (small family) and n > 4 (LU), on every backend. Reference: torch's own forward mode in
    # float64 on the same (rounded) inputs. Bound: the tangent of inv/solve is A⁻¹ dA A⁻¹-like, so
    # a float32 computation is off by <= c·κ²·u relatively (two solves with A); c = 30·n covers the
    # LAPACK-ratio constant of each solve; the float64 path is bounded the same way with its u.
    dt = _dtype(backend)
    u = torch.finfo(dt).eps / 2
    A = mx.with_condition(n, KAPPA, dtype=dt, seed=n)
    # triangular ops read the upper triangle: make it well conditioned too
    dA = mx.random(n, n, dtype=dt, seed=n + 1)
    B = mx.random(n, 2, dtype=dt, seed=n + 2)
    Tri = A.triu() + n * torch.eye(n, dtype=dt)
    for name, (ours, theirs) in _ops(B).items():
        X = Tri if name == "solve_triangular" else A
        with fwAD.dual_level():
            t = fwAD.unpack_dual(ours(fwAD.make_dual(X, dA))).tangent
        assert t is not None, f"{name}: no tangent (dual tensors not supported)"
        with fwAD.dual_level():
            ref = fwAD.unpack_dual(theirs(fwAD.make_dual(X.double(), dA.double()))).tangent
        err = float((t.double() - ref).abs().max() / ref.abs().max())
        assert err <= 30 * n * KAPPA**2 * u, (name, err)


def test_lu_solve_invalid_pivots_raise(backend):
    # Issue 14.2: pivots outside [1, n] raise torch's error on every backend (no garbage X)
    A = mx.with_condition(6, KAPPA, seed=1)
    LU, piv = LA.lu_factor(A)
    B = mx.random(6, 1, seed=2)
    for bad, text in [(0, "greater or equal to 1"), (-3, "greater or equal to 1"), (7, "smaller or equal")]:
        p = piv.clone()
        p[2] = bad
        with pytest.raises(RuntimeError, match=text):
            LA.lu_solve(LU, p, B)
    assert torch.equal(piv, LA.lu_factor(A)[1])  # inputs untouched


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.float64])
def test_det_slogdet_empty_differentiable(dtype):
    # Issue 14.11: det/slogdet of 0x0 (and k x 0 x 0) are 1 / (1, 0), differentiable with an empty
    # gradient, as torch's
    for shape in [(0, 0), (3, 0, 0)]:
        A = torch.zeros(shape, dtype=dtype, requires_grad=True)
        d = LA.det(A)
        assert torch.equal(d.detach(), torch.ones(shape[:-2], dtype=dtype))
        d.abs().sum().backward()
        assert A.grad.shape == A.shape
        A.grad = None
        s, la = LA.slogdet(A)
        assert torch.equal(la.detach(), torch.zeros(shape[:-2], dtype=la.dtype))
        (la.sum() + s.abs().sum()).backward()
        assert A.grad.shape == A.shape


def test_det_hessian_at_rank_deficient_integer_matrix():
    # Issue 14.7: det's second derivative at an exactly singular matrix must not depend on the
    # rounding-level determinant LU produces (7e-14 instead of 0). Truth: d²det/dA_ij dA_kl is the
    # derivative of the (polynomial) adjugate, by central differences of the exact cofactor
    # adjugate with h = 1e-3: the adjugate has degree n-1 = 4, so the error is O(h²)·|d³adj| <= 1e-4
    # relative to the Hessian's scale; the bound 1e-6·scale + 1e-4·scale is that, generously.
    g = torch.Generator().manual_seed(7)
    A = torch.randint(-3, 4, (5, 5), generator=g).double()
    A[4] = A[0] + 2 * A[1] - A[3]  # rank 4
    H = torch.autograd.functional.hessian(LA.det, A)
    h = 1e-3
    ref = torch.zeros(5, 5, 5, 5, dtype=torch.float64)
    for k in range(5):
        for m in range(5):
            Ek = torch.zeros(5, 5, dtype=torch.float64)
            Ek[k, m] = h
            ref[:, :, k, m] = ((adjugate(A + Ek) - adjugate(A - Ek)) / (2 * h)).T
    scale = ref.abs().max()
    assert float((H - ref).abs().max()) <= 1e-4 * scale


def test_out_tuple_checked_before_any_write():
    # Issue 14.13: a wrong dtype in out[1] raises before out[0] is written; resizing a non-empty out
    # warns as torch does
    A = mx.with_condition(5, KAPPA, seed=3)
    out0 = torch.full((5, 5), 7.0)
    bad = torch.empty(0, dtype=torch.float64)  # info must be int32
    with pytest.raises(RuntimeError, match=r"out\[1\]"):
        LA.inv_ex(A, out=(out0, bad))
    assert torch.equal(out0, torch.full((5, 5), 7.0))
    with pytest.warns(UserWarning, match="was resized"):
        LA.inv(A, out=torch.empty(2, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LA.inv(A, out=torch.empty(0))  # an empty out is resized silently


def test_compile_singular_raises_linalg_error_with_batch_element():
    # Issue 14.14: under torch.compile a singular input raises LinAlgError naming the batch element
    A = mx.with_condition(5, KAPPA, batch=(3,), seed=4)
    A[1, :, 2] = 0
    for f in (LA.inv, lambda a: LA.solve(a, torch.ones(3, 5, 1))):
        with pytest.raises(torch.linalg.LinAlgError, match=r"Batch element 1"):
            torch.compile(f, fullgraph=True, backend="aot_eager")(A)


@pytest.mark.parametrize("n", [3, 8, 70])
def test_negative_bit_views(backend, n):
    # Issues 14.10 / 17.1: a view with the neg bit (Z.conj().imag) gives the answer of its
    # materialised copy on every backend (Metal binds raw storage: the bits are resolved once, in
    # mpslinalg.kernels.loader.BoundLibrary; a missed bit flips signs, an O(1) error). Both calls
    # solve the same rounded system backward stably, so they differ by at most twice LAPACK's
    # forward-error bound, 2·30·n·κ·u (norm-wise, relative), κ the exact condition number.
    u = torch.finfo(torch.float32).eps / 2
    M = 2 * torch.eye(n) + mx.random(n, n, seed=n) / n**0.5  # well conditioned, and its triangles
    Z = torch.complex(mx.random(n, n, seed=n + 9), -M)
    W = Z.conj().imag  # M as a neg-bit view (storage holds -M)
    assert W.is_neg() and torch.equal(W.resolve_neg(), M)
    Bm = mx.random(n, 2, seed=n + 3)
    Bv = torch.complex(torch.zeros_like(Bm), -Bm).conj().imag  # Bm as a neg-bit view

    def close(x, y, a):
        bound = 2 * 30 * n * float(torch.linalg.cond(a.double())) * u
        assert bound < 1e-2  # the check can fail: a missed bit is an O(1) error
        return float((x - y).norm() / y.norm()) <= bound

    assert close(LA.solve(W, Bv), LA.solve(M, Bm), M)
    assert close(LA.inv(W), LA.inv(M), M)
    for upper in (True, False):
        for unit in (True, False):
            tri = M.triu() if upper else M.tril()
            if unit:
                tri = tri - tri.diagonal().diag() + torch.eye(n)
            ref = LA.solve_triangular(M, Bm, upper=upper, unitriangular=unit)
            assert close(LA.solve_triangular(W, Bv, upper=upper, unitriangular=unit), ref, tri)


def test_ex_ops_never_read_back(backend):
    # Issue 18: no host synchronisation inside the _ex / no-sync ops on the CPU, on every backend
    # (helpers.NoHostSync fails any item()/bool()/nonzero ... inside the region)
    for n in (3, 6, 40):
        A = mx.with_condition(n, KAPPA, batch=(2,), seed=n)
        B = mx.random(n, 3, batch=(2,), seed=n + 1)
        with NoHostSync():
            LA.lu_factor_ex(A)  # (lu_solve is not _ex: it validates pivots like torch)
            LA.solve_ex(A, B)
            LA.inv_ex(A)
            LA.det(A)
            LA.slogdet(A)
            LA.solve_triangular(A, B, upper=True)


def test_defop_declaration_gives_every_route():
    # The factory: one declaration -> eager fast path, custom op (autograd, compile), the
    # autograd.Function (torch.func, forward mode). A toy op x -> x³ with its derivatives.
    calls = []

    def impl(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return x**3

    def setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * g

    def jvp(inputs, outputs, tangents):
        return (3 * inputs[0] ** 2 * tangents[0],)

    cube = defop("_test_cube", impl=impl, fake=lambda x: torch.empty_like(x), setup=setup,
                 backward=backward, jvp=jvp)
    x = torch.tensor([1.0, 2.0, -3.0], dtype=torch.float64)
    assert cube.direct(x) and torch.equal(cube(x), x**3)
    xr = x.clone().requires_grad_()
    assert not cube.direct(xr)
    (g,) = torch.autograd.grad(cube(xr).sum(), xr)
    assert torch.equal(g, 3 * x**2)
    assert torch.equal(torch.func.grad(lambda t: cube(t).sum())(x), 3 * x**2)
    assert torch.equal(torch.vmap(cube)(x[:, None])[:, 0], x**3)
    _, t = torch.func.jvp(cube, (x,), (torch.ones_like(x),))
    assert torch.equal(t, 3 * x**2)
    with fwAD.dual_level():
        assert torch.equal(fwAD.unpack_dual(cube(fwAD.make_dual(x, torch.ones_like(x)))).tangent, 3 * x**2)
    assert torch.equal(torch.compile(cube, fullgraph=True, backend="aot_eager")(x), x**3)
    torch.library.opcheck(cube.custom, (xr,))


def test_errors_name_the_op_with_linalg_prefix():
    # Issue 10: torch's error prefix "linalg.<op>:" everywhere
    bad = torch.zeros(3)
    for name, f in [("linalg.inv", LA.inv), ("linalg.det", LA.det), ("linalg.slogdet", LA.slogdet),
                    ("linalg.lu_factor", LA.lu_factor), ("linalg.solve", lambda a: LA.solve(a, a))]:
        with pytest.raises(E.ShapeError, match=f"^{name}: "):
            f(bad)


@pytest.mark.cuda
def test_ex_ops_no_host_sync_on_cuda():
    # Issue 18: the _ex / no-sync ops never synchronise on CUDA (torch's sync debug mode raises on
    # any device-to-host read), at n <= 4 (small family), mid sizes and the batched path
    dev = torch.device("cuda")
    for n, batch in [(3, (64,)), (9, (256,)), (40, (4,)), (300, ())]:
        A = mx.with_condition(n, KAPPA, batch=batch, seed=n).to(dev)
        B = mx.random(n, 2, batch=batch, seed=n + 1).to(dev)
        calls = [(LA.lu_factor_ex, (A,), {}), (LA.solve_ex, (A, B), {}), (LA.inv_ex, (A,), {}),
                 (LA.det, (A,), {}), (LA.slogdet, (A,), {}), (LA.solve_triangular, (A, B), {"upper": True})]
        for f, args, kw in calls:
            f(*args, **kw)  # warm-up (lazy initialisation may synchronise once)
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                f(*args, **kw)
            finally:
                torch.cuda.set_sync_debug_mode("default")
