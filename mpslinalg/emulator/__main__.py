"""``python -m mpslinalg.emulator``: build the emulator's artifacts ahead of time.

    python -m mpslinalg.emulator build --target cuda --out .cubins [FILE.metal ...]

compiles each file (default: every ``metal/*.metal`` of the package, as the kernel loader
assembles it, plus the emulator's own test kernels) into ``OUT/<key>.json`` (manifest),
``OUT/<key>.<sm_XY>.cubin`` and ``OUT/<key>.ptx``. A GPU machine without clang then runs the same
sources with ``MPSLINALG_CUBIN_DIR=OUT`` (or with ``OUT`` = the checkout's ``.cubins/``, which is
searched by default). The key is a hash of the source text, the shim and the code generators,
so an artifact is only used for exactly the source it was built from.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .sources import INCLUDE, inline_headers, metal_dir, metal_source


def _default_files() -> list[Path]:
    files = sorted(metal_dir().glob("*.metal"))
    tests = Path(__file__).resolve().parents[2] / "tests" / "emulator" / "kernels"
    if tests.is_dir():
        files += sorted(tests.glob("*.metal"))
    return files


def source_text(path: Path) -> str:
    """The exact text the library's call sites hand to ``compile_shader`` for ``path``.

    A family file of the package's ``metal/`` directory is assembled by the kernel loader (our
    headers inlined, ``#line`` markers); any other file is used as written (the emulator's test
    kernels are self-contained).
    """
    path = Path(path).resolve()
    try:
        in_pkg = path.parent == metal_dir().resolve()
    except FileNotFoundError:
        in_pkg = False
    if in_pkg:
        return metal_source(path.stem, root=path.parent)
    if '#include "' in path.read_text():
        # headers next to the file, else the package's own metal/*.h (scalar.h for test kernels)
        names = {m.group(2) for m in map(INCLUDE.match, path.read_text().splitlines()) if m and m.group(1) == '"'}
        root = path.parent if all((path.parent / n).is_file() for n in names) else metal_dir()
        return "\n".join(inline_headers(path, set(), root)) + "\n"
    return path.read_text()


def build(files: list[Path], out: Path, target: str, archs: list[str] | None, keep_going: bool) -> int:
    from . import _cuda
    from ._library import preprocess
    from ._prepass import prepass

    if target != "cuda":
        print(f"build: only the cuda target has ahead-of-time artifacts (got {target!r})", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    rows = []
    for f in files:
        t0 = time.perf_counter()
        try:
            src = source_text(f)
            try:
                from .lint import check_source
            except ImportError:
                check_source = None
            if check_source is not None:
                check_source(src, name=f.name)
            key = _cuda.source_key(src)
            man = _cuda.build_artifacts(prepass(preprocess(src, f.name)), key, out, archs=archs, name=f.name)
        except Exception as exc:  # noqa: BLE001 - report every file, then fail
            failed += 1
            print(f"FAILED {f}: {type(exc).__name__}: {exc}", file=sys.stderr)
            if not keep_going:
                return 1
            continue
        m = json.loads(man.read_text())
        dt = time.perf_counter() - t0
        rows.append(
            {
                "file": str(f),
                "key": key,
                "kernels": [k["meta"]["name"] for k in m["kernels"]],
                "seconds": round(dt, 3),
                **{k: round(v, 3) for k, v in m["timings"].items()},
            }
        )
        print(
            f"{f.name:28s} {key}  {len(m['kernels']):3d} kernels  {dt:6.2f} s  "
            + "  ".join(f"{k}={v:.2f}" for k, v in m["timings"].items())
        )
    (out / "index.json").write_text(json.dumps(rows, indent=1))
    return 1 if failed else 0


_DESCRIPTION = """\
Build the emulator's artifacts ahead of time.

  python -m mpslinalg.emulator build --target cuda --out .cubins [FILE.metal ...]

compiles each file (default: every metal/*.metal of the package, as the kernel loader assembles
it, plus the emulator's own test kernels) into OUT/<key>.json (manifest), OUT/<key>.<sm_XY>.cubin
and OUT/<key>.ptx. A GPU machine without clang then runs the same sources with
MPSLINALG_CUBIN_DIR=OUT (or with OUT = the checkout's .cubins/, searched by default)."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m mpslinalg.emulator",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser(
        "build",
        help="compile .metal files into cubins + manifests (cuda target)",
        description="Compile .metal files into cubins + manifests for the emulator's cuda target.",
    )
    b.add_argument("--target", default="cuda", choices=["cuda"], help="artifact target (only cuda)")
    b.add_argument("--out", required=True, type=Path, help="output folder (e.g. .cubins)")
    b.add_argument("--arch", default=None, help="comma-separated GPU architectures (default sm_90)")
    b.add_argument("--keep-going", action="store_true", help="build the other files when one fails")
    b.add_argument("files", nargs="*", type=Path, help="Metal files (default: metal/*.metal + test kernels)")
    args = ap.parse_args(argv)
    archs = [a.strip() for a in args.arch.split(",")] if args.arch else None
    files = args.files or _default_files()
    return build(files, args.out, args.target, archs, args.keep_going)


if __name__ == "__main__":
    sys.exit(main())
