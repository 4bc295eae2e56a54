"""``python -m mpslinalg calibrate``: measure the "never slower" table on the device it runs on
(issue 36; docs/calibrate.md).

Every family declares where each of its routed ops is timed (``Family.grid``,
:class:`mpslinalg.oplayer.family.Grid`; a route without one gets the default grid). For each cell
(op, dtype, order ``n``, batch) mpslinalg's implementation (the front doors under
``ours_always``) and the ``torch.linalg`` call are timed interleaved (:func:`.timing.time_interleaved`),
and on a GPU also the CPU path (torch.linalg on the CPU, both transfers included, reported only);
the verdict is the main job's (:func:`.timing.compare_passes` with the column's drift and
:data:`.timing.VERDICT_MARGIN`). A cell routes to mpslinalg when its verdict is ``faster``, to
torch.linalg when ``slower``; an inconclusive or unmeasured cell keeps the shipped default's
decision. :func:`build_table` turns the cells into regions; the table is written to the per-user
cache (:mod:`mpslinalg.oplayer.calibrated`), where the front doors and ``enable(when="faster")``
find it in the next process (and in this one: :func:`mpslinalg.oplayer.table.forget`).

The whole run has a time budget (``--quick``: 2 minutes, else 15): each cell's time box is the
budget left shared over the cells left, and cells past the budget keep the shipped decision.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..oplayer import calibrated
from ..oplayer import table as _table
from ..oplayer.family import Grid, grids
from .report import Progress, format_table
from .timing import CPU_CLOCKS, RUN_DRIFT, VERDICT_MARGIN, compare_passes, resolve_device, synchronize, time_interleaved

__all__ = ["BUDGET_S", "Cell", "build_table", "cells", "changes", "main", "measure"]

#: The run's time budget in seconds (quick, full).
BUDGET_S = {True: 120.0, False: 900.0}
#: Largest time box of one cell's pair (quick, full), seconds; and the passes per cell.
_BOX_S = {True: 0.6, False: 4.0}
_PASSES = {True: 1, False: 2}
#: Cells above this many flops (~ batch n³) are left out (their time would eat the budget).
_MAX_WORK = {True: 3e7, False: 2e9}


@dataclass
class Cell:
    """One measurement: ``make()`` returns ``(ours, torch, cpu_path)`` zero-argument callables
    (``cpu_path`` None on the CPU)."""

    op: str
    dtype: torch.dtype
    n: int
    batch: int
    make: Callable[[], tuple]


def _spd(n: int, batch: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * n + batch)
    shape = (n, n) if batch == 1 else (batch, n, n)
    X = torch.randn(shape, generator=g, dtype=dtype)
    return (X @ X.mH / n + torch.eye(n, dtype=dtype)).to(device)


def _peer(op: str, grid: Grid) -> Callable:
    if grid.peer is not None:
        return grid.peer
    fn = getattr(torch.linalg, op, None) or getattr(torch, op, None)
    if fn is None:
        raise ValueError(f"no torch.linalg.{op} nor torch.{op}: declare the grid's peer")
    return fn


def _to(x, device: torch.device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, tuple):
        return type(x)(*(_to(v, device) for v in x)) if hasattr(x, "_fields") else tuple(_to(v, device) for v in x)
    return x


def _maker(op: str, grid: Grid, n: int, batch: int, dtype: torch.dtype, device: torch.device) -> Callable:
    def make():
        from ..registry import public_op

        A = _spd(n, batch, dtype, device)
        args = grid.inputs(A) if grid.inputs is not None else (A,)
        ours_fn, peer, kw = public_op(op), _peer(op, grid), dict(grid.kwargs)

        def ours():
            with _table.ours_always():
                return ours_fn(*args, **kw)

        cpu_path = None
        if device.type != "cpu":
            def cpu_path():
                return _to(peer(*(_to(a, torch.device("cpu")) for a in args), **kw), device)
        return ours, lambda: peer(*args, **kw), cpu_path
    return make


def cells(families, device: torch.device, quick: bool, only: list[str] | None = None) -> list[Cell]:
    """Every cell of the families' grids on ``device`` (``only``: ops whose name contains one)."""
    out = []
    for f in families:
        for op, grid in grids(f).items():
            if only and not any(s in op for s in only):
                continue
            sizes, batches = (grid.quick_sizes, grid.quick_batches) if quick else (grid.sizes, grid.batches)
            for dtype in grid.dtypes:
                if device.type == "mps" and dtype.is_floating_point and dtype.itemsize == 8:
                    continue  # no float64 on mps
                for n in sizes:
                    for b in batches:
                        if b * n ** 3 <= _MAX_WORK[quick]:
                            out.append(Cell(op, dtype, n, b, _maker(op, grid, n, b, dtype, device)))
    # cheapest first, every op's in turn: cells the budget leaves out are the costly ones, spread
    # over the ops, not one op's whole grid
    return sorted(out, key=lambda c: (c.batch * c.n ** 3, c.n, c.batch))


def measure(todo: list[Cell], device: torch.device, quick: bool, budget: float | None = None,
            progress: bool = True) -> list[dict]:
    """Time every cell within ``budget`` seconds (wall clock); one row per cell, with its verdict
    (``faster``/``slower``/``inconclusive``), or ``skipped`` (past the budget) or ``error``."""
    from . import cpu_clock

    budget = BUDGET_S[quick] if budget is None else budget
    wall = CPU_CLOCKS["wall"]  # the budget's clock (a test's fake clock replaces it)
    start = wall()
    rows = []
    bar = Progress(len(todo)) if progress else None
    passes = _PASSES[quick]
    for i, cell in enumerate(todo):
        row = {"op": cell.op, "dtype": str(cell.dtype).removeprefix("torch."), "n": cell.n, "batch": cell.batch}
        rows.append(row)
        left = budget - (wall() - start)
        label = f"{cell.op} {row['dtype']} {cell.n}x{cell.n} x{cell.batch}"
        if left <= 0:
            row["verdict"] = "skipped"
            continue
        if bar:
            bar.start(label)
        box = min(_BOX_S[quick], left / (len(todo) - i) / passes)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours, peer, cpu_path = cell.make()
                ours()
                peer()  # torch may lack the op on this device: an error row, the shipped decision stays
                synchronize(device)
                fns = {"ours": ours, "torch": peer}
                if cpu_path is not None:
                    fns["cpu path"] = cpu_path
                runs = [time_interleaved(fns, device=device, warmup=1, repeat=12, min_time=box / 2,
                                         max_time=box, min_samples=6, cpu_clock=cpu_clock(device))
                        for _ in range(passes)]
        except Exception as exc:  # noqa: BLE001 - one op failing must not stop the calibration
            row["verdict"] = "error"
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
        else:
            c = compare_passes([r["ours"] for r in runs], [r["torch"] for r in runs], floor=RUN_DRIFT)
            row.update(verdict=c.verdict, speedup=c.ratio, low=c.low, high=None if math.isinf(c.high) else c.high,
                       ours_ms=1e3 * runs[0]["ours"].median, torch_ms=1e3 * runs[0]["torch"].median)
            if cpu_path is not None:
                row["cpu_path_ms"] = 1e3 * runs[0]["cpu path"].median
        if bar:
            bar.step(label)
    if bar:
        bar.close()
    return rows


def _ours_at(regions, n: int, batch: int) -> bool:
    return any(lo <= n <= hi and batch >= b for lo, hi, b in regions or ())


def decided(rows: list[dict], shipped: dict) -> dict:
    """``{(op, dtype): {(n, batch): ours?}}``: the measured verdict, else the shipped decision."""
    out: dict = {}
    for r in rows:
        dtype = getattr(torch, r["dtype"])
        default = _ours_at(shipped.get(r["op"], {}).get(dtype), r["n"], r["batch"])
        ours = True if r["verdict"] == "faster" else False if r["verdict"] == "slower" else default
        out.setdefault((r["op"], dtype), {})[(r["n"], r["batch"])] = ours
    return out


def build_table(rows: list[dict], shipped: dict) -> dict:
    """The measured table ``{op: {dtype: regions}}`` of the ops the rows cover.

    Per grid size ``n``, mpslinalg from the smallest batch from which every larger measured batch
    decided for it (:func:`decided`); a size between two grid sizes takes the decision of the one
    below it, and sizes outside the grid keep the shipped regions (clipped to them). Adjacent sizes
    with the same smallest batch form one region.
    """
    out: dict = {}
    for (op, dtype), cells_ in decided(rows, shipped).items():
        sizes = sorted({n for n, _ in cells_})
        starts = {}
        for n in sizes:
            start = None
            for b in sorted((b for m, b in cells_ if m == n), reverse=True):
                if not cells_[(n, b)]:
                    break
                start = b
            starts[n] = start
        regions = []
        default = shipped.get(op, {}).get(dtype, ())
        lo_grid, hi_grid = sizes[0], sizes[-1]
        regions += [(lo, min(hi, lo_grid - 1), b) for lo, hi, b in default if lo < lo_grid]
        for i, n in enumerate(sizes):
            if starts[n] is None:
                continue
            hi = sizes[i + 1] - 1 if i + 1 < len(sizes) else n
            if regions and regions[-1][2] == starts[n] and regions[-1][1] == n - 1:
                regions[-1] = (regions[-1][0], hi, starts[n])
            else:
                regions.append((n, hi, starts[n]))
        regions += [(max(lo, hi_grid + 1), hi, b) for lo, hi, b in default if hi > hi_grid]
        out.setdefault(op, {})[dtype] = tuple(regions)
    return out


def changes(rows: list[dict], shipped: dict) -> list[str]:
    """The cells whose measured decision differs from the shipped default's, one line each."""
    lines = []
    for r in rows:
        if r["verdict"] not in ("faster", "slower"):
            continue
        default = _ours_at(shipped.get(r["op"], {}).get(getattr(torch, r["dtype"])), r["n"], r["batch"])
        if (r["verdict"] == "faster") != default:
            now = "mpslinalg" if r["verdict"] == "faster" else "torch.linalg"
            lines.append(f"{r['op']} {r['dtype']} {r['n']}x{r['n']} batch {r['batch']}: shipped "
                         f"{'mpslinalg' if default else 'torch.linalg'} -> {now} ({_ratio(r)})")
    return lines


def _ratio(r: dict) -> str:
    hi = "inf" if r.get("high") is None else f"{r['high']:.2f}"
    return f"{r['speedup']:.2f}x [{r['low']:.2f}-{hi}] {r['verdict']}"


def _rows_table(rows: list[dict]) -> str:
    out = []
    for r in rows:
        if "speedup" in r:
            cpu = f"{r['cpu_path_ms']:.3f}" if "cpu_path_ms" in r else "-"
            out.append([r["op"], r["dtype"], str(r["n"]), str(r["batch"]), f"{r['ours_ms']:.3f}",
                        f"{r['torch_ms']:.3f}", cpu, _ratio(r)])
        else:
            out.append([r["op"], r["dtype"], str(r["n"]), str(r["batch"]), "-", "-", "-", r.get("error", r["verdict"])])
    return format_table(["op", "dtype", "n", "batch", "mpslinalg ms", "torch.linalg ms", "cpu path ms",
                         "speedup vs torch.linalg"], out, align=["l", "l", "r", "r", "r", "r", "r", "l"])


def format_regions(ops: dict) -> str:
    """The table ``{op: {dtype: regions}}`` one line per op and dtype."""
    lines = []
    for op, by in sorted(ops.items()):
        for dt, regions in by.items():
            shown = ", ".join(f"n {lo}-{hi if hi < 1 << 30 else 'any'} batch >= {b}" for lo, hi, b in regions)
            lines.append(f"  {op:<18} {str(dt).removeprefix('torch.'):<10} {shown or 'torch.linalg everywhere'}")
    return "\n".join(lines) or "  (empty: torch.linalg everywhere)"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mpslinalg calibrate",
                                description="measure the routing table on this device and cache it")
    p.add_argument("--device", default="auto", help="cpu, cuda, mps, or auto (mps > cuda > cpu; default)")
    p.add_argument("--quick", action="store_true", help="small grid, within 2 minutes (default: within 15)")
    p.add_argument("--only", action="append", default=[], metavar="TEXT", help="ops whose name contains TEXT")
    p.add_argument("--budget", type=float, default=None, metavar="S", help="time budget in seconds")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch CPU threads while measuring (default on the CPU: 1, as the main job and the "
                        "shipped CPU table; elsewhere torch's default)")
    p.add_argument("--export", metavar="FILE", help="write the table in force to FILE (no measuring) and exit")
    return p


def main(argv=None, cells_for: Callable | None = None) -> int:
    """Run the calibration (``cells_for(device, quick)``: the cells, for tests); the exit status."""
    from .report import best_device

    started = time.perf_counter()
    args = _parser().parse_args(argv)
    try:
        device = resolve_device(best_device() if args.device == "auto" else args.device)
    except (RuntimeError, ValueError) as exc:
        print(f"python -m mpslinalg calibrate: --device: {exc}", file=sys.stderr)
        return 2
    kind = device.type
    if args.export:
        ops = _table.in_force(kind)
        source = _table.SOURCES.get(kind, "shipped default")
        path = calibrated.save(kind, ops, path=args.export, extra={"source": source})
        print(f"the routing table in force on {kind} ({source}) written to {path}")
        return 0
    threads = args.threads if args.threads is not None else (1 if kind == "cpu" else None)
    if threads is not None and threads < 1:
        print(f"python -m mpslinalg calibrate: --threads: expected an int >= 1, got {threads}", file=sys.stderr)
        return 2
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _calibrate(args, device, started, cells_for)
    finally:  # main() is also called in-process (tests): leave torch as it was
        torch.set_num_threads(previous)


def _calibrate(args, device: torch.device, started: float, cells_for: Callable | None) -> int:
    """Measure, report, write the cache (after :func:`main`'s argument checks)."""
    from ..registry import families

    kind = device.type
    fams = families()
    todo = cells_for(device, args.quick) if cells_for is not None else cells(fams, device, args.quick, args.only)
    budget = args.budget if args.budget is not None else BUDGET_S[args.quick]
    print(f"calibrating the routing table on {device} ({calibrated.device_name(kind)}): {len(todo)} cells, "
          f"budget {budget:.0f} s, torch threads {torch.get_num_threads()}")
    t0 = time.perf_counter()
    # the budget covers the whole command: what discovery took, and a reserve for the last cell's
    # overrun (a cell takes its minimum rounds even past its box) and the report
    rows = measure(todo, device, args.quick, 0.9 * budget - (t0 - started))
    wall = time.perf_counter() - started
    shipped = _table.SHIPPED.get(kind, {})
    measured = build_table(rows, shipped)
    print(_rows_table(rows))
    print(f"\nverdict: the main job's rule (faster/slower only when the whole 95% interval, widened by "
          f"the run-to-run drift {RUN_DRIFT}, lies beyond {VERDICT_MARGIN:g}x); inconclusive, skipped and "
          f"error cells keep the shipped decision.")
    diff = changes(rows, shipped)
    print("\nchanged against the shipped default:" + ("\n  " + "\n  ".join(diff) if diff else " nothing"))
    print("\nmeasured table:\n" + format_regions(measured))
    skipped = sum(r["verdict"] == "skipped" for r in rows)
    path = calibrated.save(kind, measured, rows, extra={"quick": bool(args.quick), "wall_s": round(wall, 1),
                                                         "budget_s": budget, "skipped": skipped,
                                                         "threads": torch.get_num_threads()})
    _table.forget(kind)
    print(f"\nwritten to {path} in {wall:.0f} s ({skipped} cells past the budget); the next enable() and the "
          f"front doors use it (mpslinalg.routing.table({kind!r}))")
    return 0

