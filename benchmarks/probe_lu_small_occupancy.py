"""Probe (H200, issue 16): does ``lu_small`` at 65536 x 32x32 get faster with more simdgroups per
SM, i.e. with ptxas holding its registers down? The Metal source cannot ask for that (Metal has no
occupancy attribute), so this probe edits the built PTX: it keeps the ``lu_small_*_32_1`` entries
of ``lu_small.metal``'s artifact, adds ``.minnctapersm N`` (N threadgroups of 64 threads per SM, i.e. at
most 65536 / (64 N) registers per thread) and lets the driver compile that PTX (JIT), then times
the kernels through the library's own call site (CUDA-graph replay, CUDA events) against the same
PTX without the directive (the JIT baseline) and ``torch.linalg.lu_factor_ex``.

    MPSLINALG_CUBIN_DIR=$PWD/.cubins python benchmarks/probe_lu_small_occupancy.py [N ...] [--opts 3,7,31]

``--opts``: the complex64 rolled variants to probe (lu_small OPT values, e.g. 3 = rolled + fma,
7 = with FREE, 31 = FREE + LOOK + RCP1); without it the unrolled float32 and complex64 kernels,
getf2 arithmetic and fma.

Each setting runs in its own process (a library is loaded once per process). Prints one markdown
table; every timed output is checked first (LAPACK's xGET01 ratio, pass mark 30).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
KERNELS = ["lu_small_f32_32_1", "lu_small_c64_32_1", "lu_small_f32_32_1_1_1", "lu_small_c64_32_1_1_1"]
OPTS: list[int] = []  # --opts: complex64 rolled variants instead


def _top_blocks(ptx: str) -> tuple[str, list[str]]:
    """(header, top-level blocks) of a PTX module: a block starts at a column-0 directive."""
    lines = ptx.splitlines(keepends=True)
    top = re.compile(r"(\.(visible|weak|extern) )?\.(entry|func|global|shared)\b")
    starts = [i for i, ln in enumerate(lines) if top.match(ln)]
    header = "".join(lines[: starts[0]])
    blocks = ["".join(lines[a:b]) for a, b in zip(starts, starts[1:] + [len(lines)])]
    return header, blocks


def trimmed_artifact(out: pathlib.Path, min_blocks: int, man_path: pathlib.Path | None = None) -> None:
    """A copy of lu_small.metal's manifest + PTX in ``out`` with only KERNELS, no cubin (driver JIT)."""
    from mpslinalg.emulator import _cuda
    from mpslinalg.emulator.__main__ import source_text

    if man_path is None:
        key = _cuda.source_key(source_text(ROOT / "metal" / "lu_small.metal"), list(_cuda.CUDA_FLAGS))
        man_path = next(d / f"{key}.json" for d in _cuda.cubin_dirs() if (d / f"{key}.json").is_file())
    man = json.loads(man_path.read_text())
    key = man["key"]
    keep = [k for k in man["kernels"] if k["meta"]["name"] in KERNELS]
    entries = {k["entry"] for k in keep}
    header, blocks = _top_blocks(man_path.with_name(f"{key}.ptx").read_text())
    used = []
    for b in blocks:
        m = re.match(r"\.visible \.entry (\w+)", b)
        if m and m.group(1) not in entries:
            continue
        if m and min_blocks:
            b = re.sub(r"^(\.maxntid [^\n]*\n)", rf"\1.minnctapersm {min_blocks}\n", b, count=1, flags=re.M)
        used.append(b)
    text = header + "".join(used)
    # drop the .func blocks (declarations and bodies) no kept code calls, until none is left
    while True:
        funcs = set(re.findall(r"^\.func (?:\([^)]*\) )?(\w+)", text, re.M))
        dead = {f for f in funcs if not re.search(rf"call[^;]*\b{re.escape(f)}\b", text)}
        if not dead:
            break
        _, blocks = _top_blocks(text)
        text = header + "".join(b for b in blocks if re.match(r"\.func (?:\([^)]*\) )?(\w+)", b) is None
                                 or re.match(r"\.func (?:\([^)]*\) )?(\w+)", b).group(1) not in dead)
    man.update(kernels=keep, archs=[])
    man.pop("files", None)
    (out / f"{key}.ptx").write_text(text)
    (out / f"{key}.json").write_text(json.dumps(man))


def _registers(lib, name: str):
    """Registers per thread of kernel ``name`` as the driver loaded it ("?" if not reachable)."""
    try:
        inner = getattr(lib, "_lib", lib)
        runner = inner.__dict__["_runner"]
        import torch

        names = [k["meta"]["name"] for k in runner.kernels]
        return runner.module(torch.cuda.current_device()).regs[names.index(name)]
    except Exception:  # noqa: BLE001 - a report column, not a result
        return "?"


def measure(min_blocks: int) -> None:
    import torch

    from mpslinalg.lu import kernels as K

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_lu_small as B

    for dtype in (torch.complex64,) if OPTS else (torch.float32, torch.complex64):
        A = B._randn((65536, 32, 32), dtype, 32)
        peer = B.eager_ms(lambda A=A: torch.linalg.lu_factor_ex(A))  # (it does not capture)
        for opt in OPTS or (0, 1):  # OPT values (without --opts: 0 getf2 arithmetic, 1 fma)
            kern = B._kern(dtype, 1)
            LU = A.clone()
            piv = torch.empty(65536, 32, dtype=torch.int32, device="cuda")
            info = torch.empty(65536, dtype=torch.int32, device="cuda")
            launch = B._lu_small_launch(kern, LU, piv, info, 32, 1, 1, opt)
            launch()
            ratio = B._lu_ratio(A, LU, piv)
            name = K.kernel_name("lu_small", dtype, 32, 1, *((1, opt) if opt else ()))
            regs = _registers(K.load_library(K.KERNEL_SOURCES["lu_small"], "cuda"), name)
            t = B.graph_ms(launch)
            print(f"| {name} | {min_blocks or 'none (JIT)'} | {regs} | {t * 1e3:.1f} | {peer * 1e3:.1f} | "
                  f"{peer / t:.2f}x | xGET01 {ratio:.2f} |", flush=True)


def main() -> None:
    args = sys.argv[1:]
    if "--opts" in args:
        i = args.index("--opts")
        OPTS[:] = [int(x) for x in args[i + 1].split(",")]
        KERNELS[:] = [f"lu_small_c64_32_1_1_{o}" for o in OPTS]
        del args[i:i + 2]
    if args and args[0] == "--child":
        measure(int(args[1]))
        return
    print("| kernel | .minnctapersm | registers | ours us (graph) | torch us | vs torch | check |")
    print("|---|---|---|---|---|---|---|")
    for n in [int(x) for x in (args or ["0", "10", "12"])]:
        with tempfile.TemporaryDirectory() as d:
            trimmed_artifact(pathlib.Path(d), n)
            env = dict(os.environ, MPSLINALG_CUBIN_DIR=os.pathsep.join([d, os.environ.get("MPSLINALG_CUBIN_DIR", "")]))
            opts = ["--opts", ",".join(map(str, OPTS))] if OPTS else []
            subprocess.run([sys.executable, __file__, "--child", str(n), *opts], env=env, check=False)


if __name__ == "__main__":
    main()
