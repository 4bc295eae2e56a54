"""scripts/compare_verdicts.py: row-by-row comparison of two main-job JSON reports (issue 15)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "compare_verdicts.py"
sys.path.insert(0, str(ROOT / "scripts"))
import compare_verdicts as cv  # noqa: E402


def _peer(ratio, low, high, verdict):
    return {"median_ms": 1.0, "speedup": ratio, "speedup_low": low, "speedup_high": high, "verdict": verdict}


def _report(rows, load=1.0):
    return {"environment": {"date": "2026-12-01T18:00:00+00:00"}, "device": "cpu", "quick": True,
            "load": {"start": load, "end": load}, "rows": rows}


def _row(name, torch_peer, scipy_peer=None, shape="64x32x32"):
    peers = {"torch.linalg": torch_peer}
    if scipy_peer is not None:
        peers["scipy"] = scipy_peer
    return {"name": name, "shape": shape, "peers": peers}


def test_agreement_flips_and_missing_rows(tmp_path):
    first = _report([
        _row("inv 4x4", _peer(7.8, 7.1, 8.4, "faster"), _peer(3.0, 2.5, 3.3, "faster")),
        _row("det fwd+bwd", _peer(0.88, 0.80, 0.95, "inconclusive")),
        _row("svd", _peer(0.75, 0.70, 0.80, "slower"), _peer(0.91, 0.85, 1.02, "inconclusive")),
        _row("lu", _peer(1.3, 1.12, None, "faster")),
        {"name": "broken", "shape": "", "error": "RuntimeError: x"},
    ])
    second = _report([
        _row("inv 4x4", _peer(6.8, 6.0, 7.5, "faster"), _peer(2.9, 2.4, 3.2, "faster")),
        _row("det fwd+bwd", _peer(0.84, 0.80, 0.89, "slower")),
        _row("svd", _peer(0.89, 0.80, 0.97, "inconclusive"), _peer(0.75, 0.70, 0.80, "slower")),
        _row("lu", _peer(1.2, 1.05, 1.3, "inconclusive")),
        _row("qr", _peer(1.0, 0.9, 1.1, "inconclusive")),
        {"name": "broken", "shape": "", "error": "RuntimeError: x"},
    ])
    recs = {(r["row"], r["peer"]): r for r in cv.compare(first, second)}
    assert recs[("inv 4x4", "torch.linalg")]["agree"] and recs[("inv 4x4", "scipy")]["agree"]
    assert recs[("broken", "-")]["agree"]  # an error in both runs is the same outcome
    flips = {k for k, r in recs.items() if not r["agree"]}
    assert flips == {("det fwd+bwd", "torch.linalg"), ("svd", "torch.linalg"), ("svd", "scipy"),
                     ("lu", "torch.linalg"), ("qr", "torch.linalg")}
    assert recs[("qr", "torch.linalg")]["first"] is None  # missing from run 1
    assert recs[("det fwd+bwd", "torch.linalg")]["near"] == "high edges 0.950 / 0.890 vs 1/1.1 = 0.909"
    assert recs[("lu", "torch.linalg")]["near"] == "low edges 1.120 / 1.050 vs 1.1"

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(first))
    b.write_text(json.dumps(second))
    out = subprocess.run([sys.executable, str(SCRIPT), str(a), str(b), "--flips"], capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    assert "3 of 8 verdicts agree (torch.linalg 1 of 5, scipy 1 of 2, - 1 of 1)" in out.stdout
    assert "inv 4x4" not in out.stdout and "| det fwd+bwd | 64x32x32 | torch.linalg |" in out.stdout
    assert "1-min load average 1.0 at start" in out.stdout
    same = subprocess.run([sys.executable, str(SCRIPT), str(a), str(a)], capture_output=True, text=True)
    assert same.returncode == 0 and "7 of 7 verdicts agree" in same.stdout


@pytest.mark.parametrize("content", ["not json", json.dumps({"rows": "x"}), json.dumps([1, 2])])
def test_unreadable_input_is_exit_2(tmp_path, content):
    bad, good = tmp_path / "bad.json", tmp_path / "good.json"
    bad.write_text(content)
    good.write_text(json.dumps(_report([])))
    out = subprocess.run([sys.executable, str(SCRIPT), str(bad), str(good)], capture_output=True, text=True)
    assert out.returncode == 2 and "compare_verdicts:" in out.stderr


def test_reads_the_main_jobs_own_json(tmp_path):
    # the real report format: one --only row, no timing-free rows; compared with itself it agrees
    path = tmp_path / "r.json"
    run = subprocess.run([sys.executable, "-m", "mpslinalg", "--quick", "--only", "inv 4x4", "--json", str(path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(path.read_text())
    assert report["load"]["start"] is None or report["load"]["start"] >= 0
    # one torch thread on the CPU: samples read the process's CPU time, SciPy's BLAS runs one thread
    assert report["cpu_clock"] == "process" and report["scipy_blas"]["threads"] == 1
    recs = cv.compare(report, report)
    assert [(r["row"], r["peer"]) for r in recs] == [("inv 4x4 batched", "torch.linalg"), ("inv 4x4 batched", "scipy")]
    assert all(r["agree"] for r in recs)


def _overhead(name, extra, low, high, verdict, drift_us=0.0):
    return {"name": name, "op": "x", "extra_us": extra, "extra_low_us": low, "extra_high_us": high,
            "drift_us": drift_us, "verdict": verdict}


def test_host_overhead_verdicts_are_compared():
    first = {**_report([]), "host_overhead": [_overhead("det 3x3", 2.9, 2.4, 3.4, "meets"),
                                              _overhead("solve 256x9x9", 5.8, 5.2, 6.4, "misses")]}
    second = {**_report([]), "host_overhead": [_overhead("det 3x3", 3.1, 2.6, 3.6, "meets"),
                                               _overhead("solve 256x9x9", 5.1, 4.1, 6.1, "inconclusive")]}
    recs = {r["row"]: r for r in cv.compare(first, second)}
    assert recs["det 3x3"]["agree"] and recs["det 3x3"]["peer"] == cv.OVERHEAD
    assert not recs["solve 256x9x9"]["agree"]
    assert recs["solve 256x9x9"]["near"] == "low edges +5.2 / +4.1 vs +5 us"
    assert cv._cell(recs["det 3x3"]["first"]) == "+2.9 us [2.4, 3.4] meets"


def test_drift_is_derived_by_the_documented_method():
    # Two pairs; every row's interval in log is +-1.96 se around its ratio, widened by the drift the
    # run recorded (0.042): the derivation must undo that widening, and then 2 tau^2 is the mean
    # excess of the squared run-to-run differences over se1^2 + se2^2.
    import math

    z, drift, se = 1.959963984540054, 0.042, 0.01

    def peer(ratio):
        w = math.exp(z * (se + drift))
        return {**_peer(ratio, ratio / w, ratio * w, "inconclusive"), "drift": drift}

    def run(r1, r2, extra):
        rep = _report([_row("a", peer(r1)), _row("b", peer(r2))])
        w = math.exp(z * se)
        rep["host_overhead"] = [_overhead("x", extra, extra / w - z * 0.1, extra * w + z * 0.1, "meets", 0.1)]
        return rep

    pairs = [(run(1.0, 2.0, 3.0), run(1.1, 2.0, 3.3)), (run(1.0, 2.2, 3.0), run(1.0, 2.0, 3.0))]
    got = cv.derive_drift(pairs)
    d = [math.log(1.1), 0.0, 0.0, math.log(1.1)]
    want = math.sqrt(sum(x * x - 2 * se * se for x in d) / 4 / 2)
    assert got["torch.linalg"]["rows"] == 4 and math.isclose(got["torch.linalg"]["tau"], want, rel_tol=1e-6)
    assert got["torch.linalg"]["worst"][0] in ("a", "b")
    # the overhead's se in log is not exactly se (the interval is symmetric in us, not in log): ~se
    want_o = math.sqrt((math.log(1.1) ** 2 + 0.0) / 2 / 2)
    assert got[cv.OVERHEAD]["rows"] == 2 and abs(got[cv.OVERHEAD]["tau"] - want_o) < 0.01
    assert cv.derive_drift([(run(1.0, 2.0, 3.0), run(1.0, 2.0, 3.0))])["torch.linalg"]["tau"] == 0.0


def test_drift_cli_takes_pairs(tmp_path):
    paths = []
    for i, r in enumerate([1.0, 1.1, 1.0, 1.0]):
        p = tmp_path / f"{i}.json"
        p.write_text(json.dumps(_report([_row("a", {**_peer(r, r / 1.1, r * 1.1, "inconclusive"), "drift": 0.042})])))
        paths.append(str(p))
    out = subprocess.run([sys.executable, str(SCRIPT), "--drift", *paths], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "| torch.linalg | 2 |" in out.stdout
    odd = subprocess.run([sys.executable, str(SCRIPT), "--drift", *paths[:3]], capture_output=True, text=True)
    assert odd.returncode == 2 and "pairs" in odd.stderr


def test_row_drift_is_each_rows_spread_over_runs_beyond_its_noise():
    # One row over four runs, each interval +-1.96 se in log (se = 0.01) widened by the recorded drift:
    # tau^2 = var(logs) - se^2 (the runs' widening undone); a steady row gets 0.
    import math

    z, drift, se = 1.959963984540054, 0.045, 0.01

    def rep(ra, rb):
        def peer(r):
            w = math.exp(z * (se + drift))
            return {**_peer(r, r / w, r * w, "inconclusive"), "drift": drift}
        return _report([_row("moving", peer(ra)), _row("steady", peer(rb))])

    ratios = [1.1, 1.4, 1.2, 1.05]
    got = cv.derive_row_drift([rep(r, 2.0) for r in ratios])
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / 4
    want = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3 - se * se)
    assert math.isclose(got[("moving", "torch.linalg")]["tau"], want, rel_tol=1e-6)
    assert got[("steady", "torch.linalg")]["tau"] == 0.0 and got[("moving", "torch.linalg")]["runs"] == 4
    assert cv.main(["--row-drift", "a.json", "b.json"]) == 2  # fewer than three runs: a usage error
