"""The code base is ruff-clean (configuration in pyproject.toml) and no module is over 800 lines."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_clean():
    if shutil.which("ruff") is None:
        pytest.importorskip("ruff", reason="ruff is in the test extra")
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-5000:] + res.stderr[-2000:]


# STYLE.md / issue 29: each module (Python or Metal, tests and oracles included) under ~800 lines.
MAX_MODULE_LINES = 800
_SOURCE_DIRS = ("mpslinalg", "metal", "tests", "reference", "benchmarks", "scripts", "examples")
_SOURCE_SUFFIXES = (".py", ".metal", ".h")


def _source_files() -> list[Path]:
    files = list(ROOT.glob("*.py"))
    for d in _SOURCE_DIRS:
        files += [p for p in (ROOT / d).rglob("*") if p.suffix in _SOURCE_SUFFIXES and p.is_file()
                  and "__pycache__" not in p.parts]
    return sorted(files)


def test_no_module_over_800_lines():
    files = _source_files()
    assert any(p.name == "loader.py" for p in files) and any(p.suffix == ".metal" for p in files), \
        "the walk found none of the sources it checks"
    too_long = {}
    for p in files:
        with p.open("rb") as f:
            n = sum(1 for _ in f)
        if n > MAX_MODULE_LINES:
            too_long[str(p.relative_to(ROOT))] = n
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines (split them by topic): {too_long}"
