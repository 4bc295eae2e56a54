"""Shared pieces of the generated-code backends (C for the CPU, Triton for CUDA).

A family writes its elementwise program once, over a small set of primitive operations (see
``_TorchPrims`` in :mod:`mpslinalg.small`). A generator runs that program once on *symbolic values*
whose operators print code into an emitter object, so the generated kernel performs exactly the
operations of the torch program. This module holds what the generators share: the operators of a
symbolic value, and the one-warning-per-process rule for falling back when generated code is
unavailable; and :class:`CLibraries`, the one way a family builds C for the CPU (compiler discovery,
the on-disk cache, atomic builds, the batch split over threads), used by the small family's
generated C and the SVD's Jacobi kernel.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import platform
import subprocess
import tempfile
import threading
import warnings

import torch

__all__ = ["CLibraries", "SymArith", "warn_once"]


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


class CLibraries:
    """C libraries of one family, one per key (e.g. ``(n, is_complex)`` or a dtype name): built once
    per process, cached on disk by a hash of source, compiler and flags, run over the batch split
    across torch's intra-op threads.

    A subclass says what to build with :meth:`source` and declares the argument types with
    :meth:`bind`. Any failure to build or load (no compiler, a compile error, a corrupt cache entry
    that a rebuild does not fix) is recorded per key, warned about once per process, and makes
    :meth:`usable` False, so the caller takes its fallback.

    Parameters
    ----------
    tag : str
        Names the family in file names and warnings (``"small"``, ``"svd"``).
    fallback : str
        What the caller runs instead, for the warning.
    """

    def __init__(self, tag: str, fallback: str = "torch.linalg"):
        self.tag = tag
        self.fallback = fallback
        self.libs: dict[tuple, ctypes.CDLL] = {}
        self.failed: set[tuple] = set()
        self._lock = threading.Lock()
        self._pool = None

    # -- what a subclass provides ------------------------------------------------------------------

    def source(self, *key) -> tuple[str, list[str], str]:
        """``(C source, compiler flags, file stem)`` of the library for ``key``."""
        raise NotImplementedError

    def bind(self, lib: ctypes.CDLL, *key) -> None:
        """Declare ``argtypes`` of the library's functions."""

    # -- building ----------------------------------------------------------------------------------

    @staticmethod
    def compiler() -> list[str] | None:
        """The compiler command (the emulator's discovery), or None when there is none."""
        from ..emulator import _toolchain

        try:
            return _toolchain.find_compiler()
        except _toolchain.CompilerNotFoundError:
            return None

    def usable(self, *key) -> bool:
        """Build (once) the library for ``key``; False, with one warning, if that fails."""
        if key in self.libs:
            return True
        if key in self.failed:
            return False
        try:
            self.library(*key)
            return True
        except Exception as exc:  # noqa: BLE001 - any failure of generated code falls back
            self.failed.add(key)
            what = ", ".join(map(str, key))
            warn_once(f"c:{self.tag}", f"mpslinalg: the generated C for {self.tag} ({what}) is unavailable "
                      f"({type(exc).__name__}: {str(exc)[:300]}); the CPU path falls back to {self.fallback}")
            return False

    def library(self, *key) -> ctypes.CDLL:
        """The compiled library for ``key``: built once, cached in the emulator's cache directory
        (:func:`mpslinalg.emulator._toolchain.cache_dir`)."""
        lib = self.libs.get(key)
        if lib is not None:
            return lib
        with self._lock:
            lib = self.libs.get(key)
            if lib is None:
                lib = self._build(key)
                self.libs[key] = lib
        return lib

    def _build(self, key: tuple) -> ctypes.CDLL:
        from ..emulator import _toolchain

        cc = _toolchain.find_compiler()
        src, flags, stem = self.source(*key)
        h = hashlib.sha256()
        for part in (src, repr(_toolchain.compiler_info()), " ".join(flags)):
            h.update(part.encode() + b"\0")
        so = _toolchain.cache_dir() / f"{stem}_{h.hexdigest()[:20]}.so"
        if not so.exists():
            self._compile(cc, flags, src, str(so))
        try:
            lib = ctypes.CDLL(str(so))
        except OSError:  # a truncated or corrupt cache entry (an interrupted copy): rebuild it once
            so.unlink(missing_ok=True)
            self._compile(cc, flags, src, str(so))
            lib = ctypes.CDLL(str(so))
        self.bind(lib, *key)
        return lib

    @staticmethod
    def _compile(cc: list[str], flags: list[str], src: str, so: str) -> None:
        # per-process temporaries, then atomic renames: concurrent processes never see a
        # half-written source or library
        tag = f"{os.getpid()}.{threading.get_ident()}"
        c_tmp, so_tmp = f"{so[:-3]}.{tag}.c", f"{so}.{tag}.tmp"
        with open(c_tmp, "w") as f:
            f.write(src)
        try:
            proc = subprocess.run([*cc, *flags, c_tmp, "-o", so_tmp, "-lm"], capture_output=True, text=True,
                                  timeout=300)
            if proc.returncode != 0:
                raise RuntimeError(f"{' '.join(cc)} failed: {proc.stderr.strip()[-2000:]}")
            os.replace(so_tmp, so)
            os.replace(c_tmp, so[:-3] + ".c")  # kept for reading
        finally:
            for leftover in (c_tmp, so_tmp):
                if os.path.exists(leftover):
                    os.remove(leftover)

    # -- running -----------------------------------------------------------------------------------

    def _parallel(self, fn, batch: int, *args, grain: int = 4096) -> None:
        """``fn(*args, b0, b1)`` over the batch split across torch's intra-op thread count, at least
        ``grain`` matrices a chunk (ctypes releases the GIL, so the chunks run in parallel)."""
        threads = max(1, min(torch.get_num_threads(), batch // max(1, grain)))
        if threads == 1:
            fn(*args, 0, batch)
            return
        import concurrent.futures

        if self._pool is None or self._pool._max_workers < threads:
            self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads)
        step = -(-batch // threads)
        futures = [self._pool.submit(fn, *args, b0, min(batch, b0 + step)) for b0 in range(0, batch, step)]
        for f in futures:
            f.result()


def lanes_and_flags() -> tuple[int, list[str]]:
    """Lanes and extra flags: 8 with AVX2 when this x86-64 CPU has it, else 4 (SSE2 / NEON).

    8 lanes without AVX2 is slower than scalar (register spills); timings in docs/evidence/small.md.
    """
    if platform.machine() in ("x86_64", "AMD64"):
        try:
            with open("/proc/cpuinfo") as f:
                flags = next((line for line in f if line.startswith("flags")), "")
        except OSError:
            flags = ""
        if " avx2" in flags:
            return 8, ["-mavx2"]
    return 4, []


_generated_dir: list[str] = []
_generated_lock = threading.Lock()


def load_generated(source: str, stem: str):
    """Import generated Triton source as a module (Triton's ``@jit`` needs a real file to read).

    Written once per process into a private temporary directory as ``<stem>.py``; shared by the
    families that print Triton kernels (small, SVD).
    """
    with _generated_lock:
        if not _generated_dir:
            _generated_dir.append(tempfile.mkdtemp(prefix="mpslinalg_triton_"))
        path = os.path.join(_generated_dir[0], f"{stem}.py")
        with open(path, "w") as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location(f"mpslinalg_triton_{stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module
