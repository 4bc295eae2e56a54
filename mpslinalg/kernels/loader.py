"""Find, assemble and compile a family's ``.metal`` source, once per process and device type.

A family's kernels live in ``metal/<family>.metal``. Shared helpers live in our own
``metal/*.h`` headers, included as ``#include "name.h"``; torch's ``compile_shader`` takes one
self-contained source string, so the loader inlines those headers (each once, with ``#line``
markers so compiler messages point at the right file). ``#include <metal_stdlib>`` is left alone;
any other include (``<c10/...>`` breaks editable installs) is an error.

The shader compiler is injected per device type: ``torch.mps.compile_shader`` for ``mps``,
``mpslinalg.emulator.compile_shader`` for ``cpu`` (and its cuda target for ``cuda``).

Kernels are instantiated as ``<kernel>_<dtype>[_<param>...]`` (``metal/scalar.h``'s
``MPSL_INSTANTIATE``); :func:`kernel_name` builds those names on the host, and every call site
uses it. PyTorch builds the source string with an ASCII encoding, so a source with any other byte
is rejected here, before it reaches a Mac.
"""

from __future__ import annotations

import os
import re
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .backends import BackendUnavailableError, mps_available

ShaderCompiler = Callable[[str], Any]

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]')

#: The dtype tag of kernel host names (``metal/scalar.h``: ``MPSL_INSTANTIATE_DTYPES``).
DTYPE_TAGS: dict[torch.dtype, str] = {torch.float32: "f32", torch.complex64: "c64"}


def kernel_name(kernel: str, dtype: torch.dtype, *params: int) -> str:
    """The host name of ``kernel`` instantiated for ``dtype`` (and template parameters ``params``).

    Parameters
    ----------
    kernel : str
        The template's name in the ``.metal`` source, e.g. ``"lu_panel"``.
    dtype : torch.dtype
        ``torch.float32`` (tag ``f32``) or ``torch.complex64`` (tag ``c64``).
    *params : int
        Further template parameters, in order (e.g. the matrix order of the small family).

    Returns
    -------
    str
        ``<kernel>_<dtype tag>[_<param>...]``.

    Raises
    ------
    TypeError
        If ``dtype`` has no Metal kernels.

    Examples
    --------
    >>> kernel_name("lu_panel", torch.complex64)
    'lu_panel_c64'
    >>> kernel_name("small_inv", torch.float32, 3)
    'small_inv_f32_3'
    """
    tag = DTYPE_TAGS.get(dtype)
    if tag is None:
        raise TypeError(f"no Metal kernel {kernel!r} for dtype {dtype}: expected torch.float32 or torch.complex64")
    return "_".join([kernel, tag, *(str(int(p)) for p in params)])


def metal_dir() -> Path:
    """Directory holding the ``.metal`` sources: inside the wheel, else the checkout's ``metal/``."""
    pkg = Path(__file__).resolve().parent.parent
    for candidate in (pkg / "metal", pkg.parent / "metal"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"mpslinalg: no metal/ directory next to {pkg} (broken install?)")


def _ascii_text(path: Path) -> str:
    """``path``'s text; a non-ASCII byte is an error (PyTorch passes the source as ASCII)."""
    data = path.read_bytes()
    bad = next((i for i, byte in enumerate(data) if byte > 127), None)
    if bad is not None:
        line = data.count(b"\n", 0, bad) + 1
        raise ValueError(f"{path.name}:{line}: non-ASCII byte 0x{data[bad]:02x}; Metal sources must be "
                         "ASCII (torch.mps.compile_shader encodes the source as ASCII)")
    return data.decode("ascii")


def _inline(path: Path, seen: set[str], root: Path) -> list[str]:
    out = [f'#line 1 "{path.name}"']
    for lineno, line in enumerate(_ascii_text(path).splitlines(), start=1):
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


_fast_math_warned: list[bool] = []


def _warn_fast_math() -> None:
    """Warn once per process when ``PYTORCH_MPS_FAST_MATH`` asks torch for fast-math libraries.

    ``metal/scalar.h`` pins safe math with ``#pragma METAL fp`` where the language version has it
    (MSL 3.2); under an older one torch's fast-math option applies to our kernels too.
    """
    if os.environ.get("PYTORCH_MPS_FAST_MATH", "0") in ("", "0") or _fast_math_warned:
        return
    _fast_math_warned.append(True)
    warnings.warn(
        "mpslinalg: PYTORCH_MPS_FAST_MATH is set. The kernels pin safe math (#pragma METAL fp "
        "math_mode(safe), contract(off)) only where torch compiles them as Metal 3.2 or newer; "
        "otherwise NaN/Inf checks may be folded away and results may differ from LAPACK's. "
        "scripts/mac_smoke.py reports the language version in use.",
        RuntimeWarning,
        stacklevel=3,
    )


def _mps_compiler(source: str) -> Any:
    if not mps_available():
        raise BackendUnavailableError("torch.mps.compile_shader needs an Apple GPU; MPS is not available here")
    _warn_fast_math()
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


class BoundLibrary:
    """A compiled library whose kernels bind tensors the way a kernel can read them.

    ``torch.mps.compile_shader`` binds a tensor's storage at its storage offset and ignores its
    strides and its conj/neg bits (so does the emulator, as PyTorch does). This is the one place
    that resolves them for every family: a tensor argument with a conj or neg bit is materialised
    (inputs only ever carry them: kernels write into fresh tensors), and a non-contiguous tensor is
    refused with a clear error (a copy would silently lose the kernel's writes).
    """

    __slots__ = ("_lib", "_kernels")

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self._kernels: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        fn = self._kernels.get(name)
        if fn is None:
            raw = getattr(self._lib, name)

            def fn(*args, **kwargs):
                return raw(*(_bindable(name, i, a) for i, a in enumerate(args)), **kwargs)

            self._kernels[name] = fn
        return fn

    def __dir__(self):
        return dir(self._lib)


def _bindable(kernel: str, i: int, a: Any) -> Any:
    if not isinstance(a, torch.Tensor):
        return a
    if a.is_conj() or a.is_neg():
        a = a.resolve_conj().resolve_neg()
    if not a.is_contiguous():
        raise ValueError(f"{kernel}: argument {i} (shape {tuple(a.shape)}, strides {a.stride()}) is not "
                         "contiguous; Metal kernels ignore strides (mpslinalg bug: please report)")
    return a


def load_library(family: str, device: torch.device | str) -> Any:
    """The compiled kernel library of ``family`` for tensors on ``device`` (cached per process).

    The returned object has one attribute per kernel, called as
    ``lib.kernel(*args, threads=..., group_size=...)`` (``torch.mps.compile_shader``'s shape), whose
    tensor arguments are resolved by :class:`BoundLibrary`.
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
                lib = BoundLibrary(_compilers[device_type](metal_source(family)))
                _cache[key] = lib
    return lib
