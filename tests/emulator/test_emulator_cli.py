"""The emulator's command line and toolchain messages (issues 15.3, 15.9): ``--help`` reads as
plain text, a slow compile says what it is doing, and the cuda target asks for a real clang when
only ziglang's compiler is installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpslinalg.emulator import _cuda, _toolchain

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv", [["--help"], ["build", "--help"]])
def test_help_is_plain_text(argv):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run(
        [sys.executable, "-m", "mpslinalg.emulator", *argv], capture_output=True, text=True, env=env, timeout=120
    )
    assert p.returncode == 0, p.stderr
    assert "usage: python -m mpslinalg.emulator" in p.stdout
    for markup in ("``", ":class:", ":func:", ".. "):
        assert markup not in p.stdout, markup
    assert "cubin" in p.stdout


def test_slow_compile_says_what_it_is_doing(emu, monkeypatch, capfd):
    monkeypatch.setattr(_toolchain, "SLOW_COMPILE_S", 0.0)  # every compile counts as slow
    out = _toolchain.preprocess("#define TWICE(x) ((x) + (x))\nint a = TWICE(3);\n")
    assert "((3) + (3))" in out
    err = capfd.readouterr().err.splitlines()
    # one line: what runs, with which compiler, and that it takes a while (ziglang's adds why: its
    # first compile builds its runtime); the same meaning whichever compiler the emulator found
    cmd = " ".join(_toolchain.find_compiler())
    assert len(err) == 1 and err[0].startswith(f"mpslinalg.emulator: preprocessing the Metal source with {cmd} ")
    assert "is taking a while" in err[0] and err[0].endswith("...")


def test_fast_compile_is_silent(emu, capfd):
    _toolchain.preprocess("int b = 1;\n")
    assert capfd.readouterr().err == ""


def _pretend_zig(monkeypatch):
    zig = {"command": [sys.executable, "-m", "ziglang", "c++"], "version": "clang version 19.1.0"}
    monkeypatch.setattr(_toolchain, "compiler_info", lambda: zig)


def test_cuda_target_needs_a_real_clang(monkeypatch):
    _pretend_zig(monkeypatch)
    assert _toolchain.compiler_is_zig()
    with pytest.raises(_cuda.CudaToolchainError, match="the cuda target needs a real clang"):
        _cuda.require_real_clang()
    with pytest.raises(_cuda.CudaToolchainError, match="the cuda target needs a real clang"):
        _cuda.build_artifacts(None, "key", Path("unused"))  # refused before anything is built


def test_cuda_tests_skip_under_zig_with_that_reason(monkeypatch, request):
    _pretend_zig(monkeypatch)
    monkeypatch.delenv("MPSLINALG_CUBIN_DIR", raising=False)
    with pytest.raises(pytest.skip.Exception, match="the cuda target needs a real clang"):
        request.getfixturevalue("real_clang_for_cuda")  # the fixture the cuda test modules use
