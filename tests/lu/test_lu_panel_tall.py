"""``lu_panel_tall`` (issue 35): a panel of any height factored by ONE threadgroup (up to 1024
threads) in ONE dispatch, and the blocked LU over it (``TUNING.panel_tall = "one"``, selectable;
``"look"`` is the default): at most 4 dispatches per panel (panel, interchanges, TRSM, GEMM). In the
emulator, in every thread order, through the library's own call sites (``_MetalKernels``, the public op).

Bounds (the derivations of ``test_lu_kernels.py``):

* Pivots: random Gaussian data has no near-ties at these sizes (the largest and second-largest
  candidates of a column differ by far more than the O(n u) rounding of the updates), so the
  pivots must EQUAL LAPACK's ``sgetrf``/``cgetrf`` in the same precision
  (``reference.lapack.getrf_pivots``).
* Factors: LAPACK's ``xGET01`` ratio ``‖PᵀA − LU‖₁/(n ‖A‖₁ u) < 30`` (``metrics.PASS_RATIO``),
  ``u = 2^-24``: Higham Thm 9.3 gives ``|PᵀA − LU| <= γ_n |L||U|`` with ``γ_n ≈ n u``; for random
  matrices ``‖|L||U|‖₁`` stays within a small multiple of ``‖A‖₁`` (growth factor O(1)-O(10) at
  these sizes), so the ratio is O(1); 30 is LAPACK's own test threshold.
* ``lu_panel_tall`` runs ``lu_panel``'s body (same operations on every entry, in the same order;
  the pivot reduction is a total order), so on a panel both can factor its output must be
  ``lu_panel``'s bit for bit, whatever the thread count.
* ``info``, NaN positions, untouched entries and dispatch counts are discrete facts: exact.
"""

from __future__ import annotations

import importlib

import pytest
import torch
from helpers import ORDER_IDS as OID
from helpers import ORDERS, InOrder
from lu.kernel_calls import assert_nans_match_torch, assert_panel

import mpslinalg as LA
from reference import lapack, matrices, metrics

lu_mod = importlib.import_module("mpslinalg.lu.kernels")

DTYPES = [torch.float32, torch.complex64]
DID = ["float32", "complex64"]
PASS = metrics.PASS_RATIO


@pytest.fixture
def tall(lib, monkeypatch):
    """``tall(dtype, order, seed, threads=1024, nb=32, **extra)``: the library's ``_MetalKernels``
    in that emulator thread order (``extra``: emulator keywords, ``tsan=True``, ``guard=True``),
    with ``TUNING.panel_tall = "one"``, ``lu_panel_tall`` on ``threads`` threads and the shipped
    ``panel_single_rows`` (256); the public op then runs the same way."""

    def make(dtype, order, seed, threads=1024, nb=32, **extra):
        monkeypatch.setattr(lu_mod, "load_library", lambda source, device: InOrder(lib(source), order, seed, **extra))
        monkeypatch.setattr(lu_mod.TUNING, "panel_tall", "one")
        monkeypatch.setattr(lu_mod.TUNING, "panel_tall_threads", threads)
        monkeypatch.setattr(lu_mod.TUNING, "panel_single_rows", 256)
        monkeypatch.setattr(lu_mod.TUNING, "panel_nb", nb)
        return lu_mod._MetalKernels(torch.device("cpu"), dtype)

    return make


def _factor_panel(kern, A, o, w, kernel="panel_tall"):
    LU = A.clone()
    B, M, N = A.shape
    piv = torch.zeros(B, min(M, N), dtype=torch.int32)
    info = torch.zeros(B, dtype=torch.int32)
    getattr(kern, kernel)(LU, piv, info, o, w)
    return LU, piv, info


def _expected_dispatches(M, N, nb=32, single=256):
    """The blocked LU's dispatches with TUNING.panel_tall = "one": per block at o, ONE panel
    dispatch (lu_panel up to ``single`` rows, else lu_panel_tall), one lu_laswp_block when there are
    columns left or right of it, a TRSM and a GEMM when there are columns to its right (no GEMM
    without rows below)."""
    count = {"lu_panel": 0, "lu_panel_tall": 0, "lu_laswp_block": 0, "trsm": 0, "gemm": 0}
    for o in range(0, min(M, N), nb):
        w = min(nb, N - o)
        kl = min(M - o, w)
        count["lu_panel" if M - o <= single else "lu_panel_tall"] += 1
        count["lu_laswp_block"] += N > w
        if o + w < N:
            count["trsm"] += 1
            count["gemm"] += M > o + kl
    return {k: v for k, v in count.items() if v}


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("threads", [1024, 64])
def test_panel_tall_matches_lapack(tall, order, seed, dtype, threads):
    """Panels of 300 and 600 rows (several rows per thread at 64 threads), at offsets: LAPACK's
    pivots, xGET01 < 30, nothing outside the panel touched, info 0."""
    kern = tall(dtype, order, seed, threads=threads)
    for M, N, o, w in [(300, 40, 0, 32), (300, 40, 5, 20), (600, 70, 33, 32)]:
        A = matrices.random(M, N, batch=(2,), dtype=dtype, seed=M + o)
        LU, piv, info = _factor_panel(kern, A, o, w)
        assert_panel(A, LU, piv, info, o, w)


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_panel_tall_is_lu_panel_bit_for_bit(tall, dtype):
    """The shared getf2 body: on a 200-row panel (which lu_panel factors too) lu_panel_tall at 1024
    threads gives lu_panel's (256 threads) factors and pivots exactly."""
    kern = tall(dtype, "inorder", 0)
    A = matrices.random(200, 48, batch=(2,), dtype=dtype, seed=11)
    for o, w in [(0, 32), (7, 25)]:
        got = _factor_panel(kern, A, o, w)
        ref = _factor_panel(kern, A, o, w, kernel="panel")
        for x, y in zip(got, ref):
            assert torch.equal(x, y)


SHAPES = [(300, 40), (600, 70), (1100, 33), (280, 330)]


@pytest.mark.parametrize("order,seed", [("inorder", 0), ("shuffle", 1)], ids=["inorder0", "shuffle1"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("m,n", SHAPES, ids=[f"{m}x{n}" for m, n in SHAPES])
def test_blocked_getrf_tall_vs_lapack(tall, order, seed, dtype, m, n):
    """The whole getrf (public op) with every panel in one dispatch, tall, square-ish and wide
    shapes with panels above 256 rows, batched (2 x 2): equal pivots, xGET01 < 30, info 0, and
    exactly the designed dispatches."""
    tall(dtype, order, seed)
    A = matrices.random(m, n, batch=(2, 2), dtype=dtype, seed=m * n)
    lu_mod.DISPATCHES.clear()
    with LA.use_backend("emulator"):
        LU, piv, info = LA.lu_factor_ex(A)
    assert dict(lu_mod.DISPATCHES) == _expected_dispatches(m, n)
    A3, LU3, piv3 = A.reshape(4, m, n), LU.reshape(4, m, n), piv.reshape(4, -1)
    assert torch.equal(piv3, lapack.getrf_pivots(A3))
    assert float(metrics.lu_factor_ratio(A3, LU3, piv3).max()) < PASS
    assert torch.equal(info, torch.zeros(2, 2, dtype=torch.int32))


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("n", [520, 1024])
def test_at_most_four_dispatches_per_panel(tall, dtype, n):
    """Issue 35's target with panel_tall "one" (nb = 32): at most 4 dispatches
    per 32-column panel (n = 520: 9 of its 17 panels above 256 rows; n = 1024: 24 of 32). The count
    is the loop's structure (``_expected_dispatches``), the same at any n: n = 4096 gives 510 for
    both dtypes, 3.98 a panel (docs/ops/lu.md)."""
    tall(dtype, "inorder", 0)
    A = matrices.random(n, n, dtype=dtype, seed=n)
    lu_mod.DISPATCHES.clear()
    with LA.use_backend("emulator"):
        LU, piv, info = LA.lu_factor_ex(A)
    panels = -(-n // 32)
    assert dict(lu_mod.DISPATCHES) == _expected_dispatches(n, n)
    assert sum(lu_mod.DISPATCHES.values()) <= 4 * panels
    assert lu_mod.DISPATCHES["lu_panel"] + lu_mod.DISPATCHES["lu_panel_tall"] == panels
    assert torch.equal(piv, lapack.getrf_pivots(A[None])[0])
    assert float(metrics.lu_factor_ratio(A, LU, piv)) < PASS
    assert int(info) == 0


def test_shipped_default_keeps_the_timed_panels():
    """The shipped tuning keeps the H200-timed multi-group panels until a GPU times lu_panel_tall
    (one group per panel was 2.8x slower there, docs/ops/lu.md); "one" is built at 1024 threads."""
    t = lu_mod.Tuning()
    assert (t.panel_tall, t.panel_tall_threads, t.panel_nb) == ("look", 1024, 32)


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_zero_columns_set_info_and_stay_finite(tall, order, seed, dtype):
    """Exactly zero columns 4 and 21 (1-based) of a 300 x 40 panel: info = 4 (the FIRST zero pivot,
    as LAPACK), no scaling of a zero column (no NaN or inf anywhere), pivots LAPACK's (a zero
    column keeps its diagonal row: pivot = itself)."""
    kern = tall(dtype, order, seed)
    A = matrices.random(300, 40, batch=(2,), dtype=dtype, seed=5)
    A[:, :, 3] = 0
    A[:, :, 20] = 0
    LU, piv, info = _factor_panel(kern, A, 0, 32)
    assert torch.equal(info, torch.full((2,), 4, dtype=torch.int32))
    assert bool(LU.isfinite().all())
    _, pivt, infot = torch.linalg.lu_factor_ex(A[:, :, :32].to(torch.complex128 if dtype.is_complex else
                                                                 torch.float64))
    assert torch.equal(piv[:, :32], pivt)
    assert torch.equal(info, infot)


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_singular_blocked_info_is_the_first_zero_pivot(tall, dtype):
    """A 600 x 600 batch whose zero columns lie in tall panels of the blocked LU (column 45: the
    second panel, 568 rows; column 100 in the other matrix): info is LAPACK's 1-based first zero
    pivot per matrix, the factors finite."""
    tall(dtype, "inorder", 0)
    A = matrices.random(600, 600, batch=(2,), dtype=dtype, seed=600)
    A[0, :, 44] = 0
    A[1, :, 99] = 0
    A[1, :, 200] = 0
    with LA.use_backend("emulator"):
        LU, piv, info = LA.lu_factor_ex(A)
    assert info.tolist() == [45, 100]
    assert bool(LU.isfinite().all())
    _, _, infot = torch.linalg.lu_factor_ex(A.to(torch.complex128 if dtype.is_complex else torch.float64))
    assert torch.equal(info, infot)


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_nan_pivots_and_propagation_match_torch_cpu(tall, dtype):
    """NaN and inf in tall panels (n = 300: the first panel has 300 rows): torch's CPU LAPACK's
    pivots and NaN pattern exactly (a NaN beats every number, the first NaN wins)."""
    tall(dtype, "shuffle", 1)
    NAN, INF = float("nan"), float("inf")
    n = 300
    assert_nans_match_torch(n, dtype, torch.Generator().manual_seed(n),
                            [[(5, 0, NAN)], [(280, 0, NAN), (12, 0, NAN)], [(3, 0, INF), (290, 0, NAN)],
                             [(270, 10, NAN)]])


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_subnormal_pivot_is_divided_not_inverted(tall, dtype):
    """LAPACK's sfmin rule in a tall panel (test_lu_kernels.py's case, moved down a 300-row panel):
    column 0 = 1e-39 at row 280, 5e-40 at row 3, else 0: the pivot is the subnormal (row 281,
    1-based), never inverted (1/1e-39 overflows to inf, 0 * inf = NaN); the multiplier is
    fl(5e-40 / 1e-39) with relative error <= u (one correctly rounded division); LU finite, ratio
    < 30."""
    kern = tall(dtype, "reverse", 0)
    A = matrices.random(300, 32, batch=(2,), dtype=dtype, seed=17)
    A[:, :, 0] = 0
    A[:, 280, 0] = 1e-39
    A[:, 3, 0] = 5e-40
    LU, piv, info = _factor_panel(kern, A, 0, 32)
    assert bool(LU.isfinite().all()) and info.tolist() == [0, 0]
    assert piv[:, 0].tolist() == [281, 281]
    exact = A[:, 3, 0].to(torch.complex128 if dtype.is_complex else torch.float64) / A[:, 280, 0]
    below = LU[:, 1:, 0]  # later row swaps move the one nonzero multiplier: find it
    mult = below.gather(1, below.abs().argmax(1, keepdim=True))[:, 0]
    assert float(((mult - exact).abs() / exact.abs()).max()) <= metrics.unit_roundoff(dtype)
    assert float(metrics.lu_factor_ratio(A, LU, piv).max()) < PASS


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_panel_tall_under_guard_pages(tall, dtype):
    """No access past a buffer's end (guard pages around every tensor)."""
    kern = tall(dtype, "inorder", 0, guard=True)
    A = matrices.random(300, 33, batch=(2,), dtype=dtype, seed=8)
    LU, piv, info = _factor_panel(kern, A, 1, 32)
    assert torch.equal(piv[:, 1:33] - 1, lapack.getrf_pivots(A[:, 1:, 1:33]))


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_panel_tall_has_no_race_under_tsan(tall, dtype):
    """ThreadSanitizer (every GPU thread a fiber, barriers as synchronisation): no unordered
    conflicting access in lu_panel_tall at 1024 threads (and 64: several rows per thread)."""
    from mpslinalg.emulator._tsan import tsan_available

    if not tsan_available():
        pytest.skip("clang's ThreadSanitizer runtime (libclang_rt.tsan-x86_64.so) is not installed")
    for threads in (1024, 64):
        kern = tall(dtype, "inorder", 0, threads=threads, tsan=True)
        A = matrices.random(300, 24, batch=(1,), dtype=dtype, seed=threads)
        LU, piv, info = _factor_panel(kern, A, 0, 24)
        assert torch.equal(piv, lapack.getrf_pivots(A))


@pytest.mark.parametrize("field,value", [("panel_tall", "many"), ("panel_tall_threads", 2048),
                                         ("panel_tall_threads", 48), ("panel_tall_threads", 16)])
def test_tall_tuning_outside_limits_is_a_clear_error(monkeypatch, field, value):
    monkeypatch.setattr(lu_mod.TUNING, field, value)
    with pytest.raises(ValueError, match=f"TUNING.{field}"):
        lu_mod._MetalKernels(torch.device("cpu"), torch.float32)
