"""Compile a kernel group's ``.metal`` source on its first use, once per process and device type.

A family's kernels live in ``metal/<family>.metal``, or, split by kernel group, in
``metal/<family>_<group>.metal`` (the LU family: ``lu_panel``, ``lu_look``, ``lu_small``,
``lu_small_solve``, ``lu_swap``); each file is one library, compiled by the first call that needs
one of its kernels, so a first ``lu_factor`` of a small matrix compiles ``lu_small`` only. The
family's kernel class names the file of each kernel (``mpslinalg/lu/kernels.py``:
``KERNEL_SOURCES``). Sources are assembled by :func:`mpslinalg.emulator.sources.metal_source`
(our ``metal/*.h`` headers inlined, ASCII only).

The shader compiler is injected per device type: ``torch.mps.compile_shader`` for ``mps``,
``mpslinalg.emulator.compile_shader`` for ``cpu`` (and its cuda target for ``cuda``).

Kernels are instantiated as ``<kernel>_<dtype>[_<param>...]`` (``metal/scalar.h``'s
``MPSL_INSTANTIATE``); :func:`kernel_name` builds those names on the host, and every call site
uses it.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ..emulator.sources import metal_dir, metal_source
from .backends import BackendUnavailableError, mps_available

ShaderCompiler = Callable[[str], Any]

__all__ = ["DTYPE_TAGS", "BoundLibrary", "kernel_name", "load_library", "metal_dir", "metal_source", "set_compiler"]

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


def load_library(source: str, device: torch.device | str) -> Any:
    """The compiled kernel library of ``metal/<source>.metal`` for tensors on ``device``, compiled
    on the first call for that source and device type and cached for the process.

    Parameters
    ----------
    source : str
        The file's stem: a family (``"qr"``) or one of its kernel groups (``"lu_small"``).
    device : torch.device or str
        Where the tensors live: ``mps`` compiles with ``torch.mps.compile_shader``, ``cpu`` and
        ``cuda`` with the emulator.

    Returns
    -------
    BoundLibrary
        One attribute per kernel, called as ``lib.kernel(*args, threads=..., group_size=...)``
        (``torch.mps.compile_shader``'s shape).

    Raises
    ------
    BackendUnavailableError
        If no shader compiler serves ``device``'s type.
    """
    device_type = torch.device(device).type
    if device_type not in _compilers:
        raise BackendUnavailableError(f"no Metal kernel runner for device type {device_type!r}")
    key = (source, device_type)
    lib = _cache.get(key)  # hot path: one dict lookup, no file access
    if lib is None:
        with _lock:
            lib = _cache.get(key)
            if lib is None:
                lib = BoundLibrary(_compilers[device_type](metal_source(source, root=metal_dir())))
                _cache[key] = lib
    return lib
