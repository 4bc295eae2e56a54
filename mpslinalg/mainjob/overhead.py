"""Host overhead per call of every public op at small sizes (issue 10), ours against ``torch.linalg``.

At these sizes the arithmetic takes a microsecond or two, so what a call costs is the Python and
dispatch around it: input checks, routing, the custom-op machinery. The target is that a call of
ours costs at most ``torch.linalg``'s plus :data:`TARGET_US` microseconds on the CPU. Both are timed
with one torch thread, interleaved round by round (:func:`.timing.time_interleaved`, the process's
CPU time on the CPU), in :data:`PASSES` passes over the cases, each round with a state probe; the
verdict reads the per-round differences ``ours - torch`` of the rounds that ran in the machine's fast
state (:data:`QUIET`; with too few, those of the quietest pass, torch's own call fastest) and their
95% interval (:func:`.timing.median_interval`) widened by the run-to-run drift
(:data:`OVERHEAD_DRIFT`): ``meets``
when the whole interval is at most the target, ``misses`` when it is wholly above, else
``inconclusive``.

Used by ``benchmarks/bench_overhead.py`` (the table, JSON and markdown) and by the main job (one
section of its report).

On the CPU most of these calls are handed to one ``torch.linalg`` call by the front door's table
lookup (:mod:`mpslinalg.routing`), so :func:`cases` mostly times that lookup. :func:`ours_cases`
times the path every call takes on ``mps`` and inside the table: the front door's checks, route,
op dispatch and ``info`` check, run under :func:`mpslinalg.routing.ours_always`, against the same
computation called without them (the family's implementation, or the ``torch.linalg`` call the
front door makes): their difference is the op layer's cost per call.
"""

from __future__ import annotations

import contextlib
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .. import routing
from .timing import median_interval, time_interleaved

__all__ = ["TARGET_US", "OverheadCase", "cases", "finish", "measure", "ours_cases", "run_pass", "start"]

#: A call of ours may cost at most torch.linalg's plus this many microseconds (CPU, one thread).
TARGET_US = 5.0

#: Timing per case (full, quick): rounds wanted, seconds of samples, the time box, rounds taken
#: even past the box (the 95% interval of a median needs 6; 11 gives [x_(2), x_(10)]); each split
#: over :data:`PASSES`.
SETTINGS = {
    False: {"warmup": 5, "repeat": 41, "min_time": 0.3, "max_time": 3.0, "min_samples": 15},
    True: {"warmup": 3, "repeat": 21, "min_time": 0.1, "max_time": 1.0, "min_samples": 11},
}
#: Passes over the cases, alternately in reverse order; the verdict reads the quietest pass, the one
#: in which torch's own call was fastest. These calls are host-bound (Python, dispatch), and on the
#: shared box their speed moves with what the other tenants do, by up to 1.7x for a fraction of a
#: second to a minute: one pass of ``det`` 3x3 read +7.2 µs, the other two +3.3 and +2.7 (torch's
#: own call slowed alike); pooling the passes let such a window move the median, and the verdicts
#: flipped on it. What a call of ours costs is its cost in the machine's best state, as ``timeit``
#: takes the minimum. The main job runs pass ``k`` after its rows' pass ``k``, so the three are
#: minutes apart: run at the end of the job, all three once fell in one window where these calls
#: ran at 0.6x (torch's ``det`` 3x3 19.8 µs against 11.4 in the next run; the rows' BLAS-bound
#: calls at 0.95x).
PASSES = 3
#: Run-to-run drift of a case's extra time, relative (standard deviation of ``log extra``): the
#: machine's state scales the Python of both calls, so their difference moves in proportion.
#: Derived as :data:`.timing.RUN_DRIFT` (the mean excess of the squared run-to-run differences of
#: ``log extra`` over the within-run intervals' variances is ``2 τ²``; ``scripts/compare_verdicts.py
#: --drift``), for the verdict as it is (process clock, one count per sample, the quietest of three
#: passes between the rows' passes): four pairs of consecutive main-job runs from one frozen
#: snapshot (2e33337, 2026-12-01 21:56-22:23, two full and two quick, load 5.0-8.4), 55 tight case
#: pairs: τ = 0.090 (the largest move: ``slogdet`` 8x8, +5.5 then +3.0 µs, a whole quick section in
#: a slow window). Earlier, pooled passes: 0.048 (two pairs of overhead-only runs), 0.065 (and one
#: full pair). The verdict widens the interval by ``1.96 τ |extra|`` µs on each side (by 18%): a
#: case at +3 µs meets with room for the next run; one at +5-7 µs sits on the target.
OVERHEAD_DRIFT = 0.090
#: The machine's state, read in every round: on the shared 2-core box a core alternates, every 0.2-1
#: s, between its own speed and ~1.7x slower (another tenant on its sibling; 70% of 150 readings of
#: a fixed Python loop on the morning of 2026-12-02 were 1.4-1.8x its fastest, the others 1.00-1.16x),
#: and a call's Python slows with it. Each round also times :func:`_probe` (a fixed Python loop,
#: ~20 µs, independent of both calls), and the verdict reads the rounds whose probe ran within
#: :data:`QUIET` of the run's fast state (:data:`QUIET_QUANTILE` of every probe sample of the run):
#: the quietest pass (torch's own call fastest) covers a window of a second where the state changes
#: within it. Selecting rounds by the probe, not by torch's own time, leaves ``ours - torch``
#: unbiased (a round chosen for a fast torch sample would lift the difference by that sample's noise).
QUIET = 1.2
QUIET_QUANTILE = 0.05
#: Quiet rounds a case needs for its verdict to read them (the 95% interval of a median needs 6, 11
#: gives [x_(2), x_(10)]); with fewer it reads the quietest pass.
MIN_QUIET_ROUNDS = 11


@dataclass(frozen=True)
class OverheadCase:
    """One op at one small size: ``ours()`` and ``peer()`` do the same call on the same inputs."""

    name: str
    op: str
    ours: Callable[[], object]
    peer: Callable[[], object]
    #: run under :func:`mpslinalg.routing.ours_always` (the front door's own path, not the table's)
    ours_always: bool = False


class _ProbeState:
    x = 1


_PROBE_OBJ, _PROBE_MAP = _ProbeState(), {"a": 1}


def _probe() -> int:
    """A fixed piece of Python (attribute and dict reads, calls; ~20 µs on the 2-core box): its time
    tells the machine's state in the round it runs in (:data:`QUIET`)."""
    total, obj, table = 0, _PROBE_OBJ, _PROBE_MAP
    for _ in range(300):
        total += obj.x + table["a"] + len(table)
    return total


def _well_conditioned(g: torch.Generator, *shape: int) -> torch.Tensor:
    n = shape[-1]
    return torch.randn(*shape, generator=g) + n * torch.eye(n)


def _inputs(device: str) -> dict[str, torch.Tensor]:
    """The rows' inputs (the same values on every device: drawn on the CPU, then moved)."""
    g = torch.Generator().manual_seed(0)
    x = {"a3": _well_conditioned(g, 3, 3), "a8": _well_conditioned(g, 8, 8),
         "ransac": _well_conditioned(g, 256, 9, 9), "rhs": torch.randn(256, 9, 1, generator=g),
         "tri": _well_conditioned(g, 16, 16).triu(), "tri_b": torch.randn(16, 8, generator=g),
         "b8": torch.randn(8, 1, generator=g), "a4": _well_conditioned(g, 4, 4),
         "b4": torch.randn(4, 1, generator=g)}
    return {k: v.to(device) for k, v in x.items()}


def cases(device: str = "cpu") -> list[OverheadCase]:
    """The rows: every public op at the sizes issue 10 names (QR/SVD and friends when they exist),
    inputs on ``device``."""
    import mpslinalg as LA

    x = _inputs(device)
    a3, a8, ransac, rhs, tri, tri_b, b8 = (x[k] for k in ("a3", "a8", "ransac", "rhs", "tri", "tri_b", "b8"))
    lu8, piv8 = torch.linalg.lu_factor(a8)
    rows = [
        ("inv 8x8", "inv", (a8,), {}),
        ("inv 3x3", "inv", (a3,), {}),
        ("solve 256x9x9", "solve", (ransac, rhs), {}),
        ("solve_triangular 16x16, 8 rhs", "solve_triangular", (tri, tri_b), {"upper": True}),
        ("lu_factor 8x8", "lu_factor", (a8,), {}),
        ("lu 8x8", "lu", (a8,), {}),
        ("lu_solve 8x8", "lu_solve", (lu8, piv8, b8), {}),
        ("det 3x3", "det", (a3,), {}),
        ("det 8x8", "det", (a8,), {}),
        ("slogdet 3x3", "slogdet", (a3,), {}),
        ("slogdet 8x8", "slogdet", (a8,), {}),
        ("qr 8x8", "qr", (a8,), {}),
        ("svd 8x8", "svd", (a8,), {}),
        ("svdvals 8x8", "svdvals", (a8,), {}),
        ("pinv 8x8", "pinv", (a8,), {}),
        ("lstsq 8x8", "lstsq", (a8, b8), {}),
    ]
    out = []
    for name, op, args, kwargs in rows:
        if not (hasattr(LA, op) and hasattr(torch.linalg, op)):
            continue  # a family not built yet
        ours, peer = getattr(LA, op), getattr(torch.linalg, op)
        out.append(OverheadCase(
            name=name, op=op,
            ours=(lambda f, a, k: lambda: f(*a, **k))(ours, args, kwargs),
            peer=(lambda f, a, k: lambda: f(*a, **k))(peer, args, kwargs)))
    return out


def ours_cases(device: str = "cpu") -> list[OverheadCase]:
    """The op layer's own cost: each front door on mpslinalg's path (:func:`~mpslinalg.routing.ours_always`)
    against the computation it ends in, called bare (``peer``): the small family's implementation
    for ``n <= 4``, the one ``torch.linalg`` call the LU front doors make at small ``n`` on the
    ``torch`` backend, the triangular family's implementation. Inputs on ``device``."""
    import mpslinalg as LA
    from mpslinalg import small
    from mpslinalg.triangular.algorithm import _solve_impl as tri_impl

    x = _inputs(device)
    a3, a4, a8, b4, ransac, rhs, tri, tri_b = (x[k] for k in ("a3", "a4", "a8", "b4", "ransac", "rhs", "tri",
                                                            "tri_b"))
    rows = [
        ("inv 3x3 [small family]", "inv", lambda: LA.inv(a3), lambda: small.inv_ex_op.impl(a3)),
        ("inv_ex 3x3 [small family]", "inv_ex", lambda: LA.inv_ex(a3), lambda: small.inv_ex_op.impl(a3)),
        ("det 3x3 [small family]", "det", lambda: LA.det(a3), lambda: small.det_op.impl(a3)),
        ("slogdet 3x3 [small family]", "slogdet", lambda: LA.slogdet(a3), lambda: small.slogdet_op.impl(a3)),
        ("solve 4x4, 1 rhs [small family]", "solve", lambda: LA.solve(a4, b4),
         lambda: small.solve_ex_op.impl(a4, b4, True)),
        ("inv 8x8 [torch.linalg.inv_ex]", "inv", lambda: LA.inv(a8), lambda: torch.linalg.inv(a8)),
        ("solve 256x9x9 [torch.linalg.solve_ex]", "solve", lambda: LA.solve(ransac, rhs),
         lambda: torch.linalg.solve(ransac, rhs)),
        ("lu_factor 8x8 [torch.linalg.lu_factor_ex]", "lu_factor", lambda: LA.lu_factor(a8),
         lambda: torch.linalg.lu_factor(a8)),
        ("det 8x8 [torch.linalg.det]", "det", lambda: LA.det(a8), lambda: torch.linalg.det(a8)),
        ("solve_triangular 16x16, 8 rhs [triangular family]", "solve_triangular",
         lambda: LA.solve_triangular(tri, tri_b, upper=True), lambda: tri_impl(tri, tri_b, True, True, False)),
    ]
    return [OverheadCase(name=n, op=o, ours=f, peer=p, ours_always=True) for n, o, f, p in rows]


def _extra_us(t: dict) -> list[float]:
    n = min(t["ours"].n, t["torch"].n)
    return [1e6 * (o - p) for o, p in zip(t["ours"].samples[:n], t["torch"].samples[:n])]


def measure(selected: list[OverheadCase] | None = None, *, quick: bool = False,
            device: str = "cpu") -> list[dict]:
    """Time every case with one torch thread (``device``: where the cases' inputs live, for the
    timer's synchronisation); one record per case.

    Each case is timed in :data:`PASSES` passes over all cases (alternately reversed); its record
    reads the rounds of every pass whose state probe ran fast (:data:`QUIET`), or with fewer than
    :data:`MIN_QUIET_ROUNDS` the quietest pass (torch's own call fastest); on the CPU a sample reads
    the process's CPU time (one thread: the calls' own cost). The main job runs the same steps
    (:func:`start`, :func:`run_pass`, :func:`finish`) with its rows' passes between.

    Returns
    -------
    list of dict
        ``name``, ``op``, ``ours_us``, ``torch_us`` (medians per call), ``extra_us`` (median of the
        per-round differences ours - torch), ``extra_low_us``/``extra_high_us`` (its 95% interval
        widened by ``1.96 drift_us``; None when unbounded), ``drift_us`` (:data:`OVERHEAD_DRIFT` x
        ``|extra_us|``), ``pass_extra_us`` and ``pass_torch_us`` (each pass's medians), ``pass`` (the
        quietest's index), ``rounds`` (those read), ``all_rounds``, ``read`` (``"quiet rounds"`` or
        ``"quietest pass"``), ``verdict``
        (``meets``/``misses``/``inconclusive`` against :data:`TARGET_US`); or ``name``, ``op``,
        ``error`` when ours raised.
    """
    state = start(selected, quick=quick, device=device)
    for k in range(PASSES):
        run_pass(state, k)
    return finish(state)


def start(selected: list[OverheadCase] | None = None, *, quick: bool = False, device: str = "cpu") -> dict:
    """Call every case's ``ours`` once (a case that raises gets its error record) and return the state
    :func:`run_pass` and :func:`finish` take."""
    chosen = cases() if selected is None else selected
    state: dict = {"cases": chosen, "records": [None] * len(chosen), "passes": {}, "quick": quick, "device": device}
    for i, case in enumerate(chosen):
        with routing.ours_always() if case.ours_always else contextlib.nullcontext():
            try:
                case.ours()
            except Exception as exc:  # noqa: BLE001 - report the op, go on with the others
                state["records"][i] = {"name": case.name, "op": case.op, "error": f"{type(exc).__name__}: {exc}"}
                continue
        state["passes"][i] = []
    return state


def run_pass(state: dict, k: int) -> None:
    """Pass ``k`` over the cases of :func:`start` (reversed for odd ``k``), with one torch thread."""
    s = SETTINGS[state["quick"]]
    per_pass = {"warmup": s["warmup"], "repeat": math.ceil(s["repeat"] / PASSES), "min_time": s["min_time"] / PASSES,
                "max_time": s["max_time"] / PASSES, "min_samples": math.ceil(s["min_samples"] / PASSES)}
    clock = "process" if torch.device(state["device"]).type == "cpu" else "wall"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for i in sorted(state["passes"], reverse=k % 2 == 1):
            case = state["cases"][i]
            with routing.ours_always() if case.ours_always else contextlib.nullcontext():
                state["passes"][i].append(time_interleaved({"ours": case.ours, "torch": case.peer, "probe": _probe},
                                                           device=state["device"], cpu_clock=clock,
                                                           calibrate=("ours", "torch"), **per_pass))
    finally:
        torch.set_num_threads(threads)


def _quiet_threshold(state: dict) -> float | None:
    """:data:`QUIET` times the fast state's probe time (:data:`QUIET_QUANTILE` of every probe sample
    of the run, per call), or None when no pass timed the probe."""
    probes = sorted(x for ts in state["passes"].values() for t in ts if "probe" in t for x in t["probe"].samples)
    if not probes:
        return None
    return QUIET * probes[int(QUIET_QUANTILE * (len(probes) - 1))]


def _quiet_rounds(ts: list[dict], threshold: float | None) -> list[tuple[float, float]]:
    """``(ours, torch)`` per-call times (s) of the rounds of every pass whose probe ran in the fast
    state."""
    if threshold is None:
        return []
    out = []
    for t in ts:
        if "probe" not in t:
            continue
        n = min(t["ours"].n, t["torch"].n, t["probe"].n)
        out += [(o, p) for o, p, q in zip(t["ours"].samples[:n], t["torch"].samples[:n], t["probe"].samples[:n])
                if q <= threshold]
    return out


def finish(state: dict) -> list[dict]:
    """The records of :func:`measure` from the passes run."""
    records = list(state["records"])
    threshold = _quiet_threshold(state)
    for i, ts in state["passes"].items():
        case = state["cases"][i]
        per = [_extra_us(t) for t in ts]
        # the quietest pass: the one where torch's own call was fastest (the machine's best state)
        q = min(range(len(ts)), key=lambda j: ts[j]["torch"].median)
        quiet = _quiet_rounds(ts, threshold)
        use_quiet = len(quiet) >= MIN_QUIET_ROUNDS
        if use_quiet:
            extra = [1e6 * (o - p) for o, p in quiet]
            ours_us = 1e6 * statistics.median(o for o, _ in quiet)
            torch_us = 1e6 * statistics.median(p for _, p in quiet)
        else:
            extra = per[q]
            ours_us, torch_us = 1e6 * ts[q]["ours"].median, 1e6 * ts[q]["torch"].median
        mid = statistics.median(extra)
        drift = OVERHEAD_DRIFT * abs(mid)  # the machine's state scales both calls' Python
        low, high = median_interval(extra)
        low, high = low - 1.96 * drift, high + 1.96 * drift
        verdict = "meets" if high <= TARGET_US else "misses" if low > TARGET_US else "inconclusive"
        records[i] = {
            "name": case.name, "op": case.op, "ours_us": ours_us, "torch_us": torch_us, "extra_us": mid,
            "extra_low_us": None if low == -math.inf else low,
            "extra_high_us": None if high == math.inf else high,
            "drift_us": drift, "pass_extra_us": [statistics.median(xs) for xs in per if xs],
            "pass_torch_us": [1e6 * t["torch"].median for t in ts], "pass": q,
            "rounds": len(extra), "all_rounds": sum(min(t["ours"].n, t["torch"].n) for t in ts),
            "read": "quiet rounds" if use_quiet else "quietest pass", "verdict": verdict}
    return [r for r in records if r is not None]


def table_rows(records: list[dict], *, peer: str = "torch.linalg us",
               device: str = "cpu") -> tuple[list[str], list[list[str]]]:
    """Headers and cells of the overhead table (for :func:`.report.format_table`); ``peer`` heads the
    peer's column (``"bare call us"`` for :func:`ours_cases`)."""
    where = "CPU" if device == "cpu" else device
    headers = [f"op ({where}, 1 thread)", "mpslinalg us", peer, "extra us [95%]",
               f"target <= +{TARGET_US:g} us"]
    rows = []
    for r in records:
        if "error" in r:
            rows.append([r["name"], f"ERROR {r['error']}", "-", "-", "-"])
            continue
        lo = "-inf" if r["extra_low_us"] is None else f"{r['extra_low_us']:.1f}"
        hi = "inf" if r["extra_high_us"] is None else f"{r['extra_high_us']:.1f}"
        rows.append([r["name"], f"{r['ours_us']:.1f}", f"{r['torch_us']:.1f}",
                     f"{r['extra_us']:+.1f} [{lo}, {hi}]", r["verdict"]])
    return headers, rows
