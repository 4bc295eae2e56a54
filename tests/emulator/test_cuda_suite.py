"""The emulator's kernel test-suite, unchanged, on an NVIDIA GPU through the cuda target.

Every test of ``test_emulator_kernels.py``, ``test_emulator_binding.py`` and
``test_simdgroup_matrix.py`` that takes the ``shader`` fixture (the tests that also run on real
Metal) is collected here a second time, with ``shader`` bound to the cuda target: the same
kernels, call sites and expectations, CUDA tensors, the kernels enqueued on torch's current
stream. ``order`` has one value here (the emulator-only
thread orders mean nothing on real hardware; races are hunted by ``compute-sanitizer --tool
racecheck`` in ``scripts/gpu_check.sh``). Marked ``cuda``: skipped without a CUDA device.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.cuda

_HERE = Path(__file__).resolve().parent
KERNELS = _HERE / "kernels"
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))


class CudaShader:
    """The conftest ``Shader`` protocol on the cuda target."""

    backend = "cuda"

    def __init__(self) -> None:
        self.device = torch.device("cuda")
        self._libs: dict[str, object] = {}

    def lib(self, name: str):
        if name not in self._libs:
            from mpslinalg import emulator

            src = (KERNELS / f"{name}.metal").read_text()
            self._libs[name] = emulator.compile_shader(src, target="cuda")
        return self._libs[name]

    def run(self, kernel, *args, order: str = "inorder", seed: int = 0, **kw):
        del order, seed  # emulator-only keywords: the GPU runs its own order
        kernel(*args, **kw)
        torch.cuda.synchronize()

    def tensor(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.device)


_SHADER: list[CudaShader] = []


@pytest.fixture
def shader(real_clang_for_cuda) -> CudaShader:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (torch.cuda.is_available() is False)")
    if not _SHADER:
        _SHADER.append(CudaShader())
    return _SHADER[0]


@pytest.fixture
def order() -> tuple[str, int]:
    return ("inorder", 0)


def _shader_tests(module: str) -> dict[str, object]:
    """The module's test functions that take ``shader`` (and no emulator-only fixture)."""
    mod = importlib.import_module(module)
    out = {}
    for name, fn in vars(mod).items():
        if not name.startswith("test_") or not inspect.isfunction(fn):
            continue
        params = inspect.signature(fn).parameters
        if "shader" in params and "emu" not in params and "lib" not in params:
            out[name] = fn
    return out


for _m in ("test_emulator_kernels", "test_emulator_binding", "test_simdgroup_matrix"):
    globals().update(_shader_tests(_m))
