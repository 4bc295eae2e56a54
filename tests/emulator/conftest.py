"""Harness for the emulator's own tests.

``shader`` compiles a test kernel file with the emulator (CPU tensors) or, marked ``mps``, with
``torch.mps.compile_shader`` on a Mac (mps tensors): the kernel tests that make sense on real
Metal run there with the same expectations. ``run(kernel, *args, order=..., **kw)`` passes the
emulator-only keywords (``order``, ``seed``) only to the emulator.

``order`` parametrises a test over the execution orders that expose missing barriers: in order,
reversed and two shuffles.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import require_emulator  # tests/helpers.py: skip, or fail under CI, without a compiler

KERNELS = Path(__file__).resolve().parent / "kernels"

ORDERS = [("inorder", 0), ("reverse", 0), ("shuffle", 1), ("shuffle", 2)]


class Shader:
    """Compile and run test kernels on one backend ('emulator' or 'metal')."""

    def __init__(self, backend: str):
        self.backend = backend
        self.device = torch.device("cpu" if backend == "emulator" else "mps")
        self._libs: dict[str, object] = {}

    def lib(self, name: str):
        if name not in self._libs:
            src = (KERNELS / f"{name}.metal").read_text()
            if self.backend == "emulator":
                from mpslinalg import emulator

                self._libs[name] = emulator.compile_shader(src)
            else:
                self._libs[name] = torch.mps.compile_shader(src)
        return self._libs[name]

    def run(self, kernel, *args, order: str = "inorder", seed: int = 0, **kw):
        if self.backend == "emulator":
            kernel(*args, order=order, seed=seed, **kw)
        else:
            kernel(*args, **kw)
            torch.mps.synchronize()

    def tensor(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.device)


_SHADERS: dict[str, Shader] = {}


@pytest.fixture(params=["emulator", pytest.param("metal", marks=pytest.mark.mps)])
def shader(request) -> Shader:
    if request.param == "emulator":
        require_emulator()
    return _SHADERS.setdefault(request.param, Shader(request.param))


@pytest.fixture
def emu() -> Shader:
    """Emulator only (faults, orders, binding checks Metal does not make)."""
    require_emulator()
    return _SHADERS.setdefault("emulator", Shader("emulator"))


@pytest.fixture(params=ORDERS, ids=[f"{o}{s or ''}" for o, s in ORDERS])
def order(request) -> tuple[str, int]:
    return request.param


def skip_if_zig_builds_cuda() -> None:
    """Skip (issue 15.3): ziglang's compiler has no CUDA mode, and there are no prebuilt artifacts."""
    import os

    from mpslinalg.emulator import _toolchain

    if _toolchain.compiler_is_zig() and not os.environ.get("MPSLINALG_CUBIN_DIR"):
        pytest.skip("the cuda target needs a real clang (only ziglang's compiler is installed)")


@pytest.fixture
def real_clang_for_cuda() -> None:
    """The cuda target's build needs a real clang: skip with that reason under ziglang."""
    skip_if_zig_builds_cuda()


@pytest.fixture
def still_works(emu):
    """A check to call after a fault: the emulator (and this interpreter) keep working."""

    def check() -> None:
        out = torch.zeros(5)
        emu.lib("binding").fill(out, 4.0)
        assert out.tolist() == [4.0] * 5

    return check
