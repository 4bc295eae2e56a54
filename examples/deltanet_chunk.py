"""Gated DeltaNet's chunked UT transform with ``mpslinalg.solve_triangular``.

The torch fallback of Gated DeltaNet in Qwen3-Next (``torch_chunk_gated_delta_rule`` in
transformers / flash-linear-attention) builds, for every chunk of 64 tokens and every head, the unit
lower-triangular matrix

    L = I + strict_lower( (β_i k_i · k_j) · exp(g_i − g_j) )

and applies ``L⁻¹`` to ``β v`` (the "u" values) and to ``β k exp(g)`` (the cumulative-decay keys).
The reference code forms ``L⁻¹`` by a 63-step row loop over the chunk; the same thing is two
triangular solves per layer, ``solve_triangular(L, ·, upper=False, unitriangular=True)`` on
``[B, H, T/64, 64, 64]`` with 128 right-hand sides each — the DeltaNet workload of this project.

Run::

    python examples/deltanet_chunk.py                 # CPU, T = 1024, 32 heads
    python examples/deltanet_chunk.py --device cuda   # the H200 (or mps on a Mac)

It checks the row loop, ``mpslinalg`` and ``torch.linalg.solve_triangular`` against a float64 solve,
prints their forward errors next to the bound ``30 κ₁(L) u`` that a backward-stable solve guarantees
(exit status 1 when ``mpslinalg`` exceeds it), and times the three doing the same work: both solves
read only the strict lower triangle of ``A`` (``unitriangular=True``), so neither forms ``I + A``.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from support import devices

import mpslinalg
from mpslinalg.mainjob.timing import compare, time_interleaved


def make_inputs(batch: int, heads: int, seq: int, dk: int, dv: int, device, seed: int = 0):
    """Random activations shaped like Qwen3-Next's linear-attention layer (float32)."""
    g = torch.Generator().manual_seed(seed)
    key = F.normalize(torch.randn(batch, heads, seq, dk, generator=g), dim=-1)  # l2-normalised keys
    value = torch.randn(batch, heads, seq, dv, generator=g)
    beta = torch.sigmoid(torch.randn(batch, heads, seq, generator=g))            # write strength
    gate = F.logsigmoid(3 + torch.randn(batch, heads, seq, generator=g))         # log decay <= 0
    return [t.to(device) for t in (key, value, beta, gate)]


def chunk_matrices(key, value, beta, gate, chunk: int = 64):
    """Per chunk: the strictly lower ``A`` with ``L = I + A``, and the right-hand sides."""
    b, h, t, dk = key.shape
    c = t // chunk
    k = key.reshape(b, h, c, chunk, dk)
    v = value.reshape(b, h, c, chunk, -1)
    bt = beta.reshape(b, h, c, chunk, 1)
    gc = gate.reshape(b, h, c, chunk).cumsum(-1)
    k_beta, v_beta = k * bt, v * bt
    decay = (gc.unsqueeze(-1) - gc.unsqueeze(-2)).tril().exp().tril()
    A = ((k_beta @ k.transpose(-1, -2)) * decay).tril(-1)
    return A, v_beta, k_beta * gc.exp().unsqueeze(-1)


def ut_transform_loop(A, v_beta, kg_beta):
    """The reference formulation (row loop over the chunk, as in the torch fallback)."""
    chunk = A.shape[-1]
    attn = -A.clone()
    for i in range(1, chunk):
        row = attn[..., i, :i].clone()
        sub = attn[..., :i, :i].clone()
        attn[..., i, :i] = row + (row.unsqueeze(-1) * sub).sum(-2)
    attn = attn + torch.eye(chunk, dtype=attn.dtype, device=attn.device)  # = (I + A)^-1
    return attn @ v_beta, attn @ kg_beta


def ut_transform_solve(A, v_beta, kg_beta, solve_triangular=mpslinalg.solve_triangular):
    """The same with two triangular solves (the diagonal of L is 1 and is never read)."""
    u = solve_triangular(A, v_beta, upper=False, unitriangular=True)
    w = solve_triangular(A, kg_beta, upper=False, unitriangular=True)
    return u, w


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", type=devices.device, help="cpu (default), cuda or mps")
    p.add_argument("--seq", type=int, default=1024, help="tokens (a multiple of 64)")
    p.add_argument("--heads", type=int, default=32)
    args = p.parse_args(argv)
    device = torch.device(args.device)

    key, value, beta, gate = make_inputs(1, args.heads, args.seq, 128, 128, device)
    A, v_beta, kg_beta = chunk_matrices(key, value, beta, gate)
    print(f"chunk matrices {tuple(A.shape)}, right-hand sides {tuple(v_beta.shape)} (x2), {device}")

    u_loop, w_loop = ut_transform_loop(A, v_beta, kg_beta)
    u, w = ut_transform_solve(A, v_beta, kg_beta)
    u_torch, w_torch = ut_transform_solve(A, v_beta, kg_beta, torch.linalg.solve_triangular)

    # float64 reference and the bound of a backward-stable solve
    L64 = A.double().cpu() + torch.eye(A.shape[-1], dtype=torch.float64)
    kappa = (torch.linalg.matrix_norm(L64, 1) * torch.linalg.matrix_norm(torch.linalg.inv(L64), 1)).amax()
    bound = 30 * float(kappa) * 2.0**-24
    ok = True
    for name, ours, loop, peer, rhs in (("u = L⁻¹ βv", u, u_loop, u_torch, v_beta),
                                        ("w = L⁻¹ βk e^g", w, w_loop, w_torch, kg_beta)):
        ref = torch.linalg.solve_triangular(L64, rhs.double().cpu(), upper=False, unitriangular=True)

        def err(x, ref=ref):  # worst column: ‖x_j − x_ref,j‖₁ / ‖x_ref,j‖₁
            d = (x.double().cpu() - ref).abs().sum(-2) / ref.abs().sum(-2)
            return float(d.max())

        e_ours, e_loop, e_torch = err(ours), err(loop), err(peer)
        ok &= e_ours <= bound / (1 - bound)
        print(f"{name}: forward error vs float64: mpslinalg {e_ours:.2e}, torch.linalg {e_torch:.2e}, "
              f"row loop {e_loop:.2e}; bound 30·κ₁·u = {bound:.2e} (max κ₁ = {float(kappa):.1f})")

    times = time_interleaved({
        "mpslinalg": lambda: ut_transform_solve(A, v_beta, kg_beta),
        "torch.linalg": lambda: ut_transform_solve(A, v_beta, kg_beta, torch.linalg.solve_triangular),
        "row loop": lambda: ut_transform_loop(A, v_beta, kg_beta),
    }, device=device, warmup=1, repeat=7, min_time=0.0, max_time=10.0, min_samples=7)
    ours = times["mpslinalg"]
    print("time (median per call, interleaved; both solves do the same two unitriangular solves): "
          + ", ".join(f"{k} {1e3 * t.median:.2f} ms" for k, t in times.items()))
    for peer in ("torch.linalg", "row loop"):
        c = compare(ours, times[peer])
        print(f"  {peer} / mpslinalg = {c.ratio:.2f}x [{c.low:.2f}-{c.high:.2f}] ({c.verdict})")
    print("PASS" if ok else "FAIL: forward error above the bound")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
