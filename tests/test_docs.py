"""The docs stay true to the code (issue 10.7): every module outside the family packages is named in
docs/architecture.md, every module of a family package in that package's docstring (a family is one
folder: adding one edits no page outside it, issue 29), and every "DESIGN §N" the code cites is a
section of docs/design.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _modules() -> list[str]:
    """Every Python module of the package, as its path relative to the repository root."""
    out = []
    for p in sorted((ROOT / "mpslinalg").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if "/shim/" in rel or p.name == "__init__.py" and p.stat().st_size < 200:
            continue  # the emulator's C shim is not Python; a bare package face names nothing
        out.append(rel)
    return out


def _family_packages() -> set[str]:
    """``mpslinalg/<family>/`` of every family that is a package (the registry discovers them)."""
    from mpslinalg import registry

    return {f"mpslinalg/{f.name}/" for f in registry.families()
            if registry.module_of(f).__file__.endswith("__init__.py")}


def test_architecture_names_every_module():
    # by its path under mpslinalg/ (lu/api.py), or by its file name where that is unique
    text = (ROOT / "docs" / "architecture.md").read_text()
    packages = _family_packages()
    mods = [m for m in _modules() if not any(m.startswith(p) for p in packages)]
    names = [m.rsplit("/", 1)[-1] for m in mods]

    def named(m: str, n: str) -> bool:
        rel = m.removeprefix("mpslinalg/")
        if n == "__init__.py" and "/" in rel:  # a package is named by its folder
            return rel.removesuffix("__init__.py") in text
        return rel in text or (names.count(n) == 1 and n in text)

    missing = [m for m, n in zip(mods, names) if not named(m, n)]
    assert not missing, f"docs/architecture.md does not name: {missing}"


def test_each_family_package_names_its_modules():
    """A family's package docstring (its ``__init__.py``) names every module of the package."""
    import ast

    packages = sorted(_family_packages())
    assert packages, "no family package discovered (the test would be vacuous)"
    for pkg in packages:
        doc = ast.get_docstring(ast.parse((ROOT / pkg / "__init__.py").read_text())) or ""
        missing = [p.name for p in sorted((ROOT / pkg).glob("*.py")) if p.name != "__init__.py" and p.name not in doc]
        assert not missing, f"{pkg}__init__.py's docstring does not name {missing}"


def test_architecture_names_no_module_that_is_gone():
    # a path written out in full (mpslinalg/...py) must exist
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"mpslinalg/[\w/]+\.py", text))
    gone = sorted(n for n in named if not (ROOT / n).exists())
    assert not gone, f"docs/architecture.md names modules that do not exist: {gone}"


def test_design_sections_cited_by_the_code_exist():
    design = (ROOT / "docs" / "design.md").read_text()
    sections = set(re.findall(r"^## (\d+b?)\.", design, re.M)) | set(re.findall(r"^### (\d+b)\.", design, re.M))
    cited = set()
    for p in list((ROOT / "mpslinalg").rglob("*.py")) + list((ROOT / "metal").glob("*")) + list(
            (ROOT / "docs").rglob("*.md")):
        cited |= set(re.findall(r"DESIGN §(\d+b?)", p.read_text(errors="replace")))
    assert cited, "no DESIGN § references found (the test would be vacuous)"
    assert cited <= sections, f"cited sections missing from docs/design.md: {sorted(cited - sections)}"
