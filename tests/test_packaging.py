"""The wheel ships the .metal sources, and an installed wheel finds them without the checkout."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("build", reason="the test extra installs 'build' (pip install -e .[test])")
    out = tmp_path_factory.mktemp("dist")
    res = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True, text=True,
    )
    assert res.returncode == 0, f"wheel build failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    (whl,) = out.glob("mpslinalg-*.whl")
    return whl


def test_wheel_contains_every_metal_source(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = sorted(p.name for p in (ROOT / "metal").iterdir() if p.suffix in (".metal", ".h"))
    assert sources, "metal/ holds no sources"
    for name in sources:
        assert f"mpslinalg/metal/{name}" in names, f"{name} missing from the wheel"
    assert "mpslinalg/kernels/loader.py" in names
    assert not any(n.endswith((".so", ".pyc")) for n in names)


def test_wheel_ships_the_oracles_inside_the_package(wheel):
    # issue 10: no top-level module named `reference` in site-packages; the oracles ship under the
    # package and the main job finds them there (mpslinalg.mainjob.workloads._oracle)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert not any(n.startswith("reference/") for n in names)
    for mod in ("__init__", "_common", "lapack", "matrices", "metrics", "mp"):
        assert f"mpslinalg/reference/{mod}.py" in names


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run ``cmd``; on a non-zero exit fail with its command line, stdout and stderr."""
    res = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if res.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited {res.returncode}\n--- stdout ---\n{res.stdout[-4000:]}"
                    f"\n--- stderr ---\n{res.stderr[-4000:]}", pytrace=False)
    return res


def _paths_without_the_checkout() -> list[str]:
    """This interpreter's import path minus the checkout (and the current directory).

    Whatever installed Python and its packages (system, pyenv, a venv, a venv inside a venv, an
    editable install of this repository), these are the directories where *this* process finds
    torch; the checkout itself is left out so that only the wheel can provide ``mpslinalg``.
    """
    root = ROOT.resolve()
    keep = []
    for p in sys.path:
        if not p:
            continue
        rp = Path(p).resolve()
        if rp == root or root in rp.parents:
            continue
        keep.append(str(rp))
    return keep


def test_installed_wheel_finds_its_sources(wheel, tmp_path):
    site_dir = tmp_path / "site"
    _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
          "--target", str(site_dir), str(wheel)])
    code = (
        "import mpslinalg, mpslinalg.kernels as k; "
        "print(mpslinalg.__file__); print(k.metal_dir()); "
        "print(len(k.metal_dir().joinpath('complex.h').read_text()))"
    )
    # -S: no site module, so no .pth file runs (an editable install of the checkout is one); the
    # wheel's copy comes first, then the directories this interpreter finds torch in.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site_dir), *_paths_without_the_checkout()])}
    env.pop("PYTHONHOME", None)
    res = _run([sys.executable, "-S", "-c", code], cwd=tmp_path, env=env)
    pkg_file, metal, size = res.stdout.split()
    assert pkg_file.startswith(str(site_dir)), pkg_file  # the wheel's copy, not the checkout
    assert metal == str(site_dir / "mpslinalg" / "metal")
    assert int(size) > 0


def test_a_failing_child_shows_its_output():
    # The helper the packaging checks use must put the child's own words in the failure.
    code = "import sys; print('to stdout'); sys.exit('the child explains itself')"
    with pytest.raises(pytest.fail.Exception) as exc:
        _run([sys.executable, "-c", code])
    text = str(exc.value)
    assert "exited 1" in text and "to stdout" in text and "the child explains itself" in text
