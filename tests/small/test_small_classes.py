"""The n <= 4 family on the input classes of issue 14: every implementation of the program.

Implementations (each runs the same program; all are checked, not only the default one):
``program`` (torch ops: the CUDA/torch.func path), ``c`` (the program printed as C: the CPU default),
``leaf`` (LAPACK around the same column scaling: the CPU path without a compiler) and ``emulator``
(metal/small.metal through the emulator, the library's own launch code). The Triton kernel is
compared with the program in tests/small/test_small.py.

Bounds (u = 2^-24 for float32/complex64):

* Scaled classes vs GEPP (issue 14.4). Eliminations scale columns only, by powers of two, so they
  perform exactly LAPACK's pivot sequence and obey the same first-order bound
  |X^ - X| <= gamma_cn |A^-1| |L^| |U^| |X^| as LAPACK's getrf/getrs (Higham, ASNA 2nd ed., thm 9.4
  and 14.4). The normalised error e = max_ij |X^ - X|_ij / (|A^-1| |A| |A^-1|)_ij (solve:
  |x^ - x|_i / (|A^-1| |A| |x|)_i), in units of u, is the realised constant of that bound; it is
  invariant under row and column scaling. Ours and LAPACK differ only in rounding order (division
  vs reciprocal multiplication, getri vs getrs for the inverse, summation order), so their maxima
  over a sweep are draws of the same size: measured 0.34-2.64 for the ratio over 48 sweeps of
  20000 matrices. Threshold 4. (Before the fix, pivoting on the row-scaled matrix, the raw
  componentwise errors were 10-1000x LAPACK's.) The 2x2 inverse (adjugate with a doubled-precision
  determinant) is componentwise accurate: each entry is +-a_kl/det with det correct to
  u + O(u^2 kappa), so its error is <= 4u per entry (8u complex: Smith's division adds ~3u).
* Column-scaled inverses (issue 14.3): GEPP is invariant to column scaling, so after unscaling the
  rows of X = inv(A D) = D^-1 inv(A), the error is that of the well-conditioned A: <= c kappa u
  with c = 4n 2^(n-1) (tests/small/test_small.py's constant).
* Non-finite input (issues 14.6, 14.16): det/slogdet are what LU arithmetic gives on A^T, which is
  what torch's det/slogdet give (LAPACK reads the row-major storage as A^T): identical non-finite
  pattern, finite values to c kappa u. Inverses and solutions are all-NaN, nan+nanj for complex.
"""

from __future__ import annotations

import pytest
import torch
from helpers import require_emulator

import mpslinalg
import reference.matrices as mx
from mpslinalg import small

U32 = 2.0**-24
IMPLS = ["program", "c", "leaf", "emulator-direct", "emulator-staged"]  # both load variants of the kernels
FACTOR = 4.0  # ours / LAPACK's maximum normalised error (derivation in the module docstring)


def _impl(name: str):
    """``(inv, solve)`` of implementation ``name`` on contiguous (B, n, n) / (B, n, k) inputs."""
    if name == "program":
        return (lambda A: small.program._program_inv(A)[0]), (lambda A, B: small.program._program_solve(A, B)[0])
    if name == "c":
        if small.program._C.compiler() is None:
            pytest.skip("no C compiler (the emulator's discovery found none)")
        return (lambda A: small.program._C.run("inv", A)[0]), (lambda A, B: small.program._C.run("solve", A, B)[0])
    if name == "leaf":
        return (lambda A: small.program._LEAVES["inv"](A)[0]), (lambda A, B: small.program._LEAVES["solve"](A, B)[0])
    require_emulator()
    load = name.removeprefix("emulator-")
    return (lambda A: small.program._kernel_inv(A, load=load)[0]), (lambda A, B: small.program._kernel_solve(A, B)[0])


def _det(name: str, A: torch.Tensor) -> torch.Tensor:
    """det of (B, n, n) ``A`` through implementation ``name`` (mantissa and exponent of its kernel)."""
    if name == "program":
        mant, expo, _ = small.program._program_det_parts(A)
    elif name == "c":
        if small.program._C.compiler() is None:
            pytest.skip("no C compiler (the emulator's discovery found none)")
        mant, expo, _ = small.program._C.run("det", A)
    elif name == "leaf":
        mant, expo, _ = small.program._LEAVES["det"](A)
    else:
        require_emulator()
        mant, expo, _ = small.program._kernel_det_parts(A, load=name.removeprefix("emulator-"))
    return small.program._det_from_parts(mant, expo)  # as the public det assembles it


def _scaled(n: int, cls: str, batch: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """Graded / row- / column- / two-sided-scaled random matrices, rounded to ``dtype``."""
    g = torch.Generator().manual_seed(seed)
    B = torch.randn(batch, n, n, generator=g, dtype=torch.float64)
    if dtype.is_complex:
        B = torch.complex(B, torch.randn(batch, n, n, generator=g, dtype=torch.float64))
    ones = torch.ones(batch, n, dtype=torch.float64)

    def powers(bits):
        return torch.exp2(torch.randint(-bits, bits + 1, (batch, n), generator=g).double())

    if cls == "graded":  # a_ij = b_ij 2^(-k(i+j)), k = 1..10 bits per step
        k = torch.randint(1, 11, (batch, 1), generator=g).double()
        d1 = d2 = torch.exp2(-k * torch.arange(n).double())
    elif cls == "row":
        d1, d2 = powers(30), ones
    elif cls == "col":
        d1, d2 = ones, powers(30)
    else:
        d1, d2 = powers(30), powers(30)
    return (d1[:, :, None] * B * d2[:, None, :]).to(dtype)


def _wide(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.complex128 if t.is_complex() else torch.float64)


def _inv_error(X: torch.Tensor, A: torch.Tensor) -> float:
    """max over the batch of max_ij |X - A^-1|_ij / (|A^-1||A||A^-1|)_ij, in units of u."""
    Ad = _wide(A)
    Xt = torch.linalg.inv(Ad)
    bound = Xt.abs() @ Ad.abs() @ Xt.abs()
    return ((_wide(X) - Xt).abs() / bound).max().item() / U32


def _solve_error(x: torch.Tensor, A: torch.Tensor, b: torch.Tensor) -> float:
    Ad = _wide(A)
    xt = torch.linalg.solve(Ad, _wide(b))
    bound = torch.linalg.inv(Ad).abs() @ Ad.abs() @ xt.abs()
    return ((_wide(x) - xt).abs() / bound).max().item() / U32


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["float32", "complex64"])
def test_scaled_classes_match_gepp(impl, dtype):
    inv, solve = _impl(impl)
    for n in (2, 3, 4):
        for cls in ("graded", "row", "col", "two"):
            A = _scaled(n, cls, 2000, 100 * n + len(cls), dtype).contiguous()
            b = mx.random(n, 1, batch=(2000,), dtype=dtype, seed=n).contiguous()
            ours, lapack = _inv_error(inv(A), A), _inv_error(torch.linalg.inv(A), A)
            if n == 2 and impl != "leaf":  # adjugate: componentwise accurate, far better than GEPP
                X, Xt = _wide(inv(A)), torch.linalg.inv(_wide(A))
                assert ((X - Xt).abs() / Xt.abs()).max() <= (8 if dtype.is_complex else 4) * U32, (n, cls)
            assert ours <= FACTOR * lapack, f"inv n={n} {cls}: {ours:.1f}u vs LAPACK {lapack:.1f}u"
            ours, lapack = _solve_error(solve(A, b), A, b), _solve_error(torch.linalg.solve(A, b), A, b)
            assert ours <= FACTOR * lapack, f"solve n={n} {cls}: {ours:.1f}u vs LAPACK {lapack:.1f}u"


def _homographies(batch: int, seed: int) -> torch.Tensor:
    """RANSAC hypotheses H = K (R + t n^T / d) K^-1 in pixel units, times 1e3 (as a DLT scales
    them): examples/camera_geometry.py's model. Entries 1e-3 ... 1e6, graded by K."""
    g = torch.Generator().manual_seed(seed)
    w = 0.05 * torch.randn(batch, 3, generator=g, dtype=torch.float64)
    W = torch.zeros(batch, 3, 3, dtype=torch.float64)
    W[:, 0, 1], W[:, 0, 2], W[:, 1, 2] = -w[:, 2], w[:, 1], -w[:, 0]
    R = torch.linalg.matrix_exp(W - W.mT)
    t = 0.1 * torch.randn(batch, 3, 1, generator=g, dtype=torch.float64)
    nrm = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64).expand(batch, 1, 3)
    K = torch.tensor([[800.0, 0, 320], [0, 800.0, 240], [0, 0, 1]], dtype=torch.float64)
    return (K @ (R + t @ nrm / 5.0) @ torch.linalg.inv(K) * 1e3).float()


@pytest.mark.parametrize("impl", IMPLS)
def test_homography_transfer_matches_gepp(impl):
    # the camera example's point transfer x = H^-1 x' (a solve with many right-hand sides) and
    # H^-1 itself: worst forward error against a float64 truth within FACTOR of LAPACK's
    inv, solve = _impl(impl)
    H = _homographies(512, 3).contiguous()
    g = torch.Generator().manual_seed(4)
    pts = torch.cat([640 * torch.rand(512, 1, 64, generator=g), 480 * torch.rand(512, 1, 64, generator=g),
                     torch.ones(512, 1, 64)], dim=1)
    Xp = (H.double() @ pts.double()).float().contiguous()  # rounded input of the solve
    truth = torch.linalg.solve(H.double(), Xp.double())

    def transfer_error(x):
        return ((x.double() - truth).abs() / truth.abs()).max().item()

    ours, lapack = transfer_error(solve(H, Xp)), transfer_error(torch.linalg.solve(H, Xp))
    assert ours <= FACTOR * lapack, f"transfer {ours:.2e} vs LAPACK {lapack:.2e}"
    Ht = torch.linalg.inv(H.double())
    ours = ((inv(H).double() - Ht).abs() / Ht.abs()).max().item()
    lapack = ((torch.linalg.inv(H).double() - Ht).abs() / Ht.abs()).max().item()
    assert ours <= FACTOR * lapack, f"inverse {ours:.2e} vs LAPACK {lapack:.2e}"


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["float32", "complex64"])
def test_column_scaled_inverse_is_finite(impl, dtype):
    # issue 14.3: the row scaling pushed 1e-20 into the subnormal range before the column scaling
    inv, solve = _impl(impl)
    A = torch.tensor([[1e-20, 3e20], [2e-20, 5e20]]).to(dtype)[None].contiguous()
    X, Xt = _wide(inv(A)), torch.linalg.inv(_wide(A))
    assert torch.isfinite(X).all()
    if impl != "leaf":  # the adjugate's componentwise bound (the leaf is LAPACK's GEPP: loop below)
        assert ((X - Xt).abs() / Xt.abs()).max() <= (8 if dtype.is_complex else 4) * U32
    for n in (2, 3, 4):
        A0 = mx.with_condition(n, 10.0, batch=(8,), dtype=torch.complex128 if dtype.is_complex else torch.float64,
                               seed=n)
        d = torch.exp2(torch.tensor([-66.0, 66.0, -60.0, 60.0][:n], dtype=torch.float64))
        A = (A0 * d).to(dtype).contiguous()  # columns scaled by 2^+-66: entries 1e-20 ... 1e20
        X = _wide(inv(A))
        assert torch.isfinite(X).all()
        # rows of inv(A D) = D^-1 inv(A): unscaled, the error of the well-conditioned A0
        err = ((X - torch.linalg.inv(_wide(A))) * d[:, None]).abs().amax((-2, -1))
        assert (err <= 4 * n * 2 ** (n - 1) * 10.0 * U32 * (torch.linalg.inv(A0).abs().amax((-2, -1)))).all()
        b = mx.random(n, 2, batch=(8,), dtype=dtype, seed=1).contiguous()
        assert torch.isfinite(solve(A, b)).all()


def _with_infs(n: int, dtype: torch.dtype, batch: int, seed: int) -> torch.Tensor:
    """Random matrices with one or two entries set to +-Inf (random places and signs)."""
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(batch, n, n, generator=g, dtype=torch.float64).to(dtype)
    rows = torch.arange(batch)
    for k in range(2):
        i, j = torch.randint(0, n, (batch,), generator=g), torch.randint(0, n, (batch,), generator=g)
        sign = (torch.randint(0, 2, (batch,), generator=g) * 2 - 1).double()
        keep = rows % 2 == 0 if k else torch.ones(batch, dtype=torch.bool)  # half get a second Inf
        A[rows[keep], i[keep], j[keep]] = (sign[keep] * float("inf")).to(dtype)
    return A.contiguous()


def _same_nonfinite(ours: torch.Tensor, ref: torch.Tensor, rtol: float) -> bool:
    """Same NaN pattern (per real component), equal infinities, finite values within ``rtol``."""
    o, r = (torch.view_as_real(t) if t.is_complex() else t for t in (_wide(ours), _wide(ref)))
    fin = torch.isfinite(r)
    return (torch.equal(torch.isnan(o), torch.isnan(r)) and torch.equal(o[torch.isinf(r)], r[torch.isinf(r)])
            and bool(((o[fin] - r[fin]).abs() <= rtol * r[fin].abs() + 1e-30).all()))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["float32", "complex64"])
def test_det_with_infs_is_lu_arithmetic(impl, dtype):
    # issue 14.6: what torch's det gives (LU arithmetic on A^T), not a blanket NaN; finite values
    # of these random matrices (kappa < 1e4 at this batch) to c kappa u
    for n in (1, 2, 3, 4):
        A = _with_infs(n, dtype, 600, n)
        assert _same_nonfinite(_det(impl, A), torch.linalg.det(A), 4 * n * 2 ** (n - 1) * 1e4 * U32), n


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128])
def test_det_slogdet_with_infs_match_torch(backend, backend_device, dtype):
    # the public ops on every backend (CPU float32: generated C, float64: LAPACK leaf); slogdet of
    # real input too (complex: see docs/ops/small.md, torch's logabsdet is not log|det| there)
    if backend == "emulator" and dtype in (torch.float64, torch.complex128):
        pytest.skip("the Metal kernels are float32/complex64 (DESIGN section 4)")
    rtol = 4 * 4 * 8 * 1e4 * (U32 if dtype in (torch.float32, torch.complex64) else 2.0**-53)
    for n in (1, 2, 3, 4):
        A = _with_infs(n, dtype, 600, 10 + n)
        assert _same_nonfinite(mpslinalg.det(A.to(backend_device)).cpu(), torch.linalg.det(A), rtol), n
        if not dtype.is_complex:
            s, la = mpslinalg.slogdet(A.to(backend_device))
            s_ref, la_ref = torch.linalg.slogdet(A)
            assert _same_nonfinite(s.cpu(), s_ref, rtol) and _same_nonfinite(la.cpu(), la_ref, rtol), n


@pytest.mark.parametrize("val", [float("nan"), float("inf")], ids=["nan", "inf"])
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_nonfinite_is_nan_nanj(backend, backend_device, dtype, val):
    # issue 14.16: nan+nanj as torch, not nan+0j, on every path (complex128: the LAPACK leaf)
    if backend == "emulator" and dtype == torch.complex128:
        pytest.skip("the Metal kernels are float32/complex64 (DESIGN section 4)")
    for n in (1, 2, 3, 4):
        A = mx.random(n, batch=(3,), dtype=dtype, seed=n)
        A[1, 0, n - 1] = complex(val, 0.0)
        B = mx.random(n, 2, batch=(3,), dtype=dtype, seed=2)
        for out in (mpslinalg.inv_ex(A.to(backend_device))[0], mpslinalg.solve_ex(A.to(backend_device),
                                                                                   B.to(backend_device))[0]):
            bad = torch.view_as_real(out[1].cpu())
            assert torch.isnan(bad).all() and torch.isfinite(out[[0, 2]]).all(), n


_NO_COMPILER_CHILD = r"""
import warnings, torch, mpslinalg
from mpslinalg import small
assert small.cpu_path() == "torch.linalg", small.cpu_path()
A = torch.randn(300, 4, 4, dtype=torch.float32)
A[7, 1, 2] = float("inf")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    X, info = small.inv_ex_op(A)
    small.inv_ex_op(torch.randn(300, 3, 3))  # a second size: no second warning
    d = small.det_op(A)
ours = [w for w in caught if "generated C" in str(w.message)]
assert len(ours) == 1 and issubclass(ours[0].category, RuntimeWarning), [str(w.message) for w in caught]
assert "torch.linalg" in str(ours[0].message)
good = torch.arange(300) != 7
ref = torch.linalg.inv(A[good])
assert ((X[good] - ref).abs().amax((-2, -1)) <= 1e-4 * ref.abs().amax((-2, -1))).all()
assert torch.isnan(X[7]).all() and (info == 0).all()
assert torch.equal(torch.isnan(d), torch.isnan(torch.linalg.det(A)))
# the public ops inside the table's n <= 4 CPU regions (measured on the generated C): without it,
# torch.linalg's own call (the leaf is that call plus checks: 0.64-0.83x torch.linalg, issue 34.7),
# so torch's bits; under ours_always() the family's leaf and its NaN rule still serve
from mpslinalg.oplayer import table
big = torch.randn(4096, 3, 3)
big[5, 0, 0] = float("inf")
table.reset_decisions()
assert torch.equal(mpslinalg.inv(big[:-1].clone()), torch.linalg.inv(big[:-1].clone()))
assert torch.equal(mpslinalg.slogdet(big).logabsdet, torch.linalg.slogdet(big).logabsdet)
with mpslinalg.routing.ours_always():
    X2 = mpslinalg.inv_ex(big).inverse
assert torch.isnan(X2[5]).all() and torch.isfinite(X2[[0, 1, 2, 3, 4, 6]]).all()
print("ok")
"""


def test_without_a_compiler_falls_back_to_torch_linalg_and_warns_once(tmp_path):
    # issue 15.4: no C compiler -> torch.linalg (measured fastest without one), one RuntimeWarning,
    # small.cpu_path() says so. A subprocess: compiler discovery is cached per process.
    import os
    import subprocess
    import sys

    env = dict(os.environ, MPSLINALG_CXX=str(tmp_path / "no-such-compiler"), MPSLINALG_CACHE_DIR=str(tmp_path))
    res = subprocess.run([sys.executable, "-c", _NO_COMPILER_CHILD], env=env, capture_output=True, text=True,
                         timeout=300, cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


def test_cpu_path_reports_the_mode():
    previous = small.set_compile("never")
    try:
        assert small.cpu_path() == "torch.linalg"
        small.set_compile("inductor")
        assert small.cpu_path() == "torch.compile"
        small.set_compile("auto")
        assert small.cpu_path(torch.float64) == "torch.linalg"  # the generated C is float32/complex64
        assert small.cpu_path() == ("generated C" if small.program._C.compiler() is not None else "torch.linalg")
    finally:
        small.set_compile(previous)
