"""The emulator sees the kernels as Apple's compiler and PyTorch's binding do (issue 17):
MSL is C++14 (newer syntax is an error), the fast-math mode of ``PYTORCH_MPS_FAST_MATH``, binding
of conj/neg-bit views as PyTorch does (raw storage, with a warning), and ``threads=0`` as
PyTorch dispatches it. Kernels: ``kernels/fastmath.metal``, ``kernels/binding.metal``."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from mpslinalg import emulator
from mpslinalg.emulator import BindingError, BindingWarning, ShaderCompileError

KERNELS = Path(__file__).resolve().parent / "kernels"

HEAD = "#include <metal_stdlib>\nusing namespace metal;\n"


# ---------------------------------------------------------------------------------------------
# C++14
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "what"),
    [
        ("if constexpr (sizeof(float) == 4) { x[i] = 1; }", "if constexpr"),
        ("float2 v = float2(1, 2); auto [a, b] = v; x[i] = a;", "auto [a, b]"),
    ],
)
def test_cxx17_syntax_is_a_compile_error(emu, body, what):
    # The meaning, not one compiler's words: an error that says C++17, with the construct in the
    # quoted source line (clang 19: "decomposition declarations are a C++17 extension", ziglang's
    # clang 22: "structured binding declarations are ...").
    src = HEAD + f"kernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {{ {body} }}\n"
    with pytest.raises(ShaderCompileError, match=r"error: [^\n]*C\+\+17") as exc:
        emulator.compile_shader(src)
    assert what in str(exc.value)


def test_cxx14_source_compiles(emu):
    # C++14 features MSL has: generic lambdas, relaxed constexpr, digit separators
    src = HEAD + (
        "constexpr int tri(int n) { int s = 0; for (int k = 1; k <= n; ++k) s += k; return s; }\n"
        "kernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
        "  auto twice = [](auto v) { return v + v; };\n  x[i] = twice(float(tri(4))) + 1'000.0f; }\n"
    )
    x = torch.zeros(2)
    emulator.compile_shader(src).k(x)
    assert x.tolist() == [1020.0, 1020.0]


# ---------------------------------------------------------------------------------------------
# fast math
# ---------------------------------------------------------------------------------------------
def _fast_lib(fast: bool):
    return emulator.compile_shader((KERNELS / "fastmath.metal").read_text(), fast_math=fast)


def test_fast_math_is_a_different_build(emu):
    safe, fast = _fast_lib(False), _fast_lib(True)
    assert safe._key != fast._key and fast._fast_math and not safe._fast_math


def test_safe_math_keeps_nan_checks_compensation_and_denormals(emu):
    lib = _fast_lib(False)
    x = torch.tensor([1.0, math.nan, math.inf, -math.inf])
    out = torch.zeros(4, dtype=torch.int32)
    lib.nonfinite(x, out)
    assert out.tolist() == [0, 1, 1, 1]
    a, b = torch.tensor([1.0]), torch.tensor([2.0**-30])
    err = torch.zeros(1)
    lib.two_sum_error(a, b, err)
    assert err.item() == 2.0**-30  # exactly what 1 + 2^-30 lost in float32
    y = torch.zeros(1)
    lib.scale_by(torch.tensor([2e-38]), 0.25, y)
    assert y.item() == torch.tensor(2e-38 * 0.25, dtype=torch.float32).item() > 0  # subnormal kept


def test_fast_math_shows_what_depends_on_safe_math(emu):
    # the same kernels compiled as PYTORCH_MPS_FAST_MATH=1 compiles them: the NaN test folds
    # away, the compensation term vanishes, the subnormal flushes to zero
    lib = _fast_lib(True)
    out = torch.zeros(2, dtype=torch.int32)
    lib.nonfinite(torch.tensor([math.nan, math.inf]), out)
    assert out.tolist() == [0, 0]
    err = torch.ones(1)
    lib.two_sum_error(torch.tensor([1.0]), torch.tensor([2.0**-30]), err)
    assert err.item() == 0.0
    y = torch.ones(1)
    lib.scale_by(torch.tensor([2e-38]), 0.25, y)
    assert y.item() == 0.0
    # the launch restored the thread's floating-point mode: subnormals survive in Python again
    assert (torch.tensor([2e-38]) * 0.25).item() > 0


def test_fast_math_follows_the_environment_as_torch_reads_it(emu, monkeypatch):
    src = (KERNELS / "fastmath.metal").read_text()
    for value, fast in [("1", True), ("yes", True), ("0", False)]:
        monkeypatch.setenv("PYTORCH_MPS_FAST_MATH", value)
        assert emulator.compile_shader(src)._fast_math is fast, value
    monkeypatch.delenv("PYTORCH_MPS_FAST_MATH")
    assert emulator.compile_shader(src)._fast_math is False
    with pytest.raises(TypeError, match="fast_math must be a bool"):
        emulator.compile_shader(src, fast_math="1")


# ---------------------------------------------------------------------------------------------
# binding as PyTorch binds: storage at the storage offset, bits ignored
# ---------------------------------------------------------------------------------------------
def test_neg_bit_view_binds_its_raw_storage_with_a_warning(emu):
    lib = emu.lib("binding")
    x = torch.arange(1.0, 9.0)
    v = torch._neg_view(x)
    assert v.is_neg() and v[0].item() == -1.0
    out = torch.zeros(2)
    with pytest.warns(BindingWarning, match=r"kernel 'sum4': argument 0 has the negative bit set"):
        lib.sum4(v, out, threads=2, group_size=2)
    assert out.tolist() == [10.0, 26.0]  # what a Mac computes: the storage, not -x


def test_conj_bit_view_binds_its_raw_storage_with_a_warning(emu):
    lib = emu.lib("binding")
    z = torch.tensor([1 + 2j, 3 - 1j, 0.5 + 4j, -2 - 2j], dtype=torch.complex64)
    out = torch.zeros(2)
    with pytest.warns(BindingWarning, match="argument 0 has the conjugate bit set"):
        lib.sum4(z.conj(), out, threads=2, group_size=2)  # float4 = two complex64 elements
    assert out.tolist() == [1 + 2 + 3 - 1, 0.5 + 4 - 2 - 2]  # the stored imaginary parts, unconjugated


def test_storage_offset_is_honoured_and_strides_ignored(emu):
    lib = emu.lib("binding")
    base = torch.zeros(10)
    view = base[3:].view(7)[::2]  # offset 3, stride 2: Metal sees base[3:]
    lib.fill(view, 5.0, threads=4, group_size=4)
    assert base.tolist() == [0, 0, 0, 5, 5, 5, 5, 0, 0, 0]


# ---------------------------------------------------------------------------------------------
# threads=0: as torch.mps dispatches it
# ---------------------------------------------------------------------------------------------
def test_zero_threads_checks_like_torch_and_runs_nothing(emu):
    lib = emu.lib("binding")
    x = torch.ones(4)
    # torch: group_size defaults to min(threads, max) = 0, within the limit: an empty dispatch
    lib.fill(x, 2.0, threads=0)
    lib.fill(x, 2.0, threads=[0, 3], group_size=[4, 1])
    lib.fill(torch.zeros(0), 2.0)  # threads from numel 0
    assert x.tolist() == [1.0] * 4
    # every check torch makes before dispatching still applies
    with pytest.raises(BindingError, match="Threadgroup size .* exceeds 1024 limit"):
        lib.fill(x, 2.0, threads=0, group_size=2048)
    with pytest.raises(TypeError, match=r"argument 1 is a Python int .*expects float"):
        lib.fill(x, 2, threads=0)
    with pytest.raises(BindingError, match="same number of dimensions"):
        lib.fill(x, 2.0, threads=[0, 1], group_size=[1])


# ---------------------------------------------------------------------------------------------
# address spaces: device / constant / threadgroup / thread do not mix
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        "thread float* p = x; p[i] = 1;",  # device -> thread
        "threadgroup float t[4]; device float* q = t; q[0] = x[i];",  # threadgroup -> device
        "float loc[2] = {1, 2}; take_device(loc); x[i] = loc[0];",  # thread -> device
    ],
)
def test_address_space_mistakes_are_compile_errors(emu, body):
    src = HEAD + (
        "inline void take_device(device float* p) { p[0] = 0; }\n"
        f"kernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {{ {body} }}\n"
    )
    with pytest.raises(ShaderCompileError, match=r"shader\.metal:\d+:\d+: error: "):
        emulator.compile_shader(src)
