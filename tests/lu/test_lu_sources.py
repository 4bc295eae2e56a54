"""The LU family's kernel groups (issue 29): every kernel a call site launches is instantiated in the
source ``KERNEL_SOURCES`` names for it, and a first call compiles only the groups it launches."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import torch
from helpers import require_emulator

import mpslinalg as LA
from mpslinalg.kernels import loader, metal_dir, set_compiler

lu_kernels = importlib.import_module("mpslinalg.lu.kernels")
ROOT = Path(__file__).resolve().parents[2]


def test_every_lu_source_is_a_group_of_kernel_sources():
    """The map names exactly the LU files of metal/ (no file compiled by nobody, none missing)."""
    files = {p.stem for p in metal_dir().glob("lu*.metal")}
    assert set(lu_kernels.KERNEL_SOURCES.values()) == files
    called = set(re.findall(r'_kernel\("([a-z_0-9]+)"', (ROOT / "mpslinalg" / "lu" / "kernels.py").read_text()))
    assert called and called <= set(lu_kernels.KERNEL_SOURCES), called - set(lu_kernels.KERNEL_SOURCES)


@pytest.mark.parametrize("template", sorted(lu_kernels.KERNEL_SOURCES))
def test_each_kernel_is_instantiated_in_its_group(template):
    require_emulator()
    source = lu_kernels.KERNEL_SOURCES[template]
    names = set(dir(loader.load_library(source, "cpu")))
    for dtype in loader.DTYPE_TAGS:
        stem = loader.kernel_name(template, dtype)
        assert any(re.fullmatch(re.escape(stem) + r"(_\d+)*", k) for k in names), (template, source, stem)


@pytest.fixture
def compiled(monkeypatch):
    """The list of sources the emulator compiles from now on (a fresh process cache; the emulator's
    disk cache keeps it quick)."""
    require_emulator()
    seen: list[str] = []
    previous = loader._compilers["cpu"]

    def recording(source: str):
        seen.append(re.match(r'#line 1 "(\w+)\.metal"', source).group(1))
        return previous(source)

    set_compiler("cpu", recording)  # clears the process cache
    yield seen
    set_compiler("cpu", previous)


def test_first_small_lu_factor_compiles_only_lu_small(compiled):
    A = torch.randn(16, 16) + 16 * torch.eye(16)
    with LA.use_backend("emulator"):
        LA.lu_factor(A)
    assert compiled == ["lu_small"]


def test_first_small_solve_compiles_only_lu_small_solve(compiled):
    A = torch.randn(16, 16) + 16 * torch.eye(16)
    with LA.use_backend("emulator"):
        X = LA.solve(A, torch.randn(16, 1))
    assert compiled == ["lu_small_solve"]
    assert X.shape == (16, 1)
