"""Where the time of the complex64 4096x64x64 SVD goes on CUDA (issue 12: target <= 20 ms).

    python benchmarks/bench_svd_c64.py --final     # gate, the whole call per route, kernel split (~1 min)
    python benchmarks/bench_svd_c64.py --qr        # the preconditioner's QR kernels and variants alone
    python benchmarks/bench_svd_c64.py             # both, the Jacobi alone, sweeps to convergence
    python benchmarks/bench_svd_c64.py --batch 256 # a smaller batch (quick look)

Routes compared in the same run: ``default`` (whatever this checkout routes to: since 1f28796
:mod:`mpslinalg.svd.triton_square` - prep kernel, the unblocked QR with ``X = Rᴴ``, Jacobi,
finish, completion in place), ``square, QR blocked`` (its ``QR_KERNEL = "blocked"``) and ``torch ops``
(the route off: the preconditioning passes as torch ops around :func:`mpslinalg.svd.cuda.square_qr`).

Tables (CUDA events, median of 5 after a warm-up; GPU time and the host's wall time per call):

1. the gate: LAPACK xDRVBD ratios (< 50, issue 12) and every σ against float64 LAPACK within
   ``30 n κ(B) u`` relative (tests/svd/test_svd_accuracy.py's bound; ``B`` the random factor of the
   graded ``D B D``, ``D = I`` for the random case), per route: PASS/FAIL, exit status 1 on a FAIL;
2. the whole ``svd_impl`` (U S V; S only) and the public ``svd_ex`` (full_matrices False/True);
3. the kernels of one ``svd_impl`` call (``torch.profiler``: GPU time per kernel name, summed);
4. pieces alone: the QR kernels (old square_qr, blocked geqrf_square per warps and panel width), the
   prep and finish kernels, the Jacobi kernel; and the sweeps to convergence.

Every number comes from this one run; torch.linalg's 6.7 s per call (issue 12) is not re-timed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg  # noqa: E402

svdmod = importlib.import_module("mpslinalg.svd")
U32 = 2.0**-24


def _mats(shape: tuple, device: torch.device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.view_as_complex(torch.randn(*shape, 2, generator=g) / 2**0.5).to(device)


def _gpu_ms(fn, reps: int = 5) -> tuple[float, float]:
    """(median GPU ms by CUDA events, median host wall ms) of ``fn`` after one warm-up call."""
    fn()
    torch.cuda.synchronize()
    gpu, wall = [], []
    for _ in range(reps):
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        w0 = time.perf_counter()
        t0.record()
        fn()
        t1.record()
        torch.cuda.synchronize()
        wall.append(1e3 * (time.perf_counter() - w0))
        gpu.append(t0.elapsed_time(t1))
    return sorted(gpu)[reps // 2], sorted(wall)[reps // 2]


def _row(name: str, fn) -> None:
    try:
        g, w = _gpu_ms(fn)
        print(f"| {name} | {g:.3f} | {w:.3f} |", flush=True)
    except Exception as exc:  # noqa: BLE001 - report the piece that failed and go on
        print(f"| {name} | ERROR {type(exc).__name__}: {str(exc)[:160]} | |", flush=True)


def _table(title: str) -> None:
    print(f"\n### {title}\n\n| call | GPU ms | host wall ms |\n|---|---:|---:|", flush=True)


@contextlib.contextmanager
def _attrs(obj, **changes):
    """Set module attributes for a block (skipped where the attribute does not exist here)."""
    saved = {k: getattr(obj, k) for k in changes if hasattr(obj, k)}
    for k in saved:
        setattr(obj, k, changes[k])
    try:
        yield bool(saved) or not changes
    finally:
        for k, v in saved.items():
            setattr(obj, k, v)


def _routes():
    """``(name, context manager factory)`` of the routes this checkout has."""
    out = [("default", contextlib.nullcontext)]
    try:
        sq = importlib.import_module("mpslinalg.svd.triton_square")
    except ImportError:
        return out
    out.append(("square, QR blocked", lambda: _attrs(sq, ENABLED=True, QR_KERNEL="blocked")))
    out.append(("torch ops", lambda: _attrs(sq, ENABLED=False)))
    return out


def _accuracy(A: torch.Tensor, route: str) -> bool:
    """The gate (module docstring, table 1) on the first 256 matrices of ``A``."""
    from reference import metrics

    n = A.shape[-1]
    head = A[:256]
    D = torch.logspace(0, -3, n, device=A.device)
    kappa_b = torch.linalg.cond(head.cpu().to(torch.complex128))  # B = head in both cases
    ok = True
    for name, M in (("random", head), ("graded D B D", (head * D[:, None] * D[None, :]).to(A.dtype))):
        U, S, Vh = mpslinalg.svd(M, full_matrices=True)
        r = metrics.svd_ratios(M.cpu(), U.cpu(), S.cpu(), Vh.cpu())
        worst = max(float(x.max()) for x in r[:3])
        ref = torch.linalg.svdvals(M.cpu().to(torch.complex128))
        rel = ((S.cpu().double() - ref) / ref).abs()
        ratio = float((rel / (30 * n * kappa_b[:, None] * U32)).max())
        good = worst < 50 and ratio <= 1 and bool(torch.isfinite(S).all())
        ok &= good
        print(f"| {route}: {name} {tuple(M.shape)} | {'PASS' if good else 'FAIL'} | max LAPACK ratio {worst:.3g} "
              f"(< 50); max rel. sigma error {float(rel.max()):.2e} = {ratio:.3g} x 30 n kappa(B) u |", flush=True)
    return ok


def _whole(A: torch.Tensor, route: str) -> None:
    shape = "x".join(map(str, A.shape))
    _row(f"{route}: svd_impl {shape} c64, U S V", lambda: svdmod.svd_impl(A, False, True))
    _row(f"{route}: svd_impl {shape} c64, S only", lambda: svdmod.svd_impl(A, False, False))
    _row(f"{route}: svd_ex full_matrices=False", lambda: mpslinalg.svd_ex(A, full_matrices=False))
    _row(f"{route}: svd_ex full_matrices=True", lambda: mpslinalg.svd_ex(A))


def _kernel_split(A: torch.Tensor, route: str, top: int = 12) -> None:
    """GPU time per kernel name of one ``svd_impl`` call (U S V), summed over its launches."""
    from torch.profiler import ProfilerActivity, profile

    svdmod.svd_impl(A, False, True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        svdmod.svd_impl(A, False, True)
        torch.cuda.synchronize()
    rows: dict[str, tuple[float, int]] = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:  # a kernel (or memcpy/memset) on the GPU
            t, k = rows.get(ev.name, (0.0, 0))
            rows[ev.name] = (t + ev.time_range.elapsed_us() / 1e3, k + 1)
    total = sum(t for t, _ in rows.values())
    print(f"\n### {route}: kernels of one svd_impl call (sum {total:.3f} ms, "
          f"{sum(k for _, k in rows.values())} launches)\n\n| kernel | launches | GPU ms |\n|---|---:|---:|")
    for name, (t, k) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"| {name[:90]} | {k} | {t:.3f} |", flush=True)


def _final(A: torch.Tensor) -> bool:
    print("\n### gate\n\n| route: case | result | |\n|---|---|---|", flush=True)
    ok = True
    for route, ctx in _routes():
        with ctx():
            ok &= _accuracy(A, route)
    _table("whole call (target <= 20 ms at 4096)")
    for route, ctx in _routes():
        with ctx():
            _whole(A, route)
    for route, ctx in _routes():
        with ctx():
            _kernel_split(A, route)
    return ok


def _qr(A: torch.Tensor) -> None:
    """The preconditioner's QR alone: the old kernel (svd_cuda.square_qr) against the blocked one."""
    from mpslinalg.qr import triton as qr_triton
    from mpslinalg.qr import triton_blocked as qb
    from mpslinalg.svd import cuda as svd_cuda

    Bn, n = A.shape[0], A.shape[-1]
    _table("QR of the preconditioner alone (each incl. a copy of A: see the last row)")
    _row("square_qr (qr_triton._qr_small_kernel), Q and R", lambda: svd_cuda.square_qr(A.clone(), True))
    _row("square_qr (qr_triton._qr_small_kernel), R only", lambda: svd_cuda.square_qr(A.clone(), False))
    tau = A.new_empty(Bn, n)
    Q, X = torch.empty_like(A), torch.empty_like(A)
    _row("square_qr_into (the same kernel), Q and X = R^H", lambda: qr_triton.square_qr_into(A.clone(), tau, Q, X))
    _row("square_qr_into (the same kernel), X only", lambda: qr_triton.square_qr_into(A.clone(), tau, None, X))
    for chunked, warps, joint in ((False, 8, False), (True, 4, False), (True, 8, False), (True, 4, True),
                                  (True, 8, True)):
        with _attrs(qb, CHUNKED=chunked, NUM_WARPS=warps, JOINT_REDUCE=joint):
            name = (f"geqrf_square {'chunked' if chunked else 'tiles'}, {warps} warps"
                    f"{', joint reductions' if joint else ''}")
            _row(f"{name}: Q and X = R^H", lambda: qb.geqrf_square(A.clone(), tau, Q, X))
            _row(f"{name}: X only", lambda: qb.geqrf_square(A.clone(), tau, None, X))
    _row("copy of A (bandwidth reference)", lambda: A.clone())
    # agreement of the two kernels on this batch (R up to the signs LAPACK fixes: identical convention)
    R_old = svd_cuda.square_qr(A.clone(), False)[1]
    qb.geqrf_square(A.clone(), tau, Q, X)
    err = float((X.mH - R_old).abs().max() / R_old.abs().max())
    print(f"\nmax |R_blocked - R_old| / max |R| = {err:.2e} (u = {U32:.1e}; both backward stable)", flush=True)


def _pieces(A: torch.Tensor) -> None:
    from mpslinalg.svd import triton_complete as stc
    from mpslinalg.svd import triton_jacobi as st
    from mpslinalg.svd import triton_square as sq

    Bn, n = A.shape[0], A.shape[-1]
    _table("the other pieces alone")
    _row("svd_triton_square.prep (scaling, sorts, permuted copy)", lambda: sq.prep(A))
    W, rperm, cperm, e, fin = sq.prep(A)
    X = torch.empty_like(A)
    from mpslinalg.qr import triton_blocked as qb

    qb.geqrf_square(W.clone(), A.new_empty(Bn, n), None, X)
    eye = torch.eye(n, dtype=A.dtype, device=A.device).expand(Bn, n, n).contiguous()
    tol, ctol = importlib.import_module("mpslinalg.svd.kernels").thresholds(n, torch.float32)
    _row("Jacobi with V", lambda: st.jacobi(X.clone(), eye.clone(), 30, tol, ctol))
    _row("Jacobi without V", lambda: st.jacobi(X.clone(), None, 30, tol, ctol))
    Xj, Vj, rot = st.jacobi(X.clone(), eye.clone(), 30, tol, ctol)
    _row("finish (sigma, order, V_A, U_A)", lambda: stc.finish(Xj, Vj, cperm, e, fin, rot, rperm=rperm))
    U, S, Vh = svdmod.svd_impl(A, False, True)[:3]
    from mpslinalg.svd.algorithm import complete
    from mpslinalg.svd.paths import path_for

    def _complete(Ux, S):
        return complete(Ux, S, False, path_for(Ux))

    Ux = Vh.mH.contiguous()
    _row("_complete (V's zero-sigma columns; none here)", lambda: _complete(Ux, S))
    Sz = S.clone()
    Sz[:, -1] = 0  # every matrix has a zero sigma: the worst case of the completion
    _row("_complete, every matrix with a zero sigma", lambda: _complete(Ux, Sz))
    print("\n### sweeps (fraction of matrices still rotating after k sweeps)\n\n| k | fraction |\n|---:|---:|")
    for k in range(4, 12):
        _, _, r = st.jacobi(X.clone(), None, k, tol, ctol)
        print(f"| {k} | {float(r.float().mean()):.4f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="complex64 64x64 SVD on CUDA: where the time goes")
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--n", type=int, default=64, help="order (64: issue 12's shape)")
    p.add_argument("--final", action="store_true", help="the gate, the whole call per route, kernel split")
    p.add_argument("--qr", action="store_true", help="the QR kernels alone")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs CUDA", file=sys.stderr)
        return 1
    A = _mats((args.batch, args.n, args.n), torch.device("cuda"), 5)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    ok = True
    if args.qr or not args.final:
        _qr(A)
    if args.final or not args.qr:
        ok = _final(A)
    if not (args.final or args.qr):
        _pieces(A)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
