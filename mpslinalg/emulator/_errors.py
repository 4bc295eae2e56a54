"""The emulator's exceptions and warnings (shared by every target and the binding layer)."""

from __future__ import annotations

__all__ = [
    "BindingError",
    "BindingTypeError",
    "BindingWarning",
    "KernelFault",
    "KernelNotFoundError",
    "KernelRace",
    "KernelTimeout",
]


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


class KernelTimeout(KernelFault):
    """A launch that did not finish within its ``timeout=`` (an endless loop, or a spin-wait on a
    value no thread of the launch will write while the spinning thread holds the CPU)."""


class KernelRace(KernelFault):
    """``tsan=True`` found data races; ``.races`` lists them (file:line of both accesses)."""

    def __init__(self, message: str, *, kernel: str = "", races: list | None = None):
        super().__init__(message, kernel=kernel)
        self.races = list(races or [])
