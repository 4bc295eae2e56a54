"""The cuda target's run side: the CUDA driver API through ctypes, the launch plan, and the runner
that enqueues kernels on torch's current stream (no compiler needed; see ``_cuda.py`` for the
build side)."""

from __future__ import annotations

import ctypes
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

__all__ = ["CudaRunner", "CudaToolchainError", "TG_LIMIT", "driver", "launch_plan"]

TG_LIMIT = 32768  # Apple GPUs: 32 KiB of threadgroup memory per threadgroup


class CudaToolchainError(RuntimeError):
    """``ptxas`` or libdevice is missing (building), or no CUDA driver / artifact (running)."""


# MPSLINALG_CUDA_LAUNCH_LOG=path: count launches per kernel and write them as JSON at exit (used by
# scripts/gpu_check.sh to say which kernels ran under compute-sanitizer)
_LAUNCHES: dict[str, int] = {}


def _write_launch_log() -> None:
    path = os.environ.get("MPSLINALG_CUDA_LAUNCH_LOG")
    if path and _LAUNCHES:
        try:
            old = json.loads(Path(path).read_text())
        except (OSError, ValueError):
            old = {}
        for k, v in _LAUNCHES.items():
            old[k] = old.get(k, 0) + v
        Path(path).write_text(json.dumps(old, indent=1, sort_keys=True))


_LOG_LAUNCHES = bool(os.environ.get("MPSLINALG_CUDA_LAUNCH_LOG"))
if _LOG_LAUNCHES:
    import atexit

    atexit.register(_write_launch_log)


# ---------------------------------------------------------------------------------------------
# driver API (ctypes)
# ---------------------------------------------------------------------------------------------
class _Driver:
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4
    CU_DEVICE_ATTRIBUTE_CC_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_CC_MINOR = 76

    def __init__(self) -> None:
        lib = None
        for name in ("libcuda.so.1", "libcuda.so"):
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if lib is None:
            raise CudaToolchainError("the emulator's cuda target needs the CUDA driver (libcuda.so.1)")
        self.lib = lib
        P, I, U = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
        sig = {
            "cuInit": [U],
            "cuDeviceGet": [ctypes.POINTER(I), I],
            "cuDeviceGetAttribute": [ctypes.POINTER(I), I, I],
            "cuCtxGetCurrent": [ctypes.POINTER(P)],
            "cuCtxSetCurrent": [P],
            "cuDevicePrimaryCtxRetain": [ctypes.POINTER(P), I],
            "cuModuleLoadData": [ctypes.POINTER(P), P],
            "cuModuleGetFunction": [ctypes.POINTER(P), P, ctypes.c_char_p],
            "cuFuncGetAttribute": [ctypes.POINTER(I), I, P],
            "cuLaunchKernel": [P, U, U, U, U, U, U, U, P, ctypes.POINTER(P), ctypes.POINTER(P)],
            "cuGetErrorString": [I, ctypes.POINTER(ctypes.c_char_p)],
        }
        for fname, args in sig.items():
            f = getattr(lib, fname)
            f.argtypes = args
            f.restype = I
        self.check(lib.cuInit(0), "cuInit")

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            s = ctypes.c_char_p()
            self.lib.cuGetErrorString(rc, ctypes.byref(s))
            msg = s.value.decode() if s.value else "unknown error"
            raise RuntimeError(f"CUDA driver: {what} failed with error {rc} ({msg})")


_driver: _Driver | None = None
_driver_lock = threading.Lock()


def driver() -> _Driver:
    global _driver
    with _driver_lock:
        if _driver is None:
            _driver = _Driver()
        return _driver


class _Module:
    """One loaded module on one device: function handles and their attributes."""

    def __init__(self, drv: _Driver, image: bytes, entries: list[str]):
        self.handle = ctypes.c_void_p()
        drv.check(drv.lib.cuModuleLoadData(ctypes.byref(self.handle), image), "cuModuleLoadData")
        self.funcs = []
        self.max_threads = []
        self.shared = []
        self.regs = []
        for e in entries:
            f = ctypes.c_void_p()
            drv.check(
                drv.lib.cuModuleGetFunction(ctypes.byref(f), self.handle, e.encode()),
                f"cuModuleGetFunction({e})",
            )
            self.funcs.append(f)
            vals = []
            for attr in (
                _Driver.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                _Driver.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                _Driver.CU_FUNC_ATTRIBUTE_NUM_REGS,
            ):
                v = ctypes.c_int()
                drv.check(drv.lib.cuFuncGetAttribute(ctypes.byref(v), attr, f), "cuFuncGetAttribute")
                vals.append(v.value)
            self.max_threads.append(vals[0])
            self.shared.append(vals[1])
            self.regs.append(vals[2])


class _Geom(ctypes.Structure):
    _fields_ = [
        ("grid", ctypes.c_uint32 * 3),
        ("req", ctypes.c_uint32 * 3),
        ("goff", ctypes.c_uint32 * 3),
        ("exact", ctypes.c_uint32),
    ]


def launch_plan(grid: tuple[int, int, int], group: tuple[int, int, int], exact: bool) -> list[tuple]:
    """CUDA launches ``(blocks, threads, group offset)`` that cover the Metal dispatch.

    ``exact``: every block is one threadgroup with its actual size, so the (at most 2 per
    dimension) classes of full and edge threadgroups are launched separately (<= 8 launches).
    Otherwise one launch of full-size blocks; threads outside the grid return at once.
    """
    if not exact:
        blocks = tuple((g + t - 1) // t for g, t in zip(grid, group))
        return [(blocks, tuple(group), (0, 0, 0))]
    per_dim = []
    for g, t in zip(grid, group):
        full, rest = divmod(g, t)
        opts = []
        if full:
            opts.append((full, t, 0))
        if rest:
            opts.append((1, rest, full))
        per_dim.append(opts)
    plan = []
    for x in per_dim[0]:
        for y in per_dim[1]:
            for z in per_dim[2]:
                plan.append(((x[0], y[0], z[0]), (x[1], y[1], z[1]), (x[2], y[2], z[2])))
    return plan


class CudaRunner:
    """Launches the kernels of one manifest on CUDA tensors (the module is loaded per device on
    first use, so a library can be compiled and inspected on a machine without a GPU)."""

    def __init__(self, manifest_path: Path):
        self.path = Path(manifest_path)
        self.manifest = json.loads(self.path.read_text())
        self.kernels = self.manifest["kernels"]
        self._modules: dict[int, _Module] = {}
        self._lock = threading.Lock()

    # -- what the shared binding layer asks ------------------------------------------------------
    def param_size(self, k: int, p: int) -> int:
        sizes = self.kernels[k]["sizes"]
        return int(sizes[p]) if p < len(sizes) else 0

    def param_kinds(self, k: int) -> list[dict]:
        return self.kernels[k]["params"]

    # -- loading -------------------------------------------------------------------------------
    def image_for(self, major: int, minor: int) -> tuple[bytes, str]:
        """(module image, what it is): the cubin built for ``sm_{major}{minor}``, else the PTX."""
        key = self.manifest["key"]
        arch = f"sm_{major}{minor}"
        if arch in self.manifest["archs"]:
            p = self.path.with_name(f"{key}.{arch}.cubin")
            if p.is_file():
                return p.read_bytes(), f"cubin {arch}"
        ptx_arch = int(re.sub(r"\D", "", self.manifest["ptx_arch"]))
        if major * 10 + minor < ptx_arch:
            raise CudaToolchainError(
                f"no cubin for {arch} and the PTX targets {self.manifest['ptx_arch']}: rebuild with "
                f"MPSLINALG_CUDA_ARCHS={arch}"
            )
        return self.path.with_name(f"{key}.ptx").read_bytes() + b"\0", "ptx"

    def module(self, device_index: int) -> _Module:
        mod = self._modules.get(device_index)
        if mod is not None:
            return mod
        with self._lock:
            mod = self._modules.get(device_index)
            if mod is None:
                import torch

                drv = driver()
                torch.cuda.init()
                with torch.cuda.device(device_index):
                    torch.cuda.current_stream()  # makes torch's (primary) context current
                    ctx = ctypes.c_void_p()
                    drv.check(drv.lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
                    if not ctx.value:
                        drv.check(
                            drv.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device_index),
                            "cuDevicePrimaryCtxRetain",
                        )
                        drv.check(drv.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
                    major, minor = torch.cuda.get_device_capability(device_index)
                    image, _what = self.image_for(major, minor)
                    buf = ctypes.create_string_buffer(image, len(image))
                    mod = _Module(drv, buf, [k["entry"] for k in self.kernels])
                    mod.ctx = ctx
                self._modules[device_index] = mod
        return mod

    # -- launching -----------------------------------------------------------------------------
    def launch(self, kf, b, grid, group, opts) -> None:
        """The target protocol's launch: enqueue on torch's current stream (``order``/``seed``
        do not apply: the GPU schedules its threads)."""
        self.launch_cuda(kf._index, kf.name, b.args, b.ptrs, grid, group, b.keep)

    def launch_cuda(
        self,
        k: int,
        name: str,
        args: tuple,
        ptrs: list[int],
        grid: tuple[int, int, int],
        group: tuple[int, int, int],
        host_buffers: list[Any] = (),
    ) -> None:
        """Enqueue kernel ``k`` on torch's current stream (no host synchronisation).

        ``ptrs[i]`` is the device address of tensor argument ``i`` or the host address of the bytes
        of a Python scalar / list argument (as the shared binding layer prepared them).
        """
        import torch

        kinds = self.kernels[k]["params"]
        dev = None
        for a in args:
            if isinstance(a, torch.Tensor):
                if dev is None:
                    dev = a.device
                elif a.device != dev:
                    raise ValueError(
                        f"kernel '{name}': tensors on {dev} and {a.device}; pass tensors of one device"
                    )
        if dev is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        keep: list[Any] = []
        values: list[ctypes.c_void_p] = []
        host_sizes = {
            ctypes.addressof(b): ctypes.sizeof(b) for b in host_buffers if isinstance(b, ctypes.Array)
        }
        for i, (a, d) in enumerate(zip(args, kinds)):
            is_tensor = isinstance(a, torch.Tensor)
            if d["kind"] == "val":
                if is_tensor:
                    raise TypeError(
                        f"kernel '{name}': argument {i} is a tensor but parameter [[buffer({i})]] is a "
                        "'constant T&', which the cuda target passes by value: pass a Python scalar "
                        "(or declare the parameter as a 'constant T*' pointer)"
                    )
                values.append(ctypes.c_void_p(ptrs[i]))  # host bytes, copied by cuLaunchKernel
            elif d["kind"] == "ptr":
                if is_tensor:
                    cell = ctypes.c_uint64(ptrs[i])
                else:  # a Python scalar or list bound to a pointer: stage it in device memory
                    staged = _stage(ptrs[i], host_sizes.get(ptrs[i], 0), index)
                    keep.append(staged)
                    cell = ctypes.c_uint64(staged.data_ptr())
                keep.append(cell)
                values.append(ctypes.cast(ctypes.byref(cell), ctypes.c_void_p))
            else:
                cell = ctypes.c_uint64(0)
                keep.append(cell)
                values.append(ctypes.cast(ctypes.byref(cell), ctypes.c_void_p))
        kern = self.kernels[k]
        exact = bool(kern["meta"]["uses_sync"])
        if _LOG_LAUNCHES:
            _LAUNCHES[name] = _LAUNCHES.get(name, 0) + 1
        mod = self.module(index)
        nthreads = group[0] * group[1] * group[2]
        if nthreads > mod.max_threads[k]:
            raise ValueError(
                f"kernel '{name}': threadgroup of {nthreads} threads exceeds this kernel's limit of "
                f"{mod.max_threads[k]} on this GPU ({mod.regs[k]} registers per thread); pass a smaller "
                "group_size"
            )
        if mod.shared[k] > TG_LIMIT:
            raise ValueError(
                f"kernel '{name}': {mod.shared[k]} bytes of threadgroup memory exceed the 32 KiB of "
                "Apple GPUs"
            )
        stream = ctypes.c_void_p(torch.cuda.current_stream(index).cuda_stream)
        drv = driver()
        cur = ctypes.c_void_p()
        drv.lib.cuCtxGetCurrent(ctypes.byref(cur))
        if cur.value != mod.ctx.value:  # another device's (or no) context is current on this thread
            drv.check(drv.lib.cuCtxSetCurrent(mod.ctx), "cuCtxSetCurrent")
        geom = _Geom()
        for d in range(3):
            geom.grid[d] = grid[d]
            geom.req[d] = group[d]
        geom.exact = int(exact)
        params = (ctypes.c_void_p * (len(values) + 1))(
            ctypes.cast(ctypes.byref(geom), ctypes.c_void_p), *values
        )
        for blocks, threads, goff in launch_plan(grid, group, exact):
            if 0 in blocks or 0 in threads:
                continue
            geom.goff[0], geom.goff[1], geom.goff[2] = goff
            if blocks[1] > 65535 or blocks[2] > 65535:
                raise ValueError(
                    f"kernel '{name}': {blocks} threadgroups exceed CUDA's grid limits (y, z <= 65535)"
                )
            drv.check(
                drv.lib.cuLaunchKernel(
                    mod.funcs[k],
                    blocks[0],
                    blocks[1],
                    blocks[2],
                    threads[0],
                    threads[1],
                    threads[2],
                    0,
                    stream,
                    params,
                    None,
                ),
                f"cuLaunchKernel({name})",
            )
        del keep


def _stage(host_ptr: int, size: int, index: int):
    """Copy the bytes of a Python scalar/list argument to the device (pinned, non-blocking: the
    pinned block is recycled by torch only after the copy has run)."""
    import torch

    host = torch.empty(max(size, 1), dtype=torch.uint8, pin_memory=True)
    if size:
        ctypes.memmove(host.data_ptr(), host_ptr, size)
    return host.to(torch.device("cuda", index), non_blocking=True)
