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
