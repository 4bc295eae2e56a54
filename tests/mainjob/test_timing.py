"""The timing core (mpslinalg.mainjob.timing) and the report helpers (mpslinalg.mainjob.report)."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from mpslinalg.mainjob.report import Progress, format_table
from mpslinalg.mainjob.timing import (
    PEER_DRIFT,
    RUN_DRIFT,
    Timing,
    compare,
    compare_passes,
    median_interval,
    pass_drift,
    time_callable,
    time_interleaved,
)


def test_statistics_of_known_samples():
    # Samples 1..9: median 5, min 1, max 9; inclusive quartiles are 3 and 7, so IQR = 4 exactly.
    t = Timing.from_samples([float(i) for i in (5, 1, 9, 3, 7, 2, 8, 4, 6)])
    assert (t.median, t.min, t.max, t.iqr, t.n) == (5.0, 1.0, 9.0, 4.0, 9)
    d = t.to_dict()
    assert d["median_ms"] == 5000.0 and d["iqr_ms"] == 4000.0
    assert Timing.from_samples([2.0]).iqr == 0.0
    with pytest.raises(ValueError, match="at least one sample"):
        Timing.from_samples([])


def test_sleep_is_timed_within_scheduler_slack():
    # time.sleep(d) sleeps at least d (POSIX guarantee) and returns after the scheduler wakes the
    # thread: within a few ms idle, within tens of ms on a loaded shared 2-core box. So the median
    # of 5 samples lies in [d, 2.5 d] for d = 40 ms; a per-call bookkeeping error (a missing
    # division by the calls per sample, a sample spanning two calls) would read >= 2 d.
    d = 0.04
    t = time_callable(lambda: time.sleep(d), device="cpu", warmup=1, repeat=5, min_time=0.0)
    assert t.n >= 5 and t.number == 1
    assert d <= t.min <= t.median <= t.max
    assert t.median <= 2.5 * d


def test_fast_calls_are_repeated_per_sample():
    # A no-op call takes ~100 ns, far below the 0.1 ms sample target: calls must be batched
    # (number > 1) and the per-call time must stay far below the 0.1 ms target.
    t = time_callable(lambda: None, device="cpu", warmup=1, repeat=3, min_time=0.0)
    assert t.number > 10
    assert t.median < 1e-4


def test_interleaved_callables_share_one_count_per_sample():
    # A sample's own cost (clock reads, the loop) is divided by its count: with different counts the
    # pair's difference carried it (host overhead +7.6 us with 1 call a sample against 7, +3.2 with
    # 5 and 7). A no-op and a ~20 us call timed together get the no-op's count, both.
    t = time_interleaved({"noop": lambda: None, "sum": lambda: sum(range(500))}, device="cpu",
                         warmup=1, repeat=3, min_time=0.0, cpu_clock="process")
    assert t["noop"].number == t["sum"].number > 10


def test_interleaved_count_set_by_the_named_callables():
    # calibrate=(...): the host-overhead section's state probe (~20 us) must not raise the count of
    # a slow pair's samples; it runs as many times as the named callables' count says
    slow = lambda: sum(range(20000))  # noqa: E731 - ~0.5 ms: one call a sample
    t = time_interleaved({"a": slow, "b": slow, "probe": lambda: None}, device="cpu", warmup=1, repeat=3,
                         min_time=0.0, cpu_clock="process", calibrate=("a", "b"))
    assert t["a"].number == t["b"].number == t["probe"].number == 1
    t = time_interleaved({"a": slow, "b": slow, "probe": lambda: None}, device="cpu", warmup=1, repeat=3,
                         min_time=0.0, cpu_clock="process")
    assert t["a"].number == t["probe"].number > 10  # without it the no-op sets the count


def test_interleaved_ratio_of_known_costs():
    # Two sleeps of 20 and 60 ms: the ratio of medians is (60 + s2)/(20 + s1) with the wake-up
    # latencies s >= 0; for s up to 60 ms (a very loaded box) it lies in [1.5, 4].
    r = time_interleaved({"a": lambda: time.sleep(0.02), "b": lambda: time.sleep(0.06)},
                         device="cpu", warmup=1, repeat=4, min_time=0.0)
    assert set(r) == {"a", "b"} and r["a"].n >= 4 and r["b"].n >= 4
    assert 1.5 <= r["b"].median / r["a"].median <= 4.0


def test_min_time_adds_samples_and_max_time_caps_them():
    # ~1 ms calls and min_time 0.3 s: sampling continues past repeat=3 exactly until the samples
    # cover 0.3 s (whatever the wake-up latency of a loaded box adds to each sleep).
    t = time_callable(lambda: time.sleep(0.001), device="cpu", warmup=0, repeat=3, min_time=0.3)
    assert t.n > 3 and t.number == 1
    assert sum(t.samples) >= 0.3 > sum(t.samples[:-1])
    # max_time 0 stops right after the `repeat` samples even though min_time asks for 10 s.
    t = time_callable(lambda: time.sleep(0.001), device="cpu", warmup=0, repeat=3, min_time=10.0,
                      max_time=0.0)
    assert t.n == 3
    # A slow call (20 ms) with repeat=10 but max_time=0.05 s: the cap wins once MIN_SAMPLES = 3
    # samples exist (warm-up 1 + calibration 1 + 3 samples = 5 calls, ~0.1 s, not 12 calls).
    t0 = time.perf_counter()
    t = time_callable(lambda: time.sleep(0.02), device="cpu", warmup=1, repeat=10, min_time=0.0,
                      max_time=0.05)
    assert t.n == 3
    assert time.perf_counter() - t0 < 0.2 + 5 * 0.02


def test_matmul_is_slower_than_an_add():
    # 256^3 multiply-adds vs 256^2 adds: ~256x the flops; even at very different efficiencies the
    # matmul must take longer than the add.
    x = torch.randn(256, 256)
    r = time_interleaved({"mm": lambda: x @ x, "add": lambda: x + x}, device="cpu", warmup=1, repeat=5,
                         min_time=0.0)
    assert r["mm"].median > r["add"].median


def test_bad_arguments():
    with pytest.raises(ValueError, match="repeat"):
        time_callable(lambda: None, device="cpu", repeat=0)
    with pytest.raises(ValueError, match="warmup"):
        time_callable(lambda: None, device="cpu", warmup=-1)
    with pytest.raises(ValueError, match="device"):
        time_callable(lambda: None, device="xla")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="cuda"):
            time_callable(lambda: None, device="cuda")


def test_format_table_and_progress():
    s = format_table(["a", "b"], [["x", 1.5], ["yy", 10]])
    lines = s.splitlines()
    assert lines == ["| a  |   b |", "|----|----:|", "| x  | 1.5 |", "| yy |  10 |"]
    assert format_table(["r"], [["|a|"]]).splitlines()[2] == "| \\|a\\| |"  # a bare | would split the cell
    with pytest.raises(ValueError, match="2 cells"):
        format_table(["a"], [["x", "y"]])
    buf = io.StringIO()
    p = Progress(2, stream=buf)
    p.start("one")
    assert buf.getvalue() == ""  # in a log, an item appears when it is done, not when it starts
    p.step("one")
    p.start("two")
    p.step("two")
    p.close()
    half, full = "[" + "#" * 12 + "." * 12 + "]", "[" + "#" * 24 + "]"
    assert buf.getvalue().splitlines() == [f"{half} 1/2 one", f"{full} 2/2 two"]


def test_progress_on_a_terminal_counts_an_item_when_it_finishes():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    buf = Tty()
    p = Progress(2, stream=buf, width=4)
    p.start("one")
    assert buf.getvalue().endswith("[....] 0/2 one ...")  # running, not yet counted
    p.step("one")
    assert buf.getvalue().endswith("[##..] 1/2 one")


def test_median_interval_is_the_binomial_order_statistic_interval():
    # n = 9: P(Bin(9, 1/2) <= 1) = 10/512 = 0.0195 <= 0.025 < P(<= 2) = 46/512, so k = 2 and the 95%
    # interval is [x_(2), x_(8)] (coverage 1 - 2 * 0.0195 = 0.961).
    assert median_interval([5.0, 1, 9, 3, 7, 2, 8, 4, 6]) == (2.0, 8.0)
    # n = 5: even [x_(1), x_(5)] covers only 1 - 2/32 = 0.9375 < 0.95: unbounded.
    assert median_interval([1.0, 2, 3, 4, 5]) == (-math.inf, math.inf)
    assert median_interval([1.0, 2, 3, 4, 5, 6]) == (1.0, 6.0)  # 1 - 2/64 = 0.969


def test_compare_verdicts_from_paired_samples():
    ours = Timing.from_samples([1.0, 2.0, 4.0] * 5)  # the machine drifts by 4x between rounds ...
    twice = Timing.from_samples([2.0, 4.0, 8.0] * 5)  # ... and the peer takes 2x in every round
    c = compare(ours, twice, drift=0)
    assert (c.ratio, c.low, c.high, c.n, c.verdict) == (2.0, 2.0, 2.0, 15, "faster")
    # the run-to-run drift widens the interval by exp(1.96 drift) on each side
    c = compare(ours, twice)
    w = math.exp(1.959963984540054 * RUN_DRIFT)
    assert c.ratio == 2.0 and math.isclose(c.low, 2.0 / w) and math.isclose(c.high, 2.0 * w)
    # a tight interval just beyond the margin is no verdict once the next run's drift is allowed for
    beyond = Timing.from_samples([1.0 / 0.89] * 15)  # ours 0.89x: [0.89, 0.89] within the run
    assert compare(beyond, Timing.from_samples([1.0] * 15), drift=0).verdict == "slower"
    assert compare(beyond, Timing.from_samples([1.0] * 15)).verdict == "inconclusive"
    with pytest.raises(ValueError, match="drift"):
        compare(ours, twice, drift=-1)
    assert compare(twice, ours).verdict == "slower"
    same = Timing.from_samples([1.02, 0.97, 1.01, 0.99, 1.03, 0.98, 1.0, 1.01, 0.99, 1.0])
    assert compare(Timing.from_samples([1.0] * 10), same).verdict == "inconclusive"
    # A 5% difference is never claimed (inside the margin), however tight its interval.
    assert compare(ours, Timing.from_samples([1.05, 2.1, 4.2] * 5)).verdict == "inconclusive"
    assert compare(Timing.from_samples([1.0] * 5), Timing.from_samples([9.0] * 5)).verdict == "inconclusive"
    with pytest.raises(ValueError, match="margin"):
        compare(ours, twice, margin=0.5)


def _pass(ratio: float, n: int = 20, jitter: float = 0.01) -> tuple[Timing, Timing]:
    """One pass of ``n`` rounds: ours 1.0 s, the peer ``ratio`` s times a deterministic +-jitter."""
    peer = [ratio * (1 + jitter * ((i % 5) - 2) / 2) for i in range(n)]
    return Timing.from_samples([1.0] * n), Timing.from_samples(peer)


def test_pass_drift_is_the_spread_of_the_pass_medians_beyond_their_noise():
    assert PEER_DRIFT["scipy"] > RUN_DRIFT > 0  # SciPy's BLAS drifts apart from torch's (timing.py)
    z = 1.959963984540054
    # passes that agree: no drift of their own (their medians differ by less than their noise)
    same = [_pass(1.25), _pass(1.25), _pass(1.25)]
    assert pass_drift([o for o, _ in same], [p for _, p in same]) == 0.0
    c = compare_passes([o for o, _ in same], [p for _, p in same])
    assert c.drift == RUN_DRIFT and c.verdict == "faster" and c.pass_ratios == (1.25, 1.25, 1.25)
    # DeltaNet against SciPy: two passes in one machine state, one in another (1.25x, then 1.6x)
    moved = [_pass(1.25), _pass(1.25), _pass(1.6)]
    tau = pass_drift([o for o, _ in moved], [p for _, p in moved])
    logs = [math.log(1.25), math.log(1.25), math.log(1.6)]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)  # the per-pass noise here is ~1e-3 of it
    assert math.isclose(tau, sd, rel_tol=1e-3), (tau, sd)
    c = compare_passes([o for o, _ in moved], [p for _, p in moved], floor=0.05)
    # the passes are pooled (median 1.25, tight) and widened by the floor; the row's own drift is
    # recorded, not used (from three passes it is too noisy to decide by: see compare_passes)
    assert math.isclose(c.ratio, 1.25, rel_tol=0.01) and c.drift == 0.05 and c.own_drift == tau
    pooled = [Timing.from_samples([s for t in side for s in t.samples]) for side in zip(*moved)]
    pooled_low = compare(*pooled, drift=0).low / math.exp(z * 0.05)
    # ... and the three passes as estimates in three machine states: the t interval of their mean
    # (2 degrees of freedom: 4.3027 standard errors), widened by the floor; the verdict reads the
    # union, whose lower edge the moved pass takes below the margin (the pooled one alone said
    # faster): not "faster" on the strength of the states this run happened to see
    half = 4.302652729749557 * sd / math.sqrt(3)
    t_low, t_high = (math.exp(mean + s * half) * math.exp(s * z * 0.05) for s in (-1, 1))
    assert pooled_low > 1.1 and math.isclose(c.low, t_low, rel_tol=1e-6) and math.isclose(c.high, t_high, rel_tol=1e-6)
    assert t_low < 1.1 and c.verdict == "inconclusive"
    # passes that agree keep the pooled interval: the t interval of three equal medians is a point
    c_same = compare_passes([o for o, _ in same], [p for _, p in same], floor=0.05)
    assert math.isclose(c_same.low, compare(*[Timing.from_samples([s for t in side for s in t.samples])
                                             for side in zip(*same)], drift=0.05).low)
    assert compare_passes([same[0][0]], [same[0][1]]).pass_ratios == ()  # one pass: none listed
    with pytest.raises(ValueError, match="passes"):
        compare_passes([same[0][0]], [])
    d = c.to_dict()
    assert json.loads(json.dumps(d))["pass_ratios"] == list(c.pass_ratios) and d["own_drift"] == tau


def test_t_quantile_matches_the_tables():
    from mpslinalg.mainjob.timing import _t_quantile

    for df, q in ((1, 12.7062), (2, 4.3027), (3, 3.1824), (10, 2.2281), (30, 2.0423)):  # 97.5% points
        assert abs(_t_quantile(0.975, df) - q) < 1e-4, (df, _t_quantile(0.975, df))
    with pytest.raises(ValueError, match="df"):
        _t_quantile(0.975, 0)


def test_interleaved_work_of_three_times_the_cost_is_called_slower():
    # Pure-Python loops of 20k and 60k additions: the per-round ratio is ~3 whatever the load, since
    # both samples of a round see the same machine; the verdict must say so, and identical work must
    # not be called either way.
    work = {"1x": lambda: sum(range(20_000)), "3x": lambda: sum(range(60_000)),
            "1x again": lambda: sum(range(20_000))}
    # the process's CPU time: on the loaded box wall time adds other users' time to some samples
    # (a flaky "1x vs 1x again" verdict at load 8), not the loops' own cost
    t = time_interleaved(work, device="cpu", warmup=1, repeat=15, min_time=0.0, max_time=10.0,
                         min_samples=9, cpu_clock="process")
    assert t["1x"].n >= 9
    c = compare(t["1x"], t["3x"])
    assert c.verdict == "faster" and 2.0 <= c.ratio <= 4.5, c
    assert compare(t["3x"], t["1x"]).verdict == "slower"
    assert compare(t["1x"], t["1x again"]).verdict == "inconclusive"


@pytest.mark.cuda
def test_cuda_events_measure_gpu_time():
    # torch.cuda._sleep(c) spins the GPU for c clock cycles and returns to the host at once, so only
    # events (or a synchronised clock) see its cost. 3x the cycles must read as 3x the time up to
    # launch overhead (~10 us against >= 1 ms here): ratio in [2.5, 3.5].
    cycles = 2_000_000  # ~1 ms at ~2 GHz
    fns = {"1": lambda: torch.cuda._sleep(cycles), "3": lambda: torch.cuda._sleep(3 * cycles)}
    r = time_interleaved(fns, device="cuda", warmup=1, repeat=8, min_time=0.0)
    assert r["1"].median > 2e-4
    assert 2.5 <= r["3"].median / r["1"].median <= 3.5


@pytest.mark.mps
def test_mps_timing_sees_gpu_work():
    # A 2048^3 matmul has 512x the flops of a 256^3 one; queued GPU work must be waited for, so the
    # big one must read at least 4x slower (far below 512x: small matmuls are overhead-bound).
    a, b = torch.randn(256, 256, device="mps"), torch.randn(2048, 2048, device="mps")
    r = time_interleaved({"a": lambda: a @ a, "b": lambda: b @ b}, device="mps", warmup=2, repeat=5,
                         min_time=0.0)
    assert r["b"].median >= 4 * r["a"].median


# ---- the benchmark runner (benchmarks/harness.py) on the timing core --------------------------------

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `pytest` (not `python -m pytest`) does not put the root on sys.path
    sys.path.insert(0, str(ROOT))


def _harness():
    from benchmarks import harness

    return harness


def test_run_cases_ratios_roofline_and_errors(tmp_path):
    h = _harness()
    x = torch.ones(2**20)  # 4 MiB

    def broken():
        raise RuntimeError("no such op here")

    cases = [
        # ours 20 ms vs peer 60 ms: peer/ours = (60 + s2)/(20 + s1) in [1.5, 4] for wake-up
        # latencies s up to 60 ms.
        h.Case(name="sleep", workload="w", device="cpu", dtype=torch.float32, shape=(1,),
               ours=lambda: time.sleep(0.02), peer={"slow": lambda: time.sleep(0.06), "missing": broken}),
        # ours *is* the copy reference: the roofline fraction is the ratio of medians of the same
        # interleaved call, 1 up to noise; a 4x bias would mean broken interleaving.
        h.Case(name="copy", workload="w", device="cpu", dtype=torch.float32, shape=(2**20,),
               ours=lambda: torch.empty_like(x).copy_(x), bytes_moved=2 * x.nbytes),
        h.Case(name="fails", workload="w", device="cpu", dtype=torch.float32, shape=(1,), ours=broken),
    ]
    out = io.StringIO()
    # min_time 0.1 s: the ~1 ms copies get ~100 samples, so a few preempted ones on a loaded box
    # cannot move the median.
    res = h.run_cases(cases, out_json=tmp_path / "r.json", out_md=tmp_path / "r.md", warmup=1, repeat=5,
                      min_time=0.1, family="selftest", stream=out)
    assert res["ok"] is False  # the last case's op raised
    sleep, copy, fails = res["cases"]
    slow = sleep["peers"]["slow"]
    assert 1.5 <= slow["ratio"] <= 4.0 and slow["ratio_low"] <= slow["ratio"]
    # 5 rounds of 20 ms cover min_time; 5 paired ratios cannot bound a median at 95% (1 - 2/32 <
    # 0.95), so however clear the ratio looks, the harness must not call it.
    assert slow["n"] == 5 and slow["verdict"] == "inconclusive" and slow["ratio_high"] is None
    assert sleep["peers"]["missing"] == {"error": "RuntimeError: no such op here"}
    roof = copy["roofline"]
    assert roof["bound"] == "bandwidth"
    assert roof["fraction"] == pytest.approx(roof["copy_ms"] / copy["ours"]["median_ms"])
    assert 0.25 <= roof["fraction"] <= 4.0
    assert fails["error"] == "RuntimeError: no such op here" and "ours" not in fails
    on_disk = json.loads((tmp_path / "r.json").read_text())
    assert on_disk["family"] == "selftest" and on_disk["environment"]["torch"] == torch.__version__
    md = (tmp_path / "r.md").read_text()
    assert "| sleep" in md and "peer/ours" in md and "ERROR RuntimeError" in md and "inconclusive" in md
    assert out.getvalue().count("| sleep") == 2  # one row per peer


def test_nominal_peaks_pick_the_most_specific_name():
    h = _harness()
    assert h.nominal_peaks("NVIDIA H200") == (4.8e12, 67e12)
    assert h.nominal_peaks("NVIDIA H200 NVL") == (4.8e12, 60e12)
    assert h.nominal_peaks("Apple M3 Max") == (400e9, 16.4e12)
    assert h.nominal_peaks("Apple M3") == (100e9, 4.1e12)
    assert h.nominal_peaks("AMD EPYC") is None


def test_bench_matmul_cli_quick(tmp_path):
    # The self-benchmark as a user runs it: a matmul timed against the very same call must give a
    # ratio near 1 (interleaved medians of identical work; 3x covers a noisy shared 2-core box).
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_matmul.py"), "--device", "cpu", "--quick",
           "--out", str(tmp_path)]
    # One intra-op thread: on a loaded 2-core box a 2-thread matmul stalls whenever one of its
    # threads is descheduled, which makes even identical calls time apart.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads((tmp_path / "matmul_cpu_quick.json").read_text())
    assert res["ok"] and res["quick"] and len(res["cases"]) == 3
    mm = res["cases"][0]
    assert 1 / 3 <= mm["peers"]["torch.matmul (same call)"]["ratio"] <= 3
    assert mm["roofline"]["gemm_GFLOPs"] > 0 and mm["ours"]["n"] >= 5
    assert (tmp_path / "matmul_cpu_quick.md").read_text().count("\n|") >= 4


@pytest.mark.cuda
def test_cuda_sync_check_tells_sync_free_from_syncing():
    h = _harness()
    x = torch.ones(1024, device="cuda")
    cases = [h.Case(name="free", workload="w", device="cuda", dtype=torch.float32, shape=(1024,),
                    ours=lambda: x * 2),
             h.Case(name="syncs", workload="w", device="cuda", dtype=torch.float32, shape=(1024,),
                    ours=lambda: (x * 2).sum().item())]
    res = h.run_cases(cases, warmup=1, repeat=4, min_time=0.0, stream=io.StringIO())
    assert [c["host_sync_free"] for c in res["cases"]] == [True, False]
    # x * 2 is one elementwise kernel; (x * 2).sum().item() adds a reduction kernel and a
    # device-to-host copy.
    free, syncs = res["cases"]
    assert free["launches"] == {"kernels": 1, "memcpy": 0, "memset": 0}
    assert syncs["launches"]["kernels"] == 2 and syncs["launches"]["memcpy"] == 1


@pytest.mark.parametrize("n", [2, 3])
def test_round_order_is_balanced(n):
    # over 2n consecutive rounds (cyclically, across round boundaries) every callable has the same
    # predecessors as every other (each other callable, and itself, equally often) and runs first
    # equally often: a callable whose predecessor slows it (cold caches after SciPy) is neither
    # favoured nor penalised against another (the main job times two or three callables)
    import collections

    from mpslinalg.mainjob.timing import _round_order

    names = [f"f{i}" for i in range(n)]
    rounds = [_round_order(names, r) for r in range(2 * n)]
    assert all(sorted(r) == names for r in rounds)
    flat = [x for r in rounds for x in r]
    pred = {b: sorted(collections.Counter(flat[i - 1] if flat[i - 1] != b else "self"
                                          for i in range(len(flat)) if flat[i] == b).items()) for b in names}
    counts = {b: sorted(c for _, c in pred[b]) for b in names}
    assert len({tuple(c) for c in counts.values()}) == 1, pred
    assert all(len({c for k, c in pred[b] if k != "self"}) == 1 for b in names), pred
    assert len(set(collections.Counter(r[0] for r in rounds).values())) == 1


def _spin(seconds: float) -> None:
    """Burn ``seconds`` of this process's CPU time (not wall time: a descheduled spin waits)."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_process_clock_counts_cpu_not_waiting():
    # cpu_clock="process" reads the process's CPU time: a 20 ms sleep costs microseconds of CPU (the
    # syscall and the wake-up), a 20 ms spin costs 20 ms however often the box deschedules it. The
    # wall clock sees the sleep (>= 20 ms, POSIX). Bounds: the sleep's CPU under 2 ms (100x the
    # syscall's cost); the spin's CPU in [20, 26] ms (the loop overshoots by one process_time call;
    # 6 ms covers a page fault or an interrupt charged to the process).
    sleep = time_callable(lambda: time.sleep(0.02), device="cpu", warmup=1, repeat=5, min_time=0.0,
                          cpu_clock="process")
    spin = time_callable(lambda: _spin(0.02), device="cpu", warmup=1, repeat=5, min_time=0.0, cpu_clock="process")
    wall = time_callable(lambda: time.sleep(0.02), device="cpu", warmup=1, repeat=3, min_time=0.0)
    assert sleep.median < 0.002
    assert 0.02 <= spin.median <= 0.026
    assert wall.median >= 0.02
    with pytest.raises(ValueError, match="cpu_clock"):
        time_callable(lambda: None, device="cpu", cpu_clock="cycles")


def test_no_garbage_collection_inside_samples():
    # As timeit: the collector is off while samples are taken and back on afterwards.
    import gc

    seen = []
    time_interleaved({"a": lambda: seen.append(gc.isenabled())}, device="cpu", warmup=1, repeat=3, min_time=0.0)
    assert gc.isenabled()
    assert seen[0] is True and not any(seen[1:])  # the warm-up call runs before the collector is off


def test_blas_threads_sets_and_restores_openblas():
    # SciPy's/NumPy's OpenBLAS runs with as many threads as torch while the main job measures.
    import numpy  # noqa: F401 - loads NumPy's OpenBLAS

    from mpslinalg.mainjob.report import _openblas_thread_controls, blas_threads

    controls = _openblas_thread_controls()
    if not controls:
        pytest.skip("no OpenBLAS loaded in this process (NumPy/SciPy built against another BLAS)")
    before = [get() for get, _ in controls]
    with blas_threads(1) as n:
        assert n == len(controls) and [get() for get, _ in controls] == [1] * n
    assert [get() for get, _ in controls] == before
    with blas_threads(None) as n:
        assert n == 0
