"""ThreadSanitizer mode of the CPU target: ``lib.kernel(..., tsan=True)``.

The kernel is compiled with ``-fsanitize=thread`` and launched in a subprocess that has clang's
TSan runtime preloaded (an uninstrumented Python cannot load it in-process). In that build every
GPU thread is a TSan fiber, fiber switches carry no synchronisation, and each barrier or simdgroup
collective is a release + acquire on a sync object of its generation; so TSan reports exactly the
pairs of accesses (at least one a write) that no barrier orders -- the races that ``reverse`` /
``shuffle`` orders find only by luck. Threadgroup memory is a fresh allocation per group (no false
races between groups). Limits: GPU threads are aliased onto 200 TSan fibers (TSan loses races beyond
a few hundred concurrent threads); a group of more than 200 threads gets a second pass with another
aliasing, so that every pair of threads is distinct in one of the passes; a fault inside the
kernel is reported as a failed run, not located; about 1 s extra per call (and pass).

Buffers are copied into the subprocess and back (results land in the caller's tensors).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ._toolchain import cache_dir, compiler_info, find_compiler

__all__ = ["Race", "run_tsan", "tsan_available"]

TSAN_FIBERS = 200  # as in shim/cpu_runtime.c


@dataclass(frozen=True)
class Race:
    """One data race: two accesses to the same address, not ordered by any barrier."""

    first: str  # e.g. "write at shader.metal:57:7"
    second: str

    def __str__(self) -> str:
        return f"{self.first} races with {self.second}"


_CHILD = r"""
import ctypes, json, sys
spec = json.load(open(sys.argv[1]))
lib = ctypes.CDLL(spec["so"])
run = lib.mpsle_entry_run
run.restype = ctypes.c_int
bufs = []
for b in spec["buffers"]:
    data = open(b["file"], "rb").read()
    bufs.append(ctypes.create_string_buffer(data, max(1, len(data))))
ptrs = (ctypes.c_void_p * max(1, len(bufs)))(*[ctypes.addressof(b) for b in bufs])
g = (ctypes.c_uint32 * 3)(*spec["grid"])
t = (ctypes.c_uint32 * 3)(*spec["group"])
err = ctypes.create_string_buffer(1024)
where = (ctypes.c_uint32 * 7)()
addr = ctypes.c_void_p(0)
if spec["alias_div"]:
    lib.mpsle_tsan_set_alias(spec["alias_div"])
rc = run(spec["kernel"], ptrs, g, t, spec["order"], ctypes.c_uint64(spec["seed"]),
         ctypes.c_double(spec.get("timeout", 0.0)), err, 1024, where, ctypes.byref(addr))
for b, spec_b in zip(bufs, spec["buffers"]):
    open(spec_b["file"], "wb").write(b.raw[: spec_b["size"]])
print("MPSLE_RESULT " + json.dumps({"rc": rc, "err": err.value.decode(errors="replace")}))
"""


def _tsan_runtime() -> str:
    cmd = find_compiler()
    out = subprocess.run(
        [*cmd, "-print-file-name=libclang_rt.tsan-x86_64.so"], capture_output=True, text=True
    )
    path = out.stdout.strip()
    if out.returncode != 0 or not os.path.isabs(path) or not os.path.exists(path):
        raise RuntimeError(
            "tsan=True needs clang's ThreadSanitizer runtime (libclang_rt.tsan-x86_64.so), which "
            f"{' '.join(cmd)} does not provide"
        )
    return path


def _symbolizer() -> str | None:
    info = compiler_info() or {}
    cmd = info.get("command") or []
    if cmd:
        d = Path(os.path.realpath(cmd[0])).parent
        s = d / "llvm-symbolizer"
        if s.exists():
            return str(s)
    return None


_ACCESS = re.compile(r"^\s*(Previous )?(read|write|atomic read|atomic write) of size \d+ at \S+ by", re.I)
_FRAME = re.compile(r"^\s*#\d+ .*? (\S+\.metal|\S+\.h):(\d+)(?::(\d+))?")


def parse_reports(stderr: str) -> list[Race]:
    """Races from TSan's report text: the first frame of each of the two accesses in a .metal file
    or one of its headers (frames in the emulator's shim are skipped)."""
    races: list[Race] = []
    for block in stderr.split("WARNING: ThreadSanitizer: data race")[1:]:
        accesses: list[str] = []
        kind = None
        for line in block.splitlines():
            m = _ACCESS.match(line)
            if m:
                kind = m.group(2).lower()
                continue
            f = _FRAME.match(line)
            if f and "/emulator/shim/" in f.group(1).replace("\\", "/"):
                continue  # inside the shim (a simdgroup_matrix load): its caller is the kernel line
            if f and kind is not None:
                loc = f"{Path(f.group(1)).name}:{f.group(2)}" + (f":{f.group(3)}" if f.group(3) else "")
                accesses.append(f"{kind} at {loc}")
                kind = None
            if len(accesses) == 2 or line.startswith("SUMMARY"):
                break
        if len(accesses) == 2:
            r = Race(*accesses)
            if r not in races:
                races.append(r)
    return races


def run_tsan(
    so: Path,
    index: int,
    buffers: list[tuple[int, int, bool]],
    grid,
    group,
    order: int,
    seed: int,
    timeout: float = 0.0,
) -> tuple[int, str, list[Race], str]:
    """Run kernel ``index`` of the TSan build ``so`` once. ``buffers``: (address, nbytes,
    copy_back) per argument; ``order``: the runtime's order code; ``timeout``: seconds per pass
    (0 = none), enforced inside the child like any launch.

    Returns (rc, message, races, raw TSan text).
    """
    n = group[0] * group[1] * group[2]
    # more threads per group than TSan fibers: a second pass with another aliasing (see the runtime)
    passes = [0] if n <= TSAN_FIBERS else [0, -(-n // TSAN_FIBERS)]
    races: list[Race] = []
    raw = ""
    rc, msg = 0, ""
    for k, alias_div in enumerate(passes):
        rc, msg, found, text = _one_pass(
            so, index, buffers, grid, group, order, seed, alias_div, timeout, copy_back=(k == 0)
        )
        raw += text
        races += [r for r in found if r not in races]
        if rc != 0:
            break
    return rc, msg, races, raw


def _one_pass(so, index, buffers, grid, group, order, seed, alias_div, timeout, copy_back):
    with tempfile.TemporaryDirectory(prefix="mpsle-tsan-", dir=cache_dir()) as td:
        spec = {
            "so": str(so),
            "kernel": index,
            "grid": list(grid),
            "group": list(group),
            "order": order,
            "seed": seed & 0xFFFFFFFFFFFFFFFF,
            "alias_div": alias_div,
            "timeout": timeout,
            "buffers": [],
        }
        for i, (ptr, n, _) in enumerate(buffers):
            f = Path(td) / f"buf{i}.bin"
            f.write_bytes(ctypes.string_at(ptr, n) if n else b"")
            spec["buffers"].append({"file": str(f), "size": n})
        (Path(td) / "spec.json").write_text(json.dumps(spec))
        (Path(td) / "child.py").write_text(_CHILD)
        env = dict(os.environ)
        env["LD_PRELOAD"] = _tsan_runtime()
        opts = [
            "halt_on_error=0",
            "exitcode=0",
            "report_signal_unsafe=0",
            "history_size=4",
            "second_deadlock_stack=0",
            "report_thread_leaks=0",
            "io_sync=0",
        ]
        sym = _symbolizer()
        if sym:
            opts.append(f"external_symbolizer_path={sym}")
        env["TSAN_OPTIONS"] = " ".join(opts)
        proc = subprocess.run(
            [sys.executable, str(Path(td) / "child.py"), str(Path(td) / "spec.json")],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        result = None
        for line in proc.stdout.splitlines():
            if line.startswith("MPSLE_RESULT "):
                result = json.loads(line[len("MPSLE_RESULT ") :])
        if result is None:
            tail = "\n".join((proc.stderr or "").splitlines()[-30:])
            return (
                -1,
                f"the ThreadSanitizer run failed (exit code {proc.returncode}):\n{tail}",
                [],
                proc.stderr,
            )
        if copy_back:
            for (ptr, n, back), b in zip(buffers, spec["buffers"]):
                if back and n:
                    data = Path(b["file"]).read_bytes()
                    ctypes.memmove(ptr, data, n)
        return result["rc"], result["err"], parse_reports(proc.stderr), proc.stderr


def tsan_available() -> bool:
    """True when clang's TSan runtime is present (the TSan mode can run)."""
    try:
        _tsan_runtime()
    except Exception:  # noqa: BLE001
        return False
    return True
