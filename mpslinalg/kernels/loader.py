"""Find, assemble and compile a family's ``.metal`` source, once per process and device type.

A family's kernels live in ``metal/<family>.metal``. Shared helpers live in our own
``metal/*.h`` headers, included as ``#include "name.h"``; torch's ``compile_shader`` takes one
self-contained source string, so the loader inlines those headers (each once, with ``#line``
markers so compiler messages point at the right file). ``#include <metal_stdlib>`` is left alone;
any other include (``<c10/...>`` breaks editable installs) is an error.

The shader compiler is injected per device type: ``torch.mps.compile_shader`` for ``mps``,
``mpslinalg.emulator.compile_shader`` for ``cpu`` (and its cuda target for ``cuda``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .backends import BackendUnavailableError, mps_available

ShaderCompiler = Callable[[str], Any]

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]')


def metal_dir() -> Path:
    """Directory holding the ``.metal`` sources: inside the wheel, else the checkout's ``metal/``."""
    pkg = Path(__file__).resolve().parent.parent
    for candidate in (pkg / "metal", pkg.parent / "metal"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"mpslinalg: no metal/ directory next to {pkg} (broken install?)")


def _inline(path: Path, seen: set[str], root: Path) -> list[str]:
    out = [f'#line 1 "{path.name}"']
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        m = _INCLUDE.match(line)
        if m is None:
            out.append(line)
            continue
        kind, name = m.groups()
        if kind == "<":
            if name != "metal_stdlib":
                raise ValueError(f"{path.name}:{lineno}: only <metal_stdlib> may be included with <>, got <{name}>")
            out.append(line)
            continue
        header = root / name
        if not header.is_file() or header.suffix != ".h":
            raise FileNotFoundError(f"{path.name}:{lineno}: included header {name!r} not found in {root}")
        if name not in seen:
            seen.add(name)
            out.extend(_inline(header, seen, root))
        out.append(f'#line {lineno + 1} "{path.name}"')
    return out


def metal_source(family: str, *, root: Path | None = None) -> str:
    """The self-contained source of ``metal/<family>.metal`` with our headers inlined."""
    root = metal_dir() if root is None else Path(root)
    path = root / f"{family}.metal"
    if not path.is_file():
        raise FileNotFoundError(f"no Metal source for family {family!r}: {path} does not exist")
    return "\n".join(_inline(path, set(), root)) + "\n"


def _mps_compiler(source: str) -> Any:
    if not mps_available():
        raise BackendUnavailableError("torch.mps.compile_shader needs an Apple GPU; MPS is not available here")
    return torch.mps.compile_shader(source)


def _emulator_compiler(target: str) -> ShaderCompiler:
    def compile_(source: str) -> Any:
        try:
            from mpslinalg import emulator
        except ImportError as exc:  # pragma: no cover - the emulator ships with the package
            raise BackendUnavailableError(f"mpslinalg.emulator is not importable: {exc}") from exc
        return emulator.compile_shader(source, target=target)

    return compile_


_compilers: dict[str, ShaderCompiler] = {
    "mps": _mps_compiler,
    "cpu": _emulator_compiler("cpu"),
    "cuda": _emulator_compiler("cuda"),
}
_cache: dict[tuple[str, str], Any] = {}
_lock = threading.Lock()


def set_compiler(device_type: str, compiler: ShaderCompiler) -> ShaderCompiler:
    """Inject the shader compiler for ``device_type``; returns the previous one. Clears the cache."""
    with _lock:
        previous = _compilers[device_type]
        _compilers[device_type] = compiler
        _cache.clear()
    return previous


def load_library(family: str, device: torch.device | str) -> Any:
    """The compiled kernel library of ``family`` for tensors on ``device`` (cached per process).

    The returned object has one attribute per kernel, called as
    ``lib.kernel(*args, threads=..., group_size=...)`` (``torch.mps.compile_shader``'s shape).
    """
    device_type = torch.device(device).type
    if device_type not in _compilers:
        raise BackendUnavailableError(f"no Metal kernel runner for device type {device_type!r}")
    key = (family, device_type)
    lib = _cache.get(key)  # hot path: one dict lookup, no file access
    if lib is None:
        with _lock:
            lib = _cache.get(key)
            if lib is None:
                lib = _compilers[device_type](metal_source(family))
                _cache[key] = lib
    return lib
