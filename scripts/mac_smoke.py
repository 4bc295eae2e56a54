#!/usr/bin/env python
"""Mac smoke test: the first thing to run on an Apple-silicon Mac, with the report attached to an issue.

No machine the project develops on can run Metal (the kernels are tested in the emulator), so this
script checks what only a Mac can show (issue 17):

1. every ``metal/*.metal`` family compiles with ``torch.mps.compile_shader`` and, per kernel, the
   pipeline's ``max_threads_per_threadgroup``, ``thread_execution_width`` and
   ``static_thread_group_memory_length`` (the kernels' compile-time limits must fit them);
2. the Metal language version torch compiles with (``__METAL_VERSION__``): the safe-math pragmas of
   ``metal/scalar.h`` act from 3.2 on;
3. negative-bit and conjugate views bound to kernels give the CPU's answers (Metal ignores strides
   and conj/neg bits: the library must resolve them);
4. the same cases under ``PYTORCH_MPS_FAST_MATH=1`` (in a subprocess: torch reads it once), to see
   which results depend on safe math;
5. the ``mps``-marked tests (``pytest -m mps``).

Usage::

    python scripts/mac_smoke.py [--out mac_smoke_report.md] [--no-tests]

Off a Mac it prints why it cannot run and exits 0 without writing anything.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout: mpslinalg and reference next to scripts/

# The pipeline properties torch's compiled kernels expose (torch >= 2.7).
KERNEL_PROPERTIES = ("max_threads_per_threadgroup", "thread_execution_width", "static_thread_group_memory_length")

VERSION_PROBE = """
#include <metal_stdlib>
kernel void msl_version(device int* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[i] = __METAL_VERSION__;
}
"""


def _split_args(text: str) -> list[str]:
    """Macro arguments: split at top-level commas (not inside parentheses or string literals)."""
    args, depth, cur, quoted = [], 0, "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "([":
            depth += 1
        elif not quoted and ch in ")]":
            depth -= 1
        elif not quoted and ch == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
            continue
        cur += ch
    return [*args, cur.strip()] if cur.strip() or args else []


def _expand_macros(source: str) -> str:
    """The source with its function-like macros expanded (enough of the C preprocessor for the
    instantiation macros: parameters, ``#param`` stringizing, ``__VA_ARGS__``, nesting)."""
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    source = re.sub(r"//[^\n]*", "", source).replace("\\\n", " ")
    defs = {}
    for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)(.*)$", source, re.M):
        defs[m.group(1)] = ([p.strip() for p in m.group(2).split(",") if p.strip()], m.group(3))
    text = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))
    if not defs:
        return text
    call = re.compile(r"\b(" + "|".join(map(re.escape, defs)) + r")\(((?:[^()]|\([^()]*\))*)\)")

    def expand(m: re.Match) -> str:
        params, body = defs[m.group(1)]
        args = _split_args(m.group(2))
        if params and params[-1] == "...":
            named, rest = params[:-1], ", ".join(args[len(params) - 1:])
            body = body.replace("__VA_ARGS__", rest)
        else:
            named = params
        for p, a in zip(named, args):
            body = re.sub(r"#\s*" + p + r"\b", '"' + a + '"', body)
            body = re.sub(r"\b" + p + r"\b", a, body)
        return body

    for _ in range(8):  # nested macros expand level by level
        text, count = call.subn(expand, text)
        if not count:
            break
    return text


def _kernel_names(source: str) -> list[str]:
    """Host names instantiated in an inlined family source (``host_name`` of every explicit
    instantiation, after expanding the instantiation macros; adjacent literals concatenated)."""
    names = []
    for m in re.finditer(r'host_name\(((?:\s*"[^"]*")+)\s*\)', _expand_macros(source)):
        names.append("".join(re.findall(r'"([^"]*)"', m.group(1))))
    return sorted(set(names))


def compile_families() -> list[dict]:
    """Compile every family with torch.mps.compile_shader; one row per kernel with its limits."""
    import torch

    from mpslinalg.kernels import metal_dir, metal_source

    rows = []
    for path in sorted(metal_dir().glob("*.metal")):
        family = path.stem
        t0 = time.perf_counter()
        try:
            lib = torch.mps.compile_shader(metal_source(family))
        except Exception as exc:  # report every family, not just the first failure
            rows.append({"family": family, "kernel": "*", "error": f"{type(exc).__name__}: {exc}"})
            continue
        seconds = time.perf_counter() - t0
        names = _kernel_names(metal_source(family))
        listed = [n for n in dir(lib) if not n.startswith("_")]
        for name in sorted(set(names) | set(listed)):
            row = {"family": family, "kernel": name, "compile_s": round(seconds, 3)}
            try:
                fn = getattr(lib, name)
                for prop in KERNEL_PROPERTIES:
                    row[prop] = getattr(fn, prop, None)
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"
            rows.append(row)
    return rows


def metal_version() -> int | None:
    import torch

    out = torch.zeros(1, dtype=torch.int32, device="mps")
    torch.mps.compile_shader(VERSION_PROBE).msl_version(out, threads=1, group_size=1)
    return int(out.cpu())


def _max_rel(a, b) -> float:
    import torch

    a, b = a.cpu().to(torch.complex128), b.cpu().to(torch.complex128)
    scale = b.abs().max().clamp_min(1e-300)
    return float(((a - b).abs().max() / scale).nan_to_num(float("inf")))


def view_and_nonfinite_cases(device: str = "mps") -> list[dict]:
    """Cases a Mac binds differently from the emulator: neg/conj views, NaN/Inf pivots, entries near
    the float32 range. Each row: our result on ``device`` vs torch's on the CPU (same input).
    (``device="cpu"`` under the emulator backend is how CI keeps this script working.)"""
    import torch

    import mpslinalg as LA

    g = torch.Generator().manual_seed(0)
    rows = []

    def case(name, ours, ref, check):
        try:
            got = ours()
            want = ref()
            rows.append({"case": name, **check(got, want)})
        except Exception as exc:
            rows.append({"case": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"})

    Z = torch.randn(64, 64, dtype=torch.complex64, generator=g)
    B = torch.randn(64, 5, generator=g)
    for label, A in (("neg-bit view (x.conj().imag)", Z.to(device).conj().imag),
                     ("conj view", Z.to(device).conj())):
        Am = A.tril() + 8 * torch.eye(64, device=device)
        Ac = Am.cpu().resolve_conj().resolve_neg()
        Bm = B.to(device).to(Am.dtype)
        case(f"solve_triangular {label}", lambda Am=Am, Bm=Bm: LA.solve_triangular(Am, Bm, upper=False),
             lambda Ac=Ac: torch.linalg.solve_triangular(Ac, B.to(Ac.dtype), upper=False),
             lambda got, want: {"rel_diff": _max_rel(got, want), "ok": _max_rel(got, want) < 1e-4})
    for n in (20, 40):  # torch's CPU LAPACK (MKL) takes the first NaN as pivot from n = 17 on
        A = torch.randn(n, n, generator=g)
        A[5, 0] = float("nan")
        case(f"lu_factor_ex NaN pivot n={n}", lambda A=A: LA.lu_factor_ex(A.to(device)),
             lambda A=A: torch.linalg.lu_factor_ex(A),
             lambda got, want: {"ok": bool((got[1].cpu() == want[1]).all()
                                           and (got[0].cpu().isnan() == want[0].isnan()).all())})
    for n in (3, 40):
        A = torch.randn(n, n, dtype=torch.complex64, generator=g)
        A[0, 0] = complex(2e38, 2e38)  # finite; |Re| + |Im| overflows (issue 17.8)
        case(f"inv near-overflow complex entry n={n}", lambda A=A: LA.inv_ex(A.to(device)).inverse,
             lambda A=A: torch.linalg.inv_ex(A).inverse,
             lambda got, want: {"ok": bool((got.cpu().isnan() == want.isnan()).all())})
    g0 = torch.Generator().manual_seed(0)  # issue 14.5's matrix: X <= 2.9e38 is representable
    A = (torch.randn(70, 70, generator=g0) + 2 * torch.eye(70)) * 1e-38
    b = torch.randn(70, 3, generator=g0)
    case("solve near the bottom of the float32 range", lambda: LA.solve(A.to(device), b.to(device)),
         lambda: torch.linalg.solve(A, b),
         lambda got, want: {"ok": bool(got.cpu().isfinite().all() and want.isfinite().all()),
                            "rel_diff": _max_rel(got, want)})
    x = torch.tensor([float("nan"), float("inf"), 1.0])
    case("isnan/isinf survive (small inv of diag(NaN, inf, 1))", lambda: LA.inv(torch.diag(x).to(device)),
         lambda: torch.linalg.inv(torch.diag(x)),
         lambda got, want: {"ok": bool((got.cpu().isnan() == want.isnan()).all())})
    return rows


def fast_math_cases() -> dict:
    """The cases above in a child process with PYTORCH_MPS_FAST_MATH=1 (torch reads it once)."""
    env = dict(os.environ, PYTORCH_MPS_FAST_MATH="1")
    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import mac_smoke; "
            "print(json.dumps(mac_smoke.view_and_nonfinite_cases()))")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT,
                          timeout=900)
    if proc.returncode != 0:
        return {"error": proc.stderr[-4000:]}
    return {"rows": json.loads(proc.stdout.strip().splitlines()[-1]), "warnings": proc.stderr[-2000:]}


def mps_tests() -> dict:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "mps", "-p", "no:cacheprovider", "tests"],
                          capture_output=True, text=True, cwd=ROOT, timeout=3600)
    return {"returncode": proc.returncode, "tail": proc.stdout[-6000:] + proc.stderr[-2000:]}


def _table(rows: list[dict], cols: list[str]) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="mac_smoke_report.md", help="report file (Markdown; JSON next to it)")
    ap.add_argument("--no-tests", action="store_true", help="skip the mps-marked pytest run")
    args = ap.parse_args(argv)

    import torch

    from mpslinalg.kernels import mps_available

    if platform.system() != "Darwin" or not mps_available():
        print(f"mac_smoke: skipped - needs an Apple-silicon Mac with torch.backends.mps available "
              f"(this is {platform.system()} {platform.machine()}, torch {torch.__version__}, "
              f"mps available: {mps_available()}). Nothing was written.")
        return 0

    report: dict = {
        "platform": platform.platform(), "machine": platform.machine(), "python": sys.version.split()[0],
        "torch": torch.__version__, "PYTORCH_MPS_FAST_MATH": os.environ.get("PYTORCH_MPS_FAST_MATH"),
    }
    report["metal_version"] = metal_version()
    report["kernels"] = compile_families()
    report["cases"] = view_and_nonfinite_cases()
    report["fast_math"] = fast_math_cases()
    report["mps_tests"] = None if args.no_tests else mps_tests()

    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2, default=str))
    md = [f"# mpslinalg Mac smoke report ({time.strftime('%Y-%m-%d %H:%M')})", "",
          f"{report['platform']}, torch {report['torch']}, Python {report['python']}, "
          f"__METAL_VERSION__ = {report['metal_version']} (safe-math pragmas act from 320)", "",
          "## Kernels", "", _table(report["kernels"], ["family", "kernel", *KERNEL_PROPERTIES, "compile_s", "error"]),
          "", "## Views and non-finite input (safe math)", "",
          _table(report["cases"], ["case", "ok", "rel_diff", "error"]), "",
          "## The same with PYTORCH_MPS_FAST_MATH=1", ""]
    fm = report["fast_math"]
    md.append(_table(fm["rows"], ["case", "ok", "rel_diff", "error"]) if "rows" in fm else f"```\n{fm['error']}\n```")
    if report["mps_tests"] is not None:
        md += ["", "## pytest -m mps", "", f"exit code {report['mps_tests']['returncode']}", "",
               "```", report["mps_tests"]["tail"], "```"]
    out.write_text("\n".join(md) + "\n")
    failed = [r for r in report["cases"] if not r.get("ok")]
    print(f"mac_smoke: report written to {out} (and {out.with_suffix('.json')}); "
          f"{len(report['kernels'])} kernels, {len(failed)} failing cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
