"""``compile_shader``: the emulator against ``torch.mps.compile_shader``'s contract (only what
``tests/emulator/`` does not already cover).
"""

from __future__ import annotations

import pytest
import torch

# ------------------------------------------------------------------------------------------------
# compile_shader: the emulator against torch.mps.compile_shader's contract
# (torch/csrc/mps/Module.cpp: argument i binds buffer(i); threads defaults to numel of the first
# tensor argument; group_size defaults to min(threads, max_threads_per_threadgroup) in 1-D;
# threads/group_size/arg_casts are keyword-only; every TORCH_CHECK failure is a RuntimeError).
# Only what tests/emulator/ does not already cover.
# ------------------------------------------------------------------------------------------------

_SHADER = """
#include <metal_stdlib>
using namespace metal;

kernel void fill(device float* out [[buffer(0)]], constant float& v [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) {
    out[i] = v;
}

// the first *tensor* argument is buffer(1): default threads = its numel
kernel void fill_second(constant float& v [[buffer(0)]], device float* out [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
    out[i] = v;
}

kernel void groups(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]],
                   uint g [[threadgroup_position_in_grid]],
                   uint d [[dispatch_threads_per_threadgroup]]) {
    out[2 * i] = g;
    out[2 * i + 1] = d;
}
"""


@pytest.fixture(params=["emulator", pytest.param("metal", marks=pytest.mark.mps)])
def compile_shader(request):
    if request.param == "emulator":
        from helpers import require_emulator

        require_emulator()
        from mpslinalg import emulator

        return emulator.compile_shader, torch.device("cpu")
    return torch.mps.compile_shader, torch.device("mps")


def test_shader_dir_and_default_threads(compile_shader):
    compile, dev = compile_shader
    lib = compile(_SHADER)
    assert {"fill", "fill_second", "groups"} <= set(dir(lib))
    assert not {"fill", "fill_second", "groups"} ^ {k for k in dir(lib) if not k.startswith("_")}
    x = torch.zeros(37, device=dev)
    lib.fill_second(2.5, x)  # threads = numel of x although x is argument 1
    assert torch.equal(x.cpu(), torch.full((37,), 2.5))
    for threads in (5, [5], (5,)):  # an int or a sequence of 1-3 ints
        y = torch.zeros(8, device=dev)
        lib.fill(y, 1.0, threads=threads)
        assert y.cpu().tolist() == [1.0] * 5 + [0.0] * 3


def test_shader_default_group_size(compile_shader):
    compile, dev = compile_shader
    lib = compile(_SHADER)
    k = lib.groups
    n = 2 * k.max_threads_per_threadgroup + 7
    out = torch.zeros(2 * n, dtype=torch.int32, device=dev)
    k(out, threads=n)  # group_size defaults to min(threads, max_threads_per_threadgroup)
    out = out.cpu().reshape(n, 2)
    gs = min(n, k.max_threads_per_threadgroup)
    assert torch.equal(out[:, 1], torch.full((n,), gs, dtype=torch.int32))
    assert torch.equal(out[:, 0], torch.arange(n, dtype=torch.int32) // gs)


def test_shader_empty_library(compile_shader):
    compile, _ = compile_shader
    lib = compile("// Empty library\n")
    assert [k for k in dir(lib) if not k.startswith("_")] == []


def test_shader_torch_check_failures_are_runtime_errors(compile_shader):
    """Each call below fails a TORCH_CHECK in torch (a RuntimeError); code written against
    torch.mps catches RuntimeError, so the emulator's error must be one (it may also be a
    ValueError/TypeError, like mpslinalg's own errors)."""
    compile, dev = compile_shader
    lib = compile(_SHADER)
    x = torch.zeros(4, device=dev)
    calls = {
        "no tensor and no threads": lambda: lib.fill([1.0, 2.0], 1.0),
        "4-D threads": lambda: lib.fill(x, 1.0, threads=[1, 1, 1, 1]),
        "group_size rank != threads rank": lambda: lib.fill(x, 1.0, threads=[4, 1], group_size=[4]),
        "arg_casts of wrong type": lambda: lib.fill(x, 1.0, arg_casts=["fp16"]),
        "unsupported cast": lambda: lib.fill(x, 1.0, arg_casts="fp8"),
        "str argument": lambda: lib.fill(x, "1.0"),
        "empty list argument": lambda: lib.fill(x, []),
        "list of str argument": lambda: lib.fill(x, ["a"]),
        "unknown kernel": lambda: lib.no_such_kernel,
    }
    problems = []
    for name, call in calls.items():
        try:
            call()
        except RuntimeError:
            continue
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: {type(e).__name__} ({type(e).__mro__[1].__name__}) is not a RuntimeError")
        else:
            problems.append(f"{name}: no error")
    assert not problems, problems


def test_shader_unknown_keyword_is_type_error(compile_shader):
    compile, dev = compile_shader
    lib = compile(_SHADER)
    with pytest.raises(TypeError):  # pybind rejects unknown keywords with a TypeError
        lib.fill(torch.zeros(4, device=dev), 1.0, thread=4)


def test_shader_source_errors_are_runtime_errors(compile_shader):
    """torch: a source Metal rejects fails in DynamicMetalShaderLibrary (TORCH_CHECK, a
    RuntimeError; SyntaxError in some versions). ``double`` does not exist in MSL, so a kernel
    using it is rejected at compile time on a Mac."""
    compile, _ = compile_shader
    bad = {
        "syntax": "kernel void k(device float* x [[buffer(0)]] { x[0] = 1; }",
        "double": ("kernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) "
                   "{ double d = 1.0; x[i] = d; }"),
    }
    problems = []
    for name, src in bad.items():
        try:
            compile(src)
        except (RuntimeError, SyntaxError):
            continue
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: {type(e).__name__} is not a RuntimeError")
        else:
            problems.append(f"{name}: compiled")
    assert not problems, problems
