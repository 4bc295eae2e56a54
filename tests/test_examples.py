"""Every example runs, at small sizes, and passes its own check (exit status 0, a PASS line).

The examples are what a newcomer runs first; each checks its results against a float64 truth and
exits 1 when a check fails, so running them here keeps those checks alive.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SMALL = {
    "vmc_slogdet.py": ["--walkers", "8", "--equilibration", "20", "--measurements", "1", "--checked", "2"],
    "camera_geometry.py": ["--poses", "4096", "--hypotheses", "256", "--points", "64"],
    "deltanet_chunk.py": ["--seq", "128", "--heads", "2"],
    "camera_rq.py": ["--cameras", "2048"],
    "dropin_camera.py": [],
    "eight_point.py": ["--batch", "256"],
    "eigh_surface_normals.py": ["--points", "4096"],
}


def test_every_example_is_covered():
    scripts = {p.name for p in (ROOT / "examples").glob("*.py")} - {"posekit.py"}  # posekit: a library
    assert scripts == set(SMALL), "add the new example to SMALL with small sizes"


@pytest.mark.parametrize("script", sorted(SMALL))
def test_example_passes_its_own_check(script):
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run([sys.executable, str(ROOT / "examples" / script), *SMALL[script]], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"{script} exited {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    assert "PASS" in res.stdout and "FAIL" not in res.stdout, res.stdout
