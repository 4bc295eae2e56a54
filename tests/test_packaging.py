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
    for mod in ("__init__", "_common", "_generators", "lapack", "lapack_orthogonal", "matrices",
                "matrices_structured", "metrics", "metrics_ldl", "mp", "spectra"):
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


# ---- the extras resolve against torch's own pins (issue 34.1) --------------------------------------
# pip backtracked for 8.5 minutes through 200-420 MB wheels when `.[test]` pinned triton 3.9.0 and
# the default index's torch 2.13.0 (its CUDA build) pinned triton 3.7.1. These tests resolve our
# declared requirements against torch's declared ones, offline: the installed torch's metadata
# (importlib.metadata, with the installed packages it pulls in), and the Linux wheel's as recorded.

#: Requires-Dist of the default index's torch 2.13.0 for Linux x86-64 (the CUDA build), as
#: `pip install --dry-run --report` read it on 2026-12-07 (the installed torch here is the CPU wheel,
#: which declares none of the CUDA pins); with sympy 1.14.0's, which it brings.
CUDA_TORCH_2_13 = [
    "filelock", "typing-extensions>=4.10.0", "setuptools>=77.0.3", "sympy>=1.13.3", "networkx>=2.5.1", "jinja2",
    "fsspec>=0.8.5",
    'cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.3; '
    'platform_system == "Linux"',
    'cuda-bindings<14,>=13.0.3; platform_system == "Linux" and python_version < "3.15"',
    'nvidia-cudnn-cu13==9.20.0.48; platform_system == "Linux"',
    'nvidia-cusparselt-cu13==0.8.1; platform_system == "Linux"',
    'nvidia-nccl-cu13==2.29.7; platform_system == "Linux"',
    'nvidia-nvshmem-cu13==3.4.5; platform_system == "Linux"',
    'triton==3.7.1; platform_system == "Linux" and python_version < "3.15"',
    'optree>=0.13.0; extra == "optree"',
    "mpmath<1.4,>=1.1.0",  # sympy 1.14.0's
]
LINUX_X86_64 = {"platform_system": "Linux", "platform_machine": "x86_64", "sys_platform": "linux"}


def _our_requirements(extras=("test", "bench")) -> list:
    """pyproject.toml's dependencies and ``extras``, as ``packaging`` requirements."""
    from packaging.requirements import Requirement

    try:
        import tomllib
    except ImportError:  # Python 3.10: hatchling (in the test extra) depends on tomli there
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


def _applies(req, env: dict | None = None, extra: str = "") -> bool:
    return req.marker is None or req.marker.evaluate({**(env or {}), "extra": extra})


def _candidates(specs) -> set:
    """Versions that decide whether ``specs`` (SpecifierSets on one package) admit a common version:
    each version a specifier names, and just above it (next release of its last component, and one
    component deeper), which is what an exclusive bound (``>``, ``!=``) leaves."""
    from packaging.version import Version

    out = set()
    for spec_set in specs:
        for spec in spec_set:
            v = Version(spec.version.rstrip(".*"))
            *head, last = v.release
            out |= {v, Version(".".join(map(str, [*head, last + 1]))), Version(".".join(map(str, [*v.release, 1])))}
    return out


def _conflicts(ours, theirs: dict[str, list]) -> list[str]:
    """Our requirements on packages ``theirs`` (name -> [(SpecifierSet, who)]) also constrains whose
    specifiers admit no common version."""
    from packaging.utils import canonicalize_name

    bad = []
    for req in ours:
        pins = theirs.get(canonicalize_name(req.name), [])
        specs = [req.specifier, *(s for s, _ in pins)]
        cands = _candidates(specs)
        if cands and not any(all(s.contains(v, prereleases=True) for s in specs) for v in cands):
            bad.append(f"{req} against {', '.join(f'{s} ({who})' for s, who in pins)}")
    return bad


def _constraints(lines: list[str], who: str, env: dict | None = None) -> dict[str, list]:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    out: dict[str, list] = {}
    for line in lines:
        req = Requirement(line)
        if _applies(req, env):
            out.setdefault(canonicalize_name(req.name), []).append((req.specifier, who))
    return out


def _installed_torch_closure() -> dict[str, list]:
    """What the installed torch declares (importlib.metadata), and what the installed packages it
    needs declare in turn (sympy pins mpmath), for this interpreter's platform."""
    import importlib.metadata as md

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    out: dict[str, list] = {}
    todo, seen = ["torch"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        for line in dist.requires or []:
            req = Requirement(line)
            if _applies(req):
                key = canonicalize_name(req.name)
                out.setdefault(key, []).append((req.specifier, f"{dist.metadata['Name']} {dist.version}"))
                todo.append(key)
    return out


def test_extras_resolve_against_the_installed_torchs_requirements():
    theirs = _installed_torch_closure()
    assert "sympy" in theirs  # the metadata was read: every torch since 2.0 declares sympy
    ours = [r for r in _our_requirements() if any(_applies(r, extra=e) for e in ("", "test", "bench"))]
    assert _conflicts(ours, theirs) == []


def test_extras_resolve_against_the_default_indexs_linux_torch():
    ours = [r for r in _our_requirements() if any(_applies(r, LINUX_X86_64, e) for e in ("", "test", "bench"))]
    theirs = _constraints(CUDA_TORCH_2_13, "torch 2.13.0 (CUDA build)", LINUX_X86_64)
    assert "triton" in {r.name for r in ours}  # the interpreter tests' Triton, on the platform that has wheels
    assert _conflicts(ours, theirs) == []
    # the check itself: the pin that sent pip backtracking conflicts, an unpinned one does not
    from packaging.requirements import Requirement

    assert len(_conflicts([Requirement("triton==3.9.0")], theirs)) == 1
    assert len(_conflicts([Requirement("mpmath>=1.4")], theirs)) == 1  # sympy's cap
    assert _conflicts([Requirement("triton"), Requirement("triton>=3.7,!=3.7.0"), Requirement("mpmath>=1.3")],
                      theirs) == []


def test_no_exact_pins_in_our_requirements():
    # An exact pin conflicts with whichever torch pins that package differently (torch >= 2.7 is
    # allowed, and CUDA builds pin triton and the nvidia-* packages exactly): none, anywhere.
    pinned = [str(r) for r in _our_requirements() if any(s.operator in ("==", "===") for s in r.specifier)]
    assert pinned == []
