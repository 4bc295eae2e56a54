"""Benchmark of the LDL family (issue 37): Bunch–Kaufman ``ldl_factor`` batched and large,
``ldl_solve``, and the LU family's ``lu_unpack`` (issue 37's fourth op, benchmarked here).

    python benchmarks/bench_ldl.py --device cuda --out results/ --warmup 2 --repeat 10   # the GPU run
    python benchmarks/bench_ldl.py --device cpu --quick --out results/                   # the 2-core CPU

Peers are ``torch.linalg.ldl_factor`` / ``ldl_solve`` / ``torch.lu_unpack`` on the same inputs,
timed in the same run. "ours" is mpslinalg's own implementation at every size
(``table.ours_always``: the front doors would otherwise hand regions outside ``FAMILY.when`` to
torch.linalg). Targets (issue 37, GPU): ldl_factor float32 4096x32x32 >= 2x, 4096^2 >= 1x;
lu_unpack of 4096x64x64 >= 2x. On CUDA, when the emulator's cuda target is available, one row times
the Metal kernel ``ldl_small`` itself on the GPU (4096x32x32: its fraction of copy bandwidth is what
carries over to an Apple GPU). Every factorization row's LAPACK ratio is printed (PASS/FAIL), and
on CUDA each op is checked for host syncs.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root

import torch  # noqa: E402

import mpslinalg  # noqa: E402
from benchmarks.harness import Case, cli, print_host_sync_check  # noqa: E402
from mpslinalg.oplayer import table  # noqa: E402


def _sym(shape: tuple, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(*shape, generator=g, dtype=torch.float64)
    if dtype.is_complex:
        A = torch.complex(A, torch.randn(*shape, generator=g, dtype=torch.float64))
    return (A + A.mT).to(dtype).to(device)


def _tag(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _ours(fn):
    def run():
        with table.ours_always():
            return fn()
    return run


def _emulated(fn):
    def run():
        with mpslinalg.use_backend("emulator"):
            return fn()
    return run


def _ldl_flops(A: torch.Tensor) -> float:
    n = A.shape[-1]
    return A.numel() // (n * n) * (n**3 / 3) * (4 if A.is_complex() else 1)


def _factor_inputs(device: torch.device, quick: bool) -> list[tuple[str, torch.Tensor, bool]]:
    gpu = device.type != "cpu"
    b = 4096 if not quick else 512
    big = 4096 if gpu and not quick else (1024 if gpu else 256)
    return [
        ("KKT batch: 4096 x (32x32) symmetric indefinite", _sym((b, 32, 32), torch.float32, device, 1), False),
        ("complex Hermitian batch", _sym((b, 32, 32), torch.complex64, device, 2), False),
        ("scientific: one dense symmetric indefinite", _sym((big, big), torch.float32, device, 3), False),
    ]


def cases(device: torch.device, quick: bool) -> list[Case]:
    """The issue's workloads on ``device`` (smaller with ``quick``)."""
    out = []
    for workload, A, herm in _factor_inputs(device, quick):
        out.append(Case(
            name=f"ldl_factor {'x'.join(map(str, A.shape))} {_tag(A.dtype)}", workload=workload, device=device,
            dtype=A.dtype, shape=tuple(A.shape),
            ours=_ours(lambda A=A, h=herm: mpslinalg.ldl_factor_ex(A, hermitian=h)),
            peer={"torch.linalg": lambda A=A, h=herm: torch.linalg.ldl_factor_ex(A, hermitian=h)},
            bytes_moved=2 * A.nbytes, flops=_ldl_flops(A)))
    A = _sym((4096 if not quick else 512, 32, 32), torch.float32, device, 4)
    LD, piv, _ = torch.linalg.ldl_factor_ex(A)
    B = torch.randn(A.shape[0], 32, 4, device=device)
    out.append(Case(name=f"ldl_solve {A.shape[0]}x32x32 4 rhs float32", workload="KKT solves", device=device,
                    dtype=A.dtype, shape=tuple(A.shape), ours=_ours(lambda: mpslinalg.ldl_solve(LD, piv, B)),
                    peer={"torch.linalg": lambda: torch.linalg.ldl_solve(LD, piv, B)},
                    bytes_moved=LD.nbytes + 2 * B.nbytes))
    b = 4096 if not quick else 512
    G = torch.randn(b, 64, 64, device=device)
    LU, lpiv = torch.linalg.lu_factor(G)
    out.append(Case(name=f"lu_unpack {b}x64x64 float32", workload="P, L, U of lu_factor", device=device,
                    dtype=G.dtype, shape=tuple(G.shape), ours=_ours(lambda: mpslinalg.lu_unpack(LU, lpiv)),
                    peer={"torch.lu_unpack": lambda: torch.lu_unpack(LU, lpiv)},
                    bytes_moved=4 * LU.nbytes))
    if device.type == "cuda":
        K = _sym((4096 if not quick else 512, 32, 32), torch.float32, device, 5)
        try:
            _emulated(lambda: mpslinalg.ldl.ldl_factor_impl(K[:8], False))()
            out.append(Case(name="metal ldl_small 4096x32x32 float32", workload="the Metal kernel ldl_small "
                            "(emulator cuda target): fraction of copy bandwidth", device=device,
                            dtype=torch.float32, shape=tuple(K.shape),
                            ours=_emulated(lambda: mpslinalg.ldl.ldl_factor_impl(K, False)),
                            peer={"torch.linalg": lambda: torch.linalg.ldl_factor_ex(K)},
                            bytes_moved=2 * K.nbytes, ours_name="metal kernel (emulated)"))
        except Exception as exc:  # the cuda target is optional (issue 7)
            print(f"[bench_ldl] Metal kernel on {device} via the emulator: unavailable ({exc})", file=sys.stderr)
    return out


def _accuracy_report(device: torch.device) -> bool:
    """PASS/FAIL of LAPACK's xSYT01 ratio (< 30) on the first matrices of each factorization row."""
    from reference import metrics

    ok = True
    for _workload, A, herm in _factor_inputs(device, True):
        head = A[:32] if A.ndim == 3 else A[:128, :128]
        with table.ours_always():
            LD, piv, info = mpslinalg.ldl_factor_ex(head, hermitian=herm)
        r, g = metrics.ldl_ratio(head.cpu(), LD.cpu(), piv.cpu(), hermitian=herm)
        good = float(r.max()) < metrics.PASS_RATIO
        ok &= good
        print(f"[bench_ldl] accuracy ldl_factor {tuple(head.shape)} {_tag(A.dtype)}: max ratio {float(r.max()):.3g} "
              f"(growth {float(g.max()):.3g}) {'PASS' if good else 'FAIL'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    status = cli(cases, family="ldl", argv=argv)
    dev = torch.device("cuda" if any("cuda" in a for a in argv) and torch.cuda.is_available() else "cpu")
    if not _accuracy_report(dev):
        status = status or 1
    if dev.type == "cuda":
        A = _sym((512, 32, 32), torch.float32, dev, 1)
        LD, piv, _ = torch.linalg.ldl_factor_ex(A)
        LU, lp = torch.linalg.lu_factor(A)
        checks = {"ldl_factor_ex batched": _ours(lambda: mpslinalg.ldl_factor_ex(A)),
                  "ldl_solve batched": _ours(lambda: mpslinalg.ldl_solve(LD, piv, A[..., :2])),
                  "lu_unpack batched": _ours(lambda: mpslinalg.lu_unpack(LU, lp))}
        if not print_host_sync_check(checks, warmup=True):
            status = status or 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
