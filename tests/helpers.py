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
                  "unique_consecutive", "unique_dim", "equal", "is_nonzero")

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


def adjugate(A):
    """The adjugate of ``(..., n, n)`` by cofactors, ``adj(A)[j, i] = (-1)^(i+j) det(A without row i
    and column j)``, in float64/complex128: the reference for det's gradient (``adj(A)ᴴ``), which at
    a singular matrix no ``det(A)·A⁻¹`` formula gives."""
    import torch

    A = A.to(torch.complex128 if A.is_complex() else torch.float64)
    n = A.shape[-1]
    out = torch.empty_like(A)
    for i in range(n):
        for j in range(n):
            rows = [r for r in range(n) if r != i]
            cols = [c for c in range(n) if c != j]
            out[..., j, i] = (-1) ** (i + j) * torch.linalg.det(A[..., rows, :][..., :, cols])
    return out


def gaussian(shape, dtype, seed: int):
    """A seeded standard normal ``shape`` tensor of ``dtype``, drawn in float64 (complex: real and
    imaginary parts each standard normal, real part first) and rounded: the same matrix to rounding
    in every precision."""
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if dtype.is_complex:
        x = torch.complex(x, torch.randn(shape, generator=g, dtype=torch.float64))
    return x.to(dtype)


#: The repository root (the parent of ``tests/``).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


#: The oldest Triton whose interpreter ran every ``*_interpreted`` check (CI's: the test extra leaves
#: Triton unpinned, so torch's CUDA build keeps the one it pins, e.g. 3.7.1 for torch 2.13, and a CPU
#: torch gets the newest). Older ones skip with the reason: Triton 3.6's interpreter raised
#: ``TypeError: only 0-dimensional arrays can be converted to Python scalars`` at the kernels' ``range``
#: loops with NumPy 2.4 (docs/testing.md); 3.7 and 3.8 were not tried.
INTERPRETER_TRITON = (3, 9)


def _triton_version() -> tuple[int, ...]:
    """The installed Triton's release as a tuple of ints (``importlib.metadata``: no import of Triton,
    which reads ``TRITON_INTERPRET`` once, at its import)."""
    import importlib.metadata
    import re

    release = re.match(r"\d+(\.\d+)*", importlib.metadata.version("triton"))
    return tuple(int(x) for x in release.group(0).split(".")) if release else (0,)


def run_interpreted(code: str, timeout: int = 900) -> None:
    """Run ``code`` in a Python subprocess under Triton's interpreter (``TRITON_INTERPRET=1``); it
    must finish without an exception. A subprocess because Triton reads ``TRITON_INTERPRET`` when it
    is imported. The child runs in the repository root with it and ``tests/`` first on its path (so
    a mutated copy of the tree imports its own modules). Skips where Triton is not installed (it
    ships with CUDA builds of torch).
    """
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("triton") is None:
        pytest.skip("Triton is not installed (it ships with CUDA builds of torch; the test extra installs it "
                    "on x86-64 Linux)")
    installed = _triton_version()
    if installed < INTERPRETER_TRITON:
        have, need = (".".join(map(str, v)) for v in (installed, INTERPRETER_TRITON))
        pytest.skip(f"Triton {have} is older than the {need} these interpreter checks were verified with (3.6's "
                    "interpreter fails at the kernels' range loops with NumPy 2.4); torch's CUDA build pins its own "
                    "Triton, so run them in a venv with the CPU torch, where the test extra installs the newest")
    path = [ROOT, os.path.join(ROOT, "tests"), os.environ.get("PYTHONPATH")]
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join(filter(None, path)))
    res = subprocess.run([sys.executable, "-c", code + "\nprint('ok')"], env=env, capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-4000:]


class FakeClock:
    """A clock that moves only when a callable says so: timing code tested with known durations.

    ``install(monkeypatch)`` puts it in place of both CPU clocks of ``mpslinalg.mainjob.timing``
    (``CPU_CLOCKS["wall"]``, which also times ``max_time``, and ``CPU_CLOCKS["process"]``);
    ``work(s)`` is a callable that "takes" ``s`` seconds; ``tick`` is what every read itself adds
    (a clock read has a cost). No test then depends on how fast this machine is right now.
    """

    def __init__(self, tick: float = 0.0):
        self.now = 0.0
        self.tick = tick
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        self.now += self.tick
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def work(self, seconds):
        """A zero-argument callable that takes ``seconds`` of this clock (``seconds`` may be a
        callable returning the next duration: varying costs)."""
        return lambda: self.advance(seconds() if callable(seconds) else seconds)

    def install(self, monkeypatch) -> FakeClock:
        from mpslinalg.mainjob import timing

        monkeypatch.setitem(timing.CPU_CLOCKS, "wall", self)
        monkeypatch.setitem(timing.CPU_CLOCKS, "process", self)
        return self
