"""Shared pieces of the generated-code backends (C for the CPU, Triton for CUDA).

A family writes its elementwise program once, over a small set of primitive operations (see
``_TorchPrims`` in :mod:`mpslinalg.small`). A generator runs that program once on *symbolic values*
whose operators print code into an emitter object, so the generated kernel performs exactly the
operations of the torch program. This module holds what the generators share: the operators of a
symbolic value, and the one-warning-per-process rule for falling back when generated code is
unavailable.
"""

from __future__ import annotations

import threading
import warnings

__all__ = ["SymArith", "warn_once"]


class SymArith:
    """Operators of a symbolic value of a generated kernel.

    Each operator builds an expression through the subclass's ``_bin(op, other, reflected)``, which
    prints it into the value's emitter and returns the new value.
    """

    __slots__ = ()

    def __add__(self, o):
        return self._bin("+", o)

    def __radd__(self, o):
        return self._bin("+", o, True)

    def __sub__(self, o):
        return self._bin("-", o)

    def __rsub__(self, o):
        return self._bin("-", o, True)

    def __mul__(self, o):
        return self._bin("*", o)

    def __rmul__(self, o):
        return self._bin("*", o, True)

    def __truediv__(self, o):
        return self._bin("/", o)

    def __rtruediv__(self, o):
        return self._bin("/", o, True)

    def __gt__(self, o):
        return self._bin(">", o)

    def __ge__(self, o):
        return self._bin(">=", o)

    def __lt__(self, o):
        return self._bin("<", o)

    def __eq__(self, o):  # noqa: D105 - builds an expression, like torch tensors do
        return self._bin("==", o)

    def __ne__(self, o):
        return self._bin("!=", o)

    def __and__(self, o):
        return self._bin("&", o)

    def __or__(self, o):
        return self._bin("|", o)

    def __xor__(self, o):
        return self._bin("^", o)

    __hash__ = None  # type: ignore[assignment]


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(key: str, message: str) -> bool:
    """``warnings.warn(message, RuntimeWarning)`` the first time ``key`` is seen in this process.

    Returns
    -------
    bool
        True when the warning was issued now, False when ``key`` had already warned.
    """
    with _warned_lock:
        if key in _warned:
            return False
        _warned.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    return True
