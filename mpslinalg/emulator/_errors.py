"""The emulator's exceptions and warnings (shared by every target and the binding layer)."""

from __future__ import annotations

__all__ = [
    "EmulatorError",
    "BindingError",
    "BindingTypeError",
    "BindingWarning",
    "KernelFault",
    "KernelNotFoundError",
    "KernelRace",
    "KernelTimeout",
]


class EmulatorError(RuntimeError):
    """Base of the errors the emulator raises about a kernel, its source or its call (binding
    mistakes, faults and divergence inside a kernel, compile errors); each subclass also derives
    from the built-in exception code written against torch expects (ValueError, TypeError, ...)."""


# torch.mps.compile_shader reports binding mistakes through TORCH_CHECK (a RuntimeError); Python
# convention says ValueError/TypeError. These derive from both, so code written against either the
# Mac or this emulator catches them.
class BindingError(EmulatorError, ValueError):
    """A kernel call whose arguments, grid or options Metal (or torch) would not accept."""


class BindingTypeError(EmulatorError, TypeError):
    """A kernel argument of the wrong type (tensor dtype vs pointer type, int bound to float, ...)."""


class BindingWarning(UserWarning):
    """A binding PyTorch accepts silently but that rarely means what was intended (a tensor whose
    conjugate/negative bit Metal ignores)."""


class KernelNotFoundError(AttributeError, EmulatorError):
    """``lib.<name>`` for a kernel the library does not have."""


class KernelFault(EmulatorError):
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


class KernelTimeout(KernelFault):
    """A launch that did not finish within its ``timeout=`` (an endless loop, or a spin-wait on a
    value no thread of the launch will write while the spinning thread holds the CPU)."""


class KernelRace(KernelFault):
    """``tsan=True`` found data races; ``.races`` lists them (file:line of both accesses)."""

    def __init__(self, message: str, *, kernel: str = "", races: list | None = None):
        super().__init__(message, kernel=kernel)
        self.races = list(races or [])
