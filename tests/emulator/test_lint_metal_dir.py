"""CI lint of every Metal source the project ships (top-level ``metal/``, DESIGN.md §5 "Lint").

Each ``.metal`` file is linted twice: as written (quoted includes must name one of the ``*.h``
files in ``metal/``) and as the loader hands it to the shader compiler (headers inlined with
``#line`` markers, the exact text ``compile_shader`` receives). Every ``.h`` header is linted on its
own too. The test cannot pass vacuously: it checks that it linted exactly the files the
filesystem lists, and that planting a violation in each file (or, if ``metal/`` has no ``.metal``
file yet, in a known-valid kernel) is caught.
"""

from __future__ import annotations

import os
from pathlib import Path

from mpslinalg.emulator.lint import lint_source
from mpslinalg.emulator.sources import metal_source

ROOT = Path(__file__).resolve().parents[2]
METAL = ROOT / "metal"

# Appended to a file to prove that a broken file fails the lint (the `double` rule).
PROBE = "\nkernel void lint_probe(device float* x [[buffer(0)]]) {\n  double d = x[0];\n  x[0] = d;\n}\n"
FALLBACK = (
    "#include <metal_stdlib>\nusing namespace metal;\n"
    "kernel void fill(device float* x [[buffer(0)]], uint t [[thread_position_in_grid]]) {\n"
    "  x[t] = 0.0f;\n}\n"
)


def _sources() -> tuple[list[Path], list[Path]]:
    kernels = sorted(p for p in METAL.glob("*.metal") if p.is_file())
    headers = sorted(p for p in METAL.glob("*.h") if p.is_file())
    return kernels, headers


def test_metal_directory_exists():
    assert METAL.is_dir(), f"{METAL} is missing: the .metal sources live in the top-level metal/"


def test_every_metal_file_passes_the_lint():
    kernels, headers = _sources()
    # Independent count from the filesystem: the glob above must not miss any file.
    names = sorted(os.listdir(METAL))
    assert len(kernels) == sum(n.endswith(".metal") for n in names)
    assert len(headers) == sum(n.endswith(".h") for n in names)
    header_names = [h.name for h in headers]
    report = []
    linted = 0
    for path in kernels + headers:
        text = path.read_text(encoding="utf-8")
        report += [p.format(path.name) for p in lint_source(text, name=path.name, headers=header_names)]
        linted += 1
    for path in kernels:
        # What compile_shader receives on a Mac and in the emulator: headers inlined, #line markers.
        inlined = metal_source(path.stem, root=METAL)
        report += [p.format(path.name) for p in lint_source(inlined, name=path.name)]
    assert linted == len(kernels) + len(headers)
    assert report == [], "Metal lint problems:\n" + "\n".join(report)


def test_a_planted_violation_in_each_file_is_caught():
    kernels, headers = _sources()
    targets = [(p.name, p.read_text(encoding="utf-8")) for p in kernels] or [("fallback.metal", FALLBACK)]
    header_names = [h.name for h in headers]
    for name, text in targets:
        broken = text + PROBE
        line = broken.splitlines().index("  double d = x[0];") + 1
        got = [(p.rule, p.line) for p in lint_source(broken, name=name, headers=header_names)]
        assert got == [("double", line)], f"{name}: planted `double` not reported exactly: {got}"
