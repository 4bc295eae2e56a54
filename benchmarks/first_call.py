"""First-call latency of one op on the emulator backend, compile included (issue 29).

    MPSLINALG_CACHE_DIR=$(mktemp -d) python benchmarks/first_call.py lu_factor 16

Against another checkout (e.g. an older commit): ``PYTHONPATH=<that tree> python benchmarks/first_call.py ...``
(the script imports ``mpslinalg`` from the path; it needs only ``use_backend`` and ``kernels.loader._cache``).

Run each op in a fresh process with a fresh emulator cache directory (``MPSLINALG_CACHE_DIR``): the
first call then compiles every Metal library it launches. Prints one JSON line: the first call's
wall and CPU seconds (CPU: this process and the compiler it runs), the second call's seconds,
and the libraries (``metal/<source>.metal``) the process compiled.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time


def _cpu_s() -> float:
    """CPU seconds of this process and its waited-for children (the compiler runs as a child):
    on a loaded machine this measures the work, where wall time also measures the queue."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str]) -> int:
    op, n = argv[0], int(argv[1])
    if not os.environ.get("MPSLINALG_CACHE_DIR"):
        raise SystemExit("set MPSLINALG_CACHE_DIR to a fresh empty directory: a warm cache measures no compile")
    import torch

    import mpslinalg
    from mpslinalg.kernels import loader

    torch.manual_seed(0)
    A = torch.randn(n, n) + n * torch.eye(n)  # well conditioned: no pivoting surprise, no info
    B = torch.randn(n, 1)
    calls = {"lu_factor": lambda: mpslinalg.lu_factor(A), "solve": lambda: mpslinalg.solve(A, B),
             "qr": lambda: mpslinalg.qr(A), "svd": lambda: mpslinalg.svd(A)}
    with mpslinalg.use_backend("emulator"):  # CPU tensors, the emulator's CPU target
        c0, t0 = _cpu_s(), time.perf_counter()
        calls[op]()
        t1, c1 = time.perf_counter(), _cpu_s()
        calls[op]()
        t2 = time.perf_counter()
    print(json.dumps({"op": op, "n": n, "first_s": round(t1 - t0, 2), "first_cpu_s": round(c1 - c0, 2),
                      "second_s": round(t2 - t1, 4),
                      "libraries": sorted(source for source, _ in loader._cache)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
