"""Replays the batches of ``tests/svd/test_svd_triton.py::test_triton_cuda_no_host_sync`` that faulted (issue 12,
docs/evidence/svd.md "The CUDA fault of issue 12": fixed by ``svd_triton_rot.UNIFORM``) through the one-launch SVD
kernel that serves them, one synchronised launch.

    python benchmarks/probe_svd_fault_data.py --seed 1 --case 1 [--rows A:B] [--variant reload=0 ...]
    python benchmarks/probe_svd_fault_data.py --random --case 0 --seed0 0 --trials 20

``--seed K --case I``: ``torch.manual_seed(K)``, then the test's six ``torch.randn`` draws in its order
(:data:`CASES`); case ``I``'s batch (rows ``A:B`` of it) goes to ``svd_cuda.whole_kernel``'s ``svd_tall``
(U and V, full, as ``svd_ex``), then ``torch.cuda.synchronize()``. Before the fix, on the H200 (Triton
3.6), seeds 1, 13 and 14 faulted in case 1 (512x7x3, ``svd_triton_fused``) every time and seed 5 hung: halving
``--rows`` finds the matrix, ``--variant`` (``svd_triton_fused.VARIANT`` keys, ``jacobi=slots``,
``mb=1``, ``warps=2``) tries the kernel's other forms on it.

``--random``: seeded CPU batches instead (``seed0 + trial``), ``--trials`` launches in one process.

``--seeds A:B``: for every seed in ``range(A, B)`` the test's six draws through ``mpslinalg.svd_ex`` (every
kernel the test reaches, complex too), each call synchronised and checked (finite, ``info == 0``, the
LAPACK xDRVBD ratios below 50, ``S`` ordered): the stress run of the fix (``svd_triton_rot.UNIFORM``).

Prints ``ok`` lines, or ``FAULT ...`` and exits 3; a launch still running after 20 s prints every
thread's stack and exits (a hang).
"""

from __future__ import annotations

import argparse
import faulthandler
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import torch  # noqa: E402

from mpslinalg.svd import cuda as svd_cuda  # noqa: E402
from mpslinalg.svd import triton_fused as svd_triton_fused  # noqa: E402

#: the test's draws, in its order
CASES = (((4096, 3, 3), torch.float32), ((512, 7, 3), torch.float32), ((512, 8, 9), torch.float32),
         ((64, 32, 32), torch.float32), ((16, 64, 64), torch.complex64), ((64, 2, 2), torch.complex64))


def _variant(items: list[str], m: int, n: int) -> None:
    """Apply ``key=value`` switches of :mod:`mpslinalg.svd.triton_fused` (``m x n``: the case's
    order, whose launch configuration ``mb``/``warps`` override)."""
    for item in items:
        key, val = item.split("=")
        if key in svd_triton_fused.VARIANT:
            svd_triton_fused.VARIANT[key] = val == "1"
        elif key == "jacobi":
            svd_triton_fused.JACOBI = val
        elif key in ("mb", "warps"):
            mb, warps = svd_triton_fused.launch_config(m, n)
            cfg = {"mb": mb, "warps": warps, key: int(val)}
            svd_triton_fused.launch_config = lambda m, n, cfg=cfg: (cfg["mb"], cfg["warps"])
        else:
            raise SystemExit(f"--variant: unknown key {key!r}")


def _launch(A: torch.Tensor, what: str) -> bool:
    """One synchronised launch of the whole-SVD kernel on ``A``; prints the outcome."""
    A = A.cuda() if torch.cuda.is_available() else A
    mod = svd_cuda.whole_kernel(A)
    if mod is None:
        raise SystemExit(f"{what}: no one-launch kernel serves {tuple(A.shape)} {A.dtype} here")
    faulthandler.dump_traceback_later(20, exit=True)
    try:
        U, S, V, info = mod.svd_tall(A, True, True, 30)
        if A.is_cuda:
            torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the fault is what this probe looks for
        print(f"FAULT {what} ({mod.__name__}): {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)
        return False
    faulthandler.cancel_dump_traceback_later()
    n = A.shape[-1]
    Ad = A.to(torch.complex128 if A.is_complex() else torch.float64)
    res = (U[..., :n].to(Ad.dtype) * S[:, None, :].double() @ V.mH.to(Ad.dtype) - Ad).abs().amax().item()
    print(f"ok {what} ({mod.__name__}): info max {int(info.max())}, max |A - U S Vh| {res:.2e}", flush=True)
    return True


def _seed_sweep(lo: int, hi: int) -> int:
    """The test's draws for seeds ``lo..hi-1`` through ``mpslinalg.svd_ex``, synchronised, checked."""
    import mpslinalg as LA
    from reference.metrics import svd_ratios

    worst = 0.0
    for seed in range(lo, hi):
        torch.manual_seed(seed)
        dev = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a dry run of the checks
        draws = [torch.randn(s, dtype=d, device=dev) for s, d in CASES]
        for case, A in enumerate(draws):
            faulthandler.dump_traceback_later(20, exit=True)
            try:
                U, S, Vh, info = LA.svd_ex(A)
                if A.is_cuda:
                    torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - the fault is what this probe looks for
                print(f"FAULT seed {seed} case {case}: {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)
                return 3
            faulthandler.cancel_dump_traceback_later()
            r = svd_ratios(A.cpu(), U.cpu(), S.cpu(), Vh.cpu())
            ratio = max(float(r.recon.max()), float(r.u_orth.max()), float(r.v_orth.max()), float(r.order.max()))
            worst = max(worst, ratio)
            if int(info.count_nonzero()) or not torch.isfinite(S).all() or float(ratio) >= 50:
                bad = int(info.count_nonzero())
                print(f"WRONG seed {seed} case {case}: info nonzero in {bad}, ratio {float(ratio):.1f}", flush=True)
                return 4
    print(f"ok seeds {lo}..{hi - 1}: {6 * (hi - lo)} calls, worst ratio {worst:.2f}", flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", type=int, default=1, help="index into CASES")
    ap.add_argument("--seed", type=int, default=1, help="torch.manual_seed before the test's draws")
    ap.add_argument("--rows", default=":", help="A:B, a slice of the batch")
    ap.add_argument("--variant", nargs="*", default=[], help="svd_triton_fused switches, key=value")
    ap.add_argument("--random", action="store_true", help="seeded CPU batches instead (--seed0, --trials)")
    ap.add_argument("--seed0", type=int, default=0)
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--seeds", default="", help="A:B, the seed sweep through mpslinalg.svd_ex")
    args = ap.parse_args()
    if args.seeds:
        lo, hi = (int(v) for v in args.seeds.split(":"))
        return _seed_sweep(lo, hi)
    shape, dtype = CASES[args.case]
    _variant(args.variant, *sorted(shape[-2:], reverse=True))
    if args.random:
        for k in range(args.trials):
            g = torch.Generator().manual_seed(args.seed0 + k)
            if not _launch(torch.randn(shape, dtype=dtype, generator=g), f"random seed {args.seed0 + k}"):
                return 3
        return 0
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a dry run under TRITON_INTERPRET=1
    torch.manual_seed(args.seed)
    draws = [torch.randn(s, dtype=d, device=dev) for s, d in CASES]
    a, _, b = args.rows.partition(":")
    A = draws[args.case][int(a) if a else None:int(b) if b else None]
    return 0 if _launch(A, f"seed {args.seed} case {args.case} rows {args.rows}") else 3


if __name__ == "__main__":
    sys.exit(main())
