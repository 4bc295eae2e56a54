"""The registry of representative workloads that the main job (``python -m mpslinalg``) runs.

One row of the main job's table = one :class:`Workload`: an op, the user workload it stands for
(DESIGN §1: camera geometry, linear attention, variational Monte Carlo, scientific computing),
how to make its inputs on a device, our call, the ``torch.linalg`` call (timed in the same run),
optionally the SciPy call (timed on the CPU), and an accuracy check that returns a LAPACK-style
test ratio with its pass threshold.

How a family adds its rows
--------------------------
Each family owns exactly one function below, ``_<family>() -> list[Workload]``, listed in
``_FAMILIES``. Edit only your own function: that keeps concurrent edits conflict-free. A function
builds rows only for ops that are implemented (:func:`implemented` reads ``mpslinalg.__all__``),
so a row appears in the report the moment its op is exported, and never before. For example::

    def _triangular() -> list[Workload]:
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


def _oracle(name: str):
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


def _no_complex_inv_on_mps() -> str:
    """What the installed torch offers for complex ``inv`` on MPS (none up to 2.15, checked Nov 2026)."""
    from torch.torch_version import TorchVersion

    version = torch.__version__.split("+")[0]
    if TorchVersion(version) < (2, 16):
        return f"torch {version} has no complex inv on MPS"
    return f"torch {version}: complex inv on MPS not checked (none up to 2.15)"


def _metrics():
    """``reference.metrics``; a clear error when the oracle package is not importable."""
    return _oracle("metrics")


def _lapack():
    """``reference.lapack`` (SciPy/LAPACK references in float64)."""
    return _oracle("lapack")


def _matrices():
    """``reference.matrices`` (the shared generators of test matrices)."""
    return _oracle("matrices")


def _scipy_linalg():
    import scipy.linalg

    return scipy.linalg


def _size(device: torch.device, quick: bool, *, gpu: Any, cpu: Any, quick_gpu: Any, quick_cpu: Any) -> Any:
    """Pick a size: the real workload on a GPU, a smaller one on the CPU, smaller still in quick mode."""
    on_gpu = torch.device(device).type in ("cuda", "mps")
    if quick:
        return quick_gpu if on_gpu else quick_cpu
    return gpu if on_gpu else cpu


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    """Gaussian entries drawn on the CPU with a seeded generator (same matrices on every device)."""
    return torch.randn(shape, dtype=dtype, generator=_gen(seed)).to(device)


def _head(t: torch.Tensor) -> torch.Tensor:
    """The first :data:`ACCURACY_BATCH` matrices of a batch, on the CPU (no batch dim: as is)."""
    t = t.detach()
    if t.dim() > 2:
        t = t.reshape(-1, *t.shape[-2:])[:ACCURACY_BATCH]
    return t.cpu()


def _head_vec(t: torch.Tensor, batch_dims: int) -> torch.Tensor:
    """Like :func:`_head` for a tensor with ``batch_dims`` leading batch dimensions (e.g. det)."""
    t = t.detach()
    if batch_dims:
        t = t.reshape(-1, *t.shape[batch_dims:])[:ACCURACY_BATCH]
    return t.cpu()


def _max(v: torch.Tensor | float) -> float:
    return float(torch.as_tensor(v).max()) if torch.as_tensor(v).numel() else 0.0


def _pass() -> float:
    return float(_metrics().PASS_RATIO)


def _wide(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.complex128 if t.is_complex() else torch.float64)


def _det_ratio(A: torch.Tensor, sign: torch.Tensor, logabs: torch.Tensor) -> float:
    """Relative error of ``det = sign * exp(logabs)`` over ``n * kappa_2(A) * u``.

    Derivation: LU with partial pivoting is backward stable, ``det(A + dA)`` with
    ``||dA|| <= c n u ||A||``, and ``d det / det = tr(A^-1 dA)``, so to first order
    ``|det~ - det| / |det| <= n ||A^-1|| ||dA|| <= c n^2 kappa u`` (the trace bound is pessimistic:
    ``n`` times the 2-norm). Dividing by ``n kappa u`` leaves ``c n`` in the worst case, typically far
    below 1 for random matrices (the trace of a random product averages out). Threshold: the LAPACK
    pass mark 30. Reference determinant: ``reference.lapack.slogdet`` (LAPACK in float64). Works
    where ``det`` over/underflows: it compares ``exp`` of the log-difference.
    """
    s_ref, la_ref = _lapack().slogdet(A)
    rel = (_wide(sign) * torch.exp(logabs.double() - la_ref) - s_ref).abs()
    return _max(rel / (A.shape[-1] * _kappa(A) * _metrics().unit_roundoff(A.dtype)))


def _kappa(A: torch.Tensor) -> torch.Tensor:
    """2-norm condition numbers of a batch, from LAPACK's SVD in float64."""
    return torch.linalg.cond(_wide(A))


def _grad_of(loss: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[Inputs], torch.Tensor]:
    """A workload callable: the gradient of the scalar ``loss(A)`` with respect to ``x["A"]``."""
    def run(x: Inputs) -> torch.Tensor:
        A = x["A"].detach().requires_grad_()
        return torch.autograd.grad(loss(A), A)[0]
    return run


def _grad_ratio(A: torch.Tensor, G: torch.Tensor, G_ref: torch.Tensor) -> float:
    """``max_batch ||G - G_ref||_1 / (||G_ref||_1 n kappa_2(A) u)`` for a gradient of det/slogdet.

    Derivation: ``G`` is ``A^-H`` (slogdet) or ``conj(det(A) A^-T)`` (det of ``sum Re det``); a
    backward-stable inverse has ``||dX|| / ||X|| <= c n kappa u`` and the determinant's relative
    error adds ``c n^2 kappa u`` at worst (see :func:`_det_ratio`), so the ratio is at most ``c n``
    in the worst case and typically far below 1. Threshold: the LAPACK pass mark 30.
    """
    m = _metrics()
    num = m.norm1(_wide(G) - G_ref)
    den = m.norm1(G_ref) * A.shape[-1] * _kappa(A) * m.unit_roundoff(A.dtype)
    return _max(num / den)


# ----------------------------------------------------------------------------------------------
# Families: each owns one function. Add rows inside your own function only.
# ----------------------------------------------------------------------------------------------


def _triangular() -> list[Workload]:
    """Triangular solves (issue 4): DeltaNet's chunked UT transform and a batched 64x64 solve."""
    if not implemented("solve_triangular"):
        return []

    def make_deltanet(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        # Gated DeltaNet / Qwen3-Next torch path, chunk 64, key dim 128: the unit lower UT-transform
        # matrix of each chunk (reference.matrices documents the construction), solved twice per
        # layer with 128 right-hand sides.
        batch = _size(device, quick, gpu=(1, 32, 16), cpu=(1, 8, 4), quick_gpu=(1, 8, 4), quick_cpu=(1, 2, 2))
        T = _matrices().triangular(64, upper=False, unit=True, kind="deltanet", key_dim=128, batch=batch,
                                   dtype=dtype, seed=4)
        return {"A": T.to(device), "B": _randn((*batch, 64, 128), dtype, device, 5)}

    def make_batched(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        b = _size(device, quick, gpu=4096, cpu=512, quick_gpu=512, quick_cpu=64)
        # Lower triangles with kappa_2 = 100 (R^H of a matrix with that condition number): the
        # residual ratio does not depend on kappa for a backward-stable solver, the forward error
        # would; a Gaussian triangle (kappa ~ 2^n) is the stress test of the family's own tests.
        L = _matrices().triangular(64, upper=False, kind="well", kappa=100.0, batch=b, dtype=dtype, seed=6)
        return {"A": L.to(device), "B": _randn((b, 64, 64), dtype, device, 7)}

    def acc(upper: bool, unit: bool) -> Callable[[Inputs, Any], tuple[str, float, float]]:
        def f(x: Inputs, out: Any) -> tuple[str, float, float]:
            r = _metrics().triangular_residual_ratio(_head(x["A"]), _head(out), _head(x["B"]),
                                                     upper=upper, left=True, unitriangular=unit)
            return "‖B-TX‖/(‖T‖‖X‖u)", _max(r), _pass()
        return f

    def sp(unit: bool):
        return lambda x: _scipy_linalg().solve_triangular(x["A"].numpy(), x["B"].numpy(), lower=True,
                                                          unit_diagonal=unit, check_finite=False)

    # SciPy's OpenBLAS strtrs slows with the shared machine's state far more than torch's MKL trsm
    # (DeltaNet 1.06-1.44x over six full runs of 2026-12-02, passes of one run 1.12-1.47x): each row's
    # own run-to-run drift against SciPy, by the columns' method over those six runs
    # (compare_verdicts.py --row-drift), against the column's 0.045 (Workload.drift)

    return [
        Workload(
            op="solve_triangular", name="solve_triangular deltanet",
            description="DeltaNet chunk UT transform: [1,32,16,64,64] unit lower, 128 RHS",
            make=make_deltanet,
            ours=lambda x: ours("solve_triangular")(x["A"], x["B"], upper=False, unitriangular=True),
            peer=lambda x: torch.linalg.solve_triangular(x["A"], x["B"], upper=False, unitriangular=True),
            scipy=sp(True), accuracy=acc(False, True), drift={"scipy": 0.103}),
        Workload(
            op="solve_triangular", name="solve_triangular batched 64x64",
            description="4096 x (64x64) lower, 64 RHS",
            make=make_batched,
            ours=lambda x: ours("solve_triangular")(x["A"], x["B"], upper=False),
            peer=lambda x: torch.linalg.solve_triangular(x["A"], x["B"], upper=False),
            scipy=sp(False), accuracy=acc(False, False), drift={"scipy": 0.105}),
    ]


def _lu() -> list[Workload]:
    """LU family (issue 5): factor, solve, det, slogdet, inv."""
    rows: list[Workload] = []
    sl = _scipy_linalg

    def make_square(gpu, cpu, quick_gpu, quick_cpu, seed, rhs=None):
        def make(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
            b, n = _size(device, quick, gpu=gpu, cpu=cpu, quick_gpu=quick_gpu, quick_cpu=quick_cpu)
            shape = (b, n, n) if b else (n, n)
            x = {"A": _randn(shape, dtype, device, seed)}
            if rhs is not None:
                x["B"] = _randn(shape[:-1] + (rhs,), dtype, device, seed + 1)
            return x
        return make

    def lu_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
        LU, piv = out[0], out[1]
        r = _metrics().lu_factor_ratio(_head(x["A"]), _head(LU), _head_vec(piv, LU.dim() - 2))
        return "‖A-PLU‖/(n‖A‖u)", _max(r), _pass()

    def plu_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
        P, L, U = (_head(t) for t in out)
        r = _metrics().lu_ratio(_head(x["A"]), P, L, U)
        return "‖A-PLU‖/(n‖A‖u)", _max(r), _pass()

    def solve_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
        r = _metrics().solve_ratio(_head(x["A"]), _head(out), _head(x["B"]))
        return "‖B-AX‖/(‖A‖‖X‖u)", _max(r), _pass()

    if implemented("lu_factor"):
        rows.append(Workload(
            op="lu_factor", name="lu_factor complex64 large", dtype=torch.complex64,
            description="scientific: complex64 LU of one 4096x4096 matrix",
            make=make_square((0, 4096), (0, 512), (0, 1024), (0, 128), 10),
            ours=lambda x: ours("lu_factor")(x["A"]), peer=lambda x: torch.linalg.lu_factor(x["A"]),
            scipy=lambda x: sl().lu_factor(x["A"].numpy(), check_finite=False), accuracy=lu_acc))
        rows.append(Workload(
            op="lu_factor", name="lu_factor complex64 batched 32x32", dtype=torch.complex64,
            description="VMC Slater matrices: 4096 x (32x32) complex64",
            make=make_square((4096, 32), (1024, 32), (512, 32), (64, 32), 12),
            ours=lambda x: ours("lu_factor")(x["A"]), peer=lambda x: torch.linalg.lu_factor(x["A"]),
            accuracy=lu_acc))
    if implemented("lu"):
        rows.append(Workload(
            op="lu", name="lu float32 large",
            description="P, L, U of one 2048x2048 float32 matrix",
            make=make_square((0, 2048), (0, 256), (0, 512), (0, 96), 14),
            ours=lambda x: ours("lu")(x["A"]), peer=lambda x: torch.linalg.lu(x["A"]),
            scipy=lambda x: sl().lu(x["A"].numpy(), check_finite=False), accuracy=plu_acc))
    if implemented("lu_solve"):
        def make_lu_solve(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
            x = make_square((0, 2048), (0, 256), (0, 512), (0, 96), 16, rhs=256)(device, dtype, quick)
            # Both sides solve with the same factors (torch's LAPACK convention), so the row times
            # lu_solve alone.
            x["LU"], x["pivots"] = torch.linalg.lu_factor(x["A"])
            return x
        rows.append(Workload(
            op="lu_solve", name="lu_solve complex64 large", dtype=torch.complex64,
            description="complex64 2048x2048 factors, 256 RHS",
            make=make_lu_solve,
            ours=lambda x: ours("lu_solve")(x["LU"], x["pivots"], x["B"]),
            peer=lambda x: torch.linalg.lu_solve(x["LU"], x["pivots"], x["B"]),
            scipy=lambda x: sl().lu_solve((x["LU"].numpy(), x["pivots"].numpy() - 1), x["B"].numpy(),
                                          check_finite=False),
            accuracy=solve_acc))
    if implemented("solve"):
        rows.append(Workload(
            op="solve", name="solve RANSAC 9x9",
            description="RANSAC DLT: 2048 x (9x9) float32, 1 RHS",
            make=make_square((2048, 9), (2048, 9), (256, 9), (256, 9), 18, rhs=1),
            ours=lambda x: ours("solve")(x["A"], x["B"]), peer=lambda x: torch.linalg.solve(x["A"], x["B"]),
            scipy=lambda x: sl().solve(x["A"].numpy(), x["B"].numpy(), check_finite=False),
            accuracy=solve_acc))
    if implemented("det"):
        def det_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
            d = _head_vec(out, out.dim())
            return "relerr(det)/(n kappa u)", _det_ratio(_head(x["A"]), d.sgn(), d.abs().log()), _pass()
        rows.append(Workload(
            op="det", name="det complex64 batched 32x32", dtype=torch.complex64,
            description="VMC: det of 4096 x (32x32) complex64",
            make=make_square((4096, 32), (1024, 32), (512, 32), (64, 32), 20),
            ours=lambda x: ours("det")(x["A"]), peer=lambda x: torch.linalg.det(x["A"]),
            scipy=lambda x: sl().det(x["A"].numpy(), check_finite=False), accuracy=det_acc))
    if implemented("slogdet"):
        def slogdet_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
            sign, la = out
            bd = sign.dim()
            return ("relerr(det)/(n kappa u)",
                    _det_ratio(_head(x["A"]), _head_vec(sign, bd), _head_vec(la, bd)), _pass())
        rows.append(Workload(
            op="slogdet", name="slogdet complex64 VMC 32x32", dtype=torch.complex64,
            description="VMC: 4096 walkers x 16 dets, (32x32) complex64",
            make=make_square((65536, 32), (4096, 32), (1024, 32), (128, 32), 22),
            ours=lambda x: ours("slogdet")(x["A"]), peer=lambda x: torch.linalg.slogdet(x["A"]),
            accuracy=slogdet_acc))
    if implemented("det"):
        def det_grad(det: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[Inputs], torch.Tensor]:
            return _grad_of(lambda A: det(A).real.sum())

        def det_grad_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
            A = _head(x["A"])
            ref = (_lapack().det(A)[..., None, None] * _lapack().inv(A).mT).conj()
            return "‖G-G*‖/(‖G*‖n kappa u)", _grad_ratio(A, _head(out), ref), _pass()
        rows.append(Workload(
            op="det", name="det fwd+bwd complex64 32x32", dtype=torch.complex64,
            description="VMC: gradient of sum Re det over 4096 x (32x32) complex64",
            make=make_square((4096, 32), (1024, 32), (512, 32), (64, 32), 26),
            ours=det_grad(lambda A: ours("det")(A)), peer=det_grad(torch.linalg.det),
            accuracy=det_grad_acc))
    if implemented("slogdet"):
        def slogdet_grad(fn: Callable[[torch.Tensor], Any]) -> Callable[[Inputs], torch.Tensor]:
            return _grad_of(lambda A: fn(A)[1].sum())

        def slogdet_grad_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
            A = _head(x["A"])
            ref = _lapack().inv(A).mH  # d log|det A| = Re tr(A^-1 dA): the gradient is A^-H
            return "‖G-A^-H‖/(‖A^-H‖n kappa u)", _grad_ratio(A, _head(out), ref), _pass()
        rows.append(Workload(
            op="slogdet", name="slogdet fwd+bwd complex64 VMC", dtype=torch.complex64,
            description="VMC: gradient of sum log|det| over 4096 walkers x 16 dets (32x32) complex64",
            make=make_square((65536, 32), (4096, 32), (1024, 32), (128, 32), 28),
            ours=slogdet_grad(lambda A: ours("slogdet")(A)), peer=slogdet_grad(torch.linalg.slogdet),
            accuracy=slogdet_grad_acc))
    if implemented("inv"):
        def inv_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
            r = _metrics().inverse_ratio(_head(x["A"]), _head(out))
            return "‖I-XA‖/(n‖A‖‖X‖u)", _max(r), _pass()
        rows.append(Workload(
            op="inv", name="inv complex64 large", dtype=torch.complex64,
            description=f"complex64 inverse of one 1024x1024 matrix ({_no_complex_inv_on_mps()})",
            # CPU 512² (lu_factor's CPU size): at 256² torch's getrs against SciPy's getri read
            # 0.81-0.86x, on the slower edge in one run of six (docs/routing.md, item 20)
            make=make_square((0, 1024), (0, 512), (0, 256), (0, 64), 24),
            ours=lambda x: ours("inv")(x["A"]), peer=lambda x: torch.linalg.inv(x["A"]),
            scipy=lambda x: sl().inv(x["A"].numpy(), check_finite=False), accuracy=inv_acc))
    return rows


def _small() -> list[Workload]:
    """Batched <= 4x4 inverses (issue 6): camera poses."""
    if not implemented("inv"):
        return []

    def make(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        b = _size(device, quick, gpu=10**6, cpu=10**5, quick_gpu=10**5, quick_cpu=10**4)
        # A rigid pose [R t; 0 1] is perfectly conditioned; camera stacks also carry intrinsics and
        # scale, so use Gaussian 4x4 matrices (kappa ~ 10..1e3, occasionally more), the harder case.
        return {"A": _randn((b, 4, 4), dtype, device, 30)}

    def acc(x: Inputs, out: Any) -> tuple[str, float, float]:
        r = _metrics().inverse_ratio(_head(x["A"]), _head(out))
        return "‖I-XA‖/(n‖A‖‖X‖u)", _max(r), _pass()

    rows = [Workload(
        op="inv", name="inv 4x4 batched",
        description="camera poses: inverse of 1e6 x (4x4) float32",
        make=make, ours=lambda x: ours("inv")(x["A"]), peer=lambda x: torch.linalg.inv(x["A"]),
        scipy=lambda x: _scipy_linalg().inv(x["A"].numpy(), check_finite=False), accuracy=acc)]

    def make3(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        b = _size(device, quick, gpu=10**6, cpu=10**5, quick_gpu=10**5, quick_cpu=10**4)
        return {"A": _randn((b, 3, 3), dtype, device, 31)}

    rows.append(Workload(
        op="inv", name="inv 3x3 complex64 batched", dtype=torch.complex64,
        description="complex 3x3 inverses, 1e6 x (3x3) complex64 (no complex inv on MPS in torch)",
        make=make3, ours=lambda x: ours("inv")(x["A"]), peer=lambda x: torch.linalg.inv(x["A"]),
        accuracy=acc))
    if implemented("slogdet"):
        def slogdet_acc(x: Inputs, out: Any) -> tuple[str, float, float]:
            A = _head(x["A"])
            return ("|det-det_ref|/(|det_ref| n kappa u)",
                    _det_ratio(A, _head_vec(out[0], 1), _head_vec(out[1], 1)), _pass())
        rows.append(Workload(
            op="slogdet", name="slogdet 3x3 batched",
            description="homographies: sign and log|det| of 1e6 x (3x3) float32",
            make=make3, ours=lambda x: ours("slogdet")(x["A"]), peer=lambda x: torch.linalg.slogdet(x["A"]),
            accuracy=slogdet_acc))
    return rows


def _qr() -> list[Workload]:
    """Householder QR (QR/SVD issue)."""
    if not implemented("qr"):
        return []

    def make(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        n = _size(device, quick, gpu=4096, cpu=512, quick_gpu=1024, quick_cpu=96)
        return {"A": _randn((n, n), dtype, device, 40)}

    def acc(x: Inputs, out: Any) -> tuple[str, float, float]:
        res, orth = _metrics().qr_ratios(_head(x["A"]), _head(out[0]), _head(out[1]))
        return "max(‖A-QR‖/(m‖A‖u), ‖I-QhQ‖/(m u))", max(_max(res), _max(orth)), _pass()

    def make_batched(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        b = _size(device, quick, gpu=4096, cpu=512, quick_gpu=512, quick_cpu=64)
        return {"A": _randn((b, 32, 32), dtype, device, 41)}

    def make_tall(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        m = _size(device, quick, gpu=10**6, cpu=50000, quick_gpu=10**5, quick_cpu=5000)
        return {"A": _randn((m, 32), dtype, device, 42)}

    def run(x: Inputs) -> Any:
        return ours("qr")(x["A"])

    def peer(x: Inputs) -> Any:
        return torch.linalg.qr(x["A"])

    return [
        Workload(op="qr", name="qr float32 large", description="scientific: QR of one 4096x4096 float32",
                 make=make, ours=run, peer=peer,
                 # mode="economic" is torch.linalg.qr's default "reduced": the same Q and R (square A);
                 # SciPy's default "full" also copies the factors into a C-ordered Q first (issue 15)
                 scipy=lambda x: _scipy_linalg().qr(x["A"].numpy(), mode="economic", check_finite=False),
                 accuracy=acc),
        Workload(op="qr", name="qr float32 batched 32x32",
                 description="batched Householder QR of 4096 x (32x32) (torch: a per-matrix loop)",
                 make=make_batched, ours=run, peer=peer, accuracy=acc),
        Workload(op="qr", name="qr complex64 batched 32x32", dtype=torch.complex64,
                 description="batched complex QR of 4096 x (32x32)", make=make_batched, ours=run, peer=peer,
                 accuracy=acc),
        Workload(op="qr", name="qr float32 tall-skinny", description="Householder TSQR of 1e6 x 32 (reduced)",
                 make=make_tall, ours=run, peer=peer, accuracy=acc),
    ]


def _svd() -> list[Workload]:
    """Jacobi SVD and what sits on it: svd, svdvals, pinv, lstsq (QR/SVD issue)."""
    rows: list[Workload] = []
    sl = _scipy_linalg

    if implemented("svd"):
        def make(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
            b = _size(device, quick, gpu=4096, cpu=512, quick_gpu=512, quick_cpu=64)
            return {"A": _randn((b, 32, 32), dtype, device, 50)}

        def acc(x: Inputs, out: Any) -> tuple[str, float, float]:
            ratios = _metrics().svd_ratios(_head(x["A"]), _head(out[0]), _head_vec(out[1], out[1].dim() - 1),
                                           _head(out[2]))
            ratios = ratios if isinstance(ratios, tuple) else (ratios,)
            worst = max(_max(r) for r in ratios)
            return "max(‖A-USVh‖/(m‖A‖u), ‖I-UhU‖/(m u), ‖I-VhV‖/(n u))", worst, _pass()

        rows.append(Workload(
            op="svd", name="svd float32 batched 32x32", description="batched SVD: 4096 x (32x32) float32",
            make=make, ours=lambda x: ours("svd")(x["A"], full_matrices=False),
            peer=lambda x: torch.linalg.svd(x["A"], full_matrices=False),
            scipy=lambda x: sl().svd(x["A"].numpy(), full_matrices=False, check_finite=False),
            accuracy=acc))

        def make_8pt(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
            b = _size(device, quick, gpu=100000, cpu=4096, quick_gpu=4096, quick_cpu=256)
            return {"A": _randn((b, 8, 9), dtype, device, 51)}

        rows.append(Workload(
            op="svd", name="svd float32 batched 8x9",
            description="camera geometry: 8-point systems, 100000 x (8x9) float32, full V (null vector)",
            make=make_8pt, ours=lambda x: ours("svd")(x["A"]),
            peer=lambda x: torch.linalg.svd(x["A"]), accuracy=acc))

    if implemented("svdvals"):
        def make_vals(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
            n = _size(device, quick, gpu=2048, cpu=256, quick_gpu=512, quick_cpu=64)
            return {"A": _randn((n, n), dtype, device, 52)}

        def acc_vals(x: Inputs, out: Any) -> tuple[str, float, float]:
            # Weyl: a backward-stable SVD computes the exact singular values of A + E with
            # ||E||_2 <= c n u ||A||_2, so |s~_i - s_i| <= c n u s_1; ratio = max|ds| / (n u s_1).
            A = _head(x["A"])
            ref = torch.linalg.svdvals(_wide(A))
            s = _head_vec(out, out.dim() - 1).double()
            u = _metrics().unit_roundoff(A.dtype)
            n = max(A.shape[-2:])
            return "max abs(ds)/(n u s1)", _max((s - ref).abs().amax(-1) / (n * u * ref[..., 0])), _pass()

        rows.append(Workload(
            op="svdvals", name="svdvals float32 large",
            description="scientific: singular values of one 2048x2048 float32",
            make=make_vals, ours=lambda x: ours("svdvals")(x["A"]),
            peer=lambda x: torch.linalg.svdvals(x["A"]),
            scipy=lambda x: sl().svdvals(x["A"].numpy(), check_finite=False), accuracy=acc_vals))

    def make_tall(device: torch.device, dtype: torch.dtype, quick: bool) -> Inputs:
        m, n = _size(device, quick, gpu=(4096, 512), cpu=(512, 128),
                     quick_gpu=(1024, 256), quick_cpu=(128, 32))
        return {"A": _randn((m, n), dtype, device, 54), "B": _randn((m, 16), dtype, device, 55)}

    if implemented("pinv"):
        def acc_pinv(x: Inputs, out: Any) -> tuple[str, float, float]:
            # A Gaussian tall A has full column rank (kappa ~ (sqrt m + sqrt n)/(sqrt m - sqrt n)),
            # so X = A^+ is a left inverse: LAPACK's inverse ratio |I - XA|/(n |A| |X| u) applies.
            A, X = _wide(_head(x["A"])), _wide(_head(out))
            n = A.shape[-1]
            eye = torch.eye(n, dtype=A.dtype)
            u = _metrics().unit_roundoff(x["A"].dtype)
            num = torch.linalg.matrix_norm(eye - X @ A, ord=1)
            den = n * torch.linalg.matrix_norm(A, ord=1) * torch.linalg.matrix_norm(X, ord=1) * u
            return "‖I-XA‖/(n‖A‖‖X‖u)", _max(num / den), _pass()

        rows.append(Workload(
            op="pinv", name="pinv float32 tall", description="pseudo-inverse of a 4096x512 float32",
            make=make_tall, ours=lambda x: ours("pinv")(x["A"]), peer=lambda x: torch.linalg.pinv(x["A"]),
            scipy=lambda x: sl().pinv(x["A"].numpy(), check_finite=False), accuracy=acc_pinv))

    if implemented("lstsq"):
        def acc_lstsq(x: Inputs, out: Any) -> tuple[str, float, float]:
            # LAPACK xQRT17-style: a backward-stable solution solves (A + dA) X = B + dB in the least
            # squares sense with |dA| <= c u |A|, |dB| <= c u |B|, so the normal-equation residual
            # |A^H (B - AX)| <= c u |A| (|A||X| + |B|) (+ a term |dA||R| <= u |A||B|).
            A, B = _wide(_head(x["A"])), _wide(_head(x["B"]))
            X = _wide(_head(out[0] if isinstance(out, tuple) else out.solution))
            u = _metrics().unit_roundoff(x["A"].dtype)
            nrm = lambda t: torch.linalg.matrix_norm(t, ord=1)  # noqa: E731
            num = nrm(A.mH @ (B - A @ X))
            den = max(A.shape[-2:]) * nrm(A) * (nrm(A) * nrm(X) + nrm(B)) * u
            return "‖A^H(B-AX)‖/(m‖A‖(‖A‖‖X‖+‖B‖)u)", _max(num / den), _pass()

        rows.append(Workload(
            op="lstsq", name="lstsq float32 tall", description="least squares 4096x512, 16 RHS",
            make=make_tall, ours=lambda x: ours("lstsq")(x["A"], x["B"]),
            peer=lambda x: torch.linalg.lstsq(x["A"], x["B"]),
            scipy=lambda x: sl().lstsq(x["A"].numpy(), x["B"].numpy(), check_finite=False),
            accuracy=acc_lstsq))
    return rows


#: The families, in report order. A family adds its function here once, then edits only it.
_FAMILIES: list[Callable[[], list[Workload]]] = [_triangular, _small, _lu, _qr, _svd]


def workloads() -> list[Workload]:
    """The rows for the ops implemented now (re-evaluated on every call)."""
    rows = [w for fam in _FAMILIES for w in fam()]
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
