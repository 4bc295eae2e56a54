"""Every example exits non-zero when its own check fails (issue 15's "Done when").

``tests/test_examples.py`` runs each example and requires PASS and exit status 0. Here each runs
again with mpslinalg made wrong on purpose, and must print FAIL and exit 1: so a check that cannot
fail, or a FAIL that still exits 0, is caught.

How each is made wrong: every public op of mpslinalg has its float outputs multiplied entrywise by
``1 + 0.03 N(0, 1)`` (the examples' limits are test ratios of 30 with u = 2^-24 and condition
numbers below ~1e3: an error of 3% is above every one of them by orders of magnitude);
``dropin_camera.py`` reaches mpslinalg through ``mpslinalg.enable`` (routing, not the public
functions), so there ``enable`` does nothing: its check that the calls reached mpslinalg fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from test_examples import SMALL  # noqa: E402 - the sizes the passing runs use

RUNNER = '''
import runpy, sys, torch, mpslinalg
g = torch.Generator().manual_seed(0)

def bump(t):
    if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()):
        noise = torch.randn(t.shape, generator=g, dtype=t.real.dtype if t.is_complex() else t.dtype)
        return t * (1 + 0.03 * noise.to(t.device))
    return t

def wrong(fn):
    def w(*a, **k):
        out = fn(*a, **k)
        if isinstance(out, tuple):
            items = [bump(t) for t in out]
            return type(out)(*items) if hasattr(out, "_fields") else tuple(items)
        return bump(out)
    return w

for name in mpslinalg.__all__:
    if callable(getattr(mpslinalg, name)) and hasattr(torch.linalg, name):
        setattr(mpslinalg, name, wrong(getattr(mpslinalg, name)))
mpslinalg.enable = lambda *a, **k: None
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
'''


@pytest.mark.parametrize("script", sorted(SMALL))
def test_example_exits_1_when_its_check_fails(script, tmp_path):
    runner = tmp_path / "wrong.py"
    runner.write_text(RUNNER)
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "examples"), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, str(runner), str(ROOT / "examples" / script), *SMALL[script]], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 1, f"{script} exited {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    assert "FAIL" in res.stdout and "Traceback" not in res.stderr, res.stdout + res.stderr
