"""Fixtures of the Cholesky family's tests: the implementation paths every op test runs through.

``path`` selects one of

* ``torch``: the ``torch`` backend as shipped (the device's ``potrf`` for the whole call on CPU);
* ``blocked``: the ``torch`` backend through mpslinalg's own blocked algorithm (``nb = 8`` so small
  matrices have several levels), diagonal blocks by the device's ``potrf``;
* ``potf2``: the same with the batch-vectorised ``potf2`` on the diagonal blocks;
* ``emulator``: the Metal kernels in the emulator (``cholesky_small``, or ``cholesky_panel`` + the
  triangular family's kernels above ``small_max``, lowered to 16 so modest sizes are blocked).

and yields ``(backend name, whether the kernels clear a failed matrix's columns)``.
"""

from __future__ import annotations

import pytest
from helpers import require_emulator

from mpslinalg.cholesky import TUNING
from mpslinalg.kernels import use_backend

PATHS = ["torch", "blocked", "potf2", "emulator"]


@pytest.fixture(params=PATHS)
def path(request, monkeypatch):
    name = request.param
    if name == "emulator":
        require_emulator()
        monkeypatch.setattr(TUNING, "small_max", 16)
        monkeypatch.setattr(TUNING, "nb", 16)
    if name in ("blocked", "potf2"):
        monkeypatch.setitem(TUNING.torch_direct_max, "cpu", 0)
        monkeypatch.setattr(TUNING, "nb", 8)
        monkeypatch.setitem(TUNING.torch_small, "cpu", "potrf" if name == "blocked" else "potf2")
    with use_backend("emulator" if name == "emulator" else "torch"):
        yield name
