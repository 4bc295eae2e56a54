"""Compiler discovery and the compile cache (shared by all targets)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from ._errors import EmulatorError

__all__ = [
    # the package's toolchain API (re-exported by mpslinalg.emulator; docs/emulator.md)
    "CompilerNotFoundError",
    "cache_dir",
    "cache_root",
    "compiler_info",
    "find_cxx",
    "load_shared_library",
    # the emulator's own use
    "ShaderCompileError",
    "cached_artifact",
    "compiler_is_zig",
    "digest",
    "find_compiler",
    "preprocess",
    "run_compiler",
]

SHIM_DIR = Path(__file__).resolve().parent / "shim"
MIN_CLANG = 17
_INSTALL_HINT = (
    "the Metal emulator needs clang >= 17: install one with `apt-get install -y clang-19`, or "
    "`pip install ziglang`, or set MPSLINALG_CXX to a clang++ command"
)


class CompilerNotFoundError(RuntimeError):
    """No usable C++ compiler (clang >= 17) was found for the emulator."""


class ShaderCompileError(EmulatorError):
    """The Metal source did not compile (the message holds the compiler's diagnostics)."""


def _clang_version(cmd: list[str]) -> str | None:
    """``clang version X.Y.Z`` of ``cmd``; remembered on disk per binary (path, mtime, size)."""
    stamp = None
    exe = shutil.which(cmd[0]) if len(cmd) == 1 else None
    if exe is not None:
        st = os.stat(exe)
        stamp = f"{os.path.realpath(exe)}:{st.st_mtime_ns}:{st.st_size}"
        memo = cache_root() / "compilers.json"
        try:
            known = json.loads(memo.read_text())
        except (OSError, ValueError):
            known = {}
        if stamp in known:
            return known[stamp]
    v = _run_version(cmd)
    if stamp is not None and v is not None:
        known[stamp] = v
        tmp = memo.with_suffix(f".{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(known))
            os.replace(tmp, memo)
        except OSError:
            pass
    return v


def _run_version(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"clang version (\d+)\.(\d+)\.(\d+)", out.stdout + out.stderr)
    if out.returncode != 0 or m is None:
        return None
    return m.group(0)


@functools.cache
def _discover(env_cxx: str) -> tuple[tuple[str, ...], str] | str:
    tried = []
    if env_cxx:
        cmd = shlex.split(env_cxx)
        v = _clang_version(cmd)
        if v is None:
            return f"MPSLINALG_CXX={env_cxx!r} is not a working clang (`{env_cxx} --version` failed)"
        return tuple(cmd), v
    for name in ("clang++-21", "clang++-20", "clang++-19", "clang++-18", "clang++-17", "clang++"):
        path = shutil.which(name)
        if path is None:
            continue
        v = _clang_version([path])
        tried.append(f"{name} ({v or 'not clang'})")
        if v is not None and int(v.split()[-1].split(".")[0]) >= MIN_CLANG:
            return (path,), v
    try:
        import importlib.util

        if importlib.util.find_spec("ziglang") is not None:
            cmd = [sys.executable, "-m", "ziglang", "c++"]
            v = _clang_version(cmd)
            if v is not None:
                return tuple(cmd), v
            tried.append("python -m ziglang c++ (failed)")
    except (ImportError, ValueError):
        pass
    return "; ".join(tried) or "no clang++ on PATH"


def find_compiler() -> list[str]:
    """The C++ compiler command the emulator uses (a list of argv words).

    Discovery order: ``$MPSLINALG_CXX``, then ``clang++-21`` ... ``clang++-17``, ``clang++`` (clang
    >= 17), then ``python -m ziglang c++``.

    Raises
    ------
    CompilerNotFoundError
        When none is usable; the message says how to install one.
    """
    found = _discover(os.environ.get("MPSLINALG_CXX", "").strip())
    if isinstance(found, str):
        raise CompilerNotFoundError(f"{_INSTALL_HINT} (looked for: {found})")
    return list(found[0])


def compiler_info() -> dict | None:
    """``{"command": [...], "version": "clang version X.Y.Z"}`` or None; never raises."""
    try:
        found = _discover(os.environ.get("MPSLINALG_CXX", "").strip())
    except Exception:  # noqa: BLE001 - an environment report must not fail
        return None
    if isinstance(found, str):
        return None
    return {"command": list(found[0]), "version": found[1]}


def cache_root() -> Path:
    """The package's one cache folder: ``$MPSLINALG_CACHE_DIR`` or ``~/.cache/mpslinalg``.

    Falls back to a per-user temporary folder when the home directory is read-only (containers,
    CI sandboxes); an explicit ``$MPSLINALG_CACHE_DIR`` that cannot be created is an error.
    """
    env = os.environ.get("MPSLINALG_CACHE_DIR")
    d = Path(env) if env else Path.home() / ".cache" / "mpslinalg"
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        if env:  # an explicit choice that does not work is an error
            raise
        import tempfile

        d = Path(tempfile.gettempdir()) / f"mpslinalg-{os.getuid()}"
        d.mkdir(parents=True, exist_ok=True)
    return d


def cache_dir(kind: str = "emulator") -> Path:
    """The cache folder of one kind of generated code: ``cache_root() / kind`` (created on demand).

    Parameters
    ----------
    kind : str
        A plain folder name: ``"emulator"`` (the default: compiled Metal sources; the cuda
        target's artifacts in its ``cuda/`` subfolder), ``"small"`` (the C kernels of the small
        family), ...

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> from mpslinalg.emulator import cache_dir
    >>> cache_dir("small").name
    'small'
    """
    if not kind or not kind.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"cache_dir: kind must be a plain folder name, got {kind!r}")
    d = cache_root() / kind
    d.mkdir(parents=True, exist_ok=True)
    return d


def find_cxx() -> list[str]:
    """The package's C/C++ compiler command (clang >= 17), as a list of argv words.

    One discovery for the whole package (the emulator and the C code generators):
    ``$MPSLINALG_CXX``, then ``clang++-21`` ... ``clang++-17``, ``clang++``, then
    ``python -m ziglang c++``. It is clang's driver, so it compiles C too (pass ``-x c``).

    Raises
    ------
    CompilerNotFoundError
        When none is usable; the message says how to install one.

    Examples
    --------
    >>> from mpslinalg.emulator import find_cxx
    >>> cmd = find_cxx()  # doctest: +SKIP
    >>> subprocess.run([*cmd, "-x", "c", "-shared", "-fPIC", "f.c", "-o", "f.so"])  # doctest: +SKIP
    """
    return find_compiler()


@functools.cache
def _shim_text(target: str) -> str:
    parts = []
    # the shim, the runtime and the code generators (pre-pass, launchers) all shape the binary
    # (another target's leaves -- files named after it -- do not invalidate this target's cache)
    others = ("cuda", "cpu")
    files = [p for p in sorted(SHIM_DIR.rglob("*")) if p.is_file()]
    files += sorted(p for p in SHIM_DIR.parent.glob("_*.py") if p.name != "_bench.py")
    files = [p for p in files if not any(o in p.name for o in others if o not in target)]
    for p in files:
        parts.append(f"--- {p.name}\n{p.read_text()}")
    return f"target={target}\n" + "\n".join(parts)


def digest(target: str, source: str, flags: list[str]) -> str:
    """Cache key: sha256 of target, source, shim files, flags and compiler version."""
    info = compiler_info() or {}
    h = hashlib.sha256()
    for part in (target, _shim_text(target), " ".join(flags), repr(info), source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


# ---------------------------------------------------------------------------------------------
# cache entries that survive interrupted writes: each artifact has a sidecar with its size and
# sha256, written after the artifact is complete; an entry without a matching sidecar is rebuilt
# (a truncated shared library would otherwise fail every later process with "file too short").
# ---------------------------------------------------------------------------------------------
def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return f"{path.stat().st_size} {h.hexdigest()}"


def verify_artifact(path: Path) -> bool:
    """True when ``path`` exists and matches the size and sha256 recorded when it was stored."""
    try:
        return _sidecar(path).read_text().strip() == _file_digest(path)
    except OSError:
        return False


def discard_artifact(path: Path) -> None:
    """Remove a cache entry and its sidecar (a corrupt or unloadable one)."""
    for p in (path, _sidecar(path)):
        try:
            p.unlink()
        except OSError:
            pass


def store_artifact(tmp: Path, path: Path) -> Path:
    """Move the finished file ``tmp`` to ``path`` (atomic rename), then record its checksum."""
    stamp = _file_digest(tmp)
    os.replace(tmp, path)
    side = _sidecar(path)
    side_tmp = side.with_name(f"{side.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    side_tmp.write_text(stamp + "\n")
    os.replace(side_tmp, side)
    return path


def cached_artifact(path: Path, build) -> Path:
    """``path`` if it holds a verified artifact, else ``build(tmp)`` writes a new one, which is
    stored with its checksum. ``build`` writes the file named by its argument (a per-process
    temporary next to ``path``), so concurrent processes never see a half-written entry."""
    if verify_artifact(path):
        return path
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        build(tmp)
        return store_artifact(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_shared_library(path: Path, build):
    """``ctypes.CDLL`` of the cached shared library ``path``, built by ``build(tmp)`` when it is
    missing or corrupt (size/sha256 mismatch, or a load failure such as "file too short": the
    entry is discarded and rebuilt once)."""
    import ctypes

    cached_artifact(path, build)
    try:
        return ctypes.CDLL(str(path))
    except OSError:
        discard_artifact(path)
        cached_artifact(path, build)
        return ctypes.CDLL(str(path))


def preprocess(source: str, filename: str = "shader.metal") -> str:
    """``clang -E`` with stub Metal headers: expands our macros and headers, keeps line markers."""
    with tempfile.TemporaryDirectory(prefix="mpsle-") as td:
        path = Path(td) / filename
        path.write_text(source)
        return run_compiler(
            [
                "-E",
                "-x",
                "c++",
                "-std=c++14",
                "-nostdinc",
                "-nostdinc++",
                "-isystem",
                str(SHIM_DIR / "stub"),
                "-D__METAL_VERSION__=310",
                "-D__METAL_MACOS__=1",
                "-D__HAVE_MPSLINALG_EMULATOR__=1",
                filename,
            ],
            what="preprocessing the Metal source",
            cwd=td,
        )


def compiler_is_zig() -> bool:
    """True when the compiler found is ziglang's (clang-based, but with no CUDA mode)."""
    info = compiler_info()
    return info is not None and any("ziglang" in word for word in info["command"])


#: a compile still running after this many seconds says so on stderr (once per compile)
SLOW_COMPILE_S = 5.0


def run_compiler(args: list[str], *, what: str, input_text: str | None = None, cwd: str | None = None) -> str:
    """Run the compiler with ``args``; returns stdout or raises ShaderCompileError.

    A compile that takes longer than :data:`SLOW_COMPILE_S` prints one line on stderr saying what
    is happening (ziglang's compiler needs about two minutes on its first use)."""
    compiler = find_compiler()
    cmd = compiler + args
    with subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    ) as p:
        try:
            out, err = p.communicate(input_text, timeout=SLOW_COMPILE_S)
        except subprocess.TimeoutExpired:
            first = " (the first compile with ziglang's compiler builds its runtime: about 2 minutes)"
            sys.stderr.write(
                f"mpslinalg.emulator: {what} with {' '.join(compiler)} is taking a while"
                f"{first if compiler_is_zig() else ''}...\n"
            )
            sys.stderr.flush()
            try:
                out, err = p.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                p.kill()
                raise ShaderCompileError(f"{what} did not finish within 10 minutes") from None
    proc = subprocess.CompletedProcess(cmd, p.returncode, out, err)
    if proc.returncode != 0:
        diag = proc.stderr.strip()
        lines = diag.splitlines()
        if len(lines) > 60:
            diag = "\n".join(lines[:60] + [f"... ({len(lines) - 60} more lines)"])
        raise ShaderCompileError(f"{what} failed:\n{diag}")
    return proc.stdout
