"""Host overhead per call of every public op at small sizes (issue 10), ours against torch.linalg.

    python benchmarks/bench_overhead.py --out results/            # the table, JSON and markdown
    python benchmarks/bench_overhead.py --quick --only inv        # a quick look at some ops
    python benchmarks/bench_overhead.py --layer                   # also the op layer's own cost
    python benchmarks/bench_overhead.py --layer --device cuda     # the same rows on a GPU

--layer adds the table of :func:`mpslinalg.mainjob.overhead.ours_cases`: each front door on
mpslinalg's own path (as on mps, or inside the routing table) against the bare computation it ends in.

CPU, one torch thread, ours and torch.linalg interleaved round by round, medians per call; the
target is "ours <= torch.linalg + 5 us" (mpslinalg.mainjob.overhead, which the main job shares).
Exit status 0 when ours ran for every op, 1 when one raised, 2 when --only matches no op.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

from mpslinalg.mainjob import overhead  # noqa: E402
from mpslinalg.mainjob.report import environment, format_table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="results", help="output directory (default: results/)")
    p.add_argument("--quick", action="store_true", help="a shorter time box per op")
    p.add_argument("--only", action="append", default=[], metavar="TEXT",
                   help="only ops whose row name contains TEXT (repeatable)")
    p.add_argument("--layer", action="store_true",
                   help="also time the op layer's own cost (front door on mpslinalg's path vs the bare call)")
    p.add_argument("--device", default="cpu", help="where the inputs live (default: cpu)")
    args = p.parse_args(argv)
    all_cases = overhead.cases(args.device) + (overhead.ours_cases(args.device) if args.layer else [])
    chosen = [c for c in all_cases if not args.only or any(s in c.name for s in args.only)]
    if not chosen:
        names = "\n  ".join(c.name for c in all_cases)
        print(f"--only {' '.join(map(repr, args.only))} matches no op; the rows are:\n  {names}", file=sys.stderr)
        return 2
    records = overhead.measure(chosen, quick=args.quick, device=args.device)
    tables = []
    for layer in (False, True):
        part = [r for r, c in zip(records, chosen) if c.ours_always == layer]
        if part:
            headers, rows = overhead.table_rows(part, peer="bare call us" if layer else "torch.linalg us",
                                                device=args.device)
            title = ("mpslinalg's own path (routing.ours_always) against the bare call it ends in" if layer
                     else "public calls against torch.linalg")
            tables.append(f"{title}\n\n{format_table(headers, rows, align=['l', 'r', 'r', 'r', 'l'])}")
    table = "\n\n".join(tables)
    print(table)
    print(f"\nextra: median of the per-round differences ours - torch.linalg per call, [its 95% interval]; "
          f"meets when the whole interval is <= {overhead.TARGET_US:g} us, misses when wholly above.")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"overhead_{args.device}" + ("_quick" if args.quick else "")
    env = environment()
    (out / f"{stem}.json").write_text(json.dumps(
        {"environment": env, "target_us": overhead.TARGET_US, "quick": args.quick, "rows": records},
        indent=2, default=str))
    (out / f"{stem}.md").write_text(f"# host overhead per call, {args.device}, one CPU thread\n\ntorch {env['torch']}, "
                                    f"{env['date']}{', quick' if args.quick else ''}\n\n{table}\n")
    print(f"\nwrote {out / (stem + '.json')} and {out / (stem + '.md')}", file=sys.stderr)
    return 0 if all("error" not in r for r in records) else 1


if __name__ == "__main__":
    raise SystemExit(main())
