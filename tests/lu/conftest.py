"""Fixtures of the LU family's kernel tests."""

from __future__ import annotations

import pytest
from helpers import require_emulator

from mpslinalg.kernels import load_library


@pytest.fixture(scope="module")
def lib():
    """``lib(source)``: the LU kernel group ``metal/<source>.metal`` built by the emulator for the
    CPU (skips, or fails under CI, without a compiler). Tests patch ``mpslinalg.lu.kernels``'s
    ``load_library`` with ``lambda source, device: InOrder(lib(source), ...)``, so a kernel is only
    found in the group its call site names."""
    require_emulator()
    return lambda source: load_library(source, "cpu")
