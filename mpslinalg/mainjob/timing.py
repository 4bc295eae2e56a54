"""Synchronised wall-clock timing on cpu, cuda and mps (DESIGN §10).

One timing core serves the main job (``python -m mpslinalg``) and every benchmark in
``benchmarks/``, so both measure the same way:

* **cuda**: CUDA events recorded on the current stream around each call; the device is
  synchronised *before* the first start event and *after* the last end event of a batch of samples,
  never inside the timed region, so a sample is the GPU time between the end of the previous call
  and the end of this one (what a user sees in a loop; the host launch cost shows if it dominates).
* **mps**: ``torch.mps.Event(enable_timing=True)`` the same way when this torch has it, otherwise
  ``time.perf_counter`` with ``torch.mps.synchronize()`` before and after each call.
* **cpu**: ``time.perf_counter`` (wall clock), or with ``cpu_clock="process"`` the process's CPU
  time (``time.process_time``): on a shared machine a one-threaded call's wall time is its CPU time
  plus the time the scheduler gave the core to other processes (3x the CPU time at load 6 on the
  2-core box, different in every sample); its CPU time is the call's own cost. The main job uses it
  when it measures with one thread. Calls shorter than ~0.1 ms are repeated ``number`` times per
  sample (calibrated once; one count for all callables timed together, whose samples then carry the
  same share of the clock's own cost) so the clock's resolution and call jitter do not dominate.

The garbage collector is off while samples are taken, as in ``timeit``: a collection is triggered
by whatever allocated last, and one landing in a sample adds its whole pause to that sample only.

Statistics are over samples: median (the number to report), min, max, inter-quartile range.
:func:`time_interleaved` times several callables *in the same run*, one sample of each per round,
changing the order every round (each callable follows each other one equally often), so that a peer
and our op see the same machine state (clock boost, other users of a shared CPU, thermal state).
Ratios from one interleaved run are the figures to quote; absolute CPU times on a shared machine
are not. :func:`compare` turns the paired samples of
two callables into a ratio with a distribution-free confidence interval and a verdict (faster,
slower, inconclusive), so a ratio that the machine's noise could flip is not reported as a result.
"""

from __future__ import annotations

import functools
import gc
import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

import torch

__all__ = ["CPU_CLOCKS", "PEER_DRIFT", "Comparison", "Timing", "compare", "compare_passes", "pass_drift",
           "resolve_device", "synchronize", "time_callable", "time_interleaved"]

#: On the CPU a sample should last at least this long (seconds); shorter calls are repeated.
_CPU_MIN_SAMPLE = 1e-4
_MAX_NUMBER = 10_000
#: Samples per callable per round on GPUs: back-to-back, so all but the first show the steady state.
_GPU_BURST = 4
#: Samples every callable gets even when ``max_time`` is exhausted (a median needs a few).
MIN_SAMPLES = 3
#: Upper bound on rounds, whatever ``min_time`` asks (a sample count beyond this adds nothing).
_MAX_ROUNDS = 1000
#: The clocks a CPU sample can be read from (``cpu_clock`` of :func:`time_interleaved`).
CPU_CLOCKS = {"wall": time.perf_counter, "process": time.process_time}
#: :func:`compare` calls a ratio faster (slower) only when its whole confidence interval lies above
#: this factor (below its inverse): a 10% difference is within what a shared machine's state drifts
#: between two runs, so claiming it would make consecutive runs disagree.
VERDICT_MARGIN = 1.10
#: Confidence of the interval :func:`compare` puts around the median ratio.
CONFIDENCE = 0.95
#: Standard deviation of a row's log ratio from one run to the next that its within-run interval
#: does not show (the machine's state changes between runs, not between rounds), for the
#: torch.linalg column; SciPy's is :data:`SCIPY_DRIFT`. The method: over pairs of consecutive
#: frozen-snapshot runs, on the rows whose interval was tight (log half-width / 1.96 < 0.05), the
#: mean of ``Δ² − se₁² − se₂²`` (Δ: difference of the two runs' log ratios, se: each run's interval
#: half-width / 1.96, the run's recorded widening undone) is ``2 τ²``; ``scripts/compare_verdicts.py
#: --drift A1 A2 B1 B2`` computes it per column. History: wall-clock samples 0.0235 (afternoon of
#: 2026-12-01, 12 rows); the process's CPU time 0.036 (two pairs, 75 rows), 0.042 over all six pairs
#: of that evening (224 rows; torch.linalg 0.042, SciPy 0.044: one window of seconds per row). Since
#: each row is timed in three passes spread over its run (main job ``PASSES``), two pairs of full
#: runs (19838ae and dacba27, 2026-12-01 21:08-21:35, load 5.7-8.6) gave torch.linalg 0.0247 over 46
#: row pairs and SciPy 0.0451 over 27; all eight pairs with passes that night (five full, three
#: quick; 21:08-22:23, load 5.0-9.0) gave torch.linalg **0.0288** over 187 and SciPy **0.0454** over
#: 102. Pooling three windows cut the routed rows' drift, not SciPy's, whose BLAS (OpenBLAS, against
#: torch's MKL) reacts differently to the machine's state (DeltaNet's ``strtrs`` slowed by 65% when
#: the core was slow, torch's trsm by 24%).
#: :func:`compare` widens each interval by ``exp(±1.96 τ)`` so a verdict also holds for the next run.
#:
#: What a threshold verdict can and cannot do: with a tight interval, "slower" needs the median
#: below ``1 / (VERDICT_MARGIN exp(1.96 τ))`` (0.857 here, 0.832 for SciPy; a ~3% within-run
#: half-width moves it to ~0.83 and ~0.81) and "faster" above ``VERDICT_MARGIN exp(1.96 τ)``
#: (1.165, 1.201; ~1.20 and ~1.24). The next run's median differs by ``~N(0, 2 τ²)`` in log, so a
#: row whose ratio sits within ~2 τ of such a boundary flips between runs with a probability up to
#: one half, whatever the sampling: more samples sharpen the boundary, they do not move it, and a
#: wider interval only moves the boundary onto other rows. Every deterministic rule on one run's
#: data has such a boundary; what is in our hands is τ (the passes), and that no row sits on one.
#: Moved off it (2026-12-02): complex ``det`` 1024x32x32 (0.81-0.89x; now ``det(A.mT)``, LAPACK's
#: layout, 0.91x), ``qr`` 512² (1.19-1.24x; SciPy's peer now in torch's mode, 0.99-1.05x) and
#: complex ``inv`` (0.81-0.86x at 256², torch's getrs against SciPy's getri, a quarter fewer flops;
#: timed at 512² on the CPU now, lu_factor's CPU size: 0.68x [0.60-0.79]). The two triangular rows
#: (1.1-1.45x, OpenBLAS's ``strtrs`` with the machine's state) declare their own drift
#: (docs/evidence/routing.md, "Verdicts that repeat").
RUN_DRIFT = 0.029
#: The SciPy column's run-to-run drift (:data:`RUN_DRIFT`'s method and runs).
SCIPY_DRIFT = 0.045
#: Drift per peer name where it is not :data:`RUN_DRIFT`.
PEER_DRIFT = {"scipy": SCIPY_DRIFT}


@dataclass(frozen=True)
class Timing:
    """Per-call times of one callable, in seconds.

    Attributes
    ----------
    median, min, max : float
        Statistics of the per-call samples (seconds).
    iqr : float
        Inter-quartile range of the samples (seconds); ``0.0`` for a single sample.
    n : int
        Number of samples.
    number : int
        Calls per sample (each sample is the mean over ``number`` back-to-back calls).
    samples : tuple of float
        The per-call samples in measurement order (seconds).
    """

    median: float
    min: float
    max: float
    iqr: float
    n: int
    number: int = 1
    samples: tuple[float, ...] = ()

    @classmethod
    def from_samples(cls, samples: list[float] | tuple[float, ...], number: int = 1) -> Timing:
        """Summarise per-call samples (seconds)."""
        xs = [float(s) for s in samples]
        if not xs:
            raise ValueError("Timing.from_samples: expected at least one sample, got none")
        if len(xs) >= 2:
            q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
            iqr = q3 - q1
        else:
            iqr = 0.0
        return cls(
            median=statistics.median(xs),
            min=min(xs),
            max=max(xs),
            iqr=iqr,
            n=len(xs),
            number=int(number),
            samples=tuple(xs),
        )

    @property
    def median_ms(self) -> float:
        """The median in milliseconds."""
        return self.median * 1e3

    def to_dict(self, *, samples: bool = False) -> dict:
        """JSON-ready dict with times in milliseconds (keys end in ``_ms``)."""
        d = asdict(self)
        out = {
            "median_ms": d["median"] * 1e3,
            "min_ms": d["min"] * 1e3,
            "max_ms": d["max"] * 1e3,
            "iqr_ms": d["iqr"] * 1e3,
            "n": d["n"],
            "number": d["number"],
        }
        if samples:
            out["samples_ms"] = [s * 1e3 for s in self.samples]
        return out


@dataclass(frozen=True)
class Comparison:
    """How a peer's time compares with ours, from paired samples of one interleaved run.

    Attributes
    ----------
    ratio : float
        Median over rounds of ``peer / ours`` per-call time (> 1: ours is faster).
    low, high : float
        Distribution-free confidence interval (:data:`CONFIDENCE`) of that median; ``0`` and ``inf``
        when there are too few rounds to bound it.
    n : int
        Number of paired rounds.
    verdict : str
        ``"faster"`` (ours) when ``low > margin``, ``"slower"`` when ``high < 1 / margin``, else
        ``"inconclusive"``.
    drift : float
        The run-to-run drift (standard deviation of the log ratio) the interval was widened by.
    pass_ratios : tuple of float
        Median ratio of each pass (:func:`compare_passes`); empty for one pass.
    own_drift : float
        The row's drift between its passes (:func:`pass_drift`), for the record.
    """

    ratio: float
    low: float
    high: float
    n: int
    verdict: str
    drift: float = 0.0
    pass_ratios: tuple[float, ...] = ()
    own_drift: float = 0.0

    def to_dict(self) -> dict:
        """JSON-ready dict (``inf`` becomes ``None``)."""
        return {k: (None if isinstance(v, float) and math.isinf(v) else list(v) if isinstance(v, tuple) else v)
                for k, v in asdict(self).items()}


def median_interval(xs: list[float] | tuple[float, ...], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Distribution-free confidence interval of the median of ``xs``.

    The order statistics ``x_(k) <= median <= x_(n+1-k)`` cover the true median with probability
    ``1 - 2 P(Binomial(n, 1/2) <= k - 1)`` whatever the distribution; ``k`` is the largest index that
    keeps this at least ``confidence``. Returns ``(-inf, inf)`` when even ``k = 1`` falls short
    (fewer than 6 samples at 95%).
    """
    ys = sorted(xs)
    n = len(ys)
    tail, below, k = (1.0 - confidence) / 2.0, 0.0, 0
    for j in range(n):
        below += math.comb(n, j) / (1 << n)  # P(Binomial(n, 1/2) <= j); integer division: exact for any n
        if below > tail:
            break
        k = j + 1
    if k == 0:
        return -math.inf, math.inf
    return ys[k - 1], ys[n - k]


def compare(ours: Timing, peer: Timing, *, margin: float = VERDICT_MARGIN,
            confidence: float = CONFIDENCE, drift: float = RUN_DRIFT) -> Comparison:
    """Ratio ``peer / ours`` with a confidence interval and a verdict.

    Sample ``i`` of both timings must come from the same round of one :func:`time_interleaved` call
    (as they do): the per-round ratios then cancel the machine's drift between rounds, and their
    median and its order-statistic interval (:func:`median_interval`) are what the verdict reads.

    Parameters
    ----------
    ours, peer : Timing
        From the same :func:`time_interleaved` call.
    margin : float
        Ratios within ``[1 / margin, margin]`` are never called faster or slower.
    confidence : float
        Coverage of the interval.
    drift : float
        Run-to-run standard deviation of the log ratio beyond the within-run interval
        (:data:`RUN_DRIFT`); the interval is widened by ``exp(±z drift)`` at the same confidence.

    Returns
    -------
    Comparison

    Examples
    --------
    >>> c = compare(Timing.from_samples([1.0] * 12), Timing.from_samples([2.0, 2.2] * 6))
    >>> (c.verdict, c.low >= 2.0 / 1.08)
    ('faster', True)
    """
    if not margin >= 1.0:
        raise ValueError(f"margin: expected a factor >= 1, got {margin!r}")
    n = min(ours.n, peer.n)
    if n == 0 or len(ours.samples) < n or len(peer.samples) < n:
        raise ValueError("compare: expected timings with their samples (Timing.from_samples)")
    ratios = [p / o if o > 0 else math.inf for o, p in zip(ours.samples[:n], peer.samples[:n])]
    low, high = median_interval(ratios, confidence)
    low = max(low, 0.0)  # ratios are positive; -inf only means 'unbounded'
    if drift < 0:
        raise ValueError(f"drift: expected a standard deviation >= 0, got {drift!r}")
    if drift:  # the next run's machine state
        widen = _widening(confidence, drift)
        low, high = low / widen, high * widen
    return Comparison(ratio=statistics.median(ratios), low=low, high=high, n=n,
                      verdict=_verdict(low, high, margin), drift=float(drift))


def _widening(confidence: float, drift: float) -> float:
    """The factor ``exp(z · drift)`` an interval of ``confidence`` is widened by for the next run's
    machine state (``z`` of the same confidence; ``drift`` a standard deviation of the log ratio)."""
    return math.exp(statistics.NormalDist().inv_cdf(0.5 + confidence / 2) * drift)


def _verdict(low: float, high: float, margin: float) -> str:
    """``faster`` when the whole interval lies above ``margin``, ``slower`` below ``1 / margin``."""
    return "faster" if low > margin else "slower" if high < 1.0 / margin else "inconclusive"


def _log_ratios(ours: Timing, peer: Timing) -> list[float]:
    n = min(ours.n, peer.n)
    return [math.log(p / o) for o, p in zip(ours.samples[:n], peer.samples[:n]) if o > 0 and p > 0]


def pass_drift(ours: list[Timing], peer: list[Timing]) -> float:
    """A row's own run-to-run drift, seen between its passes (standard deviation of the log ratio).

    The main job times each row in several passes spread over its run (minutes apart). Each pass's
    median log ratio has a within-pass standard error ``se_i = 1.2533 σ_i / sqrt(n_i)`` (the
    median's, with ``σ_i`` = the IQR of its per-round log ratios / 1.349); the passes' medians
    differ beyond that when the machine's state moves the row's two sides differently (SciPy's
    OpenBLAS ``strtrs`` slowed by 65% when the core was slow where torch's trsm slowed by 24%:
    DeltaNet read 1.10x in one run, 1.42x in the next). The same method as :data:`RUN_DRIFT`'s,
    applied to one row's passes: ``τ² = var(medians) − mean(se_i²)`` (0 when negative, or with
    fewer than two passes).
    """
    meds, se2 = [], []
    for o, p in zip(ours, peer):
        logs = _log_ratios(o, p)
        if len(logs) < 2:
            continue
        q1, _, q3 = statistics.quantiles(logs, n=4, method="inclusive")
        meds.append(statistics.median(logs))
        se2.append((1.2533 * (q3 - q1) / 1.349) ** 2 / len(logs))
    if len(meds) < 2:
        return 0.0
    return math.sqrt(max(statistics.variance(meds) - statistics.fmean(se2), 0.0))


def compare_passes(ours: list[Timing], peer: list[Timing], *, floor: float = RUN_DRIFT,
                   margin: float = VERDICT_MARGIN, confidence: float = CONFIDENCE) -> Comparison:
    """:func:`compare` of a row timed in several passes (pass ``i`` of both from one interleaved run).

    The passes' paired rounds are pooled (their median averages the machine states the passes
    saw) and the interval is widened by ``floor``, the column's run-to-run drift. The passes are
    also read as what they are, a few estimates of the row's ratio in different machine states:
    the Student-t interval of the mean of their log medians (``k − 1`` degrees of freedom, the
    same confidence), widened by ``floor`` as well. The verdict reads the union of the two
    intervals, so a row whose passes disagree beyond their noise (SciPy's OpenBLAS ``strtrs`` in
    DeltaNet: 1.26, 1.47 and 1.12 in one run, 1.06 in the next) is not called faster on the
    strength of the states one run happened to see; passes that agree leave the pooled interval
    as it is. On the four pairs of consecutive runs of the morning of 2026-12-02 this rule agrees
    on 150 of 152 row verdicts against 146 (docs/evidence/routing.md, "Verdicts that repeat"). The row's
    own drift (:func:`pass_drift`) is recorded, not used as a widening: from three passes it is
    itself noisy, and a widening by it made verdicts flip that agreed without it (host overhead,
    2026-12-01: 4 of 16).

    Returns
    -------
    Comparison
        With ``drift`` (the widening used), ``own_drift`` and ``pass_ratios`` (each pass's median
        ratio).
    """
    if not ours or len(ours) != len(peer):
        raise ValueError(f"compare_passes: expected the same number (>= 1) of passes, got {len(ours)} and {len(peer)}")
    pooled = _pool(ours, peer)
    c = compare(pooled[0], pooled[1], margin=margin, confidence=confidence, drift=float(floor))
    logs = [statistics.median(r) for o, p in zip(ours, peer) if (r := _log_ratios(o, p))]
    low, high, verdict = c.low, c.high, c.verdict
    if len(logs) >= 2:  # the passes as estimates of the row in different machine states
        half = _t_quantile(0.5 + confidence / 2, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
        widen = _widening(confidence, floor)
        mid = statistics.fmean(logs)
        low, high = min(low, math.exp(mid - half) / widen), max(high, math.exp(mid + half) * widen)
        verdict = _verdict(low, high, margin)
    ratios = tuple(math.exp(x) for x in logs)
    return Comparison(c.ratio, low, high, c.n, verdict, c.drift, ratios if len(ours) > 1 else (),
                      pass_drift(ours, peer))


@functools.lru_cache(maxsize=64)
def _t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (``p > 1/2``) of Student's t with ``df`` degrees of freedom: bisection on its
    distribution function, integrated by Simpson's rule (error < 1e-6 for the quantiles used here:
    df = 2, p = 0.975 gives 4.3027)."""
    if not (0.5 < p < 1 and df >= 1):
        raise ValueError(f"_t_quantile: expected 1/2 < p < 1 and df >= 1, got {p!r}, {df!r}")
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def cdf(t: float, steps: int = 2000) -> float:
        h = t / steps
        f = [c * (1 + (i * h) ** 2 / df) ** (-(df + 1) / 2) for i in range(steps + 1)]
        return 0.5 + h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        hi *= 2
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def _pool(ours: list[Timing], peer: list[Timing]) -> tuple[Timing, Timing]:
    """Both sides' paired samples of every pass, concatenated (round ``i`` of each stays paired)."""
    o_s, p_s = [], []
    for o, p in zip(ours, peer):
        n = min(o.n, p.n)
        o_s += o.samples[:n]
        p_s += p.samples[:n]
    return Timing.from_samples(o_s, ours[0].number), Timing.from_samples(p_s, peer[0].number)


def resolve_device(device: torch.device | str | None) -> torch.device:
    """``torch.device`` of ``device``; ``cuda`` without an index means the current CUDA device."""
    if device is None:
        return torch.device("cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        if not torch.cuda.is_available():
            raise RuntimeError("device='cuda' was requested but torch.cuda.is_available() is False")
        dev = torch.device("cuda", torch.cuda.current_device())
    if dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise RuntimeError("device='mps' was requested but torch.backends.mps.is_available() is False")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device: expected 'cpu', 'cuda' or 'mps', got {device!r}")
    return dev


def synchronize(device: torch.device | str) -> None:
    """Wait until all work queued on ``device`` has finished (no-op on cpu)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()


def _mps_event_cls():
    ev = getattr(getattr(torch, "mps", None), "Event", None)
    if ev is None:
        return None
    try:
        probe = ev(enable_timing=True)
    except (TypeError, RuntimeError):
        return None
    return ev if hasattr(probe, "elapsed_time") else None


def _event_samples(
    fn: Callable[[], object], count: int, number: int, dev: torch.device
) -> list[float] | None:
    """Per-call seconds for ``count`` samples timed with device events, or None without events."""
    if dev.type == "cuda":
        make = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    elif dev.type == "mps":
        cls = _mps_event_cls()
        if cls is None:
            return None
        make = lambda: cls(enable_timing=True)  # noqa: E731
    else:
        return None
    pairs = [(make(), make()) for _ in range(count)]
    synchronize(dev)
    for start, end in pairs:
        start.record()
        for _ in range(number):
            fn()
        end.record()
    synchronize(dev)
    return [start.elapsed_time(end) * 1e-3 / number for start, end in pairs]


def _clock_samples(fn: Callable[[], object], count: int, number: int, dev: torch.device,
                   clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Per-call seconds for ``count`` samples timed with ``clock`` (synchronised on GPUs)."""
    out = []
    sync = dev.type != "cpu"
    for _ in range(count):
        if sync:
            synchronize(dev)
        t0 = clock()
        for _ in range(number):
            fn()
        if sync:
            synchronize(dev)
        out.append((clock() - t0) / number)
    return out


def _samples(fn: Callable[[], object], count: int, number: int, dev: torch.device,
             clock: Callable[[], float] = time.perf_counter) -> list[float]:
    if dev.type == "cuda":
        with torch.cuda.device(dev):  # events are recorded on the current stream of *this* GPU
            return _event_samples(fn, count, number, dev)
    ev = _event_samples(fn, count, number, dev)
    return ev if ev is not None else _clock_samples(fn, count, number, dev, clock)


def _calibrate(fn: Callable[[], object], dev: torch.device, clock: Callable[[], float] = time.perf_counter) -> int:
    """Calls per sample: 1 on GPUs (events resolve ~1 µs), enough for >= 0.1 ms on the CPU."""
    if dev.type != "cpu":
        return 1
    t = _clock_samples(fn, 1, 1, dev, clock)[0]
    if t >= 10 * _CPU_MIN_SAMPLE:  # a slow call: no more calibration calls
        return 1
    # the least of three: one call slowed by the machine (cold caches after a context switch: a
    # 15 µs slogdet read >= 0.1 ms under load) must not set the count
    t = min(t, *_clock_samples(fn, 2, 1, dev, clock))
    if t >= _CPU_MIN_SAMPLE:
        return 1
    return int(min(_MAX_NUMBER, math.ceil(_CPU_MIN_SAMPLE / max(t, 1e-9))))


def _round_order(names: list[str], rnd: int) -> list[str]:
    """The order of round ``rnd``: the rotations of ``names``, then those of ``names`` reversed.

    For two or three callables (what the main job times), over each ``2 n`` rounds every callable
    runs right after every other one equally often (and first equally often). A rotation alone is
    not balanced for three: with ``(ours, torch.linalg, scipy)`` ours followed scipy in 2 rounds of
    3 and torch.linalg in 1, and a call right after SciPy's is slower (its caches are cold): that
    made ours 8-12% slower than the same torch.linalg call (lu 96x96, RANSAC solve, det 64x32x32 on
    the CPU; issue 15). The main job now times each peer in its own pair with ours.
    """
    n = len(names)
    base = names if (rnd // n) % 2 == 0 else names[::-1]
    k = rnd % n
    return base[k:] + base[:k]


def _check_counts(warmup: int, repeat: int, min_time: float) -> None:
    if int(warmup) != warmup or warmup < 0:
        raise ValueError(f"warmup: expected an int >= 0, got {warmup!r}")
    if int(repeat) != repeat or repeat < 1:
        raise ValueError(f"repeat: expected an int >= 1, got {repeat!r}")
    if not (min_time >= 0.0):
        raise ValueError(f"min_time: expected seconds >= 0, got {min_time!r}")


def time_callable(
    fn: Callable[[], object],
    *,
    device: torch.device | str,
    warmup: int = 3,
    repeat: int = 10,
    min_time: float = 0.05,
    max_time: float = 30.0,
    cpu_clock: str = "wall",
) -> Timing:
    """Time a zero-argument callable on ``device``.

    Parameters
    ----------
    fn : callable
        Called with no arguments; its result is discarded. It must enqueue its work on ``device``
        (for GPUs: on the current stream).
    device : torch.device or str
        ``"cpu"``, ``"cuda"`` (events), or ``"mps"`` (events when available).
    warmup : int
        Untimed calls first (compilation, caches, allocator), followed by a synchronisation.
    repeat : int
        Minimum number of samples.
    min_time : float
        Keep sampling until the samples cover at least this many seconds (fast ops get more
        samples), ...
    max_time : float
        ... and stop once this many seconds were spent in all (warm-up included), even below
        ``repeat`` samples, as soon as :data:`MIN_SAMPLES` samples (or ``repeat``, if fewer) exist.
        Bounds the cost of slow calls (wall clock).
    cpu_clock : {"wall", "process"}
        What a CPU sample reads (:data:`CPU_CLOCKS`): wall time, or the process's CPU time (the
        call's own cost on a shared machine; meant for one-threaded calls). GPUs: events.

    Returns
    -------
    Timing
        Per-call statistics in seconds.

    Examples
    --------
    >>> import torch
    >>> x = torch.randn(64, 64)
    >>> t = time_callable(lambda: x @ x, device="cpu", repeat=5)
    >>> t.n >= 5 and t.median > 0
    True
    """
    return time_interleaved({"fn": fn}, device=device, warmup=warmup, repeat=repeat,
                            min_time=min_time, max_time=max_time, cpu_clock=cpu_clock)["fn"]


def time_interleaved(
    fns: Mapping[str, Callable[[], object]],
    *,
    device: torch.device | str,
    warmup: int = 3,
    repeat: int = 10,
    min_time: float = 0.05,
    max_time: float = 30.0,
    min_samples: int = MIN_SAMPLES,
    cpu_clock: str = "wall",
    calibrate: tuple[str, ...] | None = None,
) -> dict[str, Timing]:
    """Time several callables in the same run, one sample of each per round.

    The order within a round changes every round (:func:`_round_order`): no callable always runs
    first (cold) or last, and each follows each other one equally often.
    Sampling stops when every callable has ``repeat`` samples and ``min_time`` seconds of samples,
    or when ``max_time`` seconds in total have elapsed and every callable has at least
    ``min(repeat, min_samples)`` samples. On GPUs a
    round takes a short burst of back-to-back samples of each callable (synchronised before and
    after the burst, not between its samples).

    Parameters
    ----------
    fns : mapping of str to callable
        Names and zero-argument callables (e.g. ``{"ours": ..., "torch.linalg": ...}``).
    device, warmup, repeat, min_time, max_time, cpu_clock
        As in :func:`time_callable`; ``max_time`` bounds the whole interleaved run.
    min_samples : int
        Samples every callable gets even when ``max_time`` is exhausted (capped by ``repeat``);
        :func:`compare` needs 6 for a 95% interval.
    calibrate : tuple of str, optional
        The callables whose duration sets the calls per sample (default: all); the others run as
        many times per sample (the host-overhead section's state probe must not change how its
        two calls are sampled).

    Returns
    -------
    dict of str to Timing
        Same keys as ``fns``.
    """
    _check_counts(warmup, repeat, min_time)
    if int(min_samples) != min_samples or min_samples < 1:
        raise ValueError(f"min_samples: expected an int >= 1, got {min_samples!r}")
    if not fns:
        raise ValueError("fns: expected at least one callable")
    if cpu_clock not in CPU_CLOCKS:
        raise ValueError(f"cpu_clock: expected one of {sorted(CPU_CLOCKS)}, got {cpu_clock!r}")
    clock = CPU_CLOCKS[cpu_clock]
    dev = resolve_device(device)
    names = list(fns)
    wall = CPU_CLOCKS["wall"]  # max_time's clock (a test's fake clock replaces both entries)
    t_start = wall()
    for _ in range(int(warmup)):
        for name in names:
            fns[name]()
    synchronize(dev)
    gc_was_on = gc.isenabled()
    gc.disable()  # as timeit: no collection lands in one sample (the next one runs after the box)
    try:
        # One count for every callable: a sample's own cost (two clock reads and the loop, ~5 µs with
        # the process clock under load) is divided by it, so unequal counts bias the pair (slogdet
        # 3x3's host overhead read +7.6 µs with 1 call a sample against torch's 7, +3.2 with 5 and 7).
        number = max(_calibrate(fns[name], dev, clock) for name in (names if calibrate is None else calibrate))
        numbers = dict.fromkeys(names, number)
        samples: dict[str, list[float]] = {name: [] for name in names}
        burst = 1 if dev.type == "cpu" else _GPU_BURST
        rounds = max(1, math.ceil(int(repeat) / burst))
        floor = min(int(repeat), int(min_samples))
        rnd = 0
        while True:
            for name in _round_order(names, rnd):
                samples[name].extend(_samples(fns[name], burst, numbers[name], dev, clock))
            rnd += 1
            fewest = min(len(s) for s in samples.values())
            if wall() - t_start >= max_time and fewest >= floor:
                break
            if rnd < rounds:
                continue
            covered = min(sum(s) * numbers[n] for n, s in samples.items())
            if covered >= min_time or rnd >= _MAX_ROUNDS:
                break
    finally:
        if gc_was_on:
            gc.enable()
    return {name: Timing.from_samples(samples[name], numbers[name]) for name in names}
