"""Measure where drop-in routing pays: ``torch.linalg.<op>`` with ``mpslinalg.enable(when="always")``
against the same call with routing off, per op, size, batch and dtype (issue 13, "never slower").

A routed call costs what the user sees: the dispatcher's hop into Python plus mpslinalg's op. So each
workload is timed in blocks of routing off and on (which one first alternates) and the ratio is
the median over blocks of ``time(off) / time(on)`` (> 1: routing is faster). "Never slower" is
judged on the **smallest** block ratio (the shared CPU is noisy; a workload routes only if every
block had it at >= 0.95x and the median block at >= 1.05x: same speed keeps torch's one call);
:func:`regions` turns a device's rows into the ``mpslinalg.routing.WHEN`` entries, which both the
drop-in routing and the public ops' front doors read (route an op at size ``n`` from the smallest
batch upward whose ratios, and every larger measured batch's, pass). The routed side runs
mpslinalg's own implementation at every size (``when="always"`` makes the front doors skip the
table).

``--overhead`` measures what routing costs a call it hands back to torch (routing on with the
default table at a size it declines, against routing off); ``--mainjob`` times the ``torch.linalg``
call of every ``python -m mpslinalg --quick`` row with routing off, always on, and on by the
default table, and says which path the default took.

    python benchmarks/bench_routing.py --device cpu --out results/       # prints rows and WHEN
    python benchmarks/bench_routing.py --device cpu --quick              # fewer sizes
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root
import torch

import mpslinalg
from mpslinalg import routing
from mpslinalg.mainjob.timing import time_callable

THRESHOLD = 0.95  # "never slower": every block of a routed workload at least this fast
GAIN = 1.05  # "faster": its median block at least this much faster (else torch's one call keeps it)
SIZES = (2, 3, 4, 8, 9, 16, 32, 64, 128, 256)
BATCHES = (1, 64, 4096)
MAX_ELEMENTS = 1 << 22  # skip workloads above this many matrix entries (time on a shared CPU)


def _calls(op: str, A: torch.Tensor):
    """The ``torch.linalg`` call a user writes for ``op`` on the batch ``A``."""
    B = torch.randn(*A.shape[:-1], 1, dtype=A.dtype, device=A.device)
    if op == "inv_ex":
        return lambda: torch.linalg.inv_ex(A)
    if op == "det":
        return lambda: torch.linalg.det(A)
    if op == "slogdet":
        return lambda: torch.linalg.slogdet(A)
    if op == "solve":
        return lambda: torch.linalg.solve(A, B)
    if op == "solve_ex":
        return lambda: torch.linalg.solve_ex(A, B)
    if op == "lu_factor_ex":
        return lambda: torch.linalg.lu_factor_ex(A)
    if op == "lu":
        return lambda: torch.linalg.lu(A)
    if op == "lu_solve":
        LU, piv = torch.linalg.lu_factor(A)
        return lambda: torch.linalg.lu_solve(LU, piv, B)
    if op == "solve_triangular":
        T = torch.linalg.lu_factor(A)[0].triu()
        return lambda: torch.linalg.solve_triangular(T, B, upper=True)
    if op == "qr":
        return lambda: torch.linalg.qr(A)
    raise ValueError(op)


def measure(op: str, n: int, batch: int, dtype: torch.dtype, device: str, blocks: int) -> dict:
    """Median over alternating blocks of ``time(routing off) / time(routing on)``."""
    g = torch.Generator().manual_seed(n * 1000 + batch)
    shape = (n, n) if batch == 1 else (batch, n, n)
    A = (torch.randn(shape, generator=g, dtype=dtype) + n * torch.eye(n, dtype=dtype)).to(device)
    fn = _calls(op, A)
    off, on, ratios = [], [], []
    for block in range(blocks):
        def timed_off():
            routing.disable()
            return time_callable(fn, device=device, warmup=2, repeat=5, min_time=0.02).median

        if block % 2:  # alternate which one runs first in a block (no order bias)
            t_off = timed_off()
        routing.enable(devices=(device,), ops=(op,), when="always")
        routing.reset_stats()
        t_on = time_callable(fn, device=device, warmup=2, repeat=5, min_time=0.02).median
        ran_ours = routing.stats().get(op, {}).get("ours", 0) > 0
        if not block % 2:
            t_off = timed_off()
        routing.disable()
        if not ran_ours:
            raise RuntimeError(f"{op} n={n} batch={batch}: routing on did not run mpslinalg's op")
        off.append(t_off)
        on.append(t_on)
        ratios.append(t_off / t_on)
    return {"op": op, "n": n, "batch": batch, "dtype": str(dtype).removeprefix("torch."), "device": device,
            "torch_s": statistics.median(off), "routed_s": statistics.median(on),
            "ratio": statistics.median(ratios), "worst": min(ratios)}


def regions(rows: list[dict], op: str, dtype: str) -> tuple[tuple[int, int, int], ...]:
    """``WHEN`` regions ``(n_min, n_max, batch_min)`` of ``op`` from the measured rows.

    Size ``n`` routes from the smallest measured batch whose worst ratio is >= :data:`THRESHOLD` and
    median ratio >= :data:`GAIN`, and every larger measured batch's too: where both take the same
    time (often the same ``torch.linalg`` call underneath) torch's one call keeps the op, without
    our front door's cost. Only measured sizes route (neighbouring sizes may take
    another algorithm: the closed forms end at n = 4); adjacent entries may be merged by hand.
    """
    by_n: dict[int, list[dict]] = {}
    for r in rows:
        if r["op"] == op and r["dtype"] == dtype:
            by_n.setdefault(r["n"], []).append(r)
    mins: dict[int, int] = {}
    for n, rs in sorted(by_n.items()):
        rs.sort(key=lambda r: r["batch"])
        start = None
        for r in reversed(rs):
            if r["worst"] < THRESHOLD or r["ratio"] < GAIN:
                break
            start = r["batch"]
        if start is not None:
            mins[n] = start
    return tuple((n, n, b) for n, b in sorted(mins.items()))


def overhead(device: str, rounds: int = 7) -> int:
    """Per-call cost of routing for calls it hands to torch (a 3x3 ``inv_ex``/``det`` and a 16x16
    ``solve``, single matrices: below every ``WHEN`` region), routing on against off, in blocks."""
    A = torch.randn(3, 3, device=device) + 3 * torch.eye(3, device=device)
    S = torch.randn(16, 16, device=device) + 16 * torch.eye(16, device=device)
    b = torch.randn(16, 1, device=device)
    calls = {"inv_ex 3x3": lambda: torch.linalg.inv_ex(A), "det 3x3": lambda: torch.linalg.det(A),
             "solve 16x16": lambda: torch.linalg.solve(S, b)}
    print("| call | torch.linalg | routing on (declined) | overhead |")
    print("|---|---|---|---|")
    for name, fn in calls.items():
        extra, off_t = [], []
        for block in range(rounds):
            def timed_off(fn=fn):
                routing.disable()
                return time_callable(fn, device=device, warmup=50, repeat=20, min_time=0.05).median

            if block % 2:  # alternate which one runs first
                off = timed_off()
            routing.enable(devices=(device,))
            routing.reset_stats()
            on = time_callable(fn, device=device, warmup=50, repeat=20, min_time=0.05).median
            st = routing.stats()
            if not block % 2:
                off = timed_off()
            routing.disable()
            if any(c["ours"] for c in st.values()):
                raise RuntimeError(f"{name}: the default table routed it; pick a declined size")
            extra.append(on - off)
            off_t.append(off)
        print(f"| {name} | {statistics.median(off_t) * 1e6:.2f} µs | "
              f"{(statistics.median(off_t) + statistics.median(extra)) * 1e6:.2f} µs | "
              f"{statistics.median(extra) * 1e6:+.2f} µs |", flush=True)
    return 0


def verify(device: str, blocks: int) -> int:
    """Re-measure the corners ``(n_min, batch_min)`` and ``(n_max, batch_min)`` of every ``WHEN``
    region of ``device`` (e.g. at the default thread count); exit status 1 if one is below 0.95."""
    bad = 0
    print("| op | dtype | n | batch | torch.linalg | routed | ratio (median) | worst block | verdict |")
    print("|---|---|---|---|---|---|---|---|---|")
    for op, table in (routing.WHEN.get(device) or {}).items():
        for dtype, regions_ in table.items():
            for lo, hi, b in regions_:
                for n in sorted({lo, hi}):
                    r = measure(op, n, b, dtype, device, blocks)
                    ok = r["worst"] >= THRESHOLD
                    bad += not ok
                    print(f"| {op} | {r['dtype']} | {n} | {b} | {r['torch_s'] * 1e6:.1f} µs | "
                          f"{r['routed_s'] * 1e6:.1f} µs | {r['ratio']:.2f} | {r['worst']:.2f} | "
                          f"{'ok' if ok else 'BELOW 0.95'} |", flush=True)
    return 1 if bad else 0


def mainjob_rows(device: str, blocks: int, only: list[str] | None = None) -> int:
    """Every row of ``python -m mpslinalg --quick`` (or those whose name contains one of ``only``): its
    ``torch.linalg`` peer call, as user code, with routing off, on with ``when="always"`` and on with
    the default table; the path the default took."""
    from mpslinalg.mainjob.workloads import workloads

    print("| main-job row | shape | torch.linalg | routed always (ratio) | default (ratio) | default path |")
    print("|---|---|---|---|---|---|")
    for w in workloads():
        if w.op not in routing.routed_ops() and w.op not in ("inv", "lu_factor"):
            continue
        if only and not any(s in w.name for s in only):
            continue
        x = w.make(torch.device(device), w.dtype, True)
        fn = functools.partial(w.peer, x)
        times: dict[str, list[float]] = {"off": [], "always": [], "faster": []}
        paths = set()
        for block in range(blocks):
            modes = list(times)
            for mode in modes[block % 3:] + modes[:block % 3]:  # rotate the order per block
                routing.disable()
                if mode != "off":
                    routing.enable(devices=(device,), when=mode)
                routing.reset_stats()
                times[mode].append(time_callable(fn, device=device, warmup=1, repeat=3, min_time=0.02,
                                                 max_time=20).median)
                if mode == "faster":
                    paths.add("mpslinalg" if any(c["ours"] for c in routing.stats().values()) else "torch")
        routing.disable()
        off = statistics.median(times["off"])
        ratio = {m: statistics.median([a / b for a, b in zip(times["off"], times[m])]) for m in ("always", "faster")}
        shape = "x".join(map(str, next(iter(x.values())).shape))
        print(f"| {w.name} | {shape} | {off * 1e3:.3f} ms | {ratio['always']:.2f} | {ratio['faster']:.2f} | "
              f"{'/'.join(sorted(paths))} |", flush=True)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--ops", nargs="*", default=None)
    p.add_argument("--dtypes", nargs="*", default=["float32", "float64"])
    p.add_argument("--sizes", nargs="*", type=int, default=None)
    p.add_argument("--batches", nargs="*", type=int, default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--overhead", action="store_true", help="only the cost of a call handed back to torch")
    p.add_argument("--verify", action="store_true", help="re-measure the corners of the WHEN regions")
    p.add_argument("--mainjob", action="store_true", help="the peer calls of python -m mpslinalg --quick's rows")
    p.add_argument("--only", nargs="*", default=None, help="--mainjob: rows whose name contains one of these")
    p.add_argument("--blocks", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    p.add_argument("--out", type=pathlib.Path, default=None)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    ops = args.ops or [o for o in routing.routed_ops() if o in
                       ("inv_ex", "det", "slogdet", "solve", "solve_ex", "lu_factor_ex", "lu", "lu_solve",
                        "solve_triangular", "qr")]
    sizes = args.sizes or ((3, 4, 9, 64) if args.quick else SIZES)
    batches = args.batches or BATCHES
    rows = []
    print(f"mpslinalg {mpslinalg.__version__}, torch {torch.__version__}, device {args.device}, "
          f"threads {torch.get_num_threads()}")
    if args.overhead:
        return overhead(args.device)
    if args.verify:
        return verify(args.device, args.blocks)
    if args.mainjob:
        return mainjob_rows(args.device, args.blocks, args.only)
    print("| op | dtype | n | batch | torch.linalg | routed | ratio (median) | worst block | default path |")
    print("|---|---|---|---|---|---|---|---|---|")
    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        for op in ops:
            for n in sizes:
                for batch in batches:
                    if batch * n * n > MAX_ELEMENTS:
                        continue
                    r = measure(op, n, batch, dtype, args.device, args.blocks)
                    rows.append(r)
                    path = "mpslinalg" if r["worst"] >= THRESHOLD and r["ratio"] >= GAIN else "torch"
                    print(f"| {op} | {dtype_name} | {n} | {batch} | {r['torch_s'] * 1e6:.1f} µs | "
                          f"{r['routed_s'] * 1e6:.1f} µs | {r['ratio']:.2f} | {r['worst']:.2f} | {path} |",
                          flush=True)
    print("\nWHEN entries (regions (n_min, n_max, batch_min)):")
    for dtype_name in args.dtypes:
        for op in ops:
            print(f"  {dtype_name} {op!r}: {regions(rows, op, dtype_name)},")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"routing-{args.device}-{'-'.join(args.dtypes)}.json"
        path.write_text(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                                    "rows": rows}, indent=1))
        print(f"wrote {path}")
    return 0 if all(math.isfinite(r["ratio"]) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
