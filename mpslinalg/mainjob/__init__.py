"""The main job, ``python -m mpslinalg``: the library's own report (DESIGN §9).

This sub-package holds the main job and the benchmark support, apart from the ops:
:mod:`.timing` (the timing core shared with ``benchmarks/harness.py``), :mod:`.report` (environment
and table helpers), :mod:`.workloads` (the workload registry: one ``_<family>()`` per family) and
:mod:`.overhead` (host time per call at small sizes).

Prints the environment (versions, devices, MPS availability, the backend each device uses, the
emulator's compiler), then, for every registered workload, one row with its accuracy (a LAPACK test
ratio against the references, pass below the threshold) and its time against ``torch.linalg`` —
and SciPy when the device is the CPU — interleaved in the same run, with a verdict per peer
(faster / slower / inconclusive, :func:`.timing.compare`), then the host-overhead section.

Exit status: 0 when every row ran and passed its accuracy check (or no op is implemented yet),
1 when one of our ops raised or failed its accuracy threshold, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence

import torch

from .. import routing
from . import overhead
from . import workloads as registry
from .report import (
    Progress,
    _load_average,
    best_device,
    blas_threads,
    environment,
    fmt_ms,
    format_environment,
    format_table,
    short_error,
)
from .timing import (
    PEER_DRIFT,
    RUN_DRIFT,
    VERDICT_MARGIN,
    Timing,
    compare_passes,
    resolve_device,
    synchronize,
    time_interleaved,
)
from .workloads import ReferenceUnavailable, Workload

#: The name ``--only`` matches to select the host-overhead section.
OVERHEAD_ROW = "host overhead"

#: Timing settings (full, quick): warm-up calls, target rounds, seconds of samples, the per-row time
#: box, and the rounds taken even past it. Rounds interleave ours and one peer; the verdict reads the
#: per-round ratios (timing.compare), whose 95% interval needs >= 6 rounds and narrows with more. The
#: torch.linalg pair gets the time box, SciPy's half of it, each split over :data:`PASSES`; a pair
#: whose median ratio is beyond the margin but whose interval is not gets one more pass
#: (finish_workload).
SETTINGS = {
    False: {"warmup": 2, "repeat": 41, "min_time": 0.5, "max_time": 8.0, "min_samples": 15},
    True: {"warmup": 1, "repeat": 25, "min_time": 0.2, "max_time": 3.0, "min_samples": 11},
}


#: Timing passes per row. On a shared CPU the machine's state moves over seconds to minutes, and
#: moves a row's two sides differently when they are different code (SciPy's OpenBLAS against torch's
#: MKL: DeltaNet read 1.10x in one run and 1.42x in the next, its per-second medians 1.03-1.66x);
#: a row's rounds taken in one window of seconds saw one state. Three passes spread over the run see
#: three, pooled (timing.compare_passes): the torch.linalg column's run-to-run drift went from 0.042
#: to 0.029 (timing.RUN_DRIFT), at no extra time.
PASSES = 3


def implemented_ops() -> list[str]:
    """The linear-algebra ops ``mpslinalg`` exports: names in ``__all__`` that ``torch.linalg`` has."""
    import mpslinalg

    return [n for n in getattr(mpslinalg, "__all__", ())
            if callable(getattr(mpslinalg, n, None)) and hasattr(torch.linalg, n)]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mpslinalg",
        description="mpslinalg's report: environment, then accuracy and speed of each op against "
                    "torch.linalg (and SciPy on the CPU), measured in the same run.")
    p.add_argument("--device", default="auto",
                   help="cpu, cuda, cuda:N, mps, or auto (mps > cuda > cpu; default)")
    p.add_argument("--quick", action="store_true", help="small sizes and few repeats (seconds, not minutes)")
    p.add_argument("--json", metavar="PATH", help="also write the report as JSON to PATH")
    p.add_argument("--only", action="append", default=[], metavar="TEXT",
                   help="run only workloads whose name contains TEXT (repeatable; --list names them)")
    p.add_argument("--list", action="store_true",
                   help="list the workload names (what --only matches) and exit")
    p.add_argument("--no-timing", action="store_true", help="accuracy only")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch CPU threads while measuring (default on the CPU: 1, because on a shared "
                        "machine a multi-threaded op stalls whenever one of its threads is descheduled, "
                        "which makes ratios flip between runs; elsewhere: torch's default)")
    return p


def _unwritable(path: str) -> str | None:
    """Why ``path`` cannot take the JSON report (checked before minutes of measuring), or None."""
    existed = os.path.exists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        return exc.strerror or str(exc)
    if not existed:
        os.remove(path)
    return None


def _shapes(inputs: dict) -> str:
    return ", ".join(f"{k} {'x'.join(map(str, v.shape)) or 'scalar'}"
                     for k, v in inputs.items() if isinstance(v, torch.Tensor) and k != "pivots")


#: The ``path`` column: which implementation served a row's mpslinalg call.
PATHS = {"ours": "ours", "torch": "torch.linalg (routed)", "mixed": "ours + torch.linalg (routed)",
         "kernels": "kernels"}


#: Public op -> its key in ``routing.WHEN`` where the two names differ.
_TABLE_KEY = {"inv": "inv_ex", "lu_factor": "lu_factor_ex"}


def path_taken(backend: str, decisions: dict[str, dict[str, int]], op: str | None = None) -> str:
    """Which path a row's mpslinalg call took, from the front doors' decisions during it.

    Parameters
    ----------
    backend : str
        The device's backend (``torch``, ``emulator``, ``metal``): on the kernel backends our
        kernels run at every size (``"kernels"``).
    decisions : dict
        :func:`mpslinalg.routing.decisions` counted over the call.
    op : str, optional
        The row's public op: only its own front door's decisions count (an op that calls other
        public ops inside, e.g. ``lstsq`` calling ``solve``, is not "routed" by theirs).

    Returns
    -------
    str
        A value of :data:`PATHS`: ``"ours"`` (mpslinalg's torch-backend implementation, also for ops
        whose front doors do not consult the table), ``"torch.linalg (routed)"`` (outside
        ``routing.WHEN`` every front door handed the call to torch.linalg), or both.
    """
    if backend != "torch":
        return PATHS["kernels"]
    if op is not None:
        key = _TABLE_KEY.get(op, op)
        decisions = {key: decisions[key]} if key in decisions else {}
    ours = sum(d["ours"] for d in decisions.values())
    to_torch = sum(d["torch"] for d in decisions.values())
    return PATHS["mixed" if ours and to_torch else "torch" if to_torch else "ours"]


def prepare_workload(w: Workload, device: torch.device, quick: bool, timing: bool) -> tuple[dict, dict | None]:
    """Make a workload's inputs, run ours once and check its accuracy; find the peers that run.

    Returns the row and the state :func:`time_pass` and :func:`finish_workload` time it from
    (``None`` when the row failed or ``timing`` is off).
    """
    row: dict = {"name": w.name, "op": w.op, "description": w.description,
                 "dtype": str(w.dtype).replace("torch.", ""), "device": str(device)}
    try:
        from ..kernels import backend_for

        row["backend"] = backend_for(device)
    except Exception as exc:  # noqa: BLE001 - e.g. a backend requested that cannot serve the device
        row["backend"] = f"unavailable: {short_error(exc)}"
    try:
        inputs = w.make(device, w.dtype, quick)
        row["shapes"] = _shapes(inputs)
        first = next(iter(inputs.values()))
        row["shape"] = "x".join(map(str, first.shape))
        routing.reset_decisions()
        out = w.ours(inputs)
        synchronize(device)
        row["path"] = path_taken(row["backend"], routing.decisions(), w.op)
    except Exception as exc:  # noqa: BLE001 - one broken op must not hide the others
        row["error"] = short_error(exc)
        row["traceback"] = traceback.format_exc()
        row["ok"] = False
        return row, None
    try:
        name, value, threshold = w.accuracy(inputs, out)
        row["accuracy"] = {"ratio": name, "value": float(value), "threshold": float(threshold),
                           "pass": bool(value <= threshold)}
    except ReferenceUnavailable as exc:  # cannot judge: say so, do not fail the op for it
        row["accuracy"] = {"error": str(exc), "unavailable": True}
    except Exception as exc:  # noqa: BLE001
        row["accuracy"] = {"error": short_error(exc)}
    del out
    acc = row["accuracy"]
    row["ok"] = bool(acc.get("pass", False) or acc.get("unavailable", False))
    if not timing:
        return row, None

    peers = {"torch.linalg": w.peer}
    if device.type == "cpu" and w.scipy is not None:
        peers["scipy"] = w.scipy
    row["peers"] = {}
    available = {}
    for pname, pfn in peers.items():
        try:  # a peer may lack the op on this device (e.g. complex inv on mps): report, don't fail
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pfn(inputs)
            synchronize(device)
        except Exception as exc:  # noqa: BLE001
            row["peers"][pname] = {"error": short_error(exc)}
            continue
        available[pname] = (lambda f: lambda: f(inputs))(pfn)
    # Each peer is timed against ours in its own interleaved pair, torch.linalg first with the full
    # time box: a third callable in the rounds biased the ratio (a call right after SciPy's runs with
    # cold caches, and ours, with more Python, lost 8-12% more than torch.linalg's one call).
    pairs = list(available.items()) or [(None, None)]
    state = {"row": row, "ours": lambda: w.ours(inputs), "pairs": pairs, "passes": {p: [] for p, _ in pairs},
             "drift": dict(w.drift)}
    return row, state


def _pass_settings(quick: bool, pair: int) -> dict:
    """One pass's share of a pair's time box (:data:`SETTINGS`, :data:`PASSES`): SciPy's pair (after
    torch.linalg's) gets half the box; rounds, seconds and minimum rounds split over the passes."""
    s = SETTINGS[quick]
    box = s["max_time"] if pair == 0 else s["max_time"] / 2
    return {"warmup": s["warmup"], "repeat": math.ceil(s["repeat"] / PASSES), "min_time": s["min_time"] / PASSES,
            "max_time": box / PASSES, "min_samples": math.ceil(s["min_samples"] / PASSES)}


def _fail(state: dict, exc: Exception) -> None:
    row = state["row"]
    row["error"] = f"while timing: {short_error(exc)}"
    row["traceback"] = traceback.format_exc()
    row["ok"] = False
    state["failed"] = True


def time_pass(state: dict | None, device: torch.device, quick: bool, pairs: list[int] | None = None) -> None:
    """One pass over a prepared row: each pair (ours and one peer) interleaved for its share of the
    time box, appended to the row's passes (``pairs``: the indices of the pairs to time, default all)."""
    if state is None or state.get("failed"):
        return
    try:
        with warnings.catch_warnings():  # e.g. SciPy's LinAlgWarning per ill-conditioned slice
            warnings.simplefilter("ignore")
            for i, (pname, pfn) in enumerate(state["pairs"]):
                if pairs is not None and i not in pairs:
                    continue
                fns = {"mpslinalg": state["ours"]} if pname is None else {"mpslinalg": state["ours"], pname: pfn}
                state["passes"][pname].append(time_interleaved(fns, device=device, cpu_clock=cpu_clock(device),
                                                               **_pass_settings(quick, i)))
    except Exception as exc:  # noqa: BLE001 - e.g. ours fails on a repeated call: a failure, reported
        _fail(state, exc)


def finish_workload(state: dict | None, device: torch.device, quick: bool) -> None:
    """Pool a row's passes into its times and verdicts (:func:`.timing.compare_passes`)."""
    if state is None or state.get("failed"):
        return
    row = state["row"]
    for i, (pname, _) in enumerate(state["pairs"]):
        passes = state["passes"][pname]
        if pname is not None:
            # the column's drift, or the row's own where it is measured larger (Workload.drift)
            floor = max(PEER_DRIFT.get(pname, RUN_DRIFT), state["drift"].get(pname, 0.0))
            c = compare_passes([t["mpslinalg"] for t in passes], [t[pname] for t in passes], floor=floor)
            if c.verdict == "inconclusive" and not 1 / VERDICT_MARGIN <= c.ratio <= VERDICT_MARGIN:
                # the median is beyond the margin but the interval too wide to say so (a noisy time
                # box; such rows flipped between runs): one more pass of this pair, pooled
                time_pass(state, device, quick, pairs=[i])
                if state.get("failed"):
                    return
                c = compare_passes([t["mpslinalg"] for t in passes], [t[pname] for t in passes], floor=floor)
        ours = Timing.from_samples([s for t in passes for s in t["mpslinalg"].samples], passes[0]["mpslinalg"].number)
        if i == 0:
            row["time"] = ours.to_dict()
        if pname is not None:
            peer = Timing.from_samples([s for t in passes for s in t[pname].samples], passes[0][pname].number)
            d = c.to_dict()
            row["peers"][pname] = {**peer.to_dict(), "speedup": c.ratio, "speedup_low": d["low"],
                                   "speedup_high": d["high"], "verdict": c.verdict, "drift": c.drift,
                                   "pass_ratios": d["pass_ratios"], "own_drift": c.own_drift}


def run_workload(w: Workload, device: torch.device, quick: bool, timing: bool) -> dict:
    """Run one workload: inputs, accuracy of ours, then its :data:`PASSES` timing passes back to back
    (the main job spreads them over the run on the CPU, :func:`_measure`)."""
    row, state = prepare_workload(w, device, quick, timing)
    for _ in range(PASSES):
        time_pass(state, device, quick)
    finish_workload(state, device, quick)
    return row


def _measure(rows_def: list[Workload], device: torch.device, quick: bool, timing: bool,
             after_pass: Callable[[int], None] | None = None) -> list[dict]:
    """Every row: accuracy, then the timing passes. On the CPU pass ``k`` of every row runs before
    pass ``k + 1`` of any, alternately in reverse order, so a row's passes sample the machine at
    times spread over the run (its state moves over minutes: see :func:`.timing.pass_drift`); on
    GPUs each row's passes run back to back and its inputs are freed before the next row.
    ``after_pass(k)`` runs after pass ``k`` of the rows on the CPU (the host-overhead section's
    pass ``k``), after all rows elsewhere."""
    spread = device.type == "cpu" and timing
    bar = Progress(len(rows_def) * (1 + (PASSES if timing else 0)))
    rows, states = [], []
    for w in rows_def:
        bar.start(w.name)
        row, state = prepare_workload(w, device, quick, timing)
        bar.step(w.name)
        if not spread:
            for k in range(PASSES if timing else 0):
                bar.start(f"{w.name} (pass {k + 1}/{PASSES})")
                time_pass(state, device, quick)
                bar.step(f"{w.name} (pass {k + 1}/{PASSES})")
            finish_workload(state, device, quick)
            state = None
            if device.type == "cuda":
                torch.cuda.empty_cache()
        rows.append(row)
        states.append(state)
    if spread:
        for k in range(PASSES):
            order = list(zip(rows_def, states))
            for w, state in order if k % 2 == 0 else order[::-1]:
                bar.start(f"{w.name} (pass {k + 1}/{PASSES})")
                time_pass(state, device, quick)
                bar.step(f"{w.name} (pass {k + 1}/{PASSES})")
            if after_pass is not None:
                after_pass(k)
        for state in states:
            finish_workload(state, device, quick)
    elif after_pass is not None:
        for k in range(PASSES):
            after_pass(k)
    bar.close()
    return rows


def _ms_spread(t: dict) -> str:
    """Median with half the inter-quartile range as a percentage of it."""
    return f"{fmt_ms(t['median_ms'])} ±{50 * t['iqr_ms'] / t['median_ms']:.0f}%" if t["median_ms"] > 0 else "0"


def _ratio_cell(p: dict) -> str:
    hi = "inf" if p["speedup_high"] is None else f"{p['speedup_high']:.2f}"
    return f"{p['speedup']:.2f}x [{p['speedup_low']:.2f}-{hi}] {p['verdict']}"


def _table(rows: list[dict], device: torch.device) -> str:
    peer_names = ["torch.linalg"] + (["scipy"] if device.type == "cpu" else [])
    # two kinds of ratio, named apart (issue 34.8): the accuracy check's LAPACK test ratio ("error
    # ratio", against "limit") and each peer's time over ours ("speedup vs <peer>")
    headers = ["workload", "dtype", "shape", "path", "accuracy check", "error ratio", "limit", "mpslinalg ms"]
    for p in peer_names:
        headers += [f"{p} ms", f"speedup vs {p}"]
    out = []
    for r in rows:
        acc = r.get("accuracy", {})
        if "error" in r:
            out.append([r["name"], r["dtype"], r.get("shape", ""), r.get("path", "-"), f"ERROR {r['error']}", "", "",
                        "-"]
                       + ["-", "-"] * len(peer_names))
            continue
        if "value" in acc:
            verdict = "ok" if acc["pass"] else "FAIL"
            check, a, lim = acc["ratio"], f"{acc['value']:.3g} {verdict}", f"{acc['threshold']:g}"
        else:
            check, a, lim = f"n/a ({acc.get('error', '')})", "-", ""
        ours_ms = _ms_spread(r["time"]) if "time" in r else "-"
        cells = [r["name"], r["dtype"], r.get("shape", ""), r.get("path", "-"), check, a, lim, ours_ms]
        for p in peer_names:
            pr = r.get("peers", {}).get(p)
            if pr is None:
                cells += ["-", "-"]
            elif "error" in pr:
                cells += ["n/a", "-"]
            else:
                cells += [_ms_spread(pr), _ratio_cell(pr)]
        out.append(cells)
    align = ["l", "l", "l", "l", "l", "r", "r", "r"] + ["r", "r"] * len(peer_names)
    return format_table(headers, out, align=align)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the report (``calibrate ...``: :func:`.calibrate.main`); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["calibrate"]:
        from .calibrate import main as calibrate

        return calibrate(argv[1:])
    args = _parser().parse_args(argv)
    if args.list:
        return _list_workloads()
    for stream in (sys.stdout, sys.stderr):  # norm signs in ratio names on a non-UTF-8 console
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    try:
        device = resolve_device(best_device() if args.device == "auto" else args.device)
    except (RuntimeError, ValueError) as exc:
        print(f"python -m mpslinalg: --device: {exc}", file=sys.stderr)
        return 2
    if args.threads is not None and args.threads < 1:
        print(f"python -m mpslinalg: --threads: expected an int >= 1, got {args.threads}", file=sys.stderr)
        return 2
    if args.json and (problem := _unwritable(args.json)):
        print(f"python -m mpslinalg: --json: cannot write {args.json!r} ({problem})", file=sys.stderr)
        return 2
    threads = args.threads if args.threads is not None else (1 if device.type == "cpu" else None)
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        import scipy.linalg  # noqa: F401 - loads SciPy's OpenBLAS, so that blas_threads finds it
    except ImportError:
        pass
    try:
        blas = threads if device.type == "cpu" else None
        with blas_threads(blas) as libraries:  # SciPy's LAPACK with as many threads as torch
            args.blas = {"threads": blas, "openblas_libraries_set": libraries}
            return _run(args, device)
    finally:  # main() is also called in-process (tests, notebooks): leave torch as it was
        torch.set_num_threads(previous)


def _list_workloads() -> int:
    """``--list``: the names ``--only`` matches (a substring of one selects it), one a line, with
    the op each times; no environment report, nothing measured."""
    try:
        registered = registry.workloads()
    except Exception as exc:  # noqa: BLE001 - a family's row function is broken: say which, fail
        print(f"the workload registry (mpslinalg/mainjob/workloads.py) raised {short_error(exc)}", file=sys.stderr)
        return 1
    width = max([len(w.name) for w in registered] + [len(OVERHEAD_ROW)])
    print("workloads (python -m mpslinalg --only TEXT runs those whose name contains TEXT):")
    for w in registered:
        print(f"  {w.name:<{width}}  {w.op}")
    print(f"  {OVERHEAD_ROW:<{width}}  every op's host time at small sizes")
    return 0


def cpu_clock(device: torch.device) -> str:
    """The clock of a CPU row's samples (:data:`.timing.CPU_CLOCKS`): the process's CPU time when
    torch runs one thread (the call's own cost: its wall time on the shared machine is mostly other
    users' time), wall time otherwise (several threads' CPU time is not their duration)."""
    return "process" if device.type == "cpu" and torch.get_num_threads() == 1 else "wall"


def _host_overhead(records: list[dict]) -> list[dict]:
    """Print the host-overhead section (issue 10): per op, ours vs torch.linalg per call."""
    print(f"\n{OVERHEAD_ROW}: a call's host time at small sizes, CPU, one thread, interleaved, "
          f"{overhead.PASSES} passes (between the rows' passes on the CPU); each case read from its rounds "
          f"in the machine's fast state (a state probe in every round)")
    timed = [r for r in records if "error" not in r]
    meets = sum(r["verdict"] == "meets" for r in timed)
    worst = max(timed, key=lambda r: r["extra_us"], default=None)
    summary = f"{meets} of {len(records)} ops meet ours <= torch.linalg + {overhead.TARGET_US:g} us"
    if worst is not None:
        summary += f"; largest extra {worst['extra_us']:+.1f} us ({worst['name']})"
    headers, rows = overhead.table_rows(records)
    print(format_table(headers, rows, align=["l", "r", "r", "r", "l"]))
    print(summary)
    return records


def _run(args: argparse.Namespace, device: torch.device) -> int:
    """The report after argument checks: environment, workloads, table, JSON; the exit status."""
    env = environment()
    env["routing_table"] = f"{device.type}: {routing.table(device.type)['source']}"
    print("# mpslinalg report\n")
    print(format_environment(env))
    ops = implemented_ops()
    print(f"\nops implemented: {', '.join(ops) if ops else 'none yet'}")

    try:
        registered = registry.workloads()
    except Exception as exc:  # noqa: BLE001 - a family's row function is broken: say which, fail
        print(f"\nthe workload registry (mpslinalg/mainjob/workloads.py) raised {short_error(exc)}", file=sys.stderr)
        traceback.print_exc()
        return 1
    rows_def = [w for w in registered if not args.only or any(s in w.name for s in args.only)]
    with_overhead = not args.no_timing and (not args.only or any(s in OVERHEAD_ROW for s in args.only))
    if args.only and not rows_def and not with_overhead:
        names = "\n  ".join([*(w.name for w in registered), OVERHEAD_ROW])
        print(f"python -m mpslinalg: --only {' '.join(map(repr, args.only))} matches no workload; "
              f"the workloads are:\n  {names}", file=sys.stderr)
        return 2
    report: dict = {"environment": env, "device": str(device), "quick": bool(args.quick),
                    "settings": SETTINGS[bool(args.quick)], "implemented_ops": ops, "rows": [],
                    "load": {"start": _load_average()}, "cpu_clock": cpu_clock(device),
                    "scipy_blas": getattr(args, "blas", None)}
    ov = overhead.start(quick=bool(args.quick)) if with_overhead and ops else None
    if not rows_def:
        if not args.only:
            print("no workloads registered for the implemented ops; nothing to measure")
    else:
        print(f"\nmeasuring {len(rows_def)} workload(s) on {device} "
              f"({'quick' if args.quick else 'full'} sizes)\n")
        report["rows"] = _measure(rows_def, device, bool(args.quick), not args.no_timing,
                                  after_pass=None if ov is None else lambda k: overhead.run_pass(ov, k))
        print(_table(report["rows"], device))
        clock = {"process": "the process's CPU time (one thread: the call's own cost, not the other users' "
                            "time on a shared machine)", "wall": "wall time"}[cpu_clock(device)]
        print("\ntimes: median per call ± half the inter-quartile range; ours is interleaved round by round "
              f"with each peer in turn (torch.linalg first; its pair gives ours' time), in {PASSES} passes"
              f"{' spread over the run' if device.type == 'cpu' else ''}.\n"
              f"{'cpu samples: ' + clock + '.' + chr(10) if device.type == 'cpu' else ''}"
              "speedup columns: peer time / our time (> 1: mpslinalg is "
              "faster), the median of the per-round ratios of its timing passes [its 95% interval, widened by "
              "the column's run-to-run drift, timing.RUN_DRIFT and SCIPY_DRIFT]; verdict faster/slower "
              f"only when the whole interval lies beyond {VERDICT_MARGIN:g}x (1/{VERDICT_MARGIN:g}x), "
              "else inconclusive.\npath: ours = mpslinalg's implementation; torch.linalg (routed) = outside the "
              "measured table mpslinalg.routing.WHEN the op is one torch.linalg call (docs/routing.md); kernels = "
              "the Metal kernels (metal/emulator backend).\nerror ratio: the LAPACK test ratio the accuracy check "
              "names, the worst over at most 256 matrices of a batch, in float64 on the CPU; ok when <= limit.")
        for r in report["rows"]:
            if "error" in r:
                print(f"\n{r['name']} raised:\n{r['traceback']}", file=sys.stderr)
    if ov is not None:
        if not rows_def:
            for k in range(overhead.PASSES):
                overhead.run_pass(ov, k)
        report["host_overhead"] = _host_overhead(overhead.finish(ov))
    report["load"]["end"] = _load_average()
    report["ok"] = all(r["ok"] for r in report["rows"])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({k: v for k, v in report.items()}, f, indent=2, default=str)
        print(f"\nJSON written to {args.json}")
    return 0 if report["ok"] else 1

