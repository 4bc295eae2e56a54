"""The kernels of ``metal/lu_*.metal`` in the emulator, in every thread order.

Each case runs in order, in reverse and shuffled (two seeds), so a missing barrier shows, through
the library's own launch code (``mpslinalg.lu.kernels._MetalKernels`` with its ``load_library`` patched to
add the emulator-only ``order``/``seed``).

Bounds:

* ``lu_laswp`` only moves values: it must equal the sequential LAPACK ``laswp`` exactly.
* ``lu_panel`` / ``lu_small`` do LAPACK ``getf2``. On inputs without ties the pivots must equal
  LAPACK's ``sgetrf``/``cgetrf`` pivots computed in the same precision
  (``reference.lapack.getrf_pivots``) — the pivot order of partial pivoting is determined by the
  data, and random Gaussian data has no near-ties at these sizes (the largest and second-largest
  candidate differ by far more than the O(n u) rounding of the updates). The factors must pass
  LAPACK's ``xGET01`` ratio ``‖PᵀA − LU‖₁/(n ‖A‖₁ u) < 30`` (Higham Thm 9.3: ``|ΔA| <= γ_n |L||U|``
  with modest growth for random matrices). Columns outside the panel are never touched (exact).
* ``info`` is exact: a zero column ``j`` (1-based) of a matrix whose previous columns are
  independent gives a zero pivot at exactly ``j``.
"""

from __future__ import annotations

import importlib

import pytest
import torch
from helpers import ORDER_IDS as OID
from helpers import ORDERS, InOrder
from lu.kernel_calls import assert_nans_match_torch, factor

from reference import lapack, matrices, metrics

lu_mod = importlib.import_module("mpslinalg.lu.kernels")

DTYPES = [torch.float32, torch.complex64]
DID = ["float32", "complex64"]


@pytest.fixture
def kernels(lib, monkeypatch):
    """``kernels(dtype, order, seed, panel_threads=256)``: the library's ``_MetalKernels`` whose
    launches run in that emulator thread order (lu_panel with that many threads per group)."""

    def make(dtype, order, seed, panel_threads=256):
        monkeypatch.setattr(lu_mod, "load_library", lambda source, device: InOrder(lib(source), order, seed))
        monkeypatch.setattr(lu_mod.TUNING, "panel_threads", panel_threads)
        return lu_mod._MetalKernels(torch.device("cpu"), dtype)

    return make


def _ratio(A, LU, piv):
    return metrics.lu_factor_ratio(A, LU, piv)


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_lu_small(kernels, order, seed, dtype):
    kern = kernels(dtype, order, seed)
    for m, n in [(9, 9), (32, 32), (12, 5), (5, 12)]:
        A = matrices.random(m, n, batch=(3,), dtype=dtype, seed=m * 100 + n)
        LU, piv, info = factor(kern, "small", A)
        assert torch.equal(piv, lapack.getrf_pivots(A))
        assert torch.equal(info, torch.zeros(3, dtype=torch.int32))
        assert float(_ratio(A, LU, piv).max()) < metrics.PASS_RATIO


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_lu_panel(kernels, order, seed, dtype):
    kern = kernels(dtype, order, seed, panel_threads=64)
    M, N = 40, 20
    A = matrices.random(M, N, batch=(2,), dtype=dtype, seed=7)
    for o, w in [(0, 8), (5, 6), (12, 8)]:
        LU = A.clone()
        K = min(M, N)
        piv = torch.zeros(2, K, dtype=torch.int32)
        info = torch.zeros(2, dtype=torch.int32)
        kern.panel(LU, piv, info, o, w)
        panel = A[:, o:, o:o + w]
        # the panel's own pivots (relative to row o) are LAPACK's for that block
        assert torch.equal(piv[:, o:o + w] - o, lapack.getrf_pivots(panel))
        assert float(_ratio(panel, LU[:, o:, o:o + w], piv[:, o:o + w] - o).max()) < metrics.PASS_RATIO
        # nothing outside the panel's columns / rows is touched
        assert torch.equal(LU[:, :, :o], A[:, :, :o])
        assert torch.equal(LU[:, :, o + w:], A[:, :, o + w:])
        assert torch.equal(LU[:, :o, :], A[:, :o, :])
        assert torch.equal(info, torch.zeros(2, dtype=torch.int32))


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("kernel", ["small", "panel"])
def test_zero_pivot_sets_info_and_no_nan(kernels, order, seed, kernel):
    kern = kernels(torch.complex64, order, seed, panel_threads=32)
    n = 12
    A = matrices.random(n, n, batch=(3,), dtype=torch.complex64, seed=3)
    A[0, :, 4] = 0  # info 5
    A[1, :, 0] = 0  # info 1
    A[2, :, 7] = 0
    A[2, :, 9] = 0  # first zero pivot wins: info 8
    LU, piv, info = factor(kern, kernel, A, n)
    assert info.tolist() == [5, 1, 8]
    assert bool(torch.isfinite(LU).all())  # a zero pivot is never divided by
    assert float(_ratio(A, LU, piv).max()) < metrics.PASS_RATIO


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_lu_laswp_exact(kernels, order, seed, dtype):
    kern = kernels(dtype, order, seed)
    B, M, N = 3, 10, 7
    X = matrices.random(M, N, batch=(B,), dtype=dtype, seed=11)
    g = torch.Generator().manual_seed(5)
    K = 8
    piv = torch.stack([torch.randint(i, M, (B,), generator=g) for i in range(K)], -1).to(torch.int32) + 1
    for k1, k2, c0, nc, rev in [(0, K, 0, N, 0), (2, 6, 1, 4, 0), (0, K, 0, N, 1), (3, 8, 2, 5, 1)]:
        Y = X.clone()
        kern.swap(Y, piv, k1, k2, c0, nc, reverse=bool(rev))
        ref = X.clone()
        steps = range(k2 - 1, k1 - 1, -1) if rev else range(k1, k2)
        for b in range(B):
            for i in steps:
                q = int(piv[b, i]) - 1
                rows = ref[b, [i, q], c0:c0 + nc].clone()
                ref[b, i, c0:c0 + nc], ref[b, q, c0:c0 + nc] = rows[1], rows[0]
        assert torch.equal(Y, ref)
        # the torch-op implementation of the same contract agrees exactly
        Z = X.clone()
        lu_mod._TORCH_KERNELS.swap(Z, piv, k1, k2, c0, nc, reverse=bool(rev))
        assert torch.equal(Z, ref)


def test_swaps_to_perm_matches_sequential():
    # the sync-free permutation of the torch backend vs LAPACK's sequential interchanges
    g = torch.Generator().manual_seed(0)
    for trial in range(60):
        m = int(torch.randint(1, 50, (1,), generator=g))
        k = int(torch.randint(1, m + 1, (1,), generator=g))
        p = torch.stack([torch.randint(i, m, (2,), generator=g) for i in range(k)], -1)
        chunk = 1 + trial % 9
        perm = lu_mod._swaps_to_perm(p, m, chunk=chunk)
        for b in range(2):
            ref = list(range(m))
            for i in range(k):
                j = int(p[b, i])
                ref[i], ref[j] = ref[j], ref[i]
            assert perm[b].tolist() == ref


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_lu_small_solve(kernels, order, seed, dtype):
    kern = kernels(dtype, order, seed)
    # the fused factor + solve: backward stable like getrf + getrs, so LAPACK's xGET02 ratio
    # ‖B − AX‖₁/(‖A‖₁‖X‖₁u) < 30 (Higham Thm 9.4); a zero column gives info exactly.
    for n, k in [(9, 1), (32, 8), (5, 7)]:  # the fused kernel takes k <= 8 (SMALL_SOLVE_MAX_RHS)
        A = matrices.random(n, n, batch=(3,), dtype=dtype, seed=n + k)
        B = matrices.random(n, k, batch=(3,), dtype=dtype, seed=n * k + 1)
        X = torch.empty_like(B)
        info = torch.zeros(3, dtype=torch.int32)
        kern.small_solve(A, B, X, info)
        assert torch.equal(info, torch.zeros(3, dtype=torch.int32))
        assert float(metrics.solve_ratio(A, X, B).max()) < metrics.PASS_RATIO
    A[1, :, 2] = 0
    info.zero_()
    kern.small_solve(A, B, X, info)
    assert info.tolist() == [0, 3, 0]


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_inf_pivot(kernels, order, seed, dtype):
    """An inf in A[0, 0] is the pivot of column 0 (|inf| beats every finite |Re| + |Im|).

    Exact expectations, no rounding involved: real LAPACK scales by 1/inf = 0, so the multipliers
    are exactly 0 and the trailing matrix is unchanged (0 * finite = 0); complex LAPACK (MKL and
    OpenBLAS form 1/p from |p|^2: inf/inf) gives NaN multipliers, and so does ``lu_recip``: every
    entry below the diagonal in column 0 is NaN, and so is the whole trailing block they update
    (DESIGN §7: NaN where LAPACK's is NaN). Row 0 is never scaled: it stays as it was."""
    kern = kernels(dtype, order, seed, panel_threads=64)
    for name, m in (("small", 9), ("panel", 40)):
        A = matrices.random(m, m, batch=(2,), dtype=dtype, seed=31)
        A[:, 0, 0] = float("inf")
        LU, piv, info = factor(kern, name, A, 8)
        assert torch.equal(piv[:, 0], torch.ones(2, dtype=torch.int32)), name
        assert torch.equal(LU[:, 0, :], A[:, 0, :]), name
        if dtype.is_complex:
            assert bool(LU[:, 1:, 0].isnan().all()), name
            assert bool(LU[:, 1:, 1:8].isnan().all()), name  # the panel's trailing columns
        else:
            assert torch.equal(LU[:, 1:, 0], torch.zeros(2, m - 1)), name
            assert bool(LU[:, 1:, 1:].isfinite().all()), name


# --------------------------------------------------------------------------------------------------
# NaN, subnormal pivots, invalid pivots, tuning limits (issues 14.8, 18, 14.2, 17.3, 17.6)
# --------------------------------------------------------------------------------------------------

NAN, INF = float("nan"), float("inf")


def _nan_cases(n):
    return [[(5, 0, NAN)], [(0, 0, NAN)], [(7, 0, NAN), (3, 0, NAN)], [(3, 0, INF), (7, 0, NAN)],
            [(10, n // 2, NAN)], [(n - 1, n - 1, NAN)]]


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("n", [20, 40, 70])
def test_nan_pivots_and_propagation_match_torch_cpu(kernels, order, seed, dtype, n):
    """NaN input: the pivots and the NaN pattern of LU are exactly torch's CPU LAPACK's (MKL's
    getrf picks the first NaN of a column for n >= 17). n = 20 runs lu_small, 40 and 70 the blocked
    LU over lu_panel + lu_laswp (n >= 33), through the public op on the emulator backend. No
    rounding is involved: which entries are NaN and which rows are pivots are discrete facts (the
    random data has no near-ties)."""
    kernels(dtype, order, seed)  # patches lu's load_library: the public op runs in this order
    assert_nans_match_torch(n, dtype, torch.Generator().manual_seed(n), _nan_cases(n))


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
@pytest.mark.parametrize("kernel", ["small", "panel", "small_solve"])
def test_subnormal_pivot_is_divided_not_inverted(kernels, order, seed, dtype, kernel):
    """LAPACK's sfmin rule in every kernel that has it: a pivot below the smallest normal float is
    divided by, never inverted (1/1e-39 overflows to inf, and 0 * inf = NaN). Column 0 =
    [1e-39, 5e-40, 0, ...]: the pivot is the subnormal 1e-39 (row 1), the multiplier is
    fl(a10 / a00) with relative error <= u (one correctly rounded division of the stored values;
    compared with the float64 quotient), and LU is finite and passes LAPACK's ratio < 30.
    The panel case is the 40 x 40 of issue 18 (n > 32: the blocked LU's lu_panel)."""
    n = 9 if kernel != "panel" else 40
    kern = kernels(dtype, order, seed, panel_threads=64)
    A = matrices.random(n, n, batch=(2,), dtype=dtype, seed=17)
    A[:, :, 0] = 0
    A[:, 0, 0] = 1e-39
    A[:, 1, 0] = 5e-40
    u = metrics.unit_roundoff(dtype)
    if kernel == "small_solve":
        B = A @ torch.ones(2, n, 3, dtype=dtype)  # x = 1 is representable (b / 1e-39 is not)
        X = torch.empty_like(B)
        info = torch.zeros(2, dtype=torch.int32)
        kern.small_solve(A, B, X, info)
        assert bool(X.isfinite().all()) and info.tolist() == [0, 0]
        assert float(metrics.solve_ratio(A, X, B).max()) < metrics.PASS_RATIO
        return
    LU, piv, info = factor(kern, kernel, A, 8)
    if kernel == "panel":
        A, LU, piv = A[:, :, :8], LU[:, :, :8], piv[:, :8]  # the panel's own factorisation
    assert bool(LU.isfinite().all()) and info.tolist() == [0, 0]
    assert piv[:, 0].tolist() == [1, 1]
    exact = A[:, 1, 0].to(torch.complex128 if dtype.is_complex else torch.float64) / A[:, 0, 0]
    below = LU[:, 1:, 0]  # later row swaps move the one nonzero multiplier: find it
    mult = below.gather(1, below.abs().argmax(1, keepdim=True))[:, 0]
    assert float(((mult - exact).abs() / exact.abs()).max()) <= u
    assert float(_ratio(A, LU, piv).max()) < metrics.PASS_RATIO


def test_subnormal_pivot_public_lu_factor_40(kernels):
    """Issue 18's survivor through the public op (emulator backend, blocked LU: n = 40 > 32)."""
    import mpslinalg

    kernels(torch.float32, "inorder", 0)
    A = matrices.random(40, 40, dtype=torch.float32, seed=5)
    A[:, 0] = 0
    A[0, 0], A[1, 0] = 1e-39, 5e-40
    with mpslinalg.use_backend("emulator"):
        LU, piv, info = mpslinalg.lu_factor_ex(A)
    assert bool(LU.isfinite().all()) and int(info) == 0 and int(piv[0]) == 1
    assert float(_ratio(A, LU, piv)) < metrics.PASS_RATIO


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_laswp_invalid_pivots_never_out_of_bounds(lib, monkeypatch, order, seed, dtype):
    """Invalid pivots (0, negative, > M: a user's lu_solve input) are skipped by lu_laswp, run with
    the emulator's guard pages after every buffer, so an access past the end would fault. The
    valid interchanges are applied exactly as LAPACK's laswp would."""
    monkeypatch.setattr(lu_mod, "load_library", lambda source, device: InOrder(lib(source), order, seed, guard=True))
    kern = lu_mod._MetalKernels(torch.device("cpu"), dtype)
    B, M, N = 2, 6, 5
    X = matrices.random(M, N, batch=(B,), dtype=dtype, seed=3)
    piv = torch.tensor([[0, 3, -7, 6, 2**30, 5], [7, 2, 4, -1, 6, 6]], dtype=torch.int32)
    for rev in (False, True):
        Y = X.clone()
        kern.swap(Y, piv, 0, M, 0, N, reverse=rev)
        ref = X.clone()
        for b in range(B):
            for i in (range(M - 1, -1, -1) if rev else range(M)):
                q = int(piv[b, i]) - 1
                if 0 <= q < M:
                    ref[b, [i, q]] = ref[b, [q, i]]
        assert torch.equal(Y, ref)


@pytest.mark.parametrize("field,value", [("panel_threads", 16), ("panel_threads", 48), ("panel_threads", 512),
                                         ("small_max", 33), ("panel_nb", 0)])
def test_tuning_outside_kernel_limits_is_a_clear_error(monkeypatch, field, value):
    """lu_panel's reduction needs a power of two in [32, 256] threads (below 32 its loop never
    ends, above 256 its threadgroup arrays overflow); lu_small's tile is 32 x 32."""
    monkeypatch.setattr(lu_mod.TUNING, field, value)
    with pytest.raises(ValueError, match=f"TUNING.{field}"):
        lu_mod._MetalKernels(torch.device("cpu"), torch.float32)


def test_sizes_beyond_32_bit_indexing_are_a_clear_error():
    lu_mod._check_int32(46340, 46340)  # 2147395600 < 2^31
    with pytest.raises(ValueError, match="32-bit"):
        lu_mod._check_int32(2**16, 2**15)
