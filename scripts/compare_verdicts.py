#!/usr/bin/env python
"""Compare the verdicts of two main-job runs (``python -m mpslinalg --json A.json``, then ``B.json``).

Issue 15's criterion: two consecutive runs agree on every row's verdict (faster / slower /
inconclusive) against each peer. This prints one markdown row per (workload, peer) present in either
run: both ratios with their intervals, both verdicts, and what a flip is near (the margin the
interval's edge crossed), then a summary line::

    python scripts/compare_verdicts.py run1.json run2.json            # all rows
    python scripts/compare_verdicts.py run1.json run2.json --flips    # only rows that differ
    python scripts/compare_verdicts.py --drift a1.json a2.json b1.json b2.json   # derive the drifts
    python scripts/compare_verdicts.py --row-drift r1.json r2.json r3.json ...  # each row's own drift

The host-overhead section's verdicts (meets / misses / inconclusive) are compared too, as peer
``host overhead``.

``--drift`` takes pairs of consecutive runs and derives the run-to-run drift each verdict's interval
is widened by, by the method ``mpslinalg.mainjob.timing.RUN_DRIFT`` documents: over the rows whose
within-run interval is tight (standard error of the log < 0.05, the run's own widening undone), the
mean of ``Δ² − se₁² − se₂²`` (Δ: the difference of the two runs' logs) is ``2 τ²``. Per column:
each peer's log ratio, and the host overhead's log extra (``overhead.OVERHEAD_DRIFT``).

``--row-drift`` takes three or more runs (of one commit and mode) and derives each row's own drift
by the same method, over its runs instead of over the column's rows: ``τ² = var(log estimates) −
mean(se²)``. A row whose ``τ`` stands well above its column's declares it (``Workload.drift``).

Exit status: 0 when every verdict agrees, 1 when some differ (or a row is missing from one run),
2 for unreadable input.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence

#: The verdict margin of ``mpslinalg.mainjob.timing`` (not imported: the script reads JSON written by
#: any version; the runs' own ``verdict`` fields are what is compared).
_MARGIN = 1.10
#: The host-overhead target of ``mpslinalg.mainjob.overhead`` (the same caveat).
_TARGET_US = 5.0
#: The peer name the host-overhead section's verdicts are compared under.
OVERHEAD = "host overhead"
#: z of the 95% intervals the runs widen by their drift.
_Z = 1.959963984540054


def _log_estimates(report: dict, assume_drift: float | None = None) -> dict[tuple[str, str], tuple[float, float]]:
    """``{(row, column): (log estimate, its within-run standard error)}`` of one report, the run's
    widening by its recorded drift (``drift``, ``drift_us``; else ``assume_drift``) undone."""
    out = {}
    for row in report["rows"]:
        for peer, p in row.get("peers", {}).items():
            if p.get("speedup_high") is None or not p.get("speedup_low"):
                continue
            drift = p.get("drift", assume_drift)
            if drift is None:
                continue
            half = (math.log(p["speedup_high"]) - math.log(p["speedup_low"])) / 2 - _Z * drift
            out[(row["name"], peer)] = (math.log(p["speedup"]), max(half, 0.0) / _Z)
    for rec in report.get("host_overhead") or []:
        if "drift_us" not in rec or rec.get("extra_low_us") is None or rec.get("extra_high_us") is None:
            continue
        low, high = rec["extra_low_us"] + _Z * rec["drift_us"], rec["extra_high_us"] - _Z * rec["drift_us"]
        if low > 0 and rec["extra_us"] > 0:
            out[(rec["name"], OVERHEAD)] = (math.log(rec["extra_us"]), (math.log(high) - math.log(low)) / 2 / _Z)
    return out


def derive_drift(pairs: Sequence[tuple[dict, dict]], *, tight: float = 0.05,
                 assume_drift: float | None = None) -> dict[str, dict]:
    """The run-to-run drift per column from pairs of consecutive runs (the module's ``--drift``).

    Returns
    -------
    dict
        ``{column: {"tau": τ, "rows": number of tight row pairs, "worst": (row, Δ)}}``; ``tau`` is
        ``sqrt(max(mean(Δ² − se₁² − se₂²), 0) / 2)``.
    """
    excess: dict[str, list[float]] = {}
    worst: dict[str, tuple[str, float]] = {}
    for first, second in pairs:
        a, b = _log_estimates(first, assume_drift), _log_estimates(second, assume_drift)
        for key, (x1, s1) in a.items():
            if key not in b or s1 >= tight or b[key][1] >= tight:
                continue
            x2, s2 = b[key]
            col = key[1]
            excess.setdefault(col, []).append((x1 - x2) ** 2 - s1 * s1 - s2 * s2)
            if col not in worst or abs(x1 - x2) > abs(worst[col][1]):
                worst[col] = (key[0], x1 - x2)
    return {col: {"tau": math.sqrt(max(sum(v) / len(v), 0.0) / 2), "rows": len(v), "worst": worst[col]}
            for col, v in excess.items()}


def load(path: str) -> dict:
    """The report written by ``python -m mpslinalg --json PATH``; ``ValueError`` if it is not one."""
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    if not isinstance(report, dict) or not isinstance(report.get("rows"), list):
        raise ValueError(f"{path}: not a main-job report (no 'rows' list)")
    return report


def verdicts(report: dict) -> dict[tuple[str, str], dict]:
    """``{(row name, peer): {"ratio", "low", "high", "verdict", "shape"}}`` of one report (rows that
    raised are ``{"verdict": "error"}``)."""
    out: dict[tuple[str, str], dict] = {}
    for rec in report.get("host_overhead") or []:
        if "verdict" in rec:
            out[(rec["name"], OVERHEAD)] = {"extra": rec["extra_us"], "low": rec["extra_low_us"],
                                            "high": rec["extra_high_us"], "verdict": rec["verdict"], "shape": ""}
    for row in report["rows"]:
        if "error" in row:
            out[(row["name"], "-")] = {"verdict": "error", "shape": row.get("shape", "")}
            continue
        for peer, p in row.get("peers", {}).items():
            if "verdict" not in p:
                continue
            out[(row["name"], peer)] = {"ratio": p["speedup"], "low": p["speedup_low"], "high": p["speedup_high"],
                                        "verdict": p["verdict"], "shape": row.get("shape", "")}
    return out


def _cell(v: dict | None) -> str:
    if v is None:
        return "missing"
    if "extra" in v:
        lo = "-inf" if v["low"] is None else f"{v['low']:.1f}"
        hi = "inf" if v["high"] is None else f"{v['high']:.1f}"
        return f"{v['extra']:+.1f} us [{lo}, {hi}] {v['verdict']}"
    if "ratio" not in v:
        return v["verdict"]
    hi = "inf" if v["high"] is None else f"{v['high']:.2f}"
    return f"{v['ratio']:.2f} [{v['low']:.2f}-{hi}] {v['verdict']}"


def near(a: dict | None, b: dict | None) -> str:
    """For a flip: the interval edges that sat on either side of the margin they were judged by."""
    if a is None or b is None or a["verdict"] == b["verdict"]:
        return ""
    if "extra" in a and "extra" in b:
        both = {a["verdict"], b["verdict"]}
        edge = "high" if "meets" in both else "low"
        return f"{edge} edges {_us(a[edge])} / {_us(b[edge])} vs +{_TARGET_US:g} us"
    if "ratio" not in a or "ratio" not in b:
        return ""
    both = {a["verdict"], b["verdict"]}
    if "slower" in both:
        return f"high edges {_hi(a)} / {_hi(b)} vs 1/{_MARGIN:g} = {1 / _MARGIN:.3f}"
    return f"low edges {a['low']:.3f} / {b['low']:.3f} vs {_MARGIN:g}"


def _us(x: float | None) -> str:
    return "unbounded" if x is None else f"{x:+.1f}"


def _hi(v: dict) -> str:
    return "inf" if v["high"] is None else f"{v['high']:.3f}"


def compare(first: dict, second: dict) -> list[dict]:
    """One record per (row, peer) in either report: both verdicts and whether they agree."""
    a, b = verdicts(first), verdicts(second)
    keys = list(a) + [k for k in b if k not in a]
    out = []
    for key in keys:
        va, vb = a.get(key), b.get(key)
        agree = va is not None and vb is not None and va["verdict"] == vb["verdict"]
        out.append({"row": key[0], "peer": key[1], "shape": (va or vb)["shape"], "first": va, "second": vb,
                    "agree": agree, "near": "" if agree else near(va, vb)})
    return out


def _load_line(name: str, report: dict) -> str:
    load = report.get("load") or {}
    env = report.get("environment", {})
    where = f"{report.get('device', '?')}, {'quick' if report.get('quick') else 'full'}"
    text = f"{name}: {env.get('date', '?')}, {where}"
    if load:
        text += f", 1-min load average {load.get('start', '?')} at start, {load.get('end', '?')} at end"
    return text


def derive_row_drift(reports: Sequence[dict], assume_drift: float | None = None) -> dict[tuple[str, str], dict]:
    """Each (row, column)'s own run-to-run drift over ``reports`` (the module's ``--row-drift``).

    Returns
    -------
    dict
        ``{(row, column): {"tau": τ, "runs": k, "ratios": [...]}}`` for the keys present in every
        report; ``tau`` is ``sqrt(max(var(logs) − mean(se²), 0))``.
    """
    runs = [_log_estimates(r, assume_drift) for r in reports]
    out = {}
    for key in runs[0]:
        if not all(key in r for r in runs):
            continue
        logs = [r[key][0] for r in runs]
        se2 = sum(r[key][1] ** 2 for r in runs) / len(runs)
        mean = sum(logs) / len(logs)
        var = sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)
        out[key] = {"tau": math.sqrt(max(var - se2, 0.0)), "runs": len(logs), "ratios": [math.exp(x) for x in logs]}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Compare the verdicts of two `python -m mpslinalg --json` runs.")
    p.add_argument("first")
    p.add_argument("second")
    p.add_argument("more", nargs="*", help="with --drift: further pairs of runs")
    p.add_argument("--flips", action="store_true", help="print only the rows whose verdicts differ")
    p.add_argument("--drift", action="store_true",
                   help="derive the run-to-run drift per column from the pairs (first second [third fourth ...])")
    p.add_argument("--row-drift", action="store_true",
                   help="derive each row's own drift over three or more runs (first second third ...)")
    p.add_argument("--assume-drift", type=float, default=None, metavar="TAU",
                   help="with --drift: the drift runs without a recorded one were widened by")
    args = p.parse_args(argv)
    paths = [args.first, args.second, *args.more]
    if args.row_drift and len(paths) < 3:
        print("compare_verdicts: --row-drift needs three or more runs", file=sys.stderr)
        return 2
    if not args.row_drift and (args.more and not args.drift or len(paths) % 2):
        print("compare_verdicts: expected two runs, or pairs of runs with --drift", file=sys.stderr)
        return 2
    try:
        reports = [load(path) for path in paths]
    except (OSError, ValueError) as exc:
        print(f"compare_verdicts: {exc}", file=sys.stderr)
        return 2
    if args.row_drift:
        print("| row | column | runs | tau | ratios |\n|---|---|---|---|---|")
        rows = derive_row_drift(reports, assume_drift=args.assume_drift)
        for (row, col), d in sorted(rows.items(), key=lambda kv: -kv[1]["tau"]):
            print(f"| {row} | {col} | {d['runs']} | {d['tau']:.3f} | {', '.join(f'{x:.2f}' for x in d['ratios'])} |")
        return 0
    if args.drift:
        pairs = list(zip(reports[::2], reports[1::2]))
        for i, (a, b) in enumerate(pairs):
            print(_load_line(f"pair {i + 1}, run 1", a))
            print(_load_line(f"pair {i + 1}, run 2", b))
        print("\n| column | tight row pairs | tau | largest difference |\n|---|---|---|---|")
        for col, d in derive_drift(pairs, assume_drift=args.assume_drift).items():
            print(f"| {col} | {d['rows']} | {d['tau']:.4f} | {d['worst'][0]} {d['worst'][1]:+.3f} |")
        return 0
    first, second = reports
    records = compare(first, second)
    print(_load_line("run 1", first))
    print(_load_line("run 2", second))
    print()
    print("| workload | shape | peer | run 1 | run 2 | agree | near |")
    print("|---|---|---|---|---|---|---|")
    for r in records:
        if args.flips and r["agree"]:
            continue
        print(f"| {r['row']} | {r['shape']} | {r['peer']} | {_cell(r['first'])} | {_cell(r['second'])} | "
              f"{'yes' if r['agree'] else '**no**'} | {r['near']} |")
    same = sum(r["agree"] for r in records)
    peers = dict.fromkeys(r["peer"] for r in records)
    per_peer = ", ".join(f"{peer} {sum(r['agree'] for r in records if r['peer'] == peer)} of "
                         f"{sum(r['peer'] == peer for r in records)}" for peer in peers)
    print(f"\n{same} of {len(records)} verdicts agree ({per_peer})")
    return 0 if same == len(records) else 1


if __name__ == "__main__":
    sys.exit(main())
