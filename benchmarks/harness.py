"""The benchmark runner every family's ``benchmarks/bench_<family>.py`` uses (DESIGN §10).

A benchmark file builds a list of :class:`Case` (our op and its peers as zero-argument callables on
prepared inputs) and hands it to :func:`cli`, which parses the common options, times every case and
writes a markdown table and a JSON file::

    # benchmarks/bench_myfamily.py
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root
    import torch

    import mpslinalg
    from benchmarks.harness import Case, cli

    def cases(device: torch.device, quick: bool) -> list[Case]:
        A = torch.randn(512 if quick else 4096, 64, 64, device=device)
        return [Case(name="op 4096x64x64", workload="what users run", device=device,
                     dtype=torch.float32, shape=tuple(A.shape),
                     ours=lambda: mpslinalg.op(A), peer={"torch.linalg": lambda: torch.linalg.op(A)},
                     bytes_moved=2 * A.nbytes)]

    if __name__ == "__main__":
        raise SystemExit(cli(cases, family="myfamily"))

and is run as ``python benchmarks/bench_myfamily.py --device cuda --out results/ [--quick]``.

What the runner does for each case
----------------------------------
* runs ours and each peer once untimed (a peer that raises, e.g. an op missing on ``mps``, is
  reported as unavailable; ours raising marks the case failed and the exit status 1);
* on CUDA, with ``Case.sync_check``, calls ours once under
  ``torch.cuda.set_sync_debug_mode("error")`` and records whether it synchronised with the host;
* times ours, every peer and — when the case gives ``bytes_moved`` — a copy of the same number of
  bytes (``torch.empty_like(x).copy_(x)``, read + write) **in the same run**, interleaved round by
  round (:func:`mpslinalg.mainjob.timing.time_interleaved`: CUDA events on cuda, MPS events on mps,
  ``perf_counter`` on cpu; medians of samples after warm-up);
* ratios ``peer / ours`` are the median of the per-round ratios with a 95% interval and a verdict
  (faster / slower / inconclusive: :func:`mpslinalg.mainjob.timing.compare`);
* roofline: the time the case could take at the attainable rate — ``bytes_moved`` at the copy
  bandwidth measured in this run, ``flops`` at the float32 GEMM rate measured in this run (once per
  device) — divided by our time; 1.0 means at the roofline. Nominal peaks of known devices
  (:data:`KNOWN_PEAKS`) are reported beside it in the JSON.

Ratios are ``peer time / our time``: above 1 we are faster. On a shared CPU only ratios from one
run mean anything; GPU numbers come from the lent H200 (DESIGN §10).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from mpslinalg.mainjob.report import best_device, device_name, environment, fmt_ms, format_table, short_error
from mpslinalg.mainjob.timing import VERDICT_MARGIN, Timing, compare, resolve_device, synchronize, time_interleaved

__all__ = ["KNOWN_PEAKS", "Case", "cli", "nominal_peaks", "run_cases"]

#: Nominal peaks by device-name substring (first match wins, so longer names come first):
#: (memory bandwidth in bytes/s, float32 non-tensor-core FLOP/s). Vendor figures for the top
#: configuration of each chip; the figure the runner divides by is the one *measured* in the run.
KNOWN_PEAKS: dict[str, tuple[float, float]] = {
    "H200 NVL": (4.8e12, 60e12),
    "H200": (4.8e12, 67e12),
    "H100 PCIe": (2.0e12, 51e12),
    "H100": (3.35e12, 67e12),
    "A100-SXM4-80GB": (2.039e12, 19.5e12),
    "A100": (1.555e12, 19.5e12),
    "L40S": (0.864e12, 91.6e12),
    "M1 Ultra": (800e9, 21e12),
    "M1 Max": (400e9, 10.4e12),
    "M1 Pro": (200e9, 5.2e12),
    "M1": (68.25e9, 2.6e12),
    "M2 Ultra": (800e9, 27.2e12),
    "M2 Max": (400e9, 13.6e12),
    "M2 Pro": (200e9, 6.8e12),
    "M2": (100e9, 3.6e12),
    "M3 Ultra": (819e9, 28.2e12),
    "M3 Max": (400e9, 16.4e12),
    "M3 Pro": (150e9, 7.4e12),
    "M3": (100e9, 4.1e12),
    "M4 Max": (546e9, 18.4e12),
    "M4 Pro": (273e9, 9.2e12),
    "M4": (120e9, 4.3e12),
}


def nominal_peaks(name: str) -> tuple[float, float] | None:
    """``(bytes/s, float32 FLOP/s)`` for a device name such as ``"NVIDIA H200"``, or None."""
    for key, peaks in KNOWN_PEAKS.items():
        if key in name:
            return peaks
    return None


@dataclass
class Case:
    """One benchmarked workload.

    Attributes
    ----------
    name : str
        Row label, e.g. ``"solve_triangular 4096x64x64 64 RHS"``.
    workload : str
        Who runs this and why (DESIGN §1), e.g. ``"DeltaNet chunk UT transform"``.
    device : torch.device or str
        Where the inputs live.
    dtype : torch.dtype
    shape : tuple or str
        Input shape(s), for the table.
    ours : callable
        Zero-argument call of our op on prepared inputs.
    peer : callable or mapping of str to callable
        The peer(s) on the same inputs, e.g. ``{"torch.linalg": ..., "scipy": ...}``; a bare callable
        is named ``"peer"``.
    bytes_moved : int, optional
        Bytes the op must read + write at least (for the bandwidth roofline).
    flops : float, optional
        Real floating-point operations (count a complex multiply-add as 8).
    sync_check : bool
        On CUDA, check that ``ours`` never synchronises with the host.
    count_launches : bool
        On CUDA, count the GPU kernels (and memcpy/memset operations) one call of ``ours``
        launches, with ``torch.profiler`` (DESIGN §10: launches per call).
    ours_name : str
        Column label for ours.
    """

    name: str
    workload: str
    device: torch.device | str
    dtype: torch.dtype
    shape: tuple | str
    ours: Callable[[], Any]
    peer: Callable[[], Any] | Mapping[str, Callable[[], Any]] = field(default_factory=dict)
    bytes_moved: int | None = None
    flops: float | None = None
    sync_check: bool = True
    count_launches: bool = True
    ours_name: str = "mpslinalg"

    def peers(self) -> dict[str, Callable[[], Any]]:
        """The peers as a name -> callable dict."""
        if callable(self.peer):
            return {"peer": self.peer}
        return dict(self.peer)


def _shape_str(shape: tuple | str) -> str:
    if isinstance(shape, str):
        return shape
    return "x".join(str(s) for s in shape)


def _gemm_rate(device: torch.device, quick: bool, settings: dict) -> dict:
    """The float32 matmul rate this device reaches now (the attainable FLOP roofline)."""
    n = (1024 if quick else 4096) if device.type != "cpu" else (256 if quick else 1024)
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    t = time_interleaved({"gemm": lambda: a @ b}, device=device, **settings)["gemm"]
    return {"n": n, "median_ms": t.median_ms, "flops_per_s": 2.0 * n**3 / t.median}


def _copy_fn(nbytes: int, device: torch.device) -> Callable[[], Any]:
    """``empty_like(x).copy_(x)`` over float32 ``x`` with ``nbytes/2`` bytes (read + write = nbytes)."""
    x = torch.ones(max(1, nbytes // 8), dtype=torch.float32, device=device)
    return lambda: torch.empty_like(x).copy_(x)


def _sync_free(fn: Callable[[], Any], device: torch.device) -> bool | str:
    """Whether ``fn`` runs without a host sync (CUDA's sync debug mode), or the error text."""
    prev = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn()
        return True
    except RuntimeError as exc:
        if "synchroniz" in str(exc).lower():
            return False
        return short_error(exc)
    finally:
        torch.cuda.set_sync_debug_mode(prev)
        synchronize(device)


def print_host_sync_check(checks: Mapping[str, Callable[[], Any]], *, warmup: bool = False) -> bool:
    """Print ``host-sync check`` verdicts: each callable once under CUDA's sync debug mode.

    ``PASS`` when ``checks[name]()`` runs under ``torch.cuda.set_sync_debug_mode("error")``
    without raising, else ``FAIL (<first line of the error>)``. With ``warmup``, each callable runs
    once before its check (first-call compilation may legitimately synchronise). CUDA only.
    Returns True when every check passed.
    """
    print("host-sync check (torch.cuda.set_sync_debug_mode('error') around our op):")
    ok = True
    for name, fn in checks.items():
        if warmup:
            fn()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            fn()
            verdict = "PASS"
        except RuntimeError as exc:
            verdict = f"FAIL ({str(exc).splitlines()[0][:120]})"
            ok = False
        finally:
            torch.cuda.set_sync_debug_mode(0)
            torch.cuda.synchronize()
        print(f"  {name}: {verdict}")
    return ok


def _launches(fn: Callable[[], Any], device: torch.device) -> dict | str:
    """GPU operations one call of ``fn`` enqueues: ``{"kernels", "memcpy", "memset"}``.

    Counted from the CUDA activity ``torch.profiler`` records (kernels launched through the driver
    API, such as the emulator's cuda target, included); the error text if profiling fails.
    """
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    try:
        synchronize(device)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            synchronize(device)
        counts = {"kernels": 0, "memcpy": 0, "memset": 0}
        for ev in prof.events():
            if ev.device_type != DeviceType.CUDA:
                continue
            name = ev.name.lower()
            kind = next((k for k in ("memcpy", "memset") if name.startswith(k)), "kernels")
            counts[kind] += 1
        return counts
    except Exception as exc:  # noqa: BLE001 - a profiler problem must not sink the benchmark
        return short_error(exc)


def run_case(case: Case, *, settings: dict, gemm: dict | None = None,
             peaks: tuple[float | None, float | None] | None = None) -> dict:
    """Time one case (see the module docstring); returns its JSON record.

    ``peaks`` = (bytes/s, FLOP/s) overrides the nominal peaks looked up from the device name.
    """
    dev = resolve_device(case.device)
    rec: dict = {"name": case.name, "workload": case.workload, "device": str(dev),
                 "dtype": str(case.dtype).replace("torch.", ""), "shape": _shape_str(case.shape),
                 "bytes_moved": case.bytes_moved, "flops": case.flops, "peers": {}}
    try:
        case.ours()
        synchronize(dev)
    except Exception as exc:  # noqa: BLE001 - report and go on with the other cases
        rec["error"] = short_error(exc)
        rec["traceback"] = traceback.format_exc()
        return rec
    fns: dict[str, Callable[[], Any]] = {case.ours_name: case.ours}
    for pname, pfn in case.peers().items():
        if pname in (case.ours_name, "copy"):
            raise ValueError(f"case {case.name!r}: peer name {pname!r} is reserved")
        try:
            pfn()
            synchronize(dev)
            fns[pname] = pfn
        except Exception as exc:  # noqa: BLE001 - a peer lacking the op is a finding, not a failure
            rec["peers"][pname] = {"error": short_error(exc)}
    if dev.type == "cuda" and case.sync_check:
        rec["host_sync_free"] = _sync_free(case.ours, dev)
    if dev.type == "cuda" and case.count_launches:
        rec["launches"] = _launches(case.ours, dev)
    if case.bytes_moved:
        fns["copy"] = _copy_fn(int(case.bytes_moved), dev)
    try:
        times: dict[str, Timing] = time_interleaved(fns, device=dev, **settings)
    except Exception as exc:  # noqa: BLE001 - e.g. ours or a peer fails on a repeated call
        rec["error"] = f"while timing: {short_error(exc)}"
        rec["traceback"] = traceback.format_exc()
        return rec
    ours_t = times[case.ours_name]
    rec["ours"] = ours_t.to_dict()
    for pname, t in times.items():
        if pname in (case.ours_name, "copy"):
            continue
        c = compare(ours_t, t)  # paired per-round ratios: an interval and a verdict, as the main job
        rec["peers"][pname] = {**t.to_dict(), "ratio": c.ratio, "ratio_low": c.low,
                               "ratio_high": c.to_dict()["high"], "verdict": c.verdict}

    bounds = []  # seconds the case needs at the attainable rates measured in this run
    nominal = peaks if peaks is not None else nominal_peaks(device_name(dev))
    roof: dict = {}
    if case.bytes_moved:
        copy_t = times["copy"]
        roof["copy_ms"] = copy_t.median_ms
        roof["copy_GBps"] = case.bytes_moved / copy_t.median / 1e9
        roof["achieved_GBps"] = case.bytes_moved / ours_t.median / 1e9
        bounds.append(copy_t.median)
        if nominal and nominal[0]:
            roof["fraction_of_nominal_bandwidth"] = case.bytes_moved / ours_t.median / nominal[0]
    if case.flops:
        roof["achieved_GFLOPs"] = case.flops / ours_t.median / 1e9
        if gemm:
            roof["gemm_GFLOPs"] = gemm["flops_per_s"] / 1e9
            bounds.append(case.flops / gemm["flops_per_s"])
        if nominal and nominal[1]:
            roof["fraction_of_nominal_fp32"] = case.flops / ours_t.median / nominal[1]
    if bounds:
        roof["fraction"] = max(bounds) / ours_t.median
        roof["bound"] = "bandwidth" if (case.bytes_moved and max(bounds) == bounds[0]) else "flops"
    if roof:
        rec["roofline"] = roof
    return rec


def _md(records: Sequence[dict]) -> str:
    headers = ["workload", "device", "dtype", "shape", "ours ms", "spread", "peer", "peer ms",
               "peer/ours", "roofline"]
    rows = []
    for r in records:
        if "error" in r:
            rows.append([r["name"], r["device"], r["dtype"], r["shape"], f"ERROR {r['error']}", "", "", "",
                         "", ""])
            continue
        ours = r["ours"]
        spread = f"±{100 * ours['iqr_ms'] / ours['median_ms']:.0f}%" if ours["median_ms"] else "-"
        roof = r.get("roofline", {})
        rf = f"{100 * roof['fraction']:.0f}% {roof['bound']}" if "fraction" in roof else "-"
        if r.get("host_sync_free") is False:
            rf += " (host sync!)"
        peers = list(r["peers"].items()) or [("-", None)]
        for pname, p in peers:
            if p is None:
                pm, ratio = "-", "-"
            elif "error" in p:
                pm, ratio = "n/a", "-"
            else:
                pm, ratio = fmt_ms(p["median_ms"]), f"{p['ratio']:.2f}x {p['verdict']}"
            rows.append([r["name"], r["device"], r["dtype"], r["shape"], fmt_ms(ours["median_ms"]), spread,
                         pname, pm, ratio, rf])
    return format_table(headers, rows, align=["l", "l", "l", "l", "r", "r", "l", "r", "r", "r"])


def run_cases(
    cases: Sequence[Case],
    *,
    out_json: str | Path | None = None,
    out_md: str | Path | None = None,
    warmup: int = 3,
    repeat: int = 10,
    min_time: float = 0.1,
    max_time: float = 20.0,
    quick: bool = False,
    family: str = "",
    peaks: tuple[float | None, float | None] | None = None,
    stream=None,
) -> dict:
    """Time ``cases`` (ours and peers interleaved), print the markdown table, write JSON/markdown.

    Parameters
    ----------
    cases : sequence of Case
    out_json, out_md : path, optional
        Where to write the JSON record and the markdown table.
    warmup, repeat, min_time, max_time
        Passed to :func:`mpslinalg.mainjob.timing.time_interleaved` for each case.
    quick : bool
        Recorded in the JSON (and sizes the GEMM reference).
    family : str
        Recorded in the JSON.
    peaks : (float or None, float or None), optional
        Nominal (bytes/s, float32 FLOP/s) to report fractions against, instead of the
        :data:`KNOWN_PEAKS` entry for the device name (None: no such fraction).
    stream : file, optional
        Where the table is printed (default stdout).

    Returns
    -------
    dict
        The JSON record: ``environment``, ``settings``, ``references``, ``cases`` and ``ok`` (every
        case ran ours without error).
    """
    stream = stream if stream is not None else sys.stdout
    settings = {"warmup": warmup, "repeat": repeat, "min_time": min_time, "max_time": max_time}
    gemm: dict[str, dict] = {}
    records = []
    for i, case in enumerate(cases, 1):
        dev = resolve_device(case.device)
        print(f"[{i}/{len(cases)}] {case.name} on {dev}", file=sys.stderr, flush=True)
        if case.flops and str(dev) not in gemm:
            gemm[str(dev)] = _gemm_rate(dev, quick, settings)
        records.append(run_case(case, settings=settings, gemm=gemm.get(str(dev)), peaks=peaks))
    devices = sorted({r["device"] for r in records})
    result = {
        "family": family,
        "quick": quick,
        "environment": environment(),
        "device_names": {d: device_name(d) for d in devices},
        "nominal_peaks": {d: peaks or nominal_peaks(device_name(d)) for d in devices},
        "settings": settings,
        "references": {"gemm_float32": gemm},
        "cases": records,
        "ok": all("error" not in r for r in records),
    }
    table = _md(records)
    print(table, file=stream)
    print("\npeer/ours > 1: ours is faster (median of the per-round ratios, same run; faster/slower only "
          f"when its 95% interval lies beyond {VERDICT_MARGIN:g}x, else inconclusive). roofline: time at the "
          "copy bandwidth / GEMM rate measured in this run, over our time.", file=stream)
    for r in records:
        if "error" in r:
            print(f"\n{r['name']} raised:\n{r['traceback']}", file=sys.stderr)
    if out_json:
        Path(out_json).parent.mkdir(parents=True, exist_ok=True)
        Path(out_json).write_text(json.dumps(result, indent=2, default=str))
    if out_md:
        Path(out_md).parent.mkdir(parents=True, exist_ok=True)
        env = result["environment"]
        head = (f"# {family or 'benchmark'} on {', '.join(result['device_names'].values())}\n\n"
                f"torch {env['torch']}, {env['date']}{', quick sizes' if quick else ''}\n\n")
        Path(out_md).write_text(head + table + "\n")
    return result


def cli(
    make_cases: Callable[[torch.device, bool], Sequence[Case]],
    *,
    family: str,
    argv: Sequence[str] | None = None,
) -> int:
    """The command line every ``bench_<family>.py`` shares.

    ``python benchmarks/bench_<family>.py [--device auto|cpu|cuda|mps] [--out DIR] [--quick]
    [--only TEXT] [--repeat N] [--warmup N] [--min-time S] [--peak-bandwidth B/S]
    [--peak-flops FLOP/S]`` writes ``DIR/<family>_<device>.json``
    and ``.md`` (``_quick`` appended in quick mode).

    Parameters
    ----------
    make_cases : callable
        ``make_cases(device, quick) -> list[Case]``.
    family : str
        Names the output files.
    argv : sequence of str, optional
        Defaults to ``sys.argv[1:]``.

    Returns
    -------
    int
        Exit status: 0 when ours ran in every case, 1 otherwise, 2 for a bad ``--device``.
    """
    p = argparse.ArgumentParser(description=f"benchmark: {family} (ours vs peers in the same run)")
    p.add_argument("--device", default="auto", help="auto (mps > cuda > cpu), cpu, cuda, cuda:N, mps")
    p.add_argument("--out", default="results", help="output directory (default: results/)")
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    p.add_argument("--only", action="append", default=[], help="only cases whose name contains TEXT")
    p.add_argument("--repeat", type=int, default=None)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--min-time", type=float, default=None)
    p.add_argument("--peak-bandwidth", type=float, default=None, metavar="BYTES_PER_S",
                   help="nominal memory bandwidth to report fractions against (default: by device name)")
    p.add_argument("--peak-flops", type=float, default=None, metavar="FLOP_PER_S",
                   help="nominal float32 FLOP rate (default: by device name)")
    args = p.parse_args(argv)
    peaks = None
    if args.peak_bandwidth is not None or args.peak_flops is not None:
        peaks = (args.peak_bandwidth, args.peak_flops)  # None where not given
    try:
        dev = resolve_device(best_device() if args.device == "auto" else args.device)
    except (RuntimeError, ValueError) as exc:
        print(f"--device: {exc}", file=sys.stderr)
        return 2
    cases = [c for c in make_cases(dev, args.quick) if not args.only or any(s in c.name for s in args.only)]
    defaults = (1, 5, 0.02) if args.quick else (3, 10, 0.1)
    warmup = defaults[0] if args.warmup is None else args.warmup
    repeat = defaults[1] if args.repeat is None else args.repeat
    min_time = defaults[2] if args.min_time is None else args.min_time
    stem = f"{family}_{dev.type}" + ("_quick" if args.quick else "")
    out = Path(args.out)
    result = run_cases(cases, out_json=out / f"{stem}.json", out_md=out / f"{stem}.md", warmup=warmup,
                       repeat=repeat, min_time=min_time, quick=args.quick, family=family, peaks=peaks)
    print(f"\nwrote {out / (stem + '.json')} and {out / (stem + '.md')}", file=sys.stderr)
    return 0 if result["ok"] else 1
