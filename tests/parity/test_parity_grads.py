"""Parity with ``torch.linalg``: gradients (float64/complex128 equal to torch's, float32 near them,
batch broadcasting), ``torch.compile(fullgraph=True)``, ``torch.func`` transforms and meta tensors.
Bounds derived in ``tests/parity/common.py``.
"""

from __future__ import annotations

import math

import pytest
import torch
from parity.common import (
    KAPPA,
    _det_bound,
    _mat,
    _rel,
    _rhs,
    _solve_bound,
    _u,
)

import mpslinalg as LA

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
    """Bound: GRAD_C κ² u relative (tests/parity/common.py); for lu/lu_factor the factors' own condition
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

def test_grads_with_batch_broadcasting(backend):
    """Gradients of broadcast inputs are reduced to each input's own shape, as torch's; values
    within the float64 bound GRAD_C κ² u of tests/parity/common.py."""
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
    without a C++ build. Results within the solve/det bounds of tests/parity/common.py."""
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
