"""Apple's SIMD-group matrices (``<metal_simdgroup_matrix>``) in the emulator.

8x8 and 32x32 products from device and threadgroup memory (``elements_per_row`` != 8,
``matrix_origin`` offsets, ``transpose_matrix``) against float64 products, in every thread order;
the lane layout through ``thread_elements()``; and the misuses a Mac would hit: a load reached by
only some lanes, per-lane arguments, a partial simdgroup, a missing barrier before a load from
threadgroup memory, a load past the end of a buffer, an uninitialised matrix. Kernels:
``kernels/simdgroup_matrix.metal``. Tests taking ``shader`` also run on a Mac (``mps``) and, through
``test_cuda_suite.py``, on the cuda target.

Error bound. An 8x8 product with accumulation computes each element as the sum of 8 products
and c; whatever order the hardware sums in, each term of the exact result passes through at most
k = 9 roundings (one product, at most eight additions; k = 8 without c), so (Higham, Accuracy and
Stability, 3.1) |D - D_exact| <= gamma_k (|A||B| + |C|) elementwise, gamma_k = k u / (1 - k u),
u = 2^-24 for float32. A product over K = 32 in four chained multiply-accumulates adds one
rounding per later block: k = 8 + K / 8 = 12. For half operands the emulator sums in float and
rounds once; the bound with u = 2^-11 (half; 2^-8 for bfloat) covers that and any order summed in
the narrow type.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mpslinalg import emulator
from mpslinalg.emulator import KernelFault, ShaderCompileError

U = {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
_TAG = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def gamma(k: int, u: float) -> float:
    return k * u / (1 - k * u)


def operand(batch, ld, ox, oy, tr, dtype, gen):
    """A batch of matrices of ld columns in memory and the 8x8 operand each holds at (ox, oy)."""
    rows = oy + 8 + 2
    mem = torch.randn(batch, rows, ld, generator=gen).to(dtype)
    block = mem[:, oy : oy + 8, ox : ox + 8]
    logical = block.transpose(1, 2) if tr else block
    return mem, logical.double(), [ld, ox, oy, int(tr), rows * ld]


# (A, B, C): (elements_per_row, origin.x, origin.y, transpose_matrix)
GEMM8_CASES = [
    ((8, 0, 0, False), (8, 0, 0, False), (8, 0, 0, False)),  # the spec's example: all defaults
    ((11, 2, 1, False), (13, 5, 3, True), (9, 1, 2, False)),
    ((8, 0, 0, True), (17, 9, 0, False), (10, 2, 0, True)),
]


@pytest.mark.parametrize("dtype", list(_TAG), ids=list(_TAG.values()))
@pytest.mark.parametrize("accumulate", [1, 0], ids=["mac", "mul"])
@pytest.mark.parametrize("case", GEMM8_CASES, ids=["defaults", "strided", "transposed"])
def test_sgm_gemm8(shader, order, case, accumulate, dtype):
    gen = torch.Generator().manual_seed(hash(case) % 1000 + accumulate)
    batch = 5
    (amem, a, da), (bmem, b, db), (cmem, c, dc) = (operand(batch, *d, dtype, gen) for d in case)
    args = [shader.tensor(t) for t in (amem, bmem, cmem)]
    kernel = getattr(shader.lib("simdgroup_matrix"), f"gemm8_{_TAG[dtype]}")
    shader.run(kernel, *args, da + db + dc, accumulate, threads=32 * batch, group_size=32,
               order=order[0], seed=order[1])
    out = args[2].cpu()
    ld, ox, oy, tr, _ = dc
    block = out[:, oy : oy + 8, ox : ox + 8]
    got = (block.transpose(1, 2) if tr else block).double()
    exact = a @ b + (c if accumulate else 0)
    bound = gamma(8 + accumulate, U[dtype]) * (a.abs() @ b.abs() + (c.abs() if accumulate else 0))
    assert ((got - exact).abs() <= bound).all(), float(((got - exact).abs() / bound).max())
    # nothing outside the 8x8 block was written
    untouched = torch.ones_like(out, dtype=torch.bool)
    untouched[:, oy : oy + 8, ox : ox + 8] = False
    assert torch.equal(out[untouched], cmem[untouched])


def _gemm32_inputs(batch, lda, ldb, ldc, b_transposed, gen):
    a = torch.randn(batch, 32, lda, generator=gen)
    b = torch.randn(batch, 32, ldb, generator=gen)
    c = torch.randn(batch, 32, ldc, generator=gen)
    bl = b[:, :, :32].transpose(1, 2) if b_transposed else b[:, :, :32]
    exact = a[:, :, :32].double() @ bl.double() + c[:, :, :32].double()
    bound = gamma(8 + 32 // 8, U[torch.float32]) * (
        a[:, :, :32].double().abs() @ bl.double().abs() + c[:, :, :32].double().abs()
    )
    return a, b, c, exact, bound


def _gemm32_run(shader, order, kernel, a, b, c, p, exact, bound):
    """Launch the 32x32 gemm ``kernel`` of simdgroup_matrix (128 threads a matrix) on ``a, b, c``
    with parameters ``p``; its result (``c``'s first 32 columns) must be within ``bound`` of
    ``exact`` elementwise, and ``c``'s padding columns beyond 32 unchanged."""
    args = [shader.tensor(t) for t in (a, b, c)]
    shader.run(getattr(shader.lib("simdgroup_matrix"), kernel), *args, p, threads=128 * a.shape[0], group_size=128,
               order=order[0], seed=order[1])
    out = args[2].cpu()
    err = (out[:, :, :32].double() - exact).abs()
    assert (err <= bound).all(), float((err / bound).max())
    assert torch.equal(out[:, :, 32:], c[:, :, 32:])  # the padding columns stay


@pytest.mark.parametrize("b_transposed", [0, 1], ids=["B", "Bt"])
def test_sgm_gemm32_threadgroup_memory(shader, order, b_transposed):
    gen = torch.Generator().manual_seed(7 + b_transposed)
    batch, lda, ldb, ldc = 3, 40, 35, 33
    a, b, c, exact, bound = _gemm32_inputs(batch, lda, ldb, ldc, b_transposed, gen)
    p = [lda, ldb, ldc, b_transposed, 1, 32 * lda, 32 * ldb, 32 * ldc]
    _gemm32_run(shader, order, "gemm32_tg", a, b, c, p, exact, bound)


def test_sgm_gemm32_scalar_baseline(shader, order):
    """The benchmark's baseline without simdgroup_matrix computes the same product: sums of 32
    products in k order, then + c (k = 33 roundings at most)."""
    gen = torch.Generator().manual_seed(13)
    batch, lda, ldb, ldc = 2, 40, 35, 33
    a, b, c, exact, _ = _gemm32_inputs(batch, lda, ldb, ldc, 0, gen)
    bound = gamma(33, U[torch.float32]) * (a[:, :, :32].double().abs() @ b[:, :, :32].double().abs()
                                           + c[:, :, :32].double().abs())
    p = [lda, ldb, ldc, 0, 1, 32 * lda, 32 * ldb, 32 * ldc]
    _gemm32_run(shader, order, "gemm32_scalar", a, b, c, p, exact, bound)


def test_sgm_gemm32_device_memory(shader, order):
    gen = torch.Generator().manual_seed(11)
    batch, lda, ldb, ldc = 2, 37, 41, 34
    a, b, c, exact, bound = _gemm32_inputs(batch, lda, ldb, ldc, 0, gen)
    p = [lda, ldb, ldc, 32 * lda, 32 * ldb, 32 * ldc]
    _gemm32_run(shader, order, "gemm32_dev", a, b, c, p, exact, bound)


def test_sgm_layout_and_construction(shader, order):
    """thread_elements() follows Apple's layout as MLX uses it: lane l holds row
    4 (l >> 4 & 1) + (l >> 1 & 3), columns 4 (l >> 3 & 1) + 2 (l & 1) and the next."""
    m = torch.arange(64, dtype=torch.float32).reshape(8, 8)
    args = [shader.tensor(t) for t in (m, torch.zeros(32, 6), torch.zeros(8, 8))]
    shader.run(shader.lib("simdgroup_matrix").layout, *args, threads=32, group_size=32,
               order=order[0], seed=order[1])
    out, mat = args[1].cpu(), args[2].cpu()
    for lane in range(32):
        r = 4 * (lane >> 4 & 1) + (lane >> 1 & 3)
        c = 4 * (lane >> 3 & 1) + 2 * (lane & 1)
        assert out[lane, 0:2].tolist() == [8 * r + c, 8 * r + c + 1]
        assert out[lane, 2:4].tolist() == [3.0 * (r == c), 3.0 * (r == c + 1)]  # diagonal 3
        assert out[lane, 4:6].tolist() == [5.0, 5.0]
    assert torch.equal(mat, 100 + m)


def test_sgm_uninitialised_matrix_is_nan(emu, order):
    """A product with a matrix never loaded nor filled reads the emulator's poison (NaN); on a
    Mac it is whatever the registers held."""
    out = torch.zeros(8, 8)
    emu.run(emu.lib("simdgroup_matrix").uninit, torch.randn(8, 8), out, threads=32, group_size=32,
            order=order[0], seed=order[1])
    assert out.isnan().all()


def test_sgm_missing_barrier_is_exposed(emu):
    """The 32x32 kernel without its barrier between staging and the loads from threadgroup
    memory: a load reads, when its lane reaches it, elements that other simdgroups have not
    stored yet (NaN poison) in the reversed and shuffled orders; with the barrier it is exact to
    the bound in the same orders (test_sgm_gemm32_threadgroup_memory)."""
    gen = torch.Generator().manual_seed(3)
    a, b, c, exact, _ = _gemm32_inputs(1, 32, 32, 32, 0, gen)
    for order, seed in (("reverse", 0), ("shuffle", 1), ("shuffle", 2)):
        out = c.clone()
        p = [32, 32, 32, 0, 0, 0, 0, 0]
        emu.run(emu.lib("simdgroup_matrix").gemm32_tg, a, b, out, p, threads=128, group_size=128,
                order=order, seed=seed)
        assert out.isnan().any(), order


def _kloop(run, K, barriers, order, seed):
    gen = torch.Generator().manual_seed(K)
    a, b, c = torch.randn(32, K, generator=gen), torch.randn(K, 32, generator=gen), torch.randn(32, 32, generator=gen)
    exact = a.double() @ b.double() + c.double()
    bound = gamma(8 + K // 8, U[torch.float32]) * (a.double().abs() @ b.double().abs() + c.double().abs())
    out = run(a, b, c, [K, *barriers], order, seed)
    return ((out.double() - exact).abs() <= bound).all()


def test_sgm_tiled_loop(shader, order):
    """A tiled k loop through one pair of threadgroup tiles, both barriers in place: exact to
    gamma_(8 + K/8) in every order."""

    def run(a, b, c, p, o, seed):
        args = [shader.tensor(t) for t in (a, b, c)]
        shader.run(shader.lib("simdgroup_matrix").gemm_kloop, *args, p, threads=128, group_size=128,
                   order=o, seed=seed)
        return args[2].cpu()

    assert _kloop(run, 64, (1, 1), *order)


@pytest.mark.parametrize("barriers", [(0, 1), (1, 0)], ids=["no-barrier-after-staging", "no-barrier-before-restaging"])
def test_sgm_tiled_loop_missing_barrier_is_exposed(emu, barriers):
    """Either barrier of the tiled loop left out: a load reads a tile before the other simdgroups
    staged it, or a simdgroup that races ahead (a matrix operation's release restarts the order)
    restages the tiles while the others still read them; the reversed and shuffled orders give
    wrong results (NaN or a wrong tile)."""

    def run(a, b, c, p, o, seed):
        out = c.clone()
        emu.run(emu.lib("simdgroup_matrix").gemm_kloop, a, b, out, p, threads=128, group_size=128, order=o, seed=seed)
        return out

    for order, seed in (("reverse", 0), ("shuffle", 1), ("shuffle", 2)):
        assert not _kloop(run, 64, barriers, order, seed), order


_MISUSES = [
    ("partial_load", 32, r"lanes of simdgroup 0 reached different simdgroup operations: simdgroup_(load|store)"),
    ("lane_pointer", 32, r"lanes \d+ and \d+ of simdgroup 0 passed different arguments to simdgroup_load"),
    ("small_group", 16, r"simdgroup_load .* in simdgroup 0 of only 16 threads: simdgroup_matrix operations need"),
]


@pytest.mark.parametrize("kernel, group, message", _MISUSES, ids=[k for k, _, _ in _MISUSES])
def test_sgm_misuse_is_a_kernel_fault(emu, order, kernel, group, message, still_works):
    with pytest.raises(emulator.EmulatorError, match=message) as info:
        emu.run(getattr(emu.lib("simdgroup_matrix"), kernel), torch.zeros(128), threads=group,
                group_size=group, order=order[0], seed=order[1])
    assert isinstance(info.value, KernelFault) and info.value.kernel == kernel
    still_works()


def test_sgm_partial_edge_threadgroup(emu, still_works):
    """dispatchThreads makes the last threadgroup smaller: 40 threads in groups of 32 leave a
    simdgroup of 8 threads in the second group."""
    lib = emu.lib("simdgroup_matrix")
    with pytest.raises(KernelFault, match=r"simdgroup 0 of only 8 threads") as info:
        lib.small_group(torch.zeros(64), threads=40, group_size=32)
    assert info.value.group == (1, 0, 0)
    lib.small_group(torch.zeros(64), threads=64, group_size=32)  # full simdgroups: fine
    still_works()


def test_sgm_load_past_the_end(emu, still_works):
    lib = emu.lib("simdgroup_matrix")
    x = torch.randn(8, 8)
    y = torch.zeros(8, 8)
    lib.load_rows(x, y, 0, threads=32, group_size=32, guard=True)
    assert torch.equal(y, x)
    with pytest.raises(KernelFault, match="past the end of argument 0"):
        lib.load_rows(x, y, 1, threads=32, group_size=32, guard=True)  # row 8 of an 8-row buffer
    still_works()


# ---------------------------------------------------------------------------------------------
# the lint and the compile-time checks
# ---------------------------------------------------------------------------------------------
_BODY = """
kernel void k(device float *x [[buffer(0)]]) {
  simdgroup_float8x8 m = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
  simdgroup_store(m, x);
}
"""


@pytest.mark.parametrize(
    "includes, ok",
    [
        ("#include <metal_stdlib>\n#include <metal_simdgroup_matrix>\nusing namespace metal;\n", True),
        ("#include <metal_simdgroup_matrix>\nusing namespace metal;\n", True),
        ("#include <metal_stdlib>\nusing namespace metal;\n", True),  # Apple's metal_stdlib includes it
        ("using namespace metal;\n", False),
    ],
    ids=["both", "matrix-header", "stdlib", "none"],
)
def test_sgm_lint_needs_the_header(includes, ok):
    problems = emulator.lint.lint_source(includes + _BODY)
    if ok:
        assert problems == []
    else:
        assert {p.rule for p in problems} == {"unsupported"}
        assert {p.line for p in problems} == {4, 5}  # the type, the filled matrix and the store
        assert "<metal_simdgroup_matrix>" in problems[0].message


@pytest.mark.parametrize(
    "body, message",
    [
        ("simdgroup_float8x8 a(1.0f), b(2.0f);\n  simdgroup_float8x8 d = a * b;\n  simdgroup_store(d, x);",
         "operator\\* is not emulated: write simdgroup_multiply"),
        ("simdgroup_matrix<float, 4, 4> m;\n  (void)m;", "only 8x8"),
        ("simdgroup_matrix<int, 8, 8> m;\n  (void)m;", "float, half or bfloat"),
    ],
    ids=["operator*", "4x4", "int"],
)
def test_sgm_unsupported_forms_fail_to_compile(emu, body, message):
    src = (
        "#include <metal_stdlib>\nusing namespace metal;\n"
        f"kernel void k(device float *x [[buffer(0)]]) {{\n  {body}\n}}\n"
    )
    with pytest.raises(ShaderCompileError, match=message):
        emulator.compile_shader(src)


def test_sgm_tsan_finds_the_missing_barrier(emu):
    """ThreadSanitizer (tsan=True) sees a matrix load as the lanes' reads and the collectives as
    synchronisation: the staging stores race with the simdgroup_load calls (reported at their
    .metal lines, not inside the shim) exactly when the barrier is left out."""
    from mpslinalg.emulator import KernelRace
    from mpslinalg.emulator._tsan import tsan_available

    if not tsan_available():
        pytest.skip("clang's ThreadSanitizer runtime (libclang_rt.tsan-x86_64.so) is not installed")
    lib = emu.lib("simdgroup_matrix")
    a, b, c, exact, bound = _gemm32_inputs(1, 32, 32, 32, 0, torch.Generator().manual_seed(5))
    out = c.clone()
    lib.gemm32_tg(a, b, out, [32, 32, 32, 0, 1, 0, 0, 0], threads=128, group_size=128, tsan=True)
    assert ((out.double() - exact).abs() <= bound).all()
    with pytest.raises(KernelRace) as info:
        lib.gemm32_tg(a, b, c.clone(), [32, 32, 32, 0, 0, 0, 0, 0], threads=128, group_size=128, tsan=True)
    src = (Path(__file__).resolve().parent / "kernels" / "simdgroup_matrix.metal").read_text().splitlines()
    first = next(i for i, t in enumerate(src) if "kernel void gemm32_tg" in t)
    last = next(i for i, t in enumerate(src) if "kernel void gemm_kloop" in t)
    kernel = range(first + 1, last + 1)  # 1-based line numbers of gemm32_tg
    staging = {i for i in kernel if "TPAD + k] = " in src[i - 1]}
    loads = {i for i in kernel if "simdgroup_load(x, sA" in src[i - 1] or "simdgroup_load(y, sB" in src[i - 1]}
    assert len(staging) == 2 and len(loads) == 3
    for r in info.value.races:
        kinds = {x.split()[0]: int(x.split(":")[1]) for x in (r.first, r.second)}  # "write at shader.metal:58:22"
        assert kinds["write"] in staging and kinds["read"] in loads, r
