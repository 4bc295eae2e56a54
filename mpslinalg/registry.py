"""The family registry: every op family of the package, discovered, never listed.

A family is a module or package directly under ``mpslinalg/`` that declares ``FAMILY``
(:class:`mpslinalg.oplayer.family.Family`). :func:`families` imports each one once and returns
their declarations in ``order``; the drop-in routing, the main job, the benchmarks' GPU script and
the Metal-source and docs tests read them from here. Adding a family adds no line here
(``docs/architecture.md``, "Adding a family").
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import threading
from collections.abc import Callable
from types import ModuleType

from .oplayer.family import Family, declared

__all__ = ["families", "family_of", "module_of", "public_op", "refresh"]

#: Modules of the package that are layers or tools, not families (never imported by discovery).
_NOT_FAMILIES = frozenset({"emulator", "kernels", "mainjob", "oplayer", "registry", "routing"})

_lock = threading.Lock()
_found: dict[str, ModuleType] | None = None  # family name -> the module that declares it


def _discover() -> dict[str, ModuleType]:
    global _found
    with _lock:
        if _found is None:
            package = sys.modules[__package__]
            found: dict[str, ModuleType] = {}
            for info in pkgutil.iter_modules(package.__path__):
                if info.name in _NOT_FAMILIES or info.name.startswith("_"):
                    continue
                module = importlib.import_module(f"{__package__}.{info.name}")
                family = getattr(module, "FAMILY", None)
                if isinstance(family, Family):
                    found[family.name] = module
            _found = found
        return _found


def families() -> tuple[Family, ...]:
    """Every family's declaration, in ``order`` (imports the family modules at the first call).

    Returns
    -------
    tuple of Family
    """
    found = _discover()
    return tuple(f for f in declared() if f.name in found)


def module_of(family: Family) -> ModuleType:
    """The module (package) that declares ``family``."""
    return _discover()[family.name]


def family_of(op: str) -> Family:
    """The family that exports the public op ``op``.

    Raises
    ------
    KeyError
        No family declares ``op``.
    """
    for f in families():
        if op in f.ops:
            return f
    raise KeyError(f"no mpslinalg family declares the op {op!r}")


def public_op(op: str) -> Callable:
    """The public function ``mpslinalg.<op>`` (read from the package when called, so what a user
    sees there is what a route runs)."""
    return getattr(sys.modules[__package__], op)


def refresh() -> None:
    """Forget what was discovered (a test that adds a family to the package's path calls it)."""
    global _found
    with _lock:
        _found = None
