"""Fixtures of the LU family's kernel tests."""

from __future__ import annotations

import pytest
from helpers import require_emulator

from mpslinalg.kernels import load_library


@pytest.fixture(scope="module")
def lib():
    """``metal/lu.metal`` built by the emulator for the CPU (skips, or fails under CI, without a
    compiler)."""
    require_emulator()
    return load_library("lu", "cpu")
