"""First-call latency of one op on the emulator backend, compile included (issue 29).

    MPSLINALG_CACHE_DIR=$(mktemp -d) python benchmarks/first_call.py lu_factor 16

Run each op in a fresh process with a fresh emulator cache directory (``MPSLINALG_CACHE_DIR``): the
first call then compiles every Metal library it launches. Prints one JSON line: the first call's
and the second call's seconds, and the libraries (``metal/<source>.metal``) the process compiled.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(argv: list[str]) -> int:
    op, n = argv[0], int(argv[1])
    os.environ.setdefault("MPSLINALG_BACKEND", "emulator")
    import torch

    import mpslinalg
    from mpslinalg.kernels import loader

    torch.manual_seed(0)
    A = torch.randn(n, n) + n * torch.eye(n)  # well conditioned: no pivoting surprise, no info
    B = torch.randn(n, 1)
    calls = {"lu_factor": lambda: mpslinalg.lu_factor(A), "solve": lambda: mpslinalg.solve(A, B),
             "qr": lambda: mpslinalg.qr(A), "svd": lambda: mpslinalg.svd(A)}
    t0 = time.perf_counter()
    calls[op]()
    t1 = time.perf_counter()
    calls[op]()
    t2 = time.perf_counter()
    print(json.dumps({"op": op, "n": n, "first_s": round(t1 - t0, 2), "second_s": round(t2 - t1, 4),
                      "libraries": sorted(source for source, _ in loader._cache)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
