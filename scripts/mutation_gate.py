#!/usr/bin/env python
"""The mutation gate (issue 18): plant curated single-line bugs, one at a time, and check that the
tests catch each.

The list is ``MUTATIONS`` in ``scripts/mutations.py`` (versioned with the code). Each entry names a
file, a pattern that must occur there **exactly once** (an error otherwise, so the list stays in
step with the code), its replacement, and the tests to run; an optional ``equivalent`` reason marks a
mutation shown to preserve behaviour (it is not run). For each mutation the gate writes the mutated
file into a temporary copy of the tree (``git ls-files`` plus untracked, non-ignored files), runs
``python -m pytest -x -q -p no:cacheprovider <tests>`` there with ``PYTHONPATH=<copy>`` (so the
copy's ``mpslinalg``/``reference`` are imported, not the editable install -- checked before any
mutation runs), time-boxed, and restores the file. A mutation is *killed* when its tests fail,
*survived* when they pass, *timeout* when they run past the box.

Each distinct test selection that killed a mutation then runs once on the unmutated copy (the
baseline): a selection that fails there "killed" its mutations for a reason unrelated to them, so
they are reported as ``baseline-failed`` instead. ``--known-good run.json`` reuses the selections a
previous run's JSON recorded as passing (same day, same tree: say so when you use it).

Usage::

    python scripts/mutation_gate.py --list
    python scripts/mutation_gate.py                     # the whole list
    python scripts/mutation_gate.py --subset ci         # the fast CI subset
    python scripts/mutation_gate.py --only lu-panel-tiny-pivot --json out.json

Exit status: 0 when every non-equivalent mutation run was killed, 1 otherwise, 2 on a list error.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LIST = ROOT / "scripts" / "mutations.py"
#: Compiled emulator kernels are cached by a hash of source, shim and runtime (``_toolchain.digest``),
#: so a mutated kernel or runtime compiles afresh; a cache of its own keeps the user's cache clean.
DEFAULT_CACHE = Path.home() / ".cache" / "mpslinalg" / "mutation-gate"
PYTEST_ARGS = ["-x", "-q", "-p", "no:cacheprovider"]


class ListError(Exception):
    """The mutation list is malformed or out of step with the code."""


@dataclass
class Mutation:
    id: str
    file: str
    pattern: str
    replacement: str
    tests: list[str]
    why: str = ""
    equivalent: str = ""
    timeout: float = 600.0
    subsets: list[str] = field(default_factory=list)


@dataclass
class Result:
    id: str
    status: str  # killed | survived | timeout | equivalent | baseline-failed
    seconds: float = 0.0
    detail: str = ""


def load_mutations(path: Path = DEFAULT_LIST) -> list[Mutation]:
    """Parse the list and check every entry's shape (not yet its pattern: see ``check_patterns``)."""
    entries = runpy.run_path(str(path)).get("MUTATIONS")
    if not isinstance(entries, list):
        raise ListError(f"{path}: no MUTATIONS list")
    muts, seen = [], set()
    required = ("id", "file", "pattern", "replacement", "tests")
    for i, entry in enumerate(entries):
        missing = [k for k in required if k not in entry]
        if missing:
            raise ListError(f"entry {i} ({entry.get('id', '?')}): missing {', '.join(missing)}")
        unknown = set(entry) - {"id", "file", "pattern", "replacement", "tests", "why",
                                "equivalent", "timeout", "subsets"}
        if unknown:
            raise ListError(f"{entry['id']}: unknown keys {sorted(unknown)}")
        if entry["id"] in seen:
            raise ListError(f"duplicate id {entry['id']}")
        seen.add(entry["id"])
        if entry["pattern"] == entry["replacement"]:
            raise ListError(f"{entry['id']}: the replacement equals the pattern")
        if not entry["tests"]:
            raise ListError(f"{entry['id']}: no tests")
        muts.append(Mutation(**entry))
    return muts


def mutated_text(m: Mutation, text: str) -> str:
    """``text`` with the pattern replaced; a ListError unless it occurs exactly once."""
    count = text.count(m.pattern)
    if count != 1:
        raise ListError(f"{m.id}: pattern occurs {count} times in {m.file} (must be exactly once): "
                        f"{m.pattern!r}")
    return text.replace(m.pattern, m.replacement)


def check_patterns(muts: list[Mutation], root: Path = ROOT) -> list[str]:
    """Every list error at once (patterns that no longer match exactly once, missing files/tests)."""
    errors = []
    for m in muts:
        path = root / m.file
        if not path.is_file():
            errors.append(f"{m.id}: no file {m.file}")
            continue
        try:
            mutated_text(m, path.read_text())
        except ListError as exc:
            errors.append(str(exc))
        for t in m.tests:
            if not (root / t.split("::")[0]).exists():
                errors.append(f"{m.id}: no test path {t}")
    return errors


def tree_files(root: Path = ROOT) -> list[str]:
    """Tracked files plus untracked, non-ignored ones (new tests not yet committed count)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=root, check=True, capture_output=True).stdout
    return sorted({p for p in out.decode().split("\0") if p and (root / p).is_file()})


def copy_tree(dest: Path, root: Path = ROOT) -> None:
    for rel in tree_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)


def _env(copy: Path, cache: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["MPSLINALG_CACHE_DIR"] = str(cache)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def check_imports_copy(copy: Path, cache: Path) -> None:
    """The copy's packages must be the ones imported (not the editable install's)."""
    code = "import mpslinalg, reference; print(mpslinalg.__file__); print(reference.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=copy, env=_env(copy, cache),
                         capture_output=True, text=True, check=True).stdout.split()
    for f in out:
        if not Path(f).resolve().is_relative_to(copy.resolve()):
            raise RuntimeError(f"the copy is not what runs: imported {f}, copy is {copy}")


def run_tests(copy: Path, tests: list[str], timeout: float, cache: Path) -> tuple[str, float, str]:
    """('passed' | 'failed' | 'timeout', seconds, the output's tail)."""
    cmd = [sys.executable, "-m", "pytest", *PYTEST_ARGS, *tests]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=copy, env=_env(copy, cache), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # pytest and any compiler it started
        out, _ = proc.communicate()
        return "timeout", time.monotonic() - t0, (out or "")[-2000:]
    status = "passed" if proc.returncode == 0 else "failed"
    if proc.returncode == 5:  # nothing collected: a stale test id, not a kill
        status = "no-tests"
    return status, time.monotonic() - t0, (out or "")[-2000:]


def run_gate(muts: list[Mutation], *, baseline: bool = True, cache: Path = DEFAULT_CACHE,
             known_good: set[tuple[str, ...]] = frozenset(), log=print,
             baselines: dict | None = None) -> list[Result]:
    """Run each mutation in one temporary copy of the tree (restored after each), then the
    baselines of the selections that killed one (unless ``known_good``); see the module docstring.
    ``baselines`` (if given) receives ``{selection: status}`` of the baselines run."""
    cache.mkdir(parents=True, exist_ok=True)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="mutation-gate-") as td:
        copy = Path(td)
        copy_tree(copy)
        errors = check_patterns(muts, copy)
        if errors:
            raise ListError("\n".join(errors))
        check_imports_copy(copy, cache)
        for m in muts:
            if m.equivalent:
                results.append(Result(m.id, "equivalent", detail=m.equivalent))
                log(f"{'equivalent':15s}        {m.id}")
                continue
            path = copy / m.file
            original = path.read_bytes()
            try:
                path.write_text(mutated_text(m, original.decode()))
                status, secs, tail = run_tests(copy, m.tests, m.timeout, cache)
            finally:
                path.write_bytes(original)
            verdict = {"failed": "killed", "passed": "survived"}.get(status, status)
            results.append(Result(m.id, verdict, secs, tail))
            log(f"{verdict:15s} {secs:6.1f}s {m.id}")
        if not baseline:
            return results
        by_id = {m.id: m for m in muts}
        todo = sorted({tuple(by_id[r.id].tests) for r in results if r.status == "killed"} - set(known_good))
        for tests in todo:
            timeout = max(by_id[r.id].timeout for r in results if tuple(by_id[r.id].tests) == tests)
            status, secs, tail = run_tests(copy, list(tests), timeout, cache)
            log(f"baseline {status:8s} {secs:6.1f}s {' '.join(tests)}")
            if baselines is not None:
                baselines[" ".join(tests)] = status
            if status != "passed":
                for r in results:
                    if r.status == "killed" and tuple(by_id[r.id].tests) == tests:
                        r.status, r.detail = "baseline-failed", tail
    for r in results:
        if r.status == "killed":
            r.detail = ""
    return results


def baseline_only(muts: list[Mutation], cache: Path = DEFAULT_CACHE) -> int:
    """Run each distinct test selection of ``muts`` on an unmutated copy; 0 if all pass."""
    cache.mkdir(parents=True, exist_ok=True)
    bad = 0
    with tempfile.TemporaryDirectory(prefix="mutation-gate-") as td:
        copy = Path(td)
        copy_tree(copy)
        check_imports_copy(copy, cache)
        for tests in sorted({tuple(m.tests) for m in muts if not m.equivalent}):
            status, secs, tail = run_tests(copy, list(tests), max(m.timeout for m in muts), cache)
            print(f"baseline {status:8s} {secs:6.1f}s {' '.join(tests)}", flush=True)
            bad += status != "passed"
    return int(bad > 0)


def summary(results: list[Result]) -> dict:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    scored = len(results) - counts.get("equivalent", 0)
    return {"total": len(results), "scored": scored, "killed": counts.get("killed", 0), **counts}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="print the mutations and check their patterns")
    ap.add_argument("--only", action="append", metavar="ID", help="run only this mutation (repeatable)")
    ap.add_argument("--subset", help="run only the mutations tagged with this subset (e.g. ci)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--file", type=Path, default=DEFAULT_LIST, help="the mutation list")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unmutated runs")
    ap.add_argument("--baseline-only", action="store_true",
                    help="only run the selected mutations' test selections on the unmutated tree")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="emulator compile cache")
    ap.add_argument("--known-good", type=Path, help="a previous run's JSON: its passing baselines are reused")
    args = ap.parse_args(argv)
    try:
        muts = load_mutations(args.file)
        if args.only:
            unknown = set(args.only) - {m.id for m in muts}
            if unknown:
                raise ListError(f"unknown ids: {sorted(unknown)}")
            muts = [m for m in muts if m.id in args.only]
        if args.subset:
            muts = [m for m in muts if args.subset in m.subsets]
        if args.list:
            errors = check_patterns(muts)
            for m in muts:
                tag = f" [equivalent: {m.equivalent}]" if m.equivalent else ""
                print(f"{m.id:40s} {m.file}{tag}")
            print(f"{len(muts)} mutations")
            if errors:
                raise ListError("\n".join(errors))
            return 0
        if args.baseline_only:
            return baseline_only(muts, args.cache_dir)
        known = set()
        if args.known_good:
            prev = json.loads(args.known_good.read_text()).get("baselines", {})
            known = {tuple(k.split(" ")) for k, v in prev.items() if v == "passed"}
        baselines: dict = {}
        results = run_gate(muts, baseline=not args.no_baseline, cache=args.cache_dir,
                           known_good=known, baselines=baselines)
    except ListError as exc:
        print(f"mutation list error:\n{exc}", file=sys.stderr)
        return 2
    s = summary(results)
    print(f"score: {s['killed']}/{s['scored']} killed "
          f"({', '.join(f'{k} {v}' for k, v in s.items() if k not in ('total', 'scored', 'killed'))})")
    for r in results:
        if r.status in ("survived", "timeout", "baseline-failed", "no-tests"):
            print(f"--- {r.status}: {r.id}\n{r.detail[-800:]}")
    if args.json:
        args.json.write_text(json.dumps({"summary": s, "results": [r.__dict__ for r in results],
                                         "baselines": baselines}, indent=1))
    return 0 if s["killed"] == s["scored"] else 1


if __name__ == "__main__":
    sys.exit(main())
