"""The cuda target: the same ``.metal`` sources on an NVIDIA GPU (DESIGN §5b).

Build (needs clang >= 17 with the NVPTX target, ``ptxas`` and libdevice, no GPU)::

    pre-passed source + shim/cuda.h + generated launchers
      --clang -x cuda --cuda-device-only -nocudainc -nocudalib (libdevice as builtin bitcode)--> PTX
      --ptxas--> cubin (one per requested sm_XY); the PTX is kept as the fallback (driver JIT)

and a manifest (JSON) next to them: the kernels as the pre-pass read them, the entry point of each
kernel, its parameter layout (read back from the PTX) and ``sizeof`` of each referenced type.
Artifacts are keyed by :func:`source_key` (source, shim, code generators, flags; not the compiler),
so a folder of artifacts built on one machine (``python -m mpslinalg.emulator build --target cuda
--out .cubins``) is used on another that has no compiler at all.

Run (needs a CUDA GPU and ``libcuda``; no compiler): the module is loaded with
``cuModuleLoadData`` (cubin for the device's architecture, else the PTX) and kernels are launched
with ``cuLaunchKernel`` on torch's current stream, without any host synchronisation. A kernel that
uses barriers or simdgroup collectives is launched with exact threadgroup shapes (the edge
threadgroups of a dimension in a launch of their own), so a CUDA block is a Metal threadgroup and
a warp is a simdgroup, and no thread outside the grid waits at a barrier; other kernels run in one
launch whose out-of-grid threads return at once.

Only the leaves differ from the cpu target: the pre-pass, binding rules, checks, lint and cache are
shared (``_library.py``, ``_binding.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

from ._cpu import CXX14_ONLY, _attr_expr, _sizes, _unbound_arg
from ._cuda_run import CudaRunner, CudaToolchainError, launch_plan  # noqa: F401 - re-exported
from ._frontend import Kernel
from ._prepass import PrepassResult
from ._toolchain import (
    SHIM_DIR,
    ShaderCompileError,
    _file_digest,
    _shim_text,
    cache_dir,
    compiler_info,
    compiler_is_zig,
    run_compiler,
)

__all__ = [
    "CudaTarget",
    "CudaRunner",
    "CudaToolchainError",
    "CUDA_FLAGS",
    "DEFAULT_ARCHS",
    "build_artifacts",
    "cubin_dirs",
    "find_libdevice",
    "find_ptxas",
    "launcher_source",
    "source_key",
]

DEFAULT_ARCHS = ("sm_90",)
MANIFEST_VERSION = 1

# -O3; FMA contraction off (as on the cpu target: Metal without fast math is closest to that);
# out-of-bounds indexing of fixed-size arrays traps (the sanitizer flags must go through -Xclang,
# or the driver drops them for the device side); no CUDA headers, no CUDA library.
CUDA_FLAGS = [
    "-x",
    "cuda",
    "--cuda-device-only",
    "-nocudainc",
    "-nocudalib",
    *CXX14_ONLY,  # MSL is C++14-based (as on the cpu target)
    "-O3",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-fno-exceptions",
    "-fno-rtti",
    "-Xclang",
    "-fsanitize=array-bounds",
    "-Xclang",
    "-fsanitize-trap=array-bounds",
    "-gline-tables-only",  # .loc -> compute-sanitizer reports point at .metal lines
    "-Wno-unknown-cuda-version",
]


# ---------------------------------------------------------------------------------------------
# toolchain
# ---------------------------------------------------------------------------------------------
def require_real_clang() -> None:
    """Raise :class:`CudaToolchainError` when the compiler is ziglang's: it has no CUDA mode
    (``language not recognized: 'cuda'``); the cuda target needs a real clang."""
    if compiler_is_zig():
        raise CudaToolchainError(
            "the cuda target needs a real clang (the compiler found is ziglang's, which has no CUDA "
            "mode): install clang >= 17 (`apt-get install -y clang-19`) or set MPSLINALG_CXX, or use "
            "prebuilt artifacts (MPSLINALG_CUBIN_DIR)"
        )


def find_ptxas() -> str:
    """``$MPSLINALG_PTXAS``, ``ptxas`` on PATH, or ``$CUDA_HOME/bin/ptxas``."""
    env = os.environ.get("MPSLINALG_PTXAS")
    if env:
        return env
    found = shutil.which("ptxas")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "ptxas").is_file():
            return str(Path(root) / "bin" / "ptxas")
    raise CudaToolchainError(
        "the emulator's cuda target needs ptxas (CUDA toolkit) to build cubins: install the CUDA "
        "toolkit or set MPSLINALG_PTXAS; or build on another machine with "
        "`python -m mpslinalg.emulator build --target cuda --out DIR` and set MPSLINALG_CUBIN_DIR=DIR"
    )


def find_libdevice() -> str:
    """``$MPSLINALG_LIBDEVICE`` or ``libdevice.10.bc`` of a CUDA toolkit."""
    env = os.environ.get("MPSLINALG_LIBDEVICE")
    if env:
        return env
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda", "/usr/lib/cuda"]
    ptxas = shutil.which("ptxas")
    if ptxas:
        roots.append(str(Path(ptxas).resolve().parent.parent))
    for root in roots:
        if root and (Path(root) / "nvvm" / "libdevice" / "libdevice.10.bc").is_file():
            return str(Path(root) / "nvvm" / "libdevice" / "libdevice.10.bc")
    raise CudaToolchainError(
        "the emulator's cuda target needs libdevice.10.bc (CUDA toolkit, nvvm/libdevice): set "
        "MPSLINALG_LIBDEVICE or CUDA_HOME"
    )


def source_key(source: str, flags: list[str] | None = None) -> str:
    """Artifact key: sha256 of the source, the shim, the code generators and the flags.

    The compiler is deliberately not part of it: artifacts built on a machine with clang are used
    by a GPU machine without one (the manifest records which compiler built them).
    """
    h = hashlib.sha256()
    for part in ("cuda", _shim_text("cuda"), " ".join(CUDA_FLAGS if flags is None else flags), source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def cubin_dirs() -> list[Path]:
    """Where prebuilt artifacts are looked up, in order: ``$MPSLINALG_CUBIN_DIR`` (``os.pathsep``
    separated), the checkout's ``.cubins/``, then the compile cache's ``cuda/`` folder."""
    dirs = [Path(p) for p in os.environ.get("MPSLINALG_CUBIN_DIR", "").split(os.pathsep) if p]
    dirs.append(Path(__file__).resolve().parents[2] / ".cubins")
    dirs.append(cache_dir() / "cuda")
    return dirs


# ---------------------------------------------------------------------------------------------
# launchers
# ---------------------------------------------------------------------------------------------
def _param_kinds(k: Kernel) -> list[dict]:
    """Kernel parameters of the generated entry point after the geometry, one per buffer index.

    ``ptr``: a device address (pointer parameters, ``device T&``); ``val``: the bytes themselves
    (``constant T&`` -> by value: the same bytes as ``setBytes``); ``unused``: a buffer index no
    parameter names (bound, ignored).
    """
    from ._binding import elem_of

    bufs = {p.buffer_index: p for p in k.params if p.kind == "buffer"}
    out = []
    for b in range(max(bufs, default=-1) + 1):
        p = bufs.get(b)
        if p is None:
            out.append({"buffer": b, "kind": "unused", "ctype": "void*"})
        elif p.is_pointer:
            out.append({"buffer": b, "kind": "ptr", "ctype": "void*", "position": p.position})
        elif p.is_reference and p.address_space == "constant" and elem_of(p.base_type) is not None:
            out.append({"buffer": b, "kind": "val", "ctype": p.base_type, "position": p.position})
        elif p.is_reference:  # device T&, or a constant struct (may be bound to a tensor)
            out.append({"buffer": b, "kind": "ptr", "ctype": "void*", "position": p.position})
        else:  # a value parameter with a buffer attribute: rejected at call time, keep it compiling
            out.append({"buffer": b, "kind": "val", "ctype": p.base_type or "long", "position": p.position})
    return out


def entry_name(i: int, name: str = "") -> str:
    """``mpsle_k<i>_<host name>``: unique in the module, and readable in sanitizer/profiler reports."""
    tail = re.sub(r"\W", "_", name)[:120]
    return f"mpsle_k{i}_{tail}" if tail else f"mpsle_k{i}"


def launcher_source(kernels: list[Kernel]) -> str:
    """CUDA C++ appended to the rewritten source: one ``__global__`` entry per kernel."""
    out = [
        "",
        "// ---- generated by mpslinalg.emulator (cuda target) ----",
        "#pragma clang force_cuda_host_device end",
        "static __MPSLE_DEV const uint32_t __mpsle_zero3[3] = {0, 0, 0};",
    ]
    for i, k in enumerate(kernels):
        kinds = _param_kinds(k)
        params = ["mpsle_geom __g"] + [f"{d['ctype']} __b{d['buffer']}" for d in kinds]
        args = []
        by_buffer = {d["buffer"]: d for d in kinds}
        for p in k.params:
            if p.kind == "buffer":
                b = p.buffer_index
                if p.is_pointer:
                    args.append(f"({p.type_text})__b{b}")
                elif p.is_reference and by_buffer[b]["kind"] == "val":
                    args.append(f"__b{b}")
                elif p.is_reference:
                    ptr_t = " ".join("*" if x == "&" else x for x in p.type_text.split())
                    args.append(f"*({ptr_t})__b{b}")
                else:
                    args.append(f"__b{b}")
            elif p.kind == "thread_attr":
                args.append(_attr_expr(p))
            else:
                args.append(_unbound_arg(p))
        bounds = f"__attribute__((launch_bounds({k.max_threads}))) " if k.max_threads else ""
        out.append(f'extern "C" __MPSLE_GLOBAL {bounds}void {entry_name(i, k.name)}({", ".join(params)}) {{')
        out.append("  mpsle_tid __tt;")
        out.append("  const mpsle_tid *__t = &__tt;")
        out.append("  if (!__mpsle_fill(&__tt, __g)) return;")
        out.append(f"  {k.call}({', '.join(args)});")
        out.append("}")
        out.append(
            f'extern "C" __MPSLE_DEV __attribute__((used)) const unsigned long mpsle_sizes_{i}[] = {{{_sizes(k)}}};'
        )
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# PTX reading (entry parameter layout, sizes tables, shared memory)
# ---------------------------------------------------------------------------------------------
_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\((.*?)\)", re.S)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+\w+(?:\[(\d+)\])?")
_PTX_SIZES = {
    "u8": 1,
    "s8": 1,
    "b8": 1,
    "u16": 2,
    "s16": 2,
    "b16": 2,
    "f16": 2,
    "u32": 4,
    "s32": 4,
    "b32": 4,
    "f32": 4,
    "u64": 8,
    "s64": 8,
    "b64": 8,
    "f64": 8,
}
_SIZES = re.compile(r"\.b8\s+mpsle_sizes_(\d+)\[(\d+)\]\s*=\s*\{([^}]*)\}")
_SIZES_U64 = re.compile(r"\.u64\s+mpsle_sizes_(\d+)\[(\d+)\]\s*=\s*\{([^}]*)\}")


def read_ptx(ptx: str) -> tuple[dict[str, list[dict]], dict[int, list[int]]]:
    """(entry -> [{"size", "align"} per parameter], kernel index -> sizeof table)."""
    entries: dict[str, list[dict]] = {}
    for m in _ENTRY.finditer(ptx):
        plist = []
        for pm in _PARAM.finditer(m.group(2)):
            elem = _PTX_SIZES.get(pm.group(2))
            if elem is None:
                raise ShaderCompileError(
                    f"unexpected PTX parameter type .{pm.group(2)} in entry {m.group(1)}"
                )
            count = int(pm.group(3)) if pm.group(3) else 1
            plist.append({"size": elem * count, "align": int(pm.group(1)) if pm.group(1) else elem})
        entries[m.group(1)] = plist
    tables: dict[int, list[int]] = {}
    for m in _SIZES.finditer(ptx):
        raw = bytes(int(x) for x in m.group(3).replace(" ", "").split(",") if x)
        raw = raw.ljust(int(m.group(2)), b"\0")
        tables[int(m.group(1))] = [int.from_bytes(raw[j : j + 8], "little") for j in range(0, len(raw), 8)]
    for m in _SIZES_U64.finditer(ptx):
        vals = [int(x) for x in m.group(3).replace(" ", "").split(",") if x]
        tables[int(m.group(1))] = vals + [0] * (int(m.group(2)) - len(vals))
    return entries, tables


_PTXAS_FN = re.compile(r"Compiling entry function '(\w+)'")
_PTXAS_NUM = {
    "stack_bytes": re.compile(r"(\d+) bytes stack frame"),
    "spill_store_bytes": re.compile(r"(\d+) bytes spill stores"),
    "spill_load_bytes": re.compile(r"(\d+) bytes spill loads"),
    "registers": re.compile(r"Used (\d+) registers"),
    "shared_bytes": re.compile(r"(\d+) bytes smem"),
}


def read_ptxas_info(text: str) -> dict[str, dict[str, int]]:
    """Per entry: registers, stack frame (thread-local arrays that could not live in registers),
    spills and static shared memory, from ``ptxas -v`` (what limits a kernel's roofline)."""
    out: dict[str, dict[str, int]] = {}
    cur = None
    for line in text.splitlines():
        m = _PTXAS_FN.search(line)
        if m:
            cur = out.setdefault(m.group(1), {})
            continue
        if cur is None:
            continue
        for key, rx in _PTXAS_NUM.items():
            mm = rx.search(line)
            if mm:
                cur[key] = int(mm.group(1))
    return out


# ---------------------------------------------------------------------------------------------
# build
# ---------------------------------------------------------------------------------------------
def _archs() -> list[str]:
    env = os.environ.get("MPSLINALG_CUDA_ARCHS", "").strip()
    archs = [a.strip() for a in env.split(",") if a.strip()] if env else list(DEFAULT_ARCHS)
    for a in archs:
        if not re.fullmatch(r"sm_\d+a?", a):
            raise ValueError(f"MPSLINALG_CUDA_ARCHS: {a!r} is not an architecture like sm_90")
    return archs


def build_artifacts(
    pre: PrepassResult, key: str, out_dir: Path, *, archs: list[str] | None = None, name: str = ""
) -> Path:
    """Compile the pre-passed source to PTX and cubins in ``out_dir``; returns the manifest path."""
    require_real_clang()
    archs = list(archs or _archs())
    ptxas = find_ptxas()
    libdevice = find_libdevice()
    out_dir.mkdir(parents=True, exist_ok=True)
    code = pre.source + launcher_source(pre.kernels)
    ptx_arch = min(archs, key=lambda a: int(re.sub(r"\D", "", a)))
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="mpsle-cuda-") as td:
        cu = Path(td) / "kernels.cu"
        cu.write_text(code)
        ptx_path = Path(td) / "kernels.ptx"
        t0 = time.perf_counter()
        run_compiler(
            [
                *CUDA_FLAGS,
                f"--cuda-gpu-arch={ptx_arch}",
                "-Xclang",
                "-mlink-builtin-bitcode",
                "-Xclang",
                libdevice,
                "-I",
                str(SHIM_DIR),
                "-include",
                "cuda.h",
                "-S",
                str(cu),
                "-o",
                str(ptx_path),
            ],
            what="compiling the Metal source for the emulator's cuda target (clang -> PTX)",
        )
        timings["clang_s"] = time.perf_counter() - t0
        ptx = ptx_path.read_text()
        cubins = {}
        resources: dict[str, dict[str, dict]] = {}
        for arch in archs:
            cubin = Path(td) / f"kernels.{arch}.cubin"
            t0 = time.perf_counter()
            proc = _run([ptxas, f"-arch={arch}", "-O3", "-lineinfo", "-v", str(ptx_path), "-o", str(cubin)])
            if proc.returncode != 0:
                raise ShaderCompileError(f"ptxas -arch={arch} failed:\n{proc.stderr.strip()}")
            resources[arch] = read_ptxas_info(proc.stdout + proc.stderr)
            timings[f"ptxas_{arch}_s"] = time.perf_counter() - t0
            cubins[arch] = cubin
        entries, tables = read_ptx(ptx)
        kernels = []
        for i, k in enumerate(pre.kernels):
            ent = entry_name(i, k.name)
            if ent not in entries:
                raise ShaderCompileError(f"entry point {ent} of kernel {k.name!r} missing from the PTX")
            kinds = _param_kinds(k)
            layout = entries[ent]
            if len(layout) != len(kinds) + 1:
                raise ShaderCompileError(
                    f"entry {ent}: {len(layout)} PTX parameters, expected {len(kinds) + 1}"
                )
            for d, lay in zip(kinds, layout[1:]):
                d["size"] = lay["size"]
                d["align"] = lay["align"]
            kernels.append(
                {
                    "resources": {a: r.get(ent, {}) for a, r in resources.items()},
                    "meta": k.to_dict(),
                    "entry": ent,
                    "params": kinds,
                    "geom_size": layout[0]["size"],
                    "sizes": tables.get(i, [0] * len(k.params)),
                }
            )
        manifest = {
            "version": MANIFEST_VERSION,
            "key": key,
            "name": name,
            "archs": archs,
            "ptx_arch": ptx_arch,
            "compiler": compiler_info(),
            "ptxas": _ptxas_version(ptxas),
            "timings": timings,
            "kernels": kernels,
        }
        # write artifacts first, the manifest last (atomically): a manifest means a complete set
        suffix = f".{os.getpid()}.{threading.get_ident()}.tmp"
        for arch, cubin in cubins.items():
            dst = out_dir / f"{key}.{arch}.cubin"
            tmp = dst.with_name(dst.name + suffix)
            shutil.copyfile(cubin, tmp)
            os.replace(tmp, dst)
        dst = out_dir / f"{key}.ptx"
        tmp = dst.with_name(dst.name + suffix)
        tmp.write_text(ptx)
        os.replace(tmp, dst)
        # size + sha256 of each file, checked before use (a truncated copy of a folder is rebuilt)
        manifest["files"] = {
            p.name: _file_digest(p)
            for p in [out_dir / f"{key}.{arch}.cubin" for arch in cubins] + [out_dir / f"{key}.ptx"]
        }
        man = out_dir / f"{key}.json"
        tmp = man.with_name(man.name + suffix)
        tmp.write_text(json.dumps(manifest, indent=1))
        os.replace(tmp, man)
    return man


def _complete(manifest: Path) -> bool:
    """Every file the manifest lists is there with the size and sha256 it was built with
    (manifests from before the checksums were recorded are taken as they are)."""
    try:
        files = json.loads(manifest.read_text()).get("files")
    except (OSError, ValueError):
        return False
    if files is None:
        return True
    try:
        return all(_file_digest(manifest.with_name(n)) == d for n, d in files.items())
    except OSError:
        return False


def _run(cmd: list[str]):
    import subprocess

    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def _ptxas_version(ptxas: str) -> str | None:
    try:
        out = _run([ptxas, "--version"]).stdout
    except OSError:
        return None
    m = re.search(r"release [\d.]+, V[\d.]+", out)
    return m.group(0) if m else None


class CudaTarget:
    """Builds and loads kernel libraries for CUDA tensors (the target protocol of ``_library``)."""

    name = "cuda"
    device_type = "cuda"
    options = frozenset()  # launches are asynchronous on torch's stream: no guard/tsan/timeout
    option_hints = {
        "guard": "; run compute-sanitizer --tool memcheck instead",
        "tsan": "; run compute-sanitizer --tool racecheck instead",
        "timeout": " (launches are asynchronous)",
    }
    supports_fast_math = False

    @staticmethod
    def flags() -> list[str]:
        return list(CUDA_FLAGS)

    @staticmethod
    def key(source: str, flags: list[str]) -> str:
        return source_key(source, flags)

    def build(self, pre: PrepassResult, key: str) -> Path:
        return build_artifacts(pre, key, cache_dir() / "cuda")

    def artifact(self, key: str) -> Path | None:
        dirs = cubin_dirs()
        for d in dirs:
            p = d / f"{key}.json"
            if p.is_file() and _complete(p):
                return p
        if compiler_info() is None:  # a GPU machine without clang: say what to do
            raise CudaToolchainError(
                f"no prebuilt cuda artifact for this source (key {key}) in "
                f"{', '.join(str(d) for d in dirs)} and no clang to build one here: run "
                "`python -m mpslinalg.emulator build --target cuda --out .cubins` on a machine with "
                "clang >= 17 and ptxas (same checkout), then carry .cubins/ here or set MPSLINALG_CUBIN_DIR"
            )
        return None

    @staticmethod
    def kernels(artifact: Path) -> list[Kernel] | None:
        """The kernels recorded in a manifest (no compiler needed)."""
        try:
            man = json.loads(Path(artifact).read_text())
            if man.get("version") != MANIFEST_VERSION:
                return None
            return [Kernel.from_dict(k["meta"]) for k in man["kernels"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def load(self, artifact: Path) -> CudaRunner:
        return CudaRunner(artifact)
