"""README carries the two set-up commands; CI runs the test command verbatim."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _block(marker: str) -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- {marker} -->\s*```(?:bash|sh)?\n(.*?)```", text, re.S)
    assert m, f"README.md has no block after <!-- {marker} -->"
    return m.group(1).strip()


def test_two_commands():
    main, test = _block("main-command"), _block("test-command")
    assert "python -m mpslinalg" in main and "torch==2.13.0" in main
    assert "pytest" in test and "install_compiler.sh" in test and "torch==2.13.0" in test
    assert "\n" not in main and "\n" not in test  # one copy-paste line each


def test_ci_runs_the_readme_test_command():
    # Ask .ci/run which command it would run, by running its extraction on the real README.
    script = (ROOT / ".ci" / "run").read_text()
    extraction = script.split("cmd=$(python3 - <<'PY'\n", 1)[1].split("\nPY\n", 1)[0]
    out = subprocess.run(["python3", "-c", extraction], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == _block("test-command")
    assert 'bash -c "$cmd"' in script and '"$rc" = 5' in script


def test_ci_installs_the_readme_way_in_a_fresh_venv():
    # .ci/run splits the README test command at its pytest call and runs the install part verbatim
    # inside a fresh venv; ask bash for that split, with the script's own expansion.
    script = (ROOT / ".ci" / "run").read_text()
    split = next(line for line in script.splitlines() if line.startswith("install=${cmd%%"))
    cmd = _block("test-command")
    out = subprocess.run(["bash", "-c", f'cmd="$1"; {split}; printf %s "$install"', "-", cmd],
                         capture_output=True, text=True, check=True).stdout
    assert out and out != cmd and "pytest" not in out and cmd.startswith(out)
    assert "install_compiler.sh" in out and "pip install" in out
    assert "-m venv --system-site-packages" in script and 'bash -c "$install"' in script
    assert "tests/test_packaging.py" in script  # the test that once failed only inside a venv
