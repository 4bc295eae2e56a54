"""The batching rule from a declaration's ``ranks``: ``torch.func.vmap`` of a declared op runs the op
once on the mapped batch (our kernels, one launch for the whole batch), and gives torch.linalg's
values under every ``in_dims`` placement."""
import pytest
import torch

import mpslinalg as LA
from mpslinalg import routing
from mpslinalg.kernels import loader, set_compiler, use_backend

# float64 on the torch backend, float32 on the emulator: the rule only moves dimensions, so the
# values agree with torch.linalg's to the op's own accuracy. Well-conditioned inputs (A + 6I,
# kappa < 10): a backward-stable op's result differs from LAPACK's by <= c * n * kappa * u; c*n = 30
# covers n = 6 with the LAPACK test threshold.
TOL = {torch.float64: 30 * 10 * 2.0 ** -53, torch.float32: 30 * 10 * 2.0 ** -24}

CASES = {
    "inv": (1, LA.inv, torch.linalg.inv),
    "det": (1, LA.det, torch.linalg.det),
    "slogdet": (1, lambda a: LA.slogdet(a)[1], lambda a: torch.linalg.slogdet(a)[1]),
    "solve": (2, LA.solve, torch.linalg.solve),
    "qr": (1, lambda a: LA.qr(a)[1].abs(), lambda a: torch.linalg.qr(a)[1].abs()),
    "svdvals": (1, LA.svdvals, torch.linalg.svdvals),
    "lu_solve": (2, lambda a, b: LA.lu_solve(*LA.lu_factor(a), b),
                 lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b)),
    "solve_triangular": (2, lambda a, b: LA.solve_triangular(a, b, upper=False),
                         lambda a, b: torch.linalg.solve_triangular(a, b, upper=False)),
    "pinv": (1, LA.pinv, torch.linalg.pinv),
    "lstsq": (2, lambda a, b: LA.lstsq(a, b).solution, lambda a, b: torch.linalg.lstsq(a, b).solution),
}


def _inputs(dtype, n=6):
    g = torch.Generator().manual_seed(3)
    A = torch.randn(5, 3, n, n, generator=g, dtype=torch.float64) + 6 * torch.eye(n, dtype=torch.float64)
    B = torch.randn(5, 3, n, 2, generator=g, dtype=torch.float64)
    return A.to(dtype), B.to(dtype)


def _placements(arity, A, B):
    """(in_dims, args): the mapped dimension first, in the middle, and (two arguments) one unmapped."""
    if arity == 1:
        yield 0, (A,)
        yield 1, (A.movedim(0, 1),)
    else:
        yield 0, (A, B)
        yield (1, 1), (A.movedim(0, 1), B.movedim(0, 1))
        yield (0, None), (A, B[0])


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_equals_torch_linalg(name):
    arity, ours, ref = CASES[name]
    A, B = _inputs(torch.float64)
    with routing.ours_always():
        for in_dims, args in _placements(arity, A, B):
            out = torch.func.vmap(ours, in_dims=in_dims)(*args)
            exp = torch.func.vmap(ref, in_dims=in_dims)(*args)
            scale = exp.abs().max().clamp_min(1)
            assert out.shape == exp.shape, (in_dims, out.shape, exp.shape)
            assert ((out - exp).abs().max() / scale) <= TOL[torch.float64], in_dims


class _Counting:
    """A compiled library whose kernel launches are recorded."""

    def __init__(self, lib, launches):
        self._lib, self._launches = lib, launches

    def __getattr__(self, kernel):
        fn = getattr(self._lib, kernel)

        def launch(*args, **kwargs):
            self._launches.append(kernel)
            return fn(*args, **kwargs)

        return launch


@pytest.mark.parametrize("name", ["inv", "solve", "qr", "lu_solve", "solve_triangular"])
def test_vmap_runs_our_kernels_once_for_the_batch(name):
    from helpers import require_emulator

    require_emulator()
    arity, ours, ref = CASES[name]
    A, B = _inputs(torch.float32, n=4 if name == "inv" else 6)
    args = (A,) if arity == 1 else (A, B)
    launches, previous = [], loader._compilers["cpu"]
    with use_backend("emulator"):
        expected = ours(*args)                      # the op on the whole batch: the launches it needs
    set_compiler("cpu", lambda source: _Counting(previous(source), launches))
    try:
        with use_backend("emulator"):
            direct = ours(*args)
            n_direct = len(launches)
            mapped = torch.func.vmap(ours)(*args)
    finally:
        set_compiler("cpu", previous)
    assert n_direct > 0, "the emulator backend ran no Metal kernel"
    # vmap over 5 of the 5x3 batch: the same launches as one call on the whole batch (a per-example
    # loop would launch 5 times as many, torch's generated rule none: it runs the torch ops)
    assert len(launches) - n_direct == n_direct, launches
    torch.testing.assert_close(mapped, direct, rtol=0, atol=0)
    torch.testing.assert_close(mapped, expected, rtol=0, atol=0)


# -- the shape rule: the fake implementation comes from the declaration ----------------------------

from mpslinalg.oplayer import declared, defop  # noqa: E402

#: op name -> arguments with broadcasting batches (A's batch (2, 1), B's (3,)): the fake the shape
#: rule builds must equal the real outputs' shapes and dtypes.
_SHAPE_CASES = {
    "solve_ex": lambda A, B: (A, B, True),
    "lu_solve": lambda A, B: (*declared("lu_factor_ex")(A)[:2], B, True, False),
    "solve_triangular": lambda A, B: (A.tril(), B, False, True, False),
    "cholesky_solve": lambda A, B: (B, torch.linalg.cholesky(A @ A.mT + 4 * torch.eye(4)), False),
    "lu_factor_ex": lambda A, B: (A,),
    "det": lambda A, B: (A,),
    "slogdet": lambda A, B: (A,),
    "inv_ex": lambda A, B: (A,),
    "qr": lambda A, B: (A, "r"),
    "svd": lambda A, B: (A, False, False),
    "eig_ex": lambda A, B: (A, False),
    "eigh": lambda A, B: (A, "L", True),
    "cholesky_ex": lambda A, B: (A @ A.mT, False),
    "ldl_factor_ex": lambda A, B: (A + A.mT, False),
    "lstsq": lambda A, B: (A.expand(2, 3, 4, 4), B.expand(2, 3, 4, 2), 1e-6, "gelsd"),
}


@pytest.mark.parametrize("name", sorted(_SHAPE_CASES))
def test_fake_from_the_shape_rule_matches_the_outputs(name):
    g = torch.Generator().manual_seed(5)
    A = torch.randn(2, 1, 4, 4, generator=g) + 4 * torch.eye(4)
    B = torch.randn(3, 4, 2, generator=g)
    op = declared(name)
    assert op.shape is not None, f"{name} declares its fake by hand"
    args = _SHAPE_CASES[name](A, B)
    if name == "eig_ex":
        args = (A, args[1])
    real = op(*args)
    fake = op._fake_from_shape(*args)
    real, fake = (real, fake) if isinstance(real, tuple) else ((real,), (fake,))
    assert [(t.shape, t.dtype) for t in fake] == [(t.shape, t.dtype) for t in real]
    meta = torch.ops.mpslinalg.__getattr__(name)(*(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args))
    meta = meta if isinstance(meta, tuple) else (meta,)
    assert [(t.shape, t.dtype) for t in meta] == [(t.shape, t.dtype) for t in real]


def test_defop_takes_one_of_fake_and_shape():
    def impl(A: torch.Tensor) -> torch.Tensor:
        return A.clone()

    with pytest.raises(TypeError, match="exactly one of fake= and shape="):
        defop("test_neither", impl=impl)
    with pytest.raises(TypeError, match="needs ranks="):
        defop("test_no_ranks", impl=impl, shape=lambda A: (A.shape[-2:], A.dtype))
