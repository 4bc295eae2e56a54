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
    "five_point_eigvals.py": ["--problems", "128", "--ours"],
    "ldl_kkt.py": ["--batch", "128"],
    "gp_regression.py": ["--tasks", "16", "--points", "32", "--steps", "20"],
}


def test_every_example_is_covered():
    # every examples/*.py is an example (the code they import lives in examples/support/)
    scripts = {p.name for p in (ROOT / "examples").glob("*.py")}
    assert scripts == set(SMALL), "add the new example to SMALL with small sizes"


@pytest.mark.parametrize("script", sorted(SMALL))
def test_example_passes_its_own_check(script):
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run([sys.executable, str(ROOT / "examples" / script), *SMALL[script]], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"{script} exited {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    assert "PASS" in res.stdout and "FAIL" not in res.stdout, res.stdout


DEVICE_SCRIPTS = sorted(s for s in SMALL if "--device" in (ROOT / "examples" / s).read_text())


def test_device_scripts_are_found():
    assert "vmc_slogdet.py" in DEVICE_SCRIPTS and len(DEVICE_SCRIPTS) >= 5


@pytest.mark.parametrize("script", DEVICE_SCRIPTS)
def test_a_missing_device_is_a_usage_error_not_a_traceback(script):
    # issue 34.8: `--device mps` without an Apple GPU ended in a raw traceback from inside torch
    import torch

    missing = [d for d, there in (("mps", torch.backends.mps.is_available()), ("cuda", torch.cuda.is_available()))
               if not there]
    if not missing:
        pytest.skip("this machine has both mps and cuda: no missing device to ask for")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run([sys.executable, str(ROOT / "examples" / script), "--device", missing[0]], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert f"{missing[0]} is not available here" in res.stderr and "--device cpu" in res.stderr
