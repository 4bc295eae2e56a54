"""Equality-constrained least squares through its KKT saddle-point system, with ``mpslinalg.ldl_factor``
and ``ldl_solve`` (Bunch–Kaufman: the KKT matrix is symmetric indefinite, with a zero block).

    minimise ‖A x − b‖₂  subject to  C x = d        (A: m x n, C: p x n, p <= n <= m)

The optimality conditions are the (n + p) x (n + p) symmetric indefinite system

    [ 0   C   ] [ λ ]   [ d   ]
    [ Cᵀ  AᵀA ] [ x ] = [ Aᵀb ]

(the constraints first) whose zero diagonal block makes Cholesky impossible and forces
interchanges or 2x2 pivots at the first steps. A batch of such problems
(a constrained fit per pixel, per sensor, per time step) is factored once and solved in float32.

Checks (u = 2^-24, LAPACK's pass mark 30), against the same system solved in float64:

* the factorization ``‖P K Pᵀ − L D Lᵀ‖₁ / (N ‖K‖₁ u) < 30`` (LAPACK xSYT01) for every problem;
* the solve's backward error ``‖r − K z‖₁ / (‖K‖₁ ‖z‖₁ u) < 30`` (xGET02);
* the constraint residual ``‖C x − d‖_∞ <= 30 N u κ-free bound ‖C‖ ‖x‖`` (it is a row block of the
  KKT residual, so the backward error bounds it);
* the forward error of ``x`` against float64: ``‖x − x64‖/‖x64‖ <= 30 N u κ₁(K)``.

::

    python examples/ldl_kkt.py                          # CPU
    python examples/ldl_kkt.py --device cuda --batch 4096
    MPSLINALG_BACKEND=emulator python examples/ldl_kkt.py --batch 64   # the Metal kernel

(On CPU/CUDA the front doors call torch.linalg outside the measured regions of ``FAMILY.when``.)

Exit status 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402
from support import devices  # noqa: E402

import mpslinalg as LA  # noqa: E402
from reference import metrics  # noqa: E402


def kkt(A: torch.Tensor, b: torch.Tensor, C: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The KKT matrix and right-hand side of ``min ‖Ax − b‖ s.t. Cx = d`` (batched)."""
    p = C.shape[-2]
    H = A.mT @ A
    Z = A.new_zeros(*A.shape[:-2], p, p)
    K = torch.cat([torch.cat([Z, C], -1), torch.cat([C.mT, H], -1)], -2)
    r = torch.cat([d, A.mT @ b], -2)
    return K, r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", type=devices.device, help="cpu (default), cuda or mps")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--m", type=int, default=40)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--p", type=int, default=6)
    args = ap.parse_args(argv)
    g = torch.Generator().manual_seed(0)
    B, m, n, p = args.batch, args.m, args.n, args.p
    A = torch.randn(B, m, n, generator=g, dtype=torch.float64)
    b = torch.randn(B, m, 1, generator=g, dtype=torch.float64)
    C = torch.randn(B, p, n, generator=g, dtype=torch.float64)
    d = torch.randn(B, p, 1, generator=g, dtype=torch.float64)
    K64, r64 = kkt(A, b, C, d)
    K, r = K64.float(), r64.float()  # the float32 problem (its own rounded data)
    dev = torch.device(args.device)

    LD, piv, info = LA.ldl_factor_ex(K.to(dev))
    z = LA.ldl_solve(LD, piv, r.to(dev)).cpu()
    LD, piv, info = LD.cpu(), piv.cpu(), info.cpu()

    N, u = n + p, 2.0**-24
    fact, growth = metrics.ldl_ratio(K, LD, piv)
    back = metrics.solve_ratio(K, z, r)
    x = z[:, p:]
    Kw, rw = K.double(), r.double()
    z64 = torch.linalg.solve(Kw, rw)  # the float64 truth of the float32 problem
    x64 = z64[:, p:]
    kappa = torch.linalg.cond(Kw, p=1)
    fwd = (x - x64).abs().amax((-2, -1)) / x64.abs().amax((-2, -1))
    cres = (C.float() @ x - d.float()).abs().amax((-2, -1))
    cbound = 30 * N * u * C.float().abs().sum(-1).amax(-1) * x.abs().amax((-2, -1))
    checks = {
        "info == 0 (nonsingular KKT)": bool((info == 0).all()),
        "pivoting at the zero block (interchange or 2x2)": bool((piv[:, 0] != 1).all()),
        f"factorization xSYT01 < 30 (max {float(fact.max()):.3g}, growth {float(growth.max()):.3g})":
            bool((fact < 30).all()),
        f"solve backward error < 30 (max {float(back.max()):.3g})": bool((back < 30).all()),
        f"constraint residual <= 30 N u ‖C‖‖x‖ (max ratio {float((cres / cbound).max()):.3g})":
            bool((cres <= cbound).all()),
        f"forward error <= 30 N u κ₁ (max ratio {float((fwd / (30 * N * u * kappa)).max()):.3g})":
            bool((fwd <= 30 * N * u * kappa).all()),
    }
    print(f"{B} equality-constrained least-squares problems (m={m}, n={n}, p={p}), KKT order {N}, "
          f"on {dev} ({'emulator' if LA.kernels.requested_backend() == 'emulator' else 'default backend'})")
    ok = True
    for name, good in checks.items():
        ok &= good
        print(f"  {'PASS' if good else 'FAIL'}  {name}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
