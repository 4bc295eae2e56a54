"""The complex64 Jacobi kernel's variants on CUDA (issue 12: svd_ex c64 4096x64x64 <= 20 ms).

    python benchmarks/bench_svd_jacobi.py                # the H200: ~2-3 minutes, markdown tables
    python benchmarks/bench_svd_jacobi.py --batch 256    # a quick look
    python benchmarks/bench_svd_jacobi.py --variants 0,1 # VARIANTS[0] and [1] only

For each variant of :mod:`mpslinalg.svd.triton_jacobi` (module switches, set for the row only):

1. the Jacobi kernel alone with ``V`` on ``X = Rᴴ`` of random and of graded matrices (CUDA events,
   median of 5 after a warm-up) and the whole ``svd_impl`` (U, S, V);
2. sweeps: the fraction of matrices still rotating after ``k`` sweeps (random, graded);
3. accuracy of the whole SVD with the variant (LAPACK xDRVBD ratios < 50, σ against float64 LAPACK:
   ``bench_svd_c64._accuracy``).

Peer in the same run: ``torch.linalg.svd`` of the same batch (one call after a warm-up).
"""

from __future__ import annotations

import argparse
import importlib
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

from benchmarks.bench_svd_c64 import _accuracy, _attrs, _gpu_ms, _mats, _row  # noqa: E402

svdmod = importlib.import_module("mpslinalg.svd")

#: (name, switches of mpslinalg.svd.triton_jacobi) - rows whose switch this checkout lacks are skipped.
VARIANTS = [  # most wanted first (a time box may cut the tail)
    ("default", {}),
    ("scaled rotations, unrolled by 2", {"REG_SCALED_ROTATIONS": True, "REG_UNROLL2": True}),
    # sm_90 (Triton 3.6): 128 registers at 8 warps (2 programs, 16 warps an SM) against 255 at 4 (8 warps)
    ("scaled rotations, unrolled by 2, 8 warps", {"REG_SCALED_ROTATIONS": True, "REG_UNROLL2": True, "TILE_WARPS": 8}),
    ("tracked norms, unrolled by 2", {"REG_TRACK_NORMS": True, "REG_UNROLL2": True}),
    ("unrolled by 2", {"REG_UNROLL2": True}),
    ("tracked norms", {"REG_TRACK_NORMS": True}),
    ("scaled rotations", {"REG_SCALED_ROTATIONS": True}),
    ("tracked norms, 8 warps", {"REG_TRACK_NORMS": True, "TILE_WARPS": 8}),
]


def _inputs(A: torch.Tensor) -> dict[str, torch.Tensor]:
    """``X = Rᴴ`` of the QR preconditioner for random ``A`` and graded ``D A D`` (D = 1 .. 1e-3)."""
    from mpslinalg.qr import qr_impl

    D = torch.logspace(0, -3, A.shape[-1], device=A.device)
    graded = (A * D[:, None] * D[None, :]).to(A.dtype)
    return {name: qr_impl(M, "r")[1].mH.contiguous() for name, M in (("random", A), ("graded", graded))}


def main(argv: list[str] | None = None) -> int:
    from mpslinalg.svd import triton_jacobi as st

    p = argparse.ArgumentParser(description="complex64 Jacobi variants on CUDA")
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--variants", default="", help="comma-separated indices into VARIANTS (default: all)")
    args = p.parse_args(argv)
    chosen = [VARIANTS[int(i)] for i in args.variants.split(",")] if args.variants else VARIANTS
    if not torch.cuda.is_available():
        print("needs CUDA", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    A = _mats((args.batch, args.n, args.n), dev, 5)
    n, Bn = args.n, args.batch
    u = 2.0**-24
    tol, ctol = math.sqrt(n) * u, 2 * n * u
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, batch {Bn} x {n} x {n} complex64", flush=True)
    X = _inputs(A)
    eye = torch.eye(n, dtype=A.dtype, device=dev).expand(Bn, n, n).contiguous()
    ok = True
    print("\n### times\n\n| variant | piece | GPU ms | host wall ms |\n|---|---|---:|---:|", flush=True)
    g, w = _gpu_ms(lambda: torch.linalg.svd(A, full_matrices=False), reps=1)
    print(f"| peer | torch.linalg.svd full_matrices=False | {g:.3f} | {w:.3f} |", flush=True)
    ks = list(range(2, 11))
    sweep_head = ("| variant | " + " | ".join(f"r{k}" for k in ks) + " | " + " | ".join(f"g{k}" for k in ks)
                  + " |\n|---|" + "---:|" * (2 * len(ks)))
    for name, switches in chosen:
        with _attrs(st, **switches) as present:
            if not present:
                continue
            for kind, Xk in X.items():
                _row(f"{name} | Jacobi with V, {kind}",
                     lambda Xk=Xk: st.jacobi(Xk.clone(), eye.clone(), 30, tol, ctol))
            _row(f"{name} | svd_impl U S V (random)", lambda: svdmod.svd_impl(A, False, True))
            fr = [float(st.jacobi(Xk.clone(), None, k, tol, ctol)[2].float().mean()) for Xk in X.values() for k in ks]
            print(f"\nsweeps with {name}: fraction still rotating after k sweeps (random rk | graded gk)\n\n"
                  f"{sweep_head}\n| {name} | " + " | ".join(f"{x:.3f}" for x in fr) + " |", flush=True)
            print(f"\naccuracy with {name}:\n\n| check | result | |\n|---|---|---|", flush=True)
            ok &= _accuracy(A, name)  # bench_svd_c64's gate, labelled by the variant
            print("\n| variant | piece | GPU ms | host wall ms |\n|---|---|---:|---:|", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
