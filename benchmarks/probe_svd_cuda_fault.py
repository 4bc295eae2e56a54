"""Which launch of the SVD family's CUDA path faults (tests/svd/test_svd_triton.py::
test_triton_cuda_no_host_sync met "an illegal memory access" on the H200, round 1 of 2026-12-01 night).

    CUDA_LAUNCH_BLOCKING=1 python benchmarks/probe_svd_cuda_fault.py

Runs that test's calls one at a time (its shapes, in its order), synchronising after each, and stops at
the first CUDA error with the traceback's last frames: under ``CUDA_LAUNCH_BLOCKING=1`` the error is
raised by the launch that faulted. The Triton fallback's warning is turned into an error so the faulting
Triton kernel is named rather than hidden by the torch-op fallback.
"""

from __future__ import annotations

import importlib
import pathlib
import sys
import traceback
import warnings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg as LA  # noqa: E402

SHAPES = [((4096, 3, 3), torch.float32), ((512, 7, 3), torch.float32), ((512, 8, 9), torch.float32),
          ((64, 32, 32), torch.float32), ((16, 64, 64), torch.complex64), ((64, 2, 2), torch.complex64)]


def main() -> int:
    if not torch.cuda.is_available():
        print("needs CUDA", file=sys.stderr)
        return 1
    svdmod = importlib.import_module("mpslinalg.svd")
    warnings.simplefilter("error", RuntimeWarning)  # the fallback's warning names the failed kernel
    for shape, dtype in SHAPES:
        A = torch.randn(shape, dtype=dtype, device="cuda")
        calls = (("svd_ex", lambda A=A: LA.svd_ex(A)),
                 ("svd_impl S only", lambda A=A: svdmod.svd_impl(A, False, False)),
                 ("svd_impl U S V", lambda A=A: svdmod.svd_impl(A, False, True)),
                 ("pinv", lambda A=A: LA.pinv(A)))
        for name, fn in calls:
            try:
                fn()
                torch.cuda.synchronize()
                print(f"ok   {name} {shape} {dtype}", flush=True)
            except Exception:  # noqa: BLE001 - report the first fault and stop (a CUDA fault is sticky)
                print(f"FAIL {name} {shape} {dtype}", flush=True)
                print("".join(traceback.format_exc().splitlines(keepends=True)[-40:]), flush=True)
                return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
