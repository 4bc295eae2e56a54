"""The wheel ships the .metal sources, and an installed wheel finds them without the checkout."""

import os
import subprocess
import sys
import venv
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


def test_installed_wheel_finds_its_sources(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                    "--target", str(tmp_path / "site"), str(wheel)], check=True)
    code = (
        "import mpslinalg, mpslinalg.kernels as k; "
        "print(mpslinalg.__file__); print(k.metal_dir()); "
        "print(len(k.metal_dir().joinpath('complex.h').read_text()))"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    res = subprocess.run([str(py), "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         check=True)
    pkg_file, metal, size = res.stdout.split()
    assert pkg_file.startswith(str(tmp_path / "site")), pkg_file  # the wheel's copy, not the checkout
    assert metal == str(tmp_path / "site" / "mpslinalg" / "metal")
    assert int(size) > 0
