"""Environment report, markdown tables and a plain progress bar.

Shared by the main job (``python -m mpslinalg``) and the benchmark harness (``benchmarks/``), so
their JSON files describe the machine the same way. Nothing here imports an optional package at
module level: every probe is guarded and reports what it could not find instead of raising.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from typing import TextIO

import torch

__all__ = ["Progress", "available_devices", "best_device", "blas_threads", "environment", "format_table",
           "short_error"]


def _version(module: str) -> str | None:
    try:
        mod = __import__(module)
    except Exception:  # noqa: BLE001 - a broken optional install must not break the report
        return None
    return str(getattr(mod, "__version__", "unknown"))


def _cpu_name() -> str:
    if sys.platform == "darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True,
                                 text=True, timeout=5, check=False).stdout.strip()
            if out:
                return out
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def mps_status() -> dict:
    """MPS availability: whether torch was built with it and whether a device is usable."""
    mps = getattr(torch.backends, "mps", None)
    built = bool(mps and mps.is_built())
    available = bool(mps and mps.is_available())
    out = {"built": built, "available": available}
    if available:
        # On Apple silicon the GPU is part of the SoC the CPU brand string names ("Apple M3 Max").
        out["name"] = _cpu_name()
    return out


def available_devices() -> list[str]:
    """Device strings this process can use: ``cpu``, ``cuda:i`` ..., ``mps``."""
    devs = ["cpu"]
    if torch.cuda.is_available():
        devs += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if mps_status()["available"]:
        devs.append("mps")
    return devs


def best_device() -> str:
    """The device the main job measures by default: ``mps``, else ``cuda``, else ``cpu``.

    ``mps`` first: on a Mac it is the device the library exists for.
    """
    devs = available_devices()
    if "mps" in devs:
        return "mps"
    if any(d.startswith("cuda") for d in devs):
        return "cuda"
    return "cpu"


def device_name(device: torch.device | str) -> str:
    """A human name for ``device`` (GPU model, CPU model)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev.index if dev.index is not None else torch.cuda.current_device())
    if dev.type == "mps":
        return mps_status().get("name", "Apple GPU")
    return _cpu_name()


def _backends(devices: Sequence[str]) -> dict:
    """Backend per device: the default one and the one in force now (env var / context)."""
    try:
        from ..kernels import backend_for, default_backend, requested_backend
    except ImportError as exc:
        return {"error": f"mpslinalg.kernels unavailable ({exc})",
                "default": dict.fromkeys(devices, "unknown")}
    out: dict = {"requested": requested_backend(), "default": {}, "in_use": {}}
    for d in devices:
        out["default"][d] = default_backend(torch.device(d))
        try:
            out["in_use"][d] = backend_for(torch.device(d))
        except Exception as exc:  # noqa: BLE001 - e.g. BackendUnavailableError: report, don't raise
            out["in_use"][d] = f"unavailable: {exc}"
    return out


def _emulator_compiler() -> dict:
    try:
        from ..emulator import compiler_info
    except ImportError as exc:
        return {"available": False, "note": f"mpslinalg.emulator not importable ({exc})"}
    try:
        info = compiler_info()
    except Exception as exc:  # noqa: BLE001 - compiler_info promises not to raise; be safe anyway
        return {"available": False, "note": f"compiler_info() raised {type(exc).__name__}: {exc}"}
    if not info:
        return {"available": False, "note": "no C++ compiler found (apt-get install -y clang-19, "
                                            "pip install ziglang, or set MPSLINALG_CXX)"}
    return {"available": True, **info}


def _load_average() -> float | None:
    """The 1-minute load average (runnable processes; above the core count the CPU is shared)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _openblas_thread_controls() -> list[tuple]:
    """``(get, set)`` thread-count functions of every OpenBLAS loaded in this process (NumPy's and
    SciPy's wheels each bundle one); empty where none is found (Linux ``/proc`` only)."""
    import ctypes

    try:
        with open(f"/proc/{os.getpid()}/maps", encoding="utf-8") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and ".so" in line})
    except OSError:
        return []
    controls = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_openblas_", "openblas_"):
            for suffix in ("64_", ""):
                get = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
                set_ = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
                if get is not None and set_ is not None:
                    controls.append((get, set_))
    return controls


@contextlib.contextmanager
def blas_threads(n: int | None):
    """Run the body with every loaded OpenBLAS (SciPy's LAPACK peer) on ``n`` threads, then restore.

    The main job measures torch with one thread; SciPy's OpenBLAS would use every core. On the shared
    2-core box its two threads wait for each other whenever one is descheduled: ``svdvals`` of a
    256x256 float32 took 77 ms of CPU with two threads, 3.5 ms with one (same process, load 6), so
    the SciPy column measured the scheduler. ``None``: leave the libraries as they are. Yields the
    number of libraries set.
    """
    controls = _openblas_thread_controls() if n is not None else []
    before = [int(get()) for get, _ in controls]
    for _, set_ in controls:
        set_(int(n))
    try:
        yield len(controls)
    finally:
        for (_, set_), k in zip(controls, before):
            set_(k)


def environment() -> dict:
    """Everything a result needs to be interpreted later: versions, devices, backends, compiler.

    Returns
    -------
    dict
        JSON-serialisable. Keys: ``date`` (UTC ISO 8601), ``python``, ``platform``, ``torch``,
        ``torch_cuda``, ``numpy``, ``scipy``, ``mpmath``, ``mpslinalg``, ``cpu`` (name, torch
        threads, cores), ``cuda`` (list of GPUs), ``mps`` (built/available), ``devices``,
        ``backends`` (default and in-use backend per device), ``emulator_compiler``.
    """
    devices = available_devices()
    cuda = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            cuda.append({"device": f"cuda:{i}", "name": p.name,
                         "capability": f"{p.major}.{p.minor}",
                         "memory_GiB": round(p.total_memory / 2**30, 1)})
    try:
        from .. import __version__ as ours
    except ImportError:
        ours = "unknown"
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
        "mpmath": _version("mpmath"),
        "mpslinalg": ours,
        "cpu": {"name": _cpu_name(), "torch_threads": torch.get_num_threads(), "cores": os.cpu_count(),
                "load_average": _load_average()},
        "cuda": cuda,
        "mps": mps_status(),
        "devices": devices,
        "backends": _backends(devices),
        "emulator_compiler": _emulator_compiler(),
        **_family_paths(),
    }


def _family_paths() -> dict:
    """Each family's lines of the environment block: its rows' module may define
    ``environment() -> list[(key, label, value)]`` (e.g. which implementation serves the CPU where
    no compiler is there, issue 15). ``family_lines`` keeps the labels in the families' order."""
    import importlib

    from ..registry import families

    out: dict = {"family_lines": []}
    for fam in families():
        module = importlib.import_module(fam.workloads) if fam.workloads else None
        for key, label, value in (module.environment() if hasattr(module, "environment") else ()):
            out[key] = value
            out["family_lines"].append([label, key])
    return out


def format_environment(env: dict) -> str:
    """A few readable lines describing ``env`` (as returned by :func:`environment`)."""
    lines = [
        f"mpslinalg {env['mpslinalg']}  |  torch {env['torch']}  |  python {env['python']}  |  "
        f"numpy {env['numpy']}  |  scipy {env['scipy'] or 'not installed'}",
        f"platform  {env['platform']}",
        f"cpu       {env['cpu']['name']} ({env['cpu']['cores']} cores, torch threads "
        f"{env['cpu']['torch_threads']}, load average {env['cpu'].get('load_average') or 'unknown'})",
    ]
    for g in env["cuda"]:
        lines.append(f"{g['device']:<9} {g['name']} (sm {g['capability']}, {g['memory_GiB']} GiB, "
                     f"CUDA {env['torch_cuda']})")
    mps = env["mps"]
    mps_line = "available" if mps["available"] else ("built, but no usable device" if mps["built"]
                                                    else "not built into this torch")
    if mps.get("name"):
        mps_line += f" ({mps['name']})"
    lines.append(f"mps       {mps_line}")
    if env.get("routing_table"):
        lines.append(f"routing   table in force {env['routing_table']} (docs/calibrate.md)")
    b = env["backends"]
    if "error" in b:
        lines.append(f"backends  unknown: {b['error']}")
    else:
        parts = []
        for d in env["devices"]:
            s = f"{d}: {b['default'][d]}"
            if b["in_use"][d] != b["default"][d]:
                s += f" (now: {b['in_use'][d]})"
            parts.append(s)
        lines.append(f"backends  {', '.join(parts)}  [requested: {b['requested']}]")
    c = env["emulator_compiler"]
    if c.get("available"):
        cmd = c.get("command")
        cmd = " ".join(cmd) if isinstance(cmd, (list, tuple)) else str(cmd)
        lines.append(f"emulator  {cmd} ({c.get('version', 'version unknown')})")
    else:
        lines.append(f"emulator  no compiler: {c.get('note', '')}")
    for label, key in env.get("family_lines", ()):
        lines.append(f"{label} {env[key]}")
    return "\n".join(lines)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]],
                 align: Sequence[str] | None = None) -> str:
    """A markdown table with padded columns.

    Parameters
    ----------
    headers : sequence of str
    rows : sequence of sequences
        Cells are converted with ``str``; ``|`` is escaped as ``\\|``.
    align : sequence of {"l", "r"}, optional
        Per-column alignment; default left for the first column and right for the others.
    """
    cells = [[str(c).replace("|", "\\|") for c in r] for r in rows]  # a bare | would split the cell
    ncol = len(headers)
    for r in cells:
        if len(r) != ncol:
            raise ValueError(f"format_table: a row has {len(r)} cells, expected {ncol}")
    if align is None:
        align = ["l"] + ["r"] * (ncol - 1)
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(vals: Sequence[str]) -> str:
        out = [v.ljust(w) if a == "l" else v.rjust(w) for v, w, a in zip(vals, widths, align)]
        return "| " + " | ".join(out) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if a == "r" else ("-" * (w + 2))
                         for w, a in zip(widths, align)) + "|"
    return "\n".join([line(headers), sep, *(line(r) for r in cells)])


def short_error(exc: BaseException) -> str:
    """``"TypeName: first line of the message"`` (at most 300 characters) for a report cell."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


def fmt_ms(ms: float | None) -> str:
    """Milliseconds with 3 significant digits (``"-"`` for None)."""
    if ms is None:
        return "-"
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3g}"


class Progress:
    """A dependency-free progress bar on stderr.

    On a terminal it redraws one line; otherwise (CI logs, pipes) it prints one line per step.

    Examples
    --------
    >>> import io
    >>> p = Progress(2, stream=io.StringIO())
    >>> p.start("first"); p.step("first"); p.start("second"); p.step("second"); p.close()
    """

    def __init__(self, total: int, *, stream: TextIO | None = None, width: int = 24) -> None:
        self.total = max(int(total), 0)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def _bar(self) -> str:
        frac = self.done / self.total if self.total else 1.0
        fill = int(round(frac * self.width))
        return f"[{'#' * fill}{'.' * (self.width - fill)}] {self.done}/{self.total}"

    def start(self, label: str) -> None:
        """Show that ``label`` is running (on a terminal only; a log gets the line when it is done)."""
        if self.tty:
            self.stream.write(f"\r\033[K{self._bar()} {label} ...")
            self.stream.flush()

    def step(self, label: str) -> None:
        """Mark ``label`` done: the bar counts it now."""
        self.done += 1
        text = f"{self._bar()} {label}"
        if self.tty:
            self.stream.write("\r\033[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Finish the bar (a newline on a terminal)."""
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
