#!/usr/bin/env python
"""Compare the verdicts of two main-job runs (``python -m mpslinalg --json A.json``, then ``B.json``).

Issue 15's criterion: two consecutive runs agree on every row's verdict (faster / slower /
inconclusive) against each peer. This prints one markdown row per (workload, peer) present in either
run: both ratios with their intervals, both verdicts, and what a flip is near (the margin the
interval's edge crossed), then a summary line::

    python scripts/compare_verdicts.py run1.json run2.json            # all rows
    python scripts/compare_verdicts.py run1.json run2.json --flips    # only rows that differ

Exit status: 0 when every verdict agrees, 1 when some differ (or a row is missing from one run),
2 for unreadable input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

#: The verdict margin of ``mpslinalg.mainjob.timing`` (not imported: the script reads JSON written by
#: any version; the runs' own ``verdict`` fields are what is compared).
_MARGIN = 1.10


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
    if "ratio" not in v:
        return v["verdict"]
    hi = "inf" if v["high"] is None else f"{v['high']:.2f}"
    return f"{v['ratio']:.2f} [{v['low']:.2f}-{hi}] {v['verdict']}"


def near(a: dict | None, b: dict | None) -> str:
    """For a flip: the interval edges that sat on either side of the margin they were judged by."""
    if a is None or b is None or "ratio" not in a or "ratio" not in b or a["verdict"] == b["verdict"]:
        return ""
    both = {a["verdict"], b["verdict"]}
    if "slower" in both:
        return f"high edges {_hi(a)} / {_hi(b)} vs 1/{_MARGIN:g} = {1 / _MARGIN:.3f}"
    return f"low edges {a['low']:.3f} / {b['low']:.3f} vs {_MARGIN:g}"


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


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Compare the verdicts of two `python -m mpslinalg --json` runs.")
    p.add_argument("first")
    p.add_argument("second")
    p.add_argument("--flips", action="store_true", help="print only the rows whose verdicts differ")
    args = p.parse_args(argv)
    try:
        first, second = load(args.first), load(args.second)
    except (OSError, ValueError) as exc:
        print(f"compare_verdicts: {exc}", file=sys.stderr)
        return 2
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
