"""``mpslinalg.enabled`` blocks open on several threads (issue 33, item 9): the open blocks form a
stack, the innermost open block's routing is in force, and when the last one exits the routing in
force before the first was entered is back, whatever the order of exits.

Routing being on or off is observed by behaviour: with ``ops=("det",)`` and ``when="always"`` a
``torch.det`` call on the CPU runs mpslinalg's op (``routing.stats()["det"]["ours"]`` counts it);
off, torch's kernel serves it and nothing is counted.
"""

from __future__ import annotations

import random
import threading

import pytest
import torch

import mpslinalg
from mpslinalg import routing

A = torch.randn(4, 3, 3, dtype=torch.float64)


@pytest.fixture(autouse=True)
def _routing_off():
    routing.disable()
    routing.reset_stats()
    yield
    routing.disable()


def _routed(op: str = "det") -> bool:
    """Whether one routed call of ``op`` runs ours now (counters reset around it)."""
    routing.reset_stats()
    if op == "det":
        torch.det(A)
    else:
        torch.linalg.inv(A)
    ran = routing.stats().get(op, {}).get("ours", 0) == 1
    routing.reset_stats()
    return ran


def _block(ops, entered: threading.Event, leave: threading.Event, errors: list):
    """A thread body: open ``enabled(ops)``, signal, wait for ``leave``, close it."""
    try:
        with mpslinalg.enabled(devices="cpu", ops=ops, when="always"):
            entered.set()
            assert leave.wait(30)
    except BaseException as exc:  # noqa: BLE001  (reported by the main thread)
        errors.append(exc)
        entered.set()


def _start(ops, errors):
    entered, leave = threading.Event(), threading.Event()
    t = threading.Thread(target=_block, args=(ops, entered, leave, errors))
    t.start()
    assert entered.wait(30)
    return t, leave


def test_out_of_order_exits_restore_routing_off():
    # thread 1 enters, thread 2 enters, 1 exits, 2 exits: off again, as before either entered
    errors: list = []
    t1, leave1 = _start(("det",), errors)
    assert _routed("det")
    t2, leave2 = _start(("inv_ex",), errors)
    assert _routed("inv_ex") and not _routed("det")  # the innermost open block is in force
    leave1.set()
    t1.join()
    assert _routed("inv_ex") and not _routed("det")  # 2 is still open: its routing stays
    leave2.set()
    t2.join()
    assert not errors, errors
    assert not _routed("det") and not _routed("inv_ex")
    assert routing._config is None and not routing._open


def test_out_of_order_exits_restore_the_routing_before():
    # the same with a routing enabled before the blocks: it comes back, not one of theirs
    mpslinalg.enable(devices="cpu", ops=("det",), when="always")
    errors: list = []
    t1, leave1 = _start(("inv_ex",), errors)
    t2, leave2 = _start(("inv_ex",), errors)  # equal configs: distinct entries
    leave1.set()
    t1.join()
    assert _routed("inv_ex")
    leave2.set()
    t2.join()
    assert not errors, errors
    assert _routed("det") and not _routed("inv_ex")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_four_threads_in_shuffled_exit_orders(seed):
    # the reproducer: four threads each in one block (it leaked 3 times of 3); here every
    # block is open at once and they exit in a shuffled order
    errors: list = []
    blocks = [_start(("det",), errors) for _ in range(4)]
    assert _routed("det")
    random.Random(seed).shuffle(blocks)
    for t, leave in blocks:
        leave.set()
        t.join()
    assert not errors, errors
    assert not _routed("det")
    assert routing._config is None and not routing._open


def test_many_threads_free_running():
    # no ordering imposed: threads enter and exit blocks concurrently, many times
    errors: list = []

    def work():
        try:
            for _ in range(20):
                with mpslinalg.enabled(devices="cpu", ops=("det",), when="always"):
                    pass
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert not _routed("det")
    assert routing._config is None and not routing._open


def test_a_failed_entry_leaves_no_open_block():
    with pytest.raises(ValueError, match="when"):
        with mpslinalg.enabled(devices="cpu", when="sometimes"):
            pass
    assert not routing._open and routing._config is None
