"""The main job (``python -m mpslinalg``) and its workload registry (mpslinalg.mainjob.workloads).

The registry's rows are exercised before the families' ops exist by standing ``torch.linalg`` in for
``mpslinalg``'s ops (LAPACK on the CPU: accurate by construction), and by a deliberately perturbed
stand-in, which every accuracy check must reject: so a row whose check cannot fail, or that cannot
digest its op's output, fails here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import FakeClock

import mpslinalg
from mpslinalg import registry
from mpslinalg.kernels import backend_for
from mpslinalg.mainjob import main, overhead, run_workload
from mpslinalg.mainjob import workloads as _workloads

ROOT = Path(__file__).resolve().parents[2]

#: Every op some family registers a workload for.
#: The families' public ops that torch.linalg also has (the stand-ins below): read from the
#: declarations, so a new family's rows are checked without an edit here.
OPS = [op for fam in registry.families() for op in fam.ops if hasattr(torch.linalg, op)]


def _perturbed(fn, rel: float):
    """``fn`` with every float/complex output multiplied entrywise by ``1 + rel * N(0, 1)``."""
    g = torch.Generator().manual_seed(0)

    def bump(t):
        if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()):
            noise = torch.randn(t.shape, dtype=t.dtype, generator=g)
            return t * (1 + rel * noise)
        return t

    def wrapped(*args, **kwargs):
        out = fn(*args, **kwargs)
        return tuple(bump(t) for t in out) if isinstance(out, tuple) else bump(out)

    return wrapped


@pytest.fixture
def stand_ins(monkeypatch):
    """Export ``torch.linalg``'s functions as mpslinalg's ops for the test (restored afterwards)."""
    def install(perturb: float = 0.0):
        for op in OPS:
            fn = getattr(torch.linalg, op)
            monkeypatch.setattr(mpslinalg, op, _perturbed(fn, perturb) if perturb else fn, raising=False)
        monkeypatch.setattr(mpslinalg, "__all__", [*dict.fromkeys([*mpslinalg.__all__, *OPS])])
    return install


@pytest.fixture
def one_thread():
    """One intra-op thread: on a loaded 2-core box a 2-thread op stalls whenever one of its threads
    is descheduled, which turns timing ratios of identical work into noise."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_registry_rows_are_complete(stand_ins):
    stand_ins()
    rows = _workloads.workloads()
    assert [w.name for w in _workloads.WORKLOADS] == [w.name for w in rows]
    # Every family with rows is represented, every row is one of its family's ops that torch.linalg
    # has (the peer), names unique (workloads() checks).
    by_family = {fam.name: set(fam.ops) for fam in registry.families()}
    for fam in registry.families():
        if fam.workloads and fam.ops:
            assert any(w.op in by_family[fam.name] for w in rows), f"family {fam.name} has no main-job row"
    assert {w.op for w in rows} <= set(OPS)
    for w in rows:
        assert callable(w.make) and callable(w.ours) and callable(w.peer) and callable(w.accuracy)
        assert w.scipy is None or callable(w.scipy)
        assert w.dtype in (torch.float32, torch.complex64)
        assert w.name and w.description
        # A torch version a text names is the installed one (not one copied from a note).
        for named in re.findall(r"torch (\d+\.\d+)", w.description):
            assert torch.__version__.startswith(named), (w.name, w.description)


def test_every_accuracy_check_passes_lapack_and_rejects_a_wrong_answer(stand_ins, one_thread):
    # torch.linalg on the CPU is LAPACK: backward stable, so each LAPACK ratio must be below its
    # threshold (30). A relative entrywise perturbation of 10% of every output is ~1e6 u, far above
    # what any threshold x u admits; for det/slogdet the ratio is |d - det|/(|det| n kappa u), and
    # 0.1 / (32 * kappa * 6e-8) > 30 for every kappa < 1700, which holds for most Gaussian 32x32
    # matrices of the batch (the max over the batch is taken).
    cpu = torch.device("cpu")
    stand_ins()
    good = {w.name: run_workload(w, cpu, quick=True, timing=False) for w in _workloads.workloads()}
    stand_ins(perturb=0.1)
    bad = {w.name: run_workload(w, cpu, quick=True, timing=False) for w in _workloads.workloads()}
    for name, row in good.items():
        assert "error" not in row, (name, row.get("traceback"))
        assert row["accuracy"]["pass"], (name, row["accuracy"])
        assert row["ok"]
        b = bad[name]["accuracy"]
        assert not b["pass"] and b["value"] > 100 * row["accuracy"]["value"], (name, b)
        assert not bad[name]["ok"]


def test_main_times_ours_against_peers_in_one_run(stand_ins, one_thread, tmp_path, capsys, monkeypatch):
    stand_ins()
    # a fake clock (helpers.FakeClock) whose every read adds ~8 ms: each sample of every callable
    # reads exactly that (one call a sample), whatever this machine's load: no bound on a measured speed
    FakeClock(tick=2.0**-7).install(monkeypatch)
    out = tmp_path / "r.json"
    rc = main(["--quick", "--device", "cpu", "--only", "RANSAC", "--json", str(out)])
    assert rc == 0
    rep = json.loads(out.read_text())
    assert rep["device"] == "cpu" and rep["quick"] is True and rep["ok"] is True
    (row,) = rep["rows"]
    assert row["op"] == "solve" and row["accuracy"]["pass"]
    assert row["backend"] == backend_for("cpu")  # "torch" unless MPSLINALG_BACKEND says otherwise
    # The time box may cut the target rounds short, never below the rounds a verdict needs.
    assert row["time"]["median_ms"] > 0 and row["time"]["n"] >= rep["settings"]["min_samples"]
    # Equal samples: the ratio is 1 and must not be called faster or slower (the interval, widened
    # by the run-to-run drift, straddles 1).
    tl = row["peers"]["torch.linalg"]
    assert tl["speedup"] == 1.0 and row["time"]["median_ms"] == 1000 * 2.0**-7
    assert tl["speedup_low"] < 1 < tl["speedup_high"]
    assert tl["verdict"] == "inconclusive", tl
    assert row["peers"]["scipy"]["median_ms"] > 0
    assert row["peers"]["scipy"]["verdict"] in ("faster", "slower", "inconclusive")
    text = capsys.readouterr().out
    assert "solve RANSAC 9x9" in text and "256x9x9" in text
    # the accuracy ratio and the speed ratios are named apart (issue 34.8)
    header = next(line for line in text.splitlines() if line.startswith("| workload"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert {"error ratio", "limit", "speedup vs torch.linalg", "speedup vs scipy", "scipy ms"} <= set(cols)
    assert "ratio" not in cols and "inconclusive" in text and "speedup columns: peer time / our time" in text
    assert "% " in text or "%|" in text.replace(" ", "")  # the spread (± half the IQR) is printed


def test_a_row_with_its_own_drift_is_widened_by_it(stand_ins, one_thread, tmp_path):
    """``Workload.drift`` (a row's own measured run-to-run drift) widens that peer's interval where it
    exceeds the column's; the other peer keeps its column's."""
    from mpslinalg.mainjob import workloads as W
    from mpslinalg.mainjob.timing import PEER_DRIFT, RUN_DRIFT

    stand_ins()
    (w,) = [w for w in W.workloads() if w.name == "solve_triangular deltanet"]
    assert w.drift["scipy"] > PEER_DRIFT["scipy"]  # else the declaration would be a no-op
    out = tmp_path / "r.json"
    assert main(["--quick", "--device", "cpu", "--only", "deltanet", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["peers"]["scipy"]["drift"] == w.drift["scipy"]
    assert row["peers"]["torch.linalg"]["drift"] == RUN_DRIFT


def test_cpu_measures_with_one_thread_and_restores_torch(stand_ins, tmp_path):
    stand_ins()
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        out = tmp_path / "r.json"
        assert main(["--quick", "--device", "cpu", "--only", "RANSAC", "--no-timing", "--json", str(out)]) == 0
        assert json.loads(out.read_text())["environment"]["cpu"]["torch_threads"] == 1
        assert torch.get_num_threads() == 2
        assert main(["--quick", "--device", "cpu", "--only", "RANSAC", "--no-timing", "--threads", "2",
                     "--json", str(out)]) == 0
        assert json.loads(out.read_text())["environment"]["cpu"]["torch_threads"] == 2
        assert main(["--device", "cpu", "--threads", "0"]) == 2
    finally:
        torch.set_num_threads(before)


def test_unwritable_json_fails_before_measuring(stand_ins, tmp_path, capsys):
    stand_ins()
    bad = tmp_path / "no-such-dir" / "r.json"
    assert main(["--quick", "--device", "cpu", "--only", "RANSAC", "--json", str(bad)]) == 2
    captured = capsys.readouterr()
    assert "--json" in captured.err and str(bad) in captured.err
    assert "measuring" not in captured.out and "solve RANSAC" not in captured.out
    ok = tmp_path / "fresh.json"  # the check itself leaves no file behind when the run fails later
    assert main(["--quick", "--device", "tpu", "--json", str(ok)]) == 2 and not ok.exists()


def test_only_matching_nothing_is_an_error_listing_the_names(stand_ins, capsys):
    stand_ins()
    assert main(["--quick", "--device", "cpu", "--only", "no-such-workload", "--no-timing"]) == 2
    err = capsys.readouterr().err
    assert "no-such-workload" in err and "matches no workload" in err
    for w in _workloads.workloads():
        assert w.name in err


def test_list_names_what_only_selects(stand_ins, capsys):
    # issue 34.8: the names --only matches, without measuring anything (no environment report)
    stand_ins()
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "# mpslinalg report" not in out and "--only" in out
    listed = [line.strip().split("  ")[0] for line in out.splitlines()[1:]]
    from mpslinalg.mainjob import OVERHEAD_ROW

    assert listed == [*(w.name for w in _workloads.workloads()), OVERHEAD_ROW]


def test_a_failing_op_makes_the_exit_status_1(stand_ins, monkeypatch, tmp_path):
    stand_ins(perturb=0.1)
    assert main(["--quick", "--device", "cpu", "--only", "RANSAC", "--no-timing"]) == 1

    def broken(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(mpslinalg, "solve", broken)
    out = tmp_path / "r.json"
    assert main(["--quick", "--device", "cpu", "--only", "RANSAC", "--json", str(out)]) == 1
    (row,) = json.loads(out.read_text())["rows"]
    assert row["error"] == "RuntimeError: boom" and row["ok"] is False

    calls = []

    def works_once(A, B):  # right the first time (accuracy passes), then raises while timed
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("second call")
        return torch.linalg.solve(A, B)

    monkeypatch.setattr(mpslinalg, "solve", works_once)
    assert main(["--quick", "--device", "cpu", "--only", "RANSAC", "--json", str(out)]) == 1
    (row,) = json.loads(out.read_text())["rows"]
    assert row["accuracy"]["pass"] and row["error"] == "while timing: RuntimeError: second call"


def test_a_broken_registry_is_reported_not_crashed_on(stand_ins, monkeypatch, capsys, tmp_path):
    """A family whose rows fail to build is reported (the main job exits 1), and two rows of one
    name are a registry error. The families come from the registry, so the test adds one there."""
    from types import SimpleNamespace

    from mpslinalg import registry

    stand_ins()
    (tmp_path / "broken_rows.py").write_text("def workloads():\n    raise KeyError('typo in a row')\n")
    (tmp_path / "twice_rows.py").write_text(
        "from mpslinalg.triangular.workloads import workloads as _w\n\ndef workloads():\n    return _w() + _w()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    real = registry.families()
    monkeypatch.setattr(registry, "families", lambda: (*real, SimpleNamespace(workloads="broken_rows")))
    assert main(["--quick", "--device", "cpu", "--no-timing"]) == 1
    assert "KeyError: 'typo in a row'" in capsys.readouterr().err
    monkeypatch.setattr(registry, "families", lambda: (SimpleNamespace(workloads="twice_rows"),))
    with pytest.raises(RuntimeError, match="duplicate workload names"):  # a registry error too
        _workloads.workloads()


def test_no_ops_reports_environment_and_exits_0(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(mpslinalg, "__all__", [n for n in mpslinalg.__all__ if not hasattr(torch.linalg, n)])
    out = tmp_path / "r.json"
    assert main(["--quick", "--device", "cpu", "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["rows"] == [] and rep["implemented_ops"] == [] and rep["ok"] is True
    assert "ops implemented: none yet" in capsys.readouterr().out


def test_bad_device_is_a_usage_error(capsys):
    assert main(["--device", "tpu"]) == 2
    assert "--device" in capsys.readouterr().err


@pytest.mark.slow  # 45 s at load 1, minutes on a busy box; main() itself runs in-process above
def test_python_dash_m_quick_writes_json(tmp_path):
    # The command a user runs, in a fresh interpreter, with the ops that exist right now.
    out = tmp_path / "report.json"
    # OMP_NUM_THREADS=1: on a loaded 2-core box 2-thread ops stall when a thread is descheduled.
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "mpslinalg", "--quick", "--device", "cpu", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rep = json.loads(out.read_text())
    envd = rep["environment"]
    for key in ("torch", "python", "devices", "mps", "backends", "emulator_compiler", "date"):
        assert key in envd
    assert envd["torch"] == torch.__version__
    assert envd["backends"]["default"]["cpu"] == "torch"
    # One row per registered workload of the ops implemented in this checkout, each passing.
    assert len(rep["rows"]) == len(_workloads.workloads())
    assert all(r["ok"] for r in rep["rows"])
    assert "mpslinalg report" in proc.stdout and "ops implemented:" in proc.stdout


def _spin(us: float):
    """A call that takes ``us`` microseconds of wall time (a busy wait, immune to sleep granularity)."""
    import time

    def call():
        end = time.perf_counter() + us * 1e-6
        while time.perf_counter() < end:
            pass
    return call


def test_host_overhead_verdicts(monkeypatch):
    # On a fake clock (helpers.FakeClock: ~1 us a read, for the state probe): identical calls differ
    # by 0 in every round: they meet the +5 us target. A call that takes 48 us longer than its peer
    # exceeds it in every round.
    clock = FakeClock(tick=2.0**-20).install(monkeypatch)
    base = clock.work(10 * 2.0**-20)
    same = overhead.OverheadCase(name="same", op="x", ours=base, peer=base)
    slow = overhead.OverheadCase(name="slow", op="x", ours=clock.work(58 * 2.0**-20), peer=base)
    rec_same, rec_slow = overhead.measure([same, slow], quick=True)
    assert rec_same["verdict"] == "meets" and rec_same["extra_us"] == 0.0, rec_same
    assert rec_slow["verdict"] == "misses" and rec_slow["extra_us"] == pytest.approx(48 * 2.0**-20 * 1e6), rec_slow
    assert rec_slow["extra_low_us"] > overhead.TARGET_US and rec_slow["rounds"] >= 11


def test_overhead_reads_the_quietest_pass():
    # three passes; in the second the machine ran slow (torch's own call 2x, ours' extra 2x): the
    # record is the pass where torch's call was fastest, not a pool of all three
    from mpslinalg.mainjob.timing import Timing

    def one(torch_us, extra_us, n=20):
        t = [torch_us * 1e-6 * (1 + 0.001 * (i % 3)) for i in range(n)]
        return {"ours": Timing.from_samples([x + extra_us * 1e-6 for x in t]), "torch": Timing.from_samples(t)}

    case = overhead.OverheadCase(name="det 3x3", op="det", ours=lambda: None, peer=lambda: None)
    state = {"cases": [case], "records": [None], "passes": {0: [one(12.0, 3.0), one(24.0, 6.0), one(11.5, 2.9)]}}
    (rec,) = overhead.finish(state)
    assert rec["pass"] == 2 and abs(rec["extra_us"] - 2.9) < 1e-6 and rec["verdict"] == "meets"
    assert abs(rec["torch_us"] - 11.5) < 0.1 and len(rec["pass_extra_us"]) == 3
    # the widening: OVERHEAD_DRIFT x |extra| at 1.96 on each side of the order-statistic interval
    assert abs(rec["extra_high_us"] - (2.9 + 1.96 * overhead.OVERHEAD_DRIFT * 2.9)) < 1e-6
    state["passes"][0] = [one(24.0, 8.0)]  # +8 us: above the target by more than the drift
    assert overhead.finish(state)[0]["verdict"] == "misses"


def test_overhead_reads_the_quiet_rounds():
    # the machine alternates within a pass between its speed and ~1.7x slower (a tenant on the
    # sibling core): rounds whose state probe ran slow carry a 2x extra. The record reads the rounds
    # whose probe ran within QUIET of the run's fast state, from every pass, not the quietest pass
    from mpslinalg.mainjob.timing import Timing

    def one(slow_rounds, n=40):
        torch_s, ours_s, probe_s = [], [], []
        for i in range(n):
            k = 1.7 if i in slow_rounds else 1.0
            torch_s.append(12e-6 * k * (1 + 0.001 * (i % 3)))
            ours_s.append(torch_s[-1] + 2.5e-6 * k * (1 + 0.01 * (i % 5)))
            probe_s.append(20e-6 * k * (1 + 0.01 * (i % 4)))
        return {"ours": Timing.from_samples(ours_s), "torch": Timing.from_samples(torch_s),
                "probe": Timing.from_samples(probe_s)}

    case = overhead.OverheadCase(name="det 3x3", op="det", ours=lambda: None, peer=lambda: None)
    slow = set(range(0, 40, 4)) | set(range(1, 40, 4)) | set(range(2, 40, 4))  # 3 rounds of 4 slow
    state = {"cases": [case], "records": [None], "passes": {0: [one(slow), one(slow), one(set(range(30)))]}}
    (rec,) = overhead.finish(state)
    # quiet rounds: 10 + 10 + 10 = 30; their extra is 2.5-2.6 us; every pass's median is ~4.25
    assert rec["read"] == "quiet rounds" and rec["rounds"] == 30 and rec["all_rounds"] == 120
    assert 2.5 <= rec["extra_us"] <= 2.6 and rec["verdict"] == "meets"
    assert all(x > 4 for x in rec["pass_extra_us"])
    assert 11.9 <= rec["torch_us"] <= 12.1
    # too few quiet rounds: the quietest pass, as without a probe
    state["passes"][0] = [one(set(range(35))), one(set(range(40)))]
    (rec,) = overhead.finish(state)
    assert rec["read"] == "quietest pass" and rec["rounds"] == 40


def test_overhead_rows_cover_the_public_ops():
    names = {c.op for c in overhead.cases()}
    assert {"inv", "solve", "solve_triangular", "lu_factor", "det", "slogdet"} <= names
    for op in ("qr", "svd"):  # rows appear as soon as the family exports the op
        assert (op in names) == hasattr(mpslinalg, op)


def test_main_reports_host_overhead_when_selected(monkeypatch, tmp_path, capsys):
    base = _spin(5)
    monkeypatch.setattr(overhead, "cases", lambda: [overhead.OverheadCase("spin 5 us", "x", base, base)])
    out = tmp_path / "r.json"
    assert main(["--quick", "--device", "cpu", "--only", "host overhead", "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["rows"] == [] and [r["name"] for r in rep["host_overhead"]] == ["spin 5 us"]
    text = capsys.readouterr().out
    assert "host overhead" in text and "spin 5 us" in text and "ops meet ours <= torch.linalg + 5 us" in text


def test_path_taken_reads_the_front_doors_decisions():
    from mpslinalg.mainjob import PATHS, path_taken

    assert path_taken("torch", {}) == PATHS["ours"]  # no front door consulted the table
    assert path_taken("torch", {"inv_ex": {"ours": 2, "torch": 0}}) == "ours"
    assert path_taken("torch", {"solve": {"ours": 0, "torch": 1}}) == "torch.linalg (routed)"
    assert path_taken("torch", {"solve": {"ours": 0, "torch": 1}, "det": {"ours": 1, "torch": 0}}) == \
        "ours + torch.linalg (routed)"
    assert path_taken("emulator", {"solve": {"ours": 0, "torch": 1}}) == "kernels"
    assert path_taken("metal", {}) == "kernels"
    # only the row's own op counts: lstsq calling solve inside is not a routed lstsq
    assert path_taken("torch", {"solve": {"ours": 0, "torch": 1}}, "lstsq") == "ours"
    assert path_taken("torch", {"inv_ex": {"ours": 0, "torch": 1}}, "inv") == "torch.linalg (routed)"


def test_path_column_says_which_implementation_ran(routing_table, monkeypatch, capsys):
    # the real inv row (10000 4x4 float32 inverses): inside the default CPU table it runs ours; with
    # an empty table the front door hands it to torch.linalg; on the emulator backend the kernels run
    from mpslinalg import routing
    from mpslinalg.kernels import use_backend

    (w,) = [w for w in _workloads.workloads() if w.name == "inv 4x4 batched"]
    cpu = torch.device("cpu")
    assert run_workload(w, cpu, quick=True, timing=False)["path"] == "ours"
    assert main(["--quick", "--device", "cpu", "--only", "inv 4x4", "--no-timing"]) == 0
    header, _, row = capsys.readouterr().out.split("| workload")[1].splitlines()[:3]
    assert "| path " in header and "| ours " in row
    monkeypatch.setitem(routing.WHEN, "cpu", {})
    assert run_workload(w, cpu, quick=True, timing=False)["path"] == "torch.linalg (routed)"
    from helpers import require_emulator

    require_emulator()
    with use_backend("emulator"):
        row = run_workload(w, cpu, quick=True, timing=False)
    assert row["path"] == "kernels" and row["ok"], row


def test_an_undecided_row_gets_one_more_pass(stand_ins, monkeypatch):
    # a median ratio beyond the margin with an interval too wide to say so: one more pass of that
    # pair, its paired rounds pooled with the passes' (here the pooled interval decides: slower)
    import mpslinalg.mainjob as mj
    from mpslinalg.mainjob.timing import Timing, compare

    stand_ins()
    wide = {"mpslinalg": [1.0] * 6 + [10.0] * 3 + [1.0] * 2, "torch.linalg": [0.8] * 6 + [12.0] * 3 + [20.0] * 2}
    tight = {"mpslinalg": [1.0] * 30, "torch.linalg": [0.8] * 30}
    calls = []

    def fake(fns, **kw):
        data = wide if sum(c == ("mpslinalg", "torch.linalg") for c in calls) < mj.PASSES else tight
        calls.append(tuple(fns))
        return {k: Timing.from_samples(data[k] if k in data else [1.0] * 30) for k in fns}

    monkeypatch.setattr(mj, "time_interleaved", fake)
    (w,) = [w for w in _workloads.workloads() if w.name == "solve RANSAC 9x9"]
    row = run_workload(w, torch.device("cpu"), quick=True, timing=True)
    tl = row["peers"]["torch.linalg"]
    pairs = [("mpslinalg", "torch.linalg"), ("mpslinalg", "scipy")]
    assert calls == pairs * mj.PASSES + [pairs[0]]  # every pass times both pairs; then torch's again
    assert tl["n"] == 11 * mj.PASSES + 30 and tl["verdict"] == "slower" and tl["speedup"] == 0.8
    assert tl["pass_ratios"] == [0.8] * (mj.PASSES + 1)
    assert compare(Timing.from_samples(wide["mpslinalg"] * mj.PASSES),
                   Timing.from_samples(wide["torch.linalg"] * mj.PASSES)).verdict == "inconclusive"


def test_cpu_rows_passes_are_spread_over_the_run(stand_ins, monkeypatch):
    # every row is prepared (accuracy) first; then pass k of every row before pass k + 1 of any, in
    # alternating order, so that each row's passes sample the machine at different times
    import mpslinalg.mainjob as mj

    stand_ins()
    seen = []
    monkeypatch.setattr(mj, "time_pass", lambda state, device, quick, pairs=None: seen.append(state["row"]["name"]))
    monkeypatch.setattr(mj, "finish_workload", lambda state, device, quick: None)
    rows_def = [w for w in _workloads.workloads() if w.name in ("solve RANSAC 9x9", "inv 4x4 batched")]
    names = [w.name for w in rows_def]
    rows = mj._measure(rows_def, torch.device("cpu"), quick=True, timing=True,
                       after_pass=lambda k: seen.append(f"host overhead {k}"))
    assert [r["name"] for r in rows] == names
    # the host-overhead section's pass k runs after the rows' pass k: its passes are minutes apart too
    assert seen == [*names, "host overhead 0", *names[::-1], "host overhead 1", *names, "host overhead 2"]
    assert mj.PASSES == 3
