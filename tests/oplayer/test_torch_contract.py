"""The LU, QR and triangular front doors against ``torch.linalg`` on bad and mixed input (issue 33,
items 1 and 10), on every backend, through the torch-first fast path (``routing_table``: the
front doors consult ``routing.WHEN``, and every size here is outside it, so the torch backend
calls torch.linalg first) and through our own implementation (``ours_always``).

* Where torch raises, we raise an instance of torch's exception class (messages may say more).
* Where torch accepts, we return torch's result (same shape and dtype, values within the
  backward-error bound of the tiny well-conditioned systems used: 1e-4 absolute on entries of
  order 1 with κ <= 10 is 30 κ u at u = 2⁻²⁴ with room for n = 3),
* except where torch silently mishandles the input: ``solve_triangular`` casts ``B`` to ``A``'s
  dtype (a complex ``B`` loses its imaginary part with a warning; float64 ``B`` rounds to float32;
  an integer ``B`` is accepted) or promotes it. Our contract is no silent casts: these raise
  :class:`~mpslinalg.oplayer.checks.DTypeError` on every path, the fast path included.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import mpslinalg as LA
from mpslinalg import routing
from mpslinalg.oplayer.checks import DTypeError

f32, f64, c64 = torch.float32, torch.float64, torch.complex64


def _r(*shape, dtype=f32):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(sum(shape) + 7))


_A = _r(3, 3) + 3 * torch.eye(3)
_LU, _PIV = torch.linalg.lu_factor(_A)
_TORCH = {"solve_triangular": torch.linalg.solve_triangular, "geqrf": torch.geqrf, "ormqr": torch.ormqr}

#: (op, args, kwargs): inputs torch rejects (or accepts and we must agree with)
BAD = [
    ("solve_triangular", (_A, _r(4, 2)), dict(upper=True)),
    ("solve_triangular", (_r(3, 4), _r(3, 2)), dict(upper=True)),
    ("solve_triangular", (_r(3), _r(3, 2)), dict(upper=True)),
    ("solve_triangular", (_A, _r(3)), dict(upper=True)),
    ("solve_triangular", (_r(2, 3, 3), _r(3, 3, 2)), dict(upper=True)),
    ("solve_triangular", (_A, _r(3, 2)), dict(upper=1)),
    ("solve_triangular", (_A, _r(3, 2)), dict(upper=True, left=None)),
    ("solve_triangular", (_A.int(), _r(3, 2)), dict(upper=True)),
    ("solve_triangular", (_A.half(), _r(3, 2).half()), dict(upper=True)),
    ("solve_triangular", ([[1.0]], _r(1, 1)), dict(upper=True)),
    ("solve", (_A, _r(3, 2, dtype=c64)), {}),
    ("solve", (_r(3, 4), _r(3, 2)), {}),
    ("solve", (_A, _r(4, 2)), {}),
    ("solve", (_A, _r(3)), dict(left=False)),
    ("solve", (_A, torch.tensor(1.0)), {}),
    ("solve", (_r(2, 3, 3), _r(3, 3, 2)), {}),
    ("solve", (_A, _r(3, 2)), dict(left=1)),
    ("solve", (torch.zeros(3, 3), _r(3, 2)), {}),
    ("solve_ex", (_A, _r(3, 2)), dict(check_errors=1)),
    ("solve_ex", (_A, _r(3, 2, dtype=f64)), {}),
    ("solve_ex", (torch.zeros(2, 3, 3), _r(3, 2)), dict(check_errors=True)),
    ("lu_factor", (_r(3),), {}),
    ("lu_factor", (_A.int(),), {}),
    ("lu_factor", (_A,), dict(pivot=False)),
    ("lu_factor", (torch.zeros(3, 3),), {}),
    ("lu_factor_ex", (_A,), dict(pivot=1)),
    ("lu_factor_ex", (_A.half(),), {}),
    ("lu", (_r(3),), {}),
    ("lu", (_A,), dict(pivot=False)),
    ("lu", (_A.int(),), {}),
    ("lu_solve", (_LU, _PIV, _r(3, 2, dtype=c64)), {}),
    ("lu_solve", (_LU, _PIV.long(), _r(3, 2)), {}),
    ("lu_solve", (_LU, _PIV.float(), _r(3, 2)), {}),
    ("lu_solve", (_LU, _PIV[:2], _r(3, 2)), {}),
    ("lu_solve", (_LU, _PIV, _r(4, 2)), {}),
    ("lu_solve", (_LU, torch.zeros_like(_PIV), _r(3, 2)), {}),
    ("lu_solve", (_LU, _PIV + 5, _r(3, 2)), {}),
    ("lu_solve", (_LU, -_PIV, _r(3, 2)), {}),
    ("lu_solve", (_LU, [1, 2, 3], _r(3, 2)), {}),
    ("lu_solve", (_LU[:, :2], _PIV, _r(3, 2)), {}),
    ("lu_solve", (_LU, _PIV, _r(3, 2)), dict(left=1)),
    ("lu_solve", (_LU, _PIV, _r(3, 2)), dict(adjoint=None)),
    ("lu_solve", (_LU, _PIV, _r(3)), {}),
    ("lu_solve", (_LU.expand(2, 3, 3), _PIV, _r(2, 3, 2)), {}),
    ("lu_solve", (_LU.expand(2, 3, 3), _PIV.expand(1, 3), _r(2, 3, 2)), {}),
    ("inv", (_r(3, 4),), {}),
    ("inv", (torch.zeros(3, 3),), {}),
    ("inv", (_r(3),), {}),
    ("inv", (_A.int(),), {}),
    ("inv_ex", (_A,), dict(check_errors=1)),
    ("inv_ex", (torch.zeros(2, 3, 3),), dict(check_errors=True)),
    ("det", (_r(3, 4),), {}),
    ("det", (_A.int(),), {}),
    ("det", ("A",), {}),
    ("slogdet", (_r(3, 4),), {}),
    ("slogdet", (_A.half(),), {}),
    ("qr", (_A,), dict(mode="hello")),
    ("qr", (_A, 5), {}),
    ("qr", (_r(3),), {}),
    ("qr", (_A.int(),), {}),
    ("qr", ("x",), {}),
    ("geqrf", (_r(3),), {}),
    ("geqrf", (_A.int(),), {}),
    ("householder_product", (_r(3, 4), _r(3)), {}),
    ("householder_product", (_r(4, 3), _r(4)), {}),
    ("householder_product", (_r(4, 3), _r(2, 3)), {}),
    ("householder_product", (_r(4, 3), _r(3, dtype=c64)), {}),
    ("householder_product", (_r(4, 3), _r(3, dtype=f64)), {}),
    ("householder_product", (_r(3), _r(3)), {}),
    ("ormqr", (_r(4, 3), _r(3), _r(5, 2)), {}),
    ("ormqr", (_r(4, 3), _r(3), _r(4, 2, dtype=c64)), {}),
    ("ormqr", (_r(4, 3), _r(2), _r(4, 2)), {}),
    ("ormqr", (_r(4, 3), _r(3), _r(2, 4, 2)), {}),
    ("ormqr", (_r(4, 3), _r(3), _r(4, 2)), dict(left=1)),
    ("ormqr", (_r(4, 3), _r(3), _r(4)), {}),
]

#: inputs torch accepts and silently mishandles; ours raise DTypeError
MISHANDLED = [
    ("solve_triangular", (_A.triu(), _r(3, 2, dtype=c64)), dict(upper=True)),  # imaginary part dropped
    ("solve_triangular", (_A.triu(), _r(3, 2, dtype=c64).mT), dict(upper=True, left=False)),
    ("solve_triangular", (_A.triu(), _r(3, 2, dtype=f64)), dict(upper=True)),  # rounded to float32
    ("solve_triangular", (_A.triu().double(), _r(3, 2)), dict(upper=True)),  # promoted
    ("solve_triangular", (_A.triu().to(c64), _r(3, 2)), dict(upper=True)),  # promoted
    ("solve_triangular", (_A.triu(), torch.ones(3, 2, dtype=torch.int32)), dict(upper=True)),
    ("solve_triangular", (_A.triu().expand(2, 3, 3), _r(2, 3, 2, dtype=c64)), dict(upper=True)),
]


def _call(fn, args, kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's cast warning
        try:
            return "ok", fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001  (the class is the result)
            return "raised", exc


def _first(x):
    return x if isinstance(x, torch.Tensor) else x[0]


def _check_like_torch(name, args, kwargs):
    kind_t, torch_out = _call(_TORCH.get(name) or getattr(torch.linalg, name), args, kwargs)
    kind_o, ours = _call(getattr(LA, name), args, kwargs)
    case = (name, [getattr(a, "shape", a) for a in args], kwargs)
    if kind_t == "raised":
        assert kind_o == "raised", (case, "torch raises", torch_out, "ours returned")
        assert isinstance(ours, type(torch_out)), (case, type(torch_out), torch_out, type(ours), ours)
    else:
        assert kind_o == "ok", (case, "torch returned, ours raised", ours)
        t, o = _first(torch_out), _first(ours)
        assert (t.shape, t.dtype) == (o.shape, o.dtype), case
        assert torch.allclose(t, o, atol=1e-4, rtol=1e-4), case


def _mishandled(name, args, kwargs):
    kind, out = _call(getattr(LA, name), args, kwargs)
    assert kind == "raised" and isinstance(out, DTypeError), (name, kwargs, out)
    assert "same dtype" in str(out) or "floating point or complex" in str(out)


def test_bad_input_like_torch_fast_path(routing_table, backend):
    for name, args, kwargs in BAD:
        _check_like_torch(name, args, kwargs)


def test_bad_input_like_torch_our_implementation(backend):
    for name, args, kwargs in BAD:
        _check_like_torch(name, args, kwargs)


def test_mixed_dtypes_torch_mishandles_are_refused_fast_path(routing_table, backend):
    for name, args, kwargs in MISHANDLED:
        _mishandled(name, args, kwargs)


def test_mixed_dtypes_torch_mishandles_are_refused_our_implementation(backend):
    for name, args, kwargs in MISHANDLED:
        _mishandled(name, args, kwargs)


def test_mixed_dtypes_refused_when_routed():
    # torch.linalg.solve_triangular routed (when="always") is our op, with our contract
    routing.disable()
    try:
        with LA.enabled(devices="cpu", ops=("solve_triangular",), when="always"):
            for _, args, kwargs in MISHANDLED:
                if not args[1].is_floating_point() and not args[1].is_complex():
                    continue  # an integer B is outside what the routes take: torch's kernel (routing.py)
                kind, out = _call(torch.linalg.solve_triangular, args, kwargs)
                assert kind == "raised" and isinstance(out, DTypeError), (kwargs, out)
    finally:
        routing.disable()


def test_qr_mode_errors_are_torchs_classes(backend):
    # the reproducer: torch raises RuntimeError for an unknown mode, TypeError for a non-str
    with pytest.raises(RuntimeError, match="unrecognized mode 'hello'"):
        LA.qr(_A, mode="hello")
    with pytest.raises(TypeError, match="mode"):
        LA.qr(_A, mode=None)


def test_unsupported_dtypes_are_not_implemented_errors(backend):
    # torch's class for integer/half input to lu_factor, solve_triangular and geqrf
    for call in (lambda: LA.lu_factor(_A.int()), lambda: LA.geqrf(_A.half()),
                 lambda: LA.solve_triangular(_A.int(), _A.int(), upper=True)):
        with pytest.raises(NotImplementedError):
            call()
