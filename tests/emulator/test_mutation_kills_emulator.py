"""Emulator runtime behaviours the mutation gate (issue 18, ``scripts/mutations.py``) showed
untested: kernels in ``kernels/mutation_kills.metal``.

* ``emu-tg-poison-per-group-dropped``: threadgroup memory is poisoned at the start of *every*
  threadgroup, not only of the launch, so a read of memory this group never wrote is NaN even when
  an earlier group wrote it.
* ``emu-fiber-stack-guard-dropped``: a GPU thread overflowing its fiber stack faults with the
  stack-overflow message instead of silently corrupting a neighbour's stack.
* ``emu-barrier-no-restart``: ``inorder``/``reverse`` stay in order after a barrier completed by a
  thread in the middle of the order.
"""

from __future__ import annotations

import pytest
import torch

from mpslinalg.emulator import KernelFault


@pytest.fixture
def lib(emu):
    return emu.lib("mutation_kills")


def test_threadgroup_memory_is_poisoned_in_every_group(emu, lib, order):
    x = torch.zeros(4 * 32)
    lib.uninit_tg_later_group(x, threads=4 * 32, group_size=32, order=order[0], seed=order[1])
    x = x.view(4, 32)
    # group 0 wrote sh[0] = 1; groups 1..3 never wrote their sh[0] (whatever order groups ran in)
    assert torch.equal(x[0], torch.ones(32)) and bool(x[1:].isnan().all())


def test_fiber_stack_overflow_is_a_fault(emu, lib, order):
    """A 129 KiB local array on a 128 KiB fiber stack: the first thread to run faults on its guard
    page (in any order), named as a stack overflow; the emulator keeps working afterwards."""
    with pytest.raises(KernelFault, match="stack overflow of a GPU thread"):
        lib.deep_stack(torch.ones(32), 129 * 256, threads=32, group_size=32, order=order[0], seed=order[1])
    x = torch.zeros(64)
    lib.uninit_tg_later_group(x, threads=64, group_size=32)
    assert bool(x[32:].isnan().all())


@pytest.mark.parametrize("order", ["inorder", "reverse"])
def test_inorder_and_reverse_hold_after_a_barrier(emu, lib, order):
    """``emu-barrier-no-restart``: after a barrier the next phase runs in the requested order from
    its start, even when the barrier was completed by a thread in the middle of the order."""
    counter = torch.zeros(1, dtype=torch.int32)
    seq = torch.zeros(64, dtype=torch.int32)
    lib.order_after_collective(counter, seq, threads=64, group_size=64, order=order)
    expect = list(range(64)) if order == "inorder" else list(range(63, -1, -1))
    assert seq.tolist() == expect  # (+1000 would flag a wrong simd_sum)
