"""The register-resident small LU kernels (``metal/lu_small.metal``, ``metal/lu_small_solve.metal``)
in the emulator, through the library's own call sites, in every thread order, for both load
variants (``TUNING.small_stage`` 0: each lane reads its row; 1: through a threadgroup tile) and
every instantiated width (8, 16, 32 lanes per matrix: 4, 2, 1 matrices per simdgroup), and for
float32 matrices wider than 16 both row counts per lane (``TUNING.small_rows`` 1 and 2: two
32 x 32 matrices per simdgroup, 16 lanes each).

Bounds and why:

* Pivots: on random Gaussian data (no near-ties) they must equal LAPACK's ``sgetrf``/``cgetrf``
  pivots in the same precision (``reference.lapack.getrf_pivots``), as in test_lu_kernels.py.
* float32 factors are compared **bit for bit** with the sequential ``getf2`` written below with
  torch float32 operations (one rounding per ``*``, ``/``, ``-``; no FMA, like the kernels' safe
  math): the kernels claim the same operations in the same order, so nothing needs a tolerance.
* complex64 factors: LAPACK's ``xGET01`` ratio ``‖PᵀA − LU‖₁/(n ‖A‖₁ u) < 30`` (u = 2⁻²⁴;
  Higham Thm 9.3 with modest growth on random matrices); complex products round differently from
  torch's, so bit equality is not claimed there.
* The fused multiply-add variant (``TUNING.small_fma``, 32 lanes, staged): one rounding per
  product-sum, so not the sequential ``getf2`` bit for bit; LAPACK's pivots on random data and the
  ``xGET01`` ratio as for complex64 (the backward-error bound does not depend on how each
  ``a - l u`` is rounded, one or two roundings of at most u each).
* Solves: LAPACK's ``xGET02`` ratio ``‖B − AX‖₁/(‖A‖₁‖X‖₁ u) < 30`` (Higham Thm 9.4).
* ``info`` is exact (a zero column ``j`` gives a zero pivot at exactly ``j + 1``) and is written by
  the kernel (a garbage-filled buffer comes back 0 where no pivot is zero).
* Batches that do not fill the last simdgroup: the matrices past the batch are neither read nor
  written (the emulator's guard pages trap any access past a buffer's end).
"""

from __future__ import annotations

import importlib
import itertools

import pytest
import torch
from helpers import ORDER_IDS as OID
from helpers import ORDERS, InOrder, require_emulator

import mpslinalg as LA
from reference import lapack, matrices, metrics

lu_mod = importlib.import_module("mpslinalg.lu.kernels")

DTYPES = [torch.float32, torch.complex64]
DID = ["float32", "complex64"]
STAGES = [0, 1]
SID = ["direct", "staged"]
# (M, N, batch): every width (8, 16, 32), square and both rectangular shapes, batches that leave
# the last simdgroup (4 / 2 / 1 matrices) and the last threadgroup (2 simdgroups) partly empty
SHAPES = [(1, 1, 3), (3, 3, 5), (8, 8, 9), (7, 3, 6), (9, 9, 3), (16, 16, 5), (12, 5, 3), (5, 12, 7),
          (17, 17, 3), (32, 32, 3), (32, 20, 2), (20, 32, 2)]


@pytest.fixture
def kernels(lib, monkeypatch):
    """``kernels(dtype, order, seed, stage)``: the library's ``_MetalKernels`` launching in that
    emulator thread order, with guard pages behind every buffer, with that load variant."""

    def make(dtype, order, seed, stage, rows=1, fma=0, roll=0, variant=0):
        monkeypatch.setattr(lu_mod, "load_library",
                            lambda source, device: InOrder(lib(source), order, seed, guard=True))
        monkeypatch.setattr(lu_mod.TUNING, "small_stage", stage)
        monkeypatch.setattr(lu_mod.TUNING, "small_rows", rows)
        monkeypatch.setattr(lu_mod.TUNING, "small_fma", fma)
        monkeypatch.setattr(lu_mod.TUNING, "small_roll", roll)
        monkeypatch.setattr(lu_mod.TUNING, "small_roll_variant", variant)
        return lu_mod._MetalKernels(torch.device("cpu"), dtype)

    return make


def _getf2_float32(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """LAPACK ``sgetf2`` in float32, one operation at a time as the kernels do it: pivot = first
    row of largest ``|a|`` (NaN first), row swap, multipliers ``a * (1 / p)`` (``a / p`` below the
    smallest normal), rank-1 update ``a - l * u`` rounded once per operation."""
    LU = A.clone()
    m, n = LU.shape[-2:]
    piv = torch.zeros(LU.shape[0], min(m, n), dtype=torch.int32)
    sfmin = torch.finfo(torch.float32).tiny
    for b in range(LU.shape[0]):
        a = LU[b]
        for j in range(min(m, n)):
            col = a[j:, j].abs()
            nan = col.isnan()
            p = j + int(nan.nonzero()[0]) if bool(nan.any()) else j + int(torch.argmax(col))  # first max
            piv[b, j] = p + 1
            if a[p, j] != 0:
                a[[j, p]] = a[[p, j]]
                pivot = a[j, j].clone()
                if abs(float(pivot)) >= sfmin:
                    a[j + 1:, j] = a[j + 1:, j] * (1.0 / pivot)
                else:
                    a[j + 1:, j] = a[j + 1:, j] / pivot
            a[j + 1:, j + 1:] = a[j + 1:, j + 1:] - torch.outer(a[j + 1:, j], a[j, j + 1:])
    return LU, piv


def _equal_or_both_nan(x: torch.Tensor, y: torch.Tensor) -> bool:
    x, y = (torch.view_as_real(t) if t.is_complex() else t for t in (x, y))
    return bool(((x == y) | (x.isnan() & y.isnan())).all())


# (dtype, rows per lane): two rows per lane exist for float32 only (complex64 ignores the setting)
DTYPE_ROWS = [(torch.float32, 1), (torch.float32, 2), (torch.complex64, 1)]
DRID = ["float32", "float32-2rows", "complex64"]
# two rows per lane: 32-wide shapes, batches that leave a simdgroup's second matrix or the last
# threadgroup's second simdgroup empty
SHAPES_ROWS2 = [(32, 32, 1), (32, 32, 5), (17, 17, 3), (32, 20, 4), (20, 32, 3), (25, 25, 2)]


def _check_small_cuda(kern, m, n, b, dtype):
    """``lu_small`` on the GPU for ``b`` random ``m x n`` matrices: LAPACK's pivots, info 0 (written
    over -7) and the xGET01 ratio below the pass mark."""
    A = matrices.random(m, n, batch=(b,), dtype=dtype, seed=m * 100 + n)
    LU = A.cuda()
    piv = torch.zeros(b, min(m, n), dtype=torch.int32, device="cuda")
    info = torch.full((b,), -7, dtype=torch.int32, device="cuda")
    kern.small(LU, piv, info)
    assert torch.equal(piv.cpu(), lapack.getrf_pivots(A)), (m, n)
    assert torch.equal(info.cpu(), torch.zeros(b, dtype=torch.int32)), (m, n)
    assert float(metrics.lu_factor_ratio(A, LU.cpu(), piv.cpu()).max()) < metrics.PASS_RATIO, (m, n)


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("stage", STAGES, ids=SID)
@pytest.mark.parametrize("dtype,rows", DTYPE_ROWS, ids=DRID)
def test_lu_small_every_width(kernels, order, seed, stage, dtype, rows):
    kern = kernels(dtype, order, seed, stage, rows)
    for m, n, b in SHAPES + (SHAPES_ROWS2 if rows == 2 else []):
        A = matrices.random(m, n, batch=(b,), dtype=dtype, seed=m * 100 + n)
        LU = A.clone()
        piv = torch.full((b, min(m, n)), -3, dtype=torch.int32)
        info = torch.full((b,), -7, dtype=torch.int32)  # the kernel writes info
        kern.small(LU, piv, info)
        assert torch.equal(piv, lapack.getrf_pivots(A)), (m, n)
        assert torch.equal(info, torch.zeros(b, dtype=torch.int32)), (m, n)
        if dtype == torch.float32:
            ref, ref_piv = _getf2_float32(A)
            assert torch.equal(ref_piv, piv) and torch.equal(LU, ref), (m, n)
        else:
            assert float(metrics.lu_factor_ratio(A, LU, piv).max()) < metrics.PASS_RATIO, (m, n)


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_lu_small_fma_variant(kernels, order, seed, dtype):
    """TUNING.small_fma (32 lanes, staged): LAPACK's pivots, info, the xGET01 ratio; a zero column
    stays exactly zero under fma too, so info is exact."""
    kern = kernels(dtype, order, seed, 1, fma=1)
    for m, n, b in [(17, 17, 3), (32, 32, 3), (32, 20, 2), (20, 32, 2), (25, 25, 1)]:
        A = matrices.random(m, n, batch=(b,), dtype=dtype, seed=m * 100 + n)
        LU = A.clone()
        piv = torch.full((b, min(m, n)), -3, dtype=torch.int32)
        info = torch.full((b,), -7, dtype=torch.int32)
        kern.small(LU, piv, info)
        assert torch.equal(piv, lapack.getrf_pivots(A)), (m, n)
        assert torch.equal(info, torch.zeros(b, dtype=torch.int32)), (m, n)
        assert float(metrics.lu_factor_ratio(A, LU, piv).max()) < metrics.PASS_RATIO, (m, n)
        A[b - 1, :, min(m, n) - 1] = 0  # the last pivot column is zero
        kern.small(A.clone(), piv, info)
        assert info.tolist() == [0] * (b - 1) + [min(m, n)], (m, n)


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("dtype,fma", [(torch.float32, 0), (torch.complex64, 0), (torch.complex64, 1)],
                         ids=["float32", "complex64", "complex64-fma"])
@pytest.mark.parametrize("variant", [0, 1, 2, 3], ids=["plain", "free", "look", "free-look"])
def test_lu_small_rolled_equals_unrolled(kernels, order, seed, dtype, fma, variant):
    """TUNING.small_roll and its variants (small_roll_variant: finished entries through the tile,
    look-ahead pivot search): the same operations as the unrolled loop, so the same bits (NaN where
    NaN), pivots and info, on random data, every 32-wide shape, ties, zero columns, NaN/inf."""
    for m, n, b in [(32, 32, 3), (17, 17, 3), (32, 20, 2), (20, 32, 2), (25, 25, 1), (9, 30, 2)]:
        A = matrices.random(m, n, batch=(b,), dtype=dtype, seed=m * 100 + n)
        if b > 1:
            A[1, :, min(m, n) // 2] = 0  # a zero column: info
        out = []
        for roll in (0, 1):
            kern = kernels(dtype, order, seed, 1, fma=fma, roll=roll, variant=variant)
            LU = A.clone()
            piv = torch.full((b, min(m, n)), -3, dtype=torch.int32)
            info = torch.full((b,), -7, dtype=torch.int32)
            kern.small(LU, piv, info)
            out.append((LU, piv, info))
        assert _equal_or_both_nan(out[0][0], out[1][0]), (m, n)
        assert torch.equal(out[0][1], out[1][1]) and torch.equal(out[0][2], out[1][2]), (m, n)
    g = torch.Generator().manual_seed(5)
    A = torch.randint(-2, 3, (4, 32, 32), generator=g).to(dtype)  # exact ties
    A[1, 3, 2] = float("nan")
    A[2, 0, 0] = float("inf")
    out = []
    for roll in (0, 1):
        kern = kernels(dtype, order, seed, 1, fma=fma, roll=roll, variant=variant)
        LU = A.clone()
        piv = torch.zeros(4, 32, dtype=torch.int32)
        info = torch.full((4,), -1, dtype=torch.int32)
        kern.small(LU, piv, info)
        out.append((LU, piv, info))
    assert _equal_or_both_nan(out[0][0], out[1][0])
    assert torch.equal(out[0][1], out[1][1]) and torch.equal(out[0][2], out[1][2])


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("variant", [5, 7], ids=["free-rcp1", "free-look-rcp1"])
def test_lu_small_rolled_one_division_reciprocal(kernels, order, seed, variant):
    """small_roll_variant bit 4 (complex64: 1 / pivot with one division, not Smith's three; the
    instantiated ones: with fma, FREE, with and without LOOK): not the
    unrolled loop's bits, so LAPACK's contract: pivots equal LAPACK's on random data (no near-ties),
    info exact (a zero column j gives j + 1), xGET01 below the pass mark 30 (the reciprocal's
    relative error is a few u, as Smith's: it enters the bound like any rounding of a multiplier);
    a matrix holding NaN or inf comes out with NaN where the unrolled loop's does (a non-finite
    pivot gives NaN multipliers either way), with the same info."""
    for m, n, b in [(32, 32, 3), (17, 17, 3), (32, 20, 2), (20, 32, 2), (9, 30, 2)]:
        A = matrices.random(m, n, batch=(b,), dtype=torch.complex64, seed=m * 100 + n)
        A[1, :, min(m, n) // 2] = 0
        kern = kernels(torch.complex64, order, seed, 1, fma=1, roll=1, variant=variant)
        LU = A.clone()
        piv = torch.full((b, min(m, n)), -3, dtype=torch.int32)
        info = torch.full((b,), -7, dtype=torch.int32)
        kern.small(LU, piv, info)
        assert torch.equal(piv, lapack.getrf_pivots(A)), (m, n)
        assert info.tolist() == [0, min(m, n) // 2 + 1] + [0] * (b - 2), (m, n)
        assert float(metrics.lu_factor_ratio(A, LU, piv).max()) < metrics.PASS_RATIO, (m, n)
    A = matrices.random(32, 32, batch=(3,), dtype=torch.complex64, seed=7)
    A[1, 3, 2] = float("nan")
    A[2, 0, 0] = float("inf")
    out = []
    for roll, v in ((0, 0), (1, variant)):
        kern = kernels(torch.complex64, order, seed, 1, fma=1, roll=roll, variant=v)
        LU = A.clone()
        info = torch.full((3,), -1, dtype=torch.int32)
        kern.small(LU, torch.zeros(3, 32, dtype=torch.int32), info)
        out.append((LU.isnan(), info))
    assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1])


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
def test_lu_small_one_division_reciprocal_scales_exactly(kernels, order, seed):
    """The one-division reciprocal (complex64 default) scales b by 2^-e exactly: factoring 2^s A
    gives A's multipliers bit for bit and A's U times 2^s bit for bit (powers of two commute with
    rounding away from overflow and subnormals), for pivots near 2^100, 2^-100 and 2^125. Pivots
    near 2^127 (the exponents where the scale is clamped at 2^-126) have a subnormal reciprocal,
    as with any division, so there: LAPACK's pivots and the xGET01 ratio below 30, all finite."""
    g = torch.Generator().manual_seed(11)
    A = matrices.random(32, 32, batch=(3,), dtype=torch.complex64, seed=31)
    D = (1.5 * torch.eye(32) + 0.01 * torch.rand(2, 32, 32, generator=g)).to(torch.complex64)  # pivots on the diagonal
    for base, s in ((A, 100), (A, -100), (D, 125)):
        out = []
        for scale in (1.0, 2.0**s):
            kern = kernels(torch.complex64, order, seed, 1, fma=1, roll=1, variant=5)
            LU = base * scale
            piv = torch.zeros(base.shape[0], 32, dtype=torch.int32)
            info = torch.full((base.shape[0],), -1, dtype=torch.int32)
            kern.small(LU, piv, info)
            out.append((LU, piv, info))
        (LU0, piv0, info0), (LUs, pivs, infos) = out
        assert torch.equal(piv0, pivs) and torch.equal(info0, infos), s
        assert torch.equal(LU0.tril(-1), LUs.tril(-1)), s
        assert torch.equal(LU0.triu() * 2.0**s, LUs.triu()), s
        assert bool(LUs.isfinite().all()), s
    kern = kernels(torch.complex64, order, seed, 1, fma=1, roll=1, variant=5)
    H = D * 2.0**127
    LU = H.clone()
    piv = torch.zeros(2, 32, dtype=torch.int32)
    kern.small(LU, piv, torch.full((2,), -1, dtype=torch.int32))
    assert torch.equal(piv, lapack.getrf_pivots(H)) and bool(LU.isfinite().all())
    assert float(metrics.lu_factor_ratio(H, LU, piv).max()) < metrics.PASS_RATIO


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("stage", STAGES, ids=SID)
@pytest.mark.parametrize("rows", [1, 2], ids=["1row", "2rows"])
def test_lu_small_specials_match_sequential_getf2(kernels, order, seed, stage, rows):
    """Exact ties (integer matrices), zero columns, NaN and inf entries and a subnormal pivot, in
    float32: bit for bit the sequential getf2 (pivots, NaN pattern, info); two rows per lane at
    n = 32 (ties between a lane's two rows and between lanes)."""
    kern = kernels(torch.float32, order, seed, stage, rows)
    for n in (6, 13, 32) if rows == 1 else (20, 32):
        g = torch.Generator().manual_seed(n)
        A = torch.randint(-2, 3, (8, n, n), generator=g).float()  # many exact ties
        A[1, :, 2] = 0  # info 3 (unless an earlier pivot is zero: the reference decides)
        A[2, n // 2, 0] = float("nan")
        A[3, 1, 1] = float("inf")
        A[4] = matrices.random(n, n, dtype=torch.float32, seed=n) * 1e-39  # subnormal pivots
        A[5, :, 0] = float("nan")  # two NaNs and more: the first wins
        A[6, 0, 0] = float("inf")
        A[7] = 0
        LU = A.clone()
        piv = torch.zeros(8, n, dtype=torch.int32)
        info = torch.full((8,), -1, dtype=torch.int32)
        kern.small(LU, piv, info)
        ref, ref_piv = _getf2_float32(A)
        assert torch.equal(piv, ref_piv), n
        assert _equal_or_both_nan(LU, ref), n
        d = ref.diagonal(dim1=-2, dim2=-1) == 0
        expect = torch.where(d.any(-1), d.int().argmax(-1) + 1, 0).int()
        assert torch.equal(info, expect), n
        assert int(info[7]) == 1 and int(info[1]) > 0


@pytest.mark.parametrize("order,seed", ORDERS, ids=OID)
@pytest.mark.parametrize("stage", STAGES, ids=SID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_lu_small_solve_every_width(kernels, order, seed, stage, dtype):
    kern = kernels(dtype, order, seed, stage)
    for n, k, b in [(1, 1, 3), (3, 1, 5), (8, 8, 5), (9, 1, 7), (9, 3, 3), (16, 1, 3), (17, 2, 3),
                    (32, 1, 2), (32, 8, 2)]:
        A = matrices.random(n, n, batch=(b,), dtype=dtype, seed=n + k)
        B = matrices.random(n, k, batch=(b,), dtype=dtype, seed=n * k + 1)
        X = torch.full_like(B, float("nan"))
        info = torch.full((b,), -7, dtype=torch.int32)
        kern.small_solve(A, B, X, info)
        assert torch.equal(info, torch.zeros(b, dtype=torch.int32)), (n, k)
        assert float(metrics.solve_ratio(A, X, B).max()) < metrics.PASS_RATIO, (n, k)
        A[b - 1, :, n - 1] = 0
        kern.small_solve(A, B, X, info)
        assert info.tolist() == [0] * (b - 1) + [n], (n, k)


def test_small_solve_rejects_what_it_cannot_hold(lib, monkeypatch):
    monkeypatch.setattr(lu_mod, "load_library", lambda source, device: lib(source))
    kern = lu_mod._MetalKernels(torch.device("cpu"), torch.float32)
    A = torch.eye(4).expand(2, 4, 4).contiguous()
    B = torch.ones(2, 4, 9)
    with pytest.raises(ValueError, match="k <= 8"):
        kern.small_solve(A, B, torch.empty_like(B), torch.zeros(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="up to 32x32"):
        kern.small(torch.zeros(1, 33, 33), torch.zeros(1, 33, dtype=torch.int32), torch.zeros(1, dtype=torch.int32))
    monkeypatch.setattr(lu_mod.TUNING, "small_stage", 2)
    with pytest.raises(ValueError, match="small_stage must be 0 or 1"):
        lu_mod._MetalKernels(torch.device("cpu"), torch.float32)
    monkeypatch.setattr(lu_mod.TUNING, "small_stage", 1)
    monkeypatch.setattr(lu_mod.TUNING, "small_rows", 4)
    with pytest.raises(ValueError, match="small_rows must be 1 or 2"):
        lu_mod._MetalKernels(torch.device("cpu"), torch.float32)
    monkeypatch.setattr(lu_mod.TUNING, "small_rows", 1)
    monkeypatch.setattr(lu_mod.TUNING, "small_fma", 2)
    with pytest.raises(ValueError, match="small_fma must be 0 or 1"):
        lu_mod._MetalKernels(torch.device("cpu"), torch.float32)
    monkeypatch.setattr(lu_mod.TUNING, "small_fma", 0)
    monkeypatch.setattr(lu_mod.TUNING, "small_roll_variant", {"complex64": 8})
    with pytest.raises(ValueError, match="small_roll_variant must be a bit mask 0..7"):
        lu_mod._MetalKernels(torch.device("cpu"), torch.complex64)


@pytest.mark.parametrize("stage", STAGES, ids=SID)
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_public_solve_ransac_shape(lib, monkeypatch, stage, dtype):
    """``solve_ex`` on the emulator backend: RANSAC's 9x9 with one right-hand side (the fused
    kernel), several right-hand sides (fused up to 8) and 9 (lu_small + getrs); broadcast B."""
    require_emulator()
    monkeypatch.setattr(lu_mod.TUNING, "small_stage", stage)
    A = matrices.random(9, 9, batch=(37,), dtype=dtype, seed=9)
    with LA.use_backend("emulator"):
        for k in (1, 8, 9):
            B = matrices.random(9, k, batch=(37,), dtype=dtype, seed=k)
            X, info = LA.solve_ex(A, B)
            assert torch.equal(info, torch.zeros(37, dtype=torch.int32))
            assert float(metrics.solve_ratio(A, X, B).max()) < metrics.PASS_RATIO, k
        B = matrices.random(9, 1, dtype=dtype, seed=3)  # broadcast over A's batch
        X, info = LA.solve_ex(A, B)
        assert X.shape == (37, 9, 1)
        assert float(metrics.solve_ratio(A, X, B.expand(37, 9, 1)).max()) < metrics.PASS_RATIO


@pytest.mark.cuda
@pytest.mark.parametrize("stage", STAGES, ids=SID)
@pytest.mark.parametrize("dtype,rows", DTYPE_ROWS, ids=DRID)
def test_on_the_cuda_target(monkeypatch, stage, dtype, rows):
    """The same kernels on an NVIDIA GPU (the emulator's cuda target, real parallel lanes; the
    H200 run puts this file under compute-sanitizer racecheck/synccheck): pivots are LAPACK's,
    factors and solves pass the xGET01 / xGET02 ratios, every width, partial last simdgroups."""
    monkeypatch.setattr(lu_mod.TUNING, "small_stage", stage)
    monkeypatch.setattr(lu_mod.TUNING, "small_rows", rows)
    kern = lu_mod._MetalKernels(torch.device("cuda"), dtype)
    for m, n, b in SHAPES + [(9, 9, 2049), (32, 32, 1025)] + (SHAPES_ROWS2 if rows == 2 else []):
        _check_small_cuda(kern, m, n, b, dtype)
    for n, k, b in [(9, 1, 2049), (9, 3, 7), (16, 1, 5), (32, 1, 3), (32, 8, 3), (3, 1, 9)]:
        A = matrices.random(n, n, batch=(b,), dtype=dtype, seed=n + k)
        B = matrices.random(n, k, batch=(b,), dtype=dtype, seed=n * k + 1)
        X = torch.empty(b, n, k, dtype=dtype, device="cuda")
        info = torch.full((b,), -7, dtype=torch.int32, device="cuda")
        kern.small_solve(A.cuda(), B.cuda(), X, info)
        assert torch.equal(info.cpu(), torch.zeros(b, dtype=torch.int32)), (n, k)
        assert float(metrics.solve_ratio(A, X.cpu(), B).max()) < metrics.PASS_RATIO, (n, k)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_fma_variant_on_the_cuda_target(monkeypatch, dtype):
    """TUNING.small_fma on the GPU: LAPACK's pivots, info and the xGET01 ratio, full and partial
    last simdgroups."""
    monkeypatch.setattr(lu_mod.TUNING, "small_stage", 1)
    monkeypatch.setattr(lu_mod.TUNING, "small_fma", 1)
    kern = lu_mod._MetalKernels(torch.device("cuda"), dtype)
    for m, n, b in [(32, 32, 1025), (32, 32, 3), (32, 20, 2), (20, 32, 2), (17, 17, 3)]:
        _check_small_cuda(kern, m, n, b, dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("variant", [0, 1, 2, 3, 5, 7], ids=["plain", "free", "look", "free-look", "free-rcp1",
                                                          "free-look-rcp1"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_rolled_variants_on_the_cuda_target(monkeypatch, dtype, variant):
    """TUNING.small_roll and its variants (with fma) on the GPU (real parallel lanes; racecheck in the H200
    run: FREE publishes the pivot row in the tile and every lane reads it after one simdgroup
    barrier): LAPACK's pivots, info and the xGET01 ratio, full and partial last simdgroups."""
    monkeypatch.setattr(lu_mod.TUNING, "small_stage", 1)
    monkeypatch.setattr(lu_mod.TUNING, "small_fma", 1)
    monkeypatch.setattr(lu_mod.TUNING, "small_roll", 1)
    monkeypatch.setattr(lu_mod.TUNING, "small_roll_variant", variant)
    kern = lu_mod._MetalKernels(torch.device("cuda"), dtype)
    for m, n, b in [(32, 32, 1025), (32, 32, 3), (32, 20, 2), (20, 32, 2), (17, 17, 3)]:
        _check_small_cuda(kern, m, n, b, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DID)
def test_every_tuning_combination_has_its_kernel(kernels, dtype):
    """Every valid setting of small_stage x small_fma x small_roll x small_roll_variant (0..7; bit 4
    is complex only, float32 ignores it) launches an instantiated lu_small kernel that factors a
    32 x 32 matrix: LAPACK's pivots and the xGET01 ratio below 30."""
    A = matrices.random(32, 32, batch=(1,), dtype=dtype, seed=3)
    for stage, fma, roll, variant in itertools.product((0, 1), (0, 1), (0, 1), range(8)):
        kern = kernels(dtype, "inorder", 0, stage, fma=fma, roll=roll, variant=variant)
        LU = A.clone()
        piv = torch.zeros(1, 32, dtype=torch.int32)
        kern.small(LU, piv, torch.zeros(1, dtype=torch.int32))
        assert torch.equal(piv, lapack.getrf_pivots(A)), (stage, fma, roll, variant)
        assert float(metrics.lu_factor_ratio(A, LU, piv).max()) < metrics.PASS_RATIO, (stage, fma, roll, variant)


def test_grid_refuses_batches_past_32_bit_thread_indices():
    assert lu_mod._small_grid(2048, 16) == {"threads": 2048 * 16, "group_size": 64}
    assert lu_mod._small_grid(3, 8)["threads"] == 64  # whole threadgroups of whole simdgroups
    with pytest.raises(ValueError, match="split the batch"):
        lu_mod._small_grid(2**27, 32)
