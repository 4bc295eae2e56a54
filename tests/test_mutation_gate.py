"""The mutation gate (issue 18, ``scripts/mutation_gate.py``): its list stays in step with the code,
its rules hold, and the fast CI subset is killed, so a weakened test is noticed.

The subset runs without the gate's unmutated baseline: the rest of this suite runs the same tests
on the unmutated tree, so a test that fails there fails the suite by itself.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _gate():
    spec = importlib.util.spec_from_file_location("mutation_gate", ROOT / "scripts" / "mutation_gate.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


gate = _gate()


def test_every_pattern_occurs_exactly_once_in_the_code():
    """A pattern that stopped matching (the code moved) must be updated in scripts/mutations.py."""
    muts = gate.load_mutations()
    assert gate.check_patterns(muts) == []
    assert len(muts) >= 40
    assert any("ci" in m.subsets for m in muts)
    for m in muts:  # every mutation says what it stands for, and an equivalent one why
        assert m.why, m.id
        assert m.equivalent == "" or len(m.equivalent) > 20, m.id


def test_list_errors(tmp_path):
    good = dict(id="a", file="f.py", pattern="x = 1", replacement="x = 2", tests=["t.py"])
    m = gate.Mutation(**good)
    with pytest.raises(gate.ListError, match="occurs 0 times"):
        gate.mutated_text(m, "y = 1\n")
    with pytest.raises(gate.ListError, match="occurs 2 times"):
        gate.mutated_text(m, "x = 1\nx = 1\n")
    assert gate.mutated_text(m, "x = 1\ny = 3\n") == "x = 2\ny = 3\n"
    for bad, message in [
        ({k: v for k, v in good.items() if k != "tests"}, "missing tests"),
        ({**good, "typo": 1}, "unknown keys"),
        ({**good, "replacement": "x = 1"}, "equals the pattern"),
        ({**good, "tests": []}, "no tests"),
    ]:
        path = tmp_path / "muts.py"
        path.write_text(f"MUTATIONS = [{bad!r}]\n")
        with pytest.raises(gate.ListError, match=message):
            gate.load_mutations(path)
    path.write_text(f"MUTATIONS = [{good!r}, {good!r}]\n")
    with pytest.raises(gate.ListError, match="duplicate id a"):
        gate.load_mutations(path)


def test_summary_scores_killed_over_non_equivalent():
    R = gate.Result
    s = gate.summary([R("a", "killed"), R("b", "survived"), R("c", "equivalent"), R("d", "timeout")])
    assert (s["killed"], s["scored"], s["total"]) == (1, 3, 4)


@pytest.mark.slow
def test_ci_subset_is_killed():
    """Each mutation of the subset, planted in a copy of the tree, makes its tests fail (the first,
    ``sanity-import-breaks``, proves that the copy -- not the editable install -- is imported)."""
    muts = [m for m in gate.load_mutations() if "ci" in m.subsets]
    assert muts[0].id == "sanity-import-breaks"
    for m in muts:
        m.timeout = min(m.timeout, 120.0)  # the whole subset stays within a few minutes
    results = gate.run_gate(muts, baseline=False, log=lambda line: None)
    assert {r.id: r.status for r in results} == {m.id: "killed" for m in muts}, [
        (r.id, r.status, r.detail[-400:]) for r in results if r.status != "killed"
    ]
