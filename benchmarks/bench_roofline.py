"""Roofline of every Metal kernel, run on an NVIDIA GPU by the emulator's cuda target (issue 7).

    python -m mpslinalg.emulator build --target cuda --out .cubins      # where clang is (once)
    python benchmarks/bench_roofline.py --device cuda --out results/    # on the H200

Each row is one ``.metal`` kernel called exactly as its family calls it (the same Python call
site, the same grid and threadgroup size), on CUDA tensors through
``mpslinalg.emulator.compile_shader(..., target="cuda")``. ``bytes_moved`` is what the kernel must
read and write at least; ``flops`` the real floating-point operations where the kernel is
compute-heavy. The harness divides them by the copy bandwidth and the float32 GEMM rate *measured
in the same run* (``roofline`` column): that fraction is the figure that transfers to an Apple
GPU (DESIGN §10), the absolute times are NVIDIA's. Issue 7's target: the n <= 4 kernels reach
>= 80% of copy bandwidth at batch 1e7.

Peers (``torch.linalg`` on the same inputs, same run) are listed where one computes the same thing.
``ROOFLINE_FAMILIES=small`` (comma-separated: small, triangular, lu, qr, svd) keeps only those families' rows.
Every kernel row comes twice (``ROOFLINE_ROWS=both``, the default; ``eager`` or ``graph`` for one):
eager, as a caller sees it (host launch overhead included), and ``[graph x10]``, the replay of a
CUDA graph of 10 launches, which is the kernel's own GPU time. ``roofline_kernels_cuda.md`` puts
each graph row's fraction beside ``ptxas``' registers, stack frame, spills and shared memory (the
row's first word is the kernel's host name); ``--resources`` prints that resource table for every
kernel of every family without a GPU (ptxas runs where clang is: the numbers are the cubins').
"""

from __future__ import annotations

import copy
import importlib
import math
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

from benchmarks.harness import Case, cli  # noqa: E402
from mpslinalg.kernels import kernel_name, load_library  # noqa: E402

FAMILIES = ("small", "triangular", "lu", "qr", "svd")  # metal/<family>.metal or metal/<family>_<group>.metal

REPS = 10  # kernel launches per CUDA-graph replay


def _graphed(case: Case) -> Case:
    """``case`` with ``ours`` replaced by the replay of a CUDA graph of REPS launches.

    A kernel launch through the binding layer and ctypes costs tens of microseconds of host time,
    more than the smallest kernels run: replaying a captured graph shows the kernel's own GPU time
    (the transferable figure). Bytes and flops are scaled by REPS; the per-launch time is the
    reported time / REPS. Peers stay eager (cuSOLVER calls do not all capture).
    """
    fn = case.ours
    fn()  # load the module and warm up outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(REPS):
            fn()
    case.ours = g.replay
    case.name = f"{case.name} [graph x{REPS}]"
    case.bytes_moved = case.bytes_moved * REPS if case.bytes_moved else None
    case.flops = case.flops * REPS if case.flops else None
    case.peer = {}
    case.graph = g  # keep the graph (and its memory pool) alive
    case.eager = fn  # and the eager callable: its default arguments own the tensors the graph uses
    return case


def _kernel_case(A: torch.Tensor, device, **kw) -> Case:
    """A row for one Metal kernel whose main input is ``A`` (the row's dtype and shape)."""
    return Case(device=device, dtype=A.dtype, shape=tuple(A.shape), ours_name="Metal kernel", **kw)


def _randn(shape, dtype, device, seed):
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g, device=device)


def _small_cases(device, quick):
    out = []
    batch = 10**5 if quick else 10**7
    lib = load_library("small", device)
    group = 64  # mpslinalg.small.program._GROUP: the host launches groups of this size
    threads = -(-batch // group) * group
    for dtype, tag in ((torch.float32, "f32"), (torch.complex64, "c64")):  # kernel_name() tags
        for n in (1, 2, 3, 4):
            A = _randn((batch, n, n), dtype, device, n)
            X = torch.empty_like(A)
            info = torch.empty(batch, dtype=torch.int32, device=device)
            mant = torch.empty(batch, dtype=dtype, device=device)
            expo = torch.empty(batch, dtype=torch.int32, device=device)
            for load in ("direct", "staged"):  # the load variants (mpslinalg.small.TUNING.load)
                k_inv = getattr(lib, f"small_inv_{load}_{tag}_{n}")
                peer = {"torch.linalg.inv": (lambda A=A: torch.linalg.inv_ex(A))} if n >= 3 else {}
                out.append(
                    _kernel_case(
                        A,
                        device,
                        name=f"small_inv_{load}_{tag}_{n} batch {batch:.0e}",
                        workload="camera poses / homographies",
                        ours=lambda k=k_inv, A=A, X=X, info=info: k(
                            A, X, info, batch, threads=threads, group_size=group
                        ),
                        peer=peer if load == "direct" else {},  # the peer once per shape
                        bytes_moved=A.nbytes + X.nbytes + info.nbytes,
                    )
                )
                k_det = getattr(lib, f"small_det_{load}_{tag}_{n}")
                out.append(
                    _kernel_case(
                        A,
                        device,
                        name=f"small_det_{load}_{tag}_{n} batch {batch:.0e}",
                        workload="homography orientation / scale",
                        ours=lambda k=k_det, A=A, m=mant, e=expo, info=info: k(
                            A, m, e, info, batch, threads=threads, group_size=group
                        ),
                        peer={"torch.linalg.det": (lambda A=A: torch.linalg.det(A))}
                        if n == 4 and load == "direct"
                        else {},
                        bytes_moved=A.nbytes + mant.nbytes + expo.nbytes + info.nbytes,
                    )
                )
            B = _randn((batch, n, 1), dtype, device, 10 + n)
            XB = torch.empty_like(B)
            k_sol = getattr(lib, f"small_solve_{tag}_{n}")
            out.append(
                _kernel_case(
                    A,
                    device,
                    name=f"small_solve_{tag}_{n} batch {batch:.0e}, 1 RHS",
                    workload="RANSAC / pose refinement",
                    ours=lambda k=k_sol, A=A, B=B, X=XB, info=info: k(
                        A, B, X, info, batch, 1, threads=batch, group_size=group
                    ),
                    peer={"torch.linalg.solve": (lambda A=A, B=B: torch.linalg.solve_ex(A, B))}
                    if n == 4
                    else {},
                    bytes_moved=A.nbytes + B.nbytes + XB.nbytes + info.nbytes,
                )
            )
            del A
    return out


def _triangular_cases(device, quick):
    from mpslinalg.triangular import kernels as triangular

    out = []
    bsz = 1024 if quick else 16384
    n = 64
    for dtype in (torch.float32, torch.complex64):
        for nb in (16, 32):
            A = _randn((bsz, n, n), dtype, device, nb) + 4 * torch.eye(n, dtype=dtype, device=device)
            nblk = n // nb
            blk = bsz * nblk * nb * nb * A.element_size()
            out.append(
                _kernel_case(
                    A,
                    device,
                    name=f"{kernel_name('trtri_diag', dtype)} {bsz}x{n}x{n} nb={nb}",
                    workload="DeltaNet chunk triangles",
                    ours=lambda A=A, nb=nb: triangular._trtri_diag_metal(A, nb, False, True),
                    peer={
                        "torch.linalg.inv (blocks)": (
                            lambda A=A, nb=nb: torch.linalg.inv_ex(triangular._diag_blocks(A, nb).tril())
                        )
                    },
                    bytes_moved=3 * blk,  # read the diagonal blocks, write D and the inverse blocks
                    flops=bsz * nblk * (nb**3 / 3) * (8 if dtype.is_complex else 2) / 2,
                )
            )
    # trsm_small (issue 16) as the library launches it; its argument buffer is a device tensor made
    # once (a Python list is staged through a pinned host buffer per launch: not for graph capture)
    lib = load_library("triangular", device)
    tuned_mma = triangular.TUNING.small_mma
    for dtype, nmat, k, unit, mma, what in (
            (torch.float32, 4096, 64, False, False, "batched 64x64 solves"),
            (torch.float32, 512, 128, True, False, "DeltaNet [1,32,16,64,64] unit"),
            (torch.complex64, 4096, 64, False, False, "batched 64x64 solves"),
            (torch.float32, 4096, 64, False, True, "batched 64x64 solves, simdgroup_matrix variant")):
        nmat = min(nmat, 512) if quick else nmat
        A = _randn((nmat, n, n), dtype, device, k).tril(-1) / n + 2 * torch.eye(n, dtype=dtype, device=device)
        B = _randn((nmat, n, k), dtype, device, k + 1)
        X = torch.empty_like(B)
        triangular.TUNING.small_mma = mma  # the launch shape is fixed here, once
        try:
            kname, tensors, prm, threads, group = triangular._trsm_small_launch(A, B, X, False, unit)
        finally:
            triangular.TUNING.small_mma = tuned_mma
        arg = torch.tensor(prm, dtype=torch.int64, device=device)
        kern = getattr(lib, kname)
        out.append(
            _kernel_case(
                A,
                device,
                name=f"{kname} {nmat}x{n}x{n} {k} RHS{' unit' if unit else ''}",
                workload=what,
                ours=lambda f=kern, t=tensors, a=arg, th=threads, g=group, keep=(A, B, X): f(
                    *t, a, threads=th, group_size=g
                ),
                peer={"torch.linalg.solve_triangular": (
                    lambda A=A, B=B, u=unit: torch.linalg.solve_triangular(A, B, upper=False, unitriangular=u))},
                bytes_moved=A.nbytes // 2 + B.nbytes + X.nbytes,
                flops=nmat * n * n * k * (4 if dtype.is_complex else 1),
            )
        )
    return out


def _lu_cases(device, quick):
    from mpslinalg.lu import kernels as lu_kernels
    from mpslinalg.lu.kernels import _MetalKernels

    out = []
    shapes = [
        (torch.complex64, 4096 if quick else 65536, 32, 1, "VMC slogdet 4096 walkers x 16 dets"),
        (torch.float32, 2048, 9, 1, "RANSAC DLT 2048 x 9x9"),
        (torch.float32, 4096 if quick else 65536, 32, 1, "batched 32x32 LU"),
        (torch.float32, 4096 if quick else 65536, 32, 2, "batched 32x32 LU, two rows per lane"),
    ]
    tuned_rows = lu_kernels.TUNING.small_rows
    for dtype, batch, n, rows, workload in shapes:
        A = _randn((batch, n, n), dtype, device, n)
        piv = torch.empty(batch, n, dtype=torch.int32, device=device)
        info = torch.empty(batch, dtype=torch.int32, device=device)
        lu_kernels.TUNING.small_rows = rows  # read at each launch: restored below, set per row
        kern = _MetalKernels(torch.device(device), dtype)
        cplx = dtype.is_complex
        W = lu_kernels._small_lanes(n)
        host = kernel_name("lu_small", dtype, W, lu_kernels.TUNING.small_stage, *((rows,) if rows > 1 else ()))

        def small(k=kern, A=A, piv=piv, info=info, rows=rows):
            lu_kernels.TUNING.small_rows = rows
            try:
                k.small(A, piv, info)  # in place (a factored matrix is factored again: same work)
            finally:
                lu_kernels.TUNING.small_rows = tuned_rows

        out.append(
            _kernel_case(
                A,
                device,
                name=f"{host} {batch}x{n}x{n}",
                workload=workload,
                ours=small,
                peer={"torch.linalg.lu_factor_ex": (lambda A=A: torch.linalg.lu_factor_ex(A))},
                bytes_moved=2 * A.nbytes + piv.nbytes + info.nbytes,
                flops=batch * (2 / 3) * n**3 * (4 if cplx else 1),
            )
        )
    lu_kernels.TUNING.small_rows = tuned_rows
    # the fused factor + solve of RANSAC (lu_small_solve): 2048 x 9x9, one right-hand side
    A, B = _randn((2048, 9, 9), torch.float32, device, 9), _randn((2048, 9, 1), torch.float32, device, 10)
    X, info = torch.empty_like(B), torch.empty(2048, dtype=torch.int32, device=device)
    kern = _MetalKernels(torch.device(device), torch.float32)
    out.append(
        _kernel_case(
            A,
            device,
            name=f"{kernel_name('lu_small_solve', torch.float32, 16, 1, lu_kernels.TUNING.small_stage)} 2048x9x9 k=1",
            workload="RANSAC DLT 2048 x 9x9",
            ours=lambda k=kern, A=A, B=B, X=X, info=info: k.small_solve(A, B, X, info),
            peer={"torch.linalg.solve_ex": (lambda A=A, B=B: torch.linalg.solve_ex(A, B))},
            bytes_moved=A.nbytes + B.nbytes + X.nbytes + info.nbytes,
            flops=2048 * ((2 / 3) * 9**3 + 2 * 9**2),
        )
    )
    # panel and row interchanges of the blocked LU: 64 matrices of 1024 x 1024, panel width 32
    for dtype in (torch.float32, torch.complex64):
        B, M, w = (8 if quick else 64), 1024, 32
        A = _randn((B, M, M), dtype, device, 99)
        piv = torch.empty(B, M, dtype=torch.int32, device=device)
        info = torch.zeros(B, dtype=torch.int32, device=device)
        kern = _MetalKernels(torch.device(device), dtype)
        es = A.element_size()
        out.append(
            _kernel_case(
                A,
                device,
                name=f"lu_panel_{'c64' if dtype.is_complex else 'f32'} {B}x{M}x{M} width {w}",
                workload="blocked LU panel",
                ours=lambda k=kern, A=A, piv=piv, info=info, w=w: k.panel(A, piv, info, 0, w),
                bytes_moved=2 * B * M * w * es,
                flops=B * (M * w * w - w**3 / 3) * (4 if dtype.is_complex else 1),
            )
        )
        # pivots of a panel: row i swaps with a distinct row below the panel (worst case: 2w rows)
        pv = (w + torch.arange(w, device=device) * ((M - w) // w)).int() + 1  # 1-based
        piv2 = torch.zeros(B, M, dtype=torch.int32, device=device)
        piv2[:, :w] = pv
        # the blocked LU's tall-panel kernels (several groups per panel): lu_panel_look (k columns
        # per dispatch) and lu_panel_step (one column per dispatch), the same panel
        k = kern.look_k(M, 0, w)
        if k:
            bufs = (torch.empty(B, M, w, dtype=dtype, device=device), torch.empty(B, M, w, dtype=dtype, device=device))
            out.append(
                _kernel_case(
                    A,
                    device,
                    name=f"{kernel_name('lu_panel_look', dtype, k, kern.look_slots)} {B}x{M}x{M} width {w}"
                         f" ({-(-w // k)} dispatches)",
                    workload="blocked LU tall panel",
                    ours=lambda kern=kern, A=A, piv=piv, info=info, w=w, bufs=bufs: kern.panel_look(
                        A, piv, info, 0, w, bufs),
                    bytes_moved=2 * B * M * w * es,
                    flops=B * (M * w * w - w**3 / 3) * (4 if dtype.is_complex else 1),
                )
            )
        # issue 35: the same tall panel by ONE group of TUNING.panel_tall_threads in one dispatch
        out.append(
            _kernel_case(
                A,
                device,
                name=f"{kernel_name('lu_panel_tall', dtype)} {B}x{M}x{M} width {w} (1 dispatch)",
                workload="blocked LU tall panel",
                ours=lambda kern=kern, A=A, piv=piv, info=info, w=w: kern.panel_tall(A, piv, info, 0, w),
                bytes_moved=2 * B * M * w * es,
                flops=B * (M * w * w - w**3 / 3) * (4 if dtype.is_complex else 1),
            )
        )
        scratch = kern.panel_scratch(A, w)
        out.append(
            _kernel_case(
                A,
                device,
                name=f"{kernel_name('lu_panel_step', dtype)} {B}x{M}x{M} width {w} ({w + 1} dispatches)",
                workload="blocked LU tall panel",
                ours=lambda kern=kern, A=A, piv=piv, info=info, w=w, sc=scratch: kern.panel_steps(
                    A, piv, info, 0, w, sc),
                bytes_moved=2 * B * M * w * es,
                flops=B * (M * w * w - w**3 / 3) * (4 if dtype.is_complex else 1),
            )
        )
        out.append(
            _kernel_case(
                A,
                device,
                name=f"{kernel_name('lu_laswp_block', dtype)} {B}x{M}x{M} {w} swaps, both sides of the panel",
                workload="blocked LU row interchanges",
                ours=lambda kern=kern, A=A, piv=piv2, w=w: kern.swap_around(A, piv, 0, w, w),
                bytes_moved=2 * B * (2 * w) * (M - w) * es,
            )
        )
        out.append(
            _kernel_case(
                A,
                device,
                name=f"lu_laswp_{'c64' if dtype.is_complex else 'f32'} {B}x{M}x{M} {w} swaps",
                workload="blocked LU row interchanges",
                ours=lambda k=kern, A=A, piv=piv2, w=w, M=M: k.swap(A, piv, 0, w, w, M - w),
                bytes_moved=2 * B * (2 * w) * (M - w) * es,
            )
        )
    return out


def _qr_cases(device, quick):
    """qr_small (whole 32x32 matrices, one simdgroup each) and qr_panel (64 x 1024 x 1024, width 32)
    through mpslinalg.qr.kernels._MetalKernels, as the QR family calls them."""
    from mpslinalg.qr.kernels import _MetalKernels

    out = []
    for dtype in (torch.float32, torch.complex64):
        cplx = dtype.is_complex
        batch, n = (512 if quick else 4096), 32
        A = _randn((batch, n, n), dtype, device, 41)
        tau = torch.empty(batch, n, dtype=dtype, device=device)
        kern = _MetalKernels(torch.device(device), dtype)
        out.append(
            _kernel_case(
                A,
                device,
                name=f"{kernel_name('qr_small', dtype)} {batch}x{n}x{n}",
                workload="batched small QR (camera calibration, least squares)",
                ours=lambda k=kern, A=A, tau=tau: k.small(A, tau),  # in place (same work every call)
                peer={"torch.geqrf": (lambda A=A: torch.geqrf(A))},
                bytes_moved=2 * A.nbytes + tau.nbytes,
                flops=batch * (4 / 3) * n**3 * (4 if cplx else 1),
            )
        )
        B, M, w = (8 if quick else 64), 1024, 32
        A = _randn((B, M, M), dtype, device, 42)
        tau = torch.empty(B, M, dtype=dtype, device=device)
        es = A.element_size()
        out.append(
            _kernel_case(
                A,
                device,
                name=f"{kernel_name('qr_panel', dtype)} {B}x{M}x{M} width {w}",
                workload="blocked QR panel",
                ours=lambda k=kern, A=A, tau=tau, w=w: k.panel(A, tau, 0, w),
                # read and write the panel, write V (the panel's reflectors) and T
                bytes_moved=3 * B * M * w * es + B * w * w * es,
                flops=B * 2 * w * w * (M - w / 3) * (4 if cplx else 1),
            )
        )
    return out


def _svd_cases(device, quick):
    """svd_jacobi_small (whole 32x32 matrices in threadgroup memory, sweeps until converged) and
    svd_jacobi_round (one sweep of 63 round dispatches on 64x64 matrices), as the SVD family calls
    them. Jacobi rotates its input in place: each call first restores it from a copy (included in
    the time and in the bytes), so every call does the same work."""
    svd_mod = importlib.import_module("mpslinalg.svd")
    lib = load_library("svd", device)
    out = []
    for dtype in (torch.float32, torch.complex64):
        cplx = dtype.is_complex
        u = 2.0**-24
        # svd_jacobi_small: the sweeps a batch needs (the kernel stops per matrix), found untimed
        batch, n = (512 if quick else 4096), 32
        X0 = _randn((batch, n, n), dtype, device, 51)
        X, V = torch.empty_like(X0), torch.empty_like(X0)
        rot = torch.zeros(batch, dtype=torch.int32, device=device)
        kern = getattr(lib, kernel_name("svd_jacobi_small", dtype))
        tol, ctol = math.sqrt(n) * u, 2 * n * u

        def small(k=kern, X=X, X0=X0, V=V, rot=rot, n=n, sweeps=30, tol=tol, ctol=ctol):
            X.copy_(X0)
            k(X, V, rot, n, sweeps, tol, ctol, 1, threads=X.shape[0] * 32, group_size=32)

        sweeps = 30
        for s in range(1, 31):  # the fewest sweeps after which no matrix still rotates
            small(sweeps=s)
            if int(rot.sum()) == 0:
                sweeps = s
                break
        # per sweep: n(n-1)/2 pairs, 3 length-n dot products + 2 rotations of length n (X and V)
        pair_flops = (3 * 2 * n + 2 * 6 * n) * (4 if cplx else 1)
        out.append(
            _kernel_case(
                X0,
                device,
                name=f"{kernel_name('svd_jacobi_small', dtype)} {batch}x{n}x{n} ({sweeps} sweeps, with V)",
                workload="batched small SVD (pose estimation, PCA of patches)",
                ours=small,
                peer={"torch.linalg.svd": (lambda X0=X0: torch.linalg.svd(X0))},
                bytes_moved=4 * X0.nbytes + V.nbytes,  # the restore (read + write), X read + written, V
                flops=batch * sweeps * (n * (n - 1) / 2) * pair_flops,
            )
        )
        # svd_jacobi_round: one sweep = n - 1 dispatches, memory-bound (each reads and writes X, V)
        batch, n = (128 if quick else 1024), 64
        X0 = _randn((batch, n, n), dtype, device, 52)
        X, V = torch.empty_like(X0), torch.empty_like(X0)
        flags = torch.zeros(batch, n // 2, dtype=torch.int32, device=device)
        kern = getattr(lib, kernel_name("svd_jacobi_round", dtype))
        g = svd_mod.TUNING.round_threads

        tol, ctol = math.sqrt(n) * u, 2 * n * u

        def sweep(k=kern, X=X, X0=X0, V=V, flags=flags, n=n, g=g, tol=tol, ctol=ctol):
            X.copy_(X0)
            for r in range(n - 1):
                k(X, V, flags, n, n, r, tol, ctol, 1, threads=X.shape[0] * (n // 2) * g, group_size=g)

        out.append(
            _kernel_case(
                X0,
                device,
                name=f"{kernel_name('svd_jacobi_round', dtype)} {batch}x{n}x{n} one sweep ({n - 1} dispatches, with V)",
                workload="batched SVD beyond 32x32 (Jacobi rounds)",
                ours=sweep,
                bytes_moved=2 * X0.nbytes + (n - 1) * 2 * (X.nbytes + V.nbytes),
            )
        )
    return out


def cases(device: torch.device, quick: bool) -> list[Case]:
    if torch.device(device).type != "cuda":
        raise SystemExit("bench_roofline measures the Metal kernels on an NVIDIA GPU: pass --device cuda")
    out = []
    only = os.environ.get("ROOFLINE_FAMILIES")  # e.g. "small": only those families' rows
    for make in (_small_cases, _triangular_cases, _lu_cases, _qr_cases, _svd_cases):
        if only and make.__name__.strip("_").removesuffix("_cases") not in only.split(","):
            continue
        try:
            made = make(device, quick)
        except Exception as exc:  # noqa: BLE001 - a family whose kernels do not build yet
            print(f"[bench_roofline] {make.__name__}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        rows = os.environ.get("ROOFLINE_ROWS", "both")  # both | eager | graph
        for c in made:
            if rows != "graph":
                out.append(c)  # eager: what a caller sees, with the peers
            if not quick and rows != "eager":
                g = copy.copy(c)
                try:
                    out.append(_graphed(g))
                except Exception as exc:  # noqa: BLE001 - report, keep the eager row
                    print(f"[bench_roofline] graph capture of {c.name}: {exc}", file=sys.stderr)
    return out


def kernel_resources() -> dict[str, dict]:
    """ptxas' report (sm_90) for every kernel of every family: {host name: {registers, stack_bytes,
    spill_store_bytes, spill_load_bytes, shared_bytes}}, from the cuda target's build manifests
    (built here with clang, or read from MPSLINALG_CUBIN_DIR on a GPU machine)."""
    import json

    from mpslinalg import emulator
    from mpslinalg.emulator.sources import metal_dir, metal_source

    res = {}
    # a family's one file or its kernel groups (metal/lu_panel.metal, ...): one library each
    sources = [(fam, p.stem) for fam in FAMILIES for p in sorted(metal_dir().glob("*.metal"))
               if p.stem.split("_")[0] == fam]
    for fam, source in sources:
        try:
            lib = emulator.compile_shader(metal_source(source), target="cuda")
        except Exception as exc:  # noqa: BLE001 - report the source, keep the others
            print(f"[bench_roofline] resources of {source}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        man = json.loads(pathlib.Path(lib._runner.path).read_text())
        for k in man["kernels"]:
            res[k["meta"]["name"]] = dict(k.get("resources", {}).get("sm_90", {}), family=fam)
    return res


def _resource_cells(r: dict) -> str:
    return (f"{r.get('registers', '?')} | {r.get('stack_bytes', '?')} | "
            f"{r.get('spill_store_bytes', '?')}/{r.get('spill_load_bytes', '?')} | {r.get('shared_bytes', 0)}")


def resources_table(json_path: pathlib.Path) -> str:
    """Markdown: each kernel's roofline fraction (graph rows) beside what ptxas says limits it."""
    import json

    res = kernel_resources()
    rows = [
        "| kernel row | roofline | registers | stack bytes/thread | spills (st/ld) | static shared |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c in json.loads(json_path.read_text())["cases"]:
        if "[graph" not in c["name"]:
            continue
        r = res.get(c["name"].split()[0], {})  # a row's first word is its kernel's host name
        fr = (c.get("roofline") or {}).get("fraction")
        rows.append(
            f"| {c['name']} | {fr * 100:.0f}% {(c.get('roofline') or {}).get('bound', '')} | {_resource_cells(r)} |"
            if fr is not None
            else f"| {c['name']} | - | {_resource_cells(r)} |"
        )
    return "\n".join(rows) + "\n"


def all_resources_table() -> str:
    """Markdown: registers, stack, spills and static shared memory of every kernel (no GPU needed)."""
    rows = [
        "| family | kernel | registers | stack bytes/thread | spills (st/ld) | static shared |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, r in sorted(kernel_resources().items(), key=lambda kv: (FAMILIES.index(kv[1]["family"]), kv[0])):
        rows.append(f"| {r['family']} | {name} | {_resource_cells(r)} |")
    return "\n".join(rows) + "\n"


def main() -> int:
    args = sys.argv[1:]
    if "--resources" in args:  # ptxas' resources of every kernel, no GPU: where clang is
        print(all_resources_table())
        return 0
    rc = cli(cases, family="roofline")
    out = pathlib.Path(args[args.index("--out") + 1] if "--out" in args else "results")
    quick = "--quick" in args
    js = out / f"roofline_cuda{'_quick' if quick else ''}.json"
    if js.exists():
        table = resources_table(js)
        (out / f"roofline_kernels_cuda{'_quick' if quick else ''}.md").write_text(table)
        print(table)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
