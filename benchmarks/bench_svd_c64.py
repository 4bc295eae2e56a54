"""Where the time of the complex64 4096x64x64 SVD goes on CUDA (issue 12: target <= 20 ms).

    python benchmarks/bench_svd_c64.py                 # the H200: ~1-2 minutes, markdown tables
    python benchmarks/bench_svd_c64.py --batch 256     # a smaller batch (quick look)
    python benchmarks/bench_svd_c64.py --quick         # the default path only: accuracy, whole, pieces
    python benchmarks/bench_svd_c64.py --final         # accuracy, the whole call, its kernels

Tables (CUDA events, median of 5 after a warm-up):

1. the whole ``svd_impl`` (U, S, V; S only) and the public ``svd_ex``, with the host's wall time per
   call beside the GPU time (a host-bound path shows wall >> GPU);
2. the kernels of one ``svd_impl`` call (``torch.profiler``: GPU time per kernel name, summed);
3. the pieces timed alone: the QR preconditioner (``qr_impl`` reduced / R only), the Jacobi kernel
   (with / without ``V``, per warp count, per sweep: the time of 2 sweeps minus that of 1), the
   completion of ``V`` (``mpslinalg.svd._complete``), and the variants of
   :mod:`mpslinalg.kernels.svd_triton` that exist in this checkout;
4. sweeps to convergence: the fraction of matrices still rotating after ``k`` sweeps.

Every number comes from this one run; torch.linalg's 6.7 s per call (issue 12) is not re-timed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg  # noqa: E402

svdmod = importlib.import_module("mpslinalg.svd")


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


def _whole(A: torch.Tensor) -> None:
    print("\n### whole call\n\n| call | GPU ms | host wall ms |\n|---|---:|---:|", flush=True)
    shape = "x".join(map(str, A.shape))
    _row(f"svd_impl {shape} c64, U S V (target <= 20 ms at 4096)", lambda: svdmod.svd_impl(A, False, True))
    _row(f"svd_impl {shape} c64, S only", lambda: svdmod.svd_impl(A, False, False))
    _row(f"svd_ex {shape} c64, full_matrices=False", lambda: mpslinalg.svd_ex(A, full_matrices=False))
    _row(f"svd_ex {shape} c64, full_matrices=True", lambda: mpslinalg.svd_ex(A))


def _profile(A: torch.Tensor) -> None:
    from torch.profiler import ProfilerActivity, profile

    svdmod.svd_impl(A, False, True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        svdmod.svd_impl(A, False, True)
        torch.cuda.synchronize()
    rows = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:  # a kernel (or memcpy/memset) on the GPU
            t, k = rows.get(ev.name, (0.0, 0))
            rows[ev.name] = (t + ev.time_range.elapsed_us() / 1e3, k + 1)
    total = sum(t for t, _ in rows.values())
    print(f"\n### kernels of one svd_impl call (sum {total:.3f} ms)\n\n| kernel | launches | GPU ms |\n|---|---:|---:|")
    for name, (t, k) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:25]:
        print(f"| {name[:90]} | {k} | {t:.3f} |", flush=True)
    for key in ("self_device_time_total", "self_cuda_time_total"):
        try:
            print(prof.key_averages().table(sort_by=key, row_limit=30), flush=True)
            break
        except Exception:  # noqa: BLE001 - the key's name differs between torch versions
            continue


def _pieces(A: torch.Tensor) -> None:
    from mpslinalg.kernels import svd_triton as st
    from mpslinalg.qr import qr_impl

    Bn, n = A.shape[0], A.shape[-1]
    u = 2.0**-24
    tol, ctol = math.sqrt(n) * u, 2 * n * u
    print("\n### pieces alone\n\n| piece | GPU ms | host wall ms |\n|---|---:|---:|", flush=True)
    _row("qr_impl reduced (Q and R)", lambda: qr_impl(A, "reduced"))
    _row("qr_impl r (R only)", lambda: qr_impl(A, "r"))
    _qr_warps(A)
    X = qr_impl(A, "r")[1].mH.contiguous()
    eye = torch.eye(n, dtype=A.dtype, device=A.device).expand(Bn, n, n).contiguous()

    def jac(want_v: bool, sweeps: int = 30, warps=None, **variant):
        def run():
            with _attrs(st, TILE_WARPS=warps, **variant):
                st.jacobi(X.clone(), eye.clone() if want_v else None, sweeps, tol, ctol)
        return run

    for w in (2, 4, 8):
        _row(f"Jacobi with V, {w} warps", jac(True, warps=w))
    _row("Jacobi without V, default warps", jac(False))
    one, _ = _gpu_ms(jac(True, 1))
    two, _ = _gpu_ms(jac(True, 2))
    print(f"| Jacobi with V: one sweep (2 sweeps - 1 sweep) | {two - one:.3f} | |", flush=True)
    variants = [("registers", False, False, None, None), ("registers", True, False, None, None),
                ("pairs", True, False, None, None), ("halving", False, False, None, None),
                ("halving", True, False, None, None), ("halving", True, True, None, None),
                ("halving", True, True, 8, None), ("halving", True, True, 8, 128), ("halving", True, True, 16, 64)]
    for kernel, joint, fast, warps, maxnreg in variants:
        if kernel not in st.REG_KERNELS:
            continue
        with _attrs(st, TILE_KERNEL=kernel, REG_JOINT_REDUCE=joint, REG_FAST_ROTATION=fast, TILE_MAXNREG=maxnreg):
            _row(f"Jacobi with V, {kernel} kernel, {'joint' if joint else 'separate'} sums"
                 f"{', fast rotation' if fast else ''}{f', {warps} warps' if warps else ''}"
                 f"{f', maxnreg {maxnreg}' if maxnreg else ''}", jac(True, warps=warps))
            if kernel == "halving" and joint and fast and warps in (None, 8):
                with _attrs(st, TILE_WARPS=warps):
                    _row("svd_impl U S V with this Jacobi", lambda: svdmod.svd_impl(A, False, True))
    U, S, Vh = (t for t in svdmod.svd_impl(A, False, True)[:3])
    Ux = Vh.mH.contiguous()
    _row("_complete (V's zero-sigma columns; none here)", lambda: svdmod._complete(Ux, S, False))
    Sz = S.clone()
    Sz[:, -1] = 0  # every matrix has a zero sigma: the worst case of the completion
    _row("_complete, every matrix with a zero sigma", lambda: svdmod._complete(Ux, Sz, False))
    _row("batched matmul Q @ Vj", lambda: torch.matmul(Ux, Ux))
    _row("copy of A (bandwidth reference)", lambda: A.clone())


def _qr_warps(A: torch.Tensor) -> None:
    """The QR family's Triton QR kernel on ``A`` at several warp counts (its own choice: 8 at 64x64)."""
    from mpslinalg.kernels import qr_triton as qt

    Bn, m, n = A.shape
    for warps, maxnreg in ((4, None), (8, None), (16, None), (8, 128), (16, 64)):
        for want_q in (True, False):
            def run(warps=warps, want_q=want_q, maxnreg=maxnreg):
                QR = A.clone()
                tau = A.new_empty(Bn, n)
                Q = torch.empty_like(A) if want_q else QR
                extra = {"maxnreg": maxnreg} if maxnreg else {}
                qt._qr_small_kernel[(Bn,)](torch.view_as_real(QR), torch.view_as_real(tau), torch.view_as_real(Q),
                                           m, n, n, COMPLEX=True, WANT_Q=want_q, MP=qt._pow2(m), NP=qt._pow2(n),
                                           num_warps=warps, **extra)
            _row(f"QR kernel {'Q and R' if want_q else 'R only'}, {warps} warps"
                 f"{f', maxnreg {maxnreg}' if maxnreg else ''} (incl. a copy of A)", run)


def _sweeps(A: torch.Tensor) -> None:
    from mpslinalg.kernels import svd_triton as st
    from mpslinalg.qr import qr_impl

    n = A.shape[-1]
    u = 2.0**-24
    X = qr_impl(A, "r")[1].mH.contiguous()
    print("\n### sweeps (fraction of matrices still rotating after k sweeps)\n\n| k | registers | halving |\n"
          "|---:|---:|---:|")
    for k in range(4, 12):
        frac = []
        for kernel in ("registers", "halving"):
            with _attrs(st, TILE_KERNEL=kernel):
                _, _, rot = st.jacobi(X.clone(), None, k, math.sqrt(n) * u, 2 * n * u)
            frac.append(f"{float(rot.float().mean()):.4f}")
        print(f"| {k} | {' | '.join(frac)} |", flush=True)


def _accuracy(A: torch.Tensor) -> bool:
    """LAPACK xDRVBD ratios (< 50, issue 12) of the default path on the first 256 matrices of ``A``
    and on graded ones (``D A D``, ``D`` = 1 .. 1e-3 down the diagonal), and the largest relative
    error of each σ against float64 LAPACK (``complex128``: the graded σ_min are ~1e-6 σ_max, so
    a relative error near 1e-6 there still means every σ is right to ~κ(B)·u)."""
    from reference import metrics

    ok = True
    head = A[:256]
    D = torch.logspace(0, -3, A.shape[-1], device=A.device)
    graded = (head * D[:, None] * D[None, :]).to(A.dtype)
    for name, M in (("random", head), ("graded", graded)):
        U, S, Vh = mpslinalg.svd(M, full_matrices=True)
        r = metrics.svd_ratios(M.cpu(), U.cpu(), S.cpu(), Vh.cpu())
        worst = max(float(x.max()) for x in r[:3])
        ref = torch.linalg.svdvals(M.cpu().to(torch.complex128))
        rel = float(((S.cpu().double() - ref) / ref).abs().max())
        good = worst < 50
        ok &= good
        print(f"| accuracy {name} {tuple(M.shape)}: max LAPACK ratio {worst:.3g} | "
              f"{'PASS' if good else 'FAIL'} | max rel. sigma error vs float64 {rel:.2e} |", flush=True)
    return ok


def _quick(A: torch.Tensor) -> None:
    """Round 2 (~90 s): the default path whole, its kernels, the QR and Jacobi alone, accuracy."""
    from mpslinalg.kernels import svd_cuda
    from mpslinalg.kernels import svd_triton as st

    print("\n| check | result | |\n|---|---|---|", flush=True)
    _accuracy(A)
    _whole(A)
    _profile_sums(A)
    Bn, n = A.shape[0], A.shape[-1]
    u = 2.0**-24
    print("\n| piece | GPU ms | host wall ms |\n|---|---:|---:|", flush=True)
    _row("svd_cuda.square_qr, Q and R (incl. a copy of A)", lambda: svd_cuda.square_qr(A.clone(), True))
    for cap in (168, 128):
        with _attrs(svd_cuda, QR_OPTS_Q={"num_warps": 4, "maxnreg": cap}):
            _row(f"svd_cuda.square_qr, Q and R, 4 warps, maxnreg {cap}", lambda: svd_cuda.square_qr(A.clone(), True))
    _row("svd_cuda.square_qr, R only (incl. a copy of A)", lambda: svd_cuda.square_qr(A.clone(), False))
    X = svd_cuda.square_qr(A.clone(), False)[1].mH.contiguous()
    eye = torch.eye(n, dtype=A.dtype, device=A.device).expand(Bn, n, n).contiguous()
    for kernel, maxnreg in (("auto", None), ("auto", 168), ("auto", 128), ("registers", None)):
        with _attrs(st, TILE_KERNEL=kernel, TILE_MAXNREG=maxnreg):
            _row(f"Jacobi with V, TILE_KERNEL={kernel}{f', maxnreg {maxnreg}' if maxnreg else ''}",
                 lambda: st.jacobi(X.clone(), eye.clone(), 30, math.sqrt(n) * u, 2 * n * u))


def _profile_sums(A: torch.Tensor) -> None:
    from torch.profiler import ProfilerActivity, profile

    svdmod.svd_impl(A, False, True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        svdmod.svd_impl(A, False, True)
        torch.cuda.synchronize()
    rows = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            t, k = rows.get(ev.name, (0.0, 0))
            rows[ev.name] = (t + ev.time_range.elapsed_us() / 1e3, k + 1)
    total = sum(t for t, _ in rows.values())
    print(f"\n### kernels of one svd_impl call (sum {total:.3f} ms, {sum(k for _, k in rows.values())} launches)\n\n"
          "| kernel | launches | GPU ms |\n|---|---:|---:|")
    for name, (t, k) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:12]:
        print(f"| {name[:90]} | {k} | {t:.3f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="complex64 64x64 SVD on CUDA: where the time goes")
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--n", type=int, default=64, help="order (64: issue 12's shape)")
    p.add_argument("--device", default="cuda", help="cpu: a smoke test under TRITON_INTERPRET=1 (no timings)")
    p.add_argument("--quick", action="store_true", help="the default path only (~90 s on the H200)")
    p.add_argument("--final", action="store_true", help="accuracy, the whole call and its kernels (~40 s)")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("needs CUDA", file=sys.stderr)
        return 1
    A = _mats((args.batch, args.n, args.n), torch.device(args.device), 5)
    if args.device == "cuda":
        print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    if args.final:
        print("\n| check | result | |\n|---|---|---|", flush=True)
        ok = _accuracy(A)
        _whole(A)
        _profile_sums(A)
        return 0 if ok else 1
    if args.quick:
        _quick(A)
        return 0
    _whole(A)
    _profile(A)
    _pieces(A)
    _sweeps(A)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
