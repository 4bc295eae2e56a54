"""The "never slower" table and the front doors' decision: where a public op on the ``torch``
backend is one ``torch.linalg`` call, and where it runs mpslinalg's implementation.

:data:`WHEN` holds, per device type and op, the regions where mpslinalg's own implementation was
measured faster than torch.linalg; each family declares its own (``Family.when``,
:mod:`mpslinalg.oplayer.family`) and the declaration merges them in. The front doors ask
:func:`torch_first` (before their checks: the fast path) and :func:`torch_is_faster` (after them);
the drop-in routing (:mod:`mpslinalg.routing`) reads the same table for ``enable(when="faster")``.
:func:`ours_always` turns the table off (tests, benchmarks); :func:`decisions` counts the answers.
The measurements behind the regions: ``docs/routing.md``.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator

import torch
import torch.autograd.forward_ad as _fwad

from ..kernels import backends as _backends
from ..kernels.backends import requested_backend

__all__ = ["EVERY_SIZE", "LAPACK", "SHIPPED", "SOURCES", "WHEN", "add_regions", "always", "decisions", "forget",
           "in_force", "lapack_first", "ours_always", "reset_decisions", "torch_first", "torch_is_faster"]

# --------------------------------------------------------------------------------------------------
# "Never slower": where each op routes, per device type (measured; docs/routing.md has the table)
# --------------------------------------------------------------------------------------------------

#: ``WHEN[device_type][op][dtype]``: regions ``(n_min, n_max, batch_min)`` where mpslinalg's own
#: implementation was measured faster than torch.linalg (every block >= 0.95x, the median >= 1.05x:
#: ``benchmarks/bench_routing.py``; table and dates in ``docs/routing.md``). Read by the drop-in
#: routing (``when="faster"``) and by the public ops' front doors on the ``torch`` backend
#: (:func:`torch_is_faster`). A call on ``batch`` matrices of order ``n`` (the larger dimension;
#: for solves, of the coefficient matrix) is inside when ``n_min <= n <= n_max`` and
#: ``batch >= batch_min`` for one region; an op or dtype missing from a device's table is torch's
#: there (not faster, or not measured).
#:
#: Each entry starts as a :class:`_Pending` table: at its first read it becomes the table in force
#: on that device type, a plain dict (:mod:`.calibrated`: a table ``python -m mpslinalg calibrate``
#: measured on this machine, one named by ``$MPSLINALG_ROUTING_TABLE``, or the shipped default
#: :data:`SHIPPED`), so the front doors' lookup stays one dict lookup after it.
WHEN: dict[str, dict] = {}

#: The shipped default per device type: the families' ``when`` regions (docs/routing.md; on ``mps``
#: only where the win does not depend on Apple's timings, docs/calibrate.md).
SHIPPED: dict[str, dict[str, dict[torch.dtype, tuple[tuple[int, int, int], ...]]]] = {
    "cpu": {}, "cuda": {}, "mps": {}}
#: Where each resolved table of :data:`WHEN` came from (:func:`mpslinalg.routing.table`).
SOURCES: dict[str, str] = {}

#: A region holding every call (mpslinalg's implementation at every size and batch).
EVERY_SIZE = ((0, 1 << 40, 0),)


class _Pending:
    """A :data:`WHEN` entry not read yet: its first read resolves the table in force (once, lazily:
    a CUDA device's name needs CUDA) and puts it in :data:`WHEN` in its place."""

    __slots__ = ("device",)

    def __init__(self, device: str):
        self.device = device

    def resolve(self) -> dict:
        from .calibrated import resolve

        WHEN[self.device], SOURCES[self.device] = resolve(self.device, SHIPPED[self.device])
        return WHEN[self.device]

    def get(self, *args):
        return self.resolve().get(*args)

    def __getitem__(self, op):
        return self.resolve()[op]

    def __contains__(self, op):
        return op in self.resolve()

    def __iter__(self):
        return iter(self.resolve())

    def __len__(self):
        return len(self.resolve())

    def items(self):
        return self.resolve().items()

    def keys(self):
        return self.resolve().keys()

    def values(self):
        return self.resolve().values()


def in_force(device: str) -> dict:
    """The table in force on ``device`` (a device type), resolved if it was not yet."""
    table = WHEN[device]
    return table.resolve() if isinstance(table, _Pending) else table


def forget(device: str | None = None) -> None:
    """Resolve the table of ``device`` (every device type: ``None``) again at its next read (after
    calibrating, or a change of ``$MPSLINALG_ROUTING_TABLE``)."""
    for d in SHIPPED if device is None else (device,):
        WHEN[d] = _Pending(d)
        SOURCES.pop(d, None)


#: ``LAPACK[op][dtype]``: the least order ``n`` of one square CPU matrix (no batch) from which the
#: front door calls SciPy's LAPACK (OpenBLAS) on zero-copy numpy views instead of torch.linalg, where
#: that was measured faster (issue 34.7). 2026-12-07, torch 2.13 CPU, scipy 1.17.1, shared 2-core
#: x86-64 (load ~1), both libraries on one thread, interleaved medians, time ratio LAPACK/torch at
#: n = 128, 256, 512 -- inv (xGESV of Aᵀ with I): f32 0.59 0.56 0.60, c64 0.80 0.81 0.80 (f64 0.90
#: 0.93 0.86: not taken); lu_factor (xGETRF): f32 0.70 0.66 0.75, c64 0.93 0.83 0.77 (f64 0.91 0.89
#: 1.02: not taken); svdvals (xGESDD of Aᵀ, no vectors): f32 0.78 0.61 0.54, f64 0.91 0.77 0.79.
#: Batches stay torch's (a Python loop over matrices loses to torch's batched call); tensors that
#: record autograd, dual tensors, conj/neg views and non-contiguous tensors too. Without SciPy the
#: path is skipped (SciPy is an optional dependency). Table in docs/ops/overhead.md.
LAPACK: dict[str, dict[torch.dtype, int]] = {
    "inv_ex": {torch.float32: 128, torch.complex64: 128},
    "lu_factor_ex": {torch.float32: 128, torch.complex64: 256},
    "svdvals": {torch.float32: 128, torch.float64: 256},
}
_scipy_lapack: list = []  # [scipy.linalg.lapack] once imported, [None] when SciPy is absent


def lapack_first(op: str, A: torch.Tensor):
    """SciPy's ``scipy.linalg.lapack`` module when ``op`` on ``A`` takes the CPU LAPACK path, else None.

    For a front door whose call already goes to torch.linalg (:func:`torch_first`: CPU, torch
    backend, no compile or transform): True when ``A`` is one plain, contiguous, square CPU matrix
    of a dtype and order in :data:`LAPACK`, no autograd records and no tangent rides on it, not
    inside :func:`ours_always`, and SciPy imports.
    """
    regions = LAPACK.get(op)
    if regions is None or (n_min := regions.get(A.dtype)) is None:
        return None
    shape = A.shape
    if (len(shape) != 2 or shape[0] != shape[1] or shape[0] < n_min or _ours_depth or type(A) is not torch.Tensor
            or not A.is_cpu or (A.requires_grad and torch.is_grad_enabled()) or _fwad._current_level >= 0
            or A.is_conj() or A.is_neg() or not A.is_contiguous()):
        return None
    if not _scipy_lapack:
        try:
            from scipy.linalg import lapack
        except ImportError:
            lapack = None
        _scipy_lapack.append(lapack)
    return _scipy_lapack[0]


def add_regions(device: str, ops) -> None:
    """Merge one family's measured regions for ``device`` (``{op: {dtype: regions}}``) into the
    shipped default (:data:`SHIPPED`); the table in force is resolved again at its next read."""
    table = SHIPPED.setdefault(device, {})
    for op, regions in ops.items():
        if op in table:
            raise ValueError(f"two families declare regions for {op!r} on {device!r}")
        table[op] = dict(regions)
    if not isinstance(WHEN.get(device), _Pending):
        forget(device)


forget()


def _faster(table: dict, A: torch.Tensor) -> bool:
    """Whether ``table`` (one op's ``WHEN`` entry on ``A``'s device) has ``A``'s dtype, order and batch."""
    regions = table.get(A.dtype)
    return regions is not None and _inside(regions, A)


def _inside(regions: tuple, A: torch.Tensor) -> bool:
    """Whether ``A``'s order and batch lie in one of ``regions`` (``(n_min, n_max, batch_min)``).

    ``n`` is the larger dimension of the ``m x n`` matrices (the coefficient matrix for solves);
    on every call's path, so it avoids building shapes: ``batch >= b`` is ``numel >= b m n``.
    """
    shape = A.shape  # one torch.Size, not one per index
    m, n = shape[-2], shape[-1]
    big = m if m > n else n
    for lo, hi, b in regions:
        if lo <= big <= hi and A.numel() >= b * m * n:
            return True
    return False


# --------------------------------------------------------------------------------------------------
# The same table at the public ops' front doors (torch backend)
# --------------------------------------------------------------------------------------------------

_ours_depth = 0  # > 0 inside ours_always(): every front door runs mpslinalg's implementation
_always_active = 0  # threads computing a call under enable(when="always") (_always)


def ours_forced() -> bool:
    """Whether front doors must run mpslinalg's implementation now (:func:`ours_always`, or a call
    computed under ``enable(when="always")``), whatever else would route the call to torch.linalg."""
    return bool(_ours_depth or (_always_active and _local.ours))


@contextlib.contextmanager
def ours_always() -> Iterator[None]:
    """Front doors run mpslinalg's own implementation at every size, ignoring :data:`WHEN`.

    For tests of the families' algorithms on the ``torch`` backend and for benchmarks that measure
    mpslinalg's implementation against torch.linalg. Process-wide (every thread), nestable.

    Examples
    --------
    >>> import torch, mpslinalg
    >>> with mpslinalg.routing.ours_always():
    ...     LU, piv = mpslinalg.lu_factor(torch.randn(64, 64))   # the LU family's code, not a table lookup
    """
    global _ours_depth
    _ours_depth += 1
    try:
        yield
    finally:
        _ours_depth -= 1


def torch_is_faster(op: str, A: torch.Tensor) -> bool:
    """Whether a public op's front door hands this call to one ``torch.linalg`` call.

    True when the call runs on the ``torch`` backend (CPU/CUDA by default) and :data:`WHEN` has no
    region for ``op`` (its :data:`ROUTES` name, e.g. ``"inv_ex"`` for ``inv``), ``A``'s dtype, order
    and batch on ``A``'s device: there torch.linalg was measured faster, or nothing was measured.
    Never on the ``metal``/``emulator`` backends (our kernels must run there), for ``meta`` tensors,
    while Dynamo traces (``torch.compile``, strict ``torch.export``) or a ``torch.func`` transform is
    active (those keep the declared op; a non-strict export records what eager runs), inside
    :func:`ours_always`, nor while :func:`enable` with ``when="always"`` computes a call. Each answer
    is counted per op (:func:`decisions`): the main job reports the path a row took.

    Parameters
    ----------
    op : str
        The :data:`WHEN` key of the op.
    A : Tensor
        The (coefficient) matrix or batch of matrices that sets device, dtype, order and batch.

    Returns
    -------
    bool
    """
    return torch_first(op, A, True)


def torch_first(op: str, A, _count_ours: bool = False) -> bool:
    """The public ops' fast path: whether the front door calls ``torch.linalg`` before its checks.

    True for a tensor of a dtype mpslinalg takes that :func:`torch_is_faster` sends to torch.linalg
    (a decision for ours is counted by the front door's own route; ``_count_ours``:
    :func:`torch_is_faster`'s counting). torch's own checks run in C++; the front door runs
    mpslinalg's checks (and raises mpslinalg's error) only when the torch.linalg call raises. Python
    checks cost as much as a small call (issue 13's "host overhead <= 5 µs above torch's").

    False (mpslinalg's path, whose checks raise mpslinalg's errors) for what is not a tensor of at
    least 2 dimensions of a dtype mpslinalg takes: those tests are the ``AttributeError`` /
    ``IndexError`` of reading it, and a matrix of fewer dimensions outside every region goes to
    torch.linalg, which raises, and then to the front door's checks.
    """
    # On every call of every public op, in one frame: in front of a call whose arithmetic evicts the
    # interpreter's caches (solve 256x9x9), each Python frame, attribute and C call costs 2-4 times
    # its timeit time. So: no helper frames, no isinstance/dim pre-tests, module globals for the
    # modes that only our own context managers set (no thread-local read unless one is active), one
    # C call to count (docs/ops/overhead.md, "The table decision in one frame" and "Fewer calls on
    # the torch path"). A.is_cpu / is_cuda cost a tenth of A.device.type; mps reads its own
    # table (docs/calibrate.md); meta (the declared op) never goes to torch here.
    if _ours_depth or (_always_active and _local.ours):
        return False
    try:
        table = WHEN["cpu"] if A.is_cpu else WHEN["cuda"] if A.is_cuda else WHEN["mps"] if A.is_mps else None
        if table is None:
            return False
        dtype = A.dtype
        if dtype not in _FAST_DTYPES:
            return False
        torch_path = True
        regions = table.get(op)
        if regions is not None and (regions := regions.get(dtype)) is not None:
            shape = A.shape  # _inside's test, inline
            m, n = shape[-2], shape[-1]
            big = m if m > n else n
            for lo, hi, b in regions:
                if lo <= big <= hi and A.numel() >= b * m * n:
                    torch_path = False
                    break
    except (AttributeError, IndexError):  # not a tensor; a vector inside a region
        return False
    if torch_path:
        if _dynamo_compiling() or _transforms_active():
            return False  # the declared op (Dynamo's trace, transforms)
        name = _requested.get()  # requested_backend(), its common case inline: no request, no variable
        if name is None and _environ_get(_environ_key) is not None:
            name = requested_backend()
        if name is not None and name not in _TORCH_REQUESTS:
            return False  # our kernels (emulator) run
    elif not _count_ours:
        return False
    try:
        next(_doors[op][torch_path])
    except KeyError:
        _new_door(op, torch_path)
    return torch_path


_TORCH_REQUESTS = ("auto", "torch")  # backend requests under which CPU/CUDA tensors use torch ops
# Dynamo's trace must not read the thread-locals and context below (it folds this call to True).
# torch.compiler.is_compiling (one frame more) is also true in non-strict torch.export and around a
# compile; there the Python runs for real and the torch.linalg call is traced like any aten op.
_dynamo_compiling = torch.compiler.is_dynamo_compiling
_transforms_active = torch._C._are_functorch_transforms_active  # oplayer.functorch_active, one frame less
_requested = _backends._requested  # use_backend's request (a ContextVar)
# $MPSLINALG_BACKEND, read from os.environ's own mapping (every change to os.environ updates it);
# on a Python without one, every call takes requested_backend()'s public lookup
_environ_get, _environ_key = ((_backends._ENVIRON[0].get, _backends._ENVIRON[1])
                              if _backends._ENVIRON[0] is not None else ((lambda key: key), ""))
#: dtypes the front doors' fast path hands to torch.linalg (those mpslinalg takes on CPU and CUDA)
_FAST_DTYPES = frozenset((torch.float32, torch.float64, torch.complex64, torch.complex128))


def decisions() -> dict[str, dict[str, int]]:
    """Front-door decisions of :func:`torch_is_faster` since :func:`reset_decisions`, per op.

    Returns
    -------
    dict
        ``{op: {"ours": n, "torch": m}}``: calls that ran mpslinalg's implementation (inside a
        :data:`WHEN` region) and calls handed to torch.linalg (outside), summed over threads.
    """
    with _lock:
        counts = {name: (_count_value(c[0]), _count_value(c[1])) for name, c in _doors.items()}
    return {name: {"ours": o, "torch": t} for name, (o, t) in counts.items() if o or t}


def reset_decisions() -> None:
    """Zero the counters of :func:`decisions`."""
    with _lock:
        for name in _doors:
            _doors[name] = (itertools.count(), itertools.count())


def _new_door(op: str, torch_path: bool) -> None:
    """Count the first decision for ``op`` (its counters created under the lock)."""
    with _lock:
        counters = _doors.setdefault(op, (itertools.count(), itertools.count()))
    next(counters[torch_path])


def _count_value(counter: itertools.count) -> int:
    """The value an ``itertools.count()`` would return next, without advancing it (its repr is
    ``count(N)``): the front doors count with one C call, ``next``, which the GIL makes atomic."""
    return int(repr(counter)[6:-1])


class _Local(threading.local):
    ours: bool = False  # this thread computes a call under enable(when="always"): front doors skip WHEN
    inside: bool = False  # this thread computes a routed call or a declared op's backward: the drop-in
    # routing sends its torch.linalg calls to torch's kernels (internal)


_local = _Local()
_lock = threading.Lock()  # _always_active and the list of the front doors' counters
#: the front doors' decisions per op: (ours, torch) counters (:func:`torch_first`, :func:`decisions`)
_doors: dict[str, tuple[itertools.count, itertools.count]] = {}


def always(step: int) -> None:
    """Enter (+1) or leave (-1) a call computed under ``enable(when="always")`` on this thread: its
    front doors skip :data:`WHEN` (``_local.ours``); :func:`torch_first` reads the thread-local only
    while some thread is in one (``_always_active``)."""
    global _always_active
    with _lock:
        _always_active += step
    _local.ours = step > 0
