"""The Gaussian-process example (``examples/gp_regression.py``) runs at small sizes and passes its
own float64 checks (exit status 0, a PASS line); its bounds are derived in its docstring."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gp_regression_example_passes_its_checks():
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run([sys.executable, str(ROOT / "examples" / "gp_regression.py"), "--tasks", "16",
                          "--points", "32", "--steps", "20"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert res.stdout.strip().endswith("PASS") and "FAIL" not in res.stdout, res.stdout
