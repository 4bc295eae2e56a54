"""``compile_shader`` and the library / kernel objects: torch's call shape on any target.

Shared by every target: the lint, the ``clang -E`` step, the pre-pass, the compile cache and the
binding rules (``_binding.py``). A target is an object (``_cpu.CpuTarget``, ``_cuda.CudaTarget``)
with the same methods -- the target protocol below -- so nothing here branches on its name.

Target protocol
---------------
``name``, ``device_type``
    The ``target=`` name and the tensors' ``device.type``.
``options``, ``option_hints``
    The emulator-only call keywords it implements (of ``guard``, ``tsan``, ``timeout``) and, per
    keyword it lacks, what to do instead (appended to the error).
``supports_fast_math``
    Whether ``fast_math=True`` can be honoured.
``flags()``, ``key(source, flags)``
    Compiler flags and the cache key of a source.
``artifact(key)``, ``kernels(artifact)``
    A complete cached build (or None) and the kernel list stored with it (or None).
``build(prepass_result, key)``, ``load(artifact)``
    Compile (and store with its kernel list); load into a runner.

A runner has ``param_size(kernel, parameter)`` and ``launch(kernel_function, bound, grid, group,
options)``: it launches and turns whatever went wrong into the emulator's exceptions.
"""

from __future__ import annotations

import threading
from typing import Any

from . import _errors
from ._binding import LaunchOptions, bind_args, dispatch_grid, launch_timeout
from ._errors import (  # noqa: F401 - re-exported: the library's errors live with it
    BindingError,
    BindingTypeError,
    BindingWarning,
    KernelFault,
    KernelNotFoundError,
    KernelRace,
    KernelTimeout,
)
from ._frontend import Kernel
from ._prepass import prepass
from ._toolchain import ShaderCompileError, preprocess
from .lint import check_source

__all__ = [
    *_errors.__all__,
    "Library",
    "KernelFunction",
    "ShaderCompileError",
    "compile_shader",
    "preprocess",
    "MAX_THREADS_PER_GROUP",
]

MAX_THREADS_PER_GROUP = 1024
_NO_OPTIONS: frozenset = frozenset()


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
        given = _NO_OPTIONS
        if guard or tsan or timeout is not None:
            given = frozenset(k for k, v in (("guard", guard), ("tsan", tsan), ("timeout", timeout is not None)) if v)
            tgt = self._lib._tgt
            for opt in sorted(given - tgt.options):
                raise BindingError(
                    f"kernel '{name}': {opt}= is not available on the {tgt.name} target"
                    f"{tgt.option_hints.get(opt, '')}"
                )
        opts = LaunchOptions(order, seed, guard, tsan, launch_timeout(timeout, name), given)
        bound = bind_args(self, args, arg_casts)
        shape = dispatch_grid(self, bound, threads, group_size)
        if shape is None:  # an empty dispatch: torch encodes it, nothing runs
            return
        self._lib._runner.launch(self, bound, shape[0], shape[1], opts)


class Library:
    """A compiled Metal source: one attribute per kernel (``dir(lib)`` lists them).

    The library's own data lives under underscore names (``_target``, ``_key``, ``_source``), so
    that any kernel name -- ``source``, ``target``, ``key`` -- is an attribute that calls it.
    """

    def __init__(self, kernels: list[Kernel], runner: Any, target: Any, key: str):
        self._kernels = {k.name: KernelFunction(self, i, k) for i, k in enumerate(kernels)}
        self._runner = runner
        self._tgt = target  # the target object (protocol above)
        self._target = target.name
        self._device_type = target.device_type
        self._key = key
        self._source: str | None = None  # set by compile_shader (the TSan mode rebuilds from it)
        self._fast_math = False

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


def _cpu_target(fast_math: bool):
    from ._cpu import CpuTarget

    return CpuTarget(fast_math=fast_math)


def _cuda_target(fast_math: bool):
    from ._cuda import CudaTarget

    return CudaTarget()


#: target name -> factory(fast_math) of the target object
TARGETS = {"cpu": _cpu_target, "cuda": _cuda_target}


def fast_math_from_env() -> bool:
    """Fast math as PyTorch decides it: ``PYTORCH_MPS_FAST_MATH`` set to anything but ``0``."""
    import os

    val = os.environ.get("PYTORCH_MPS_FAST_MATH")
    return val is not None and val != "0"


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
    if target not in TARGETS:
        raise BindingError(f"compile_shader: unknown target {target!r}; available targets: {', '.join(TARGETS)}")
    probe = TARGETS[target](False)
    if fast_math and not probe.supports_fast_math:
        raise BindingError(f"compile_shader: fast_math=True is not available on the {target!r} target")
    fast = (fast_math if fast_math is not None else fast_math_from_env()) and probe.supports_fast_math
    tgt = TARGETS[target](fast) if fast else probe
    if check_source is not None:  # (tests switch the lint off to reach the runtime's own checks)
        check_source(source)
    key = tgt.key(source, tgt.flags())
    with _memo_lock:
        lib = _memo.get(key)
        if lib is not None:
            return lib
        art = tgt.artifact(key)
        kernels = tgt.kernels(art) if art is not None else None
        if kernels is None:
            pre = prepass(preprocess(source))
            art = tgt.build(pre, key)
            kernels = pre.kernels
        try:
            runner = tgt.load(art)
        except OSError:  # verified but unloadable (e.g. built by another libc): rebuild once
            runner = tgt.load(tgt.build(prepass(preprocess(source)), key))
        lib = Library(kernels, runner, tgt, key)
        lib._source = source
        lib._fast_math = fast
        _memo[key] = lib
        return lib
