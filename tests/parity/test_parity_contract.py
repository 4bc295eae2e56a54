"""Parity with ``torch.linalg``: ``out=``, empty shapes, strided/transposed/conjugate views, inputs
never modified, outputs never aliasing inputs, singular input (``info``, ``LinAlgError``), error types
for bad input and non-bool flags, mixed devices, non-finite input. Bounds derived in ``tests/parity/common.py``.
"""

from __future__ import annotations

import math

import pytest
import torch
from parity.common import (
    _det_bound,
    _mat,
    _real,
    _rel,
    _rhs,
    _solve_bound,
)

import mpslinalg as LA

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
