"""Tests that kill the LU family's mutation-gate survivors (issue 18, ``scripts/mutations.py``).

* ``lu-getrf-host-sync``: the ``_ex`` ops (and ``lu``/``det``/``slogdet``, which never raise) must
  not read a tensor's values on the host, on either CPU backend, through every path of ``_getrf``
  (direct leaf, small kernel, recursion with panel/laswp kernels). ``helpers.NoHostSync`` fails any
  ``item``/``bool``/``nonzero``... inside the region (the CPU-side twin of CUDA's sync debug mode).
* ``lu-torch-recursion-info-off-by-one``: ``info`` is exact through the torch backend's recursion.
  A zero column ``j`` (0-based) of a matrix whose other columns are random stays exactly zero
  under elimination (every update subtracts ``l * 0``), so its pivot is exactly 0 and ``info``
  is exactly ``j + 1`` -- unless an earlier pivot is exactly zero, which random Gaussian columns
  exclude. LAPACK (``torch.linalg.lu_factor_ex``) is the reference.
* ``lu-float64-to-float32-kernels``: float64/complex128 with the emulator backend active must be
  factored in their own precision (the Metal kernels are float32/complex64 only). Bound: LAPACK's
  ``xGET01`` ratio ``< 30`` with ``u = 2^-53`` (``metrics.unit_roundoff`` of the dtype); a float32
  computation would give ratios near ``2^-24 / 2^-53 ~ 5e8``.
* ``lu-pivot-tie-flipped``: exact ties in every LU kernel, in every thread order (last test).
"""

from __future__ import annotations

import importlib

import pytest
import torch
from helpers import ORDER_IDS, ORDERS, InOrder, NoHostSync, require_emulator
from lu.kernel_calls import factor

import mpslinalg as LA
from reference import lapack, matrices, metrics

lu_mod = importlib.import_module("mpslinalg.lu")
kern_mod = importlib.import_module("mpslinalg.lu.kernels")
PASS = metrics.PASS_RATIO

# (backend, n, small leaves): every path of _getrf on the CPU backends
_PATHS = [
    ("torch", 8, False),  # one LAPACK leaf call
    ("torch", 40, True),  # the torch backend's recursion (forced small leaves)
    ("torch", 600, False),  # the recursion at the default tuning (n > direct_max = 512)
    ("emulator", 8, False),  # lu_small
    ("emulator", 40, False),  # the recursion with lu_panel / lu_laswp
]
_PATH_IDS = [f"{b}-{n}{'-leaves' if s else ''}" for b, n, s in _PATHS]


@pytest.fixture
def small_leaves(monkeypatch):
    """``apply()`` forces the recursion with 8-wide leaves on the CPU torch backend."""

    def apply():
        monkeypatch.setitem(lu_mod.TUNING.direct_max, "cpu", 8)
        monkeypatch.setitem(lu_mod.TUNING.leaf_nb, "cpu", 8)
        monkeypatch.setattr(lu_mod.TUNING, "panel_nb", 8)

    return apply


@pytest.mark.parametrize("backend,n,leaves", _PATHS, ids=_PATH_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["float32", "complex64"])
def test_no_host_sync(small_leaves, backend, n, leaves, dtype):
    if backend == "emulator":
        require_emulator()
    if leaves:
        small_leaves()
    A = matrices.random(n, n, batch=(2,), dtype=dtype, seed=n)
    A[1, :, n // 2] = 0  # a singular one: info > 0 must not make anything read it
    B = matrices.random(n, 3, batch=(2,), dtype=dtype, seed=n + 1)
    with LA.use_backend(backend):
        LA.inv_ex(A)  # compile/load the kernels outside the region
        with NoHostSync():
            LU, piv, info = LA.lu_factor_ex(A)
            X, info_s = LA.solve_ex(A, B)
            Ainv, info_i = LA.inv_ex(A)
            P, L, U = LA.lu(A)
            d = LA.det(A)
            sign, logabs = LA.slogdet(A)
    # the values are right too (so the region really ran the ops)
    assert info.tolist() == info_s.tolist() == info_i.tolist() == [0, n // 2 + 1]
    assert torch.equal(piv[0], lapack.getrf_pivots(A[0]))
    assert float(metrics.lu_factor_ratio(A[0], LU[0], piv[0])) < PASS
    assert float(metrics.solve_ratio(A[0], X[0], B[0])) < PASS
    assert float(metrics.inverse_ratio(A[0], Ainv[0])) < PASS
    assert float(metrics.lu_ratio(A, P, L, U).max()) < PASS
    assert sign[1] == 0 and logabs[1] == -float("inf")
    # det of the singular one: 0, or NaN where the product of U's diagonal overflows first
    # (inf * 0, n = 600), exactly as torch.linalg.det
    assert d[1] == 0 or (bool(d[1].isnan()) and bool(torch.linalg.det(A[1]).isnan()))


def test_info_exact_through_the_cpu_recursion_default_tuning():
    """Issue 18's case: 600 x 600 (the CPU torch backend recurses above n = 512), column 100 zero."""
    A = matrices.random(600, 600, dtype=torch.float32, seed=3)
    A[:, 100] = 0
    with LA.use_backend("torch"):
        LU, piv, info = LA.lu_factor_ex(A)
    assert int(info) == 101 == int(torch.linalg.lu_factor_ex(A).info)
    assert bool(LU.isfinite().all())


def test_info_exact_in_every_leaf_of_the_recursion(small_leaves):
    """Zero columns in the first, a middle and the last 8-wide leaf (offsets o = 0, 16, 32)."""
    small_leaves()
    A = matrices.random(40, 40, batch=(4,), dtype=torch.float32, seed=9)
    for b, j in enumerate((3, 20, 37)):
        A[b, :, j] = 0
    A[3, :, 25] = 0
    A[3, :, 30] = 0  # the first zero pivot counts
    with LA.use_backend("torch"):
        _, _, info = LA.lu_factor_ex(A)
    assert info.tolist() == [4, 21, 38, 26]
    assert info.tolist() == torch.linalg.lu_factor_ex(A).info.tolist()


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=["float64", "complex128"])
@pytest.mark.parametrize("n", [8, 40])
def test_float64_with_the_emulator_backend(dtype, n):
    """float64 on the emulator backend takes the torch path in float64 (bound: module docstring)."""
    require_emulator()
    A = matrices.random(n, n, batch=(2,), dtype=dtype, seed=n)
    B = matrices.random(n, 2, batch=(2,), dtype=dtype, seed=n + 1)
    with LA.use_backend("emulator"):
        LU, piv, info = LA.lu_factor_ex(A)
        X = LA.solve(A, B)
        Ainv = LA.inv(A)
    assert LU.dtype == X.dtype == Ainv.dtype == dtype
    assert torch.equal(piv, lapack.getrf_pivots(A)) and info.tolist() == [0, 0]
    assert float(metrics.lu_factor_ratio(A, LU, piv).max()) < PASS
    assert float(metrics.solve_ratio(A, X, B).max()) < PASS
    assert float(metrics.inverse_ratio(A, Ainv).max()) < PASS


@pytest.mark.parametrize("order,seed", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("kernel,n,threads", [("small", 20, 32), ("panel", 40, 32), ("panel", 40, 64)],
                         ids=["small-20", "panel-40-32", "panel-40-64"])
def test_pivot_ties_go_to_the_first_row_in_every_kernel(lib, monkeypatch, order, seed, kernel, n, threads):
    """``lu-pivot-tie-flipped``: i?amax returns the FIRST row of largest magnitude. Wilkinson's growth
    matrix ties every candidate of every column in magnitude (entries +-1; its elimination is exact),
    so LAPACK makes no interchange: pivots 1..n. The panel cases spread the tied rows over the
    threads' strided scans and the tree reduction (32 and 64 threads for 40 rows)."""
    monkeypatch.setattr(kern_mod, "load_library", lambda source, device: InOrder(lib(source), order, seed))
    monkeypatch.setattr(lu_mod.TUNING, "panel_threads", threads)
    kern = kern_mod._MetalKernels(torch.device("cpu"), torch.float32)
    A = matrices.wilkinson_growth(n, dtype=torch.float32)[None]
    LU, piv, info = factor(kern, kernel, A, n)
    assert piv[0].tolist() == list(range(1, n + 1)) == lapack.getrf_pivots(A[0]).tolist()
    assert float(metrics.lu_factor_ratio(A, LU, piv)) == 0.0  # exact elimination


@pytest.mark.parametrize("backend", ["torch", "emulator"])
@pytest.mark.parametrize("n", [8, 40])  # the fused lu_small_solve (n <= 32) and the blocked path
@pytest.mark.parametrize("left", [True, False])
def test_solve_with_conjugate_views(backend, n, left):
    """``checks-resolved-keeps-conj-bit``: Metal binds storage and ignores the conj bit, so every
    kernel call site resolves it (``oplayer.checks.resolved``); ``solve`` with ``A.conj()`` or
    ``B.conj()`` (views) must equal the solve with the resolved copies bit for bit (same kernels on
    the same values)."""
    if backend == "emulator":
        require_emulator()
    A = matrices.random(n, n, batch=(2,), dtype=torch.complex64, seed=n)
    B = matrices.random(*((n, 3) if left else (3, n)), batch=(2,), dtype=torch.complex64, seed=n + 1)
    with LA.use_backend(backend):
        for Av, Bv in ((A.conj(), B), (A, B.conj()), (A.conj(), B.conj())):
            X = LA.solve(Av, Bv, left=left)
            assert torch.equal(X, LA.solve(Av.resolve_conj(), Bv.resolve_conj(), left=left))


@pytest.mark.parametrize("backend", ["torch", "emulator"])
@pytest.mark.parametrize("n", [5, 6, 7, 33, 40])
def test_det_sign_at_odd_and_even_orders(backend, n):
    """``lu-det-sign-parity``: the permutation's sign from the number of interchanges (counting the
    non-interchanges instead has the same parity for even n only, which is all the det tests used).
    Random float32 matrices: the pivots are LAPACK's (no near-ties, see test_lu_kernels.py) and no
    pivot is near 0, so the sign of det equals torch.linalg.det's (LAPACK) exactly."""
    if backend == "emulator":
        require_emulator()
    A = matrices.random(n, n, batch=(6,), dtype=torch.float32, seed=n)
    ref = torch.linalg.det(A).sign()
    assert bool((ref != 0).all()) and len(set(ref.tolist())) == 2  # both signs occur
    with LA.use_backend(backend):
        assert torch.equal(LA.det(A).sign(), ref)
        assert torch.equal(LA.slogdet(A).sign, ref)
