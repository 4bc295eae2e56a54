"""``compile_shader`` and the library / kernel objects: torch's call shape, plus binding checks.

Shared by every target: the lint, the ``clang -E`` step, the pre-pass, the compile cache and the
binding rules live here; a target (``_cpu.CpuTarget``) only builds, loads and launches.
"""

from __future__ import annotations

import ctypes
import functools
import json
import math
import mmap
import os
import struct
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

import torch

from ._frontend import VECTOR_TYPES, Kernel, Param
from ._prepass import PrepassResult, prepass
from ._toolchain import SHIM_DIR, ShaderCompileError, digest, run_compiler
from .lint import check_source

__all__ = [
    "BindingError",
    "BindingTypeError",
    "BindingWarning",
    "KernelFault",
    "KernelNotFoundError",
    "KernelRace",
    "KernelTimeout",
    "Library",
    "KernelFunction",
    "compile_shader",
    "MAX_THREADS_PER_GROUP",
]

MAX_THREADS_PER_GROUP = 1024
RC_TIMEOUT, RC_INTERRUPT = 4, 5  # the runtime's return codes (shim/cpu_runtime.c)
TARGETS = ("cpu", "cuda")


# torch.mps.compile_shader reports binding mistakes through TORCH_CHECK (a RuntimeError); Python
# convention says ValueError/TypeError. These derive from both, so code written against either the
# Mac or this emulator catches them.
class BindingError(RuntimeError, ValueError):
    """A kernel call whose arguments, grid or options Metal (or torch) would not accept."""


class BindingTypeError(RuntimeError, TypeError):
    """A kernel argument of the wrong type (tensor dtype vs pointer type, int bound to float, ...)."""


class BindingWarning(UserWarning):
    """A binding PyTorch accepts silently but that rarely means what was intended (a tensor whose
    conjugate/negative bit Metal ignores)."""


class KernelNotFoundError(AttributeError, RuntimeError):
    """``lib.<name>`` for a kernel the library does not have."""


class KernelFault(RuntimeError):
    """A fault inside a kernel (out-of-bounds trap, bad memory access, division by zero, barrier or
    simdgroup divergence), naming the kernel, the threadgroup and the thread."""

    def __init__(
        self,
        message: str,
        *,
        kernel: str = "",
        group: tuple[int, int, int] | None = None,
        thread: tuple[int, int, int] | None = None,
    ):
        super().__init__(message)
        self.kernel = kernel
        self.group = group
        self.thread = thread


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
def _elem_of(base: str) -> str | None:
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


def _describe(p: Param) -> str:
    nm = f" {p.name}" if p.name else ""
    return f"'{p.type_text}{nm}' [[buffer({p.buffer_index})]]"


# ---------------------------------------------------------------------------------------------
# guard pages
# ---------------------------------------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_PAGE = mmap.PAGESIZE


class _Guarded:
    """A copy of a buffer between two PROT_NONE pages, the slack around it filled with a canary.

    By default the copy ends at the upper guard page (16-byte granularity), so a read or write
    past the end faults at once; a write into the slack before the start (or into the few padding
    bytes after the end) changes the canary, found by :meth:`damage` after the launch; anything
    further before the start faults on the lower guard page. ``at_start=True`` places the copy
    right after the lower guard page instead, so a write before the start faults in the thread
    that made it (used to name that thread once the canary has shown there is one).
    """

    CANARY = 0xA5
    GUARD = 16 * _PAGE  # each guard region: an index off by up to 64 KiB still faults

    def __init__(self, src_ptr: int, nbytes: int, *, at_start: bool = False):
        self.nbytes = nbytes
        padded = (nbytes + 15) // 16 * 16
        size = max(1, math.ceil(padded / _PAGE)) * _PAGE
        self.map = mmap.mmap(-1, size + 2 * self.GUARD)
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        self.low = self.base  # lower guard region
        self.data = self.base + self.GUARD  # start of the usable pages
        self.guard = self.data + size  # upper guard region
        self.ptr = self.data if at_start else self.guard - padded
        ctypes.memset(self.data, self.CANARY, size)
        if nbytes:
            ctypes.memmove(self.ptr, src_ptr, nbytes)
        for region in (self.low, self.guard):
            if _libc.mprotect(region, self.GUARD, 0) != 0:
                raise OSError(ctypes.get_errno(), "mprotect failed for a guard page")

    def copy_back(self, dst_ptr: int) -> None:
        if self.nbytes:
            ctypes.memmove(dst_ptr, self.ptr, self.nbytes)

    def release(self) -> None:
        for region in (self.low, self.guard):
            _libc.mprotect(region, self.GUARD, 3)
        self.map.close()

    def where(self, addr: int) -> str | None:
        """'past the end' / 'before the start' when ``addr`` is in a guard region, else None."""
        if self.guard <= addr < self.guard + self.GUARD:
            return "past the end"
        if self.low <= addr < self.low + self.GUARD:
            return "before the start"
        return None

    def damage(self) -> str | None:
        """'before the start' / 'past the end' when the kernel wrote into the canary slack."""
        canary = bytes([self.CANARY])
        head = ctypes.string_at(self.data, self.ptr - self.data)
        if head.strip(canary):
            return "before the start"
        tail = ctypes.string_at(self.ptr + self.nbytes, self.guard - self.ptr - self.nbytes)
        if tail.strip(canary):
            return "past the end"
        return None


_launch_lock = threading.Lock()


# ---------------------------------------------------------------------------------------------
# kernel function
# ---------------------------------------------------------------------------------------------
def _dims(v: Any, what: str, kname: str) -> list[int] | None:
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


class KernelFunction:
    """One kernel of a :class:`Library`; call it like ``torch.mps.compile_shader``'s kernels."""

    def __init__(self, library: Library, index: int, kernel: Kernel):
        self._lib = library
        self._index = index
        self.kernel = kernel
        self.name = kernel.name
        self._buffers = {p.buffer_index: p for p in kernel.params if p.kind == "buffer"}
        self._nargs = max(self._buffers, default=-1) + 1
        self._bad = [p for p in kernel.params if p.kind in ("threadgroup", "other")]
        self.max_threads = min(MAX_THREADS_PER_GROUP, kernel.max_threads or MAX_THREADS_PER_GROUP)
        self._tg_bytes = 0

    # the read-only properties of torch's kernel objects
    @property
    def max_threads_per_threadgroup(self) -> int:
        """1024, or the kernel's ``[[max_total_threads_per_threadgroup(n)]]``."""
        return self.max_threads

    @property
    def thread_execution_width(self) -> int:
        """The simdgroup width: 32."""
        return 32

    @property
    def static_thread_group_memory_length(self) -> int:
        """Bytes of kernel-scope threadgroup memory. The emulator learns the size when the kernel
        runs (declarations may depend on template arguments), so this is 0 before the first call."""
        return self._tg_bytes

    def __repr__(self) -> str:
        return f"<emulated Metal kernel {self.name!r} ({self._lib._target}) from {self.kernel.line}>"

    # -- argument binding ----------------------------------------------------------------------
    def _scalar_bytes(self, i: int, value: Any, cast: str | None) -> tuple[bytes, str]:
        if cast not in _CASTS:
            raise BindingError(
                f"kernel '{self.name}': unsupported cast instruction {cast!r} for argument {i} "
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

    def _check_elem(self, i: int, p: Param, elem: str, what: str) -> None:
        want = _elem_of(p.base_type)
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
                f"kernel '{self.name}': argument {i} is {what} but parameter {_describe(p)} expects "
                f"{want} data{hint}"
            )

    def _run_tsan(self, args, ptrs, tensors, scalar_sizes, grid, group, order, seed, limit) -> None:
        """``tsan=True``: the launch in a ThreadSanitizer subprocess (see ``_tsan.py``)."""
        from ._tsan import run_tsan

        name = self.name
        if self._lib._target != "cpu" or self._lib._source is None:
            raise BindingError(f"kernel '{name}': tsan=True is a cpu-target mode")
        spans = sorted((t.data_ptr(), t.data_ptr() + avail, i) for i, t, avail in tensors if avail)
        for (_a0, a1, i0), (b0, _b1, i1) in zip(spans, spans[1:]):
            if b0 < a1:
                raise BindingError(
                    f"kernel '{name}': tsan=True copies each argument; arguments {i0} and {i1} share memory"
                )
        sizes = {i: avail for i, _t, avail in tensors}
        buffers = [(ptrs[i], sizes.get(i, scalar_sizes.get(i, 0)), i in sizes) for i in range(len(args))]
        rc, msg, races, _raw = run_tsan(self._lib._source, name, buffers, grid, group, order, seed, limit)
        if rc == RC_TIMEOUT:
            raise KernelTimeout(f"kernel '{name}' under ThreadSanitizer {msg}", kernel=name)
        if rc != 0:
            raise KernelFault(f"kernel '{name}' failed under ThreadSanitizer: {msg}", kernel=name)
        if races:
            lines = "\n  ".join(str(r) for r in races)
            raise KernelRace(
                f"kernel '{name}': ThreadSanitizer found {len(races)} data race(s) not ordered by any "
                f"barrier:\n  {lines}",
                kernel=name,
                races=races,
            )

    def __call__(
        self,
        *args: Any,
        threads: Any = None,
        group_size: Any = None,
        arg_casts: Any = None,
        order: str = "inorder",
        seed: int = 0,
        guard: bool = False,
        tsan: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Run the kernel on CPU tensors (torch's ``compile_shader`` call shape).

        Parameters
        ----------
        *args : torch.Tensor, int, float or list of int/float
            Argument ``i`` binds ``[[buffer(i)]]``. A tensor binds its storage at its storage offset
            (strides ignored, as in Metal); an int is passed as an 8-byte ``long``, a float as a
            ``float``; lists as arrays of those.
        threads : int or list of int, optional
            Total threads per dimension (``dispatchThreads``). Default: ``numel`` of the first
            tensor argument.
        group_size : int or list of int, optional
            Threads per threadgroup. Default as torch: ``min(threads, 1024)`` in 1-D,
            ``(1024, 1, 1)`` in 2-D/3-D.
        arg_casts : str or dict of int to str, optional
            Cast Python scalars before binding: ``fp16``, ``bf16``, ``int32``, ``int16``, ``int8``,
            ``uint8``; one string for all scalars or a dict per argument index.
        order : {"inorder", "reverse", "shuffle"}
            Emulator only: order in which threads (between barriers) and threadgroups run.
        seed : int
            Emulator only: seed of the ``shuffle`` order.
        guard : bool
            Emulator only: run each buffer on a copy that ends at a protected page, so an access
            past the end raises :class:`KernelFault`.
        tsan : bool
            Emulator only: run the launch under ThreadSanitizer in a subprocess (every GPU thread a
            TSan fiber, barriers as synchronisation); raises :class:`KernelRace` listing the
            ``.metal`` lines of unordered conflicting accesses. About a second per call.
        timeout : float, optional
            Emulator only (cpu target): seconds of wall clock the launch may take before it is
            abandoned with :class:`KernelTimeout`; default ``$MPSLINALG_EMULATOR_TIMEOUT`` or 60,
            ``math.inf`` for none. Ctrl-C interrupts a launch (``KeyboardInterrupt``) either way.

        Raises
        ------
        TypeError, ValueError
            Binding errors (argument count, dtype vs pointer type, Python int for a float, ...).
        KernelFault
            A fault inside the kernel (:class:`KernelRace` for races found with ``tsan=True``,
            :class:`KernelTimeout` for a launch past its ``timeout``).
        KeyboardInterrupt
            Ctrl-C during the launch (the launch is abandoned; the emulator stays usable).
        """
        name = self.name
        if order not in ("inorder", "reverse", "shuffle"):
            raise BindingError(
                f"kernel '{name}': order must be 'inorder', 'reverse' or 'shuffle', got {order!r}"
            )
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise BindingTypeError(f"kernel '{name}': seed must be an int, got {seed!r}")
        if self._lib._target == "cuda" and timeout is not None:
            raise BindingError(
                f"kernel '{name}': timeout= is a cpu-target option (cuda launches are asynchronous)"
            )
        limit = launch_timeout(timeout, name)
        if self._bad:
            p = self._bad[0]
            raise BindingError(
                f"kernel '{name}': parameter {p.position} '{p.type_text} {p.name or ''}' cannot be bound by "
                "torch.mps.compile_shader (threadgroup-memory parameters and values without a [[buffer]] or "
                "thread-position attribute are not supported); declare threadgroup arrays inside the kernel"
            )
        if len(args) != self._nargs:
            raise BindingTypeError(
                f"kernel '{name}' takes {self._nargs} arguments (buffers 0..{self._nargs - 1}), "
                f"got {len(args)}"
            )
        if arg_casts is None:
            casts: dict[int, str] = {}
            default_cast = None
        elif isinstance(arg_casts, str):
            casts, default_cast = {}, arg_casts
        elif isinstance(arg_casts, dict):
            casts, default_cast = dict(arg_casts), None
            for key in casts:
                if isinstance(key, bool) or not isinstance(key, int) or key < 0:
                    raise BindingTypeError(f"kernel '{name}': arg_casts keys must be argument indices, got {key!r}")
        else:
            raise BindingTypeError(f"kernel '{name}': Unexpected caster arg type {type(arg_casts).__name__}")

        ptrs: list[int] = []
        scalar_sizes: dict[int, int] = {}
        keep: list[Any] = []
        tensors: list[tuple[int, torch.Tensor, int]] = []
        first_numel = None
        runner = self._lib._runner
        for i, a in enumerate(args):
            p = self._buffers.get(i)
            if isinstance(a, torch.Tensor):
                if a.device.type != self._lib._device_type:
                    raise BindingError(
                        f"kernel '{name}': argument {i} is on {a.device}; this library "
                        f"(target {self._lib._target}) runs {self._lib._device_type} tensors"
                    )
                if a.is_conj() or a.is_neg():
                    # PyTorch binds the storage and ignores the bits; a Mac reads the unresolved values
                    bit = "conjugate" if a.is_conj() else "negative"
                    warnings.warn(
                        f"kernel '{name}': argument {i} has the {bit} bit set; PyTorch binds its storage "
                        "and Metal reads the values without the conjugation/negation, as here. Pass "
                        ".resolve_conj().resolve_neg() if the kernel should see them",
                        BindingWarning,
                        stacklevel=3,
                    )
                if first_numel is None:
                    first_numel = a.numel()
                avail = a.untyped_storage().nbytes() - a.storage_offset() * a.element_size()
                if p is not None:
                    if not (p.is_pointer or p.is_reference):
                        raise BindingTypeError(
                            f"kernel '{name}': argument {i} is a tensor but {_describe(p)} is a value"
                        )
                    if p.address_space not in ("device", "constant"):
                        raise BindingTypeError(
                            f"kernel '{name}': argument {i}: {_describe(p)} is not in the device or "
                            "constant address space"
                        )
                    want = _elem_of(p.base_type)
                    if want is not None and a.dtype not in _ELEM_DTYPES[want]:
                        raise BindingTypeError(
                            f"kernel '{name}': argument {i} is a {a.dtype} tensor but parameter "
                            f"{_describe(p)} expects {want} elements "
                            f"({', '.join(str(d) for d in _ELEM_DTYPES[want])})"
                        )
                    if p.is_reference:
                        need = runner.param_size(self._index, p.position)
                        if avail < need:
                            raise BindingError(
                                f"kernel '{name}': argument {i} holds {avail} bytes but "
                                f"{_describe(p)} reads {need}"
                            )
                ptrs.append(a.data_ptr() if avail > 0 else 0)
                tensors.append((i, a, avail))
                keep.append(a)
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
                data, elem = self._scalar_bytes(i, a, casts.get(i, default_cast))
            except (struct.error, OverflowError) as exc:
                raise BindingError(
                    f"kernel '{name}': argument {i} does not fit its binding type: {exc}"
                ) from None
            if p is not None:
                if p.is_pointer is False and p.is_reference is False:
                    raise BindingTypeError(f"kernel '{name}': argument {i}: {_describe(p)} is a value parameter")
                pytype = "list" if isinstance(a, (list, tuple)) else type(a).__name__
                what = f"a Python {pytype} (bound as {elem})"
                self._check_elem(i, p, elem, what)
                if p.is_reference:
                    need = runner.param_size(self._index, p.position)
                    if len(data) < need:
                        raise BindingError(
                            f"kernel '{name}': argument {i} provides {len(data)} bytes but "
                            f"{_describe(p)} reads {need}"
                        )
            buf = ctypes.create_string_buffer(data, len(data))
            keep.append(buf)
            ptrs.append(ctypes.addressof(buf))
            scalar_sizes[i] = len(data)

        th = _dims(threads, "threads", name)
        gs = _dims(group_size, "group_size", name)
        if th is None:
            if first_numel is None:
                raise BindingError(
                    f"kernel '{name}': Number of threads is undefined (no tensor argument; pass threads=)"
                )
            th = [first_numel]
        if gs is not None and len(gs) != len(th):
            raise BindingError(
                f"kernel '{name}': threads {th} and group_size {gs} must have the same number of dimensions"
            )
        if gs is None:
            gs = [min(th[0], self.max_threads)] if len(th) == 1 else [self.max_threads]
        grid = (th + [1, 1])[:3]
        group = (gs + [1, 1])[:3]
        if len(gs) == 1 and gs[0] == 0 and th[0] == 0:
            return
        if math.prod(group) > self.max_threads:
            raise BindingError(f"kernel '{name}': Threadgroup size {group} exceeds {self.max_threads} limit")
        if any(g == 0 for g in group):
            if math.prod(grid) == 0:
                return
            raise BindingError(f"kernel '{name}': group_size must be positive, got {gs}")
        if math.prod(grid) == 0:
            return
        if any(x >= 2**32 for x in grid):
            raise BindingError(f"kernel '{name}': threads {th} too large")

        if self._lib._target == "cuda":  # the cuda target's leaf (_cuda.py): enqueue on torch's stream
            if guard:
                raise BindingError(
                    f"kernel '{name}': guard=True is a cpu-target check; on the cuda target run "
                    "compute-sanitizer --tool memcheck instead"
                )
            runner.launch_cuda(self._index, name, args, ptrs, tuple(grid), tuple(group), keep)
            return
        if tsan:
            self._run_tsan(args, ptrs, tensors, scalar_sizes, grid, group, order, seed, limit)
            return
        self._launch_cpu(runner, ptrs, tensors, grid, group, order, seed, limit, guard)

    def _launch_cpu(self, runner, ptrs, tensors, grid, group, order, seed, limit, guard) -> None:
        """One cpu launch (on guarded copies with ``guard=True``), its return code decoded."""
        if not guard:
            with _launch_lock:
                rc, msg, where, addr = runner.launch(self._index, ptrs, tuple(grid), tuple(group), order, seed, limit)
                if rc == 0:
                    self._tg_bytes = runner.last_threadgroup_bytes()
            self._decode(rc, msg, where, addr, {})
            return
        spans = sorted((t.data_ptr(), t.data_ptr() + avail, i) for i, t, avail in tensors)
        for (_a0, a1, i0), (b0, _b1, i1) in zip(spans, spans[1:]):
            if b0 < a1:
                raise BindingError(
                    f"kernel '{self.name}': guard=True cannot run arguments {i0} and {i1}, which share memory"
                )
        # first with each copy ending at a guard page; a write before a start (seen in the canary)
        # runs again from the original data with each copy starting at a guard page, to name the
        # thread; the caller's tensors get the results of a clean run only
        for at_start in (False, True):
            guards: dict[int, _Guarded] = {}
            try:
                for i, t, avail in tensors:
                    guards[i] = _Guarded(t.data_ptr(), avail, at_start=at_start)
                    ptrs[i] = guards[i].ptr
                with _launch_lock:
                    rc, msg, where, addr = runner.launch(
                        self._index, ptrs, tuple(grid), tuple(group), order, seed, limit
                    )
                    if rc == 0:
                        self._tg_bytes = runner.last_threadgroup_bytes()
                damaged = {i: d for i, g in guards.items() if (d := g.damage()) is not None}
                if rc == 0 and not damaged:
                    for i, t, _avail in tensors:
                        guards[i].copy_back(t.data_ptr())
            finally:
                for g in guards.values():
                    g.release()
            self._decode(rc, msg, where, addr, guards)
            if not damaged:
                return
            if at_start or all(d == "past the end" for d in damaged.values()):
                i, d = next(iter(damaged.items()))
                raise KernelFault(
                    f"kernel '{self.name}' wrote {d} of argument {i} (guard=True found the bytes "
                    "around the buffer changed after the launch; no thread faulted on a guard page)",
                    kernel=self.name,
                )

    def _decode(self, rc: int, msg: str, where, addr: int, guards: dict) -> None:
        """Raise the Python error of a runtime return code (nothing for success)."""
        name = self.name
        if rc == 0:
            return
        if rc == RC_INTERRUPT:
            raise KeyboardInterrupt(f"kernel '{name}' interrupted")
        if rc == RC_TIMEOUT:
            raise KernelTimeout(
                f"kernel '{name}' {msg} (timeout=; an endless loop, or a spin-wait on a value that no "
                "thread writes while the spinning one runs: the emulator runs a group's threads one "
                "at a time between barriers)",
                kernel=name,
            )
        if rc == 1:
            for i, g in guards.items():
                side = g.where(addr)
                if side is not None:
                    msg = f"out-of-bounds access {side} of argument {i} (guard page)"
            grp, thr = tuple(where[0:3]), tuple(where[3:6])
            where_txt = f"threadgroup {grp}, thread {thr} (thread_position_in_threadgroup)"
            raise KernelFault(
                f"kernel '{name}' faulted in {where_txt}: {msg}", kernel=name, group=grp, thread=thr
            )
        raise BindingError(f"kernel '{name}': {msg}")


class KernelTimeout(KernelFault):
    """A launch that did not finish within its ``timeout=`` (an endless loop, or a spin-wait on a
    value no thread of the launch will write while the spinning thread holds the CPU)."""


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


class KernelRace(KernelFault):
    """``tsan=True`` found data races; ``.races`` lists them (file:line of both accesses)."""

    def __init__(self, message: str, *, kernel: str = "", races: list | None = None):
        super().__init__(message, kernel=kernel)
        self.races = list(races or [])


class Library:
    """A compiled Metal source: one attribute per kernel (``dir(lib)`` lists them).

    The library's own data lives under underscore names (``_target``, ``_key``, ``_source``), so
    that any kernel name -- ``source``, ``target``, ``key`` -- is an attribute that calls it.
    """

    def __init__(self, kernels: list[Kernel], runner: Any, target: str, key: str):
        self._kernels = {k.name: KernelFunction(self, i, k) for i, k in enumerate(kernels)}
        self._runner = runner
        self._target = target
        self._device_type = "cpu" if target == "cpu" else target
        self._key = key
        self._source: str | None = None  # set by compile_shader (the TSan mode rebuilds from it)

    def __getattr__(self, name: str) -> KernelFunction:
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        raise KernelNotFoundError(
            f"no kernel named {name!r} in this library; kernels: {', '.join(sorted(kernels))}"
        )

    def __dir__(self) -> list[str]:
        return sorted(self._kernels)

    def __repr__(self) -> str:
        return f"<emulated Metal library ({self._target}) with kernels {sorted(self._kernels)}>"


# ---------------------------------------------------------------------------------------------
# compile_shader
# ---------------------------------------------------------------------------------------------
_memo: dict[str, Library] = {}
_memo_lock = threading.Lock()


def fast_math_from_env() -> bool:
    """Fast math as PyTorch decides it: ``PYTORCH_MPS_FAST_MATH`` set to anything but ``0``."""
    val = os.environ.get("PYTORCH_MPS_FAST_MATH")
    return val is not None and val != "0"


def _target(name: str, fast_math: bool = False):
    if name == "cpu":
        from ._cpu import CpuTarget

        return CpuTarget(fast_math=fast_math)
    if name == "cuda":
        from ._cuda import CudaTarget

        return CudaTarget()
    raise BindingError(f"compile_shader: unknown target {name!r}; available targets: {', '.join(TARGETS)}")


def preprocess(source: str, filename: str = "shader.metal") -> str:
    """``clang -E`` with stub Metal headers: expands our macros and headers, keeps line markers."""
    with tempfile.TemporaryDirectory(prefix="mpsle-") as td:
        path = Path(td) / filename
        path.write_text(source)
        return run_compiler(
            [
                "-E",
                "-x",
                "c++",
                "-std=c++14",
                "-nostdinc",
                "-nostdinc++",
                "-isystem",
                str(SHIM_DIR / "stub"),
                "-D__METAL_VERSION__=310",
                "-D__METAL_MACOS__=1",
                "-D__HAVE_MPSLINALG_EMULATOR__=1",
                filename,
            ],
            what="preprocessing the Metal source",
            cwd=td,
        )


def _meta_from_json(d: dict) -> list[Kernel]:
    out = []
    for k in d["kernels"]:
        params = []
        for p in k["params"]:
            p = dict(p)
            p.pop("kind", None)
            params.append(Param(**p))
        out.append(Kernel(k["name"], k["call"], params, k["uses_sync"], k["max_threads"], k["line"]))
    return out


def compile_shader(source: str, *, target: str = "cpu", fast_math: bool | None = None) -> Library:
    """Compile Metal source for the emulator (the CPU implementation of ``torch.mps.compile_shader``).

    Parameters
    ----------
    source : str
        Self-contained MSL source (``#include <metal_stdlib>`` allowed; our own headers inlined).
    target : {"cpu", "cuda"}
        Where the kernels run. ``"cpu"``: CPU tensors, threads as fibers. ``"cuda"``: CUDA
        tensors on an NVIDIA GPU, enqueued on torch's current stream (see ``_cuda.py``; built here
        with clang + ptxas, or taken prebuilt from ``$MPSLINALG_CUBIN_DIR`` / ``.cubins/``).
    fast_math : bool, optional
        Emulator only (cpu target): compile as Metal's fast math does (no inf/nan, reassociation,
        reciprocal division, contraction, denormals flushed), to find kernels that depend on safe
        math. Default: as PyTorch decides, ``PYTORCH_MPS_FAST_MATH`` set and not ``"0"``.

    Returns
    -------
    Library
        One attribute per kernel (template instantiations by their ``host_name``); call a kernel
        as ``lib.name(*args, threads=..., group_size=..., arg_casts=...)``.

    Raises
    ------
    TypeError
        ``source`` is not a string.
    ValueError
        Unknown target; the lint or the pre-pass rejected the source (``MetalLintError``,
        ``MetalSourceError``).
    ShaderCompileError
        The compiler rejected the source (diagnostics point at the ``.metal`` lines).
    CompilerNotFoundError
        No clang >= 17 is available.

    Examples
    --------
    >>> lib = compile_shader('''
    ... #include <metal_stdlib>
    ... kernel void full(device float* out, constant float& v, uint i [[thread_position_in_grid]]) {
    ...     out[i] = v;
    ... }''')  # doctest: +SKIP
    >>> x = torch.zeros(4); lib.full(x, 3.0)  # doctest: +SKIP
    """
    if not isinstance(source, str):
        raise BindingTypeError(f"compile_shader: source must be a str, got {type(source).__name__}")
    if fast_math is not None and not isinstance(fast_math, bool):
        raise BindingTypeError(f"compile_shader: fast_math must be a bool or None, got {fast_math!r}")
    if fast_math and target != "cpu":
        raise BindingError(f"compile_shader: fast_math=True is a cpu-target mode, not {target!r}")
    fast = fast_math if fast_math is not None else (target == "cpu" and fast_math_from_env())
    tgt = _target(target, fast) if target == "cpu" else _target(target)
    if check_source is not None:
        check_source(source)
    flags = tgt.flags()
    key = tgt.key(source, flags) if hasattr(tgt, "key") else digest(tgt.name, source, flags)
    with _memo_lock:
        lib = _memo.get(key)
        if lib is not None:
            return lib
        from ._toolchain import cache_dir

        meta_path = cache_dir() / f"{key}.json"
        art = tgt.artifact(key)
        kernels = None
        if art is not None and hasattr(tgt, "kernels"):  # the artifact carries its own manifest
            kernels = tgt.kernels(art)
        elif art is not None and meta_path.exists():
            try:
                kernels = _meta_from_json(json.loads(meta_path.read_text()))
            except (ValueError, KeyError, TypeError):
                kernels = None
        if kernels is None:
            pre: PrepassResult = prepass(preprocess(source))
            art = tgt.build(pre, key)
            kernels = pre.kernels
            tmp = meta_path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"kernels": [k.to_dict() for k in kernels]}))
            os.replace(tmp, meta_path)
        try:
            runner = tgt.load(art)
        except OSError:  # verified but unloadable (e.g. built by another libc): rebuild once
            pre = prepass(preprocess(source))
            runner = tgt.load(tgt.build(pre, key))
        lib = Library(kernels, runner, tgt.name, key)
        lib._source = source
        lib._fast_math = fast
        _memo[key] = lib
        return lib


__all__ += ["ShaderCompileError", "preprocess"]
