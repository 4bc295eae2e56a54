"""Which launch of the SVD family's CUDA path faults or hangs (tests/svd/test_svd_triton.py::
test_triton_cuda_no_host_sync met "an illegal memory access" on the H200 with a cold Triton cache, and hung
with a warm one; it passes under CUDA_LAUNCH_BLOCKING=1, PYTORCH_NO_CUDA_MEMORY_CACHING=1 and
compute-sanitizer: all three serialise the host against the device).

    python benchmarks/probe_svd_cuda_fault.py [--prelude] [--sync-each] [--passes N]

``--prelude`` first runs that file's preceding CUDA test (``test_triton_cuda``'s body); then the no-sync test's
calls (its shapes, in its order) run ``--passes`` times, each call followed by a synchronisation with
``--sync-each`` (the first failing call is then the faulting one, or the one that hangs). A watchdog prints
every thread's Python stack after 100 s and exits, so a hang names the call it is in.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import pathlib
import sys
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the repository and the tests' helper packages

import torch  # noqa: E402

import mpslinalg as LA  # noqa: E402
from benchmarks.probe_svd_fault_data import CASES as SHAPES  # noqa: E402 - the test's draws, one list


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prelude", action="store_true", help="run test_triton_cuda's body first")
    ap.add_argument("--sync-each", action="store_true", help="synchronise after every call")
    ap.add_argument("--passes", type=int, default=2)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs CUDA", file=sys.stderr)
        return 1
    faulthandler.dump_traceback_later(100, exit=True)
    svdmod = importlib.import_module("mpslinalg.svd")
    if args.prelude:
        t = importlib.import_module("svd.test_svd_triton")
        t._check("cuda")
        t._registers_variant("cuda")
        torch.cuda.synchronize()
        print("prelude ok", flush=True)
    calls = []
    for shape, dtype in SHAPES:
        A = torch.randn(shape, dtype=dtype, device="cuda")
        calls += [(f"svd_ex {shape} {dtype}", lambda A=A: LA.svd_ex(A)),
                  (f"svd_impl S {shape} {dtype}", lambda A=A: svdmod.svd_impl(A, False, False)),
                  (f"pinv {shape} {dtype}", lambda A=A: LA.pinv(A))]
    for p in range(args.passes):
        for name, fn in calls:
            try:
                print(f"pass {p} {name} ...", flush=True)
                fn()
                if args.sync_each:
                    torch.cuda.synchronize()
                    print(f"pass {p} {name} synced", flush=True)
            except Exception:  # noqa: BLE001 - report the first fault and stop (a CUDA fault is sticky)
                print(f"FAIL pass {p} {name}", flush=True)
                print("".join(traceback.format_exc().splitlines(keepends=True)[-30:]), flush=True)
                return 1
        torch.cuda.synchronize()
        print(f"pass {p} synced", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
