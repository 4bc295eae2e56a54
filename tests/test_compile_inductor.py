"""Every public op under ``torch.compile(fullgraph=True)`` with the default backend, inductor
(issue 33, item 6; the other compile tests use ``aot_eager``, which never checks a custom op's
output strides against its fake: inductor does, and failed for ``qr``, ``geqrf`` and
``householder_product``, whose LAPACK results are column-major, "incorrect fake kernel").

One small shape and one dtype per op (float32, 4 x 4 or 5 x 3): compiling is the cost (about 1-3 s
per op with inductor on this 2-core box, most of this module's time), not the arithmetic.

Pass mark: the compiled graph runs the same custom-op kernels on the same inputs as eager; only
the glue around them (reductions, products, comparisons) may be reassociated by inductor, which
moves each output entry by at most ``n u Σ|terms|``: ``|compiled − eager| <= 30 n u max|eager|``
(the LAPACK pass mark 30 on the ratio, n = 5, u = 2⁻²⁴).
"""

from __future__ import annotations

import pytest
import torch

import mpslinalg as LA
from mpslinalg import routing
from reference import metrics

_G = torch.Generator().manual_seed(33)
A = torch.randn(4, 4, generator=_G) + 4 * torch.eye(4)  # κ small
T = torch.randn(5, 3, generator=_G)  # tall
B = torch.randn(4, 2, generator=_G)
_LU, _PIV = torch.linalg.lu_factor(A)
_QR, _TAU = torch.geqrf(T)

#: op name -> (function of tensors, its inputs)
CALLS = {
    "solve_triangular": (lambda a, b: LA.solve_triangular(a, b, upper=True), (A.triu(), B)),
    "lu_factor": (LA.lu_factor, (A,)),
    "lu_factor_ex": (LA.lu_factor_ex, (A,)),
    "lu": (LA.lu, (T,)),
    "lu_solve": (LA.lu_solve, (_LU, _PIV, B)),
    "solve": (LA.solve, (A, B)),
    "solve_ex": (LA.solve_ex, (A, B)),
    "det": (LA.det, (A,)),
    "slogdet": (LA.slogdet, (A,)),
    "inv": (LA.inv, (A,)),
    "inv_ex": (LA.inv_ex, (A,)),
    "qr": (LA.qr, (T,)),
    "qr_complete": (lambda a: LA.qr(a, mode="complete"), (T,)),
    "qr_r": (lambda a: LA.qr(a, mode="r"), (T,)),
    "geqrf": (LA.geqrf, (T,)),
    "householder_product": (LA.householder_product, (_QR, _TAU)),
    "ormqr": (LA.ormqr, (_QR, _TAU, torch.randn(5, 2, generator=_G))),
    "svd": (LA.svd, (T,)),
    "svd_ex": (LA.svd_ex, (T,)),
    "svdvals": (LA.svdvals, (T,)),
    "pinv": (LA.pinv, (T,)),
    "lstsq": (lambda a, b: LA.lstsq(a, b).solution, (T, torch.randn(5, 2, generator=_G))),
    "lstsq_gels": (lambda a, b: LA.lstsq(a, b, driver="gels").solution, (T, torch.randn(5, 2, generator=_G))),
    "lstsq_gelsd": (lambda a, b: LA.lstsq(a, b, driver="gelsd").solution, (T, torch.randn(5, 2, generator=_G))),
    "matrix_rank": (LA.matrix_rank, (T,)),
    "cond": (LA.cond, (A,)),
    "matrix_norm": (lambda a: LA.matrix_norm(a, ord=2), (A,)),
}
#: ops compiled on the emulator backend too: the QR family (its kernels' layout differs)
EMULATOR = ("qr", "qr_complete", "geqrf", "householder_product", "ormqr", "solve", "det")


def _flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    return [t for t in x if isinstance(t, torch.Tensor)]


def _check(name: str) -> None:
    fn, args = CALLS[name]
    eager = _flat(fn(*args))
    torch._dynamo.reset()
    compiled = _flat(torch.compile(fn, fullgraph=True)(*args))
    assert len(compiled) == len(eager), name
    u = metrics.unit_roundoff(torch.float32)
    for c, e in zip(compiled, eager):
        assert (c.shape, c.dtype) == (e.shape, e.dtype), name
        if e.numel() and (e.is_floating_point() or e.is_complex()):
            bound = 30 * 5 * u * float(e.abs().max())
            assert float((c - e).abs().max()) <= bound, name
        else:
            assert torch.equal(c, e), name


@pytest.mark.parametrize("name", list(CALLS))
def test_every_op_compiles_with_inductor(name):
    _check(name)


@pytest.mark.parametrize("name", list(EMULATOR))
def test_ops_compile_with_inductor_on_the_emulator(name):
    from helpers import require_emulator

    require_emulator()
    with LA.use_backend("emulator"):
        _check(name)


def test_routed_torch_linalg_qr_compiles_with_inductor():
    # torch.linalg.qr routed (when="always") traces our custom op into inductor's graph
    routing.disable()
    try:
        with LA.enabled(devices="cpu", ops=("qr",), when="always"):
            torch._dynamo.reset()
            Q, R = torch.compile(lambda a: torch.linalg.qr(a), fullgraph=True)(T)
        Qe, Re = torch.linalg.qr(T)
        bound = 30 * 5 * metrics.unit_roundoff(torch.float32)
        assert float((Q @ R - T).abs().max()) <= bound * float(T.abs().max()) * 5
        assert float((Q - Qe).abs().max()) <= bound * 10  # κ(T) < 10: Q within κ u of LAPACK's
    finally:
        routing.disable()
