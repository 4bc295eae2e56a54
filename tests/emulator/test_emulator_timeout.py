"""Launch time limits, Ctrl-C and spin-waits (issue 14.9; kernels: ``kernels/spin.metal``).

A kernel that never ends must not hang the process: the launch raises :class:`KernelTimeout`
naming the kernel after ``timeout=`` seconds (default ``$MPSLINALG_EMULATOR_TIMEOUT`` or 60),
Ctrl-C abandons it, the global launch lock is released and the interpreter keeps working. A
spin-wait on device memory is kept by the compiler (it is not deleted as a side-effect-free C++
loop), so it waits for the writer.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

from mpslinalg.emulator import BindingError, KernelFault, KernelTimeout

ROOT = Path(__file__).resolve().parents[2]
KERNELS = Path(__file__).resolve().parent / "kernels"


@pytest.fixture
def lib(emu):
    return emu.lib("spin")


def _i32(*v):
    return torch.tensor(v, dtype=torch.int32)


def test_spin_on_flag_set_by_another_thread(emu, lib):
    # a host thread writes data, then the flag, while the kernel spins: the kernel must see both,
    # and must not return before the flag was set (a deleted or hoisted loop would)
    flag, data, out = _i32(0), _i32(0), _i32(0, 0, 0, 0)
    delay = 0.3

    def writer():
        time.sleep(delay)
        data[0] = 42
        flag[0] = 1

    t = threading.Thread(target=writer)
    t0 = time.monotonic()
    t.start()
    lib.spin_atomic(flag, data, out, threads=4, group_size=4, timeout=30)
    elapsed = time.monotonic() - t0
    t.join()
    assert out.tolist() == [42, 43, 44, 45]
    assert elapsed >= delay


def test_plain_spin_is_kept_and_times_out(emu, lib, still_works):
    # with C++'s forward-progress rule the optimiser deletes this loop and the kernel "succeeds"
    # (out would be 1); the emulator keeps it, so it spins until the timeout
    out = _i32(0, 0)
    t0 = time.monotonic()
    with pytest.raises(KernelTimeout, match=r"kernel 'spin_plain' did not finish within 0.5 s") as ei:
        lib.spin_plain(_i32(0), out, threads=2, group_size=2, timeout=0.5)
    assert 0.5 <= time.monotonic() - t0 < 10
    assert isinstance(ei.value, KernelFault) and ei.value.kernel == "spin_plain"
    assert out.tolist() == [0, 0]
    # the same kernel with the flag set finishes
    lib.spin_plain(_i32(1), out, threads=2, group_size=2, timeout=30)
    assert out.tolist() == [1, 1]
    still_works()


def test_endless_loop_in_fibers_times_out(emu, lib, order, still_works):
    # threads run as fibers (a barrier): the timeout also fires on a fiber's stack
    with pytest.raises(KernelTimeout, match="'spin_after_barrier'"):
        lib.spin_after_barrier(_i32(0, 0, 0, 0), threads=4, group_size=4, timeout=0.2, order=order[0], seed=order[1])
    still_works()


def test_default_timeout_from_environment(emu, lib, monkeypatch):
    monkeypatch.setenv("MPSLINALG_EMULATOR_TIMEOUT", "0.3")
    with pytest.raises(KernelTimeout, match=r"within 0.3 s"):
        lib.spin_plain(_i32(0), _i32(0), threads=1, group_size=1)
    monkeypatch.setenv("MPSLINALG_EMULATOR_TIMEOUT", "soon")
    with pytest.raises(BindingError, match="MPSLINALG_EMULATOR_TIMEOUT must be a number"):
        lib.spin_plain(_i32(1), _i32(0), threads=1, group_size=1)


@pytest.mark.parametrize("bad", [0, -1.0, "10", True, math.nan])
def test_bad_timeout_is_rejected(emu, lib, bad):
    with pytest.raises(BindingError, match="timeout must be a positive number"):
        lib.spin_plain(_i32(1), _i32(0), threads=1, group_size=1, timeout=bad)


def test_timeout_in_a_worker_thread_releases_the_launch_lock(emu, lib, still_works):
    # a worker's endless kernel holds the global launch lock until its timeout, then lets go
    result: list[BaseException | None] = []

    def worker():
        try:
            lib.spin_plain(_i32(0), _i32(0), threads=1, group_size=1, timeout=0.5)
            result.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            result.append(exc)

    t = threading.Thread(target=worker)
    t.start()
    time.sleep(0.1)
    t0 = time.monotonic()
    still_works()  # waits for the lock
    assert time.monotonic() - t0 < 10
    t.join(timeout=10)
    assert len(result) == 1 and isinstance(result[0], KernelTimeout)
    still_works()


_CTRL_C_CHILD = """
    import signal, sys, torch
    from mpslinalg import emulator
    lib = emulator.compile_shader(open({spin!r}).read())
    print("spinning", flush=True)
    try:
        lib.spin_plain(torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32),
                       threads=1, group_size=1, timeout=60)
        print("kernel returned", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    out = torch.zeros(3, dtype=torch.int32)
    lib.spin_atomic(torch.ones(1, dtype=torch.int32), torch.tensor([7], dtype=torch.int32), out,
                    threads=3, group_size=3)
    print("after", out.tolist(), flush=True)
    try:  # Python's own SIGINT handling is back once the launch is over
        signal.raise_signal(signal.SIGINT)
        print("no KeyboardInterrupt", flush=True)
    except KeyboardInterrupt:
        print("python handler ok", flush=True)
"""


def _ctrl_c(child: str) -> list[str]:
    """Run ``child`` in a fresh interpreter, press Ctrl-C once it is spinning; its output lines."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    code = textwrap.dedent(child.format(spin=str(KERNELS / "spin.metal")))
    # SIGINT back to its default in the child: a runner started as a background job (`cmd &` in a
    # non-interactive shell) ignores SIGINT, and an ignored SIGINT at exec stays ignored in Python
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout.readline().strip() == "spinning"
        time.sleep(1.0)  # inside the launch by now (the library was compiled before the print)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=50)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    return out.splitlines()


def test_ctrl_c_interrupts_a_launch(emu):
    assert _ctrl_c(_CTRL_C_CHILD) == ["interrupted", "after [7, 8, 9]", "python handler ok"]


_CTRL_C_WORKER_CHILD = """
    import threading, torch
    from mpslinalg import emulator
    lib = emulator.compile_shader(open({spin!r}).read())
    got = []

    def worker():
        try:
            lib.spin_plain(torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32),
                           threads=1, group_size=1, timeout=60)
            got.append("returned")
        except KeyboardInterrupt:
            got.append("worker interrupted")

    t = threading.Thread(target=worker)
    t.start()
    print("spinning", flush=True)
    try:
        t.join()
        print("main not interrupted", flush=True)
    except KeyboardInterrupt:
        print("main interrupted", flush=True)
    import time
    deadline = time.monotonic() + 30  # (a join interrupted by Ctrl-C no longer waits: CPython)
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    print(got, flush=True)
    out = torch.zeros(2, dtype=torch.int32)
    lib.spin_atomic(torch.ones(1, dtype=torch.int32), torch.tensor([5], dtype=torch.int32), out,
                    threads=2, group_size=2)
    print("after", out.tolist(), flush=True)
"""


def test_ctrl_c_during_a_worker_threads_launch(emu):
    # Ctrl-C while a worker thread runs a kernel: the main thread gets its KeyboardInterrupt (as
    # for any Python program) and the worker's launch is abandoned (its own KeyboardInterrupt)
    assert _ctrl_c(_CTRL_C_WORKER_CHILD) == ["main interrupted", "['worker interrupted']", "after [5, 6]"]
