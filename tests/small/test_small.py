"""Tests of the n <= 4 family (mpslinalg.small): accuracy against LAPACK's ratios and mpmath,
singular inputs, the Metal kernels in the emulator (all execution orders), autograd, semantics.

Bounds used below (u = 2^-24 for float32/complex64, 2^-53 for float64/complex128):

* Inverse ratio ``‖I − XA‖₁/(n‖A‖₁‖X‖₁u)`` (LAPACK xGET03) < 30 (LAPACK's THRESH). getri's left
  residual satisfies |XA − I| <= c_n u |X||L||U| (Higham, ASNA 2nd ed., §14.3, method B) with
  ‖|L||U|‖ <= 2^(n-1)‖A‖ for partial pivoting; power-of-two equilibration is exact, and the 2×2
  adjugate/doubled-precision-det inverse has |XA − I| <= 3u|X||A|. So the ratio is O(1).
* Forward errors: ‖X − A⁻¹‖/‖A⁻¹‖ <= c·κ·u with c = 4n·2^(n-1) (perturbation theory for the
  backward error above: a relative backward error ε gives a forward error <= κε/(1 − κε)); for
  det the relative condition number is <= n·κ (d det/det = tr(A⁻¹dA)), so |Δdet|/|det| <= c·n·κ·u.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import require_emulator, run_interpreted

import mpslinalg
import reference.matrices as mx
import reference.metrics as metrics
import reference.mp as rmp
from mpslinalg import small
from mpslinalg.oplayer.checks import LinAlgError, raise_for_info

PASS = metrics.PASS_RATIO


SIZES = [1, 2, 3, 4]


def _u(dtype):
    return metrics.unit_roundoff(dtype)


def _fe_const(n: int) -> float:
    return 4.0 * n * 2.0 ** (n - 1)


def _row_col_scaled(n, batch, dtype, seed, bits=40):
    """D1 A0 D2 with D1, D2 diagonal powers of two 2^U(-bits, bits): exactly the badly scaled inputs
    equilibration must neutralise."""
    g = torch.Generator().manual_seed(seed)
    wide = torch.complex128 if dtype.is_complex else torch.float64
    A0 = mx.random(n, batch=(batch,), dtype=wide, seed=seed)
    e1 = torch.randint(-bits, bits + 1, (batch, n, 1), generator=g).double()
    e2 = torch.randint(-bits, bits + 1, (batch, 1, n), generator=g).double()
    return (A0 * torch.exp2(e1) * torch.exp2(e2)).to(dtype)


def _inputs(kind, n, dtype, batch=64, seed=0):
    if kind == "random":
        return mx.random(n, batch=(batch,), dtype=dtype, seed=seed)
    if kind == "rowcol":
        return _row_col_scaled(n, batch, dtype, seed)
    if kind == "big":
        return mx.scaled(mx.random(n, batch=(batch,), dtype=dtype, seed=seed), 1e30)
    if kind == "tiny":
        return mx.scaled(mx.random(n, batch=(batch,), dtype=dtype, seed=seed), 1e-30)
    raise AssertionError(kind)


# --------------------------------------------------------------------------------------------
# Accuracy
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["random", "rowcol", "big", "tiny"])
@pytest.mark.parametrize("n", SIZES)
def test_inverse_ratio(backend, backend_device, gpu_dtype, n, kind):
    A = _inputs(kind, n, gpu_dtype).to(backend_device)
    X, info = mpslinalg.inv_ex(A)
    assert (info == 0).all()
    ratio = metrics.inverse_ratio(A.cpu(), X.cpu())
    # LAPACK xGET03 threshold (derivation in the module docstring)
    assert ratio.max() < PASS, f"max inverse ratio {ratio.max():.3g}"


@pytest.mark.parametrize("kind", ["random", "rowcol", "big", "tiny"])
def test_program_ratios(gpu_dtype, kind):
    # The elementwise program (compiled on CUDA, the contract the Metal kernels implement) on its
    # own; on the CPU the default torch path wraps LAPACK with the same equilibration instead.
    for n in SIZES:
        A = _inputs(kind, n, gpu_dtype, batch=64, seed=n)
        X, info = small.program._program_inv(A)
        assert (info == 0).all()
        assert metrics.inverse_ratio(A, X).max() < PASS  # xGET03, see the module docstring
        B = mx.random(n, 2, batch=(64,), dtype=gpu_dtype, seed=7)
        Y, _ = small.program._program_solve(A, B)
        assert metrics.solve_ratio(A, Y, B).max() < PASS  # xGET02


@pytest.mark.parametrize("kind", ["random", "rowcol", "big"])
@pytest.mark.parametrize("n", SIZES)
def test_solve_ratio(backend, backend_device, gpu_dtype, n, kind):
    A = _inputs(kind, n, gpu_dtype, batch=32).to(backend_device)
    B = mx.random(n, 3, batch=(32,), dtype=gpu_dtype, seed=7).to(backend_device)
    X, info = mpslinalg.solve_ex(A, B)
    assert (info == 0).all()
    # LAPACK xGET02: ‖B − AX‖/(‖A‖‖X‖u) < 30 for a backward-stable solve (getrs after getrf)
    assert metrics.solve_ratio(A.cpu(), X.cpu(), B.cpu()).max() < PASS
    Xr, _ = mpslinalg.solve_ex(A, B.mT, left=False)
    assert metrics.solve_ratio(A.cpu(), Xr.cpu(), B.mT.cpu(), left=False).max() < PASS


@pytest.mark.parametrize("kappa", [1e2, 1e4, 1e6])
@pytest.mark.parametrize("n", [2, 3, 4])
def test_forward_error_vs_mpmath(backend, backend_device, gpu_dtype, n, kappa):
    A = mx.with_condition(n, kappa, batch=(4,), dtype=gpu_dtype, seed=int(math.log10(kappa)) + n)
    B = mx.random(n, 1, batch=(4,), dtype=gpu_dtype, seed=3)
    u = _u(gpu_dtype)
    kap = rmp.cond(A, 1)  # κ of the rounded input, 1-norm
    c = _fe_const(n)
    Ad, Bd = A.to(backend_device), B.to(backend_device)

    X, _ = mpslinalg.inv_ex(Ad)
    fe = metrics.forward_error(X.cpu(), rmp.inv(A))
    assert (fe <= c * kap * u).all(), (fe, kap)

    Y, _ = mpslinalg.solve_ex(Ad, Bd)
    fe = metrics.forward_error(Y.cpu(), rmp.solve(A, B))
    assert (fe <= c * kap * u).all(), (fe, kap)

    d = mpslinalg.det(Ad).cpu()
    dref = rmp.det(A)
    rel = (d.to(dref.dtype) - dref).abs() / dref.abs()
    assert (rel <= c * n * kap * u).all(), (rel, kap)

    sign, logabs = mpslinalg.slogdet(Ad)
    sref, lref = rmp.slogdet(A)
    # |Δ log|det|| <= |Δdet|/|det| and |Δ sign| <= 2|Δdet|/|det| (first order)
    assert ((logabs.cpu().double() - lref).abs() <= c * n * kap * u).all()
    assert ((sign.cpu().to(sref.dtype) - sref).abs() <= 2 * c * n * kap * u).all()


@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_slogdet_extreme_scale(backend, backend_device, gpu_dtype, scale):
    # det of a 4×4 at 1e±30 is 1e±120: outside float32, but slogdet must be exact to c·n·κ·u
    A = mx.scaled(mx.with_condition(4, 10.0, batch=(8,), dtype=gpu_dtype, seed=11), scale)
    sign, logabs = mpslinalg.slogdet(A.to(backend_device))
    sref, lref = rmp.slogdet(A)
    kap = rmp.cond(A, 1)
    u = _u(gpu_dtype)
    bound = _fe_const(4) * 4 * kap * u
    assert ((logabs.cpu().double() - lref).abs() <= bound).all()
    assert ((sign.cpu().to(sref.dtype) - sref).abs() <= 2 * bound).all()
    # det itself over/underflows exactly as the true value does
    d = mpslinalg.det(A.to(backend_device)).cpu()
    if scale > 1:
        assert torch.isinf(d.abs()).all()
    else:
        assert (d == 0).all()


@pytest.mark.parametrize("n", [2, 3, 4])
def test_adjugate_alone_would_fail(n):
    # DESIGN §6: badly row-scaled, κ ≈ 1e5 — the reason for equilibration + pivoting. Our result
    # meets the forward-error bound where a plain cofactor inverse in float32 misses it.
    A = mx.with_condition(n, 1e5, batch=(16,), dtype=torch.float64, seed=5)
    D = torch.exp2(torch.arange(n, dtype=torch.float64) * 12.0)
    A32 = (D[:, None] * A).float()
    ref = rmp.inv(A32)
    kap = rmp.cond(A32, 1)
    bound = _fe_const(n) * kap * _u(torch.float32)
    X, _ = mpslinalg.inv_ex(A32)
    assert (metrics.forward_error(X, ref) <= bound).all()


# --------------------------------------------------------------------------------------------
# Singular inputs and info
# --------------------------------------------------------------------------------------------


def _singular_cases(dtype):
    cases = []
    for n in SIZES:
        for zero_col in range(n):
            A = mx.random(n, batch=(3,), dtype=dtype, seed=20 + n + zero_col).clone()
            A[..., :, zero_col] = 0
            # column j stays zero through elimination (updates subtract multiples of zeros), and
            # the earlier columns are nonsingular: the first zero pivot is exactly j + 1
            cases.append((A, zero_col + 1))
    A = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], dtype=dtype)
    cases.append((A, None))
    A = torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=dtype)
    cases.append((A, 2))
    A = torch.zeros(4, 4, dtype=dtype)
    cases.append((A, 1))
    return cases


def test_singular_info_det_slogdet(backend, backend_device, gpu_dtype):
    for A, expected in _singular_cases(gpu_dtype):
        Ad = A.to(backend_device)
        _, info = mpslinalg.inv_ex(Ad)
        _, info_s = mpslinalg.solve_ex(Ad, torch.ones(*A.shape[:-1], 1, dtype=A.dtype, device=backend_device))
        if expected is None:
            assert (info > 0).all() and (info_s > 0).all()
        else:
            assert (info == expected).all(), (A, info)
            assert (info_s == expected).all()
        assert (mpslinalg.det(Ad) == 0).all()
        sign, logabs = mpslinalg.slogdet(Ad)
        assert (sign == 0).all() and torch.isneginf(logabs).all()
        with pytest.raises(LinAlgError, match="singular"):
            raise_for_info("inv", info, "The diagonal element {info} is zero, the inversion could not "
                           "be completed because the input matrix is singular.")


def test_info_matches_lapack_on_exact_singular():
    # info > 0 exactly where LAPACK (torch's CPU getrf) finds an exact zero pivot
    for A, _ in _singular_cases(torch.float64):
        _, _, info_ref = torch.linalg.lu_factor_ex(A)
        _, info = mpslinalg.inv_ex(A)
        assert ((info > 0) == (info_ref > 0)).all()


@pytest.mark.parametrize("val", [float("inf"), float("nan")], ids=["inf", "nan"])
def test_nonfinite_input_gives_nan(backend, backend_device, gpu_dtype, val):
    # DESIGN §7: NaN where LAPACK's result is NaN. LAPACK's elimination spreads an Inf/NaN entry to
    # (nearly) every entry of the inverse/solution, so ours is all-NaN for that matrix, and only
    # for that matrix.
    for n in SIZES:
        A = mx.random(n, batch=(2,), dtype=gpu_dtype, seed=n).to(backend_device)
        A[0, n - 1, n // 2] = val
        B = mx.random(n, 2, batch=(2,), dtype=gpu_dtype, seed=1).to(backend_device)
        X, _ = mpslinalg.inv_ex(A)
        Y, _ = mpslinalg.solve_ex(A, B)
        assert torch.isnan(X[0]).all() and torch.isfinite(X[1]).all()
        assert torch.isnan(Y[0]).all() and torch.isfinite(Y[1]).all()
        assert not torch.isfinite(mpslinalg.det(A)[0]) and torch.isfinite(mpslinalg.det(A)[1])


# --------------------------------------------------------------------------------------------
# The Metal kernels in the emulator, every execution order, against the torch program
# --------------------------------------------------------------------------------------------

ORDERS = [dict(order="inorder"), dict(order="reverse"), dict(order="shuffle", seed=1),
          dict(order="shuffle", seed=2)]


def _close(a, b, u, factor=64.0):
    """|a − b| <= factor·u·max|b| entrywise-normwise (the two programs differ only by rounding:
    FMA contraction on the GPU; each is backward stable, so factor·u relative to the result's scale
    for these well-conditioned inputs)."""
    scale = b.abs().max().clamp_min(torch.finfo(torch.float32).tiny)
    return ((a - b).abs().max() / scale).item() <= factor * u


LOADS = ["direct", "staged"]  # the load variants of small_inv / small_det (small.TUNING.load)


@pytest.mark.parametrize("load", LOADS)
@pytest.mark.parametrize("order", ORDERS, ids=["inorder", "reverse", "shuffle1", "shuffle2"])
@pytest.mark.parametrize("n", SIZES)
def test_kernels_all_orders(gpu_dtype, n, order, load):
    require_emulator()
    batch = 130  # three threadgroups of 64, the last one partial
    A = mx.with_condition(n, 100.0, batch=(batch,), dtype=gpu_dtype, seed=n).contiguous()
    u = _u(gpu_dtype)

    # through the library's own launch code (small.program._kernel_*), with the emulator's order keywords
    X, info = small.program._kernel_inv(A, load=load, **order)
    X0, info0 = small.program._program_inv(A)
    assert _close(X, X0, u) and torch.equal(info, info0)

    mant, expo, info = small.program._kernel_det_parts(A, load=load, **order)
    m0, e0, i0 = small.program._program_det_parts(A)
    assert torch.equal(expo, e0) and torch.equal(info, i0) and _close(mant, m0, u)

    B = mx.random(n, 3, batch=(batch,), dtype=gpu_dtype, seed=9).contiguous()
    Xs, info = small.program._kernel_solve(A, B, **order)
    Xs0, i0 = small.program._program_solve(A, B)
    assert _close(Xs, Xs0, u) and torch.equal(info, i0)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The bytes of ``t`` (bit-identical results, NaNs included)."""
    return t.contiguous().view(torch.uint8)


@pytest.mark.parametrize("n", SIZES)
def test_load_variants_same_arithmetic(gpu_dtype, n):
    """Both load variants run the same register code (inv_in_registers / det_in_registers) and the
    CPU emulator does not contract to FMA: their results are bit-identical, also for an input that
    starts at an odd element of its storage (the host then copies it to a 16-byte aligned buffer for
    the vector accesses), for the singular and non-finite rules, and with guard pages around every
    buffer (a vector access past a matrix's end would fault there)."""
    require_emulator()
    batch = 70  # one full threadgroup and a partial one
    A = mx.random(n, batch=(batch,), dtype=gpu_dtype, seed=30 + n).contiguous()
    A[3] = 0  # info = 1 (exactly singular)
    A[5, 0, 0] = float("nan")  # all-NaN inverse, NaN det
    A[7, -1, -1] = float("inf")
    storage = torch.empty(batch * n * n + 1, dtype=gpu_dtype)
    A_odd = storage[1:].view(batch, n, n)  # 4 (8) bytes past an aligned start
    A_odd.copy_(A)
    assert A_odd.is_contiguous() and A_odd.data_ptr() % 16 != 0
    before = A_odd.clone()
    out = {}
    for load in LOADS:
        for tag, M in (("aligned", A), ("odd", A_odd)):
            X, info = small.program._kernel_inv(M, load=load, guard=True)
            mant, expo, dinfo = small.program._kernel_det_parts(M, load=load, guard=True)
            out[load, tag] = (X, info, mant, expo, dinfo)
    assert torch.equal(_bits(A_odd), _bits(before))  # the input is never modified
    ref = out["direct", "aligned"]
    for key, got in out.items():
        assert all(torch.equal(_bits(r), _bits(g)) for r, g in zip(ref, got)), key
    X, info, mant, _, dinfo = ref
    assert info[3] == 1 and dinfo[3] == 1 and mant[3] == 0
    assert torch.isnan(X[5]).all() and torch.isnan(X[7]).all() and torch.isnan(mant[5])
    Xs, _ = small.program._kernel_solve(A_odd, torch.ones(batch, n, 1, dtype=gpu_dtype), guard=True)
    Xs0, _ = small.program._kernel_solve(A, torch.ones(batch, n, 1, dtype=gpu_dtype))
    assert torch.equal(_bits(Xs), _bits(Xs0))


def test_tuning_load_selects_and_is_validated(monkeypatch):
    """TUNING.load picks the kernel each call launches; a value that names no variant is an error
    naming the field, before anything runs."""
    require_emulator()
    A = mx.random(3, batch=(4,), seed=1)
    launched = []
    real = small.program.kernel_name
    monkeypatch.setattr(small.program, "kernel_name", lambda *a: launched.append(real(*a)) or real(*a))
    for load in LOADS:
        monkeypatch.setitem(small.TUNING.load, "cpu", load)
        with mpslinalg.use_backend("emulator"):
            mpslinalg.inv_ex(A)
            mpslinalg.det(A)
    assert launched == ["small_inv_direct_f32_3", "small_det_direct_f32_3",
                        "small_inv_staged_f32_3", "small_det_staged_f32_3"], launched
    monkeypatch.setitem(small.TUNING.load, "cpu", "coalesced")
    with pytest.raises(ValueError, match=r"TUNING\.load\['cpu'\] must be one of"):
        small.program._kernel_inv(A)
    monkeypatch.setattr(small.TUNING, "load", "staged")
    with pytest.raises(ValueError, match=r"TUNING\.load must be a dict"):
        small.program._kernel_det_parts(A)
    with pytest.raises(ValueError, match="load must be one of"):
        small.program._kernel_inv(A, load="Staged")


@pytest.mark.parametrize("kind", ["random", "rowcol", "big", "tiny"])
def test_emulator_equals_torch_program(gpu_dtype, kind):
    # "the kernel's results equal the torch path's within rounding on the full accuracy suite"
    require_emulator()
    u = _u(gpu_dtype)
    for n in SIZES:
        A = _inputs(kind, n, gpu_dtype, batch=40, seed=n)
        with mpslinalg.use_backend("torch"):
            X0, i0 = mpslinalg.inv_ex(A)  # CPU default: equilibrated LAPACK
            s0, l0 = mpslinalg.slogdet(A)
            Xp, ip = small.program._program_inv(A)  # the elementwise program
        with mpslinalg.use_backend("emulator"):
            X1, i1 = mpslinalg.inv_ex(A)
            s1, l1 = mpslinalg.slogdet(A)
        assert torch.equal(i0, i1) and torch.equal(ip, i1)
        # compare per matrix, relative to that matrix's inverse (scales differ by 2^±80); the
        # three are backward-stable inverses of the same matrix: they agree to c·κ·u, κ <= 1e3 here
        for ref in (X0, Xp):
            rel = (X1 - ref).abs().amax((-2, -1)) / ref.abs().amax((-2, -1))
            kap = torch.linalg.cond(A.to(torch.complex128 if A.is_complex() else torch.float64), 1)
            assert (rel <= _fe_const(n) * kap * u).all()
        bound = _fe_const(n) * n * kap * u  # det: relative condition <= n·κ
        assert ((l1 - l0).abs() <= bound * l0.abs().clamp_min(1)).all()
        assert ((s1 - s0).abs() <= 2 * bound).all()


# --------------------------------------------------------------------------------------------
# Autograd
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("n", [2, 3, 4])
def test_gradcheck(dtype, n):
    # fast_mode (random projections of the Jacobians) keeps the complex/4×4 cases within seconds;
    # it still compares analytical and numerical derivatives.
    fast = dtype.is_complex or n == 4
    with mpslinalg.use_backend("torch"):
        A = mx.with_condition(n, 5.0, batch=(2,), dtype=dtype, seed=n).requires_grad_()
        B = mx.random(n, 2, batch=(1,), dtype=dtype, seed=4).requires_grad_()  # broadcast over A
        fns = {
            "inv": (lambda A: mpslinalg.inv_ex(A)[0], (A,)),
            "det": (mpslinalg.det, (A,)),
            "slogdet": ((lambda A: mpslinalg.slogdet(A)) if dtype.is_complex else (lambda A: mpslinalg.slogdet(A)[1]),
                        (A,)),
            "solve": (lambda A, B: mpslinalg.solve_ex(A, B)[0], (A, B)),
            "solve_right": (lambda A, B: mpslinalg.solve_ex(A, B.mT, left=False)[0], (A, B)),
        }
        for name, (f, args) in fns.items():
            assert torch.autograd.gradcheck(f, args, fast_mode=fast), name
            assert torch.autograd.gradgradcheck(f, args, fast_mode=fast), name


def test_grad_matches_torch():
    A = mx.with_condition(4, 10.0, batch=(3,), dtype=torch.complex128, seed=2)
    for ours, theirs in [(lambda A: mpslinalg.det(A), torch.linalg.det),
                         (lambda A: mpslinalg.slogdet(A)[1], lambda A: torch.linalg.slogdet(A)[1]),
                         (lambda A: mpslinalg.slogdet(A)[0], lambda A: torch.linalg.slogdet(A)[0]),
                         (lambda A: mpslinalg.inv_ex(A)[0], torch.linalg.inv)]:
        a1 = A.clone().requires_grad_()
        a2 = A.clone().requires_grad_()
        w = torch.randn_like(ours(A))
        (ours(a1) * w).real.sum().backward()
        (theirs(a2) * w).real.sum().backward()
        # both in complex128: agreement to c·κ·u (κ = 10)
        assert torch.allclose(a1.grad, a2.grad, rtol=0, atol=1e3 * 2**-53 * a2.grad.abs().max())


def test_det_grad_singular_is_adjugate():
    # det is a polynomial: at a singular matrix its gradient is adj(A)^T (rank n-1: nonzero)
    A = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], dtype=torch.float64)
    a = A.clone().requires_grad_()
    mpslinalg.det(a).backward()
    cof = torch.tensor([[4.0, 4.0, -4.0], [-2.0, -2.0, 2.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    assert torch.equal(a.grad, cof)


def test_float32_emulator_gradients(gpu_dtype):
    require_emulator()
    n = 3
    ref_dtype = torch.complex128 if gpu_dtype.is_complex else torch.float64
    A64 = mx.with_condition(n, 10.0, batch=(4,), dtype=ref_dtype, seed=8)
    A32 = A64.to(gpu_dtype)
    kap = 10.0
    for f in [lambda A: mpslinalg.inv_ex(A)[0], mpslinalg.det, lambda A: mpslinalg.slogdet(A)[1]]:
        a = A32.clone().requires_grad_()
        with mpslinalg.use_backend("emulator"):
            out = f(a)
            w = torch.ones_like(out)
            (out * w).real.sum().backward()
        b = A32.to(ref_dtype).requires_grad_()
        outb = f(b)
        (outb * w.to(outb.dtype)).real.sum().backward()
        # gradient of inv is −X^H G X^H: relative error <= c·κ²·u in float32 (two inverse factors)
        err = (a.grad.to(ref_dtype) - b.grad).abs().max() / b.grad.abs().max()
        assert err <= _fe_const(n) * kap**2 * _u(gpu_dtype)


# --------------------------------------------------------------------------------------------
# Semantics: shapes, views, errors, compile
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex128])
def test_torch_func_transforms(dtype):
    # vmap, grad and jacrev (VMC codes take Hessians of log-determinants this way) agree with
    # torch.linalg's to c·κ²·u (κ <= 20 here; derivatives of inverses carry two inverse factors)
    A = mx.with_condition(4, 20.0, batch=(3,), dtype=dtype, seed=4)
    B = mx.random(4, 2, batch=(3,), dtype=dtype, seed=5)
    bound = _fe_const(4) * 20.0**2 * _u(dtype)
    pairs = {"inv": (lambda a: mpslinalg.inv_ex(a)[0], torch.linalg.inv), "det": (mpslinalg.det, torch.linalg.det),
             "slogdet": (lambda a: mpslinalg.slogdet(a)[1], lambda a: torch.linalg.slogdet(a)[1])}

    def rel(x, y):
        return ((x - y).abs().max() / y.abs().max()).item()

    for ours, ref in pairs.values():
        assert rel(torch.vmap(ours)(A), ref(A)) <= bound
        assert rel(torch.func.grad(lambda a, f=ours: f(a).abs().sum())(A[0]),
                   torch.func.grad(lambda a, f=ref: f(a).abs().sum())(A[0])) <= bound
        if not dtype.is_complex:
            assert rel(torch.func.jacrev(ours)(A[0]), torch.func.jacrev(ref)(A[0])) <= bound
    assert rel(torch.vmap(lambda a, b: mpslinalg.solve_ex(a, b)[0])(A, B), torch.linalg.solve(A, B)) <= bound
    assert not small.program._C.failed


def test_views_broadcast_and_inputs_unchanged(backend, backend_device):
    A = mx.random(4, batch=(2, 3), dtype=torch.complex64, seed=3).to(backend_device)
    A_copy = A.clone()
    X1, _ = mpslinalg.inv_ex(A.conj())
    X2, _ = mpslinalg.inv_ex(A.conj().resolve_conj())
    assert torch.equal(X1, X2)
    At = A.transpose(-2, -1)
    assert torch.equal(mpslinalg.det(At), mpslinalg.det(At.contiguous()))
    B = mx.random(4, 2, batch=(3,), dtype=torch.complex64, seed=4).to(backend_device)
    X, info = mpslinalg.solve_ex(A, B)  # batch (2, 3) with (3,)
    assert X.shape == (2, 3, 4, 2) and info.shape == (2, 3)
    for ashape, bshape in [((4, 4), (3, 4, 5)), ((2, 1, 4, 4), (3, 4, 5)), ((1, 4, 4), (3, 4, 5))]:
        Ab = torch.randn(ashape, device=backend_device)
        Bb = torch.randn(bshape, device=backend_device)
        Xb, ib = mpslinalg.solve_ex(Ab, Bb)
        Xt, it = torch.linalg.solve_ex(Ab.cpu(), Bb.cpu())
        assert Xb.shape == Xt.shape and ib.shape == it.shape  # info has A's batch shape, like torch
    X_ref, _ = mpslinalg.solve_ex(A, B.expand(2, 3, 4, 2).contiguous())
    assert torch.equal(X, X_ref)
    assert torch.equal(A, A_copy)


def test_empty_shapes(backend, backend_device):
    for shape in [(0, 3, 3), (2, 0, 0), (0, 0, 0)]:
        A = torch.zeros(shape, device=backend_device)
        X, info = mpslinalg.inv_ex(A)
        assert X.shape == shape and info.shape == shape[:1]
        assert torch.equal(mpslinalg.det(A), torch.linalg.det(A.cpu()).to(A.device))
        s, lg = mpslinalg.slogdet(A)
        s_ref, l_ref = torch.linalg.slogdet(A.cpu())
        assert torch.equal(s.cpu(), s_ref) and torch.equal(lg.cpu(), l_ref)
    X, info = mpslinalg.solve_ex(torch.eye(3, device=backend_device).expand(2, 3, 3),
                             torch.zeros(2, 3, 0, device=backend_device))
    assert X.shape == (2, 3, 0) and (info == 0).all()


def test_bad_input():
    with pytest.raises(ValueError, match="square"):
        mpslinalg.det(torch.randn(3, 4))
    with pytest.raises(TypeError, match="float32"):
        mpslinalg.slogdet(torch.ones(3, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="incompatible"):
        mpslinalg.solve_ex(torch.randn(3, 3), torch.randn(4, 1))
    with pytest.raises(TypeError, match="dtype"):
        mpslinalg.solve_ex(torch.randn(3, 3), torch.randn(3, 1, dtype=torch.float64))


def test_torch_compile_fullgraph():
    def f(A, B):
        X, info = mpslinalg.inv_ex(A)
        s, lg = mpslinalg.slogdet(A)
        Y, _ = mpslinalg.solve_ex(A, B)
        return X.sum() + mpslinalg.det(A).sum() + lg.sum() + Y.sum() + info.sum()

    A = mx.with_condition(3, 5.0, batch=(5,), seed=1)
    B = mx.random(3, 2, batch=(5,), seed=2)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    assert torch.allclose(compiled(A, B), f(A, B), rtol=1e-6)


def test_compiled_program_matches_eager():
    # The torch.compile'd program computes the same values as the eager one. n = 1 keeps the
    # compile short on CPU; the larger programs are the same code (used on CUDA for solves).
    previous = small.set_compile("inductor")
    try:
        with mpslinalg.use_backend("torch"):
            A = mx.random(1, batch=(37,), seed=3)
            X, info = mpslinalg.inv_ex(A)
        X0, info0 = small.program._program_inv(A)
        assert torch.equal(X, X0) and torch.equal(info, info0)
        assert "inv:cpu" in small.program._compiled  # the compiled path ran
    finally:
        small.set_compile(previous)


def test_set_compile_modes():
    previous = small.set_compile("never")
    try:
        assert small.set_compile("always") == "never"  # "always" is an alias of "inductor"
        assert small.set_compile("auto") == "inductor"
        with pytest.raises(ValueError, match="mode"):
            small.set_compile("sometimes")
    finally:
        small.set_compile(previous)


# --------------------------------------------------------------------------------------------
# The Triton kernel generated from the program (the CUDA torch path)
# --------------------------------------------------------------------------------------------


def _check_triton_against_program(device: str):
    for dtype in (torch.float32, torch.complex64):
        for n in SIZES:
            A = mx.with_condition(n, 100.0, batch=(300,), dtype=dtype, seed=n).contiguous()
            A[5] = 0  # exactly singular: info and NaN handling
            # columns scaled by 2^+-66 (issue 14.3's scaling) and an Inf entry (LU arithmetic in det)
            A[100:200] *= torch.exp2(torch.tensor([-66.0, 66.0, -60.0, 60.0][:n])).to(dtype)
            A[7, 0, n - 1] = float("inf")
            A = A.to(device)
            X, info = small.program._TRITON.run("inv", A)
            X0, i0 = small.program._program_inv(A)
            m, e, i1 = small.program._TRITON.run("det", A)
            m0, e0, i10 = small.program._program_det_parts(A)
            assert torch.equal(info, i0) and torch.equal(e, e0) and torch.equal(i1, i10)
            # same operations; on a GPU FMA contraction may change the last bits: c·κ·u (κ = 100)
            good = (info == 0) & torch.isfinite(X0).flatten(1).all(1)
            assert torch.equal(torch.isnan(X), torch.isnan(X0)) and torch.equal(torch.isnan(m), torch.isnan(m0))
            bound = _fe_const(n) * 100.0 * _u(dtype)
            rel = (X - X0)[good].abs().amax((-2, -1)) / X0[good].abs().amax((-2, -1))
            assert (rel <= bound).all()
            assert ((m - m0)[good].abs() <= bound * n * m0[good].abs()).all()
            Bm = mx.random(n, 3, batch=(300,), dtype=dtype, seed=2).contiguous().to(device)
            Y, j1 = small.program._TRITON.run("solve", A, Bm)
            Y0, j0 = small.program._program_solve(A, Bm)
            assert torch.equal(j1, j0)
            rel = (Y - Y0)[good].abs().amax((-2, -1)) / Y0[good].abs().amax((-2, -1))
            assert (rel <= bound).all()


def test_triton_kernel_interpreted():
    # Runs the generated Triton source in Triton's CPU interpreter, where Triton is installed.
    run_interpreted("import tests.small.test_small as t; t._check_triton_against_program('cpu')", timeout=300)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["random", "rowcol", "big", "tiny"])
def test_cuda_accuracy(gpu_dtype, kind):
    # the CUDA torch path (Triton kernels) against LAPACK's ratios, as on the other backends
    for n in SIZES:
        A = _inputs(kind, n, gpu_dtype, batch=64, seed=n)
        X, info = mpslinalg.inv_ex(A.cuda())
        assert (info == 0).all() and metrics.inverse_ratio(A, X.cpu()).max() < PASS
        B = mx.random(n, 3, batch=(64,), dtype=gpu_dtype, seed=7)
        Y, _ = mpslinalg.solve_ex(A.cuda(), B.cuda())
        assert metrics.solve_ratio(A, Y.cpu(), B).max() < PASS
        _, logabs = mpslinalg.slogdet(A.cuda())
        assert torch.isfinite(logabs).all()
    assert not small.program._TRITON.failed


@pytest.mark.cuda
def test_triton_kernel_cuda(monkeypatch):
    monkeypatch.setattr(small.program._TRITON, "kernels", {})
    _check_triton_against_program("cuda")
    # and the public path uses it without host synchronisation
    A = mx.random(4, batch=(1000,), seed=1).cuda()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        mpslinalg.inv_ex(A)
        mpslinalg.slogdet(A)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert not small.program._TRITON.failed


# --------------------------------------------------------------------------------------------
# The CPU paths: the program emitted as C (default) and LAPACK with the same equilibration
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_generated_c_matches_program(gpu_dtype, n):
    if small.program._C.compiler() is None:
        pytest.skip("no C compiler (the emulator's discovery found none): the CPU path falls back")
    batch = 37  # vector blocks and a scalar tail
    A = mx.with_condition(n, 100.0, batch=(batch,), dtype=gpu_dtype, seed=n).contiguous()
    A[3] = 0  # exactly singular
    A[4, 0, 0] = float("nan")
    B = mx.random(n, 3, batch=(batch,), dtype=gpu_dtype, seed=2).contiguous()
    u = _u(gpu_dtype)
    ok = torch.ones(batch, dtype=torch.bool)
    ok[3:5] = False

    def close(a, b):
        # same operations in the same order (no FMA contraction): equal up to at most a rounding
        scale = b[ok].abs().reshape(ok.sum(), -1).amax(-1)
        return ((a[ok] - b[ok]).abs().reshape(ok.sum(), -1).amax(-1) <= 4 * u * scale).all()

    X, info = small.program._C.run("inv", A)
    X0, i0 = small.program._program_inv(A)
    assert torch.equal(info, i0) and close(X, X0) and torch.isnan(X[4]).all()
    m, e, i1 = small.program._C.run("det", A)
    m0, e0, i10 = small.program._program_det_parts(A)
    assert torch.equal(e[ok], e0[ok]) and torch.equal(i1, i10) and close(m, m0)
    Y, j1 = small.program._C.run("solve", A, B)
    Y0, j0 = small.program._program_solve(A, B)
    assert torch.equal(j1, j0) and close(Y, Y0)


@pytest.mark.parametrize("kind", ["random", "rowcol", "big", "tiny"])
def test_lapack_leaf_ratios(gpu_dtype, kind):
    # set_compile("never"): the CPU path without generated code (also the fallback without a C
    # compiler): equilibration around LAPACK getrf/getrs; same bounds as above
    previous = small.set_compile("never")
    try:
        with mpslinalg.use_backend("torch"):
            for n in SIZES:
                A = _inputs(kind, n, gpu_dtype, batch=32, seed=n)
                X, info = mpslinalg.inv_ex(A)
                assert (info == 0).all() and metrics.inverse_ratio(A, X).max() < PASS
                B = mx.random(n, 2, batch=(32,), dtype=gpu_dtype, seed=7)
                Y, _ = mpslinalg.solve_ex(A, B)
                assert metrics.solve_ratio(A, Y, B).max() < PASS
                sign, logabs = mpslinalg.slogdet(A)
                assert torch.isfinite(logabs).all() and (sign.abs() - 1).abs().max() < 8 * _u(gpu_dtype)
    finally:
        small.set_compile(previous)


@pytest.mark.cuda
@pytest.mark.parametrize("load", LOADS)
@pytest.mark.parametrize("kind", ["random", "rowcol", "big", "tiny"])
def test_kernel_variants_cuda_target(gpu_dtype, kind, load):
    """The Metal kernels on the GPU (the emulator's cuda target), both load variants, through the
    library's call sites: LAPACK's ratios as everywhere (xGET03 < 30), info and det exponents as the
    program's, mantissas within the rounding of a backward-stable factorisation (_close: the GPU may
    contract to FMA, the program does not); a misaligned input (the host copies it) gives the same.
    The cuda target runs prebuilt cubins (no compiler needed on the GPU machine)."""
    u = _u(gpu_dtype)
    for n in SIZES:
        A = _inputs(kind, n, gpu_dtype, batch=200, seed=n)  # three groups of 64 and a partial one
        storage = torch.empty(A.numel() + 1, dtype=gpu_dtype, device="cuda")
        A_odd = storage[1:].view(A.shape)
        A_odd.copy_(A)
        for Ad in (A.cuda(), A_odd):
            X, info = small.program._kernel_inv(Ad, load=load)
            assert (info.cpu() == 0).all() and metrics.inverse_ratio(A, X.cpu()).max() < PASS
            mant, expo, dinfo = small.program._kernel_det_parts(Ad, load=load)
            m0, e0, i0 = small.program._program_det_parts(A)
            assert torch.equal(dinfo.cpu(), i0) and torch.equal(expo.cpu(), e0)
            assert _close(mant.cpu(), m0, u)
