"""The general eigenproblem written once over a kernel object (:mod:`mpslinalg.eig.kernels`).

``eig_impl(A, want_v)``: for every matrix of ``A (B, n, n)``

1. **non-finite input**: the matrix is replaced by zeros for the computation, its outputs are NaN
   and its ``info`` is ``n + 1``;
2. **scaling** by a power of two ``2^-e`` (``2^e`` near ``max |a_ij|``, exact): entries of order one,
   so ``H^2`` in the double-shift step neither overflows nor underflows at ``1e±30`` in float32;
3. **balancing** (LAPACK ``gebal``, scaling only): ``D⁻¹ A D`` with ``D`` powers of two, the rows
   visited all at once per sweep (10 sweeps), ``gebal``'s acceptance test ``c f + r / f < 0.95 (c + r)``;
4. the kernel's **Schur form** ``A = Z T Zᴴ`` (Hessenberg reduction and shifted QR iteration);
5. **eigenvalues** from ``T``'s diagonal and 2x2 blocks (real input: a complex pair ``p ± i q`` is
   written as exact conjugates, positive imaginary part first, as LAPACK does);
6. eigenvectors (``want_v``): real input's 2x2 blocks rotated to complex triangular form by 2x2
   unitaries, back-substitution on the triangular ``T`` (LAPACK ``trevc``: perturbed divisors
   ``max(ulp |λ|, smallnum)``, columns rescaled against overflow), back-transformation ``D Z X``,
   unit 2-norm columns whose largest component is real and positive (``geev``); real input:
   the vector of ``conj(λ)`` is the conjugate of ``λ``'s, that of a real ``λ`` real.

Returns ``(w, V, info)`` with ``info = m`` (``m`` leading eigenvalues did not converge; those
matrices' outputs are NaN), ``n + 1`` for non-finite input, else 0. No host read except the
kernel's convergence test with ``sync`` (see the kernels module).
"""

from __future__ import annotations

import torch

from .kernels import kernels_for

_BALANCE_SWEEPS = 10


def _complex_dtype(dtype: torch.dtype) -> torch.dtype:
    return {torch.float32: torch.complex64, torch.float64: torch.complex128}.get(dtype, dtype)


def _pow2_scale(A: torch.Tensor) -> torch.Tensor:
    """``2^e`` per matrix with ``2^e <= max |a_ij| < 2^(e+1)`` (1 for a zero matrix)."""
    big = A.abs().amax((-2, -1))
    e = torch.floor(torch.log2(torch.where(big > 0, big, torch.ones_like(big))))
    return torch.pow(2.0, e.to(torch.float64)).to(big.dtype)


def balance(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(D⁻¹ A D, d)``, ``d`` the diagonal of ``D`` (powers of two; LAPACK ``gebal``'s scaling)."""
    n = A.shape[-1]
    real = A.real.dtype if A.is_complex() else A.dtype
    d = torch.ones(A.shape[:-1], dtype=real, device=A.device)
    off = 1.0 - torch.eye(n, dtype=real, device=A.device)
    for _ in range(_BALANCE_SWEEPS):
        absA = A.abs() * off
        c = torch.linalg.vector_norm(absA, dim=-2)  # column norms without the diagonal
        r = torch.linalg.vector_norm(absA, dim=-1)  # row norms
        ok = (c > 0) & (r > 0)
        k = torch.round(0.5 * torch.log2(torch.where(ok, r / torch.where(ok, c, torch.ones_like(c)),
                                                     torch.ones_like(c))))
        f = torch.pow(2.0, k.to(torch.float64)).to(real)
        accept = ok & (c * f + r / f < 0.95 * (c + r))
        f = torch.where(accept, f, torch.ones_like(f))
        A = A * f[..., None, :] / f[..., :, None]  # column j times f_j, row i over f_i
        d = d * f
    return A, d


def _pairs(T: torch.Tensor) -> torch.Tensor:
    """``pair[b, i]``: rows ``i, i+1`` hold a 2x2 block (``T[i+1, i] != 0``), length ``n`` (last False)."""
    sub = torch.diagonal(T, -1, -2, -1) != 0
    return torch.cat([sub, torch.zeros(*sub.shape[:-1], 1, dtype=torch.bool, device=T.device)], dim=-1)


def _block_eigenvalues(a, b, c, d):
    """Eigenvalues ``(λ1, λ2)`` of real 2x2 blocks, scaled against overflow; a complex pair as
    ``p + i q, p - i q`` with ``q > 0``; real ones ``λ1 = p + sign(p) sqrt(disc)``, ``λ2 = det / λ1``."""
    s = torch.stack([a.abs(), b.abs(), c.abs(), d.abs()]).amax(0)
    s = torch.where(s > 0, s, torch.ones_like(s))
    a, b, c, d = a / s, b / s, c / s, d / s
    p = 0.5 * (a + d)
    h = 0.5 * (a - d)
    disc = h * h + b * c
    root = torch.sqrt(disc.abs())
    z = p + torch.where(p >= 0, root, -root)
    det = a * d - b * c
    l2_real = torch.where(z != 0, det / torch.where(z != 0, z, torch.ones_like(z)), p - root)
    cplx = disc < 0
    l1 = torch.complex(torch.where(cplx, p, z), torch.where(cplx, root, torch.zeros_like(p))) * s
    l2 = torch.complex(torch.where(cplx, p, l2_real), torch.where(cplx, -root, torch.zeros_like(p))) * s
    return l1, l2, cplx


def eigenvalues_of_schur(T: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(w, pair, complex_pair)`` from a (quasi-)triangular ``T`` (see the module docstring)."""
    diag = torch.diagonal(T, 0, -2, -1)
    if T.is_complex():
        z = torch.zeros(diag.shape, dtype=torch.bool, device=T.device)
        return diag.clone(), z, z
    pair = _pairs(T)
    n = T.shape[-1]
    w = torch.complex(diag, torch.zeros_like(diag))
    if n < 2:
        return w, pair, pair
    a, d = diag[..., :-1], diag[..., 1:]
    b, c = torch.diagonal(T, 1, -2, -1), torch.diagonal(T, -1, -2, -1)
    l1, l2, cplx = _block_eigenvalues(a, b, c, d)
    first = pair[..., :-1]
    second = torch.cat([torch.zeros_like(first[..., :1]), first], dim=-1)
    w = torch.where(pair, torch.cat([l1, l1[..., :1]], dim=-1), w)
    w = torch.where(second, torch.cat([l2[..., :1], l2], dim=-1), w)
    complex_pair = pair & torch.cat([cplx, torch.zeros_like(cplx[..., :1])], dim=-1)
    return w, pair, complex_pair


def _triangularize_blocks(T: torch.Tensor, Z: torch.Tensor, w: torch.Tensor, pair: torch.Tensor):
    """Real quasi-triangular ``T`` -> complex triangular ``Uᴴ T U`` and ``Z U`` with ``U`` the 2x2
    unitaries ``[[u0, -conj(u1)], [u1, conj(u0)]]`` (``u`` the unit eigenvector of the block for its
    first eigenvalue) on the blocks' rows; the diagonal is set to ``w`` and the blocks' ``(i+1, i)``
    entries to zero (their computed values are rounding, O(u ‖T‖))."""
    ct = _complex_dtype(T.dtype)
    Tc, Zc = T.to(ct), Z.to(ct)
    n = T.shape[-1]
    a, d = torch.diagonal(Tc, 0, -2, -1)[..., :-1], torch.diagonal(Tc, 0, -2, -1)[..., 1:]
    b, c = torch.diagonal(Tc, 1, -2, -1), torch.diagonal(Tc, -1, -2, -1)
    lam = w[..., :-1]
    u1a, u1b = b, lam - a
    u2a, u2b = lam - d, c
    n1 = torch.hypot(u1a.abs(), u1b.abs())
    n2 = torch.hypot(u2a.abs(), u2b.abs())
    use1 = n1 >= n2
    ua = torch.where(use1, u1a, u2a)
    ub = torch.where(use1, u1b, u2b)
    nu = torch.where(use1, n1, n2)
    nu = torch.where(nu > 0, nu, torch.ones_like(nu))
    ua, ub = ua / nu, ub / nu
    first = pair[..., :-1]
    zero = torch.zeros_like(ua)
    pad = torch.zeros_like(ua[..., :1])
    is_first = torch.cat([first, torch.zeros_like(first[..., :1])], -1)   # row i starts a block
    is_second = torch.cat([torch.zeros_like(first[..., :1]), first], -1)  # row i ends one
    diag = torch.where(is_first, torch.cat([ua, pad], -1),
                       torch.where(is_second, torch.cat([pad, ua], -1).conj_physical(), torch.ones_like(w)))
    U = torch.diag_embed(diag)
    i = torch.arange(n - 1, device=T.device)
    U[..., i + 1, i] = torch.where(first, ub, zero)
    U[..., i, i + 1] = torch.where(first, -ub.conj_physical(), zero)
    Tc = U.mH @ Tc @ U
    Zc = Zc @ U
    Tc = torch.triu(Tc)
    Tc = Tc - torch.diag_embed(torch.diagonal(Tc, 0, -2, -1)) + torch.diag_embed(w)
    return Tc, Zc


def triangular_eigenvectors(T: torch.Tensor) -> torch.Tensor:
    """``X`` upper triangular with ``T X = X diag(T)`` (LAPACK ``trevc``, right vectors, back
    substitution for every column at once): ``X[j, j] = 1``, ``X[i, j] = -(T[i, i+1:] X[i+1:, j]) /
    (T[i, i] - T[j, j])`` with divisors below ``smin = max(ulp |T_jj|, smallnum)`` replaced by
    ``smin``; columns are rescaled when an entry passes ``sqrt(max float)``."""
    n = T.shape[-1]
    rdt = T.real.dtype
    ulp = torch.finfo(rdt).eps
    small = torch.finfo(rdt).tiny / ulp
    big = torch.finfo(rdt).max ** 0.5
    w = torch.diagonal(T, 0, -2, -1)
    smin = torch.clamp(ulp * w.abs(), min=small)
    X = torch.eye(n, dtype=T.dtype, device=T.device).expand(T.shape).clone()
    cols = torch.arange(n, device=T.device)
    for i in range(n - 2, -1, -1):
        num = (T[..., i, i + 1:, None] * X[..., i + 1:, :]).sum(-2)
        den = T[..., i, i, None] - w
        small_den = den.abs() < smin
        den = torch.where(small_den, smin.to(den.dtype), den)
        X[..., i, :] = torch.where(cols > i, -num / den, X[..., i, :])
        colmax = X.abs().amax(-2, keepdim=True)
        X = torch.where(colmax > big, X / colmax, X)
    return X


def _normalize(V: torch.Tensor) -> torch.Tensor:
    """Unit 2-norm columns (scaled: no overflow of the squares), largest component real positive."""
    big = V.abs().amax(-2, keepdim=True)
    V = V / torch.where(big > 0, big, torch.ones_like(big))
    V = V / torch.linalg.vector_norm(V, dim=-2, keepdim=True)
    k = V.abs().argmax(-2, keepdim=True)
    top = V.gather(-2, k)
    phase = torch.where(top.abs() > 0, top.conj_physical() / top.abs(), torch.ones_like(top))
    return V * phase


def eig_impl(A: torch.Tensor, want_v: bool,
             sync: bool = True) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """``(w, V, info)`` of every matrix of ``A (*, n, n)`` without checks (module docstring);
    ``sync=False``: no host read (the kernel's fixed step budget)."""
    shape = A.shape
    n = shape[-1]
    ct = _complex_dtype(A.dtype)
    if A.numel() == 0:
        info = torch.zeros(shape[:-2], dtype=torch.int32, device=A.device)
        return (torch.empty(*shape[:-1], dtype=ct, device=A.device),
                torch.empty(shape, dtype=ct, device=A.device) if want_v else None, info)
    X = A.reshape(-1, n, n)
    finite = torch.isfinite(X).all(-1).all(-1)
    X = torch.where(finite[:, None, None], X, torch.zeros_like(X))
    scale = _pow2_scale(X)
    Xb, dvec = balance(X / scale[:, None, None])
    T, Z, m = kernels_for(Xb).schur(Xb.contiguous(), want_v, sync)
    w, pair, cpair = eigenvalues_of_schur(T)
    V = None
    if want_v:
        if A.is_complex() or n < 2:
            Tc, Zc = T.to(ct), Z.to(ct)
        else:
            Tc, Zc = _triangularize_blocks(T, Z, w, pair)
        V = _normalize(dvec[:, :, None].to(ct) * (Zc @ triangular_eigenvectors(Tc)))
        if not A.is_complex():
            second = torch.cat([torch.zeros_like(cpair[..., :1]), cpair[..., :-1]], dim=-1)
            shifted = torch.cat([V[..., :1], V[..., :-1]], dim=-1).conj_physical()
            V = torch.where(second[:, None, :], shifted, V)
            real_eig = ~(cpair | second)
            V = torch.where(real_eig[:, None, :], torch.complex(V.real, torch.zeros_like(V.real)), V)
    w = w * scale[:, None]
    info = torch.where(finite, m, torch.full_like(m, n + 1)).to(torch.int32)
    bad = info != 0
    w = torch.where(bad[:, None], torch.full_like(w, complex("nan")), w)
    if V is not None:
        V = torch.where(bad[:, None, None], torch.full_like(V, complex("nan")), V)
        V = V.reshape(shape).to(ct)
    return w.reshape(shape[:-1]).to(ct), V, info.reshape(shape[:-2])
