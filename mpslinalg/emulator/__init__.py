"""Run the project's ``.metal`` kernels on the CPU, exactly as they are called on a Mac (DESIGN §5).

``compile_shader(source)`` is the CPU implementation of ``torch.mps.compile_shader``: the same
source, the same call shape (``lib.kernel(*args, threads=, group_size=, arg_casts=)``), on CPU
tensors. The source is pre-processed by ``clang -E``, rewritten by a token pass where C++ spells
MSL differently, compiled by clang with a shim header (``shim/cpu.h``) into a cached shared
library, and launched through ``ctypes``: threadgroups one after another, the threads of a group
as fibers when the kernel uses barriers or simdgroup collectives.

Emulator-only call keywords: ``order="inorder" | "reverse" | "shuffle"`` (with ``seed=``) to
expose missing barriers, ``guard=True`` to put every buffer's end at a protected page, and
``tsan=True`` to run the launch under ThreadSanitizer (races reported at the ``.metal`` line as
:class:`KernelRace`). Faults inside a kernel raise :class:`KernelFault`; binding mistakes raise
``TypeError`` / ``ValueError`` naming the kernel and the argument; both, and compile errors, are
:class:`EmulatorError`. See ``docs/emulator.md``.

What it cannot tell you: Apple GPU rounding (``fast::`` math, FMA contraction, tree-order
``simd_sum``), memory ordering and atomics semantics under real concurrency, whether Apple's
compiler accepts newer MSL features, and performance.
"""

from ._errors import EmulatorError
from ._frontend import MetalSourceError
from ._library import (
    BindingError,
    BindingTypeError,
    BindingWarning,
    KernelFault,
    KernelFunction,
    KernelNotFoundError,
    KernelRace,
    KernelTimeout,
    Library,
    ShaderCompileError,
    compile_shader,
    preprocess,
)
from ._toolchain import (
    CompilerNotFoundError,
    cache_dir,
    cache_root,
    compiler_info,
    find_compiler,
    find_cxx,
    load_shared_library,
)

__all__ = [
    "BindingError",
    "BindingTypeError",
    "BindingWarning",
    "CompilerNotFoundError",
    "EmulatorError",
    "KernelNotFoundError",
    "KernelFault",
    "KernelFunction",
    "KernelRace",
    "KernelTimeout",
    "Library",
    "MetalSourceError",
    "ShaderCompileError",
    "cache_dir",
    "cache_root",
    "find_cxx",
    "load_shared_library",
    "compile_shader",
    "compiler_info",
    "find_compiler",
    "preprocess",
]
