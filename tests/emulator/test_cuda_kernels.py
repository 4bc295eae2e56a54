"""The cuda target on a real GPU: dispatch fidelity, no host syncs, faults, race checking, and the
families' Metal kernels behind the public ops (``MPSLINALG_BACKEND=emulator`` on CUDA tensors).

Marked ``cuda`` (skipped without a CUDA device); run on the H200 by ``scripts/gpu_check.sh``,
which also runs the ``family_*`` tests under ``compute-sanitizer --tool racecheck/synccheck``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.cuda

ROOT = Path(__file__).resolve().parents[2]
KERNELS = Path(__file__).resolve().parent / "kernels"
U32 = 2.0**-24  # unit roundoff of float32
PASS = 30.0  # LAPACK's pass mark for test ratios (TESTING/ctest.in)


def _lib(name: str):
    from mpslinalg import emulator

    return emulator.compile_shader((KERNELS / f"{name}.metal").read_text(), target="cuda")


@pytest.fixture(autouse=True)
def _needs_cuda(real_clang_for_cuda):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (torch.cuda.is_available() is False)")


# ---------------------------------------------------------------------------------------------
# dispatch fidelity: every thread-position attribute as Metal's dispatchThreads defines it
# ---------------------------------------------------------------------------------------------
def _expected_ids(threads, group) -> torch.Tensor:
    """The 24 values grid_ids writes per thread, from Metal's definitions (edge groups smaller)."""
    grid = (list(threads) + [1, 1])[:3]
    req = (list(group) + [1, 1])[:3]
    ngroups = [-(-g // t) for g, t in zip(grid, req)]
    out = torch.empty(grid[2], grid[1], grid[0], 24, dtype=torch.int64)
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                p = (x, y, z)
                tg = [p[d] // req[d] for d in range(3)]
                tpitg = [p[d] % req[d] for d in range(3)]
                act = [min(req[d], grid[d] - tg[d] * req[d]) for d in range(3)]
                tiitg = tpitg[0] + act[0] * (tpitg[1] + act[1] * tpitg[2])
                out[z, y, x] = torch.tensor(
                    [*p, *tpitg, *tg, *act, *req, *ngroups, *grid, tiitg, tiitg % 32, tiitg // 32]
                )
    return out.reshape(-1, 24)


@pytest.mark.parametrize(
    "threads,group", [([70], [32]), ([37, 5], [8, 4]), ([9, 7, 5], [4, 2, 3]), ([1000], [256])]
)
def test_grid_attributes(threads, group):
    n = 1
    for t in threads:
        n *= t
    out = torch.full((n * 24,), 0xFFFF, dtype=torch.int32, device="cuda")
    _lib("basics").grid_ids(out, threads=threads, group_size=group)
    # integers: the GPU must reproduce Metal's dispatchThreads model exactly
    assert torch.equal(out.cpu().view(n, 24).long(), _expected_ids(threads, group))


def test_barrier_kernel_with_edge_group_launched_exactly():
    """``histogram`` has barriers: 1000 threads in groups of 256 -> 3 full groups and one of 232,
    each launched with its real shape, so the edge group's barrier is reached by all its threads."""
    g = torch.Generator().manual_seed(7)
    v = torch.randint(0, 10, (1000,), generator=g, dtype=torch.int32)
    hist = torch.zeros(10, dtype=torch.int32, device="cuda")
    total = torch.zeros(1, dtype=torch.int32, device="cuda")
    _lib("basics").histogram(v.cuda(), hist, total, group_size=256)
    assert torch.equal(hist.cpu(), torch.bincount(v, minlength=10).int())
    assert total.item() == 1000


def test_kernels_are_enqueued_without_host_sync():
    """A launch is stream-ordered work only: torch's sync debug mode raises on any host sync."""
    lib = _lib("binding")
    x = torch.zeros(1 << 16, device="cuda")
    A = torch.randn(4, 16, 16, device="cuda")
    ipiv = torch.zeros(4, 16, dtype=torch.int32, device="cuda")
    info = torch.zeros(4, dtype=torch.int32, device="cuda")
    lu = _lib("lu_small")
    lib.fill(x, 1.0)  # load the modules first (loading may synchronise once)
    lu.lu16(A, ipiv, info, 16, threads=[16, 64], group_size=[16, 16])
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        lib.fill(x, 2.0)
        lu.lu16(A, ipiv, info, 16, threads=[16, 64], group_size=[16, 16])
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert x.sum().item() == 2.0 * x.numel()


def test_side_stream_ordering():
    """Kernels go to torch's *current* stream: work on a side stream is ordered after its fill."""
    lib = _lib("binding")
    s = torch.cuda.Stream()
    x = torch.zeros(1 << 20, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        lib.fill(x, 3.0)
        y = x * 2  # same stream: must see the fill
    s.synchronize()
    assert torch.equal(y, torch.full_like(x, 6.0))


def test_constant_reference_rejects_a_tensor():
    lib = _lib("binding")
    x = torch.zeros(4, device="cuda")
    with pytest.raises(TypeError, match="by value"):
        lib.fill(x, torch.ones(1, device="cuda"))


# ---------------------------------------------------------------------------------------------
# faults: a device trap kills the CUDA context, so it runs in a subprocess
# ---------------------------------------------------------------------------------------------
def _run_py(code: str, env: dict | None = None, timeout: int = 240) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=e,
        cwd=str(ROOT),
    )


def test_out_of_bounds_trap_in_subprocess():
    code = f"""
        import torch
        from mpslinalg import emulator
        lib = emulator.compile_shader(open({str(KERNELS / "faults.metal")!r}).read(), target="cuda")
        x = torch.zeros(8, device="cuda")
        lib.oob_local(x, 4)  # loc[i + 4] with loc of 4 floats: every thread is out of bounds
        torch.cuda.synchronize()
        print("NO FAULT")
    """
    p = _run_py(code)
    assert p.returncode != 0 and "NO FAULT" not in p.stdout, p.stdout + p.stderr
    assert "illegal instruction" in p.stderr.lower() or "launch failure" in p.stderr.lower(), p.stderr
    # this process's context is untouched
    x = torch.zeros(4, device="cuda")
    _lib("binding").fill(x, 1.0)
    assert x.tolist() == [1.0] * 4


# ---------------------------------------------------------------------------------------------
# race checking on the GPU: racecheck finds the planted missing barrier at its .metal line
# ---------------------------------------------------------------------------------------------
def _sanitizer() -> str:
    for c in (shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer"):
        if c and Path(c).exists():
            return c
    pytest.skip("compute-sanitizer (CUDA toolkit) not found")


_LU16 = """
    import torch
    from mpslinalg import emulator
    lib = emulator.compile_shader(open({path!r}).read(), target="cuda")
    torch.manual_seed(0)
    A = torch.randn(8, 16, 16, device="cuda")
    ipiv = torch.zeros(8, 16, dtype=torch.int32, device="cuda")
    info = torch.zeros(8, dtype=torch.int32, device="cuda")
    getattr(lib, {kernel!r})(A, ipiv, info, 16, threads=[16, 128], group_size=[16, 16])
    torch.cuda.synchronize()
"""


def _racecheck(kernel: str) -> subprocess.CompletedProcess:
    code = _LU16.format(path=str(KERNELS / "lu_small.metal"), kernel=kernel)
    cmd = [
        _sanitizer(),
        "--tool",
        "racecheck",
        "--racecheck-report",
        "hazard",
        "--kernel-name",
        "kns=mpsle_k",
        sys.executable,
        "-c",
        textwrap.dedent(code),
    ]
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=e, cwd=str(ROOT))


def test_racecheck_finds_planted_missing_barrier():
    p = _racecheck("lu16_missing_barrier")
    report = p.stdout + p.stderr
    m = re.search(r"RACECHECK SUMMARY: (\d+) hazards", report)
    assert m is not None, report[-3000:]
    assert int(m.group(1)) > 0, report[-3000:]
    assert "lu_small.metal" in report, report[-3000:]  # attributed to the .metal source


def test_racecheck_clean_on_correct_lu():
    p = _racecheck("lu16")
    report = p.stdout + p.stderr
    assert "RACECHECK SUMMARY: 0 hazards displayed" in report, report[-3000:]


# ---------------------------------------------------------------------------------------------
# the families' Metal kernels on the GPU, behind the public ops (backend "emulator")
# ---------------------------------------------------------------------------------------------
def _emulated(fn, *args, **kw):
    import mpslinalg as LA

    with LA.use_backend("emulator"):
        return fn(*args, **kw)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_family_small_inv(dtype, n):
    import mpslinalg as LA
    from reference import metrics

    g = torch.Generator().manual_seed(n)
    A = torch.randn(1000, n, n, generator=g, dtype=dtype)
    X = _emulated(LA.inv, A.cuda()).cpu()
    # LAPACK xGET03 ratio ||I - XA|| / (n ||A|| ||X|| u) < 30
    assert metrics.inverse_ratio(A, X).max().item() < PASS


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 9, 32, 96])  # n > 32: the blocked LU (panel + laswp)
def test_family_solve(dtype, n):
    import mpslinalg as LA
    from reference import metrics

    g = torch.Generator().manual_seed(10 + n)
    batch = 256 if n <= 32 else 4
    A = torch.randn(batch, n, n, generator=g, dtype=dtype)
    B = torch.randn(batch, n, 3, generator=g, dtype=dtype)
    X = _emulated(LA.solve, A.cuda(), B.cuda()).cpu()
    # LAPACK xGET02 ratio ||B - AX|| / (||A|| ||X|| u) < 30 (backward stability)
    assert metrics.solve_ratio(A, X, B).max().item() < PASS


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_family_small_det(dtype, n):
    import mpslinalg as LA

    g = torch.Generator().manual_seed(20 + n)
    A = torch.randn(1000, n, n, generator=g, dtype=dtype)
    d = _emulated(LA.det, A.cuda()).cpu().to(torch.complex128 if dtype.is_complex else torch.float64)
    A64 = A.to(torch.complex128 if dtype.is_complex else torch.float64)
    ref = torch.linalg.det(A64)
    kappa = torch.linalg.cond(A64, 1)
    # LU with partial pivoting: |det~ - det| / |det| <= c n kappa u (first order, Higham 14.6 with
    # the factor of the computed U's diagonal product); c = 30 as LAPACK's pass mark
    err = (d - ref).abs() / ref.abs()
    assert (err <= PASS * n * kappa * U32).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
@pytest.mark.parametrize("upper,unit", [(False, True), (True, False)])
def test_family_solve_triangular(dtype, upper, unit):
    import mpslinalg as LA
    from reference import metrics

    g = torch.Generator().manual_seed(3)
    n, k = 128, 16
    T = torch.randn(8, n, n, generator=g, dtype=dtype) / n**0.5
    T = T + 4 * torch.eye(n, dtype=dtype)  # well-conditioned triangles
    B = torch.randn(8, n, k, generator=g, dtype=dtype)
    X = _emulated(LA.solve_triangular, T.cuda(), B.cuda(), upper=upper, unitriangular=unit).cpu()
    # LAPACK xTRT02 ratio ||B - op(T) X|| / (||op(T)|| ||X|| u) < 30
    r = metrics.triangular_residual_ratio(T, X, B, upper=upper, unitriangular=unit)
    assert r.max().item() < PASS
