"""Counting the dispatches of one call on the emulator backend (benchmark and test support): our
kernel launches (calls of a ``load_library`` kernel of any family) and the torch ops around them,
each a dispatch on ``mps``. Views, reshapes (``_unsafe_view``) and bare allocations are not counted
(no work is encoded for them); the torch ops a kernel call makes inside its binding are not either.

    with Dispatches() as c:
        mpslinalg.eigh(A)
    c.kernels, c.ops, c.total
"""

from __future__ import annotations

import collections
import sys

from torch.utils._python_dispatch import TorchDispatchMode

_FREE = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "detach", "alias",
         "lift_fresh", "_local_scalar_dense", "_unsafe_view"}


class _Lib:
    def __init__(self, lib, counter):
        self._lib, self._counter = lib, counter

    def __getattr__(self, name):
        fn = getattr(self._lib, name)

        def launch(*args, **kw):
            self._counter.kernels[name] += 1
            with self._counter.paused():
                return fn(*args, **kw)

        return launch


class Dispatches(TorchDispatchMode):
    """``with Dispatches() as c: ...``: ``c.kernels`` (Counter of kernel names), ``c.ops`` (Counter of
    aten op names), ``c.total`` (both)."""

    def __init__(self):
        super().__init__()
        self.kernels, self.ops = collections.Counter(), collections.Counter()
        self._patched, self._paused = [], 0

    def paused(self):
        outer = self

        class _P:
            def __enter__(self):
                outer._paused += 1

            def __exit__(self, *exc):
                outer._paused -= 1

        return _P()

    def __enter__(self):
        for name, mod in list(sys.modules.items()):
            if name.startswith("mpslinalg.") and callable(getattr(mod, "load_library", None)):
                orig = mod.load_library
                self._patched.append((mod, orig))
                mod.load_library = (lambda o: lambda *a, **k: _Lib(o(*a, **k), self))(orig)
        return super().__enter__()

    def __exit__(self, *exc):
        for mod, orig in self._patched:
            mod.load_library = orig
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if not self._paused and not func.is_view and name not in _FREE:
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.kernels.values()) + sum(self.ops.values())
