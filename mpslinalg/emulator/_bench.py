"""``python -m mpslinalg.emulator._bench``: the CPU target's environment and speed figures.

Prints the compiler found (or how to install one) and the cache directory, then measures: cold
compile of one kernel file, cached compile (a fresh in-process memo, served from the disk cache),
the 16x16 LU test kernel (100 matrices x 256 threads, 65 barriers each) in each order, and the
32x32 simdgroup_matrix product test kernel (100 threadgroups of 4 simdgroups, 28 matrix
operations per simdgroup: 20 loads, 4 multiply-accumulates, 4 stores).
CPU time (``time.process_time``) is reported next to wall time: the machines are shared.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

_KERNELS = Path(__file__).resolve().parents[2] / "tests" / "emulator" / "kernels"
_LU_KERNEL = _KERNELS / "lu_small.metal"
_SGM_KERNEL = _KERNELS / "simdgroup_matrix.metal"


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the compiler runs as a child)."""
    import resource

    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _timed(fn):
    w, c = time.perf_counter(), _cpu()
    out = fn()
    return out, time.perf_counter() - w, _cpu() - c


def bench(repeats: int = 5) -> dict:
    import torch

    from . import _library, compile_shader

    if not _LU_KERNEL.exists():
        raise SystemExit(f"bench needs the test kernel {_LU_KERNEL} (run from a checkout)")
    src = _LU_KERNEL.read_text()
    res: dict = {}
    with tempfile.TemporaryDirectory() as td:
        old = os.environ.get("MPSLINALG_CACHE_DIR")
        os.environ["MPSLINALG_CACHE_DIR"] = td
        try:
            from ._toolchain import find_compiler

            find_compiler()
            # warm the runtime object (compiled once per compiler/flags, shared by all libraries)
            compile_shader(src + "\n// warm-up\n")
            _, w, c = _timed(lambda: compile_shader(src))
            res["cold_compile_s"] = {"wall": w, "cpu": c}
            _library._memo.clear()
            lib, w, c = _timed(lambda: compile_shader(src))
            res["cached_compile_s"] = {"wall": w, "cpu": c}
        finally:
            if old is None:
                os.environ.pop("MPSLINALG_CACHE_DIR", None)
            else:
                os.environ["MPSLINALG_CACHE_DIR"] = old
    B, n = 100, 16
    A0 = torch.randn(B, n, n, generator=torch.Generator().manual_seed(0))
    ipiv = torch.zeros(B, n, dtype=torch.int32)
    info = torch.zeros(B, dtype=torch.int32)
    for order in ("inorder", "reverse", "shuffle"):
        best_w = best_c = float("inf")
        for _ in range(repeats):
            A = A0.clone()
            _, w, c = _timed(
                lambda A=A, order=order: lib.lu16(
                    A, ipiv, info, n, threads=[16, 16 * B], group_size=[16, 16], order=order, seed=1
                )
            )
            best_w, best_c = min(best_w, w), min(best_c, c)
        res[f"lu16_100x256_{order}_s"] = {"wall": best_w, "cpu": best_c}
    sgm = compile_shader(_SGM_KERNEL.read_text())
    G = 100
    a, b, c0 = (torch.randn(G, 32, 32, generator=torch.Generator().manual_seed(k)) for k in range(3))
    p = [32, 32, 32, 0, 1, 32 * 32, 32 * 32, 32 * 32]
    for order in ("inorder", "shuffle"):
        best_w = best_c = float("inf")
        for _ in range(repeats):
            c = c0.clone()
            _, w, cpu = _timed(
                lambda c=c, order=order: sgm.gemm32_tg(a, b, c, p, threads=128 * G, group_size=128, order=order, seed=1)
            )
            best_w, best_c = min(best_w, w), min(best_c, cpu)
        res[f"sgm_gemm32_100x128_{order}_s"] = {"wall": best_w, "cpu": best_c}
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m mpslinalg.emulator._bench", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from ._toolchain import CompilerNotFoundError, cache_dir, compiler_info, find_compiler

    try:
        find_compiler()
    except CompilerNotFoundError as exc:
        print(exc)
        return 1
    res = {"compiler": compiler_info(), "cache_dir": str(cache_dir()), **bench()}
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        for k, v in res.items():
            if isinstance(v, dict) and all(isinstance(x, float) for x in v.values()):
                print(f"{k:32s} " + "  ".join(f"{kk} {vv * 1e3:8.1f} ms" for kk, vv in v.items()))
            else:
                print(f"{k:32s} {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
