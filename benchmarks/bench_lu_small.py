"""Benchmark: the batched small LU kernels (``lu_small``, ``lu_small_solve``) on the H200 through the
emulator's cuda target, against ``torch.linalg`` in the same run (issue 16).

    python -m mpslinalg.emulator build --target cuda --out .cubins                   # here (clang)
    MPSLINALG_CUBIN_DIR=$PWD/.cubins python benchmarks/bench_lu_small.py --out DIR     # on the GPU

Issue 16's targets: ``lu_small`` >= 1.5x ``torch.linalg.lu_factor_ex`` at 65536 x 32x32 (float32
and complex64); the fused factor + solve at 2048 x 9x9 (RANSAC, one right-hand side) >= 2x
``torch.linalg.solve``.

Each kernel row is the replay of a CUDA graph of ``REPS`` launches through the library's own call
site (``mpslinalg.lu.kernels._MetalKernels``), timed with CUDA events, median of ``TRIALS``
replays, divided by ``REPS``: the kernel's own GPU time. Peers are timed twice: eager (as a user
calls them, host overhead included) and, where the call captures, as a graph like ours.
``lu_small`` factors its buffer in place, launch after launch (the kernel has no data-dependent
branches besides the zero-pivot and tiny-pivot rules, which random data never takes).
Variants, to measure the design rather than only the code:

* ``staged`` / ``direct``: loads and stores through the per-simdgroup tile (coalesced) or one row
  per lane straight from device memory (``TUNING.small_stage``);
* ``W=32`` for a 9x9 matrix: one matrix per simdgroup instead of two (``W=16``), i.e. what several
  matrices per simdgroup buys;
* ``2 rows``: float32 32x32 with two rows per lane, two matrices per simdgroup
  (``TUNING.small_rows = 2``: the per-column pivot search and publication shared by two matrices);
* ``fma``: 32x32 staged with fused multiply-adds in the trailing update (``TUNING.small_fma``);
* ``rolled``: 32x32 staged with the column loop rolled (``TUNING.small_roll``; ~1/5 of the code);
  ``free``: its finished values through the tile, the register window updated unguarded;
  ``look``: its next pivot search started before the rest of each step's update
  ``rcp1``: its reciprocal of the pivot with one division (complex64)
  (``TUNING.small_roll_variant`` bits 1, 2, 4; the defaults: float32 rolled, free; complex64 rolled,
  free, rcp1, fma);
* ``public solve_ex``: the whole library call on the emulator backend, eager (host overhead of the
  front door, the binding layer and the ctypes launch included).

The ``bw`` column is bytes moved (read A once, write LU/X, pivots, info) over the copy bandwidth
measured in the same run (a graph of device-to-device copies of 256 MiB). Before timing, every
kernel's output is checked on the GPU: LAPACK's xGET01 / xGET02 ratios (pass mark 30) and the
number of matrices whose pivots differ from torch's (near-ties exist at large random batches):
a fast wrong kernel is not a result.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg as LA  # noqa: E402
from mpslinalg.lu import kernels as K  # noqa: E402

REPS = 20  # launches per graph replay
TRIALS = 15  # timed replays (median)
DEV = "cuda"  # --device mps: the Metal kernels on a Mac (eager); cpu: a smoke run on the emulator


def _sync() -> None:
    if DEV == "mps":
        torch.mps.synchronize()


def _events_ms(fn, reps: int) -> float:
    """Median over TRIALS of the time of ``reps`` calls of ``fn`` (CUDA events), per call."""
    fn()
    if DEV != "cuda":  # no CUDA events: wall time of synchronised runs
        times = []
        for _ in range(TRIALS if DEV == "mps" else 1):
            _sync()
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            _sync()
            times.append((time.perf_counter() - t0) * 1e3 / reps)
        return statistics.median(times)
    torch.cuda.synchronize()
    times = []
    for _ in range(TRIALS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / reps)
    return statistics.median(times)


def graph_ms(fn) -> float | None:
    """Per-launch time of ``fn`` replayed from a CUDA graph of REPS launches (None: not capturable;
    off CUDA: the eager time)."""
    if DEV != "cuda":
        return eager_ms(fn)
    try:
        fn()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(REPS):
                fn()
    except Exception as exc:  # noqa: BLE001 - a peer that does not capture is reported as such
        print(f"  (not capturable: {type(exc).__name__}: {str(exc)[:100]})", file=sys.stderr)
        torch.cuda.synchronize()
        return None
    return _events_ms(g.replay, 1) / REPS


def eager_ms(fn) -> float:
    return _events_ms(fn, REPS)


def copy_bandwidth() -> float:
    """Bytes per second of a device-to-device copy (read + write), graph replay."""
    src = torch.empty(64 * 2**20 if DEV == "cuda" else 2**20, dtype=torch.float32, device=DEV).uniform_()
    dst = torch.empty_like(src)
    return 2 * src.nbytes / (graph_ms(lambda: dst.copy_(src)) * 1e-3)


def _randn(shape, dtype, seed):
    g = torch.Generator(device=DEV).manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g, device=DEV)


def _wide(x):
    return x.to(torch.complex128 if x.is_complex() else torch.float64)


def _lu_ratio(A, LU, piv) -> float:
    """Largest LAPACK xGET01 ratio ||P^T A - L U||_1 / (n ||A||_1 u) of the batch (u = 2^-24), in
    float64 on the device: pass mark 30. (Comparing factors with torch's entrywise is no check at
    large batches: a near-tie among 65536 random matrices picks another pivot, rightly.)"""
    P, L, U = torch.lu_unpack(LU, piv)
    A64 = _wide(A)
    R = P.mT.to(A64.dtype) @ A64 - _wide(L) @ _wide(U)
    n = A.shape[-1]
    return float((R.abs().sum(-2).amax(-1) / (n * A64.abs().sum(-2).amax(-1) * 2.0**-24)).max())


def _solve_ratio(A, X, B) -> float:
    """Largest LAPACK xGET02 ratio ||B - A X||_1 / (||A||_1 ||X||_1 u) of the batch: pass mark 30."""
    A64, X64 = _wide(A), _wide(X)
    R = _wide(B) - A64 @ X64
    den = A64.abs().sum(-2).amax(-1) * X64.abs().sum(-2).amax(-1) * 2.0**-24
    return float((R.abs().sum(-2).amax(-1) / den).max())


def _kern(dtype, stage):
    K.TUNING.small_stage = stage
    return K._MetalKernels(torch.device(DEV), dtype)


def _lu_small_launch(kern, LU, piv, info, W, stage, rows=1, opt=0):
    """lu_small at an explicit width, load variant, rows per lane and OPT (1 fma, 2 rolled, 3 both;
    the library picks W from the shape, the rest from TUNING)."""
    B, M, N = LU.shape
    k = kern._kernel("lu_small", W, stage, *((rows,) if rows > 1 or opt else ()), *((opt,) if opt else ()))
    grid = K._small_grid(B, W // rows)
    return lambda: k(LU, piv, info, M, N, B, **grid)


def _opt_name(opt: int) -> str:
    """The variant column's words for lu_small's OPT bits (1 fma, 2 rolled, 4 free, 8 look, 16 rcp1)."""
    words = [w for bit, w in ((2, "rolled"), (4, "free"), (8, "look"), (16, "rcp1"), (1, "fma")) if opt & bit]
    return "".join(", " + w for w in words)


def _solve_launch(kern, A, B, X, info, W, stage):
    nb, n, k = B.shape
    fn = kern._kernel("lu_small_solve", W, 1 if k == 1 else K.SMALL_SOLVE_MAX_RHS, stage)
    grid = K._small_grid(nb, W)
    return lambda: fn(A, B, X, info, n, k, nb, **grid)


def _name(tag, batch, n, W, stage, rpl, opt) -> tuple[str, str]:
    """A lu_small row's case and variant columns."""
    return (f"lu_small {tag} {batch}x{n}x{n}", f"W={W} {'staged' if stage else 'direct'}"
            + (f", {rpl} rows" if rpl > 1 else "") + _opt_name(opt))


def lu_rows(bw, rows, scale, quick=False, only=None):
    for dtype, batch, n in ((torch.float32, 65536 // scale, 32), (torch.complex64, 65536 // scale, 32),
                            (torch.complex64, 4096 // scale, 32), (torch.float32, 2048 // scale, 9)):
        if quick and n != 32:
            continue
        tag = "c64" if dtype.is_complex else "f32"
        widths = [K._small_lanes(n)] + ([32] if K._small_lanes(n) != 32 else [])
        variants = [(W, stage, 1, 0) for W in widths for stage in ((1,) if quick else (1, 0))]
        if n == 32:
            variants += [(32, 1, 1, opt) for opt in (1, 2, 3)]
            fma = 1 if dtype.is_complex else 0  # each dtype's default arithmetic
            variants += [(32, 1, 1, 2 + fma + v) for v in (4, 8, 12)]
            if dtype.is_complex:  # the one-division reciprocal (complex only): alone, with FREE (+ LOOK)
                variants += [(32, 1, 1, 19), (32, 1, 1, 23), (32, 1, 1, 31)]
        if dtype == torch.float32 and n > 16 and not quick:
            variants += [(32, stage, 2, 0) for stage in (1, 0)]
        if only is not None:
            variants = [v for v in variants if re.search(only, " | ".join(_name(tag, batch, n, *v)))]
        if not variants:
            continue
        A = _randn((batch, n, n), dtype, n)
        ref_piv = torch.linalg.lu_factor_ex(A).pivots
        peer_e = eager_ms(lambda A=A: torch.linalg.lu_factor_ex(A))
        peer_g = graph_ms(lambda A=A: torch.linalg.lu_factor_ex(A))
        nbytes = 2 * A.nbytes + batch * n * 4 + batch * 4
        for W, stage, rpl, opt in variants:
            kern = _kern(dtype, stage)
            LU = A.clone()
            piv = torch.empty(batch, n, dtype=torch.int32, device=DEV)
            info = torch.empty(batch, dtype=torch.int32, device=DEV)
            launch = _lu_small_launch(kern, LU, piv, info, W, stage, rpl, opt)
            launch()  # check once, on the original A
            differ = int((piv != ref_piv).any(-1).sum())
            ok = f"xGET01 max {_lu_ratio(A, LU, piv):.2f}; pivots differ from torch in {differ} of {batch}"
            t = graph_ms(launch)
            case, variant = _name(tag, batch, n, W, stage, rpl, opt)
            rows.append(dict(case=case, variant=variant, ours_ms=t,
                             peer="torch.linalg.lu_factor_ex", peer_eager_ms=peer_e,
                             peer_graph_ms=peer_g, bw=nbytes / (t * 1e-3) / bw, check=ok))
            print(_fmt(rows[-1]), flush=True)


def solve_rows(bw, rows, scale, quick=False):
    for dtype, batch, n, k in ((torch.float32, 2048 // scale, 9, 1), (torch.complex64, 2048 // scale, 9, 1),
                               (torch.float32, 65536 // scale, 9, 1)):
        if quick and (dtype != torch.float32 or batch != 2048 // scale):
            continue
        tag = "c64" if dtype.is_complex else "f32"
        A = _randn((batch, n, n), dtype, 10 + n)
        B = _randn((batch, n, k), dtype, 20 + n)
        peer_e = eager_ms(lambda A=A, B=B: torch.linalg.solve(A, B))
        peer_ex_g = graph_ms(lambda A=A, B=B: torch.linalg.solve_ex(A, B))
        nbytes = A.nbytes + 2 * B.nbytes + batch * 4
        for W in (K._small_lanes(n),) if quick else (K._small_lanes(n), 32):
            for stage in (1, 0):
                kern = _kern(dtype, stage)
                X = torch.empty_like(B)
                info = torch.empty(batch, dtype=torch.int32, device=DEV)
                launch = _solve_launch(kern, A, B, X, info, W, stage)
                launch()
                ok = f"xGET02 max {_solve_ratio(A, X, B):.2f}, info max {int(info.max())}"
                t = graph_ms(launch)
                rows.append(dict(case=f"lu_small_solve {tag} {batch}x{n}x{n} k={k}",
                                 variant=f"W={W} {'staged' if stage else 'direct'}", ours_ms=t,
                                 peer="torch.linalg.solve (graph: solve_ex)", peer_eager_ms=peer_e,
                                 peer_graph_ms=peer_ex_g, bw=nbytes / (t * 1e-3) / bw, check=ok))
                print(_fmt(rows[-1]), flush=True)
        K.TUNING.small_stage = 1
        with LA.use_backend("emulator"):
            t = eager_ms(lambda A=A, B=B: LA.solve_ex(A, B))
        rows.append(dict(case=f"lu_small_solve {tag} {batch}x{n}x{n} k={k}", variant="public solve_ex, eager",
                         ours_ms=t, peer="torch.linalg.solve (graph: solve_ex)", peer_eager_ms=peer_e,
                         peer_graph_ms=peer_ex_g, bw=None, check=""))
        print(_fmt(rows[-1]), flush=True)


def _fmt(r) -> str:
    def ms(x):
        return "n/a" if x is None else f"{x * 1e3:.1f}"

    best_peer = min(x for x in (r["peer_eager_ms"], r["peer_graph_ms"]) if x is not None)
    bw = "" if r["bw"] is None else f"{100 * r['bw']:.0f}%"
    return (f"| {r['case']} | {r['variant']} | {ms(r['ours_ms'])} | {ms(r['peer_eager_ms'])} | "
            f"{ms(r['peer_graph_ms'])} | {best_peer / r['ours_ms']:.2f}x | {r['peer_eager_ms'] / r['ours_ms']:.2f}x | "
            f"{bw} | {r['check']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=pathlib.Path, default=None, help="folder for bench_lu_small.json")
    ap.add_argument("--quick", action="store_true",
                    help="only the 32x32 rows (staged, and fma) and the RANSAC float32 2048x9x9 solve")
    ap.add_argument("--only", default=None, metavar="REGEX",
                    help="only the lu_small rows whose 'case | variant' matches (e.g. for ncu); the solve rows "
                         "only if 'lu_small_solve' matches")
    ap.add_argument("--device", default="cuda",
                    help="cuda (the H200 measurement), mps (a Mac: the Metal kernels, eager) or cpu (smoke run)")
    args = ap.parse_args()
    global DEV
    DEV = args.device
    if DEV == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_lu_small: needs a CUDA device (the emulator's cuda target)")
    name = {"cuda": torch.cuda.get_device_name() if DEV == "cuda" else "", "mps": "mps (Metal, eager timing)"}.get(
        DEV, "cpu (emulator's cpu target, smoke run)")
    print(f"device: {name}, torch {torch.__version__}")
    bw = copy_bandwidth()
    print(f"copy bandwidth (graph replay): {bw / 1e9:.0f} GB/s\n")
    print("| case | variant | ours us (graph) | peer us eager | peer us graph | vs best peer | vs peer eager "
          "| bw | check |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows: list[dict] = []
    scale = 256 if DEV == "cpu" else 1
    lu_rows(bw, rows, scale, args.quick, args.only)
    if args.only is None or re.search(args.only, "lu_small_solve"):
        solve_rows(bw, rows, scale, args.quick)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_lu_small.json").write_text(json.dumps(dict(copy_bandwidth=bw, rows=rows), indent=1))


if __name__ == "__main__":
    main()
