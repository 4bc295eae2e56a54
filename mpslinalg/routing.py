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
import threading
from collections.abc import Callable, Iterable, Iterator

import torch

from .oplayer import table as _table
from .oplayer.family import Route
from .oplayer.table import (  # noqa: F401  (the front doors' table, re-exported: routing's public names)
    WHEN,
    _faster,
    _inside,
    _transforms_active,
    decisions,
    ours_always,
    reset_decisions,
    torch_first,
    torch_is_faster,
)

__all__ = ["WHEN", "decisions", "disable", "enable", "enabled", "ours_always", "reset_decisions",
           "reset_stats", "routed_ops", "stats", "table", "torch_first", "torch_is_faster"]


def table(device: str = "cpu") -> dict:
    """The "never slower" table in force on ``device`` (a device type) and where it came from.

    Returns
    -------
    dict
        ``{"device": type, "source": str, "ops": {op: {dtype: regions}}}``; ``source`` is
        ``"shipped default"``, ``"calibrated <cache file> (<date>)"`` (``python -m mpslinalg
        calibrate`` on this machine, docs/calibrate.md) or ``"file <path> (...)"``
        (``$MPSLINALG_ROUTING_TABLE``).

    Examples
    --------
    >>> import mpslinalg
    >>> sorted(mpslinalg.routing.table("cpu"))
    ['device', 'ops', 'source']
    """
    device = torch.device(device).type
    ops = _table.in_force(device)
    return {"device": device, "source": _table.SOURCES.get(device, "shipped default"), "ops": dict(ops)}

#: device type -> the dispatch key whose kernel is replaced.
_AUTOGRAD_KEY = {"cpu": "AutogradCPU", "cuda": "AutogradCUDA", "mps": "AutogradMPS"}


# --------------------------------------------------------------------------------------------------
# The routes: declared by the families (Family.routes), discovered here
# --------------------------------------------------------------------------------------------------


def __getattr__(name: str):
    if name == "ROUTES":  # computed on access: the families are imported first (registry)
        return _routes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _routes() -> tuple[Route, ...]:
    """Every declared route, in the families' order. Composite torch ops need no route of their
    own: ``linalg_inv``, ``inverse`` → ``linalg_inv_ex``; ``det`` → ``linalg_det``; ``slogdet``,
    ``logdet`` → ``linalg_slogdet``; ``linalg_lu_factor`` → ``linalg_lu_factor_ex``; ``lu_solve`` →
    ``linalg_lu_solve``; ``linalg_matrix_rank`` → ``linalg_svdvals``/``linalg_eigvalsh``."""
    from .registry import families

    return tuple(r for f in families() for r in f.routes)


def routed_ops() -> tuple[str, ...]:
    """Names of the ops that :func:`enable` can route now (those the families declare routes for)."""
    return tuple(r.name for r in _routes())


def _op(name: str) -> Callable:
    """The public op ``mpslinalg.<name>`` a route runs (its family's package exports it)."""
    from .registry import public_op

    return public_op(name)


# --------------------------------------------------------------------------------------------------
# State: the registrations, the internal-call flag, the counters
# --------------------------------------------------------------------------------------------------


class _Local(threading.local):
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


def _thread_counters(attr: str, registry: list) -> dict:
    """This thread's counter dict ``_local.<attr>``, created and listed in ``registry`` (under the
    lock, so :func:`stats`/:func:`decisions` see every thread's) at its first count."""
    counts: dict = {}
    setattr(_local, attr, counts)
    with _lock:
        registry.append(counts)
    return counts


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
    wrong = route.torch_wrong_on_cpu or (lambda A: False)

    def kernel(keyset, *args, **kwargs):
        if _table._local.inside:
            _count(name, _INTERNAL)
            return original.call_boxed(keyset, *args, **kwargs)
        if not _transforms_active() and (
                table is None or _faster(table, args[0]) or wrong(args[0])
                or (grad_ours and torch.is_grad_enabled() and getattr(args[0], "requires_grad", False))):
            _table._local.inside = True
            if table is None:  # when="always": mpslinalg's implementation at every size
                _table.always(+1)
            try:
                result = route.call(op, *args, **kwargs)
            finally:
                _table._local.inside = False
                if table is None:
                    _table.always(-1)
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
    for device in devices:
        key = _AUTOGRAD_KEY[device]
        lib = torch.library.Library("aten", "IMPL")
        _libraries.append(lib)
        for route in _routes():
            if route.name not in ops:
                continue
            table = WHEN[device]
            table = None if when == "always" or table is None else table.get(route.name, {})
            if (table is not None and not any(table.values()) and not route.grad_ours
                    and not (device == "cpu" and route.torch_wrong_on_cpu)):
                continue  # never faster on this device: torch's kernel stays, no per-call cost
            original = torch.library.get_kernel(f"aten::{route.aten}", key)
            lib.impl(route.aten, _kernel(route, _op(route.name), original, table), key,
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
    for route in _routes():
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
