"""Compiler discovery, the compile cache, the pre-pass rewrites and rejections, and the portable
ucontext fiber fallback."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch

from mpslinalg import emulator
from mpslinalg.emulator import _prepass, _toolchain

SAXPY = """
#include <metal_stdlib>
using namespace metal;
kernel void saxpy(device float* y [[buffer(0)]], device const float* x [[buffer(1)]],
                  constant float& a [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  y[i] = a * x[i] + y[i];
}
"""


def test_compiler_found_and_reported(emu):
    cmd = emulator.find_compiler()
    assert isinstance(cmd, list) and cmd
    info = emulator.compiler_info()
    assert info["command"] == cmd and info["version"].startswith("clang version ")
    assert int(info["version"].split()[-1].split(".")[0]) >= 17


def test_missing_compiler_message(monkeypatch):
    monkeypatch.setenv("MPSLINALG_CXX", "/nonexistent/clang++")
    with pytest.raises(emulator.CompilerNotFoundError) as ei:
        emulator.find_compiler()
    msg = str(ei.value)
    assert "apt-get install -y clang-19" in msg and "pip install ziglang" in msg and "MPSLINALG_CXX" in msg
    assert emulator.compiler_info() is None  # never raises


def test_compile_cache_hit_needs_no_compiler(emu, tmp_path, monkeypatch):
    monkeypatch.setenv("MPSLINALG_CACHE_DIR", str(tmp_path))
    src = SAXPY + "\n// cache test\n"
    lib = emulator.compile_shader(src)
    assert sorted(p.name for p in (tmp_path / "emulator").glob("*.so")) == [f"{lib._key}.so"]
    # a fresh process: no in-memory library, and any compiler call would fail
    from mpslinalg.emulator import _cpu, _library

    monkeypatch.setattr(_library, "_memo", {})

    def no_compiler(*a, **k):
        raise AssertionError("the cache should have answered")

    monkeypatch.setattr(_toolchain, "run_compiler", no_compiler)  # clang -E (preprocess)
    monkeypatch.setattr(_cpu, "run_compiler", no_compiler)
    lib2 = emulator.compile_shader(src)
    y, x = torch.ones(4), torch.arange(4.0)
    lib2.saxpy(y, x, 2.0)
    assert y.tolist() == [1.0, 3.0, 5.0, 7.0]
    # a different source is a different key
    with pytest.raises(AssertionError, match="cache should have answered"):
        emulator.compile_shader(src + "// changed\n")


def test_compile_error_points_at_metal_line(emu):
    bad = SAXPY.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + undefined_name;")
    with pytest.raises(emulator.ShaderCompileError, match=r"shader\.metal:6:\d+: error: use of undeclared identifier"):
        emulator.compile_shader(bad)


def test_macro_instantiations_and_headers_expand(emu):
    src = """
    #include <metal_stdlib>
    using namespace metal;
    #define NEG(x) (-(x))
    template <typename T>
    kernel void neg(device T* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = NEG(x[i]); }
    #define INSTANTIATE(T) template [[host_name("neg_" #T)]] kernel void neg<T>(device T*, uint);
    INSTANTIATE(float)
    INSTANTIATE(int)
    """
    lib = emulator.compile_shader(src)
    assert {"neg_float", "neg_int"} <= set(dir(lib))
    x = torch.tensor([1, -2, 3], dtype=torch.int32)
    lib.neg_int(x)
    assert x.tolist() == [-1, 2, -3]


@pytest.mark.parametrize("expr", ["(float2)v", "(float4)(v.xy, v.zw)", "x + (int2)q"])
def test_c_style_vector_casts_rejected(expr):
    src = f"kernel void k(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {{ auto r = {expr}; }}"
    with pytest.raises(_prepass.MetalSourceError, match="C-style cast to (float2|float4|int2)"):
        _prepass.prepass(src)


def test_prepass_rewrites():
    src = """kernel void k(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {
      threadgroup float2 tile[4][8];
      threadgroup int flat[4 * 8];
      float4 (&m)[4] = other;
      float2 z = float2(1.0h, o[i]);
      int2 q = static_cast<int2>(z);
      float s = sizeof(float2) * (float)i;
    }"""
    out = _prepass.prepass(src)
    text = out.source
    assert "__mpsle_vec<float2>(((half)1.0f), o[i])" in text
    assert "float4 (&m)[4]" in text  # a declaration, left alone
    assert "__mpsle_cvt<int2>(z)" in text
    assert "mpsle_tg_slot(0, sizeof(float2[4][8])" in text.replace(" [", "[")
    assert "mpsle_tg_slot(1, sizeof(int[4*8])" in text.replace(" [", "[")  # '*' inside the extent
    assert text.count("\n") == src.count("\n")  # line numbers preserved
    assert "static void k" in text and "[[" not in text
    (k,) = out.kernels
    assert k.name == "k" and not k.uses_sync
    assert [(p.kind, p.buffer_index) for p in k.params] == [("buffer", 0), ("thread_attr", None)]


def test_prepass_kernel_attribute_syntax_and_max_threads():
    src = (
        "[[kernel]] void a(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) { o[i] = 1; }\n"
        "kernel void b(device float* o, constant long& n, ushort2 t [[thread_position_in_threadgroup]])\n"
        "    [[max_total_threads_per_threadgroup(256)]] { o[t.x] = float(n); }\n"
    )
    ka, kb = _prepass.prepass(src).kernels
    assert ka.name == "a" and kb.name == "b" and kb.max_threads == 256
    assert [(p.kind, p.buffer_index) for p in kb.params] == [("buffer", 0), ("buffer", 1), ("thread_attr", None)]
    assert kb.params[1].is_reference and kb.params[1].address_space == "constant" and kb.params[1].base_type == "long"


def test_ucontext_fallback_matches(emu, monkeypatch):
    """The portable fiber implementation (ucontext) gives the same LU as the hand-written switch."""
    A = torch.randn(3, 16, 16, generator=torch.Generator().manual_seed(7))
    text = (Path(__file__).resolve().parent / "kernels" / "lu_small.metal").read_text()
    results = []
    for fallback in ("", "1"):
        monkeypatch.setenv("MPSLINALG_EMULATOR_UCONTEXT", fallback)
        lib = emulator.compile_shader(text)
        a = A.clone()
        ipiv = torch.zeros(3, 16, dtype=torch.int32)
        info = torch.zeros(3, dtype=torch.int32)
        lib.lu16(a, ipiv, info, 16, threads=[16, 48], group_size=[16, 16], order="shuffle", seed=3)
        results.append((a, ipiv))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


def test_cache_dir_env(tmp_path, monkeypatch):
    # one layout for the package: <root>/<kind>, root = $MPSLINALG_CACHE_DIR or ~/.cache/mpslinalg
    monkeypatch.setenv("MPSLINALG_CACHE_DIR", str(tmp_path / "c"))
    assert emulator.cache_root() == tmp_path / "c" and (tmp_path / "c").is_dir()
    assert _toolchain.cache_dir() == tmp_path / "c" / "emulator" and (tmp_path / "c" / "emulator").is_dir()
    assert emulator.cache_dir("small") == tmp_path / "c" / "small" and (tmp_path / "c" / "small").is_dir()
    for bad in ("", "../x", "a/b"):
        with pytest.raises(ValueError, match="plain folder name"):
            emulator.cache_dir(bad)
    monkeypatch.delenv("MPSLINALG_CACHE_DIR")
    assert emulator.cache_dir() == Path.home() / ".cache" / "mpslinalg" / "emulator" or not os.access(
        Path.home(), os.W_OK
    )


def test_find_cxx_is_the_one_discovery(emu, tmp_path, monkeypatch):
    # the public name the C code generators use: the emulator's own compiler, and it compiles C
    monkeypatch.setenv("MPSLINALG_CACHE_DIR", str(tmp_path / "cache"))
    cmd = emulator.find_cxx()
    assert cmd == emulator.find_compiler()
    src = tmp_path / "f.c"
    src.write_text("int twice(int x) { return 2 * x; }\n")

    def build(out):
        subprocess.run([*cmd, "-x", "c", "-shared", "-fPIC", str(src), "-o", str(out)], check=True)

    lib = emulator.load_shared_library(emulator.cache_dir("test-c") / "twice.so", build)
    assert lib.twice(21) == 42
    assert (tmp_path / "cache" / "test-c" / "twice.so").is_file()
