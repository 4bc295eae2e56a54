"""Gaussian-process regression with hyperparameter gradients through mpslinalg's Cholesky.

An exact GP (what gpytorch's ExactGP computes) on a batch of independent 1-D regression tasks: an
RBF kernel with a lengthscale, an output scale and a noise level per task, fitted by gradient
ascent on the log marginal likelihood

    log p(y) = -½ yᵀ K⁻¹ y - Σ log L_ii - (n/2) log 2π,    K = L Lᵀ,

computed with ``mpslinalg.cholesky`` and ``mpslinalg.cholesky_solve`` (their derivatives carry
the hyperparameter gradients), then the posterior mean at test points. Every iteration runs in
float32 (what an Apple GPU has); the check recomputes the final likelihood, its gradient and the
posterior mean in float64 with torch.linalg and compares within bounds derived from κ(K):

* the likelihood's two terms: the solve's forward error ``<= 30 κ u`` relative (xPOT02 ratio and
  ``‖Δx‖/‖x‖ <= κ ‖ΔA‖/‖A‖``) on ``yᵀ x``, and ``log det`` within ``n κ · 30 n u`` (the trace bound
  ``|d log det| <= ‖K⁻¹‖ ‖ΔK‖ n``), plus the float32 rounding of K itself, ``n u ‖K‖``, seen through κ;
* the gradient ``½ αᵀ dK α − ½ tr(K⁻¹ dK)`` per hyperparameter, relative to the size of its two
  terms (they cancel near the optimum, so it is checked at the initial hyperparameters): ``α`` has
  a relative error ``<= 30 κ u`` (xPOT02) and the ``K⁻¹`` the Cholesky backward applies (two
  triangular solves) ``<= 60 κ u``, so ``|Δg| <= 90 κ u · ½ (‖α‖² ‖dK‖₂ + ‖K⁻¹‖_F ‖dK‖_F)`` with the
  float32 rounding of ``K`` included;
* the posterior mean ``K*ᵀ K⁻¹ y``: ``30 κ u`` relative in the 2-norm, times ``‖K*‖ ‖x‖ / ‖mean‖``.

    python examples/gp_regression.py [--tasks 64] [--points 48] [--steps 60] [--device cpu]

Prints PASS (exit 0) when every check holds, FAIL (exit 1) otherwise.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout

import torch  # noqa: E402
from support import devices  # noqa: E402

import mpslinalg as LA  # noqa: E402


def rbf(x1: torch.Tensor, x2: torch.Tensor, log_ls: torch.Tensor, log_os: torch.Tensor) -> torch.Tensor:
    """``σ² exp(-|x - x'|² / (2 ℓ²))`` per task: ``x1 [T, n]``, ``x2 [T, m]`` -> ``[T, n, m]``."""
    d = (x1[:, :, None] - x2[:, None, :]) / log_ls.exp()[:, None, None]
    return (2 * log_os).exp()[:, None, None] * torch.exp(-0.5 * d**2)


def noise(log_noise: torch.Tensor) -> torch.Tensor:
    """The noise variance, at least NOISE_FLOOR (as gpytorch's GreaterThan constraint): it bounds
    κ(K) <= 1 + n σ² / NOISE_FLOOR, which keeps the float32 solve well posed."""
    return NOISE_FLOOR + (2 * log_noise).exp()


NOISE_FLOOR = 0.1


def log_marginal(x, y, params, chol, solve):
    """The log marginal likelihood of each task and the Cholesky factor (``chol``, ``solve``: the
    library under test or torch.linalg)."""
    log_ls, log_os, log_noise = params
    n = x.shape[-1]
    K = rbf(x, x, log_ls, log_os) + noise(log_noise)[:, None, None] * torch.eye(n, dtype=x.dtype, device=x.device)
    L = chol(K)
    alpha = solve(y[..., None], L)
    fit = -0.5 * (y[..., None] * alpha).sum((-2, -1))
    logdet = L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    return fit - logdet - 0.5 * n * math.log(2 * math.pi), K, L, alpha


def _bounds_report(name: str, err: torch.Tensor, lim: torch.Tensor) -> bool:
    good = bool((err <= lim).all())
    print(f"{name}: max error {float(err.max()):.2e}, max error/bound {float((err / lim).max()):.2e}: "
          f"{'PASS' if good else 'FAIL'}")
    return good


def check(x, y, params, *, grads: bool, mean: bool) -> bool:
    """The likelihood per task (with its gradient, and the posterior mean, if asked) at ``params``:
    float32 through mpslinalg against float64 through torch.linalg, with the docstring's bounds."""
    n, T = x.shape[-1], x.shape[0]
    u = 2.0**-24
    p32 = [q.detach().clone().requires_grad_() for q in params]
    lml, K, L, alpha = log_marginal(x, y, p32, LA.cholesky, LA.cholesky_solve)
    g32 = torch.autograd.grad(lml.sum(), p32)
    p64 = [q.detach().double().requires_grad_() for q in params]
    x64, y64 = x.double(), y.double()
    lml64, K64, _, alpha64 = log_marginal(x64, y64, p64, torch.linalg.cholesky, torch.cholesky_solve)
    g64 = torch.autograd.grad(lml64.sum(), p64)
    K64, alpha64 = K64.detach(), alpha64.detach()
    kappa = torch.linalg.cond(K64)
    kinv = torch.linalg.matrix_norm(torch.linalg.inv(K64), ord=2)
    a2 = alpha64.norm(dim=(-2, -1)) ** 2
    print(f"kappa(K): {float(kappa.min()):.3g} .. {float(kappa.max()):.3g}")
    # yᵀK⁻¹y/2 within 30 κ u |y|² ‖K⁻¹‖ / 2; log det within 30 n² κ u; the sum's rounding 3 u |terms|
    terms = 0.5 * (y64**2).sum(-1) * kinv + n * kappa.log().abs() + n
    lim = 0.5 * 30 * kappa * u * (y64**2).sum(-1) * kinv + 30 * n * n * kappa * u + 3 * u * terms
    ok = _bounds_report("log marginal likelihood", (lml.detach().double() - lml64.detach()).abs(), lim)
    if grads:
        # d lml / dθ = ½ αᵀ dK α - ½ tr(K⁻¹ dK): bound relative to the size of the two terms
        log_ls, log_os, log_noise = (q.detach().double() for q in params)
        R = rbf(x64, x64, log_ls, log_os)
        d2 = ((x64[:, :, None] - x64[:, None, :]) / log_ls.exp()[:, None, None]) ** 2
        eye = torch.eye(n, dtype=torch.float64, device=x.device)
        dKs = (R * d2, 2 * R, 2 * (2 * log_noise).exp()[:, None, None] * eye)
        kinv_f = torch.linalg.matrix_norm(torch.linalg.inv(K64))  # Frobenius
        for name, a, b, dK in zip(("lengthscale", "outputscale", "noise"), g32, g64, dKs):
            size = 0.5 * (a2 * torch.linalg.matrix_norm(dK, ord=2) + kinv_f * torch.linalg.matrix_norm(dK))
            ok &= _bounds_report(f"d lml / d log {name}", (a.double() - b).abs(), 90 * kappa * u * size)
    if mean:
        xs = torch.linspace(0, 10, 33, device=x.device).expand(T, 33)
        with torch.no_grad():
            mean32 = (rbf(x, xs, *[q.detach() for q in params[:2]]).mT @ alpha).squeeze(-1)
            Ks64 = rbf(x64, xs.double(), *[q.detach().double() for q in params[:2]])
            mean64 = (Ks64.mT @ alpha64).squeeze(-1)
        lim = 2 * 30 * kappa * u * torch.linalg.matrix_norm(Ks64, ord=2) * a2.sqrt()
        ok &= _bounds_report("posterior mean", (mean32.double() - mean64).norm(dim=-1), lim)
    return ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", type=int, default=64)
    p.add_argument("--points", type=int, default=48)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--device", default="cpu", type=devices.device, help="cpu (default), cuda or mps")
    args = p.parse_args(argv)
    dev = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    T, n = args.tasks, args.points
    x = torch.sort(torch.rand(T, n, generator=g) * 10, dim=-1).values
    true_ls = 0.5 + torch.rand(T, generator=g)
    y = torch.sin(x / true_ls[:, None]) + 0.1 * torch.randn(T, n, generator=g)
    x, y = x.to(dev), y.to(dev)
    params = [torch.zeros(T, device=dev, requires_grad=True) for _ in range(2)]
    params.append(torch.full((T,), -1.0, device=dev, requires_grad=True))
    print("at the initial hyperparameters (gradients far from the optimum, where they do not cancel):")
    ok = check(x, y, params, grads=True, mean=False)
    opt = torch.optim.Adam(params, lr=0.05)
    for _ in range(args.steps):
        opt.zero_grad()
        lml, *_ = log_marginal(x, y, params, LA.cholesky, LA.cholesky_solve)
        (-lml.sum() / T).backward()
        opt.step()
    print(f"after {args.steps} Adam steps: lengthscales {params[0].detach().exp().mean():.3f} (mean)")
    ok &= check(x, y, params, grads=False, mean=True)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
