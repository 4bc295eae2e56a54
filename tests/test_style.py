"""The code base is ruff-clean (configuration in pyproject.toml)."""

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
