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


def _python_block(marker: str) -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- {marker} -->\s*```python\n(.*?)```", text, re.S)
    assert m, f"README.md has no python block after <!-- {marker} -->"
    return m.group(1)


def test_the_first_snippet_runs_anywhere():
    # issue 34.5: the README leads with a snippet that runs where the reader is (the CPU, and the
    # emulated Metal kernels), before the Mac one; it is the first python block, and it runs here as
    # a reader would run it (a fresh interpreter, the checkout on the path). Its output: the residual
    # max |AX - B| and max |X - X_emulated| of 64 well-conditioned 32x32 systems (diagonal 8 + N(0,1),
    # off-diagonals N(0,1)): both within the float32 forward-error bound's order, ~1e-6; 1e-3 would
    # mean a wrong answer, not rounding.
    import os
    import sys

    from helpers import require_emulator

    require_emulator()
    text = (ROOT / "README.md").read_text()
    anywhere, mac = _python_block("runs-anywhere"), _python_block("mac")
    assert re.search(r"```python\n(.*?)```", text, re.S).group(1) == anywhere  # the first snippet
    assert text.index(anywhere) < text.index(mac)
    assert 'device="mps"' not in anywhere and 'device="mps"' in mac
    compile(mac, "README.md (mac)", "exec")  # it must at least parse here
    env = {k: v for k, v in os.environ.items() if k != "MPSLINALG_BACKEND"}
    env["PYTHONPATH"] = str(ROOT)
    res = subprocess.run([sys.executable, "-c", anywhere], capture_output=True, text=True, env=env, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    residual, difference = map(float, res.stdout.split())
    assert residual < 1e-3 and difference < 1e-3, res.stdout


def test_the_test_command_leaves_the_slow_tier_to_ci():
    # issue 34.3: the README's command runs the default tier; .ci/run also runs the slow one, with
    # each test's name shown as it starts (-v)
    assert _block("test-command").endswith("python -m pytest -q -m 'not slow'")
    script = (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest -v -p no:cacheprovider -m slow" in script
    assert script.index('bash -c "$cmd"') < script.index("-m slow")
