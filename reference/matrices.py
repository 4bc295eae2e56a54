"""Generators of test matrices, easy and hard.

Every generator returns a CPU torch tensor of shape ``batch + (m, n)`` and takes the same keyword
arguments:

``batch``
    Leading batch shape (tuple or int; default ``()``). Batch elements are independent draws.
``dtype``
    ``torch.float32`` (default), ``torch.complex64``, ``torch.float64`` or ``torch.complex128``.
    Matrices are built in float64/complex128 and rounded once to ``dtype`` at the end, so a
    prescribed property (singular values, condition number) holds for the float64 matrix and for
    the rounded one up to the perturbation of that rounding, ``|ΔA| <= u|A|`` entrywise (see the
    docstrings for what that means for each property).
``generator`` / ``seed``
    A ``torch.Generator``, or an int seed for a fresh one; neither: torch's global RNG (so
    ``torch.manual_seed`` makes runs reproducible).

Complex variants: random factors are complex Gaussian with ``E|z|² = 1`` (Re, Im each
``N(0, 1/2)``) and unitary factors are Haar-distributed unitary matrices; structured real matrices
(Kahan, Wilkinson, Hilbert) get unitary *diagonal* scalings, which keep their singular values,
triangularity and pivoting behaviour (see each docstring).
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "graded",
    "graded_hpd",
    "haar",
    "hilbert_like",
    "kahan",
    "near_singular",
    "positive_definite",
    "random",
    "rank_deficient",
    "scaled",
    "singular_values",
    "triangular",
    "wilkinson_growth",
    "with_condition",
]

from ._generators import Batch, _batch, _dtype, _randn, _rng, _size

# the structured generators (Kahan, Wilkinson, Hilbert) live in their own module: one namespace here
from .matrices_structured import hilbert_like, kahan, wilkinson_growth


def haar(
    m: int,
    n: int | None = None,
    *,
    batch: Batch = (),
    dtype: torch.dtype = torch.float64,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    """Haar-distributed matrix with orthonormal columns (``m >= n``): Q of a Gaussian's QR with
    ``R``'s diagonal made positive (Mezzadri 2007), computed in float64/complex128.

    Parameters
    ----------
    m, n : int
        Shape; ``n`` defaults to ``m``; requires ``n <= m``.

    Returns
    -------
    torch.Tensor
        ``batch + (m, n)`` in ``dtype`` (default float64: orthonormal to ``≈ n·2**-53``).
    """
    n = m if n is None else n
    _size("m", m), _size("n", n)
    if n > m:
        raise ValueError(f"haar: need n <= m for orthonormal columns, got m={m}, n={n}")
    dt = _dtype(dtype)
    g = _rng(generator, seed)
    return _haar(m, n, _batch(batch), dt.is_complex, g).to(dt)


def _haar(m: int, n: int, batch: tuple[int, ...], cplx: bool, g: torch.Generator | None) -> torch.Tensor:
    G = _randn((*batch, m, n), cplx, g)
    if m == 0 or n == 0:
        return G
    Q, R = torch.linalg.qr(G)
    d = torch.diagonal(R, dim1=-2, dim2=-1)
    s = torch.where(d == 0, torch.ones_like(d), d / d.abs())
    return Q * s.unsqueeze(-2)


def _from_svals(
    S: torch.Tensor, m: int, n: int, batch: tuple[int, ...], cplx: bool, g: torch.Generator | None
) -> torch.Tensor:
    """U diag(S) V^H with Haar U (m x k), V (n x k); S of shape (k,) or batch + (k,)."""
    k = S.shape[-1]
    U = _haar(m, k, batch, cplx, g)
    V = _haar(n, k, batch, cplx, g)
    return (U * S.to(U.dtype).unsqueeze(-2)) @ V.mH


def singular_values(
    k: int,
    kappa: float,
    mode: str = "geometric",
    *,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    """A prescribed singular-value profile with ``σ₁ = 1`` and ``σ_k = 1/kappa`` (float64).

    Parameters
    ----------
    k : int
        Number of singular values.
    kappa : float
        Condition number ``σ₁/σ_k``, ``1 <= kappa < inf``.
    mode : str
        ``"geometric"``: ``σ_i = kappa**(-(i-1)/(k-1))`` (LAPACK ``xLATMS`` MODE 3);
        ``"arithmetic"``: ``σ_i = 1 − (i-1)/(k-1)·(1 − 1/kappa)`` (MODE 4);
        ``"cluster"``: ``σ = (1, …, 1, 1/kappa)`` (MODE 2, one small);
        ``"cluster_low"``: ``σ = (1, 1/kappa, …, 1/kappa)`` (MODE 1, one large);
        ``"random"``: log-uniform in ``[1/kappa, 1]`` with both ends present (MODE 5), sorted.

    Returns
    -------
    torch.Tensor
        float64 ``(k,)``, non-increasing. ``k = 1`` gives ``[1.0]`` whatever ``kappa``.
    """
    _size("k", k)
    kappa = float(kappa)
    if not (kappa >= 1.0 and math.isfinite(kappa)):
        raise ValueError(f"kappa must be finite and >= 1, got {kappa}")
    if k <= 1:
        return torch.ones(k, dtype=torch.float64)
    i = torch.arange(k, dtype=torch.float64)
    if mode == "geometric":
        S = torch.exp(-math.log(kappa) * i / (k - 1))
    elif mode == "arithmetic":
        S = 1.0 - i / (k - 1) * (1.0 - 1.0 / kappa)
    elif mode == "cluster":
        S = torch.ones(k, dtype=torch.float64)
        S[-1] = 1.0 / kappa
    elif mode == "cluster_low":
        S = torch.full((k,), 1.0 / kappa, dtype=torch.float64)
        S[0] = 1.0
    elif mode == "random":
        g = _rng(generator, seed)
        t = torch.rand(k, dtype=torch.float64, generator=g)
        t[0], t[-1] = 0.0, 1.0
        S = torch.exp(-math.log(kappa) * t).sort(descending=True).values
    else:
        raise ValueError(
            f"mode must be 'geometric', 'arithmetic', 'cluster', 'cluster_low' or 'random', got {mode!r}"
        )
    S[0], S[-1] = 1.0, 1.0 / kappa  # exact ends
    return S


# ----------------------------------------------------------------------------------------------
# generators


def random(
    m: int,
    n: int | None = None,
    *,
    batch: Batch = (),
    dtype: torch.dtype = torch.float32,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    """Gaussian matrix (entries ``N(0, 1)``; complex: ``E|z|² = 1``).

    A square Gaussian matrix has ``κ₂ ≈ n`` typically (Edelman), with a heavy tail.

    Parameters
    ----------
    m : int
        Rows.
    n : int, optional
        Columns (default ``m``).

    Returns
    -------
    torch.Tensor
        ``batch + (m, n)``.

    Examples
    --------
    >>> random(3, batch=2, seed=0).shape
    torch.Size([2, 3, 3])
    """
    n = m if n is None else n
    _size("m", m), _size("n", n)
    dt = _dtype(dtype)
    return _randn((*_batch(batch), m, n), dt.is_complex, _rng(generator, seed)).to(dt)


def with_condition(
    n: int,
    kappa: float,
    mode: str = "geometric",
    *,
    m: int | None = None,
    batch: Batch = (),
    dtype: torch.dtype = torch.float32,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    """Random matrix with prescribed singular values: ``A = U diag(σ) Vᴴ``, ``U``, ``V`` Haar.

    ``σ`` is :func:`singular_values` ``(min(m, n), kappa, mode)``: ``σ₁ = 1``, ``σ_min = 1/kappa``.

    Accuracy of the prescription: the float64 product has singular values within
    ``≈ k·2**-53`` (absolute) of ``σ``; rounding to ``dtype`` perturbs ``A`` by ``|ΔA| <= u|A|``,
    so ``‖ΔA‖₂ <= u‖A‖_F <= u·√k`` and by Weyl every ``σ_i`` moves by at most ``u√k`` (absolute).
    Hence ``κ`` of the rounded matrix is within a factor ``(1 ± κu√k)`` of ``kappa`` while
    ``κu√k << 1``; beyond that (e.g. ``kappa >= 1e7`` in float32) only ``κ ≳ 1/(u√k)`` is promised.

    Parameters
    ----------
    n : int
        Columns (and rows unless ``m`` is given).
    kappa : float
        2-norm condition number, ``>= 1``.
    mode : str
        Singular-value profile, see :func:`singular_values`.
    m : int, optional
        Rows (default ``n``).

    Returns
    -------
    torch.Tensor
        ``batch + (m, n)``.
    """
    m = n if m is None else m
    _size("n", n), _size("m", m)
    dt = _dtype(dtype)
    g = _rng(generator, seed)
    S = singular_values(min(m, n), kappa, mode, generator=g)
    return _from_svals(S, m, n, _batch(batch), dt.is_complex, g).to(dt)


def near_singular(
    n: int,
    eps: float,
    *,
    batch: Batch = (),
    dtype: torch.dtype = torch.float32,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    """Square matrix with ``σ = (1, …, 1, eps)`` (Haar factors): a distance ``eps`` (in the 2-norm,
    relative to ``‖A‖₂ = 1``) from a singular matrix, with a single small singular value.

    ``eps = 0`` gives a float64 matrix of rank ``n − 1`` (its rounding to ``dtype`` has
    ``σ_n <= u√n``). For ``eps`` below ``u√n`` of ``dtype`` the rounded matrix's ``σ_n`` is
    rounding noise of that size (see :func:`with_condition`).

    Parameters
    ----------
    n : int
        Order.
    eps : float
        Smallest singular value, ``0 <= eps <= 1``.

    Returns
    -------
    torch.Tensor
        ``batch + (n, n)``.
    """
    _size("n", n)
    eps = float(eps)
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"eps must be in [0, 1], got {eps}")
    dt = _dtype(dtype)
    g = _rng(generator, seed)
    S = torch.ones(n, dtype=torch.float64)
    if n:
        S[-1] = eps
    return _from_svals(S, n, n, _batch(batch), dt.is_complex, g).to(dt)


def positive_definite(
    n: int,
    kappa: float = 10.0,
    mode: str = "geometric",
    *,
    batch: Batch = (),
    dtype: torch.dtype = torch.float32,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    """Hermitian positive-definite matrix ``A = Q diag(λ) Qᴴ`` with ``Q`` Haar and ``λ`` the
    :func:`singular_values` profile (``λ₁ = 1``, ``λ_n = 1/kappa``), made exactly Hermitian after
    rounding (the lower triangle mirrored).

    Rounding to ``dtype`` perturbs ``A`` by ``‖ΔA‖₂ <= u√n`` (as :func:`with_condition`), so the
    rounded matrix is positive definite with ``κ₂`` within ``(1 ± κu√n)`` of ``kappa`` while
    ``κu√n < 1``.

    Parameters
    ----------
    n : int
        Order.
    kappa : float
        2-norm condition number (= ``λ_max/λ_min``), ``>= 1``.
    mode : str
        Eigenvalue profile, see :func:`singular_values`.

    Returns
    -------
    torch.Tensor
        ``batch + (n, n)``.
    """
    _size("n", n)
    dt = _dtype(dtype)
    g = _rng(generator, seed)
    lam = singular_values(n, kappa, mode, generator=g)
    Q = _haar(n, n, _batch(batch), dt.is_complex, g)
    A = (Q * lam.to(Q.dtype)) @ Q.mH
    A = A.to(dt)
    S = A.tril(-1)
    d = A.diagonal(dim1=-2, dim2=-1)
    return S + S.mH + torch.diag_embed(d.real.to(dt) if dt.is_complex else d)


def rank_deficient(
    m: int,
    n: int,
    rank: int,
    *,
    kappa: float = 10.0,
    batch: Batch = (),
    dtype: torch.dtype = torch.float32,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    """``m × n`` matrix of rank ``rank``: ``U_r diag(σ) V_rᴴ`` with Haar ``U_r``, ``V_r`` and
    geometric ``σ`` from 1 to ``1/kappa``.

    In float64 the zero singular values are ``≈ r·2**-53``; after rounding to ``dtype`` they are
    at most ``u‖A‖_F <= u√rank`` (Weyl), while ``σ_rank >= 1/kappa − u√rank``.

    Parameters
    ----------
    m, n : int
        Shape.
    rank : int
        ``0 <= rank <= min(m, n)``.
    kappa : float
        ``σ₁/σ_rank`` of the non-zero part.

    Returns
    -------
    torch.Tensor
        ``batch + (m, n)``.
    """
    _size("m", m), _size("n", n), _size("rank", rank)
    if rank > min(m, n):
        raise ValueError(f"rank must be <= min(m, n) = {min(m, n)}, got {rank}")
    dt = _dtype(dtype)
    g = _rng(generator, seed)
    S = singular_values(rank, kappa, "geometric")
    return _from_svals(S, m, n, _batch(batch), dt.is_complex, g).to(dt)


def graded(
    n: int,
    *,
    decades: float = 8.0,
    side: str = "cols",
    base: str = "orthogonal",
    m: int | None = None,
    batch: Batch = (),
    dtype: torch.dtype = torch.float32,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    """Graded matrix ``B D`` (``side="cols"``), ``D B`` (``"rows"``) or ``D₁ B D₂`` (``"both"``,
    half the decades each) with ``D = diag(10**(−decades·j/(k−1)))``, ``j = 0…k−1``.

    With ``base="orthogonal"`` (``B`` Haar, ``κ(B) = 1``) and ``side="cols"`` or ``"rows"`` the
    singular values are exactly the diagonal of ``D`` (float64, up to ``≈ n·2**-53`` relative),
    spanning ``decades`` orders of magnitude, and they are determined to **high relative
    accuracy** by the entries: rounding ``A`` entrywise (``|ΔA| <= u|A|``) is ``ΔB`` with
    ``|ΔB| <= u|B|``, which moves every ``σ_i`` by a relative ``<= ‖ΔB B⁻¹‖₂ <= u√n``
    (Demmel & Veselić 1992). That is what one-sided Jacobi SVD must reproduce, and what
    ``reference.mp.svdvals`` must match. ``base="gaussian"`` uses a Gaussian ``B`` (``κ(B) ≈ n``).

    Parameters
    ----------
    n : int
        Columns (and rows unless ``m`` is given); ``m >= n`` for ``side="cols"`` with an
        orthogonal base.
    decades : float
        ``log10`` of ``max(D)/min(D)``; float32 has range for up to ~70, float64 ~600.
    side : {"cols", "rows", "both"}
    base : {"orthogonal", "gaussian"}
    m : int, optional
        Rows (default ``n``).

    Returns
    -------
    torch.Tensor
        ``batch + (m, n)``.
    """
    m = n if m is None else m
    _size("n", n), _size("m", m)
    dt = _dtype(dtype)
    g = _rng(generator, seed)
    b = _batch(batch)
    if side not in ("cols", "rows", "both"):
        raise ValueError(f"side must be 'cols', 'rows' or 'both', got {side!r}")
    if base == "orthogonal":
        B = _haar(m, n, b, dt.is_complex, g) if m >= n else _haar(n, m, b, dt.is_complex, g).mH
    elif base == "gaussian":
        B = _randn((*b, m, n), dt.is_complex, g)
    else:
        raise ValueError(f"base must be 'orthogonal' or 'gaussian', got {base!r}")

    def d(k: int, dec: float) -> torch.Tensor:
        if k <= 1:
            return torch.ones(k, dtype=torch.float64)
        return 10.0 ** (-dec * torch.arange(k, dtype=torch.float64) / (k - 1))

    if side == "cols":
        A = B * d(n, decades).to(B.dtype)
    elif side == "rows":
        A = d(m, decades).to(B.dtype).unsqueeze(-1) * B
    else:
        A = d(m, decades / 2).to(B.dtype).unsqueeze(-1) * B * d(n, decades / 2).to(B.dtype)
    return A.to(dt)


def graded_hpd(
    n: int,
    *,
    decades: float = 8.0,
    batch: Batch = (),
    dtype: torch.dtype = torch.float32,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Graded Hermitian positive-definite ``A = D M D`` and ``κ₂(M)``: ``M`` a Wishart matrix
    ``G Gᴴ`` (``G`` Gaussian ``n × 2n``) scaled to unit diagonal (``κ(M)`` typically ~ 30),
    ``D = diag(10**(−decades·j/(2(n−1))))``, so the eigenvalues span about ``decades`` orders.

    The eigenvalues are determined to **high relative accuracy** by the entries (Demmel &
    Veselić 1992): an entrywise perturbation ``|ΔA| <= ε|A|`` is ``D ΔM D`` with ``|ΔM| <= ε|M|``,
    which moves every eigenvalue by a relative ``<= ‖ΔM‖₂ ‖M⁻¹‖₂ <= n ε κ(M)`` — what Jacobi with a
    relative stopping rule must reproduce.

    Returns
    -------
    (torch.Tensor, torch.Tensor)
        ``A`` of shape ``batch + (n, n)`` in ``dtype`` (Hermitian exactly: built in float64 from
        the lower triangle) and ``κ₂(M)`` float64 of shape ``batch``.
    """
    _size("n", n)
    dt = _dtype(dtype)
    g = _rng(generator, seed)
    b = _batch(batch)
    G = _randn((*b, n, 2 * n), dt.is_complex, g)
    W = G @ G.mH
    s = W.diagonal(dim1=-2, dim2=-1).real.rsqrt()
    M = W * s[..., :, None] * s[..., None, :]
    M = 0.5 * (M + M.mH)
    kappa = torch.linalg.cond(M)
    j = torch.arange(n, dtype=torch.float64)
    D = 10.0 ** (-decades * j / (2 * max(n - 1, 1)))
    A = (M * D[:, None] * D[None, :]).to(dt)
    L = A.tril(-1)
    return L + L.mH + torch.diag_embed(A.diagonal(dim1=-2, dim2=-1).real.to(dt)), kappa.real


def scaled(A: torch.Tensor, scale: float | torch.Tensor) -> torch.Tensor:
    """``A·scale`` formed in float64/complex128 and rounded once to ``A``'s dtype.

    Use it for extreme scales (``1e−30 … 1e30`` in float32): a scale-invariant algorithm must
    give ratios unchanged. A power-of-two ``scale`` is exact; any other ``scale`` rounds each
    entry once (``|Δ| <= u|A·scale|``).

    Parameters
    ----------
    A : torch.Tensor
        Floating or complex, any shape.
    scale : float or torch.Tensor
        Broadcastable against ``A`` (e.g. shape ``batch + (1, 1)`` for one scale per matrix).

    Returns
    -------
    torch.Tensor
        Same shape (broadcast) and dtype as ``A``.

    Raises
    ------
    ValueError
        If a finite entry would overflow to inf or a non-zero entry would underflow to 0.
    """
    if not isinstance(A, torch.Tensor) or not (A.is_floating_point() or A.is_complex()):
        raise TypeError(f"A must be a floating or complex torch.Tensor, got {type(A).__name__}")
    wide = torch.complex128 if A.is_complex() else torch.float64
    s = torch.as_tensor(scale, dtype=torch.float64)
    if not torch.isfinite(s).all() or (s == 0).any():
        raise ValueError(f"scale must be finite and non-zero, got {scale}")
    out = (A.detach().to(wide) * s).to(A.dtype)
    src = A.detach().expand_as(out)
    if (torch.isfinite(src) & ~torch.isfinite(out)).any():
        raise ValueError(f"scaled: A*{scale} overflows {A.dtype}")
    if ((src != 0) & (out == 0)).any():
        raise ValueError(f"scaled: A*{scale} underflows to zero in {A.dtype}")
    return out


def triangular(
    n: int,
    upper: bool = False,
    unit: bool = False,
    kind: str = "gaussian",
    *,
    kappa: float = 10.0,
    key_dim: int = 128,
    key_correlation: float = 0.0,
    gated: bool = True,
    sign: float = 1.0,
    fill: float | None = None,
    batch: Batch = (),
    dtype: torch.dtype = torch.float32,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    """Triangular test matrices.

    ``kind="gaussian"``
        The triangle of a Gaussian matrix (unit: diagonal 1). Badly conditioned:
        ``κ₂`` grows like ``2^n`` (Viswanath & Trefethen 1998). The standard hard case for
        triangular solvers.
    ``kind="well"``
        Non-unit: the ``R`` factor of the QR of :func:`with_condition` ``(n, kappa)``, so
        ``κ₂ = kappa`` exactly in float64 (lower: ``Rᴴ``). Unit: ``I + N`` with ``N`` strictly
        triangular Gaussian scaled to ``‖N‖_F = 1/2``, so ``κ₂ <= (1 + 1/2)/(1 − 1/2) = 3``.
    ``kind="deltanet"``
        The unit lower triangle that Gated DeltaNet's chunked UT transform inverts (Yang et al.
        2024; the torch path of Qwen3-Next / FLA's ``chunk_gated_delta_rule`` reference):
        ``L = I + tril(sign·β_i ⟨k_i, k_j⟩ e^{g_i − g_j}, −1)``. There ``attn = −(β K Kᵀ ⊙ Γ)``
        (strictly lower) and the row loop computes ``T = (I − attn)⁻¹``, i.e. the matrix inverted
        is ``sign = +1`` (the default). ``sign = −1`` gives ``I + attn`` itself. Keys
        ``k_i ∈ R^{key_dim}`` (complex: ``C^{key_dim}``, ``⟨k_i,k_j⟩ = k_jᴴ k_i``) have unit 2-norm,
        ``β_i = sigmoid(N(0,1)) ∈ (0, 1)``, cumulative log-decay ``g_i = Σ_{t<=i} log α_t`` with
        ``α_t = sigmoid(N(3, 1))`` (≈ 0.95) when ``gated``, else ``g = 0``. ``key_correlation``
        ``ρ ∈ [0, 1)`` mixes a shared direction into the keys (``k_i ∝ √ρ·c + √(1−ρ)·z_i``). As
        ``ρ, β → 1`` and ``g → 0``, ``sign = +1`` tends to ``I + strict-lower ones`` (inverse
        bidiagonal, benign) while ``sign = −1`` tends to ``I − strict-lower ones``, whose inverse
        has entries ``2^{i−j−1}``: ``κ`` up to ``~2^n``. ``unit`` must be True (the diagonal is 1).

    Parameters
    ----------
    n : int
        Order (DeltaNet chunk size: 64).
    upper : bool
        Upper triangle (for ``"deltanet"``: the conjugate transpose of the lower matrix).
    unit : bool
        Unit diagonal.
    kind : {"gaussian", "well", "deltanet"}
    kappa : float
        Condition number for ``kind="well"``, non-unit.
    key_dim, key_correlation, gated, sign :
        DeltaNet parameters (Qwen3-Next: ``key_dim = 128``; ``sign`` ±1, see above).
    fill : float, optional
        Value for the entries a triangular solver must not read: the other triangle, and the
        diagonal when ``unit``. Default: zeros off the triangle and ones on a unit diagonal. Use
        ``fill=float("nan")`` to check that a solver reads only what it should.

    Returns
    -------
    torch.Tensor
        ``batch + (n, n)``.
    """
    _size("n", n)
    dt = _dtype(dtype)
    cplx = dt.is_complex
    g = _rng(generator, seed)
    b = _batch(batch)
    if kind == "gaussian":
        L = _randn((*b, n, n), cplx, g).tril()
        if unit:
            L = L.tril(-1) + torch.eye(n, dtype=L.dtype)
        T = L.mH if upper else L
    elif kind == "well":
        if unit:
            N = _randn((*b, n, n), cplx, g).tril(-1)
            nf = torch.linalg.matrix_norm(N).unsqueeze(-1).unsqueeze(-1)
            N = torch.where(nf > 0, N / (2 * nf), N)
            L = torch.eye(n, dtype=N.dtype) + N
            T = L.mH if upper else L
        else:
            A = _from_svals(singular_values(n, kappa), n, n, b, cplx, g)
            R = torch.linalg.qr(A).R if n else A
            T = R if upper else R.mH
    elif kind == "deltanet":
        if not unit:
            raise ValueError("triangular(kind='deltanet') is unit triangular: pass unit=True")
        _size("key_dim", key_dim)
        if not 0.0 <= key_correlation < 1.0:
            raise ValueError(f"key_correlation must be in [0, 1), got {key_correlation}")
        z = _randn((*b, n, key_dim), cplx, g)
        c = _randn((*b, 1, key_dim), cplx, g)
        keys = math.sqrt(key_correlation) * c + math.sqrt(1.0 - key_correlation) * z
        keys = keys / torch.linalg.vector_norm(keys, dim=-1, keepdim=True).clamp_min(1e-300)
        beta = torch.sigmoid(torch.randn((*b, n, 1), dtype=torch.float64, generator=g))
        if sign not in (1.0, -1.0):
            raise ValueError(f"sign must be +1 or -1, got {sign}")
        S = sign * beta * (keys @ keys.mH)
        if gated:
            log_alpha = torch.nn.functional.logsigmoid(
                3.0 + torch.randn((*b, n), dtype=torch.float64, generator=g)
            )
            gcum = torch.cumsum(log_alpha, dim=-1)
            decay = torch.exp((gcum.unsqueeze(-1) - gcum.unsqueeze(-2)).tril(-1)).tril(-1)
            S = S * decay
        L = torch.eye(n, dtype=S.dtype) + S.tril(-1)
        T = L.mH if upper else L
    else:
        raise ValueError(f"kind must be 'gaussian', 'well' or 'deltanet', got {kind!r}")
    T = T.to(dt).clone()
    if fill is not None and n:
        keep = torch.ones(n, n, dtype=torch.bool)
        keep = keep.triu(1 if unit else 0) if upper else keep.tril(-1 if unit else 0)
        T = torch.where(keep, T, torch.full((), fill, dtype=dt))
    return T
