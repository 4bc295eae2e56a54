"""scripts/install_compiler.sh: every failing route falls through to the next, and it names its compiler.

Each case runs the real script under ``bash`` with a PATH holding only stand-ins (``apt-get``,
``id``, ``python``, optionally ``clang++-19``) and the two text tools the script uses, so no real
package manager or compiler is touched and the machine's own clang is invisible. The stand-ins log
their arguments, so the tests also check which routes were tried.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "install_compiler.sh"

FAKE_CLANG = '#!/bin/sh\necho "Debian clang version 19.1.7 (3)"\n'


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _run(tmp_path: Path, *, apt: str | None, uid: int = 0, pip_ok: bool = True, clang: bool = False):
    """Run the script with stand-ins; ``apt`` is the body of a fake apt-get (None: no apt-get)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "log"
    for tool in ("sed", "head", "chmod"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    _write(bin_dir / "id", f'#!/bin/sh\necho {uid}\n')
    if apt is not None:
        _write(bin_dir / "apt-get", f'#!/bin/sh\necho "apt-get $*" >> {log}\n{apt}\n')
    if clang:
        _write(bin_dir / "clang++-19", FAKE_CLANG)
    # python: pip install of ziglang succeeds or fails; `-m ziglang version` works only after it.
    pip = f": > {tmp_path / 'zig'}" if pip_ok else 'echo "ERROR: no network" >&2; exit 1'
    _write(bin_dir / "python", f"""#!/bin/sh
echo "python $*" >> {log}
if [ "$2" = pip ]; then {pip}; exit 0; fi
if [ "$2" = ziglang ] && [ -e {tmp_path / 'zig'} ]; then echo 0.13.0; exit 0; fi
exit 1
""")
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    res = subprocess.run(["/bin/bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    calls = log.read_text().splitlines() if log.exists() else []
    return res, calls


def _last_line(res) -> str:
    lines = res.stdout.strip().splitlines()
    return lines[-1] if lines else ""


UNABLE = 'case "$1" in update) echo "W: Failed to fetch http://deb.debian.org" >&2; exit 0;; ' \
         'install) echo "E: Unable to locate package clang-19" >&2; exit 100;; esac'


@pytest.mark.parametrize("case, apt, uid, tries_apt_install", [
    ("root, apt update warns, install cannot locate clang-19", UNABLE, 0, True),
    ("root, apt update itself fails", 'echo "E: cannot reach mirror" >&2; exit 100', 0, True),
    ("root, no apt-get", None, 0, False),
    ("not root, apt-get present", UNABLE, 1000, False),
], ids=["apt-unable-to-locate", "apt-update-fails", "no-apt", "not-root"])
def test_a_failing_route_falls_through_to_pip_ziglang(tmp_path, case, apt, uid, tries_apt_install):
    res, calls = _run(tmp_path, apt=apt, uid=uid)
    assert res.returncode == 0, f"{case}: exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    assert _last_line(res) == "emulator compiler: python -m ziglang c++ (zig 0.13.0)", (case, res.stdout)
    assert "python -m pip install --quiet ziglang" in calls, (case, calls)
    assert any(c.startswith("apt-get install") for c in calls) == tries_apt_install, (case, calls)


def test_apt_route_ends_with_the_clang_it_installed(tmp_path):
    bin_dir = tmp_path / "bin"
    install = f'case "$1" in install) printf \'{FAKE_CLANG}\' > {bin_dir}/clang++-19; ' \
              f'chmod +x {bin_dir}/clang++-19;; esac; exit 0'
    res, calls = _run(tmp_path, apt=install)
    assert res.returncode == 0, res.stderr
    assert _last_line(res) == "emulator compiler: clang++-19 (clang 19)"
    assert not any(c.startswith("python -m pip") for c in calls), calls


def test_an_installed_clang_is_used_without_installing(tmp_path):
    res, calls = _run(tmp_path, apt=UNABLE, clang=True)
    assert res.returncode == 0, res.stderr
    assert _last_line(res) == "emulator compiler: clang++-19 (clang 19)"
    assert calls == [], calls


def test_every_route_failing_is_an_error_that_says_so(tmp_path):
    res, calls = _run(tmp_path, apt=UNABLE, pip_ok=False)
    assert res.returncode == 1
    assert "every route failed" in res.stderr and "MPSLINALG_CXX" in res.stderr
    assert "emulator compiler:" not in res.stdout
