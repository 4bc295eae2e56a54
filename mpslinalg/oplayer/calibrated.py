"""The routing table in force on a device type: calibrated on this machine, loaded from a file, or
the shipped default (issue 36; docs/calibrate.md).

``python -m mpslinalg calibrate`` (:mod:`mpslinalg.mainjob.calibrate`) times mpslinalg's ops
against torch.linalg on the present device and writes the measured table to a per-user cache,
one file per device type and device name (:func:`cache_path`), keyed by the device's name, the OS,
torch's and mpslinalg's versions (:func:`key`). :func:`resolve` is what the front doors' table
(:data:`mpslinalg.oplayer.table.WHEN`) calls at its first read on a device type:

1. ``$MPSLINALG_ROUTING_TABLE=FILE``: a table exported with ``calibrate --export FILE`` (e.g. one
   attached to a bug report), used whatever machine it was measured on;
2. the cached table, when its key is this machine's (device name, OS, torch, mpslinalg);
3. the shipped default (the families' ``when`` regions).

A table that cannot be read, or whose key is another machine's or version's (stale), is ignored
with one warning. The cache directory is ``$MPSLINALG_CACHE_DIR``, else
``$XDG_CACHE_HOME/mpslinalg``, else ``~/.cache/mpslinalg``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import subprocess
import sys
import warnings
from pathlib import Path

import torch

__all__ = ["FORMAT", "cache_dir", "cache_path", "decode", "encode", "key", "load", "resolve", "save"]

#: The ``format`` field of a table file.
FORMAT = "mpslinalg-routing-table/1"
#: The key fields a cached table must match.
KEY_FIELDS = ("device_type", "device_name", "os", "torch", "mpslinalg")
_DTYPES = {"float32": torch.float32, "float64": torch.float64, "complex64": torch.complex64,
           "complex128": torch.complex128}


def cache_dir() -> Path:
    """Where calibrated tables are kept (``$MPSLINALG_CACHE_DIR``, ``$XDG_CACHE_HOME/mpslinalg``,
    ``~/.cache/mpslinalg``)."""
    if os.environ.get("MPSLINALG_CACHE_DIR"):
        return Path(os.environ["MPSLINALG_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mpslinalg"


def device_name(device: str) -> str:
    """The name of this machine's ``device`` (a device type): the CPU's or the GPU's model."""
    if device == "cuda":
        return torch.cuda.get_device_name(torch.cuda.current_device()) if torch.cuda.is_available() else "no cuda"
    if sys.platform == "darwin":  # mps and cpu on a Mac: the chip ("Apple M2 Pro")
        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
                                 timeout=5, check=False).stdout.strip()
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
    return platform.processor() or platform.machine() or "unknown"


def key(device: str) -> dict:
    """The key a table measured on ``device`` (a device type) carries, for this machine now."""
    ours = getattr(sys.modules.get("mpslinalg"), "__version__", "unknown")
    return {"device_type": device, "device_name": device_name(device),
            "os": f"{platform.system()} {platform.release()}", "torch": torch.__version__, "mpslinalg": ours}


def cache_path(k: dict) -> Path:
    """The cache file of a table with key ``k``."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", k["device_name"]).strip("-").lower() or "device"
    return cache_dir() / f"routing-{k['device_type']}-{slug}.json"


def encode(table: dict) -> dict:
    """``{op: {dtype: regions}}`` as JSON: dtype names, regions as lists."""
    return {op: {str(dt).removeprefix("torch."): [list(r) for r in regions] for dt, regions in by.items()}
            for op, by in table.items()}


def decode(ops: dict) -> dict:
    """The inverse of :func:`encode`; ``ValueError`` for anything that is not such a table."""
    if not isinstance(ops, dict):
        raise ValueError("'table' is not an object")
    out = {}
    for op, by in ops.items():
        if not isinstance(by, dict):
            raise ValueError(f"{op!r}: not an object of dtypes")
        out[op] = {}
        for name, regions in by.items():
            if name not in _DTYPES:
                raise ValueError(f"{op!r}: unknown dtype {name!r}")
            rs = tuple(tuple(int(x) for x in r) for r in regions)
            if any(len(r) != 3 or r[0] > r[1] or r[2] < 0 for r in rs):
                raise ValueError(f"{op!r} {name}: regions must be [n_min <= n_max, batch_min >= 0]")
            out[op][_DTYPES[name]] = rs
    return out


def save(device: str, table: dict, rows: list | None = None, path: Path | None = None,
         extra: dict | None = None) -> Path:
    """Write ``table`` (``{op: {dtype: regions}}``, measured on ``device``) with this machine's key
    to the cache (or ``path``); returns the file written."""
    k = key(device)
    path = cache_path(k) if path is None else Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"format": FORMAT, "key": k, "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           **(extra or {}), "table": encode(table), "rows": rows or []}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a file
    return path


def load(path: Path | str) -> dict:
    """Read a table file: ``{"key": ..., "table": {op: {dtype: regions}}, ...}``; ``ValueError`` when
    it is not one (unreadable, not JSON, another format)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read it ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("key"), dict):
        raise ValueError(f"not a routing table (its 'format' is not {FORMAT!r})")
    doc["table"] = decode(doc.get("table"))
    return doc


def resolve(device: str, shipped: dict) -> tuple[dict, str]:
    """The table in force on ``device`` (a device type) and where it came from (module docstring).

    A measured table replaces the shipped regions of the ops it measured; the other ops keep theirs.
    """
    env = os.environ.get("MPSLINALG_ROUTING_TABLE")
    if env:
        try:
            doc = load(env)
        except ValueError as exc:
            warnings.warn(f"mpslinalg: $MPSLINALG_ROUTING_TABLE={env}: ignored, {exc}", RuntimeWarning, stacklevel=2)
        else:
            k = doc["key"]
            if k.get("device_type") == device:
                return ({**shipped, **doc["table"]},
                        f"file {env} (measured on {k.get('device_name')}, torch {k.get('torch')}, "
                        f"mpslinalg {k.get('mpslinalg')})")
    try:
        here = key(device)
    except Exception:  # noqa: BLE001 - e.g. CUDA unusable: no calibrated table can be matched
        return dict(shipped), "shipped default"
    path = cache_path(here)
    if not path.exists():
        return dict(shipped), "shipped default"
    try:
        doc = load(path)
    except ValueError as exc:
        warnings.warn(f"mpslinalg: the calibrated routing table {path} is ignored: {exc}; "
                      f"run `python -m mpslinalg calibrate` again", RuntimeWarning, stacklevel=2)
        return dict(shipped), "shipped default"
    stale = [f for f in KEY_FIELDS if doc["key"].get(f) != here[f]]
    if stale:
        theirs = ", ".join(f"{f} {doc['key'].get(f)!r}" for f in stale)
        ours = ", ".join(repr(here[f]) for f in stale)
        warnings.warn(f"mpslinalg: the calibrated routing table {path} is stale (its {theirs}, here {ours}): "
                      f"ignored; run `python -m mpslinalg calibrate` again", RuntimeWarning, stacklevel=2)
        return dict(shipped), "shipped default"
    return {**shipped, **doc["table"]}, f"calibrated {path} ({doc.get('created', '?')})"
