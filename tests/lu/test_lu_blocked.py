"""The blocked LU of the kernel backends (issue 16): ``lu_panel_step`` (a tall panel shared by
several threadgroups), ``lu_panel_look``, ``lu_laswp_block`` and the whole ``getrf`` over them, in the emulator, in
every thread order, through the library's own call sites (``_MetalKernels``, the public op).

Bounds (the same derivations as ``test_lu_kernels.py``):

* Pivots: partial pivoting's pivot order is determined by the data, and random Gaussian data has no
  near-ties at these sizes, so the pivots must EQUAL LAPACK's ``sgetrf``/``cgetrf`` in the same
  precision (``reference.lapack.getrf_pivots``) and torch's (the same LAPACK).
* Factors: LAPACK's ``xGET01`` ratio ``‖PᵀA − LU‖₁/(n ‖A‖₁ u) < 30`` with ``u = 2^-24`` (Higham
  Thm 9.3: ``|ΔA| <= γ_n |L||U|``, modest growth for random matrices).
* ``info``, NaN positions, untouched columns and interchanges are discrete facts: exact.
"""

from __future__ import annotations

import importlib

import pytest
import torch
from helpers import ORDER_IDS as OID
from helpers import ORDERS, InOrder, NoHostSync
from lu.kernel_calls import assert_nans_match_torch, assert_panel

import mpslinalg as LA
from reference import lapack, matrices, metrics

lu_mod = importlib.import_module("mpslinalg.lu.kernels")

DTYPES = [torch.float32, torch.complex64]
DID = ["float32", "complex64"]
PASS = metrics.PASS_RATIO


@pytest.fixture
def blocked(lib, monkeypatch):
    """``blocked(dtype, order, seed, nb, rows, single, threads, look, slots)``: the library's
    ``_MetalKernels`` in that emulator thread order, with the blocked LU's tuning set (``single =
    0``: every panel is shared by ``ceil(rows_left / rows)`` threadgroups; ``look = 1``: one column
    per dispatch, ``lu_panel_step``; ``slots``: lu_panel_look's register budget; ``mma``: its
    float32 matrix-unit variant; ``short``: TUNING.panel_rows_short, off unless asked for, so
    that ``rows`` is what every group gets; ``colmajor``: lu_panel_look's column-major panel
    buffers; ``roll``: its rolled column loop; ``regs``: one-group panels in registers,
    ``lu_panel_regs``; ``outer``: blocks of that many columns with one trailing update each;
    ``swap_trsm``: the block's TRSM inside its lu_laswp_block; ``tall``: TUNING.panel_tall, "look"
    here (the panels shared by several groups; "one" is test_lu_panel_tall.py's).
    The public op then runs the same way."""

    def make(dtype, order, seed, nb=16, rows=16, single=0, threads=32, look=1, slots=32, mma=False, short=(0, 64),
             colmajor=False, roll=False, regs=False, outer=0, swap_trsm=False, tall="look"):
        monkeypatch.setattr(lu_mod, "load_library", lambda source, device: InOrder(lib(source), order, seed))
        monkeypatch.setattr(lu_mod.TUNING, "panel_tall", tall)
        for name, v in (("panel_nb", nb), ("panel_rows", rows), ("panel_single_rows", single),
                        ("panel_threads", threads), ("panel_look", look)):
            monkeypatch.setattr(lu_mod.TUNING, name, v)
        monkeypatch.setitem(lu_mod.TUNING.look_slots, "cpu", slots)
        monkeypatch.setattr(lu_mod.TUNING, "look_mma", mma)
        monkeypatch.setattr(lu_mod.TUNING, "panel_rows_short", short)
        monkeypatch.setattr(lu_mod.TUNING, "panel_colmajor", colmajor)
        monkeypatch.setattr(lu_mod.TUNING, "look_roll", roll)
        monkeypatch.setattr(lu_mod.TUNING, "panel_regs", regs)
        monkeypatch.setattr(lu_mod.TUNING, "panel_outer", outer)
        monkeypatch.setattr(lu_mod.TUNING, "swap_trsm", swap_trsm)
        return lu_mod._MetalKernels(torch.device("cpu"), dtype)

    return make


def _panel(kern, A, o, w):
    """``lu_panel_step`` on rows [o, M) x columns [o, o+w) of a copy of ``A``."""
    LU = A.clone()
    B, M, N = A.shape
    piv = torch.zeros(B, min(M, N), dtype=torch.int32)
    info = torch.zeros(B, dtype=torch.int32)
    kern.panel_steps(LU, piv, info, o, w, kern.panel_scratch(LU, w))
    return LU, piv, info


def _panel_look(kern, A, o, w):
    """``lu_panel_look`` on rows [o, M) x columns [o, o+w) of a copy of ``A`` (k by look_k)."""
    LU = A.clone()
    B, M, N = A.shape
    piv = torch.zeros(B, min(M, N), dtype=torch.int32)
    info = torch.zeros(B, dtype=torch.int32)
    bufs = kern.look_buffers(LU, w)  # the layout TUNING.panel_colmajor asks for
    for S in bufs:
        S.fill_(float("nan"))
    assert kern.panel_look(LU, piv, info, o, w, bufs)
    return LU, piv, info


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("look,slots,threads", [(2, 32, 32), (4, 32, 32), (8, 32, 32), (16, 32, 64)])
@pytest.mark.parametrize("rows", [16, 4])
@pytest.mark.parametrize("colmajor,roll", [(False, False), (True, False), (True, True)],
                         ids=["rowmajor", "colmajor", "colmajor-roll"])
def test_panel_look_several_groups_matches_lapack(blocked, order, seed, dtype, look, slots, threads, rows, colmajor,
                                                  roll):
    """k columns per dispatch, every group repeating the small LU of all active rows: pivots
    exactly LAPACK's, the ratio < 30, nothing outside the panel touched; 70 rows over 5 groups of
    16 (the last one 6 rows) or 18 groups of 4 (fewer than k: whole groups' rows are final after
    the first dispatch, which writes them to the buffer only, and the second moves them to A),
    panels at offsets, one narrower than k and one with fewer rows than columns; row- and
    column-major panel buffers, the column loop unrolled and rolled. The panel buffers start as
    NaN: a read of an entry not written first shows."""
    kern = blocked(dtype, order, seed, rows=rows, look=look, slots=slots, threads=threads, colmajor=colmajor,
                   roll=roll)
    M, N = 70, 80
    A = matrices.random(M, N, batch=(2,), dtype=dtype, seed=71)
    for o, w in [(0, 16), (7, 12), (40, 20), (60, 16), (3, 3)]:
        assert kern.look_k(M, o, w) == look
        LU, piv, info = _panel_look(kern, A, o, w)
        assert_panel(A, LU, piv, info, o, w)


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("look", [8, 16])
@pytest.mark.parametrize("rows", [16, 4])
def test_panel_look_matrix_units_match_lapack(blocked, order, seed, look, rows):
    """float32 lu_panel_look with the trailing update on Apple's matrix units (simdgroup_matrix
    8 x 8 products, TUNING.look_mma): pivots exactly LAPACK's and the ratio < 30 (the product is
    summed in another order than the k multiply-subtracts, as LAPACK's own GEMM update is; the
    bound is the same xGET01 derivation), nothing outside the panel touched; panels with k and
    fewer than k columns in a dispatch (k-padding), offsets not multiples of 8, groups of 16 and 4
    rows."""
    kern = blocked(torch.float32, order, seed, rows=rows, look=look, mma=True, threads=64)
    M, N = 70, 80
    A = matrices.random(M, N, batch=(2,), dtype=torch.float32, seed=72)
    for o, w in [(0, 32), (7, 21), (40, 20), (3, 3)]:
        LU, piv, info = _panel_look(kern, A, o, w)
        assert_panel(A, LU, piv, info, o, w)


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
def test_short_panels_use_smaller_groups(blocked, order, seed):
    """TUNING.panel_rows_short = (rows, R): a lu_panel_look panel of at most ``rows`` rows is shared
    by groups of at most R rows (more, smaller groups), a taller one by panel_rows; the results are
    LAPACK's either way."""
    kern = blocked(torch.complex64, order, seed, rows=16, look=8, short=(40, 4))
    launched = []
    kernel = kern._kernel

    def recording(*names):
        f = kernel(*names)

        def launch(*args, **kw):
            launched.append(kw["threads"] // 32)  # 32 threads a group
            return f(*args, **kw)
        return launch

    kern._kernel = recording
    A = matrices.random(70, 40, batch=(2,), dtype=torch.complex64, seed=5)
    for o, w, groups in [(0, 16, -(-70 // 16)), (30, 8, -(-40 // 4))]:  # 70 rows: 16 a group; 40: 4
        launched.clear()
        LU, piv, info = _panel_look(kern, A, o, w)
        assert set(launched) == {2 * groups}, (o, launched)  # two matrices
        kl = min(70 - o, w)
        panel = A[:, o:, o:o + w]
        assert torch.equal(piv[:, o:o + kl] - o, lapack.getrf_pivots(panel))
        assert float(metrics.lu_factor_ratio(panel, LU[:, o:, o:o + w], piv[:, o:o + kl] - o).max()) < PASS


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("roll", [False, True], ids=["unrolled", "rolled"])
def test_panel_look_zero_columns_set_info_and_stay_finite(blocked, order, seed, roll):
    """Zero columns inside one dispatch's k columns and in different dispatches: info is the first
    (the group owning the dispatch's first position writes it once, in column order); the column
    loop unrolled and rolled."""
    kern = blocked(torch.complex64, order, seed, rows=8, look=8, roll=roll)
    A = matrices.random(40, 12, batch=(4,), dtype=torch.complex64, seed=4)
    A[0, :, 4] = 0  # info 5
    A[1, :, 0] = 0  # info 1
    A[2, :, 7] = 0
    A[2, :, 5] = 0  # two in the first dispatch (columns 0..7): info 6
    A[3, :, 9] = 0
    A[3, :, 2] = 0  # info 3, and a later zero column in the second dispatch
    LU, piv, info = _panel_look(kern, A, 0, 12)
    assert info.tolist() == [5, 1, 6, 3]
    assert bool(torch.isfinite(LU).all())
    assert torch.equal(piv, lapack.getrf_pivots(A))
    assert float(metrics.lu_factor_ratio(A, LU, piv).max()) < PASS


def test_panel_look_fits_only_where_the_active_rows_fit(blocked):
    """k is the largest of 16, 8, 4, 2 (at most panel_look) with rows <= threads * slots / k; else
    0 (the caller uses lu_panel_step): 32 threads with 32 slots hold 128 complex64 rows at k = 8,
    256 at k = 4, 512 at k = 2, and twice as many float32 rows (64 float slots per thread instead
    of 32 complex ones)."""
    kern = blocked(torch.complex64, "inorder", 0, look=8)
    assert [kern.look_k(M, 0, 16) for M in (128, 129, 256, 257, 512, 513)] == [8, 4, 4, 2, 2, 0]
    kern = blocked(torch.complex64, "inorder", 0, look=16)
    assert [kern.look_k(M, 0, 16) for M in (64, 65, 128, 129)] == [16, 8, 8, 4]
    assert kern.look_k(100, 0, 128) == 0  # wider than the kernel's 64 columns
    kern = blocked(torch.float32, "inorder", 0, look=8)
    assert [kern.look_k(M, 0, 16) for M in (256, 257, 512, 513, 1024, 1025)] == [8, 4, 4, 2, 2, 0]
    kern = blocked(torch.float32, "inorder", 0, look=2)
    assert kern.look_k(256, 0, 16) == 2
    # per dtype (the default's form): float32 up to 16, complex64 up to 8
    for dtype, k in ((torch.float32, 16), (torch.complex64, 8)):
        kern = blocked(dtype, "inorder", 0, look={"float32": 16, "complex64": 8})
        assert kern.look_k(64, 0, 16) == k


def _panel_one_group(kern, A, o, w):
    """``_MetalKernels.panel`` (one threadgroup per matrix) on rows [o, M) x columns [o, o+w) of a
    copy of ``A``."""
    LU = A.clone()
    B, M, N = A.shape
    piv = torch.zeros(B, min(M, N), dtype=torch.int32)
    info = torch.zeros(B, dtype=torch.int32)
    kern.panel(LU, piv, info, o, w)
    return LU, piv, info


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_panel_regs_matches_lapack(blocked, order, seed, dtype):
    """lu_panel_regs (the whole panel in one group's registers, 32 threads: 32 complex64 or 64
    float32 rows): pivots exactly LAPACK's, the ratio < 30, nothing outside the panel touched;
    full and narrower panels (w < 32: the rotation-only steps), fewer rows than columns, panels at
    offsets, and the most rows that fit; a panel one row taller goes to lu_panel (same results)."""
    kern = blocked(dtype, order, seed, threads=32, regs=True)
    cap = 64 if dtype == torch.float32 else 32
    M, N = cap + 10, 80
    A = matrices.random(M, N, batch=(2,), dtype=dtype, seed=73)
    launched = []
    kernel = kern._kernel
    kern._kernel = lambda *names: launched.append(names[0]) or kernel(*names)
    for o, w, fits in [(10, 32, True), (20, 7, True), (M - 5, 8, True), (10, 1, True), (9, 32, False)]:
        launched.clear()
        assert kern.regs_fit(M, o, w) == fits
        LU, piv, info = _panel_one_group(kern, A, o, w)
        assert launched == ["lu_panel_regs" if fits else "lu_panel"]
        assert_panel(A, LU, piv, info, o, w)


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
def test_panel_regs_zero_columns_set_info_and_stay_finite(blocked, order, seed):
    """lu_panel_regs: a zero pivot column sets info to the first one, nothing is divided by it."""
    kern = blocked(torch.complex64, order, seed, threads=32, regs=True)
    A = matrices.random(30, 12, batch=(3,), dtype=torch.complex64, seed=6)
    A[0, :, 4] = 0  # info 5
    A[1, :, 0] = 0  # info 1
    A[2, :, 9] = 0
    A[2, :, 7] = 0  # info 8
    LU, piv, info = _panel_one_group(kern, A, 0, 12)
    assert info.tolist() == [5, 1, 8]
    assert bool(torch.isfinite(LU).all())
    assert torch.equal(piv, lapack.getrf_pivots(A))
    assert float(metrics.lu_factor_ratio(A, LU, piv).max()) < PASS


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_panel_step_several_groups_matches_lapack(blocked, order, seed, dtype):
    # 70 rows / 16 per group: 5 groups (the last one 6 rows), 32 threads: rows in chunks
    kern = blocked(dtype, order, seed)
    M, N = 70, 80
    A = matrices.random(M, N, batch=(2,), dtype=dtype, seed=70)
    for o, w in [(0, 16), (7, 12), (40, 20), (60, 16)]:  # the last: fewer rows than columns (kl = 10)
        LU, piv, info = _panel(kern, A, o, w)
        kl = min(M - o, w)
        panel = A[:, o:, o:o + w]
        assert torch.equal(piv[:, o:o + kl] - o, lapack.getrf_pivots(panel))
        assert float(metrics.lu_factor_ratio(panel, LU[:, o:, o:o + w], piv[:, o:o + kl] - o).max()) < PASS
        assert torch.equal(LU[:, :, :o], A[:, :, :o])  # only the panel is touched
        assert torch.equal(LU[:, :, o + w:], A[:, :, o + w:])
        assert torch.equal(LU[:, :o, :], A[:, :o, :])
        assert torch.equal(info, torch.zeros(2, dtype=torch.int32))


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_panel_step_tall_panel(blocked, order, seed, dtype):
    # a tall panel as the blocked LU meets it: 600 rows over 10 groups of 64 rows (16 entries of a
    # group's block per thread, the register block's limit)
    kern = blocked(dtype, order, seed, rows=64, threads=64)
    A = matrices.random(600, 16, dtype=dtype, seed=600)[None]
    LU, piv, info = _panel(kern, A, 0, 16)
    assert torch.equal(piv, lapack.getrf_pivots(A))
    assert float(metrics.lu_factor_ratio(A, LU, piv).max()) < PASS
    assert int(info) == 0


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
def test_panel_step_zero_columns_set_info_and_stay_finite(blocked, order, seed):
    """A zero column j (1-based) of a matrix whose previous columns are independent gives a zero
    pivot at exactly j: info = the first one; nothing is divided by it (LU finite)."""
    kern = blocked(torch.complex64, order, seed, rows=8)
    n = 40
    A = matrices.random(n, 12, batch=(3,), dtype=torch.complex64, seed=3)
    A[0, :, 4] = 0  # info 5
    A[1, :, 0] = 0  # info 1
    A[2, :, 7] = 0
    A[2, :, 9] = 0  # the first zero pivot wins: info 8
    LU, piv, info = _panel(kern, A, 0, 12)
    assert info.tolist() == [5, 1, 8]
    assert bool(torch.isfinite(LU).all())
    assert torch.equal(piv, lapack.getrf_pivots(A))
    assert float(metrics.lu_factor_ratio(A, LU, piv).max()) < PASS


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("look,mma,roll", [(1, False, False), (8, False, False), (16, True, False), (8, False, True)],
                         ids=["step", "look8", "look16mma", "look8roll"])
def test_blocked_nan_pivots_and_propagation_match_torch_cpu(blocked, order, seed, dtype, look, mma, roll):
    """NaN input through the blocked LU with every panel shared by several groups: the pivots and
    the NaN pattern of LU equal torch's CPU LAPACK's (MKL picks the first NaN of a column for
    n >= 17), with the NaN in the first, a middle and the last block, and in a pivot-search
    candidate of a group other than the diagonal's; also through lu_panel_look's float32
    matrix-unit variant (its zero k-padding must not turn inf * 0 into NaN) and its rolled column loop
    (a row's finished entries rotate past the update by selects, never by a multiply with 0)."""
    blocked(dtype, order, seed, rows=8, look=look, mma=mma, roll=roll)  # patches the public op's kernels
    n = 50
    assert_nans_match_torch(n, dtype, torch.Generator().manual_seed(n),
                            [[(5, 0, NAN)], [(0, 0, NAN)], [(30, 0, NAN), (12, 0, NAN)], [(3, 0, INF), (44, 0, NAN)],
                             [(20, 25, NAN)], [(n - 1, n - 1, NAN)]])


def _panel_steps_per_call(M, N, nb, rows_single, look=1, threads=32, slots=32, regs=0, outer=0, swap_trsm=False):
    """The dispatches the blocked LU issues (its design, docs/evidence/lu.md): per block at o a panel
    (one lu_panel_regs if it has <= rows_single rows and at most ``regs`` rows (0: never), else one
    lu_panel if it has <= rows_single rows; else, where the M - o active rows fit k <= look
    columns per dispatch, ceil(min(M - o, w) / k) lu_panel_look, after one copy if that is 1; else
    min(M - o, w) + 1 lu_panel_step), one lu_laswp_block when there are columns left or right of
    it (one dispatch for both sides), and one TRSM + GEMM for every block with columns to its right
    (no GEMM without rows below). ``outer`` > nb: the blocks of nb columns inside each block of
    ``outer`` columns keep their interchanges (one lu_laswp_block where the outer block has other
    columns) and updates (TRSM + GEMM) inside it; then the outer block's interchanges and update as
    one block's. ``swap_trsm``: no TRSM dispatch where the block has at most 32 pivots (its
    lu_laswp_block solves)."""
    K = min(M, N)
    NB = outer if outer > nb else nb
    count = {"lu_panel_regs": 0, "lu_panel": 0, "lu_panel_step": 0, "lu_panel_look": 0, "copy": 0,
             "lu_laswp_block": 0, "trsm": 0, "gemm": 0}
    for O in range(0, K, NB):
        W = min(NB, N - O)
        KW = min(M - O, W)
        for o in range(O, O + KW, nb):
            w = min(nb, O + W - o)
            kl = min(M - o, w)
            k = next((k for k in (16, 8, 4, 2) if k <= look and M - o <= threads * slots // k), 0)
            if M - o <= rows_single and M - o <= regs:
                count["lu_panel_regs"] += 1
            elif M - o <= rows_single:
                count["lu_panel"] += 1
            elif k:
                count["copy"] += kl <= k  # a panel of one dispatch is copied to the buffer first
                count["lu_panel_look"] += -(-kl // k)
            else:
                count["lu_panel_step"] += kl + 1
            count["lu_laswp_block"] += NB > nb and W > w
            if o + w < O + W:
                count["trsm"] += not (swap_trsm and kl <= 32)
                count["gemm"] += M > o + kl
        count["lu_laswp_block"] += N > W
        if O + W < N:
            count["trsm"] += not (swap_trsm and KW <= 32)
            count["gemm"] += M > O + KW
    return {k: v for k, v in count.items() if v}


SHAPES = [(100, 100), (130, 70), (70, 130), (33, 33)]


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("m,n", SHAPES, ids=[f"{m}x{n}" for m, n in SHAPES])
@pytest.mark.parametrize("look,colmajor,roll",
                         [(1, False, False), (4, False, False), (4, True, False), (4, True, True)],
                         ids=["look1", "look4", "look4cm", "look4cm-roll"])
@pytest.mark.parametrize("regs", [False, True], ids=["device", "regs"])
def test_blocked_getrf_vs_lapack(blocked, order, seed, dtype, m, n, look, colmajor, roll, regs):
    """The whole getrf on the emulator backend (public op), panels shared by several groups (and,
    with panel_single_rows = 40, the short last panels on one group: both paths in one call), one
    column per dispatch or 4 (lu_panel_look; with 32 threads 130 rows do not fit 4 columns: 2 do)
    against LAPACK: equal pivots, ratio < 30, info 0, and exactly the designed dispatches; row- and
    column-major panel buffers, the column loop unrolled and rolled, one-group panels in device
    memory or in registers (lu_panel_regs: 32 threads hold 32 complex64 or 64 float32 rows, so the
    short panels of at most 40 rows are split between both kernels by the rows they have)."""
    for single in (0, 40):
        blocked(dtype, order, seed, rows=16, single=single, look=look, colmajor=colmajor, roll=roll, regs=regs)
        A = matrices.random(m, n, batch=(2,), dtype=dtype, seed=m + n)
        lu_mod.DISPATCHES.clear()
        with LA.use_backend("emulator"):
            LU, piv, info = LA.lu_factor_ex(A)
        slots = 64 if dtype == torch.float32 else 32
        assert dict(lu_mod.DISPATCHES) == _panel_steps_per_call(m, n, 16, single, look, slots=slots,
                                                                regs=regs and (slots // 32) * 32)
        assert torch.equal(piv, lapack.getrf_pivots(A))
        assert float(metrics.lu_factor_ratio(A, LU, piv).max()) < PASS
        assert torch.equal(info, torch.zeros(2, dtype=torch.int32))


OUTER_SHAPES = [(100, 100), (130, 70), (70, 130), (150, 150)]


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("m,n", OUTER_SHAPES, ids=[f"{m}x{n}" for m, n in OUTER_SHAPES])
@pytest.mark.parametrize("outer,swap_trsm", [(64, False), (64, True), (0, True)], ids=["outer", "outer-swaptrsm",
                                                                                       "swaptrsm"])
def test_blocked_getrf_outer_blocks_vs_lapack(blocked, order, seed, dtype, m, n, outer, swap_trsm):
    """TUNING.panel_outer = 64 over blocks of 16 (four inner panels a block, their interchanges and
    updates inside the block, then one rank-64 trailing update): equal pivots, ratio < 30, info
    0, exactly the designed dispatches; with the rolled, column-major lu_panel_look and
    lu_panel_regs for the short panels (panel_single_rows 40), as the fastest tuning would run;
    with the blocks' TRSM inside lu_laswp_block (``swap_trsm``: the inner blocks of 16 columns and,
    without outer blocks, every block; the outer blocks' 64 rows keep trsm_small)."""
    blocked(dtype, order, seed, rows=16, single=40, look=4, colmajor=True, roll=True, regs=True, outer=outer,
            swap_trsm=swap_trsm)
    A = matrices.random(m, n, batch=(2,), dtype=dtype, seed=m * n)
    lu_mod.DISPATCHES.clear()
    with LA.use_backend("emulator"):
        LU, piv, info = LA.lu_factor_ex(A)
    slots = 64 if dtype == torch.float32 else 32
    assert dict(lu_mod.DISPATCHES) == _panel_steps_per_call(m, n, 16, 40, 4, slots=slots, regs=slots, outer=outer,
                                                            swap_trsm=swap_trsm)
    assert torch.equal(piv, lapack.getrf_pivots(A))
    assert float(metrics.lu_factor_ratio(A, LU, piv).max()) < PASS
    assert torch.equal(info, torch.zeros(2, dtype=torch.int32))


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("look", [1, 8, 16])
def test_blocked_getrf_nb_64_and_no_host_sync(blocked, dtype, look):
    """The production width (nb = 64, 64 rows per group, 256 threads) at n = 200, without any host
    read of a tensor's values (``_ex`` ops never synchronise)."""
    blocked(dtype, "inorder", 0, nb=64, rows=64, single=0, threads=256, look=look)
    A = matrices.random(200, 200, dtype=dtype, seed=200)
    with LA.use_backend("emulator"), NoHostSync():
        LU, piv, info = LA.lu_factor_ex(A)
    assert torch.equal(piv, lapack.getrf_pivots(A))
    assert float(metrics.lu_factor_ratio(A, LU, piv)) < PASS
    assert int(info) == 0


def _swapped(X, piv, k1, k2, cols, reverse=False):
    """LAPACK's laswp, one interchange at a time, on the columns ``cols`` of every matrix."""
    ref = X.clone()
    steps = range(k2 - 1, k1 - 1, -1) if reverse else range(k1, k2)
    for b in range(X.shape[0]):
        for i in steps:
            q = int(piv[b, i]) - 1
            if 0 <= q < X.shape[1]:
                rows = ref[b, [i, q]][:, cols].clone()
                ref[b, i, cols], ref[b, q, cols] = rows[1], rows[0]
    return ref


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_laswp_block_exact(blocked, order, seed, dtype):
    """lu_laswp_block (one permutation gather) equals LAPACK's sequential swaps exactly on the
    columns left and right of a panel, the panel's own columns untouched: repeated targets, targets
    inside and outside the range, targets equal to their row, 64 interchanges (the most per
    dispatch), more than 32 columns (two column groups), only a range of columns (lo, hi), with the
    fused triangular solve of the block's rows on the columns right of the panel, and invalid
    pivots (skipped)."""
    kern = blocked(dtype, order, seed)
    B, M, N = 2, 140, 75
    X = matrices.random(M, N, batch=(B,), dtype=dtype, seed=9)
    g = torch.Generator().manual_seed(1)
    K = min(M, N)
    piv = torch.stack([torch.randint(i, M, (B,), generator=g) for i in range(K)], -1).to(torch.int32) + 1
    piv[0, 3:9] = 15    # one target repeated, inside the range [3, 20) of the first case
    piv[1, 5:12] = 100  # one target repeated, outside it
    piv[0, 40] = 41     # no interchange
    for k1, k2, w in [(3, 20, 5), (0, 64, 64), (10, 11, 1), (30, 62, 32), (60, 75, 15)]:
        Y = X.clone()
        kern.swap_around(Y, piv, k1, k2, w)
        cols = [c for c in range(N) if not k1 <= c < k1 + w]
        assert torch.equal(Y, _swapped(X, piv, k1, k2, cols)), (k1, k2, w)
    # inside a column range (the outer blocks' inner panels): only [lo, hi) but the panel
    for k1, k2, w, lo, hi in [(16, 32, 16, 0, 64), (32, 48, 16, 0, 64), (40, 50, 10, 40, 75), (5, 9, 4, 5, 9)]:
        Y = X.clone()
        kern.swap_around(Y, piv, k1, k2, w, lo, hi)
        cols = [c for c in range(lo, hi) if not k1 <= c < k1 + w]
        assert torch.equal(Y, _swapped(X, piv, k1, k2, cols)), (k1, k2, w, lo, hi)
    # with the triangular solve of the rows moved into place (columns right of the panel): the
    # residual ratio ||B - L11 X||_1 / (n ||L11||_1 ||X||_1 u) < 30 (LAPACK's xTRT02 form; Higham
    # Thm 8.5: forward substitution is backward stable, |dL| <= gamma_n |L|), the rest exact.
    # L11's entries in [-1, 1], as partial pivoting's
    for k1, k2, w, lo, hi in [(3, 20, 17, 0, N), (0, 32, 32, 0, N), (10, 11, 1, 0, N), (16, 32, 16, 0, 64),
                              (40, 50, 10, 40, 75)]:
        Xt = X.clone()
        Xt[:, k1:k2, k1:k2] = 2 * torch.rand(B, k2 - k1, k2 - k1, generator=g).to(dtype) - 1
        Y = Xt.clone()
        kern.swap_around(Y, piv, k1, k2, w, lo, hi, trsm=True)
        cols = [c for c in range(lo, hi) if not k1 <= c < k1 + w]
        ref = _swapped(Xt, piv, k1, k2, cols)
        right = [c for c in cols if c >= k1 + w]
        top = list(range(k1, k2))
        others = torch.ones(M, N, dtype=torch.bool)
        others[k1:k2, k1 + w:hi] = False
        assert torch.equal(Y[:, others], ref[:, others]), (k1, k2, w, lo, hi)
        L = torch.tril(Xt[:, k1:k2, k1:k2].to(torch.complex128), -1) + torch.eye(k2 - k1)
        Xs = Y[:, top][:, :, right].to(torch.complex128)
        Bs = ref[:, top][:, :, right].to(torch.complex128)
        res = torch.linalg.matrix_norm(Bs - L @ Xs, ord=1)
        den = (k2 - k1) * torch.linalg.matrix_norm(L, ord=1) * torch.linalg.matrix_norm(Xs, ord=1) * 2.0 ** -24
        assert float((res / den).max()) < PASS, (k1, k2, w, lo, hi)
    bad = piv.clone()
    bad[0, 4], bad[1, 6] = 0, M + 7  # invalid (a user's): skipped, never out of bounds
    Y = X.clone()
    kern.swap_around(Y, bad, 3, 20, 5)
    assert torch.equal(Y, _swapped(X, bad, 3, 20, [c for c in range(N) if not 3 <= c < 8]))


@pytest.mark.parametrize("field,value", [("panel_nb", 48), ("panel_nb", 128), ("panel_nb", 64.0),
                                         ("panel_rows", 0), ("panel_single_rows", -1), ("panel_look", 3),
                                         ("panel_look", 32), ("panel_look", {"float32": 12}),
                                         ("panel_rows_short", (100, 0)), ("panel_rows_short", [100, 16]),
                                         ("panel_outer", 32), ("panel_outer", 128), ("panel_regs", 1)])
def test_blocked_tuning_outside_limits_is_a_clear_error(monkeypatch, field, value):
    monkeypatch.setattr(lu_mod.TUNING, field, value)
    with pytest.raises(ValueError, match=f"TUNING.{field}"):
        lu_mod._MetalKernels(torch.device("cpu"), torch.float32)


@pytest.mark.parametrize("value", [48, 64, 32.0, "32"])
def test_look_slots_outside_the_instantiated_budgets_is_a_clear_error(monkeypatch, value):
    monkeypatch.setitem(lu_mod.TUNING.look_slots, "cpu", value)
    with pytest.raises(ValueError, match="TUNING.look_slots"):
        lu_mod._MetalKernels(torch.device("cpu"), torch.float32)


def test_panel_rows_beyond_the_register_block_is_a_clear_error(blocked):
    """lu_panel_step holds a group's rows x w entries in registers, 16 per thread: 64 rows x 16
    columns need 64 threads; with 32 the call is refused before any launch."""
    kern = blocked(torch.float32, "inorder", 0, rows=64, threads=32)
    A = matrices.random(100, 16, dtype=torch.float32, seed=1)[None]
    with pytest.raises(ValueError, match="TUNING.panel_rows"):
        _panel(kern, A, 0, 16)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("threads,look,single,variant,cm", [(256, 8, 0, "", False), (32, 8, 0, "", False),
                                                            (256, 1, 0, "", False), (256, 8, 256, "", False),
                                                            (256, 16, 0, "mma", False), (32, 8, 0, "", True),
                                                            (32, 8, 0, "roll", True), (256, 8, 256, "regs+roll", True),
                                                            (256, 8, 0, "swaptrsm", True), (256, 8, 0, "tall", True),
                                                            (256, 8, 256, "tall", True)],
                         ids=["look8", "look2to8", "step", "onegroup", "look16mma", "look2to8cm", "look2to8cm-roll",
                              "onegroup-regs-roll-cm", "look8cm-swaptrsm", "tall", "onegroup-tall"])
def test_blocked_getrf_on_the_cuda_target(monkeypatch, dtype, threads, look, single, variant, cm):
    """The blocked LU's kernels on an NVIDIA GPU (the emulator's cuda target: real parallel
    threadgroups; the H200 run puts this test under compute-sanitizer racecheck): tall panels
    shared by several groups (``lu_panel_look`` with k = 8, or, with 32 threads, k = 2, 4 and 8 as
    the active rows shrink; ``lu_panel_step``), one-group panels, ``lu_laswp_block``. Factors pass
    xGET01 (< 30, the derivation in the module docstring) and ``info`` is 0; pivots are not compared
    with LAPACK's (cuBLAS's GEMM rounding may decide a near-tie differently), but must be valid
    LAPACK pivots (row ``i`` swapped with a row ``>= i``). ``lu_laswp_block`` alone: exactly the
    sequential swaps. ``look16mma``: k = 16, float32 through the matrix-unit variant; ``look2to8cm``:
    column-major panel buffers; ``-roll``: the rolled column loop; ``-regs``: the one-group panels
    in registers (lu_panel_regs); ``-swaptrsm``: the blocks' TRSM inside lu_laswp_block; ``tall``:
    every panel (``onegroup-tall``: those above 256 rows) by ONE group of 1024 threads in one
    dispatch (lu_panel_tall, TUNING.panel_tall = "one")."""
    for name, v in (("panel_nb", 32), ("panel_rows", 32), ("panel_single_rows", single),
                    ("panel_threads", threads), ("panel_look", look), ("look_mma", variant == "mma"),
                    ("look_roll", "roll" in variant), ("panel_regs", "regs" in variant), ("panel_colmajor", cm),
                    ("swap_trsm", "swaptrsm" in variant), ("panel_tall", "one" if "tall" in variant else "look")):
        monkeypatch.setattr(lu_mod.TUNING, name, v)
    A = matrices.random(300, 300, batch=(2,), dtype=dtype, seed=300)
    with LA.use_backend("emulator"):
        LU, piv, info = LA.lu_factor_ex(A.cuda())
    LU, piv, info = LU.cpu(), piv.cpu(), info.cpu()
    assert torch.equal(info, torch.zeros(2, dtype=torch.int32))
    rows = torch.arange(1, 301, dtype=torch.int32)
    assert bool(((piv >= rows) & (piv <= 300)).all())
    assert float(metrics.lu_factor_ratio(A, LU, piv).max()) < PASS
    kern = lu_mod._MetalKernels(torch.device("cuda"), dtype)
    X = matrices.random(140, 75, batch=(2,), dtype=dtype, seed=9)
    g = torch.Generator().manual_seed(1)
    pv = torch.stack([torch.randint(i, 140, (2,), generator=g) for i in range(75)], -1).to(torch.int32) + 1
    for k1, k2, w in [(3, 20, 5), (0, 64, 64), (60, 75, 15)]:
        Y = X.cuda()
        kern.swap_around(Y, pv.cuda(), k1, k2, w)
        cols = [c for c in range(75) if not k1 <= c < k1 + w]
        assert torch.equal(Y.cpu(), _swapped(X, pv, k1, k2, cols)), (k1, k2, w)
