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
