"""Binding rules shared by every target: PyTorch's ``compile_shader`` call shape, checked.

``bind_args`` turns the Python arguments of a kernel call into what the runtime receives (one
pointer per ``[[buffer(i)]]``: a tensor's storage at its storage offset, or the bytes of a Python
scalar / list as torch passes them), with the checks Metal does not make; ``dispatch_grid`` turns
``threads`` / ``group_size`` into the grid and group of ``dispatchThreads`` as torch computes
them. A target (``_cpu``, ``_cuda``) receives the result and only launches.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import struct
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from ._errors import BindingError, BindingTypeError, BindingWarning
from ._frontend import VECTOR_TYPES, Param

__all__ = ["Bound", "LaunchOptions", "bind_args", "dispatch_grid", "elem_of", "launch_timeout"]

# ---------------------------------------------------------------------------------------------
# types
# ---------------------------------------------------------------------------------------------
_F32, _C64 = torch.float32, torch.complex64
_ELEM_DTYPES: dict[str, tuple[torch.dtype, ...]] = {
    "float": (torch.float32, torch.complex64),
    "half": (torch.float16,),
    "bfloat": (torch.bfloat16,),
    "int": (torch.int32, torch.uint32),
    "uint": (torch.uint32, torch.int32),
    "short": (torch.int16, torch.uint16),
    "ushort": (torch.uint16, torch.int16),
    "char": (torch.int8, torch.uint8),
    "uchar": (torch.uint8, torch.int8, torch.bool),
    "bool": (torch.bool, torch.uint8),
    "long": (torch.int64, torch.uint64),
    "ulong": (torch.uint64, torch.int64),
}
# Python scalar kinds after arg_casts: (struct format, element type name)
_CASTS = {
    None: None,
    "fp16": ("e", "half"),
    "bf16": (None, "bfloat"),
    "int32": ("i", "int"),
    "int16": ("h", "short"),
    "int8": ("b", "char"),
    "uint8": ("B", "uchar"),
}
_SAME_WIDTH = {
    "float": {"float"},
    "half": {"half"},
    "bfloat": {"bfloat"},
    "long": {"long", "ulong"},
    "int": {"int", "uint"},
    "short": {"short", "ushort"},
    "char": {"char", "uchar", "bool"},
    "uchar": {"uchar", "char", "bool"},
}


@functools.lru_cache(maxsize=4096)
def elem_of(base: str) -> str | None:
    """Scalar element name of an MSL type ('float4' -> 'float'), None when unknown (structs)."""
    b = base.replace(" ", "")
    if b.startswith("packed_"):
        b = b[len("packed_") :]
    if b.startswith("atomic<") and b.endswith(">"):
        b = b[len("atomic<") : -1]
    elif b.startswith("atomic_"):
        b = b[len("atomic_") :]
    if b in VECTOR_TYPES:
        b = b[:-1]
    if b in ("unsignedint",):
        b = "uint"
    return b if b in _ELEM_DTYPES else None


def describe(p: Param) -> str:
    nm = f" {p.name}" if p.name else ""
    return f"'{p.type_text}{nm}' [[buffer({p.buffer_index})]]"


def scalar_bytes(kname: str, i: int, value: Any, cast: str | None) -> tuple[bytes, str]:
    """The bytes torch binds for a Python scalar or list (after ``arg_casts``) and their element type."""
    if cast not in _CASTS:
        raise BindingError(
            f"kernel '{kname}': unsupported cast instruction {cast!r} for argument {i} "
            f"(torch accepts fp16, bf16, int32, int16, int8, uint8)"
        )
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    is_float = isinstance(values[0], float)
    if not is_float and any(not -(2**63) <= int(v) < 2**63 for v in values):
        raise OverflowError("Python ints are passed as 64-bit longs; the value is out of range")
    if cast is None:
        fmt, elem = ("f", "float") if is_float else ("q", "long")
    else:
        fmt, elem = _CASTS[cast]
    if fmt is None:  # bf16: round-to-nearest-even from float32 via torch
        data = torch.tensor([float(v) for v in values], dtype=torch.bfloat16).view(torch.int16).tolist()
        return struct.pack(f"<{len(values)}h", *data), elem
    conv = [float(v) for v in values] if fmt in ("f", "e") else [int(v) for v in values]
    if fmt not in ("f", "e") and cast is not None:
        # torch reads the int as int64, then static_casts it to the narrower type (wraps)
        bits = struct.calcsize(fmt) * 8
        conv = [
            ((x + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))
            if fmt.islower()
            else x % (1 << bits)
            for x in conv
        ]
    return struct.pack(f"<{len(conv)}{fmt}", *conv), elem


def check_elem(kname: str, i: int, p: Param, elem: str, what: str) -> None:
    """A scalar of element type ``elem`` bound to parameter ``p``: same scalar type (or width) or an error."""
    want = elem_of(p.base_type)
    if want is None:
        return
    if elem not in _SAME_WIDTH.get(want, {want}) and want not in _SAME_WIDTH.get(elem, {elem}):
        hint = ""
        if elem == "long" and want in ("int", "uint", "short", "ushort", "char", "uchar"):
            hint = (
                f"; a Python int is passed as an 8-byte long: declare 'constant long&' or pass "
                f"arg_casts={{{i}: 'int32'}}"
            )
        if elem == "long" and want in ("float", "half"):
            hint = "; pass a Python float (e.g. 1.0), not an int"
        if elem == "float" and want != "float":
            hint = "; a Python float is passed as a 4-byte float"
        raise BindingTypeError(
            f"kernel '{kname}': argument {i} is {what} but parameter {describe(p)} expects "
            f"{want} data{hint}"
        )


def dims(v: Any, what: str, kname: str) -> list[int] | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, list, tuple)):
        raise BindingTypeError(f"kernel '{kname}': {what} must be an int or a list of 1-3 ints, got {v!r}")
    vals = [v] if isinstance(v, int) else list(v)
    if not 0 < len(vals) < 4 or not all(isinstance(x, int) and not isinstance(x, bool) for x in vals):
        raise BindingError(f"kernel '{kname}': {what} must be an int or a list of 1-3 ints, got {v!r}")
    if any(x < 0 for x in vals):
        raise BindingError(f"kernel '{kname}': {what} must be non-negative, got {v!r}")
    return vals


DEFAULT_TIMEOUT_S = 60.0  # per launch, cpu target; $MPSLINALG_EMULATOR_TIMEOUT overrides


def launch_timeout(timeout: Any, kname: str) -> float:
    """Seconds of wall clock a launch may take: ``timeout=`` if given, else
    ``$MPSLINALG_EMULATOR_TIMEOUT``, else 60. ``math.inf`` (or 0 in the environment) means none;
    returns 0.0 for "none" (the runtime's encoding)."""
    if timeout is None:
        env = os.environ.get("MPSLINALG_EMULATOR_TIMEOUT", "").strip()
        if not env:
            return DEFAULT_TIMEOUT_S
        try:
            value = float(env)
        except ValueError:
            raise BindingError(
                f"MPSLINALG_EMULATOR_TIMEOUT must be a number of seconds (0 for none), got {env!r}"
            ) from None
        if value < 0 or math.isnan(value):
            raise BindingError(f"MPSLINALG_EMULATOR_TIMEOUT must be >= 0 seconds, got {env!r}")
        return 0.0 if value == 0 or math.isinf(value) else value
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise BindingError(
            f"kernel '{kname}': timeout must be a positive number of seconds (math.inf for none), "
            f"got {timeout!r}"
        )
    return 0.0 if math.isinf(timeout) else float(timeout)


@dataclass
class LaunchOptions:
    """The emulator-only call keywords (checked), handed to the target's runner."""

    order: str = "inorder"
    seed: int = 0
    guard: bool = False
    tsan: bool = False
    timeout: float = 0.0  # seconds of wall clock, 0 = none (the runtime's encoding)
    given: frozenset = frozenset()  # the keywords the caller set (a target rejects what it lacks)


@dataclass
class Bound:
    """The arguments of one call as the runtime receives them."""

    args: tuple
    ptrs: list[int] = field(default_factory=list)  # per argument: data pointer or host bytes
    keep: list[Any] = field(default_factory=list)  # owners of the memory behind ptrs
    tensors: list[tuple[int, torch.Tensor, int]] = field(default_factory=list)  # (index, tensor, bytes)
    scalar_sizes: dict[int, int] = field(default_factory=dict)  # index -> bytes of a scalar / list
    first_numel: int | None = None  # numel of the first tensor (torch's default threads)


def _casts(kname: str, arg_casts: Any) -> tuple[dict[int, str], str | None]:
    if arg_casts is None:
        return {}, None
    if isinstance(arg_casts, str):
        return {}, arg_casts
    if isinstance(arg_casts, dict):
        for key in arg_casts:
            if isinstance(key, bool) or not isinstance(key, int) or key < 0:
                raise BindingTypeError(f"kernel '{kname}': arg_casts keys must be argument indices, got {key!r}")
        return dict(arg_casts), None
    raise BindingTypeError(f"kernel '{kname}': Unexpected caster arg type {type(arg_casts).__name__}")


def bind_args(kf, args: tuple, arg_casts: Any) -> Bound:
    """Check and prepare ``args`` for kernel ``kf`` (a ``KernelFunction``) as torch binds them."""
    name = kf.name
    runner = kf._lib._runner
    device_type = kf._lib._device_type
    if kf._bad:
        p = kf._bad[0]
        raise BindingError(
            f"kernel '{name}': parameter {p.position} '{p.type_text} {p.name or ''}' cannot be bound by "
            "torch.mps.compile_shader (threadgroup-memory parameters and values without a [[buffer]] or "
            "thread-position attribute are not supported); declare threadgroup arrays inside the kernel"
        )
    if len(args) != kf._nargs:
        raise BindingTypeError(
            f"kernel '{name}' takes {kf._nargs} arguments (buffers 0..{kf._nargs - 1}), "
            f"got {len(args)}"
        )
    casts, default_cast = _casts(name, arg_casts)

    b = Bound(tuple(args))
    for i, a in enumerate(args):
        p = kf._buffers.get(i)
        if isinstance(a, torch.Tensor):
            if a.device.type != device_type:
                raise BindingError(
                    f"kernel '{name}': argument {i} is on {a.device}; this library "
                    f"(target {kf._lib._target}) runs {device_type} tensors"
                )
            if a.is_conj() or a.is_neg():
                # PyTorch binds the storage and ignores the bits; a Mac reads the unresolved values
                bit = "conjugate" if a.is_conj() else "negative"
                warnings.warn(
                    f"kernel '{name}': argument {i} has the {bit} bit set; PyTorch binds its storage "
                    "and Metal reads the values without the conjugation/negation, as here. Pass "
                    ".resolve_conj().resolve_neg() if the kernel should see them",
                    BindingWarning,
                    stacklevel=4,
                )
            if b.first_numel is None:
                b.first_numel = a.numel()
            avail = a.untyped_storage().nbytes() - a.storage_offset() * a.element_size()
            if p is not None:
                if not (p.is_pointer or p.is_reference):
                    raise BindingTypeError(
                        f"kernel '{name}': argument {i} is a tensor but {describe(p)} is a value"
                    )
                if p.address_space not in ("device", "constant"):
                    raise BindingTypeError(
                        f"kernel '{name}': argument {i}: {describe(p)} is not in the device or "
                        "constant address space"
                    )
                want = elem_of(p.base_type)
                if want is not None and a.dtype not in _ELEM_DTYPES[want]:
                    raise BindingTypeError(
                        f"kernel '{name}': argument {i} is a {a.dtype} tensor but parameter "
                        f"{describe(p)} expects {want} elements "
                        f"({', '.join(str(d) for d in _ELEM_DTYPES[want])})"
                    )
                if p.is_reference:
                    need = runner.param_size(kf._index, p.position)
                    if avail < need:
                        raise BindingError(
                            f"kernel '{name}': argument {i} holds {avail} bytes but "
                            f"{describe(p)} reads {need}"
                        )
            b.ptrs.append(a.data_ptr() if avail > 0 else 0)
            b.tensors.append((i, a, avail))
            b.keep.append(a)
            continue
        if isinstance(a, (list, tuple)):
            if len(a) == 0:
                raise BindingError(
                    f"kernel '{name}': argument {i}: Empty list/tuple can not be an argument "
                    "to metal kernel"
                )
            if isinstance(a[0], torch.Tensor):
                raise BindingTypeError(
                    f"kernel '{name}': argument {i}: lists of tensors (argument buffers) are not "
                    "supported by the emulator"
                )
            if isinstance(a[0], bool) or not isinstance(a[0], (int, float)):
                raise BindingTypeError(f"kernel '{name}': argument {i}: Unexpected argument types in list")
            kind = float if isinstance(a[0], float) else int
            if not all(isinstance(x, kind) or (kind is float and isinstance(x, int)) for x in a):
                raise BindingTypeError(
                    f"kernel '{name}': argument {i}: list elements must all be "
                    f"{kind.__name__}s (torch converts the list by its first element)"
                )
        elif isinstance(a, (bool, int, float)):
            pass
        else:
            raise BindingTypeError(
                f"kernel '{name}': argument {i}: Unsupported argument type {type(a).__name__}"
            )
        try:
            data, elem = scalar_bytes(name, i, a, casts.get(i, default_cast))
        except (struct.error, OverflowError) as exc:
            raise BindingError(
                f"kernel '{name}': argument {i} does not fit its binding type: {exc}"
            ) from None
        if p is not None:
            if p.is_pointer is False and p.is_reference is False:
                raise BindingTypeError(f"kernel '{name}': argument {i}: {describe(p)} is a value parameter")
            pytype = "list" if isinstance(a, (list, tuple)) else type(a).__name__
            what = f"a Python {pytype} (bound as {elem})"
            check_elem(name, i, p, elem, what)
            if p.is_reference:
                need = runner.param_size(kf._index, p.position)
                if len(data) < need:
                    raise BindingError(
                        f"kernel '{name}': argument {i} provides {len(data)} bytes but "
                        f"{describe(p)} reads {need}"
                    )
        buf = ctypes.create_string_buffer(data, len(data))
        b.keep.append(buf)
        b.ptrs.append(ctypes.addressof(buf))
        b.scalar_sizes[i] = len(data)
    return b


def dispatch_grid(kf, b: Bound, threads: Any, group_size: Any) -> tuple[tuple, tuple] | None:
    """(grid, group) of ``dispatchThreads`` as torch computes them, after torch's checks; None for
    an empty dispatch (torch encodes it, nothing runs)."""
    name = kf.name
    th = dims(threads, "threads", name)
    gs = dims(group_size, "group_size", name)
    if th is None:
        if b.first_numel is None:
            raise BindingError(
                f"kernel '{name}': Number of threads is undefined (no tensor argument; pass threads=)"
            )
        th = [b.first_numel]
    if gs is not None and len(gs) != len(th):
        raise BindingError(
            f"kernel '{name}': threads {th} and group_size {gs} must have the same number of dimensions"
        )
    if gs is None:
        gs = [min(th[0], kf.max_threads)] if len(th) == 1 else [kf.max_threads]
    grid = (th + [1, 1])[:3]
    group = (gs + [1, 1])[:3]
    if len(gs) == 1 and gs[0] == 0 and th[0] == 0:
        return None
    if math.prod(group) > kf.max_threads:
        raise BindingError(f"kernel '{name}': Threadgroup size {group} exceeds {kf.max_threads} limit")
    if any(g == 0 for g in group):
        if math.prod(grid) == 0:
            return None
        raise BindingError(f"kernel '{name}': group_size must be positive, got {gs}")
    if math.prod(grid) == 0:
        return None
    if any(x >= 2**32 for x in grid):
        raise BindingError(f"kernel '{name}': threads {th} too large")
    return tuple(grid), tuple(group)
