"""docs/architecture.md's "Adding a family" stays true (issue 29): a family declared in its own
folder reaches every registry with no edit outside it, and no registry lists families.

A toy family is written to a temporary folder that joins the package's path (``mpslinalg.__path__``,
the mechanism Python itself uses for a package spread over folders); then the routing, the front
doors' table, the main job's rows and environment block, and the Metal-source ownership read it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

import mpslinalg
from mpslinalg import registry, routing
from mpslinalg.oplayer import family as family_mod
from mpslinalg.oplayer import table

ROOT = Path(__file__).resolve().parents[1]

TOY_INIT = '''
"""A toy family (tests/test_family_recipe.py). Modules: ``workloads.py``."""
import torch
from ..oplayer.family import Family, Route, takes

def toy_trace(A):
    return A.diagonal(dim1=-2, dim2=-1).sum(-1)

def _route(op, A):
    return op(A) if takes(A) else None

FAMILY = Family(name="toy", order=999, ops=("toy_trace",),
                routes=(Route("toy_trace", "trace", _route),),
                when={"cpu": {"toy_trace": {torch.float32: ((2, 8, 1),)}}},
                metal=("toy",), workloads="mpslinalg.toy.workloads")
'''

TOY_ROWS = '''
import torch
from ..mainjob.workloads import Workload

def workloads():
    return [Workload(op="toy_trace", name="toy trace", description="a toy row",
                     make=lambda device, dtype, quick: {"A": torch.eye(3, device=device)},
                     ours=lambda x: x["A"].trace(), peer=lambda x: x["A"].trace(),
                     accuracy=lambda x, out: ("exact", 0.0, 1.0))]

def environment():
    return [("toy_path", "toy       runs as:", "toy kernels")]
'''


@pytest.fixture
def toy_family(tmp_path, monkeypatch):
    pkg = tmp_path / "toy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(TOY_INIT)
    (pkg / "workloads.py").write_text(TOY_ROWS)
    monkeypatch.setattr(mpslinalg, "__path__", [*mpslinalg.__path__, str(tmp_path)])
    monkeypatch.setattr(family_mod, "_DECLARED", dict(family_mod._DECLARED))
    monkeypatch.setitem(table.WHEN, "cpu", dict(table.WHEN["cpu"]))
    registry.refresh()
    yield
    import sys

    for name in [m for m in sys.modules if m == "mpslinalg.toy" or m.startswith("mpslinalg.toy.")]:
        del sys.modules[name]
    registry.refresh()


def test_a_new_family_reaches_every_registry(toy_family):
    from mpslinalg.mainjob import report, workloads

    names = [f.name for f in registry.families()]
    assert names[-1] == "toy" and {"lu", "qr", "triangular", "small", "svd"} <= set(names)
    assert registry.family_of("toy_trace").name == "toy"
    assert "toy_trace" in routing.routed_ops()
    assert any(r.aten == "trace" for r in routing.ROUTES)
    assert table.WHEN["cpu"]["toy_trace"] == {torch.float32: ((2, 8, 1),)}
    assert "toy trace" in [w.name for w in workloads.workloads()]
    env = report.environment()
    assert env["toy_path"] == "toy kernels"
    assert "toy       runs as: toy kernels" in report.format_environment(env)


def test_a_declaration_is_checked(toy_family):
    from mpslinalg.oplayer.family import Family, Route

    with pytest.raises(ValueError, match="not one of its ops"):
        Family(name="bad", order=1, ops=("a",), routes=(Route("b", "trace", lambda op, A: None),))
    with pytest.raises(ValueError, match="start with the family's name"):
        Family(name="bad", order=1, ops=(), metal=("other",))
    with pytest.raises(ValueError, match="two families declare regions"):
        Family(name="bad", order=1, ops=("inv_ex",), when={"cpu": {"inv_ex": {}}})


#: The registries: each reads families from mpslinalg.registry and must name none.
REGISTRIES = ["mpslinalg/routing.py", "mpslinalg/registry.py", "mpslinalg/oplayer/table.py",
              "mpslinalg/oplayer/family.py", "mpslinalg/mainjob/__init__.py", "mpslinalg/mainjob/workloads.py",
              "mpslinalg/mainjob/report.py", "mpslinalg/mainjob/timing.py", "tests/test_metal_sources.py",
              "tests/test_docs.py", "tests/emulator/test_lint_metal_dir.py", "benchmarks/run_gpu.sh"]


@pytest.mark.parametrize("path", REGISTRIES)
def test_no_registry_lists_a_family(path):
    """No import of a family and no family name as a string in a registry (comments and docstrings
    may mention families; code may not list them)."""
    families = {f.name for f in registry.families()}
    text = (ROOT / path).read_text()
    if path.endswith(".py"):
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mod = (node.module or "").split(".")
                assert not (set(mod) & families), f"{path}:{node.lineno} imports a family ({node.module})"
        doc_ids = {id(n.body[0].value) for n in ast.walk(tree)
                   if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                   and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in doc_ids:
                assert node.value not in families, f"{path}:{node.lineno} names the family {node.value!r}"
    else:
        for fam in families:
            assert not re.search(rf"(?<![\w/.-]){fam}(?![\w.-])", text), f"{path} names {fam}"


def test_every_family_has_its_folders():
    """Each family has what the recipe lists: its tests, its docs page, its benchmark (discovered
    by run_gpu.sh by name), its Metal sources."""
    for f in registry.families():
        assert (ROOT / "tests" / f.name).is_dir(), f"tests/{f.name}/"
        assert (ROOT / "docs" / "ops" / f"{f.name}.md").exists(), f"docs/ops/{f.name}.md"
        assert (ROOT / "benchmarks" / f"bench_{f.name}.py").exists(), f"benchmarks/bench_{f.name}.py"
        for stem in f.metal:
            assert (ROOT / "metal" / f"{stem}.metal").exists(), f"metal/{stem}.metal"
        assert set(f.ops) <= set(mpslinalg.__all__), f"{f.name}: ops not exported"
