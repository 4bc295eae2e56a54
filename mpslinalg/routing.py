"""Drop-in routing: unmodified ``torch.linalg`` code runs mpslinalg's ops (issue 13).

::

    import mpslinalg
    mpslinalg.enable()                    # devices=("mps",): every torch.linalg call on mps below
    ...                                   # kornia / pytorch3d / your model, unchanged
    mpslinalg.disable()

    with mpslinalg.enabled(devices=("cpu",), ops=("inv", "solve")):
        ...

How it works (the full reasoning, and the measured table, are in ``docs/routing.md``)
--------------------------------------------------------------------------------------
For each routed ``aten`` operator and each named device, :func:`enable` captures torch's own
kernel for the device's **autograd** dispatch key (``AutogradMPS``/``AutogradCPU``/``AutogradCUDA``,
:func:`torch.library.get_kernel`) and registers a Python kernel in its place
(``torch.library.Library("aten", "IMPL")``). Registering at the autograd key, not the backend key,
means

* every path into the operator is caught: ``torch.linalg.inv``, ``torch.inverse``,
  ``Tensor.inverse``, and torch's composite ops that call it (``linalg_inv`` → ``linalg_inv_ex``,
  ``logdet``/``slogdet`` → ``linalg_slogdet``, ``torch.lu_solve`` → ``linalg_lu_solve``), from any
  library and any thread;
* the routed call is mpslinalg's public op, so **our** derivatives are recorded (the singular
  ``det`` gradient) and ``torch.compile`` traces our custom ops into its graph;
* a call we do not take goes to the captured kernel with the same dispatch key set — torch's
  autograd formula and kernel exactly as without routing, at one Python call of extra cost.

The routing kernel hands a call back to torch when

* it is an **internal** call: a thread-local flag is set while mpslinalg computes a routed call, so
  its own uses of ``torch.linalg`` (e.g. the LAPACK leaf of the ``torch`` backend) never recurse;
* a ``torch.func`` transform is active (its autograd.Function path cannot be entered from inside
  the dispatcher's autograd key);
* the arguments are outside what mpslinalg implements (dtype, rank, ``pivot=False``, a ``driver``):
  torch then raises its own errors for bad input;
* the **"never slower" table** :data:`WHEN` says torch.linalg is faster at that size on that device
  (``when="faster"``, the default; ``when="always"`` routes every call mpslinalg can take, and
  mpslinalg's implementation runs at every size).

The same table decides at the public ops' front doors (``mpslinalg.solve`` etc., :func:`torch_is_faster`,
:func:`torch_first`): outside it a call on the ``torch`` backend is one ``torch.linalg`` call, torch's
derivative included (except ``det``'s, whose adjugate gradient at singular matrices is ours);
:func:`ours_always` turns that off (tests, benchmarks); :func:`decisions` counts the answers.

``torch.inference_mode`` removes the autograd keys from dispatch, so calls made inside it are not
routed (they run torch's kernels); ``torch.no_grad`` is routed.

:func:`disable` destroys the ``Library`` objects, which deregisters the kernels and restores
torch's. :func:`stats` counts, per op, the calls that ran ours and those handed to torch.

Routed calls are thread-safe. Like any ``torch.library`` registration, :func:`enable` and
:func:`disable` should not race with ``torch.linalg`` calls running on other threads (the
dispatcher does not synchronise the two): switch routing at start-up or between phases.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch

from .kernels import backends as _backends
from .kernels.backends import requested_backend
from .oplayer.checks import supported_dtypes

__all__ = ["ROUTES", "WHEN", "decisions", "disable", "enable", "enabled", "ours_always", "reset_decisions",
           "reset_stats", "routed_ops", "stats", "torch_first", "torch_is_faster"]

#: device type -> the dispatch key whose kernel is replaced.
_AUTOGRAD_KEY = {"cpu": "AutogradCPU", "cuda": "AutogradCUDA", "mps": "AutogradMPS"}


# --------------------------------------------------------------------------------------------------
# The routes: one aten operator each, the mpslinalg op that replaces it, and its argument mapping
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """One routed ``aten`` operator.

    Attributes
    ----------
    name : str
        The mpslinalg op it runs (``mpslinalg.<name>``); the route exists only when mpslinalg
        exports it. Also the key of :data:`WHEN`, :func:`stats` and ``enable(ops=...)``.
    aten : str
        The operator (and overload) replaced, e.g. ``"linalg_inv_ex"``.
    call : callable
        ``call(op, *args, **kwargs)``: run ``op`` (the mpslinalg function) on the aten operator's
        arguments and return what the aten operator returns; ``None`` hands the call to torch
        (arguments mpslinalg does not implement, e.g. ``pivot=False``).
    grad_ours : bool
        Route every call that autograd records, whatever :data:`WHEN` says: our derivative is
        needed for correctness (``det``: the adjugate at singular matrices, where torch's is zero).
    """

    name: str
    aten: str
    call: Callable
    grad_ours: bool = False


def _ours(*tensors) -> bool:
    """Tensors mpslinalg implements (dtype per device, one device); else torch's kernel (and errors)."""
    first = tensors[0]
    if not isinstance(first, torch.Tensor) or first.dim() < 2:
        return False
    dtypes = supported_dtypes(first.device)
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.dtype not in dtypes or t.device != first.device:
            return False
    return True


def _inv_ex(op, A, check_errors=False):
    return op(A, check_errors=check_errors) if _ours(A) else None


def _unary(op, A):
    return op(A) if _ours(A) else None


def _solve_ex(op, A, B, left=True, check_errors=False):
    return op(A, B, left=left, check_errors=check_errors) if _ours(A, B) else None


def _solve(op, A, B, left=True):
    return op(A, B, left=left) if _ours(A, B) else None


def _lu_factor_ex(op, A, pivot=True, check_errors=False):
    return op(A, check_errors=check_errors) if pivot and _ours(A) else None


def _lu(op, A, pivot=True):
    return op(A) if pivot and _ours(A) else None


def _lu_solve(op, LU, pivots, B, left=True, adjoint=False):
    ok = _ours(LU, B) and isinstance(pivots, torch.Tensor) and pivots.dtype == torch.int32
    return op(LU, pivots, B, left=left, adjoint=adjoint) if ok else None


def _solve_triangular(op, A, B, upper, left=True, unitriangular=False):
    return op(A, B, upper=upper, left=left, unitriangular=unitriangular) if _ours(A, B) else None


def _qr(op, A, mode="reduced"):
    return op(A, mode=mode) if _ours(A) else None


def _svd(op, A, full_matrices=True, driver=None):
    return op(A, full_matrices=full_matrices) if driver is None and _ours(A) else None


def _svdvals(op, A, driver=None):
    return op(A) if driver is None and _ours(A) else None


def _lstsq(op, A, B, rcond=None, driver=None):
    return op(A, B, rcond=rcond) if driver is None and _ours(A, B) else None


def _pinv(op, A, atol=None, rtol=None, hermitian=False):
    return op(A, atol=atol, rtol=rtol, hermitian=hermitian) if _ours(A) else None


def _cholesky_ex(op, A, upper=False, check_errors=False):
    return op(A, upper=upper, check_errors=check_errors) if _ours(A) else None


def _eigh(op, A, UPLO="L"):  # noqa: N803  (torch's argument name)
    return op(A, UPLO=UPLO) if _ours(A) else None


#: Every route the module knows, in the order of the families. Composite torch ops need no route of
#: their own: ``linalg_inv``, ``inverse`` → ``linalg_inv_ex``; ``det`` → ``linalg_det``;
#: ``slogdet``, ``logdet`` → ``linalg_slogdet``; ``linalg_lu_factor`` → ``linalg_lu_factor_ex``;
#: ``lu_solve`` → ``linalg_lu_solve``; ``linalg_matrix_rank`` → ``linalg_svdvals``/``linalg_eigvalsh``.
ROUTES: tuple[Route, ...] = (
    Route("solve_triangular", "linalg_solve_triangular", _solve_triangular),
    Route("lu_factor_ex", "linalg_lu_factor_ex", _lu_factor_ex),
    Route("lu", "linalg_lu", _lu),
    Route("lu_solve", "linalg_lu_solve", _lu_solve),
    # linalg_solve calls _linalg_solve_ex (which also returns LU and pivots), not linalg_solve_ex:
    # both public ops are routed.
    Route("solve", "linalg_solve", _solve),
    Route("solve_ex", "linalg_solve_ex", _solve_ex),
    Route("det", "linalg_det", _unary, grad_ours=True),
    Route("slogdet", "linalg_slogdet", _unary),
    Route("inv_ex", "linalg_inv_ex", _inv_ex),
    Route("qr", "linalg_qr", _qr),
    Route("svd", "linalg_svd", _svd),
    Route("svdvals", "linalg_svdvals", _svdvals),
    Route("pinv", "linalg_pinv.atol_rtol_tensor", _pinv),
    Route("lstsq", "linalg_lstsq", _lstsq),
    Route("cholesky_ex", "linalg_cholesky_ex", _cholesky_ex),
    Route("eigh", "linalg_eigh", _eigh),
)


def routed_ops() -> tuple[str, ...]:
    """Names of the ops that :func:`enable` can route now (those ``mpslinalg`` exports)."""
    import mpslinalg

    return tuple(r.name for r in ROUTES if callable(getattr(mpslinalg, r.name, None)))


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
#: there (not faster, or not measured). ``None`` for a device: mpslinalg at every size (on ``mps``
#: torch.linalg lacks ops or falls back to the CPU, and no Mac was available to measure).
_F32, _C64 = torch.float32, torch.complex64
WHEN: dict[str, dict[str, dict[torch.dtype, tuple[tuple[int, int, int], ...]]] | None] = {
    # 2026-12-01, torch 2.13 CPU, shared 2-core x86-64: bench_routing.py --threads 1 --blocks 4,
    # kept only where the grid run and a re-measurement (--verify) both had every block >= 0.95x
    "cpu": {
        "inv_ex": {_F32: ((2, 4, 1024),), _C64: ((2, 4, 4096),)},
        "det": {_F32: ((2, 4, 4096),), _C64: ((3, 4, 4096),)},
        "slogdet": {_F32: ((3, 4, 4096),), _C64: ((2, 4, 4096),)},
        "solve": {_F32: ((2, 4, 4096),), _C64: ((2, 3, 4096),)},
        "solve_ex": {_F32: ((2, 3, 4096),), _C64: ((2, 4, 4096),)},
    },
    # 2026-12-01, H200, torch 2.11+cu130 (docs/routing.md, "CUDA"): bench_routing.py --device cuda
    # --blocks 2 (grid) where the median block was >= 1.05x and every block >= 0.95x; qr and the
    # complex 3x3 inverse from the main job's rows (--mainjob: 145x/249x and 2.1x routed)
    "cuda": {
        "inv_ex": {_F32: ((2, 4, 65536),), _C64: ((2, 2, 65536), (3, 3, 100000), (4, 4, 65536))},
        "qr": {_F32: ((32, 32, 512),), _C64: ((32, 32, 512),)},
    },
    "mps": None,
}


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
    # the torch path"). A.is_cpu / is_cuda cost a tenth of A.device.type; mps (kernels always) and
    # meta (the declared op) never go to torch here.
    if _ours_depth or (_always_active and _local.ours):
        return False
    try:
        table = WHEN["cpu"] if A.is_cpu else WHEN["cuda"] if A.is_cuda else None
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


# --------------------------------------------------------------------------------------------------
# State: the registrations, the internal-call flag, the counters
# --------------------------------------------------------------------------------------------------


class _Local(threading.local):
    inside: bool = False  # this thread is computing a routed call (its torch calls are internal)
    ours: bool = False  # ... under when="always": the front doors skip WHEN (torch_is_faster)
    counts: dict | None = None  # this thread's counters: op -> [ours, torch, internal]


_local = _Local()
_lock = threading.Lock()  # enable/disable, and the list of the threads' counters
_libraries: list[torch.library.Library] = []
_config: tuple | None = None  # (devices, ops, when) of the active routing
#: enabled() blocks now open, in the order they were entered, one ``[config]`` each: a block finds
#: its own entry by identity (blocks of equal configs are distinct), whatever the order of exits
_open: list[list] = []
_before_open: tuple | None = None  # the routing in force when the first open block was entered
_OURS, _TORCH, _INTERNAL = range(3)
_all_counts: list[dict[str, list[int]]] = []  # every thread's counters (no lock on the call path)
#: the front doors' decisions per op: (ours, torch) counters (:func:`torch_first`, :func:`decisions`)
_doors: dict[str, tuple[itertools.count, itertools.count]] = {}


def _thread_counters(attr: str, registry: list) -> dict:
    """This thread's counter dict ``_local.<attr>``, created and listed in ``registry`` (under the
    lock, so :func:`stats`/:func:`decisions` see every thread's) at its first count."""
    counts: dict = {}
    setattr(_local, attr, counts)
    with _lock:
        registry.append(counts)
    return counts

def _always(step: int) -> None:
    """Enter (+1) or leave (-1) a call computed under ``enable(when="always")`` on this thread: its
    front doors skip :data:`WHEN` (``_local.ours``); :func:`torch_first` reads the thread-local only
    while some thread is in one (``_always_active``)."""
    global _always_active
    with _lock:
        _always_active += step
    _local.ours = step > 0


def _count(name: str, path: int) -> None:
    counts = _local.counts
    if counts is None:
        counts = _thread_counters("counts", _all_counts)
    c = counts.get(name)
    if c is None:
        c = counts[name] = [0, 0, 0]
    c[path] += 1


def stats() -> dict[str, dict[str, int]]:
    """Calls seen by the routing since the last :func:`reset_stats`, per op.

    Returns
    -------
    dict
        ``{op: {"ours": n, "torch": m, "internal": k}}``: ``ours`` calls ran the mpslinalg op;
        ``torch`` calls were handed to torch's kernel (``torch.func`` transforms, arguments mpslinalg
        does not implement, or sizes where :data:`WHEN` says torch.linalg is faster);
        ``internal`` calls were made by mpslinalg itself while computing a routed call (torch's
        kernel, never routed again).
    """
    total: dict[str, list[int]] = {}
    with _lock:
        for counts in _all_counts:
            for name, c in list(counts.items()):
                t = total.setdefault(name, [0, 0, 0])
                for i in range(3):
                    t[i] += c[i]
    return {name: dict(zip(("ours", "torch", "internal"), t)) for name, t in total.items() if any(t)}


def reset_stats() -> None:
    """Zero the counters of :func:`stats` (call it while no other thread is making routed calls)."""
    with _lock:
        for counts in _all_counts:
            for c in counts.values():
                c[:] = [0, 0, 0]


def _kernel(route: Route, op: Callable, original, table: dict | None) -> Callable:
    """The kernel registered for ``route`` on one device: ours, or torch's ``original``.

    ``table`` is the op's :data:`WHEN` entry for the device (``None``: route every call we can).
    """
    name, grad_ours = route.name, route.grad_ours

    def kernel(keyset, *args, **kwargs):
        if _local.inside:
            _count(name, _INTERNAL)
            return original.call_boxed(keyset, *args, **kwargs)
        if not _transforms_active() and (
                table is None or _faster(table, args[0])
                or (grad_ours and torch.is_grad_enabled() and getattr(args[0], "requires_grad", False))):
            _local.inside = True
            if table is None:  # when="always": mpslinalg's implementation at every size
                _always(+1)
            try:
                result = route.call(op, *args, **kwargs)
            finally:
                _local.inside = False
                if table is None:
                    _always(-1)
            if result is not None:
                _count(name, _OURS)
                return result
        _count(name, _TORCH)
        return original.call_boxed(keyset, *args, **kwargs)

    return kernel


def _normalise(devices, ops, when) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    if isinstance(devices, (str, torch.device)):
        devices = (devices,)
    types = []
    for d in devices:
        try:
            t = torch.device(d).type
        except (RuntimeError, TypeError):
            t = None
        if t not in _AUTOGRAD_KEY:
            raise ValueError(f"mpslinalg.enable: devices must name device types among "
                             f"{sorted(_AUTOGRAD_KEY)}, got {d!r}")
        if t not in types:
            types.append(t)
    available = routed_ops()
    if ops is None:
        ops = available
    else:
        ops = (ops,) if isinstance(ops, str) else tuple(ops)
        unknown = [o for o in ops if o not in available]
        if unknown:
            raise ValueError(f"mpslinalg.enable: ops {unknown} cannot be routed; the routable ops are "
                             f"{list(available)}")
    if when not in ("faster", "always"):
        raise ValueError(f"mpslinalg.enable: when must be 'faster' or 'always', got {when!r}")
    return tuple(types), tuple(ops), when


def _register(devices, ops, when) -> None:
    import mpslinalg

    for device in devices:
        key = _AUTOGRAD_KEY[device]
        lib = torch.library.Library("aten", "IMPL")
        _libraries.append(lib)
        for route in ROUTES:
            if route.name not in ops:
                continue
            table = WHEN[device]
            table = None if when == "always" or table is None else table.get(route.name, {})
            if table is not None and not any(table.values()) and not route.grad_ours:
                continue  # never faster on this device: torch's kernel stays, no per-call cost
            original = torch.library.get_kernel(f"aten::{route.aten}", key)
            lib.impl(route.aten, _kernel(route, getattr(mpslinalg, route.name), original, table), key,
                     with_keyset=True)


def _deregister() -> None:
    while _libraries:
        _libraries.pop()._destroy()
    _clear_dispatch_caches()


def _clear_dispatch_caches() -> None:
    """Forget the kernels torch's Python dispatcher cached for the routed ops. That dispatcher (on
    while Dynamo and torch.export trace) caches an overload's kernel per dispatch key and misses a
    registration made after it: a non-strict ``torch.export`` before :func:`enable` kept torch's
    ``linalg_solve`` kernel in a later ``torch.compile`` (torch 2.11 and 2.13); after
    :func:`disable`, a cache would keep calling the removed kernel."""
    for route in ROUTES:
        packet = getattr(torch.ops.aten, route.aten.split(".")[0], None)
        for name in packet.overloads() if packet is not None else ():
            cache = getattr(getattr(packet, name), "_dispatch_cache", None)
            if cache is not None:
                cache.clear()


def enable(devices: Iterable[str] | str = ("mps",), ops: Iterable[str] | None = None, *,
           when: str = "faster") -> None:
    """Route ``torch.linalg`` calls on ``devices`` to mpslinalg's ops, process-wide.

    Replaces a previous :func:`enable` (its registrations are removed first).

    Parameters
    ----------
    devices : str or iterable of str, optional
        Device types to route: ``"mps"`` (default), ``"cpu"``, ``"cuda"``.
    ops : iterable of str, optional
        mpslinalg op names to route (default: all of :func:`routed_ops`), e.g. ``("inv_ex",
        "det")``. ``torch.linalg.inv``/``torch.inverse`` route through ``"inv_ex"``,
        ``torch.linalg.lu_factor`` through ``"lu_factor_ex"``, ``logdet`` through ``"slogdet"``.
    when : {"faster", "always"}, optional
        ``"faster"`` (default) routes a call only where :data:`WHEN` records that mpslinalg is at
        least 0.95x torch.linalg on that device at that size; ``"always"`` routes every call
        mpslinalg can take.

    Raises
    ------
    ValueError
        Unknown device type, op name or ``when``.

    Examples
    --------
    >>> import torch, mpslinalg
    >>> mpslinalg.enable(devices=("cpu",), when="always")
    >>> X = torch.linalg.inv(torch.randn(1000, 4, 4))       # ran mpslinalg.inv_ex
    >>> mpslinalg.routing.stats()["inv_ex"]["ours"]
    1
    >>> mpslinalg.disable()
    """
    config = _normalise(devices, ops, when)
    with _lock:
        _apply(config)


def disable() -> None:
    """Remove every registration of :func:`enable`: torch's kernels serve every call again."""
    with _lock:
        _apply(None)


def _apply(config: tuple | None) -> None:
    """Make ``config`` (normalised; ``None``: no routing) the routing in force. Under ``_lock``."""
    global _config
    _deregister()
    _config = None
    if config is None:
        return
    try:
        _register(*config)
    except BaseException:
        _deregister()
        raise
    _clear_dispatch_caches()
    _config = config


@contextlib.contextmanager
def enabled(devices: Iterable[str] | str = ("mps",), ops: Iterable[str] | None = None, *,
            when: str = "faster") -> Iterator[None]:
    """Context manager: :func:`enable` on entry; on exit the routing in force before is restored.

    Like :func:`enable` it acts process-wide (every thread), not only on the calling thread. Blocks
    may be open on several threads at once and exit in any order: the open blocks form a stack, the
    routing in force is that of the innermost (last entered) block still open, and when the last
    one exits, the routing in force before the first was entered comes back (thread 1 enters,
    thread 2 enters, 1 exits, 2 exits: routing off again, as before either).

    Examples
    --------
    >>> import torch, mpslinalg
    >>> with mpslinalg.enabled(devices="cpu", ops=("det",), when="always"):
    ...     d = torch.det(torch.randn(8, 3, 3))
    """
    global _before_open
    config = _normalise(devices, ops, when)
    entry = [config]
    with _lock:
        if not _open:
            _before_open = _config
        _apply(config)
        _open.append(entry)
    try:
        yield
    finally:
        with _lock:
            top = _open[-1] is entry
            del _open[next(i for i, e in enumerate(_open) if e is entry)]  # by identity, not ==
            if top:
                _apply(_open[-1][0] if _open else _before_open)
