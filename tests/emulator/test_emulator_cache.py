"""The compile cache survives corrupt entries (issue 14.12): a truncated or altered shared library,
runtime object or sidecar is detected (size + sha256 recorded when the entry was stored, or a
load failure) and rebuilt, in this process and in every later one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from mpslinalg import emulator
from mpslinalg.emulator import _library, _toolchain

ROOT = Path(__file__).resolve().parents[2]

SOURCE = """
#include <metal_stdlib>
using namespace metal;
kernel void axpy(device float* y [[buffer(0)]], device const float* x [[buffer(1)]],
                 constant float& a [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  y[i] = a * x[i] + y[i];
}
// cache-corruption test
"""

_CHILD = """
    import torch
    from mpslinalg import emulator
    lib = emulator.compile_shader({src!r})
    y = torch.ones(4)
    lib.axpy(y, torch.arange(4.0), 2.0)
    print(lib._key, y.tolist())
"""


def _child(cache: Path) -> tuple[str, list[float]]:
    env = dict(os.environ, MPSLINALG_CACHE_DIR=str(cache))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD.format(src=SOURCE))],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    key, values = p.stdout.strip().split(" ", 1)
    return key, eval(values)  # noqa: S307 - a list printed by the child


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_truncate, _flip, lambda p: Path(str(p) + ".sha256").unlink()],
                         ids=["truncated", "altered", "no-checksum"])
def test_damaged_library_is_rebuilt_by_the_next_process(emu, tmp_path, damage):
    key, y = _child(tmp_path)
    assert y == [1.0, 3.0, 5.0, 7.0]
    so = tmp_path / "emulator" / f"{key}.so"
    good = so.read_bytes()
    damage(so)
    # before: every later process failed with "OSError: file too short"
    key2, y2 = _child(tmp_path)
    assert key2 == key and y2 == [1.0, 3.0, 5.0, 7.0]
    assert _toolchain.verify_artifact(so) and len(so.read_bytes()) == len(good)


def test_damaged_runtime_object_is_rebuilt(emu, tmp_path, monkeypatch):
    monkeypatch.setenv("MPSLINALG_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_library, "_memo", {})
    emulator.compile_shader(SOURCE)
    (obj,) = (tmp_path / "emulator").glob("cpu_runtime-*.o")
    _truncate(obj)
    for so in (tmp_path / "emulator").glob("*.so"):  # force a relink against the runtime object
        so.unlink()
    monkeypatch.setattr(_library, "_memo", {})
    lib = emulator.compile_shader(SOURCE)
    y = torch.ones(2)
    lib.axpy(y, torch.ones(2), 3.0)
    assert y.tolist() == [4.0, 4.0] and _toolchain.verify_artifact(obj)


def test_load_failure_with_matching_checksum_rebuilds(emu, tmp_path):
    # an entry whose checksum matches but which the loader rejects (e.g. copied from another
    # machine with its sidecar): discarded and rebuilt once
    path = tmp_path / "lib.so"
    path.write_bytes(b"not an ELF file")
    _toolchain.store_artifact(path, path)  # records the checksum of the junk
    assert _toolchain.verify_artifact(path)
    calls = []

    def build(tmp: Path) -> None:
        calls.append(tmp)
        cc = _toolchain.find_compiler()
        src = tmp_path / "f.c"
        src.write_text("int answer(void) { return 42; }\n")
        subprocess.run([*cc, "-x", "c", "-shared", "-fPIC", str(src), "-o", str(tmp)], check=True)

    lib = _toolchain.load_shared_library(path, build)
    assert lib.answer() == 42 and len(calls) == 1 and _toolchain.verify_artifact(path)
    # a second load takes the verified entry without building
    _toolchain.load_shared_library(path, build)
    assert len(calls) == 1
