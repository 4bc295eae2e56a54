"""Faults inside a kernel become a KernelFault naming kernel, threadgroup and thread, and the
interpreter survives (kernels: ``kernels/faults.metal``). Emulator only: on a GPU these hang,
corrupt memory or silently give garbage."""

from __future__ import annotations

import pytest
import torch

from mpslinalg.emulator import KernelFault


@pytest.fixture
def lib(emu):
    return emu.lib("faults")


def test_out_of_bounds_thread_array(emu, lib, order, still_works):
    # thread i reads loc[i + 1] of a float[4]: only thread 3 is out of bounds
    with pytest.raises(
        KernelFault,
        match=r"kernel 'oob_local' faulted in threadgroup \(0, 0, 0\), thread \(3, 0, 0\).*"
        r"out-of-bounds",
    ) as ei:
        lib.oob_local(torch.zeros(4), 1, threads=4, group_size=4, order=order[0], seed=order[1])
    assert ei.value.kernel == "oob_local" and ei.value.thread == (3, 0, 0)
    still_works()


def test_out_of_bounds_threadgroup_array(emu, lib, order, still_works):
    with pytest.raises(KernelFault, match=r"'oob_threadgroup' faulted .*thread \((8|9|1[0-5]), 0, 0\).*out-of-bounds"):
        lib.oob_threadgroup(torch.zeros(16), threads=16, group_size=16, order=order[0], seed=order[1])
    still_works()


def test_segfault_becomes_kernel_fault(emu, lib, still_works):
    with pytest.raises(
        KernelFault,
        match=r"'wild_write' faulted in threadgroup \(0, 0, 0\), thread \(3, 0, 0\).*"
        r"invalid memory access",
    ):
        lib.wild_write(torch.zeros(8), 1 << 40, threads=8, group_size=4)
    still_works()


@pytest.mark.parametrize("k", [6, 7, 64, 5 + 4096])  # x[-1], x[-2], far before, pages before
def test_guard_pages_catch_writes_before_the_start(emu, lib, k, still_works):
    # issue 14.15: x[-k] used to land in the slack before the copy, unnoticed
    x = torch.arange(64.0)
    with pytest.raises(
        KernelFault, match=r"'before_start' faulted .*thread \(5, 0, 0\).*before the start of argument 0"
    ) as ei:
        lib.before_start(x, k, threads=64, group_size=32, guard=True)
    assert ei.value.thread == (5, 0, 0)
    assert torch.equal(x, torch.arange(64.0))  # a faulting launch leaves the caller's tensor alone
    # without a bad write the guarded run is clean and its results land in the tensor
    lib.before_start(x, 5, threads=64, group_size=32, guard=True)
    assert x[0] == 1.0 and torch.equal(x[1:], torch.arange(1.0, 64.0))
    still_works()


def test_barrier_through_a_function_pointer_is_a_clear_error(emu, lib, still_works):
    # the lint rejects barrier functions used as values; a user function that holds the barrier,
    # called through a pointer, is found at run time with a message that says what to do
    with pytest.raises(KernelFault, match=r"'barrier_via_pointer' faulted .*threadgroup_barrier \(line \d+\) reached "
                       r"through a call the emulator cannot follow \(a function pointer\?\)") as ei:
        lib.barrier_via_pointer(torch.zeros(4), threads=4, group_size=4)
    assert "emulator bug" not in str(ei.value)
    still_works()


def test_integer_division_by_zero(emu, lib, still_works):
    with pytest.raises(KernelFault, match=r"'div_zero' faulted .*thread \(2, 0, 0\).*division by zero"):
        lib.div_zero(torch.tensor([1, 2, 0, 4], dtype=torch.int32), threads=4, group_size=4)
    still_works()


def test_guard_pages_catch_one_past_the_end(emu, lib, still_works):
    x = torch.arange(64.0)
    lib.past_end(x[:48].clone(), 40, threads=40, group_size=8)  # in bounds: fine
    with pytest.raises(KernelFault, match="past the end of argument 0"):
        lib.past_end(torch.zeros(64), 64, threads=64, group_size=32, guard=True)
    # with guard=True the results still land in the caller's tensor
    y = torch.arange(64.0)
    lib.past_end(y, 63, threads=63, group_size=32, guard=True)
    assert torch.equal(y[:63], torch.arange(63.0) + 63) and y[63] == 63
    still_works()


# divergence faults: (kernel, threads = group size, message)
_DIVERGENCE = [
    # a barrier reached by only some threads
    (
        "barrier_divergence",
        64,
        r"barrier divergence: thread \d+ waits at threadgroup_barrier \(line \d+ col \d+\) but thread 3 finished",
    ),
    # collectives at different call sites
    ("simd_divergence", 32, r"lanes of simdgroup 0 reached different simdgroup operations"),
    # a lane leaving before a collective
    ("simd_lane_exit", 32, r"simdgroup divergence: lane \d+ of simdgroup 0 waits at .* but lane 5 finished the kernel"),
]


@pytest.mark.parametrize("kernel, n, message", _DIVERGENCE, ids=[k for k, _, _ in _DIVERGENCE])
def test_divergence(emu, lib, order, kernel, n, message, still_works):
    with pytest.raises(KernelFault, match=message):
        getattr(lib, kernel)(torch.zeros(n), threads=n, group_size=n, order=order[0], seed=order[1])
    still_works()


def test_threadgroup_memory_is_poisoned(emu, lib, order):
    x = torch.zeros(32)
    lib.uninit_tg(x, threads=32, group_size=32, order=order[0], seed=order[1])
    assert x.isnan().all()  # sh[0] was never written: it holds the poison (0xFF bytes = NaN)


def test_threadgroup_memory_limit_at_run_time(emu, monkeypatch, still_works):
    """The lint rejects > 32 KiB statically; the runtime meter is the second line of defence."""
    from mpslinalg import emulator
    from mpslinalg.emulator import _library

    monkeypatch.setattr(_library, "check_source", None)
    lib = emulator.compile_shader(
        """
        #include <metal_stdlib>
        using namespace metal;
        template <int N>
        kernel void big(device float* x [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
          threadgroup float a[N];
          threadgroup float b[N];
          a[tid] = 1.0f; b[tid] = 2.0f;
          threadgroup_barrier(mem_flags::mem_threadgroup);
          x[tid] = a[0] + b[0];
        }
        template [[host_name("big_ok")]] kernel void big<4096>(device float*, uint);
        template [[host_name("big_bad")]] kernel void big<4100>(device float*, uint);
        """
    )
    x = torch.zeros(8)
    lib.big_ok(x, threads=8, group_size=8)  # 2 x 16384 bytes = 32 KiB exactly
    assert x.tolist() == [3.0] * 8
    with pytest.raises(ValueError, match="kernel 'big_bad': threadgroup memory .* exceeds the 32 KiB"):
        lib.big_bad(x, threads=8, group_size=8)
    still_works()


def test_threadgroup_parameter_rejected(emu, monkeypatch):
    from mpslinalg import emulator
    from mpslinalg.emulator import _library

    monkeypatch.setattr(_library, "check_source", None)
    lib = emulator.compile_shader(
        "kernel void tgp(device float* x [[buffer(0)]], threadgroup float* s [[threadgroup(0)]],\n"
        "                uint i [[thread_position_in_grid]]) { s[0] = x[i]; }\n"
    )
    with pytest.raises(ValueError, match="kernel 'tgp': parameter 1 .*cannot be bound"):
        lib.tgp(torch.zeros(4))
