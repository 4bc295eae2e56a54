"""The registry of representative workloads that the main job (``python -m mpslinalg``) runs.

One row of the main job's table = one :class:`Workload`: an op, the user workload it stands for
(DESIGN §1: camera geometry, linear attention, variational Monte Carlo, scientific computing),
how to make its inputs on a device, our call, the ``torch.linalg`` call (timed in the same run),
optionally the SciPy call (timed on the CPU), and an accuracy check that returns a LAPACK-style
test ratio with its pass threshold.

How a family adds its rows
--------------------------
A family declares the module of its rows (``Family.workloads``, e.g. ``mpslinalg.qr.workloads``),
whose ``workloads() -> list[Workload]`` builds them from the helpers here; :func:`workloads`
discovers it (:func:`mpslinalg.registry.families`), so nothing here lists families. A function
builds rows only for ops that are implemented (:func:`implemented` reads ``mpslinalg.__all__``),
so a row appears in the report the moment its op is exported, and never before. For example::

    def workloads() -> list[Workload]:
        if not implemented("solve_triangular"):
            return []
        return [Workload(op="solve_triangular", name="...", description="...", make=...,
                         ours=lambda x: ours("solve_triangular")(x["A"], x["B"], upper=False),
                         peer=lambda x: torch.linalg.solve_triangular(x["A"], x["B"], upper=False),
                         accuracy=...)]

Conventions
-----------
* ``make(device, dtype, quick)`` returns a ``dict`` of named input tensors on ``device``; sizes are
  the DESIGN §1 workloads on GPUs and smaller on the CPU; ``quick`` makes them small everywhere.
  Inputs are drawn on the CPU with a fixed seed and moved, so every device and run sees the same
  matrices.
* ``ours``, ``peer`` and ``scipy`` take that dict and return the op's result; they are timed as is,
  so they must not convert or copy inputs (``x.numpy()`` of a CPU tensor is a view).
* ``accuracy(inputs, out)`` gets ``out = ours(inputs)`` and returns
  ``(ratio_name, value, threshold)``. Ratios come from :mod:`reference.metrics` (LAPACK's test
  ratios, u = 2^-24 for float32/complex64, pass below 30). They are computed in float64 on the CPU
  over at most :data:`ACCURACY_BATCH` matrices of a batch (the first ones), which keeps the check
  cheap for batches of millions; every matrix of a batch is drawn from the same distribution.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

# ``WORKLOADS`` (the list of rows) is a module attribute computed on access, see ``__getattr__``.
__all__ = ["ACCURACY_BATCH", "ReferenceUnavailable", "Workload", "implemented", "ours", "workloads"]

#: At most this many matrices of a batch enter an accuracy check.
ACCURACY_BATCH = 256

Inputs = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Workload:
    """One row of the main job.

    Attributes
    ----------
    op : str
        Public name in ``mpslinalg`` (and ``torch.linalg``), e.g. ``"solve_triangular"``.
    name : str
        Short row label, unique in the registry, without sizes (they differ per device and
        ``quick``; the report shows the actual shapes), e.g. ``"solve_triangular deltanet"``.
    description : str
        The user workload it represents, with the shapes of the GPU size.
    make : callable
        ``make(device, dtype, quick) -> dict[str, Tensor]``.
    ours, peer : callable
        ``fn(inputs) -> result`` for ``mpslinalg.<op>`` and ``torch.linalg.<op>``.
    accuracy : callable
        ``accuracy(inputs, out) -> (ratio_name, value, threshold)``; pass iff ``value <= threshold``.
    scipy : callable, optional
        ``fn(inputs) -> result`` with SciPy; timed only when the device is the CPU.
    dtype : torch.dtype
        The dtype the workload runs in (float32 or complex64: what an Apple GPU has).
    drift : mapping of str to float, optional
        This row's own run-to-run drift per peer (``"scipy"``, ``"torch.linalg"``), where it is
        measured above its column's (:data:`.timing.PEER_DRIFT`, :data:`.timing.RUN_DRIFT`): the
        verdict's interval is widened by the larger. Measured by the columns' method
        (``scripts/compare_verdicts.py --row-drift``) over consecutive full runs.
    """

    op: str
    name: str
    description: str
    make: Callable[[torch.device, torch.dtype, bool], Inputs]
    ours: Callable[[Inputs], Any]
    peer: Callable[[Inputs], Any]
    accuracy: Callable[[Inputs, Any], tuple[str, float, float]]
    scipy: Callable[[Inputs], Any] | None = None
    dtype: torch.dtype = torch.float32
    drift: Mapping[str, float] = field(default_factory=dict)


def implemented(op: str) -> bool:
    """True when ``mpslinalg.<op>`` is exported (listed in ``mpslinalg.__all__``)."""
    import mpslinalg

    return op in getattr(mpslinalg, "__all__", ()) and callable(getattr(mpslinalg, op, None))


def ours(op: str) -> Callable[..., Any]:
    """``mpslinalg.<op>``, looked up at call time (so tests can substitute it)."""
    import mpslinalg

    return getattr(mpslinalg, op)


# ----------------------------------------------------------------------------------------------
# Helpers shared by the families' rows
# ----------------------------------------------------------------------------------------------


class ReferenceUnavailable(RuntimeError):
    """The ``reference`` oracles are not importable, so accuracy cannot be judged here."""


def ref_oracle(name: str):
    """``reference.<name>``: inside the package in an installed wheel (``mpslinalg.reference``: the
    wheel installs no top-level ``reference``), the repository's top-level folder in a checkout."""
    for package in ("mpslinalg.reference", "reference"):
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name not in (package, f"{package}.{name}", package.split(".")[0] + ".reference"):
                raise  # a dependency of the oracles is missing (scipy, mpmath): a real error
    raise ReferenceUnavailable(
        "accuracy needs the 'reference' oracles (mpslinalg/reference in a wheel, reference/ in a "
        "checkout); reinstall mpslinalg or run from a checkout"
    )


def no_complex_inv_on_mps() -> str:
    """What the installed torch offers for complex ``inv`` on MPS (none up to 2.15, checked Nov 2026)."""
    from torch.torch_version import TorchVersion

    version = torch.__version__.split("+")[0]
    if TorchVersion(version) < (2, 16):
        return f"torch {version} has no complex inv on MPS"
    return f"torch {version}: complex inv on MPS not checked (none up to 2.15)"


def ref_metrics():
    """``reference.metrics``; a clear error when the oracle package is not importable."""
    return ref_oracle("metrics")


def ref_lapack():
    """``reference.lapack`` (SciPy/LAPACK references in float64)."""
    return ref_oracle("lapack")


def ref_matrices():
    """``reference.matrices`` (the shared generators of test matrices)."""
    return ref_oracle("matrices")


def scipy_linalg():
    import scipy.linalg

    return scipy.linalg


def by_device(device: torch.device, quick: bool, *, gpu: Any, cpu: Any, quick_gpu: Any, quick_cpu: Any) -> Any:
    """Pick a size: the real workload on a GPU, a smaller one on the CPU, smaller still in quick mode."""
    on_gpu = torch.device(device).type in ("cuda", "mps")
    if quick:
        return quick_gpu if on_gpu else quick_cpu
    return gpu if on_gpu else cpu


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    """Gaussian entries drawn on the CPU with a seeded generator (same matrices on every device)."""
    return torch.randn(shape, dtype=dtype, generator=seeded(seed)).to(device)


def head(t: torch.Tensor) -> torch.Tensor:
    """The first :data:`ACCURACY_BATCH` matrices of a batch, on the CPU (no batch dim: as is)."""
    t = t.detach()
    if t.dim() > 2:
        t = t.reshape(-1, *t.shape[-2:])[:ACCURACY_BATCH]
    return t.cpu()


def head_vec(t: torch.Tensor, batch_dims: int) -> torch.Tensor:
    """Like :func:`head` for a tensor with ``batch_dims`` leading batch dimensions (e.g. det)."""
    t = t.detach()
    if batch_dims:
        t = t.reshape(-1, *t.shape[batch_dims:])[:ACCURACY_BATCH]
    return t.cpu()


def max_of(v: torch.Tensor | float) -> float:
    return float(torch.as_tensor(v).max()) if torch.as_tensor(v).numel() else 0.0


def pass_ratio() -> float:
    return float(ref_metrics().PASS_RATIO)


def wide(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.complex128 if t.is_complex() else torch.float64)


def det_ratio(A: torch.Tensor, sign: torch.Tensor, logabs: torch.Tensor) -> float:
    """Relative error of ``det = sign * exp(logabs)`` over ``n * kappa_2(A) * u``.

    Derivation: LU with partial pivoting is backward stable, ``det(A + dA)`` with
    ``||dA|| <= c n u ||A||``, and ``d det / det = tr(A^-1 dA)``, so to first order
    ``|det~ - det| / |det| <= n ||A^-1|| ||dA|| <= c n^2 kappa u`` (the trace bound is pessimistic:
    ``n`` times the 2-norm). Dividing by ``n kappa u`` leaves ``c n`` in the worst case, typically far
    below 1 for random matrices (the trace of a random product averages out). Threshold: the LAPACK
    pass mark 30. Reference determinant: ``reference.lapack.slogdet`` (LAPACK in float64). Works
    where ``det`` over/underflows: it compares ``exp`` of the log-difference.
    """
    s_ref, la_ref = ref_lapack().slogdet(A)
    rel = (wide(sign) * torch.exp(logabs.double() - la_ref) - s_ref).abs()
    return max_of(rel / (A.shape[-1] * cond2(A) * ref_metrics().unit_roundoff(A.dtype)))


def cond2(A: torch.Tensor) -> torch.Tensor:
    """2-norm condition numbers of a batch, from LAPACK's SVD in float64."""
    return torch.linalg.cond(wide(A))


def grad_of(loss: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[Inputs], torch.Tensor]:
    """A workload callable: the gradient of the scalar ``loss(A)`` with respect to ``x["A"]``."""
    def run(x: Inputs) -> torch.Tensor:
        A = x["A"].detach().requires_grad_()
        return torch.autograd.grad(loss(A), A)[0]
    return run


def grad_ratio(A: torch.Tensor, G: torch.Tensor, G_ref: torch.Tensor) -> float:
    """``max_batch ||G - G_ref||_1 / (||G_ref||_1 n kappa_2(A) u)`` for a gradient of det/slogdet.

    Derivation: ``G`` is ``A^-H`` (slogdet) or ``conj(det(A) A^-T)`` (det of ``sum Re det``); a
    backward-stable inverse has ``||dX|| / ||X|| <= c n kappa u`` and the determinant's relative
    error adds ``c n^2 kappa u`` at worst (see :func:`det_ratio`), so the ratio is at most ``c n``
    in the worst case and typically far below 1. Threshold: the LAPACK pass mark 30.
    """
    m = ref_metrics()
    num = m.norm1(wide(G) - G_ref)
    den = m.norm1(G_ref) * A.shape[-1] * cond2(A) * m.unit_roundoff(A.dtype)
    return max_of(num / den)


def workloads() -> list[Workload]:
    """The rows for the ops implemented now (re-evaluated on every call): each family's own
    ``workloads()`` (``Family.workloads``, discovered by :func:`mpslinalg.registry.families`), in
    the families' order."""
    from ..registry import families

    rows = [w for fam in families() if fam.workloads for w in importlib.import_module(fam.workloads).workloads()]
    names = [w.name for w in rows]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise RuntimeError(f"mpslinalg.mainjob.workloads: duplicate workload names {sorted(dup)}")
    return rows


def __getattr__(name: str) -> Any:
    # ``WORKLOADS``: the rows for the ops implemented now, built on access (so it follows
    # ``mpslinalg.__all__``, and a broken family function surfaces where it is used, not at import).
    if name == "WORKLOADS":
        return workloads()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
