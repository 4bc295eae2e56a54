"""Test support importable from any test module (``from helpers import require_emulator``).

Kept out of ``conftest.py``: with several ``conftest.py`` files in the tree, ``import conftest``
resolves to whichever was loaded last.
"""

from __future__ import annotations

import os

import pytest

MPS_REASON = "needs an Apple GPU (torch.backends.mps.is_available() is False on this machine)"


def emulator_compiler_problem() -> str | None:
    """None when the emulator can compile here, else why not."""
    try:
        from mpslinalg import emulator
    except ImportError as exc:
        return f"mpslinalg.emulator not importable: {exc}"
    try:
        emulator.find_compiler()
    except Exception as exc:  # CompilerNotFoundError
        return f"no compiler for the emulator: {exc}"
    return None


def require_emulator() -> None:
    """Skip (or, under CI, fail) when the emulator has no compiler."""
    problem = emulator_compiler_problem()
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the emulator tests: {problem}")
    pytest.skip(problem)


class InOrder:
    """An emulator kernel library whose every kernel call gets the emulator-only ``order``/``seed``
    keywords (and any ``extra`` ones, e.g. ``guard=True``), so a family's own call sites
    (``monkeypatch`` its ``load_library``) run in that thread order: kernel tests exercise the
    library's launch code, not a copy of it."""

    def __init__(self, lib, order: str, seed: int, **extra):
        self._lib, self._kw = lib, dict(order=order, seed=seed, **extra)

    def __getattr__(self, name):
        fn = getattr(self._lib, name)
        return lambda *args, **kw: fn(*args, **self._kw, **kw)


#: The emulator's thread orders every kernel test runs in (a missing barrier shows in some).
ORDERS = [("inorder", 0), ("reverse", 0), ("shuffle", 1), ("shuffle", 2)]
ORDER_IDS = [f"{o}{s}" for o, s in ORDERS]


class NoHostSync:
    """A context manager that fails any host read of a tensor's values on any device (``item``,
    ``bool``/``int``/``float``, ``tolist``, ``nonzero``, ``numpy``...): the CPU-side check that an
    ``_ex`` op never synchronises (on CUDA ``torch.cuda.set_sync_debug_mode("error")`` checks the same).

    It is a ``TorchDispatchMode``: the reads are ``aten._local_scalar_dense`` (item/bool/int/
    float/tolist) and data-dependent-shape ops (``nonzero``, ``masked_select``, ``unique``).
    """

    _FORBIDDEN = ("_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique2",
                  "unique_consecutive", "equal", "is_nonzero")

    def __enter__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        forbidden = self._FORBIDDEN

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = func.overloadpacket.__name__
                if name in forbidden:
                    raise AssertionError(f"host synchronisation: aten.{name} inside a no-sync region")
                return func(*args, **(kwargs or {}))

        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self._mode.__exit__(*exc)
