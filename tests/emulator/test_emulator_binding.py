"""Argument binding: torch.mps.compile_shader's rules, and the mistakes Metal would silently accept
raised as errors naming the kernel and the argument (kernels: ``kernels/binding.metal``)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def lib(emu):
    return emu.lib("binding")


# ---------------------------------------------------------------------------------------------
# the rules (also checked on real Metal through the `shader` fixture)
# ---------------------------------------------------------------------------------------------
def test_scalars_and_default_threads(shader):
    lib = shader.lib("binding")
    out = shader.tensor(torch.zeros(7))
    shader.run(lib.fill, out, 2.5)  # threads default to numel of the first tensor
    assert torch.equal(out.cpu(), torch.full((7,), 2.5))
    o = shader.tensor(torch.zeros(5, dtype=torch.int64))
    shader.run(lib.iota_long, o, 2**40)  # a Python int is an 8-byte long
    assert o.cpu().tolist() == [2**40 + k for k in range(5)]


def test_storage_offset_honoured_strides_ignored(shader):
    lib = shader.lib("binding")
    base = shader.tensor(torch.zeros(10))
    shader.run(lib.fill, base[4:], 1.0, threads=3)  # binds the storage at element 4
    assert base.cpu().tolist() == [0, 0, 0, 0, 1, 1, 1, 0, 0, 0]
    m = shader.tensor(torch.zeros(3, 4))
    col = m[:, 1]  # strided view: Metal binds storage from element 1 and ignores the stride
    shader.run(lib.fill, col, 5.0, threads=3)
    assert m.cpu().flatten().tolist() == [0, 5, 5, 5] + [0] * 8


def test_arg_casts(shader):
    lib = shader.lib("binding")
    x = shader.tensor(torch.arange(4, dtype=torch.int32))
    shader.run(lib.add_int, x, 10, arg_casts={1: "int32"})
    assert x.cpu().tolist() == [10, 11, 12, 13]
    h = shader.tensor(torch.tensor([1.0, 2.0, -3.0], dtype=torch.float16))
    shader.run(lib.half_scale, h, 0.5, arg_casts="fp16")
    assert h.cpu().tolist() == [0.5, 1.0, -1.5]


def test_lists_and_vector_loads(shader):
    lib = shader.lib("binding")
    out = shader.tensor(torch.zeros(3))
    shader.run(lib.weighted, out, [1, 2, 3], [0.25, 0.5])
    assert out.cpu().tolist() == [123.75] * 3
    x = shader.tensor(torch.arange(12.0))
    s = shader.tensor(torch.zeros(3))
    shader.run(lib.sum4, x, s, threads=3)  # float32 tensor bound to `device const float4*`
    assert s.cpu().tolist() == [6.0, 22.0, 38.0]


def test_buffer_indices_not_positions(shader):
    lib = shader.lib("binding")
    a = shader.tensor(torch.arange(4.0))
    b = shader.tensor(torch.zeros(4))
    shader.run(lib.swapped, a, b)  # argument 0 -> buffer(0) = `a` although it is declared second
    assert b.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]


def test_complex64_binds_float2(emu):
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    prod = torch.zeros(2, dtype=torch.complex64)
    conj = torch.zeros(2, dtype=torch.complex64)
    abs1 = torch.zeros(2)
    emu.lib("basics").complex_ops(z, z, prod, conj, abs1)
    assert prod.tolist() == [(1 + 2j) ** 2, (3 - 4j) ** 2] and abs1.tolist() == [3.0, 7.0]


# ---------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------
def test_wrong_argument_count(lib):
    with pytest.raises(TypeError, match=r"kernel 'fill' takes 2 arguments .* got 1"):
        lib.fill(torch.zeros(3))
    with pytest.raises(TypeError, match=r"kernel 'fill' takes 2 arguments .* got 3"):
        lib.fill(torch.zeros(3), 1.0, 2.0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.float16, torch.int64])
def test_tensor_dtype_must_match_pointer(lib, dtype):
    with pytest.raises(TypeError, match=rf"kernel 'fill': argument 0 is a {dtype} tensor .*expects float"):
        lib.fill(torch.zeros(3, dtype=dtype), 1.0)


def test_python_int_for_float_and_float_for_long(lib):
    with pytest.raises(TypeError, match=r"kernel 'fill': argument 1 is a Python int .*expects float"):
        lib.fill(torch.zeros(3), 1)
    with pytest.raises(TypeError, match=r"kernel 'iota_long': argument 1 is a Python float .*expects long"):
        lib.iota_long(torch.zeros(3, dtype=torch.int64), 1.0)


def test_python_int_for_int_reference_needs_cast(lib):
    # an 8-byte long read as a 4-byte int works by accident on little-endian; make it explicit
    with pytest.raises(TypeError, match=r"argument 1 .*arg_casts=\{1: 'int32'\}"):
        lib.add_int(torch.zeros(3, dtype=torch.int32), 1)


def test_bad_arguments(lib):
    with pytest.raises(ValueError, match="argument 0 is on meta"):
        lib.fill(torch.zeros(3, device="meta"), 1.0)
    with pytest.raises(TypeError, match="Unsupported argument type"):
        lib.fill(torch.zeros(3), "1.0")
    with pytest.raises(ValueError, match="Empty list"):
        lib.weighted(torch.zeros(3), [], [1.0])
    with pytest.raises(ValueError, match="kernel 'iota_long': argument 1 does not fit"):
        lib.iota_long(torch.zeros(3, dtype=torch.int64), 2**64)
    with pytest.raises(ValueError, match="unsupported cast instruction 'fp8'"):
        lib.fill(torch.zeros(3), 1.0, arg_casts="fp8")


def test_threads_and_group_size_checks(lib):
    x = torch.zeros(8)
    with pytest.raises(ValueError, match="exceeds 1024"):
        lib.fill(x, 1.0, threads=2048, group_size=2048)
    with pytest.raises(ValueError, match="same number of dimensions"):
        lib.fill(x, 1.0, threads=[4, 2], group_size=[4])
    with pytest.raises(ValueError, match="1-3 ints"):
        lib.fill(x, 1.0, threads=[1, 1, 1, 1])
    with pytest.raises(ValueError, match="Number of threads is undefined"):
        lib.fill([1.0, 2.0], 1.0)  # no tensor argument to take numel from
    with pytest.raises(ValueError, match="order must be"):
        lib.fill(x, 1.0, order="random")


def test_inputs_not_resized_or_replaced(lib):
    x = torch.zeros(8)
    ptr = x.data_ptr()
    lib.fill(x, 3.0, threads=4, group_size=2)
    assert x.data_ptr() == ptr and x.tolist() == [3.0] * 4 + [0.0] * 4


def test_library_object(lib):
    assert "fill" in dir(lib)
    with pytest.raises(AttributeError, match="no kernel named 'nope'.*fill"):
        lib.nope  # noqa: B018


def test_unknown_target_and_source_type(emu):
    from mpslinalg import emulator

    with pytest.raises(ValueError, match="unknown target 'gpu'"):
        emulator.compile_shader("kernel void k() {}", target="gpu")
    with pytest.raises(TypeError, match="source must be a str"):
        emulator.compile_shader(b"kernel void k() {}")


def test_barriers_at_different_sites(lib):
    from mpslinalg.emulator import KernelFault

    with pytest.raises(
        KernelFault, match=r"different threadgroup_barrier calls \(line \d+ col \d+ and line \d+"
    ):
        lib.split_barriers(torch.zeros(4), threads=4, group_size=4)


def test_kernel_properties(emu):
    k = emu.lib("lu_small").lu16
    assert k.max_threads_per_threadgroup == 1024 and k.thread_execution_width == 32
    A = torch.randn(1, 16, 16)
    k(
        A,
        torch.zeros(1, 16, dtype=torch.int32),
        torch.zeros(1, dtype=torch.int32),
        16,
        threads=[16, 16],
        group_size=[16, 16],
    )
    # float a[16][16] (1024 bytes) + uint piv_s (4 bytes)
    assert k.static_thread_group_memory_length == 16 * 16 * 4 + 4


def test_any_kernel_name_is_callable(emu):
    # issue 14.15: the library's own data must not shadow kernels named like it
    names = ["source", "target", "key", "device_type", "name", "kernels"]
    src = "#include <metal_stdlib>\nusing namespace metal;\n" + "".join(
        f"kernel void {n}(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) "
        f"{{ x[i] = {k}.0f; }}\n"
        for k, n in enumerate(names)
    )
    from mpslinalg import emulator

    lib = emulator.compile_shader(src)
    assert set(names) <= set(dir(lib))
    for k, n in enumerate(names):
        x = torch.zeros(3)
        getattr(lib, n)(x)
        assert x.tolist() == [float(k)] * 3, n
