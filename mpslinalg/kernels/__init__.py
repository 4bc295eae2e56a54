"""The kernel interface: backend selection and the Metal source loader (DESIGN §4).

A family (``mpslinalg/triangular/``, ``mpslinalg/lu/``, ...) asks :func:`backend_for` which backend serves
its tensors. For ``torch`` it runs its torch-op kernels; for ``metal`` and ``emulator`` it calls the
kernels of :func:`load_library` — one Python call site for both, only the shader compiler differs.
"""

from .backends import (
    BACKENDS,
    BackendUnavailableError,
    backend_for,
    default_backend,
    mps_available,
    requested_backend,
    use_backend,
)
from .loader import DTYPE_TAGS, kernel_name, load_library, metal_dir, metal_source, set_compiler

__all__ = [
    "BACKENDS",
    "BackendUnavailableError",
    "DTYPE_TAGS",
    "backend_for",
    "default_backend",
    "kernel_name",
    "load_library",
    "metal_dir",
    "metal_source",
    "mps_available",
    "requested_backend",
    "set_compiler",
    "use_backend",
]
