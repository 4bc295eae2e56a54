"""``no_host_sync()``: fails a test when an op reads a device value on the host, with other
families' entry points exempt; ``no_cuda_sync(calls)``: the same check on a CUDA device, by its sync
debug mode.

On the CPU nothing synchronises, so the check (``helpers.NoHostSync``, the tests' one dispatch mode
for it) looks for what would: ``.item()``, ``bool()``, ``int()`` of a tensor
(``aten._local_scalar_dense`` / ``aten.is_nonzero``) and data-dependent output shapes
(``aten.nonzero``, ``aten.masked_select``, ``aten.unique*``). On a GPU each of these waits for the
device.
"""

from __future__ import annotations

import contextlib

import torch
from helpers import NoHostSync
from torch.utils._python_dispatch import _disable_current_modes


def _unchecked(fn):
    def run(*args, **kwargs):
        with _disable_current_modes():
            return fn(*args, **kwargs)
    return run


@contextlib.contextmanager
def no_host_sync(exempt=()):
    """Fail on any op that reads device values on the host inside the ``with`` block.

    Parameters
    ----------
    exempt : iterable of (module, attribute name)
        Entry points of *other* families to run with the check suspended. The SVD family's CPU
        path reads convergence on the host (free on the CPU; its GPU path runs a fixed sweep
        count and is checked by that family's own tests), so the ops built on it are checked
        around those calls: every op of their own is still seen.
    """
    saved = [(mod, name, getattr(mod, name)) for mod, name in exempt]
    for mod, name, fn in saved:
        setattr(mod, name, _unchecked(fn))
    try:
        with NoHostSync():
            yield
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)


def no_cuda_sync(calls) -> None:
    """Run each of ``calls`` (callables without arguments, on CUDA tensors) under
    ``torch.cuda.set_sync_debug_mode("error")``: a host synchronisation inside any of them raises.

    Each call runs once before, unchecked: a first launch may build a kernel or copy a table to the
    device, which synchronises once and is not the op's steady state.
    """
    calls = list(calls)
    for fn in calls:
        fn()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for fn in calls:
            fn()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
