"""The kernels of ``metal/triangular.metal`` in the emulator, through the library's own call sites.

Every case runs in the emulator's three thread orders (in order, reverse, shuffled with two seeds)
so a missing barrier shows up, and is compared with the torch-op implementation of the same
contract (``mpslinalg.triangular.kernels._trtri_diag_torch``). The kernels are launched by
``_trtri_diag_metal`` / ``_trsm_small_metal`` themselves (their ``load_library`` patched to add the
emulator-only ``order``/``seed``), so the index maps and grids the library computes are tested.

Bounds: the clean block copy ``Tb`` and the padding/zero structure are exact (copies, no
arithmetic). The inverse of a well-conditioned block (κ₁ <= 20 by construction) computed column by
column by substitution satisfies ``‖D − T⁻¹‖₁ <= c_n κ₁(T) u ‖T⁻¹‖₁`` with ``c_n <= n`` (Higham,
*Accuracy and Stability*, §14.2, method 1); two such inverses (kernel and LAPACK's) are within
twice that of each other. We use ``c_n = nb = 32``.
"""

from __future__ import annotations

import importlib
import itertools

import pytest
import torch
from helpers import ORDER_IDS, ORDERS, InOrder, require_emulator

from mpslinalg.kernels import load_library
from mpslinalg.triangular import kernels as tri  # the kernels' launch code and tuning
from reference import matrices, metrics


@pytest.fixture(scope="module")
def lib():
    require_emulator()
    return load_library("triangular", "cpu")


def _run(lib, A3, nb, upper, unit, order, seed):
    """``_trtri_diag_metal`` itself, its kernels run in the given emulator thread order."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tri, "load_library", lambda family, device: InOrder(lib, order, seed))
        return tri._trtri_diag_metal(A3, nb, upper, unit)


@pytest.mark.parametrize("order,seed", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["float32", "complex64"])
@pytest.mark.parametrize("nb,n", [(32, 70), (16, 40), (8, 8)])
def test_trtri_diag_matches_contract(lib, order, seed, dtype, nb, n):
    for upper, unit in [(False, False), (True, False), (False, True), (True, True)]:
        T = matrices.triangular(n, upper, unit, "well", kappa=4.0, batch=(3,), dtype=dtype, seed=n + nb,
                                fill=float("nan"))
        D, Tb = _run(lib, T, nb, upper, unit, order, seed)
        Dr, Tbr = tri._trtri_diag_torch(T, nb, upper, unit, "trsm")
        assert torch.equal(Tb, Tbr)  # copies and padding: exact
        assert bool(torch.isfinite(D).all())
        # zeros outside the triangle and identity padding: exact
        lower = D.mT if upper else D
        assert bool((lower.triu(1) == 0).all())
        if n % nb:
            tail = n % nb
            pad = lower[:, -1, tail:, tail:]
            assert torch.equal(pad, torch.eye(nb - tail, dtype=dtype).expand_as(pad))
            assert bool((lower[:, -1, tail:, :tail] == 0).all())
        Tinv = torch.linalg.inv(Tbr.to(torch.complex128 if dtype.is_complex else torch.float64))
        kappa = float((metrics.norm1(Tbr) * metrics.norm1(Tinv)).max())
        err = metrics.norm1(D.to(Tinv.dtype) - Tinv) / metrics.norm1(Tinv)
        assert float(err.max()) <= 2 * 32 * kappa * metrics.unit_roundoff(dtype)


@pytest.mark.parametrize("order,seed", ORDERS, ids=ORDER_IDS)
def test_trtri_diag_conj_and_strided_views(lib, order, seed):
    # A conjugate-transpose view (conj bit + swapped strides) and a column-sliced view: the kernel
    # applies the index map itself; same result as on resolved contiguous copies.
    n = 48
    T = matrices.triangular(n, False, False, "well", kappa=4.0, batch=(2,), dtype=torch.complex64, seed=3)
    big = torch.zeros(2, n, 2 * n, dtype=torch.complex64)
    big[..., ::2] = T
    for A, upper in [(T.mH, True), (big[..., ::2], False), (big[..., ::2].conj(), False)]:
        D, Tb = _run(lib, A, 32, upper, False, order, seed)
        Dr, Tbr = _run(lib, A.resolve_conj().contiguous(), 32, upper, False, order, seed)
        assert torch.equal(D, Dr) and torch.equal(Tb, Tbr)


def test_trtri_diag_zero_diagonal_gives_inf_not_a_crash(lib):
    # like LAPACK's trsm: a zero pivot propagates inf/nan, no info, no fault
    T = torch.eye(4).unsqueeze(0).clone()
    T[0, 2, 2] = 0
    D, _ = _run(lib, T, 4, False, False, "inorder", 0)
    assert not bool(torch.isfinite(D).all())


@pytest.mark.parametrize("order,seed", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["float32", "complex64"])
@pytest.mark.parametrize("n", [64, 37, 1])
def test_trsm_small_all_variants(lib, monkeypatch, order, seed, dtype, n):
    # The fused n <= 64 kernel through the library's call site (_trsm_small_metal), every variant,
    # a conj view of A, a broadcast A, 40 right-hand sides (two column tiles, one partial); n = 37
    # and 1 end in a partial chunk of the kernel's 8-row register blocks.
    # Bound: LAPACK's residual ratio < 30 (substitution is backward stable: Higham Thm 8.5).
    import mpslinalg

    monkeypatch.setattr(tri, "load_library", lambda family, device: InOrder(lib, order, seed))
    with mpslinalg.use_backend("emulator"):
        for upper, left, unit in itertools.product([False, True], repeat=3):
            T = matrices.triangular(n, upper, unit, "gaussian", batch=(1,), dtype=dtype, seed=30,
                                    fill=float("nan"))
            x = torch.randn((2, n, 40) if left else (2, 40, n), dtype=torch.float64).to(dtype)
            T64 = metrics.triangle(T, upper=upper, unitriangular=unit)
            B = (T64 @ x.to(T64.dtype) if left else x.to(T64.dtype) @ T64).to(dtype)
            Tv = T.conj().resolve_conj().conj() if dtype.is_complex else T  # a conj view, same values
            X = mpslinalg.solve_triangular(Tv, B, upper=upper, left=left, unitriangular=unit)
            ratio = metrics.triangular_residual_ratio(T, X, B, upper, left, unit)
            assert ratio.shape == (2,) and float(ratio.max()) < 30, (upper, left, unit)


@pytest.mark.parametrize("order,seed", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["float32", "complex64"])
@pytest.mark.parametrize("scale", [1e-38, 1e37], ids=["bottom", "top"])
def test_blocked_solve_near_the_ends_of_the_float32_range(lib, monkeypatch, order, seed, dtype, scale):
    """Issue 14.5: ``solve((randn(70, 70) + 2I) * 1e-38, b)`` went NaN on the emulator backend: the
    inverted 16-wide diagonal blocks of U (|D| ~ 4e37) times |R| ~ 10 overflowed, and the refinement
    made inf - inf. At 1e37 the blocks' inverses are ~1e-37 and lose digits to subnormals. X is
    representable in both (|X| <= 3e38), as torch's answer shows. The blocked path (n = 70 > 64)
    runs through the kernels in every order; bound: LAPACK's solve ratio
    ||B - A X|| / (||A|| ||X|| u) < 30 (backward stable, Higham Thm 9.4), and torch is finite."""
    import mpslinalg

    lu_mod = importlib.import_module("mpslinalg.lu.kernels")
    monkeypatch.setattr(tri, "load_library", lambda family, device: InOrder(lib, order, seed))
    monkeypatch.setattr(lu_mod, "load_library", lambda source, device: InOrder(load_library(source, "cpu"),
                                                                               order, seed))
    g = torch.Generator().manual_seed(0)
    n = 70
    if dtype.is_complex and scale < 1:
        scale *= 2  # complex randn's entries are smaller: at 1e-38 torch's own X overflows
    A = ((torch.randn(n, n, generator=g, dtype=dtype) + 2 * torch.eye(n)) * scale).to(dtype)
    b = torch.randn(n, 3, generator=g, dtype=dtype)
    assert bool(torch.linalg.solve(A, b).isfinite().all())  # the premise: X is representable
    with mpslinalg.use_backend("emulator"):
        x = mpslinalg.solve(A, b)
        U = torch.linalg.lu_factor(A).LU.triu()
        y = mpslinalg.solve_triangular(U, b, upper=True)
    assert bool(x.isfinite().all()) and bool(y.isfinite().all())
    assert float(metrics.solve_ratio(A, x, b).max()) < metrics.PASS_RATIO
    assert float(metrics.triangular_residual_ratio(U, y, b, True, True, False).max()) < metrics.PASS_RATIO


@pytest.mark.parametrize("field,value", [("nb", 0), ("nb", 64), ("nb_unit", 33), ("small_n", 65), ("small_n", 2.5),
                                         ("small_cols", 16), ("small_cols", 256), ("small_cols", 48 + 1)])
def test_tuning_outside_kernel_limits_is_a_clear_error(lib, monkeypatch, field, value):
    """trtri_diag's tiles hold blocks up to 32, trsm_small's triangle systems up to 64 and its
    threadgroups 32 to 128 threads (whole simdgroups)."""
    monkeypatch.setattr(tri.TUNING, field, value)
    A = torch.eye(8).expand(2, 8, 8)
    with pytest.raises(ValueError, match=f"TUNING.{field}"):
        tri._trtri_diag_metal(A, 8, False, False)
    with pytest.raises(ValueError, match=f"TUNING.{field}"):
        tri._trsm_small_metal(A, A, torch.empty(2, 8, 8), False, False)


def test_sizes_beyond_32_bit_indexing_are_a_clear_error():
    assert tri._index_map(5, 10**12, 2**20, 1, 2**11, 2**11, "A") == [5, 10**12, 2**20, 1]
    with pytest.raises(ValueError, match="32-bit"):
        tri._index_map(0, 0, 2**20, 1, 2**12, 2**12, "B")


# --------------------------------------------------------------------------------------------------
# trsm_small: launch shapes, several systems per threadgroup, operation order, non-finite values
# --------------------------------------------------------------------------------------------------


def test_trsm_small_launch_shapes_fit_the_kernel():
    """Every launch the host can make fits the kernel's compile-time limits (metal/triangular.metal):
    the triangles of a group fit TRI_SMALL_QUADS, a group is whole simdgroups and at most
    TRI_SMALL_GROUP threads, the threads that own columns cover spg systems x ct columns, and the
    grid covers every (system, column)."""
    for cols in (32, 64, 96, 128):
        for n in range(1, 65):
            nq = 4 * -(-n // 16)
            quads = nq * (nq + 1) * 2
            for nmat in (1, 7, 4096):
                for k in (1, 2, 3, 16, 31, 40, 64, 65, 128, 200):
                    nmax, ct, spg, group, ngroups = tri._trsm_small_shape(nmat, n, k, cols)
                    assert n <= nmax in tri._TRSM_SMALL_NMAX
                    assert spg * quads <= tri._TRSM_SMALL_QUADS
                    assert group % 32 == 0 and spg * ct <= group <= tri._TRSM_SMALL_GROUP
                    assert 1 <= spg <= nmat and ct == min(cols, k)
                    assert ngroups == -(-nmat // spg) * -(-k // ct)
    # the two workloads of issue 16: one system of 64 columns per group; DeltaNet's 128 columns in
    # two groups of 64 (or one of 128); small systems share groups
    assert tri._trsm_small_shape(4096, 64, 64, 64) == (64, 64, 1, 64, 4096)
    assert tri._trsm_small_shape(512, 64, 128, 64) == (64, 64, 1, 64, 1024)
    assert tri._trsm_small_shape(512, 64, 128, 128) == (64, 128, 1, 128, 512)
    assert tri._trsm_small_shape(100, 16, 16, 64) == (16, 16, 4, 64, 25)
    assert tri._trsm_small_shape(100, 9, 1, 64) == (16, 1, 13, 32, 8)


def _substitution_f32(L: torch.Tensor, B: torch.Tensor, unit: bool) -> torch.Tensor:
    """Forward substitution in float32 with trsm_small's (and LAPACK's) order of operations: x_i =
    (b_i - L_i0 x_0 - L_i1 x_1 - ... ) / L_ii, each product and difference rounded on its own (the
    kernels are compiled without FMA contraction) and a true division."""
    X = B.clone()
    n = L.shape[-1]
    for j in range(n):
        if not unit:
            X[:, j] = X[:, j] / L[:, j, j, None]
        X[:, j + 1:] = X[:, j + 1:] - L[:, j + 1:, j, None] * X[:, j, None, :]
    return X


@pytest.mark.parametrize("order,seed", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("cols", [32, 128])
def test_trsm_small_several_systems_per_group(lib, monkeypatch, order, seed, cols):
    """Small systems share a threadgroup (their triangles side by side in threadgroup memory), the
    last group partly empty, partial 16-row blocks, threads that only stage: float32 results are
    bit-identical to sequential substitution in the same order of operations (which the kernel
    claims), complex64 results pass LAPACK's ratio (< 30, Higham Thm 8.5). NaN fills the triangle
    that must not be read."""
    monkeypatch.setattr(tri, "load_library", lambda family, device: InOrder(lib, order, seed))
    monkeypatch.setattr(tri.TUNING, "small_cols", cols)
    for dtype in (torch.float32, torch.complex64):
        for n, k, nmat in ((5, 1, 30), (16, 3, 11), (33, 20, 3), (9, 40, 5)):
            unit = n % 2 == 1
            T = matrices.triangular(n, False, unit, "gaussian", batch=(nmat,), dtype=dtype, seed=n + k,
                                    fill=float("nan"))
            B = torch.randn(nmat, n, k, dtype=torch.float64).to(dtype)
            X = torch.empty_like(B)
            spg = tri._trsm_small_shape(nmat, n, k, cols)[2]
            assert spg > 1 or n > 16 or 2 * k > cols  # the small cases do share groups
            tri._trsm_small_metal(T, B, X, False, unit)
            if dtype == torch.float32:
                Xr = _substitution_f32(metrics.triangle(T, upper=False, unitriangular=unit).float(), B, unit)
                torch.testing.assert_close(X, Xr, rtol=0, atol=0, equal_nan=True)
            ratio = metrics.triangular_residual_ratio(T, X, B, False, True, unit)
            assert float(ratio.max()) < metrics.PASS_RATIO, (dtype, n, k)


@pytest.mark.parametrize("order,seed", ORDERS, ids=ORDER_IDS)
def test_trsm_small_nonfinite_values_propagate_as_substitution(lib, monkeypatch, order, seed):
    """A zero pivot, an inf and a NaN in B give the inf/NaN pattern of sequential substitution
    (as LAPACK's trsm: no error), bit for bit in float32, and only in the columns they reach."""
    monkeypatch.setattr(tri, "load_library", lambda family, device: InOrder(lib, order, seed))
    n, k = 40, 6
    T = matrices.triangular(n, False, False, "well", kappa=4.0, batch=(3,), seed=5)
    T[0, 20, 20] = 0  # zero pivot in system 0: columns of x go inf/nan from row 20 on
    B = torch.randn(3, n, k, dtype=torch.float64).float()
    B[1, 3, 2] = float("inf")
    B[2, 30, 4] = float("nan")
    X = torch.empty_like(B)
    tri._trsm_small_metal(T, B, X, False, False)
    torch.testing.assert_close(X, _substitution_f32(T, B, False), rtol=0, atol=0, equal_nan=True)
    assert not bool(X[0, 20:].isfinite().any()) and bool(X[0, :20].isfinite().all())
    assert not bool(X[1, 3:, 2].isfinite().all()) and bool(X[1][:, [0, 1, 3, 4, 5]].isfinite().all())
    assert bool(X[2, 30:, 4].isnan().all()) and bool(X[2, :30].isfinite().all())


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["float32", "complex64"])
def test_trsm_small_on_the_cuda_target(dtype):
    """The same kernel compiled for an NVIDIA GPU (DESIGN §5b) through the library's call site, the
    issue-16 shapes (64 x 64 with 64 right-hand sides; DeltaNet's unit triangles with 128) and a
    several-systems-per-group shape: float32 bit-identical to sequential substitution (same order
    of operations, no FMA contraction on either target, correctly rounded division), LAPACK's
    ratio < 30 for both dtypes and for the simdgroup_matrix variant (float32). The H200 request
    runs it under compute-sanitizer racecheck too."""
    import mpslinalg

    for n, k, nmat, unit in ((64, 64, 256, False), (64, 128, 64, True), (12, 5, 100, False)):
        T = matrices.triangular(n, False, unit, "gaussian", batch=(nmat,), dtype=dtype, seed=n + k,
                                fill=float("nan"))
        B = torch.randn(nmat, n, k, dtype=torch.float64).to(dtype)
        with mpslinalg.use_backend("emulator"):
            X = torch.empty_like(B).cuda()
            tri._trsm_small_metal(T.cuda(), B.cuda(), X, False, unit)
        X = X.cpu()
        if dtype == torch.float32:
            Xr = _substitution_f32(metrics.triangle(T, upper=False, unitriangular=unit).float(), B, unit)
            torch.testing.assert_close(X, Xr, rtol=0, atol=0, equal_nan=True)
        ratio = metrics.triangular_residual_ratio(T, X, B, False, True, unit)
        assert float(ratio.max()) < metrics.PASS_RATIO, (n, k)
        if dtype == torch.float32:  # the simdgroup_matrix variant: LAPACK's ratio
            with mpslinalg.use_backend("emulator"), pytest.MonkeyPatch.context() as mp:
                mp.setattr(tri.TUNING, "small_mma", True)
                Xm = torch.empty_like(B).cuda()
                tri._trsm_small_metal(T.cuda(), B.cuda(), Xm, False, unit)
            ratio = metrics.triangular_residual_ratio(T, Xm.cpu(), B, False, True, unit)
            assert float(ratio.max()) < metrics.PASS_RATIO, ("mma", n, k)


@pytest.mark.parametrize("order,seed", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("kernel_leaf,launches", [("trsm_small", {"trsm_small": 3}), ("trtri_diag", {"trtri_diag": 1})])
def test_kernel_backends_above_64_rows(lib, monkeypatch, order, seed, kernel_leaf, launches):
    """n > 64 on the kernel backends: GEMM recursion over trsm_small leaves of <= 64 rows (n = 130:
    leaves of 64, 64 and 2 rows, three dispatches) or, selectable, the diagonal-block inverses with
    the refinement step (one trtri_diag dispatch). Both pass LAPACK's ratio (< 30; blocked
    substitution is backward stable, Higham §13.1; the refinement step, the module docstring) for
    all 8 variants, with NaN in the triangle that must not be read."""
    import mpslinalg

    calls: dict[str, int] = {}

    class Counting(InOrder):
        def __getattr__(self, name):
            base = name.rsplit("_", 3)[0] if name.startswith("trsm_small") else name.rsplit("_", 1)[0]
            calls[base] = calls.get(base, 0) + 1
            return super().__getattr__(name)

    monkeypatch.setattr(tri, "load_library", lambda family, device: Counting(lib, order, seed))
    monkeypatch.setattr(tri.TUNING, "kernel_leaf", kernel_leaf)
    n = 130
    with mpslinalg.use_backend("emulator"):
        for upper, left, unit in itertools.product([False, True], repeat=3):
            T = matrices.triangular(n, upper, unit, "well", kappa=100.0, batch=(2,), seed=n, fill=float("nan"))
            x = torch.randn((2, n, 3) if left else (2, 3, n), dtype=torch.float64)
            T64 = metrics.triangle(T, upper=upper, unitriangular=unit)
            B = (T64 @ x if left else x @ T64).float()
            calls.clear()
            X = mpslinalg.solve_triangular(T, B, upper=upper, left=left, unitriangular=unit)
            assert calls == launches, (upper, left, unit)
            ratio = metrics.triangular_residual_ratio(T, X, B, upper, left, unit)
            assert float(ratio.max()) < metrics.PASS_RATIO, (upper, left, unit)


@pytest.mark.parametrize("order,seed", ORDERS, ids=ORDER_IDS)
def test_trsm_small_matrix_unit_variant(lib, monkeypatch, order, seed):
    """TUNING.small_mma: float32 block products on simdgroup_matrix (trsm_small_f32_64_2), through
    the library's call site, all 8 variants, partial 8-row blocks and column tiles (n = 37, 9;
    k = 70 spans two 64-column groups, 5 leaves lanes idle), NaN outside the triangle: LAPACK's
    ratio < 30 (blocked substitution is backward stable whatever order the matrix unit sums in,
    Higham §13.1). Complex64 keeps the register kernel (the matrix units are real)."""
    import mpslinalg

    monkeypatch.setattr(tri, "load_library", lambda family, device: InOrder(lib, order, seed))
    monkeypatch.setattr(tri.TUNING, "small_mma", True)
    assert tri._trsm_small_launch(*(torch.empty(1, 8, 8),) * 3, False, False)[0] == "trsm_small_f32_64_2"
    c = torch.empty(1, 8, 8, dtype=torch.complex64)
    assert tri._trsm_small_launch(c, c, c, False, True)[0] == "trsm_small_c64_16_1"
    with mpslinalg.use_backend("emulator"):
        for (n, k), (upper, left, unit) in itertools.product([(37, 70), (9, 5), (64, 8)],
                                                             itertools.product([False, True], repeat=3)):
            T = matrices.triangular(n, upper, unit, "gaussian", batch=(2,), seed=n + k, fill=float("nan"))
            x = torch.randn((2, n, k) if left else (2, k, n), dtype=torch.float64)
            T64 = metrics.triangle(T, upper=upper, unitriangular=unit)
            B = (T64 @ x if left else x @ T64).float()
            X = mpslinalg.solve_triangular(T, B, upper=upper, left=left, unitriangular=unit)
            ratio = metrics.triangular_residual_ratio(T, X, B, upper, left, unit)
            assert float(ratio.max()) < metrics.PASS_RATIO, (n, k, upper, left, unit)
