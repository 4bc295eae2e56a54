"""The emulator runs real kernels correctly: complex arithmetic, the MSL surface, grids, templates,
atomics, reductions with barriers and simdgroup collectives, LU in threadgroup memory vs SciPy,
and a planted missing barrier that in-order execution misses and reverse/shuffle orders catch.

Kernel sources: ``tests/emulator/kernels/*.metal``. Tests taking the ``shader`` fixture also run
on real Metal (``mps`` marker) with the same expectations.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
import torch

U32 = 2.0**-24  # unit roundoff of float32


# ---------------------------------------------------------------------------------------------
# complex64 as float2
# ---------------------------------------------------------------------------------------------
def test_complex_float2_arithmetic(shader):
    g = torch.Generator().manual_seed(0)
    n = 1000
    a = torch.randn(n, dtype=torch.complex64, generator=g)
    b = torch.randn(n, dtype=torch.complex64, generator=g)
    prod = torch.zeros(n, dtype=torch.complex64)
    conj = torch.zeros(n, dtype=torch.complex64)
    abs1 = torch.zeros(n)
    args = [shader.tensor(t) for t in (a, b, prod, conj, abs1)]
    shader.run(shader.lib("basics").complex_ops, *args, group_size=64)
    prod, conj, abs1 = (t.cpu() for t in args[2:])
    # Complex product with real rounded operations: |fl(ab) - ab| <= sqrt(5) u |a||b|
    # (Brent, Percival, Zimmermann 2007); the reference is exact in complex128.
    exact = a.to(torch.complex128) * b.to(torch.complex128)
    err = (prod.to(torch.complex128) - exact).abs()
    bound = math.sqrt(5) * U32 * (a.abs() * b.abs()).double()
    assert (err <= bound).all(), float((err / bound).max())
    # conj(a) + (y.yx*1 - y.yx): the bracket is exactly 0, so the result is conj(a) exactly
    assert torch.equal(conj, a.conj().resolve_conj())
    # |Re| + |Im|: one rounded addition, relative error <= u
    ref = a.real.double().abs() + a.imag.double().abs()
    assert ((abs1.double() - ref).abs() <= U32 * ref).all()


# ---------------------------------------------------------------------------------------------
# MSL surface: constructors, conversions, math, select/clamp/mix/fma, as_type, limits
# ---------------------------------------------------------------------------------------------
def test_msl_surface(shader):
    x = torch.tensor([0.3, -1.7, 2.5, -0.2, 4.0, 0.0, 1e-3, -3.25], dtype=torch.float32)
    n = x.numel()
    out = torch.zeros(n * 24)
    iout = torch.zeros(n, dtype=torch.int32)
    args = [shader.tensor(t) for t in (out, x, iout)]
    shader.run(shader.lib("basics").surface, *args, threads=n, group_size=n)
    o = args[0].cpu().view(n, 24).double()
    iout = args[2].cpu()
    v = x.double()
    i = torch.arange(n, dtype=torch.float64)
    # exact results (small integers and exactly representable sums)
    assert torch.equal(o[:, 2], torch.trunc(x * 10).double())
    assert torch.equal(o[:, 3], torch.trunc(-x * 10).double())
    assert torch.equal(o[:, 10], torch.full((n,), 1.5, dtype=torch.float64))
    assert torch.equal(o[:, 11], torch.where(v > 0, 2.0, 1.0))
    assert torch.equal(o[:, 13], v)  # as_type round trip
    assert o[0, 14] == 2.0**-23 and o[0, 15] == torch.finfo(torch.float32).max
    assert torch.equal(o[:, 16], torch.ones(n, dtype=torch.float64))
    assert o[0, 17] == float(torch.tensor(math.pi, dtype=torch.float32))
    assert torch.equal(
        o[:, 19], ((torch.stack([v, 2 * v, torch.full_like(v, 3.0), i], 1) > 0.5).sum(1)).double()
    )
    assert torch.equal(o[:, 21], v)
    assert torch.equal(o[:, 22], torch.ones(n, dtype=torch.float64))
    assert torch.equal(o[:, 23], torch.sign(v).where(v != 0, 1.0) * torch.trunc(v.abs() * 4) / 4)
    # sqrt is correctly rounded: equal to the float32 rounding of the (float64, then exactly
    # rounded: double rounding is innocuous for sqrt, 53 >= 2*24+2) square root. (torch's own CPU
    # float32 sqrt is not always correctly rounded, so it is not the reference.)
    assert torch.equal(o[:, 4], torch.sqrt(v.abs()).float().double())
    assert o[0, 18] == float(torch.tensor(math.sqrt(2), dtype=torch.float32) ** 2)
    # clamp/fma: fma is one rounding of the exact v*v + 1
    assert torch.equal(o[:, 9], x.clamp(-0.5, 0.5).double())
    assert torch.equal(o[:, 8], (v * v + 1).float().double())
    # sums of 3-4 terms, each rounded: relative error <= 3u (|terms| of one sign except where noted)
    ref0 = v + 2 * v + 3 + i
    assert ((o[:, 0] - ref0).abs() <= 3 * U32 * (v.abs() * 3 + 3 + i)).all()
    assert ((o[:, 1] - 3 * v).abs() <= 2 * U32 * 3 * v.abs()).all()
    assert ((o[:, 20] - 6 * v).abs() <= 3 * U32 * 6 * v.abs()).all()
    # half(v) + 1 computed in float from two halves: equal to float(half(v)) + 1 rounded to float
    assert torch.equal(o[:, 12], (x.half().float() + 1).double())
    # exp/log: <= 1 ulp (the MSL specification's bound for precise math; glibc's expf/logf are
    # within it), rsqrt: 1/sqrt = two correctly rounded operations; 1 ulp <= 2u relative. Against
    # float64 values of the same float32 arguments (|v| + 1 is rounded first).
    arg = (x.abs() + 1).double()
    for col, ref in ((6, torch.exp(v)), (7, torch.log(arg)), (5, 1 / torch.sqrt(arg))):
        got = o[:, col]
        assert ((got - ref).abs() <= 2 * U32 * ref.abs()).all(), col
    bits = x.view(torch.int32).numpy().astype(np.uint32)
    pop = np.array([bin(b).count("1") for b in bits])
    clz = np.array([32 - (k + 1).bit_length() for k in range(n)])
    assert np.array_equal(iout.numpy(), pop + 100 * clz)


# ---------------------------------------------------------------------------------------------
# grids: 1-D/2-D/3-D, non-uniform edge threadgroups (dispatchThreads)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "threads,group",
    [([70], [32]), ([37, 5], [8, 4]), ([9, 7, 5], [4, 2, 3]), ([64, 3], [64, 1]), ([5], [8])],
    ids=["1d", "2d", "3d", "2d-uniform", "1d-small"],
)
def test_grid_attributes(shader, threads, group):
    t3 = (threads + [1, 1])[:3]
    g3 = (group + [1, 1])[:3]
    total = math.prod(t3)
    out = shader.tensor(torch.full((total * 24,), -1, dtype=torch.int32))
    shader.run(shader.lib("basics").grid_ids, out, threads=threads, group_size=group)
    o = out.cpu().view(total, 24).numpy().astype(np.int64)
    z, y, x = np.meshgrid(*(np.arange(t) for t in reversed(t3)), indexing="ij")
    pos = np.stack([x.ravel(), y.ravel(), z.ravel()], 1)
    assert np.array_equal(o[:, 0:3], pos)
    local = pos % g3
    grp = pos // g3
    assert np.array_equal(o[:, 3:6], local)
    assert np.array_equal(o[:, 6:9], grp)
    # edge groups are smaller: actual threads per group = min(group, threads - origin)
    actual = np.minimum(g3, np.array(t3) - grp * g3)
    assert np.array_equal(o[:, 9:12], actual)
    assert (o[:, 12:15] == g3).all()
    assert (o[:, 15:18] == -(-np.array(t3) // g3)).all()
    assert (o[:, 18:21] == t3).all()
    lin = local[:, 0] + actual[:, 0] * (local[:, 1] + actual[:, 1] * local[:, 2])
    assert np.array_equal(o[:, 21], lin)
    assert np.array_equal(o[:, 22], lin % 32)
    assert np.array_equal(o[:, 23], lin // 32)


def test_grid_2d_writes_every_element_once(shader):
    out = shader.tensor(torch.full((13, 21), -1.0))
    shader.run(shader.lib("basics").grid_2d, out, 21, threads=[21, 13], group_size=[8, 8])
    r, c = torch.meshgrid(torch.arange(13), torch.arange(21), indexing="ij")
    assert torch.equal(out.cpu(), (r * 1000 + c).float())


# ---------------------------------------------------------------------------------------------
# templates with host_name
# ---------------------------------------------------------------------------------------------
def test_templates_host_name(shader):
    lib = shader.lib("basics")
    assert {"scale_float", "scale_float2_k3"} <= set(dir(lib))
    x = shader.tensor(torch.arange(6.0))
    shader.run(lib.scale_float, x, 0.5)  # K defaults to 2: x * (0.5 * 2)
    assert torch.equal(x.cpu(), torch.arange(6.0))
    z = shader.tensor(torch.arange(8.0).view(4, 2))  # four float2
    shader.run(lib.scale_float2_k3, z, 0.5, threads=4)  # z * 1.5, exact for these values
    assert torch.equal(z.cpu(), torch.arange(8.0).view(4, 2) * 1.5)


# ---------------------------------------------------------------------------------------------
# atomics
# ---------------------------------------------------------------------------------------------
def test_atomics_histogram(shader, order):
    g = torch.Generator().manual_seed(1)
    v = torch.randint(0, 10, (1000,), generator=g, dtype=torch.int32)
    hist = shader.tensor(torch.zeros(10, dtype=torch.int32))
    total = shader.tensor(torch.zeros(1, dtype=torch.int32))
    shader.run(
        shader.lib("basics").histogram,
        shader.tensor(v),
        hist,
        total,
        group_size=128,
        order=order[0],
        seed=order[1],
    )
    assert torch.equal(hist.cpu(), torch.bincount(v, minlength=10).int())
    assert total.item() == 1000


# ---------------------------------------------------------------------------------------------
# reductions: barriers + simdgroup collectives
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("group", [32, 256, 1024])
def test_block_reduce(shader, order, group):
    g = torch.Generator().manual_seed(2)
    nblocks = 3
    x = torch.randn(nblocks * group, generator=g)
    sums = shader.tensor(torch.zeros(nblocks))
    maxs = shader.tensor(torch.zeros(nblocks))
    shader.run(
        shader.lib("reduce").block_reduce,
        shader.tensor(x),
        sums,
        maxs,
        group_size=group,
        order=order[0],
        seed=order[1],
    )
    xb = x.view(nblocks, group).double()
    # recursive summation of m terms: |error| <= (m-1) u sum|x| (Higham, eq. 4.4)
    assert ((sums.cpu().double() - xb.sum(1)).abs() <= (group - 1) * U32 * xb.abs().sum(1)).all()
    assert torch.equal(maxs.cpu(), x.view(nblocks, group).max(1).values)


def test_simd_operations(shader, order):
    g = torch.Generator().manual_seed(3)
    n = 96  # three simdgroups
    x = torch.randn(n, generator=g).round(decimals=2) * 4  # few significant bits: the sums below are exact
    x = (x * 64).round() / 64
    out = shader.tensor(torch.zeros(n * 6))
    ballots = shader.tensor(torch.zeros(n // 32, dtype=torch.int64))
    shader.run(
        shader.lib("reduce").simd_ops,
        shader.tensor(x),
        out,
        ballots,
        group_size=64,
        order=order[0],
        seed=order[1],
    )
    o = out.cpu().view(n, 6)
    xs = x.view(-1, 32)
    # multiples of 1/64 with |x| < 2^8 summed 32 at a time stay exact in float32 (< 2^24 ulps)
    assert torch.equal(o[:, 0].view(-1, 32), xs.cumsum(1))
    assert torch.equal(o[:, 1].view(-1, 32), xs.cumsum(1) - xs)
    down = torch.cat([xs[:, 1:], xs[:, -1:]], 1)  # the last lane keeps its own value
    assert torch.equal(o[:, 2].view(-1, 32), down)
    assert torch.equal(o[:, 3].view(-1, 32), xs[:, 5:6].expand(-1, 32))
    xor1 = xs.view(-1, 16, 2).flip(2).reshape(-1, 32)
    assert torch.equal(o[:, 4].view(-1, 32), xor1)
    assert torch.equal(o[:, 5].view(-1, 32), xs.sum(1, keepdim=True).expand(-1, 32))
    bits = (xs > 0).long() << torch.arange(32)
    assert torch.equal(ballots.cpu(), bits.sum(1))


# ---------------------------------------------------------------------------------------------
# LU with partial pivoting in threadgroup memory, vs SciPy
# ---------------------------------------------------------------------------------------------
def _lu16(shader, kernel_name, A, order=("inorder", 0)):
    B, n, _ = A.shape
    A_d = shader.tensor(A.clone())
    ipiv = shader.tensor(torch.zeros(B, n, dtype=torch.int32))
    info = shader.tensor(torch.full((B,), -1, dtype=torch.int32))
    kernel = getattr(shader.lib("lu_small"), kernel_name)
    shader.run(
        kernel, A_d, ipiv, info, n, threads=[16, 16 * B], group_size=[16, 16], order=order[0], seed=order[1]
    )
    return A_d.cpu(), ipiv.cpu(), info.cpu()


def _lu_ratio(A, LU, piv):
    """LAPACK's getrf test ratio ||P A - L U||_1 / (n ||A||_1 u)."""
    n = A.shape[-1]
    L = np.tril(LU, -1) + np.eye(n)
    U = np.triu(LU)
    PA = A.copy()
    for k, p in enumerate(piv):
        PA[[k, p]] = PA[[p, k]]
    return np.abs(PA - L @ U).sum(0).max() / (n * np.abs(A).sum(0).max() * U32)


@pytest.mark.parametrize("n", [16, 9, 1])
def test_lu_matches_scipy(shader, order, n):
    g = torch.Generator().manual_seed(4)
    A = torch.randn(20, n, n, generator=g)
    LU, ipiv, info = _lu16(shader, "lu16", A, order)
    assert (info == 0).all()
    for b in range(A.shape[0]):
        a = A[b].double().numpy()
        lu_ref, piv_ref = scipy.linalg.lu_factor(A[b].numpy())
        # LAPACK test ratio, pass mark 30 (TESTING/ctest.in)
        assert _lu_ratio(a, LU[b].double().numpy(), ipiv[b].numpy()) < 30
        # partial pivoting: |l_ij| <= 1
        assert np.abs(np.tril(LU[b].numpy(), -1)).max(initial=0) <= 1
        # same pivots as LAPACK's sgetrf (random Gaussian matrices: no near-ties at this size)
        assert np.array_equal(ipiv[b].numpy(), piv_ref)


def test_lu_singular_sets_info(shader):
    A = torch.randn(2, 16, 16, generator=torch.Generator().manual_seed(5))
    A[0, :, 3] = 0  # column 3 zero: LAPACK reports info = 4 (first zero pivot, 1-based)
    A[1] = 0  # zero matrix: info = 1
    LU, _, info = _lu16(shader, "lu16", A)
    assert info.tolist() == [4, 1]
    assert torch.isfinite(LU).all()  # no division by the zero pivot


def test_planted_missing_barrier_found_by_reverse_and_shuffle(emu):
    """In order, the planted race is invisible; reverse and shuffled orders expose it."""
    g = torch.Generator().manual_seed(6)
    A = torch.randn(30, 16, 16, generator=g)

    def wrong(order):
        LU, ipiv, _ = _lu16(emu, "lu16_missing_barrier", A, order)
        with np.errstate(invalid="ignore"):  # a race may leave the poison (NaN) in the result
            ratios = [
                _lu_ratio(A[b].double().numpy(), LU[b].double().numpy(), ipiv[b].numpy())
                for b in range(A.shape[0])
            ]
        return sum(not r < 30 for r in ratios)  # NaN counts as wrong

    assert wrong(("inorder", 0)) == 0
    assert wrong(("reverse", 0)) > 0
    assert wrong(("shuffle", 1)) > 0
    assert wrong(("shuffle", 2)) > 0


# ---------------------------------------------------------------------------------------------
# more of the surface: half/bfloat/integer/bool vectors, vector collectives, structs, namespaces
# ---------------------------------------------------------------------------------------------
def test_vector_types(shader):
    x = torch.tensor([[0.3, -1.7, 2.5, 0.9], [1.0, 2.0, 3.0, 4.0], [-0.6, 0.2, -3.3, 1.6]])
    n = x.shape[0]
    out = shader.tensor(torch.zeros(n * 20))
    shader.run(shader.lib("surface2").vectors, out, shader.tensor(x), threads=n, group_size=n)
    o = out.cpu().view(n, 20)
    v = x
    iv = torch.trunc(v * 4)
    expect = torch.stack(
        [
            (v[:, 0].half() * 2).float(),  # doubling a half is exact
            (v[:, 1].half() * 2).float(),
            iv[:, 0],
            iv[:, 3],
            iv[:, 1].abs(),  # & 0xFF of small values
            (torch.where(v > 0, 1.0, -1.0) * torch.tensor([1.0, 2, 4, 8])).sum(1),
            iv[:, 0],  # (x << 1) >> 1 for small x
            iv[:, 3].abs(),
            v[:, 0].clamp(-1, 1),
            v[:, 3].clamp(-1, 1),
            v[:, 1],  # as_type round trip
            torch.tensor([0.5, 1.5, 2.5, 3.5])[torch.arange(n) % 4],
            (v > 0).all(1).float(),
            (v <= 0).any(1).float(),
            v[:, 0].bfloat16().float(),  # round to nearest even, as torch
            torch.full((n,), 0.0),  # placeholder: checked with a bound below
            torch.full((n,), 65504.0),
            v[:, 2].half().float() * 0.5,  # halving a half is exact (no underflow here)
            v[:, 0],  # fmax(x, NaN) = x
            torch.full((n,), -7.0),
        ],
        1,
    )
    cols = [c for c in range(20) if c != 15]
    assert torch.equal(o[:, cols], expect[:, cols])
    # length(v.xy * v.xy) = sqrt(x^4 + y^4): squares, squares, one sum and a sqrt, each rounded:
    # relative error <= 4u to first order
    ref = (v[:, 0].double() ** 4 + v[:, 1].double() ** 4).sqrt()
    assert ((o[:, 15].double() - ref).abs() <= 4 * U32 * ref).all()


def test_vector_collectives(shader, order):
    g = torch.Generator().manual_seed(8)
    x = torch.randn(64, 2, generator=g)
    out = shader.tensor(torch.zeros(64 * 2, 2))
    shader.run(
        shader.lib("surface2").vector_collectives,
        out,
        shader.tensor(x),
        threads=64,
        group_size=64,
        order=order[0],
        seed=order[1],
    )
    o = out.cpu().view(64, 2, 2)
    xs = x.view(2, 32, 2).double()
    sums = xs.sum(1, keepdim=True).expand(-1, 32, -1).reshape(64, 2)
    # recursive summation of 32 terms per component: |error| <= 31 u sum|x|
    bound = 31 * U32 * xs.abs().sum(1, keepdim=True).expand(-1, 32, -1).reshape(64, 2)
    assert ((o[:, 0].double() - sums).abs() <= bound).all()
    rev = x.view(2, 32, 2).flip(1).reshape(64, 2)
    assert torch.equal(o[:, 1, 0], rev[:, 0] + 30)  # simd_max of lane*(+-1) = 30 (lane 30, even)
    assert torch.equal(o[:, 1, 1], rev[:, 1])


def test_struct_parameter(shader):
    import struct

    lib = shader.lib("surface2")
    params = torch.frombuffer(bytearray(struct.pack("<qfI", 5, 0.5, 3)), dtype=torch.uint8).clone()
    out = shader.tensor(torch.full((8,), -1.0))
    shader.run(lib.with_struct, out, shader.tensor(params), threads=8, group_size=8)
    assert out.cpu().tolist() == [3.0, 3.5, 4.0, 4.5, 5.0, -1.0, -1.0, -1.0]


def test_kernel_in_namespace(emu):
    o = torch.zeros(4, dtype=torch.int32)
    emu.lib("surface2").in_namespace(o)
    assert o.tolist() == [0, 3, 6, 9]


def test_struct_parameter_too_small(emu):
    lib = emu.lib("surface2")
    with pytest.raises(ValueError, match=r"kernel 'with_struct': argument 1 holds 8 bytes but .* reads 16"):
        lib.with_struct(torch.zeros(8), torch.zeros(8, dtype=torch.uint8), threads=8)


def test_more_simd_operations(shader, order):
    out = shader.tensor(torch.zeros(64 * 12, dtype=torch.int32))
    shader.run(shader.lib("reduce").simd_more, out, threads=64, group_size=64, order=order[0], seed=order[1])
    o = out.cpu().view(2, 32, 12)
    lane = torch.arange(32)
    v = lane + 1
    xor = 0
    for k in range(1, 33):
        xor ^= k
    for s in range(2):
        assert (o[s, :, 0] == 0x100).all()
        assert (o[s, :, 1] == (1 << 31) - 1).all()
        assert (o[s, :, 2] == xor).all()
        assert (o[s, :, 3] == -8).all()
        assert (o[s, :, 4] == 24).all()
        assert torch.equal(o[s, :, 5], 2 ** torch.clamp(lane + 1, max=5).int())
        assert (o[s, :, 6] == 1).all() and (o[s, :, 7] == 0).all()
        assert torch.equal(o[s, :, 8], torch.where(lane >= 2, v - 2, v).int())
        assert torch.equal(o[s, :, 9], ((lane + 3) % 32 + 1).int())
        assert torch.equal(o[s, :, 10], ((lane - 1) % 32 + 1).int())
        assert torch.equal(o[s, :, 11], (lane == 0).int())


def test_extra_functions(shader):
    o = shader.tensor(torch.zeros(8))
    shader.run(shader.lib("surface2").extras, o, threads=1, group_size=1)
    # all exactly representable results
    assert o.cpu().tolist() == [0.75, 5.0, 2.0, 1.0, 2.0, 1.0, 1.0, 127.0]
