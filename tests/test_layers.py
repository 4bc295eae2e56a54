"""The package's layers (docs/architecture.md; issue 29): no import runs back up, and families
depend on each other only through package-level names.

Floors, bottom up: the emulator; the kernels layer (backend selection, the loader, the shared code
generators); the op layer; the families (side by side); the top (public API, registry, routing,
main job). ``reference`` (the oracles) may be imported from anywhere. Every import is read,
also those inside functions (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mpslinalg import registry

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "mpslinalg"
FLOORS = {"emulator": 0, "kernels": 1, "oplayer": 2}
TOP = {"__init__", "__main__", "registry", "routing", "mainjob"}
FAMILY_FLOOR, TOP_FLOOR = 3, 4


def _family_of_top_module() -> dict[str, str]:
    """Top-level module or package name -> its family's name (a package is its own family; a
    module is the family it declares, or that its family's declaring module imports)."""
    out = {}
    for f in registry.families():
        module = registry.module_of(f)
        name = module.__name__.split(".")[1]
        out[name] = f.name
        if not module.__file__.endswith("__init__.py"):  # a family spread over top-level modules
            for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
                if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                    first = node.module.split(".")[0]
                    if first not in FLOORS and first not in TOP:
                        out.setdefault(first, f.name)
            if f.workloads:
                out.setdefault(f.workloads.split(".")[1], f.name)
    return out


def _where(parts: tuple[str, ...], families: dict[str, str]) -> tuple[int, str | None]:
    """``(floor, family)`` of the module ``mpslinalg.<parts...>``."""
    head = parts[0] if parts else "__init__"
    if head in FLOORS:
        return FLOORS[head], None
    if head in TOP:
        return TOP_FLOOR, None
    return FAMILY_FLOOR, families.get(head, head)


def _imports(path: Path):
    """``(line, absolute module parts)`` of every import of a ``mpslinalg`` module in ``path``."""
    rel = path.relative_to(ROOT).with_suffix("").parts  # ('mpslinalg', 'lu', 'api')
    package = rel[:-1] if path.name != "__init__.py" else rel[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = (*base, *(node.module.split(".") if node.module else ()))
            else:
                mod = tuple((node.module or "").split("."))
            if mod[0] != "mpslinalg":
                continue
            for alias in node.names:  # from . import a, b: the modules a and b where they are modules
                sub = PKG.joinpath(*mod[1:], alias.name)
                named = sub.is_dir() or sub.with_suffix(".py").exists()
                yield node.lineno, (*mod, alias.name) if named else mod
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "mpslinalg":
                    yield node.lineno, tuple(alias.name.split("."))


def _modules():
    return sorted(p for p in PKG.rglob("*.py") if "/shim/" not in p.as_posix())


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(PKG).as_posix())
def test_no_import_runs_back_up(path):
    families = _family_of_top_module()
    here = path.relative_to(PKG).with_suffix("").parts
    floor, family = _where(here, families)
    dotted = ".".join(("mpslinalg", *here))
    is_rows = dotted in {f.workloads for f in registry.families()}  # a family's main-job rows
    for line, mod in _imports(path):
        target = mod[1:]
        if not target:
            assert floor == TOP_FLOOR, f"{path.name}:{line} imports the package root from below the top"
            continue
        t_floor, t_family = _where(target, families)
        if is_rows and target[:2] == ("mainjob", "workloads"):
            continue  # the rows are built from the main job's helpers, imported only by the main job
        assert t_floor <= floor, f"{path.relative_to(ROOT)}:{line} imports {'.'.join(mod)} (floor {t_floor} > {floor})"
        if floor == FAMILY_FLOOR and t_floor == FAMILY_FLOOR and t_family != family:
            # another family: only its package-level names (mpslinalg.<f>), never its modules
            top_is_package = (PKG / target[0]).is_dir()
            assert not (top_is_package and len(target) > 1), (
                f"{path.relative_to(ROOT)}:{line} imports {'.'.join(mod)}: another family's module "
                f"(use the package-level names of mpslinalg.{target[0]})")
