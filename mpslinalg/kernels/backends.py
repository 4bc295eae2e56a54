"""Which backend runs an op's kernels for a given tensor.

Three backends implement every kernel contract (DESIGN §4):

``metal``
    The family's ``.metal`` source compiled by ``torch.mps.compile_shader``; used for ``mps`` tensors.
``emulator``
    The *same* ``.metal`` source run by :mod:`mpslinalg.emulator` (CPU tensors; CUDA tensors once the
    emulator's cuda target exists). Selected explicitly: ``MPSLINALG_BACKEND=emulator`` or
    ``with mpslinalg.use_backend("emulator"): ...``.
``torch``
    Torch-op kernels; the default for CPU and CUDA tensors.

The request is read at call time (context manager first, then the environment variable), so tests
can switch backends without re-importing anything.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator

import torch

BACKENDS = ("torch", "emulator", "metal")
_REQUESTS = ("auto", *BACKENDS)
ENV_VAR = "MPSLINALG_BACKEND"

_requested: contextvars.ContextVar[str | None] = contextvars.ContextVar("mpslinalg_backend", default=None)


def _env_get() -> str | None:
    """``os.environ.get(ENV_VAR)`` without its two caught KeyErrors when the variable is unset (~2 µs
    on every op call; this reads os.environ's own mapping, which every change to os.environ updates)."""
    data, key, decode = _ENVIRON
    if data is None:
        return os.environ.get(ENV_VAR)
    value = data.get(key)
    return None if value is None else decode(value)


_ENVIRON = (getattr(os.environ, "_data", None), getattr(os.environ, "encodekey", None),
            getattr(os.environ, "decodevalue", None))
if not all(callable(f) for f in _ENVIRON[1:]) or not isinstance(_ENVIRON[0], dict):
    _ENVIRON = (None, None, None)  # another Python: the public (slower) lookup
else:  # the key encoded once (os.environ's encodekey: ~0.15 µs a call)
    _ENVIRON = (_ENVIRON[0], _ENVIRON[1](ENV_VAR), _ENVIRON[2])


class BackendUnavailableError(RuntimeError):
    """A backend was requested that cannot run on the given device or machine."""


def _validate(name: str, source: str) -> str:
    if name not in _REQUESTS:
        raise ValueError(f"{source}: unknown backend {name!r}; expected one of {', '.join(_REQUESTS)}")
    return name


def requested_backend() -> str:
    """The backend the caller asked for: ``use_backend`` > ``$MPSLINALG_BACKEND`` > ``"auto"``."""
    name = _requested.get()
    if name is not None:
        return name
    env = _env_get()
    if not env:
        return "auto"
    env = env.strip().lower()
    return _validate(env, f"environment variable {ENV_VAR}") if env else "auto"


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Run the ops inside the ``with`` block on backend ``name``.

    Parameters
    ----------
    name : {"auto", "torch", "emulator", "metal"}
        ``"auto"`` restores the default choice (metal for ``mps`` tensors, torch otherwise).

    Examples
    --------
    >>> import mpslinalg
    >>> with mpslinalg.use_backend("torch"):
    ...     pass
    """
    token = _requested.set(_validate(str(name).lower(), "use_backend"))
    try:
        yield
    finally:
        _requested.reset(token)


def mps_available() -> bool:
    """True when this process can run Metal (an Apple GPU and an MPS-enabled torch)."""
    return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


def default_backend(device: torch.device | str) -> str:
    """The backend used for ``device`` when nothing is requested."""
    return "metal" if torch.device(device).type == "mps" else "torch"


def backend_for(device: torch.device | str) -> str:
    """Resolve the backend that runs kernels for tensors on ``device``.

    Raises
    ------
    BackendUnavailableError
        When the requested backend cannot serve ``device`` (e.g. ``metal`` for a CPU tensor, or the
        emulator for an ``mps`` tensor).
    """
    if not isinstance(device, torch.device):
        device = torch.device(device)
    req = requested_backend()
    if req == "auto":  # the hot path of every op: no further object construction
        return "metal" if device.type == "mps" else "torch"
    if req == "torch":
        return "torch"
    if req == "metal":
        if device.type != "mps":
            raise BackendUnavailableError(
                f"backend 'metal' runs tensors on an mps device, got a tensor on {device} "
                f"(MPS available: {mps_available()}); use backend 'emulator' to run the Metal kernels "
                "on the CPU"
            )
        return "metal"
    # emulator
    if device.type == "cpu":
        return "emulator"
    if device.type == "cuda":
        return "emulator"  # the emulator's cuda target; the loader reports if it is unavailable
    raise BackendUnavailableError(
        f"backend 'emulator' runs CPU (or CUDA) tensors, got a tensor on {device}; on mps the real "
        "Metal backend is used"
    )
