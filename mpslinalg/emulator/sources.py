"""The project's ``.metal`` sources as a shader compiler receives them.

A kernel group's source is ``metal/<name>.metal`` (a family's one file, or one of its kernel groups
``metal/<family>_<group>.metal``). Shared helpers live in our own ``metal/*.h`` headers, included
as ``#include "name.h"``; ``torch.mps.compile_shader`` and the emulator take one self-contained
source string, so :func:`metal_source` inlines those headers (each once, with ``#line`` markers so
compiler messages point at the right file). ``#include <metal_stdlib>`` is left alone; any other
include (``<c10/...>`` breaks editable installs) is an error. PyTorch builds the source string with
an ASCII encoding, so a source with any other byte is rejected here, before it reaches a Mac.

This module belongs to the emulator, the lowest layer: the kernel loader (``mpslinalg.kernels``)
and the emulator's ahead-of-time build both assemble sources with it.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["INCLUDE", "inline_headers", "metal_dir", "metal_source"]

#: A ``#include`` line: group 1 is ``<`` or ``"``, group 2 the name.
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]')


def metal_dir() -> Path:
    """Directory holding the ``.metal`` sources: inside the wheel, else the checkout's ``metal/``."""
    pkg = Path(__file__).resolve().parent.parent
    for candidate in (pkg / "metal", pkg.parent / "metal"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"mpslinalg: no metal/ directory next to {pkg} (broken install?)")


def _ascii_text(path: Path) -> str:
    """``path``'s text; a non-ASCII byte is an error (PyTorch passes the source as ASCII)."""
    data = path.read_bytes()
    bad = next((i for i, byte in enumerate(data) if byte > 127), None)
    if bad is not None:
        line = data.count(b"\n", 0, bad) + 1
        raise ValueError(f"{path.name}:{line}: non-ASCII byte 0x{data[bad]:02x}; Metal sources must be "
                         "ASCII (torch.mps.compile_shader encodes the source as ASCII)")
    return data.decode("ascii")


def inline_headers(path: Path, seen: set[str], root: Path) -> list[str]:
    """The lines of ``path`` with every quoted include of a ``root/*.h`` header not in ``seen``
    replaced by that header's own inlined lines (``seen`` gains the names inlined)."""
    out = [f'#line 1 "{path.name}"']
    for lineno, line in enumerate(_ascii_text(path).splitlines(), start=1):
        m = INCLUDE.match(line)
        if m is None:
            out.append(line)
            continue
        kind, name = m.groups()
        if kind == "<":
            if name != "metal_stdlib":
                raise ValueError(f"{path.name}:{lineno}: only <metal_stdlib> may be included with <>, got <{name}>")
            out.append(line)
            continue
        header = root / name
        if not header.is_file() or header.suffix != ".h":
            raise FileNotFoundError(f"{path.name}:{lineno}: included header {name!r} not found in {root}")
        if name not in seen:
            seen.add(name)
            out.extend(inline_headers(header, seen, root))
        out.append(f'#line {lineno + 1} "{path.name}"')
    return out


def metal_source(name: str, *, root: Path | None = None) -> str:
    """The self-contained source of ``metal/<name>.metal`` with our headers inlined.

    Parameters
    ----------
    name : str
        The file's stem: a family (``"qr"``) or one of its kernel groups (``"lu_small"``).
    root : Path, optional
        The directory of the sources and headers (default :func:`metal_dir`).

    Returns
    -------
    str
        The text ``compile_shader`` receives.

    Raises
    ------
    FileNotFoundError
        If the file or one of its quoted headers does not exist.
    ValueError
        If a file holds a non-ASCII byte or includes anything but ``<metal_stdlib>`` with ``<>``.
    """
    root = metal_dir() if root is None else Path(root)
    path = root / f"{name}.metal"
    if not path.is_file():
        raise FileNotFoundError(f"no Metal source {name!r}: {path} does not exist")
    return "\n".join(inline_headers(path, set(), root)) + "\n"
