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
from helpers import FakeClock

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


# The timing core is tested on a fake clock (tests/helpers.FakeClock): each callable "takes" a known
# time, so every count, sample and ratio is exact and no assertion depends on how loaded this machine
# is (issue 34: a wall-clock ratio bound failed at load 8). Durations are powers of two, which the
# clock's sums and differences keep exact. Speed itself belongs in benchmarks.
US = 2.0**-20  # ~0.95 us


def test_a_call_is_timed_as_the_clock_says(monkeypatch):
    # a 40 ms call: one call a sample (>= 10x the 0.1 ms target), each sample 40 ms, and a per-call
    # bookkeeping error (a missing division by the calls per sample, a sample spanning two calls)
    # would read 2x
    clock = FakeClock().install(monkeypatch)
    t = time_callable(clock.work(2.0**-5), device="cpu", warmup=1, repeat=5, min_time=0.0)
    assert (t.n, t.number) == (5, 1) and t.samples == (2.0**-5,) * 5


def test_real_clocks_see_a_sleep():
    # the real clock end to end, with no bound that load can break: time.sleep(d) sleeps at least d
    # (POSIX), so no sample may read less (whatever else the machine runs, samples only grow)
    d = 0.01
    t = time_callable(lambda: time.sleep(d), device="cpu", warmup=1, repeat=3, min_time=0.0)
    assert t.n == 3 and t.number == 1 and t.min >= d
    x = torch.randn(64, 64)
    r = time_interleaved({"mm": lambda: x @ x, "add": lambda: x + x}, device="cpu", warmup=1, repeat=3,
                         min_time=0.0)
    assert all(v.n >= 3 and v.number >= 1 and v.min > 0 for v in r.values())


def test_fast_calls_are_repeated_per_sample(monkeypatch):
    # a ~1 us call, far below the 0.1 ms sample target: ceil(0.1 ms / 1 us) calls a sample, and the
    # per-call time divides them out
    clock = FakeClock().install(monkeypatch)
    t = time_callable(clock.work(US), device="cpu", warmup=1, repeat=3, min_time=0.0)
    assert t.number == math.ceil(1e-4 / US) == 105
    assert t.samples == (US,) * 3


def test_interleaved_callables_share_one_count_per_sample(monkeypatch):
    # A sample's own cost (clock reads, the loop) is divided by its count: with different counts the
    # pair's difference carried it (host overhead +7.6 us with 1 call a sample against 7, +3.2 with
    # 5 and 7). A ~1 us call and a ~30 us call timed together get the fast one's count, both.
    clock = FakeClock().install(monkeypatch)
    t = time_interleaved({"noop": clock.work(US), "sum": clock.work(32 * US)}, device="cpu",
                         warmup=1, repeat=3, min_time=0.0, cpu_clock="process")
    assert t["noop"].number == t["sum"].number == 105
    assert t["noop"].median == US and t["sum"].median == 32 * US


def test_interleaved_count_set_by_the_named_callables(monkeypatch):
    # calibrate=(...): the host-overhead section's state probe must not raise the count of a slow
    # pair's samples; it runs as many times as the named callables' count says
    clock = FakeClock().install(monkeypatch)
    slow = clock.work(512 * US)  # ~0.5 ms: one call a sample
    t = time_interleaved({"a": slow, "b": slow, "probe": clock.work(US)}, device="cpu", warmup=1, repeat=3,
                         min_time=0.0, cpu_clock="process", calibrate=("a", "b"))
    assert t["a"].number == t["b"].number == t["probe"].number == 1
    t = time_interleaved({"a": slow, "b": slow, "probe": clock.work(US)}, device="cpu", warmup=1, repeat=3,
                         min_time=0.0, cpu_clock="process")
    assert t["a"].number == t["probe"].number == 105  # without it the fast probe sets the count


def test_interleaved_rounds_take_one_sample_of_each(monkeypatch):
    # round by round, one sample of each callable in the rotating order of _round_order: a machine
    # that slows down between rounds slows both samples of a round, and the paired ratio keeps its
    # value (here the machine halves its speed after every round: 2^7 over the run)
    from mpslinalg.mainjob.timing import _round_order

    clock = FakeClock().install(monkeypatch)
    order = []

    def call(name, cost):
        def fn():
            order.append(name)
            clock.advance(cost * 2.0 ** ((len(order) - 1) // 2))  # calls 2k and 2k+1: one round
        return fn

    # ~2 and ~6 ms: one calibration call each (the first "round"), one call a sample
    r = time_interleaved({"a": call("a", 2.0**-9), "b": call("b", 3 * 2.0**-9)}, device="cpu", warmup=0,
                         repeat=6, min_time=0.0)
    assert order[:2] == ["a", "b"] and order[2:] == [x for k in range(6) for x in _round_order(["a", "b"], k)]
    assert r["a"].number == r["b"].number == 1 and r["a"].n == r["b"].n == 6
    assert r["a"].samples == tuple(2.0 ** (k - 9) for k in range(1, 7))  # the drift itself: 64x
    c = compare(r["a"], r["b"], drift=0)
    assert (c.ratio, c.low, c.high, c.verdict) == (3.0, 3.0, 3.0, "faster")


def test_min_time_adds_samples_and_max_time_caps_them(monkeypatch):
    clock = FakeClock().install(monkeypatch)
    # ~1 ms calls and min_time 0.3 s: sampling continues past repeat=3 exactly until the samples
    # cover 0.3 s: ceil(0.3 / 2^-10) = 308 samples
    t = time_callable(clock.work(1024 * US), device="cpu", warmup=0, repeat=3, min_time=0.3)
    assert t.n == 308 and t.number == 1
    assert sum(t.samples) >= 0.3 > sum(t.samples[:-1])
    # max_time 0 stops right after the `repeat` samples even though min_time asks for 10 s.
    t = time_callable(clock.work(1024 * US), device="cpu", warmup=0, repeat=3, min_time=10.0, max_time=0.0)
    assert t.n == 3
    # A slow call (~16 ms) with repeat=10 but max_time=0.05 s: the cap wins once MIN_SAMPLES = 3
    # samples exist: warm-up 1 + calibration 1 + 3 samples = 5 calls, not 12.
    start = clock.now
    t = time_callable(clock.work(2.0**-6), device="cpu", warmup=1, repeat=10, min_time=0.0, max_time=0.05)
    assert t.n == 3
    assert clock.now - start == 5 * 2.0**-6


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


def test_interleaved_work_of_three_times_the_cost_is_called_slower(monkeypatch):
    # ~20 us and ~60 us calls, each with its own deterministic +-2% jitter: the verdicts must say 3x,
    # and identical work must not be called either way
    clock = FakeClock().install(monkeypatch)

    def jittered(cost):
        i = [0]

        def duration():
            i[0] += 1
            return cost * (1 + 0.01 * ((i[0] * 7) % 5 - 2))
        return duration

    work = {"1x": clock.work(jittered(20e-6)), "3x": clock.work(jittered(60e-6)),
            "1x again": clock.work(jittered(20e-6))}
    t = time_interleaved(work, device="cpu", warmup=1, repeat=15, min_time=0.0, max_time=10.0,
                         min_samples=9, cpu_clock="process")
    assert t["1x"].n == 15
    c = compare(t["1x"], t["3x"])
    assert c.verdict == "faster" and 2.8 <= c.low <= c.ratio <= c.high <= 3.2, c  # 3 x (1 +- 2%)^2, widened
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


def test_run_cases_ratios_roofline_and_errors(tmp_path, monkeypatch):
    h = _harness()
    clock = FakeClock().install(monkeypatch)
    # the copy reference, too, takes a known time: 2^-10 s for the 8 MiB the case moves
    monkeypatch.setattr(h, "_copy_fn", lambda nbytes, device: clock.work(2.0**-10))

    def broken():
        raise RuntimeError("no such op here")

    cases = [
        # ours ~16 ms vs peer ~47 ms: peer/ours = 3 in every round
        h.Case(name="sleep", workload="w", device="cpu", dtype=torch.float32, shape=(1,),
               ours=clock.work(2.0**-6), peer={"slow": clock.work(3 * 2.0**-6), "missing": broken}),
        # ours takes 4x the copy of the bytes it moves: a quarter of the attainable bandwidth
        h.Case(name="copy", workload="w", device="cpu", dtype=torch.float32, shape=(2**20,),
               ours=clock.work(2.0**-8), bytes_moved=2 * 4 * 2**20),
        h.Case(name="fails", workload="w", device="cpu", dtype=torch.float32, shape=(1,), ours=broken),
    ]
    out = io.StringIO()
    res = h.run_cases(cases, out_json=tmp_path / "r.json", out_md=tmp_path / "r.md", warmup=1, repeat=5,
                      min_time=0.05, family="selftest", stream=out)
    assert res["ok"] is False  # the last case's op raised
    sleep, copy, fails = res["cases"]
    slow = sleep["peers"]["slow"]
    # 5 rounds of 16 ms cover min_time; 5 paired ratios cannot bound a median at 95% (1 - 2/32 <
    # 0.95), so however clear the ratio (3 in every round), the harness must not call it.
    assert slow["ratio"] == 3.0 and slow["ratio_low"] == 0.0 and slow["ratio_high"] is None
    assert slow["n"] == 5 and slow["verdict"] == "inconclusive"
    assert sleep["peers"]["missing"] == {"error": "RuntimeError: no such op here"}
    roof = copy["roofline"]
    assert roof["bound"] == "bandwidth" and roof["fraction"] == 0.25
    assert roof["copy_ms"] == 1000 * 2.0**-10 and roof["achieved_GBps"] == 8 * 2**20 / 2.0**-8 / 1e9
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
    # The self-benchmark as a user runs it: it runs, times and writes its JSON and table. No bound on
    # its ratios: they are measurements of this machine now (the interleaving itself is tested on
    # the fake clock above).
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
    assert 0 < mm["peers"]["torch.matmul (same call)"]["ratio"] < math.inf
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


def test_process_clock_counts_cpu_not_waiting(monkeypatch):
    # cpu_clock="process" samples the process's CPU time (time.process_time), "wall" the wall clock;
    # max_time is always wall time. Two fake clocks: a "sleep" advances only the wall, a "spin" both.
    from mpslinalg.mainjob import timing

    assert timing.CPU_CLOCKS == {"wall": time.perf_counter, "process": time.process_time}
    wall, cpu = FakeClock(), FakeClock()
    monkeypatch.setitem(timing.CPU_CLOCKS, "wall", wall)
    monkeypatch.setitem(timing.CPU_CLOCKS, "process", cpu)
    sleep = lambda: wall.advance(2.0**-6)  # noqa: E731
    spin = lambda: (wall.advance(2.0**-6), cpu.advance(2.0**-6))  # noqa: E731
    s = time_callable(sleep, device="cpu", warmup=1, repeat=5, min_time=0.0, max_time=1e9, cpu_clock="process")
    assert s.samples == (0.0,) * 5 and s.number == timing._MAX_NUMBER  # no CPU time at all
    assert time_callable(spin, device="cpu", warmup=1, repeat=5, min_time=0.0, cpu_clock="process").median == 2.0**-6
    assert time_callable(sleep, device="cpu", warmup=1, repeat=3, min_time=0.0).median == 2.0**-6
    # the time box reads the wall clock even while samples read the CPU clock: 3 samples, not 20
    t = time_callable(sleep, device="cpu", warmup=0, repeat=20, min_time=0.0, max_time=0.0, cpu_clock="process")
    assert t.n == 3
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
