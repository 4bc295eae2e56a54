"""A family's one declaration: what the registries read instead of listing families.

Each op family (``mpslinalg/<family>/``) declares, in its package's ``__init__.py``::

    FAMILY = Family(
        name="qr",
        order=40,
        ops=("qr", "geqrf", "householder_product", "ormqr"),
        routes=(Route("qr", "linalg_qr", _route_qr),),
        when={"cuda": {"qr": {torch.float32: ((32, 32, 512),)}}},
        metal=("qr",),
        workloads="mpslinalg.qr.workloads",
    )

and the registries discover it (:mod:`mpslinalg.registry`): the drop-in routing takes its
``routes``, the front doors' "never slower" table (:data:`mpslinalg.oplayer.table.WHEN`) its
``when`` regions, the main job its ``workloads`` rows, the Metal-source tests its ``metal`` files,
``benchmarks/run_gpu.sh`` the file ``benchmarks/bench_<name>.py``, the docs test the page
``docs/ops/<name>.md``. Nothing outside the family lists it (``docs/architecture.md``, "Adding a
family").

This module is part of the op layer: it imports only torch and the op layer's checks, so a family
can declare itself without importing anything above it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

from . import table
from .checks import supported_dtypes

__all__ = ["Family", "Grid", "Route", "declared", "grids", "takes"]

#: ``{device_type: {op: {dtype: ((n_min, n_max, batch_min), ...)}}}`` (see :data:`table.WHEN`).
Regions = Mapping[str, Mapping[str, Mapping[torch.dtype, tuple[tuple[int, int, int], ...]]]]


@dataclass(frozen=True)
class Route:
    """One ``aten`` operator that :func:`mpslinalg.enable` replaces.

    Attributes
    ----------
    name : str
        The mpslinalg op it runs (``mpslinalg.<name>``, one of its family's ``ops``). Also the key of
        :data:`~mpslinalg.oplayer.table.WHEN`, :func:`mpslinalg.routing.stats` and ``enable(ops=...)``.
    aten : str
        The operator (and overload) replaced, e.g. ``"linalg_inv_ex"``.
    call : callable
        ``call(op, *args, **kwargs)``: run ``op`` (the mpslinalg function) on the aten operator's
        arguments and return what the aten operator returns; ``None`` hands the call to torch
        (arguments mpslinalg does not implement, e.g. ``pivot=False``). :func:`takes` is the usual test.
    grad_ours : bool
        Route every call that autograd records, whatever the table says: our derivative is
        needed for correctness (``det``: the adjugate at singular matrices, where torch's is zero).
    torch_wrong_on_cpu : callable or None
        ``torch_wrong_on_cpu(first_argument)``: where torch's CPU kernel is known wrong (a torch
        bug), so the call runs ours whatever the table says (``lu``: torch's batched-getrf race,
        :mod:`mpslinalg.lu.torch_cpu`).
    """

    name: str
    aten: str
    call: Callable
    grad_ours: bool = False
    torch_wrong_on_cpu: Callable | None = None


def takes(*tensors) -> bool:
    """Whether mpslinalg implements these arguments (tensors of >= 2 dimensions, a dtype it takes on
    their device, one device); a route hands anything else to torch's kernel (and torch's errors)."""
    first = tensors[0]
    if not isinstance(first, torch.Tensor) or first.dim() < 2:
        return False
    dtypes = supported_dtypes(first.device)
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.dtype not in dtypes or t.device != first.device:
            return False
    return True


@dataclass(frozen=True)
class Grid:
    """Where ``python -m mpslinalg calibrate`` times one routed op against torch.linalg (issue 36).

    Each cell is a batch of ``batch`` matrices of order ``n`` of one dtype. The inputs are built
    from a well-conditioned Hermitian positive definite batch ``A`` (``X Xᴴ / n + I``: every
    factorisation takes it); ``inputs(A)`` returns the positional arguments both calls take
    (default ``(A,)``), ``kwargs`` the keyword arguments, ``peer`` the torch call (default
    ``torch.linalg.<op>``, else ``torch.<op>``).
    """

    sizes: tuple[int, ...] = (2, 3, 4, 8, 16, 32, 64, 128, 256)
    batches: tuple[int, ...] = (1, 64, 1024, 4096)
    quick_sizes: tuple[int, ...] = (4, 32)
    quick_batches: tuple[int, ...] = (1, 256)
    dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.complex64)
    inputs: Callable | None = None
    kwargs: Mapping = field(default_factory=dict)
    peer: Callable | None = None


_DECLARED: dict[str, Family] = {}


@dataclass(frozen=True)
class Family:
    """An op family's declaration (see the module docstring).

    Attributes
    ----------
    name : str
        The package name (``mpslinalg/<name>/``); also names ``tests/<name>/``,
        ``docs/ops/<name>.md`` and ``benchmarks/bench_<name>.py``.
    order : int
        Where the family's rows stand in the main job and its routes in :data:`routing.ROUTES`
        (ascending; families that build on others come later).
    ops : tuple of str
        The public names it exports (``mpslinalg.<op>``).
    routes : tuple of Route
        The ``aten`` operators :func:`mpslinalg.enable` may replace with its ops.
    when : mapping
        ``{device_type: {op: {dtype: regions}}}``: where its own implementation was measured faster
        than torch.linalg on the ``torch`` backend (the front doors and ``enable(when="faster")``
        call torch.linalg elsewhere). Merged into :data:`mpslinalg.oplayer.table.WHEN` on
        declaration. A device type missing here means torch.linalg everywhere on it (on ``mps``:
        until ``python -m mpslinalg calibrate`` measures it, docs/calibrate.md).
    metal : tuple of str
        Stems of its Metal sources, ``metal/<stem>.metal`` (each starts with the family's name).
    workloads : str or None
        The module whose ``workloads()`` returns the family's main-job rows
        (:class:`mpslinalg.mainjob.workloads.Workload`), imported only by the main job.
    grid : mapping
        ``{op: Grid}``: where ``python -m mpslinalg calibrate`` times each routed op; a route
        missing here gets ``Grid()`` (one matrix argument): :meth:`grids`.
    """

    name: str
    order: int
    ops: tuple[str, ...]
    routes: tuple[Route, ...] = ()
    when: Regions = field(default_factory=dict)
    metal: tuple[str, ...] = ()
    workloads: str | None = None
    grid: Mapping[str, Grid] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for r in self.routes:
            if r.name not in self.ops:
                raise ValueError(f"family {self.name}: route {r.aten} runs {r.name}, which is not one of its ops")
        for stem in self.metal:
            if not stem.startswith(self.name):
                raise ValueError(f"family {self.name}: Metal source {stem}.metal must start with the family's name")
        for op in self.grid:
            if op not in {r.name for r in self.routes}:
                raise ValueError(f"family {self.name}: a grid for {op!r}, which none of its routes runs")
        for device, ops in self.when.items():
            table.add_regions(device, ops)
        _DECLARED[self.name] = self


def grids(family: Family) -> dict[str, Grid]:
    """Every routed op of ``family`` with its calibration grid (declared, or the default ``Grid()``)."""
    return {r.name: family.grid.get(r.name, Grid()) for r in family.routes}


def declared() -> tuple[Family, ...]:
    """The families declared so far (imported), in ``order``: :func:`mpslinalg.registry.families`
    imports every family package first."""
    return tuple(sorted(_DECLARED.values(), key=lambda f: (f.order, f.name)))
