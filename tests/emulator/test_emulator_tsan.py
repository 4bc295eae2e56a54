"""ThreadSanitizer mode (``tsan=True``): exact race detection, at the .metal line, in a subprocess.

Skipped (with the reason) where clang's TSan runtime is not installed; it is an optional mode.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

KERNELS = Path(__file__).resolve().parent / "kernels"


@pytest.fixture
def tsan(emu):
    from mpslinalg.emulator._tsan import tsan_available

    if not tsan_available():
        pytest.skip("clang's ThreadSanitizer runtime (libclang_rt.tsan-x86_64.so) is not installed")
    return emu


def _line_of(fname: str, text: str, nth: int = 1) -> int:
    lines = (KERNELS / fname).read_text().splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if text in line]
    return hits[nth - 1]


def test_planted_missing_barrier_located(tsan):
    from mpslinalg.emulator import KernelRace

    lib = tsan.lib("lu_small")
    A = torch.randn(2, 16, 16, generator=torch.Generator().manual_seed(9))
    ipiv = torch.zeros(2, 16, dtype=torch.int32)
    info = torch.zeros(2, dtype=torch.int32)
    with pytest.raises(KernelRace) as ei:
        lib.lu16_missing_barrier(A, ipiv, info, 16, threads=[16, 32], group_size=[16, 16], tsan=True)
    # the row swap (second occurrence of these lines: the kernel with the missing barrier) races
    # with the reads of the pivot row that follow without a barrier
    swap = {
        _line_of("lu_small.metal", "a[k][col] = a[p][col];", 2),
        _line_of("lu_small.metal", "a[p][col] = t;", 2),
    }
    reads = {
        _line_of("lu_small.metal", "const float pivot = a[k][k];", 2),
        _line_of("lu_small.metal", "a[row][k] = a[row][k] / pivot;", 2),
    }
    lines = [{int(x.split(":")[1]) for x in (r.first, r.second)} for r in ei.value.races]
    assert lines and all(pair & swap for pair in lines)
    assert any(pair & reads for pair in lines)


def test_correct_kernels_are_race_free(tsan):
    lib = tsan.lib("lu_small")
    A = torch.randn(2, 16, 16, generator=torch.Generator().manual_seed(10))
    out = []
    for t in (False, True):
        a = A.clone()
        ipiv = torch.zeros(2, 16, dtype=torch.int32)
        info = torch.zeros(2, dtype=torch.int32)
        lib.lu16(a, ipiv, info, 16, threads=[16, 32], group_size=[16, 16], tsan=t)
        out.append((a, ipiv))
    # same kernel, same order: identical results, copied back from the TSan subprocess
    assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1])
    # barriers + simdgroup collectives + threadgroup memory
    x = torch.randn(512, generator=torch.Generator().manual_seed(11))
    s, m = torch.zeros(2), torch.zeros(2)
    tsan.lib("reduce").block_reduce(x, s, m, group_size=256, tsan=True)
    assert torch.equal(m, x.view(2, 256).max(1).values)


def test_atomics_are_not_races(tsan):
    v = torch.randint(0, 10, (300,), generator=torch.Generator().manual_seed(12), dtype=torch.int32)
    hist = torch.zeros(10, dtype=torch.int32)
    total = torch.zeros(1, dtype=torch.int32)
    tsan.lib("basics").histogram(v, hist, total, group_size=128, tsan=True)
    assert torch.equal(hist, torch.bincount(v, minlength=10).int()) and total.item() == 300


def test_second_aliasing_pass_for_large_groups(tsan):
    from mpslinalg.emulator import KernelRace

    with pytest.raises(KernelRace) as ei:
        tsan.lib("reduce").aliased_race(torch.zeros(256), threads=256, group_size=256, tsan=True)
    write = _line_of("reduce.metal", "s[tid] = float(tid);")
    read = _line_of("reduce.metal", "x[tid] = tid < 56 ? s[tid + 200] : s[tid];")
    pairs = [{int(x.split(":")[1]) for x in (r.first, r.second)} for r in ei.value.races]
    assert {write, read} in pairs
