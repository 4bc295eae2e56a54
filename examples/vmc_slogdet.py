"""Variational Monte Carlo with complex Slater determinants: one small, real VMC run (DESIGN §1).

The trial wave function of ``n`` electrons is one Slater determinant ``psi(R) = det S(R)`` with
``S_ij = phi_j(r_i)``, complex plane-wave orbitals in a Gaussian envelope,
``phi_k(r) = exp(i k·r) exp(-|r|^2 / 8)``. Write ``log psi = u + i theta`` (``u = log|psi|``,
``theta`` the phase: ``mpslinalg.slogdet`` gives both). VMC needs, per walker,

* ``u`` for the Metropolis walk on ``|psi|^2 = exp(2u)``: acceptance ``min(1, exp(2 (u' - u)))``;
* the drift ``grad u`` (first derivatives through ``slogdet``);
* the local kinetic energy ``E_L = Re(-1/2 lap psi / psi)``. With
  ``lap psi / psi = lap log psi + (grad log psi)^2`` its real part is
  ``E_L = -1/2 (lap u + |grad u|^2) + 1/2 |grad theta|^2``: the last term is what a real-valued
  formula misses for complex ``psi`` (second derivatives: double backward through ``slogdet``).

The script runs a Metropolis walk on ``|psi|^2`` with ``mpslinalg.slogdet``, measures ``E_L`` on the
walk's configurations with ``mpslinalg`` and ``torch.linalg`` (float32), and checks both against a
truth that does not use the formula: a float64 finite-difference Laplacian of ``psi`` itself
(4th-order stencil). It prints the VMC estimate ``<T> = mean E_L`` with its standard error, the
acceptance rate, both errors against the truth and PASS/FAIL; the exit status is 1 on FAIL. Run::

    python examples/vmc_slogdet.py                    # CPU, torch backend
    python examples/vmc_slogdet.py --backend emulator # the Metal kernels, run by the emulator
    python examples/vmc_slogdet.py --device mps       # on a Mac: the Metal kernels on the GPU
"""

from __future__ import annotations

import argparse
import math

import torch
from support import devices

import mpslinalg as LA
from mpslinalg.mainjob.timing import time_interleaved

#: float32 unit roundoff and LAPACK's test-ratio threshold (docs/testing.md).
U32 = 2.0**-24
THRESHOLD = 30.0
#: Metropolis step (per coordinate, all electrons at once): acceptance ~0.4 for 8 electrons.
STEP = 0.3


def orbitals(n: int, device: torch.device) -> torch.Tensor:
    """The ``n`` lowest plane-wave vectors ``k`` of a cubic box of side ``2 pi`` (shape ``[n, 3]``)."""
    r = torch.arange(-2, 3, dtype=torch.float32)
    ks = torch.cartesian_prod(r, r, r)
    ks = ks[torch.argsort((ks ** 2).sum(-1) + 1e-3 * torch.arange(len(ks)))]
    return ks[:n].to(device)


def slater(R: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``S[w, i, j] = exp(i k_j · r_i) exp(-|r_i|^2 / 8)`` for walkers ``R [W, n, 3]`` (complex)."""
    phase = torch.einsum("wid,jd->wij", R, k.to(R.dtype))
    env = torch.exp(-(R ** 2).sum(-1, keepdim=True) / 8)
    return torch.polar(env.expand_as(phase).contiguous(), phase)


def log_abs_psi(R: torch.Tensor, k: torch.Tensor, slogdet) -> torch.Tensor:
    """``u = log|psi|`` per walker (no derivatives)."""
    with torch.no_grad():
        return slogdet(slater(R, k))[1]


def metropolis(R, k, slogdet, steps: int, step_size: float, g: torch.Generator):
    """``steps`` Metropolis sweeps on ``|psi|^2`` (all electrons of a walker moved at once).

    Returns the walkers after the sweeps and the acceptance rate.
    """
    u = log_abs_psi(R, k, slogdet)
    accepted = 0
    for _ in range(steps):
        trial = R + step_size * torch.randn(R.shape, generator=g, dtype=R.dtype).to(R.device)
        u_trial = log_abs_psi(trial, k, slogdet)
        p = torch.exp(2 * (u_trial - u)).clamp(max=1)  # |psi'|^2 / |psi|^2
        accept = torch.rand(p.shape, generator=g, dtype=p.dtype).to(p.device) < p
        R = torch.where(accept[:, None, None], trial, R)
        u = torch.where(accept, u_trial, u)
        accepted += int(accept.sum())
    return R, accepted / (steps * R.shape[0])


def local_kinetic(R: torch.Tensor, k: torch.Tensor, slogdet) -> tuple[torch.Tensor, ...]:
    """Per walker: ``E_L``, and the magnitudes of its three terms ``|lap u|``, ``|grad u|^2``, ``|grad theta|^2``."""
    R = R.detach().requires_grad_()
    sign, logabs = slogdet(slater(R, k))
    (grad_u,) = torch.autograd.grad(logabs.sum(), R, create_graph=True)
    # theta = arg(sign): d theta = Im(conj(sign) d sign), since |sign| = 1.
    theta_dot = (sign.conj().detach() * sign).imag
    (grad_theta,) = torch.autograd.grad(theta_dot.sum(), R, retain_graph=True)
    lap_u = torch.zeros_like(logabs)
    flat = grad_u.reshape(grad_u.shape[0], -1)
    for c in range(flat.shape[1]):  # d/dx_c of du/dx_c, summed over the 3n coordinates
        (g2,) = torch.autograd.grad(flat[:, c].sum(), R, retain_graph=True)
        lap_u = lap_u + g2.reshape(flat.shape)[:, c]
    gu2 = (grad_u ** 2).sum((-2, -1))
    gt2 = (grad_theta ** 2).sum((-2, -1))
    e_l = -0.5 * (lap_u + gu2) + 0.5 * gt2
    return e_l.detach(), lap_u.abs().detach(), gu2.detach(), gt2.detach()


def kinetic_by_finite_differences(R: torch.Tensor, k: torch.Tensor, h: float) -> torch.Tensor:
    """``Re(-1/2 lap psi / psi)`` in float64 from ``psi = det S`` alone (no formula, no autograd).

    4th-order central differences per coordinate, ``(-f(+2h) + 16 f(+h) - 30 f(0) + 16 f(-h) - f(-2h))
    / (12 h^2)``: truncation error ``h^4 / 90 |d^6 psi / dx^6|``.
    """
    R = R.detach().to(torch.float64, copy=True)
    k = k.to(torch.float64)

    def psi(X):
        return torch.linalg.det(slater(X, k))

    W, n, _ = R.shape
    lap = torch.zeros(W, dtype=torch.complex128)
    f0 = psi(R)
    for i in range(n):
        for d in range(3):
            fs = {}
            for m in (-2, -1, 1, 2):
                X = R.clone()
                X[:, i, d] += m * h
                fs[m] = psi(X)
            lap += (-fs[2] + 16 * fs[1] - 30 * f0 + 16 * fs[-1] - fs[-2]) / (12 * h * h)
    return (-0.5 * lap / f0).real


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", type=devices.device, help="cpu (default), cuda or mps")
    p.add_argument("--backend", default="auto", help="auto, torch, emulator or metal")
    p.add_argument("--walkers", type=int, default=128)
    p.add_argument("--electrons", type=int, default=8)
    p.add_argument("--equilibration", type=int, default=200, help="Metropolis sweeps before measuring")
    p.add_argument("--measurements", type=int, default=4, help="E_L measurements, 10 sweeps apart")
    p.add_argument("--checked", type=int, default=8, help="walkers checked against finite differences")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    k = orbitals(args.electrons, device)
    R = (1.5 * torch.randn(args.walkers, args.electrons, 3, generator=g)).to(device)

    with LA.use_backend(args.backend):
        R, acc_eq = metropolis(R, k, LA.slogdet, args.equilibration, STEP, g)
        samples, acc = [], []
        for _ in range(args.measurements):
            R, a = metropolis(R, k, LA.slogdet, 10, STEP, g)
            acc.append(a)
            ours = local_kinetic(R, k, LA.slogdet)
            samples.append(ours[0])
        ref = local_kinetic(R, k, torch.linalg.slogdet)
        # Both already ran once on these walkers (warm); three interleaved rounds each.
        times = time_interleaved({"mpslinalg": lambda: local_kinetic(R, k, LA.slogdet),
                                  "torch.linalg": lambda: local_kinetic(R, k, torch.linalg.slogdet)},
                                 device=device, warmup=0, repeat=3, min_time=0.0, max_time=0.0)

    e = torch.stack(samples)  # [measurements, walkers]
    per_walker = e.mean(0).double()  # walkers are independent chains: their means are i.i.d.
    mean, stderr = float(per_walker.mean()), float(per_walker.std() / math.sqrt(len(per_walker)))
    print(f"{args.walkers} walkers x {args.electrons} electrons, complex Slater determinants, "
          f"backend {args.backend}, device {device}")
    print(f"Metropolis on |psi|^2: acceptance {acc_eq:.2f} (equilibration, {args.equilibration} sweeps), "
          f"{sum(acc) / len(acc):.2f} (measurement)")
    print(f"VMC kinetic energy <T> = {mean:.4f} +- {stderr:.4f} (mpslinalg; {args.measurements} measurements "
          f"of {args.walkers} walkers)")

    # Truth for the last configurations: float64 finite differences of psi itself. The difference
    # with step h and 2h estimates the truncation error (it scales as h^4: err(h) ~ diff / 15).
    m = min(args.checked, args.walkers)
    Rc = R[:m].cpu()
    kc = k.cpu()
    fd = kinetic_by_finite_differences(Rc, kc, 1e-2)
    fd_err = (fd - kinetic_by_finite_differences(Rc, kc, 2e-2)).abs() / 15
    # The formula in float64 (same code, torch.linalg.slogdet in complex128) must match the finite
    # differences to their own error: 10x the truncation estimate plus rounding (~1e-16 / h^2 per term).
    e64 = local_kinetic(Rc.double(), kc, torch.linalg.slogdet)
    formula_err = (e64[0] - fd).abs()
    formula_ok = bool((formula_err <= 10 * fd_err + 1e-9 * (1 + fd.abs())).all())

    # float32 against the truth, as a LAPACK-style test ratio: each term of E_L is a derivative of
    # log det S, which a backward-stable float32 evaluation gets to ~ n kappa(S) u relative to that
    # term's magnitude, so |E_32 - E_true| / (n kappa u (|lap u| + |grad u|^2 + |grad theta|^2)) <= 30.
    S64 = slater(Rc.double(), kc)
    kappa = torch.linalg.cond(S64)
    scale = args.electrons * kappa * U32 * (e64[1] + e64[2] + e64[3])
    ratio_ours = float(((ours[0][:m].cpu().double() - fd).abs() / scale).max())
    ratio_ref = float(((ref[0][:m].cpu().double() - fd).abs() / scale).max())
    float_ok = ratio_ours <= THRESHOLD
    print(f"check on {m} walkers against float64 finite differences of psi (E_L from {float(fd.min()):.3f} "
          f"to {float(fd.max()):.3f}, max kappa(S) {float(kappa.max()):.1f}):")
    print(f"  the formula in float64: max |E_L - E_fd| = {float(formula_err.max()):.2e} "
          f"(finite-difference error estimate {float(fd_err.max()):.1e})  {'PASS' if formula_ok else 'FAIL'}")
    print(f"  float32, test ratio |E_L - E_fd| / (n kappa u sum|terms|): mpslinalg {ratio_ours:.3g}, "
          f"torch.linalg {ratio_ref:.3g} (limit {THRESHOLD:g})  {'PASS' if float_ok else 'FAIL'}")
    print(f"  mean 1/2 |grad theta|^2 = {float(0.5 * e64[3].mean()):.3f}: what E_L is off by without it")
    print(f"time of E_L incl. second derivatives for {args.walkers} walkers (median of 3, interleaved): "
          f"mpslinalg {times['mpslinalg'].median:.3f} s, torch.linalg {times['torch.linalg'].median:.3f} s")
    ok = formula_ok and float_ok
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
