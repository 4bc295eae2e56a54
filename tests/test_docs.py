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


#: A page a user reads stays short enough to read (issue 29); the measurement journals behind the pages
#: live in docs/evidence/, exempt.
MAX_PAGE_LINES = 300


def _doc_pages() -> list[Path]:
    return sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs" / "ops").glob("*.md"))


def test_user_pages_are_short():
    pages = _doc_pages()
    assert len(pages) >= 10, "docs/*.md and docs/ops/*.md not found (the test would be vacuous)"
    long = {p.relative_to(ROOT).as_posix(): n for p in pages
            if (n := len(p.read_text().splitlines())) > MAX_PAGE_LINES}
    assert not long, f"pages over {MAX_PAGE_LINES} lines (move journals to docs/evidence/): {long}"


def test_every_page_has_its_evidence_linked():
    """Each journal in docs/evidence/ is linked from at least one page outside it."""
    journals = sorted((ROOT / "docs" / "evidence").glob("*.md"))
    assert journals, "docs/evidence/ is empty (the test would be vacuous)"
    text = "\n".join(p.read_text() for p in _doc_pages())
    unlinked = [j.name for j in journals if f"evidence/{j.name})" not in text]
    assert not unlinked, f"journals no page links to: {unlinked}"


_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")  # [text](target); images are not used
_ROOT_PATH = re.compile(r"`(docs/[\w./-]+\.md)`")  # `docs/...md` written from the repository root


def test_relative_links_in_docs_resolve():
    files = sorted((ROOT / "docs").rglob("*.md"))
    broken, seen = [], 0
    for p in files:
        text = p.read_text()
        for target in _LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a URL or an anchor on the same page
            seen += 1
            if not (p.parent / target.split("#", 1)[0]).exists():
                broken.append(f"{p.relative_to(ROOT)}: ({target})")
        for target in _ROOT_PATH.findall(text):
            seen += 1
            if not (ROOT / target).exists():
                broken.append(f"{p.relative_to(ROOT)}: `{target}`")
    assert seen >= 10, f"only {seen} links found in docs/ (the test would be vacuous)"
    assert not broken, f"links that resolve to no file: {broken}"
