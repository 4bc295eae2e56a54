"""The LU family's tuning and its three kernel contracts (``panel``, ``small``, ``swap``; listed in
:mod:`mpslinalg.lu`), implemented with torch ops (:class:`_TorchKernels`) and with the
``metal/lu_*.metal`` kernel groups (:class:`_MetalKernels`, one call site for the ``metal`` and
``emulator`` backends)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import torch

from ..kernels import backend_for, kernel_name, load_library
from ..oplayer import checks as E
from ..oplayer import functorch_active as _functorch
from . import torch_cpu as _torch

# --------------------------------------------------------------------------------------------------
# Tuning
# --------------------------------------------------------------------------------------------------


@dataclass
class Tuning:
    """Block sizes and strategies of the recursive LU (``benchmarks/bench_lu.py --tune`` measures).

    Attributes
    ----------
    panel_nb : int
        Block width ``nb`` of the blocked LU on the kernel backends (``metal``, ``emulator``): one
        of 8, 16, 32, 64 (32 and 64 are the production widths; 8 and 16 let emulator tests cover
        many blocks at small sizes).
    small_max : int
        Largest ``M`` and ``N`` handled by the whole-matrix ``lu_small`` kernel (at most 32).
    small_stage : int
        ``lu_small`` / ``lu_small_solve``: 1 moves the matrices between device memory and the
        lanes' registers through a threadgroup tile (coalesced loads and stores), 0 lets each lane
        read and write its own row directly (no threadgroup memory; strided across lanes).
    small_rows : int
        ``lu_small`` on float32 matrices wider than 16: rows per lane, 1 (one matrix per
        simdgroup) or 2 (two matrices per simdgroup, 16 lanes each: the per-column pivot search,
        publication and barrier are shared by two matrices; 128 registers per lane instead of 72,
        so fewer simdgroups resident: docs/evidence/lu.md has the measurement behind the default 1).
    small_fma : int or dict
        ``lu_small`` at 32 lanes, staged, one row per lane, for every dtype or per dtype name: 1
        updates the trailing rows with fused multiply-adds (one rounding per product-sum; complex:
        four ``fma`` instead of four products and four sums), 0 with getf2's separate products and
        differences (float32: bit for bit the sequential ``getf2``). Default ``{"float32": 0,
        "complex64": 1}`` (H200, docs/evidence/lu.md: complex64 faster with fma; float32 keeps the
        bit-for-bit property, 8% slower than with fma).
    small_roll : int or dict
        ``lu_small`` at 32 lanes, staged, one row per lane, for every dtype or per dtype name: 1
        runs the column loop rolled (one loop body per phase of 8 columns, the row's registers
        rotating a column a step: ~1/5 of the unrolled code, which the GPU otherwise streams
        through its instruction cache), 0 unrolled. Same arithmetic either way. Default 1 for both
        (with ``small_roll_variant``'s defaults; docs/evidence/lu.md has the measurements).
    small_roll_variant : int or dict
        The rolled loop's variants (``small_roll`` = 1 only), for every dtype or per dtype name, a
        bit mask: 1 moves finished values out of the registers into the staging tile (multipliers
        each step, the pivot row once, published there), so every lane updates its whole register
        window unguarded (no per-element select, no register moves); 2 starts the next column's
        pivot search before the rest of a step's update (its latency hidden behind the update);
        4 (complex; float32 ignores it) forms ``1 / pivot`` with one division instead of Smith's three (exactly
        scaled by a power of two: not the unrolled loop's bits, LAPACK's backward-error contract).
        Bits 1 and 2 keep the operations on the matrix. Default ``{"float32": 1, "complex64": 5}``
        (H200 2026-12-02, 65536 x 32x32 against ``torch.linalg.lu_factor_ex`` in the same run:
        complex64 with fma 880 us, 2.72x, against 1865 rolled alone and 1517 with bit 1 only;
        float32 484 us, 1.79x, against 516 unrolled, bit for bit the same factors; bit 2 was
        slower for both, 915 and 533 us).
    panel_threads : int
        Threads per threadgroup of ``lu_panel`` and ``lu_panel_step`` (a power of two, 32 to 256).
    panel_rows : int
        Rows per threadgroup of ``lu_panel_step`` and ``lu_panel_look`` (the tall panel shared by
        several threadgroups).
    panel_rows_short : tuple
        ``(rows, R)``: ``lu_panel_look`` on a panel of at most ``rows`` rows uses at most ``R`` rows
        per group (more, smaller groups while they fit the GPU's cores; (0, 64): off).
    panel_look : int or dict
        Most columns of a tall panel per dispatch (``lu_panel_look``: 2, 4, 8 or 16, for every dtype
        or per dtype name, ``{"float32": 16, "complex64": 8}``, the default; every group
        repeats the small LU of all active rows on those columns, so the panel needs ``w / k``
        dispatches instead of ``w + 1``); the host takes the largest ``k <= panel_look`` whose
        active rows fit the kernel's registers (``rows <= panel_threads * slots / k``, twice that
        for float32; ``slots = look_slots``), else ``lu_panel_step``.
        1: always ``lu_panel_step``.
    look_mma : bool
        float32 ``lu_panel_look`` with ``k`` = 8 or 16 and 32 slots: the trailing rows' update (the
        group's rows times the ``k`` rows of U) as 8 x 8 products on Apple's matrix units
        (``simdgroup_matrix``) instead of ``k`` multiply-subtracts per entry. Off by default: the
        product is ``32 x k x w`` per group, far too small to be throughput-bound, and it costs a
        16 KiB threadgroup tile and a barrier (docs/evidence/lu.md has the H200 proxy timing both ways).
    swap_trsm : bool
        The block's ``U12 <- L11^{-1} A12`` inside its ``lu_laswp_block`` (for blocks of at most
        ``SWAP_TRSM_MAX`` columns; one dispatch a block instead of two: the interchanges' gather
        then the triangular solve of the rows it moved into place) instead of a ``trsm_small``
        dispatch.
    panel_outer : int
        0 (off) or 64: blocks of 64 columns, each factored as blocks of ``panel_nb`` with the
        interchanges and updates kept inside it, then one trailing update of rank 64 (the trailing
        matrix is read and written half as often with ``panel_nb`` 32).
    panel_regs : bool
        Panels of at most ``panel_single_rows`` rows, at most 32 columns and at most
        ``panel_threads`` rows (twice that for float32) by ``lu_panel_regs`` (the whole panel in one
        group's registers, two barriers a column) instead of ``lu_panel`` (device memory, five
        barriers a column).
    look_roll : bool
        ``lu_panel_look`` without ``look_mma``: the small LU's column loop rolled
        (one loop body for every column, the registers rotating a column a step) instead of
        unrolled: 42-70 KB of sm_90 code instead of 78-224 KB, which a dispatch streams through
        the instruction cache. Same arithmetic.
    panel_colmajor : bool
        ``lu_panel_look``'s two panel buffers column-major (``[B, nb, M]``: a warp's loads of a
        column, the access every group repeats over all active rows, are one coalesced
        transaction) instead of row-major (``[B, M, nb]``: one memory segment per row).
    look_slots : dict
        ``lu_panel_look``'s register budget per device type: 32 or 64 complex values (64 or 128
        floats) a thread. 64 fits the H200's 255 registers a thread (a tall panel has at most one
        group per core, so the registers cost no occupancy); 32 on a Mac, where 256 threads a group
        leave about 128 registers a thread (64 values would spill). Only 32 is built since
        2026-12-01 night: 64 was slower on the H200 in every round (docs/evidence/lu.md), and its
        kernels took much of ptxas' time for the LU kernels (the build's 600 s limit).
    panel_single_rows : int
        Panels with at most this many rows (0: none) are factored by one threadgroup of
        ``panel_threads`` in one dispatch (``lu_panel``); taller ones as ``panel_tall`` says.
    panel_tall : str
        Panels taller than ``panel_single_rows``: ``"one"`` (issue 35, selectable) by ONE
        threadgroup of ``panel_tall_threads`` per matrix in ONE dispatch (``lu_panel_tall``: the
        blocked LU then issues at most 4 dispatches a panel: panel, interchanges, TRSM, GEMM);
        ``"look"`` (the default until a GPU times both: one threadgroup per panel was 2.8x slower at
        complex64 n = 4096 on the H200, docs/evidence/lu.md) by ``ceil(rows / panel_rows)``
        threadgroups per matrix, several dispatches a panel
        (``lu_panel_look``, ``k`` columns per dispatch, where the rows fit, else ``lu_panel_step``,
        ``w + 1`` dispatches: one global pivot decision per dispatch). docs/ops/lu.md has the cost
        model of both (one GPU core for the whole panel against the dispatches it saves).
    panel_tall_threads : int
        Threads per threadgroup of ``lu_panel_tall`` (a power of two, 32 to 1024).
    direct_max : dict
        ``torch`` backend, per device type: matrices with ``max(M, N)`` up to this are factored by
        one call of the device's leaf (``torch.linalg.lu_factor_ex``); larger ones recurse.
    leaf_nb : dict
        ``torch`` backend, per device type: panel width of the recursion's leaves.
    gemm : dict
        Complex GEMM strategy per device type: ``"native"`` (``torch.matmul`` on complex),
        ``"4m"`` (four real products) or ``"embed"`` (one real product of the 2x2 real block
        embedding). Real dtypes always use ``torch.matmul``.
    """

    # H200 (2026-12-01, c64 n=1024 through the cuda target): nb 32 5.29 ms vs 64 6.32 ms, 16 rows
    # per group 5.46 ms vs 64 rows 6.32 ms (docs/evidence/lu.md)
    panel_nb: int = 32
    small_max: int = 32
    small_stage: int = 1
    small_rows: int = 1
    small_fma: dict = field(default_factory=lambda: {"float32": 0, "complex64": 1})
    small_roll: dict = field(default_factory=lambda: {"float32": 1, "complex64": 1})
    small_roll_variant: dict = field(default_factory=lambda: {"float32": 1, "complex64": 5})
    panel_threads: int = 256
    panel_rows: int = 32
    # H200 2026-12-01, rounds 1 and 2: 16 rows per group 2-3% faster at c64 n=1024 (4.14 / 4.17 vs
    # 4.27 ms), 6% slower at n=4096 (37.2 vs 35.1: the tallest panels then need 256 groups)
    panel_rows_short: tuple = (1024, 16)
    # H200 2026-12-01 round 1 (c64 n=1024): k = 16 6-13% slower for complex64 (its variant then
    # spilled), 13% faster for float32 (3.35 vs 3.86 ms); 4: 16% slower
    panel_look: dict = field(default_factory=lambda: {"float32": 16, "complex64": 8})
    look_slots: dict = field(default_factory=lambda: {"cpu": 32, "cuda": 32, "mps": 32})
    look_mma: bool = False
    # H200 2026-12-01 night, round 2 (ms, default / variant; c64 n=1024, 4096, f32 n=1024, 4096): rolled
    # 3.82 / 4.15, 30.0 / 30.4, 3.08 / 3.84, 20.8 / 23.1; panel_regs + swap_trsm 4.34, 31.7, 3.31, 21.5
    # (the fused TRSM: 40.7 us a block against 6.5 + 15.6); round 1: panel_outer 64 slower (docs/evidence/lu.md)
    look_roll: bool = False
    panel_regs: bool = False
    panel_outer: int = 0
    swap_trsm: bool = False
    # H200 2026-12-01 round 1, same run (ms, row-major / column-major): c64 n=1024 4.21 / 4.01, n=4096
    # 55.3 / 46.7, f32 n=1024 3.36 / 3.24, n=4096 43.6 / 38.7 (n=4096 with the not-inlined column step)
    panel_colmajor: bool = True
    panel_single_rows: int = 256
    # issue 35: every panel in one dispatch (the emulator cannot time it: docs/ops/lu.md, cost model)
    panel_tall: str = "look"
    panel_tall_threads: int = 1024
    # CUDA: cuSOLVER's getrf is the best leaf at every size on the H200 (2026-11-30, complex64
    # n = 4096: one call 15.8 ms, our recursion over 256-wide cuSOLVER leaves 170 ms — host-bound
    # launches), so the torch backend on CUDA never recurses.
    direct_max: dict = field(default_factory=lambda: {"cpu": 512, "cuda": 2**62, "mps": 0})
    leaf_nb: dict = field(default_factory=lambda: {"cpu": 128, "cuda": 256, "mps": 32})
    gemm: dict = field(default_factory=lambda: {"cpu": "native", "cuda": "native", "mps": "4m"})


#: The tuning in use (module-level, mutable: benchmarks and tests adjust it).
TUNING = Tuning()



# --------------------------------------------------------------------------------------------------
# Row interchanges as permutations (the torch implementation of ``swap``)
# --------------------------------------------------------------------------------------------------


def _swaps_to_perm(p: torch.Tensor, m: int, chunk: int = 256) -> torch.Tensor:
    """Permutation of LAPACK interchanges, without a host loop over the pivots' values.

    ``p`` is ``[B, k]`` (int64, 0-based): step ``i`` swaps rows ``i`` and ``p[:, i] >= i`` of an
    ``m``-row matrix, for ``i = 0 .. k-1`` in order. Returns ``perm [B, m]`` (int64) with
    ``new[r] = old[perm[r]]``. Each chunk of ``w`` steps costs ``O(w^2)`` vectorised comparisons and
    ``log2(w)`` pointer-jumping gathers (the content of position ``i`` before step ``i`` follows a
    chain of earlier steps that targeted ``i``); chunks are composed by a gather.
    """
    Bsz, k = p.shape
    dev = p.device
    perm = None
    for off in range(0, k, chunk):
        w = min(chunk, k - off)
        q = p[:, off:off + w]
        idx = torch.arange(w, device=dev)
        earlier = idx[None, :] < idx[:, None]  # [i, k]: k < i
        ranks = idx + 1
        # src(i) = last step k < i whose target p_k is position off+i (else i itself: a root)
        hit = (q[:, None, :] == (off + idx)[None, :, None]) & earlier
        last = (hit * ranks).amax(-1) - 1
        ptr = torch.where(last >= 0, last, idx)
        for _ in range(max(1, math.ceil(math.log2(max(w, 2))))):
            ptr = ptr.gather(-1, ptr)
        c = off + ptr  # original row sitting at position off+i just before step i
        # position off+i finally holds what sat at p_i before step i
        same = q[:, :, None] == q[:, None, :]  # [j, j']: p_j == p_j'
        prev = ((same & earlier) * ranks).amax(-1) - 1
        top = torch.where(prev >= 0, c.gather(-1, prev.clamp(min=0)), q)
        # a target row p_j beyond the chunk finally holds c(last j' with p_j' == p_j)
        lastall = (same * ranks).amax(-1) - 1
        # out of place (scatter, cat), so that torch.vmap can batch it
        step = torch.arange(m, device=dev).expand(Bsz, m).scatter(-1, q, c.gather(-1, lastall))
        step = torch.cat([step[:, :off], top, step[:, off + w:]], dim=-1)
        perm = step if perm is None else perm.gather(-1, step)
    if perm is None:
        perm = torch.arange(m, device=dev).expand(Bsz, m).clone()
    return perm


def _perm_from_pivots(piv: torch.Tensor, m: int) -> torch.Tensor:
    """``perm [..., m]`` (int64) of 1-based LAPACK pivots ``piv [..., k]``: ``(PᵀA)[r] = A[perm[r]]``."""
    batch = piv.shape[:-1]
    flat = piv.reshape(math.prod(batch), piv.shape[-1]).long() - 1
    return _swaps_to_perm(flat, m).reshape(*batch, m)


# --------------------------------------------------------------------------------------------------
# Kernels: one Python call site for metal and the emulator; torch ops for the torch backend
# --------------------------------------------------------------------------------------------------


class _TorchKernels:
    """The kernel contracts with torch ops (CPU/CUDA; any dtype)."""

    name = "torch"

    def small(self, LU: torch.Tensor, piv: torch.Tensor, info: torch.Tensor) -> None:
        lu, p, inf = _torch.lu_factor_ex(LU)
        LU.copy_(lu)
        piv.copy_(p)
        info.copy_(inf)

    def panel(self, LU: torch.Tensor, piv: torch.Tensor, info: torch.Tensor, o: int, w: int) -> None:
        sub = LU[:, o:, o:o + w]
        lu, p, inf = _torch.lu_factor_ex(sub)
        sub.copy_(lu)
        piv[:, o:o + p.shape[-1]].copy_(p + o)
        info.copy_(torch.where((info == 0) & (inf > 0), inf + o, info))

    def swap(self, X: torch.Tensor, piv: torch.Tensor, k1: int, k2: int, c0: int, nc: int,
             reverse: bool = False) -> None:
        if k2 <= k1 or nc <= 0:
            return
        sub = X[:, k1:, c0:c0 + nc]
        perm = _swaps_to_perm(piv[:, k1:k2].long() - 1 - k1, sub.shape[-2])
        if reverse:
            perm = torch.argsort(perm, dim=-1)
        sub.copy_(sub.gather(-2, perm[:, :, None].expand(-1, -1, nc)))


#: The source (``metal/<source>.metal``, one library each) of every kernel template: a call compiles
#: only the group of the kernel it launches (a first ``lu_factor`` of a small matrix: ``lu_small``).
KERNEL_SOURCES: dict[str, str] = {
    "lu_panel": "lu_panel",
    "lu_panel_step": "lu_panel",
    "lu_panel_tall": "lu_panel",
    "lu_panel_look": "lu_look",
    "lu_panel_regs": "lu_look",
    "lu_small": "lu_small",
    "lu_small_solve": "lu_small_solve",
    "lu_laswp": "lu_swap",
    "lu_laswp_block": "lu_swap",
}

#: Compile-time limits of the kernels (SIMD_WIDTH, LU_PANEL_MAX_THREADS, lu_small's widths).
_PANEL_THREADS = (32, 256)
#: lu_panel_tall's threads per group (SIMD_WIDTH, LU_TALL_MAX_THREADS).
_TALL_THREADS = (32, 1024)
#: TUNING.panel_tall's strategies for panels taller than panel_single_rows.
_TALL_MODES = ("one", "look")
_SMALL_MAX = 32
#: Most right-hand sides of the fused ``lu_small_solve`` (its register rows of B: 1 or 8).
SMALL_SOLVE_MAX_RHS = 8
#: Threads per threadgroup of ``lu_small`` / ``lu_small_solve`` (32 * LU_SMALL_SIMDGROUPS).
_SMALL_GROUP = 64


def _per_dtype(setting, dtype: torch.dtype, default):
    """A TUNING value given for every dtype or as a dict by dtype name (``"float32"``, ...)."""
    return setting.get(str(dtype).removeprefix("torch."), default) if isinstance(setting, dict) else setting


def _small_lanes(n: int) -> int:
    """Lanes per matrix of ``lu_small`` (one row per lane): the instantiated width 8, 16 or 32 >= n."""
    return 8 if n <= 8 else (16 if n <= 16 else 32)


def _small_grid(batch: int, lanes: int) -> dict:
    """Launch shape of ``lu_small`` / ``lu_small_solve``: whole threadgroups of whole simdgroups
    (the pivot search is a simdgroup reduction), ``lanes`` per matrix."""
    g = _SMALL_GROUP
    threads = -(-batch * lanes // g) * g
    if threads > 2**32 - g:  # thread_position_in_grid is a 32-bit uint
        raise ValueError(f"mpslinalg: a batch of {batch} small LUs needs {threads} GPU threads, more than "
                         "one dispatch indexes with 32 bits; split the batch")
    return {"threads": threads, "group_size": g}
_INT32_MAX = 2**31 - 1
#: Block widths of the blocked LU (``TUNING.panel_nb``).
_BLOCK_NB = (8, 16, 32, 64)
#: lu_panel_step's register block: entries per thread, rows per group (LU_STEP_MAX_E, LU_STEP_MAX_ROWS).
_STEP_MAX_E = 16
_STEP_MAX_ROWS = 256
#: lu_panel_look: columns per dispatch (instantiated), register slots per thread (complex64; float32
#: twice as many), rows per group, width.
_LOOK_K = (16, 8, 4, 2)
_LOOK_SLOTS = (32,)
_LOOK_MAX_ROWS = 64
_LOOK_MAX_W = 64

#: lu_panel_regs: most columns (LU_REGS_W; its register slots, 32 complex values a thread).
_REGS_W = 32

#: lu_laswp_block: most interchanges per dispatch (LU_SWAP_MAX) and threads per group (LU_SWAP_THREADS).
SWAP_BLOCK_MAX = 64
#: lu_laswp_block with its fused triangular solve: most interchanges (rows of L11; LU_SWAP_TRSM_MAX).
SWAP_TRSM_MAX = 32
_SWAP_THREADS = 256
#: lu_laswp: most threads per group (LU_LASWP_GROUP, its threadgroup attribute).
_LASWP_GROUP = 64

#: Kernel dispatches issued by :class:`_MetalKernels` (by kernel template name) and matrix-product
#: steps issued by the blocked algorithm (``"trsm"``, ``"gemm"``), counted since the last
#: ``DISPATCHES.clear()``: the benchmark reports them per call.
DISPATCHES: Counter = Counter()


def _check_tuning() -> None:
    """Reject tuning values the kernels cannot run with (a bad one hangs or overflows on a GPU)."""
    g = TUNING.panel_threads
    lo, hi = _PANEL_THREADS
    if not (isinstance(g, int) and lo <= g <= hi and g & (g - 1) == 0):
        raise ValueError(f"mpslinalg.lu.TUNING.panel_threads must be a power of two in [{lo}, {hi}] "
                         f"(lu_panel's compile-time limits), got {g!r}")
    g = TUNING.panel_tall_threads
    lo, hi = _TALL_THREADS
    if not (isinstance(g, int) and lo <= g <= hi and g & (g - 1) == 0):
        raise ValueError(f"mpslinalg.lu.TUNING.panel_tall_threads must be a power of two in [{lo}, {hi}] "
                         f"(lu_panel_tall's compile-time limits), got {g!r}")
    if TUNING.panel_tall not in _TALL_MODES:
        raise ValueError(f"mpslinalg.lu.TUNING.panel_tall must be one of {_TALL_MODES}, got {TUNING.panel_tall!r}")
    if not (isinstance(TUNING.small_max, int) and 0 <= TUNING.small_max <= _SMALL_MAX):
        raise ValueError(f"mpslinalg.lu.TUNING.small_max must be an int in [0, {_SMALL_MAX}] "
                         f"(lu_small's widest instantiation), got {TUNING.small_max!r}")
    if TUNING.small_stage not in (0, 1):
        raise ValueError(f"mpslinalg.lu.TUNING.small_stage must be 0 or 1 (lu_small's two load "
                         f"variants), got {TUNING.small_stage!r}")
    for name in ("small_fma", "small_roll"):
        v = getattr(TUNING, name)
        if any(f not in (0, 1) for f in (v.values() if isinstance(v, dict) else [v])):
            raise ValueError(f"mpslinalg.lu.TUNING.{name} must be 0 or 1 (or a dict of those by dtype name), "
                             f"got {v!r}")
    v = TUNING.small_roll_variant
    if any(f not in range(8) for f in (v.values() if isinstance(v, dict) else [v])):
        raise ValueError(f"mpslinalg.lu.TUNING.small_roll_variant must be a bit mask 0..7 (or a dict of those by "
                         f"dtype name), got {v!r}")
    if TUNING.small_rows not in (1, 2):
        raise ValueError(f"mpslinalg.lu.TUNING.small_rows must be 1 or 2 (lu_small's rows per lane), "
                         f"got {TUNING.small_rows!r}")
    if TUNING.panel_nb not in _BLOCK_NB or not isinstance(TUNING.panel_nb, int):
        raise ValueError(f"mpslinalg.lu.TUNING.panel_nb must be one of {_BLOCK_NB} (the blocked LU's "
                         f"block width), got {TUNING.panel_nb!r}")
    looks = TUNING.panel_look.values() if isinstance(TUNING.panel_look, dict) else [TUNING.panel_look]
    if not all(v in _LOOK_K + (1,) and isinstance(v, int) for v in looks):
        raise ValueError(f"mpslinalg.lu.TUNING.panel_look must be 1, 2, 4, 8 or 16 (or a dict of those by dtype "
                         f"name), got {TUNING.panel_look!r}")
    rs = TUNING.panel_rows_short
    if not (isinstance(rs, tuple) and len(rs) == 2 and all(isinstance(v, int) for v in rs) and rs[0] >= 0
            and 1 <= rs[1] <= _LOOK_MAX_ROWS):
        raise ValueError(f"mpslinalg.lu.TUNING.panel_rows_short must be (rows >= 0, R in [1, {_LOOK_MAX_ROWS}]), "
                         f"got {rs!r}")
    if TUNING.panel_outer not in (0, SWAP_BLOCK_MAX) or not isinstance(TUNING.panel_outer, int):
        raise ValueError(f"mpslinalg.lu.TUNING.panel_outer must be 0 or {SWAP_BLOCK_MAX} (lu_laswp_block's most "
                         f"interchanges a dispatch), got {TUNING.panel_outer!r}")
    for name in ("look_mma", "look_roll", "panel_colmajor", "panel_regs", "swap_trsm"):
        if not isinstance(getattr(TUNING, name), bool):
            raise ValueError(f"mpslinalg.lu.TUNING.{name} must be a bool, got {getattr(TUNING, name)!r}")
    if not all(v in _LOOK_SLOTS and isinstance(v, int) for v in TUNING.look_slots.values()):
        raise ValueError(f"mpslinalg.lu.TUNING.look_slots values must be one of {_LOOK_SLOTS} (lu_panel_look's "
                         f"instantiated register budgets), got {TUNING.look_slots!r}")
    for name, lo in (("panel_rows", 1), ("panel_single_rows", 0)):
        v = getattr(TUNING, name)
        if not (isinstance(v, int) and lo <= v <= _INT32_MAX):
            raise ValueError(f"mpslinalg.lu.TUNING.{name} must be an int >= {lo}, got {v!r}")


def _check_int32(M: int, N: int) -> None:
    """The kernels index inside a matrix with 32-bit ints (Apple GPUs have no 64-bit multiply)."""
    if M * N > _INT32_MAX:
        raise ValueError(f"mpslinalg: a {M}x{N} matrix has more than 2^31 - 1 entries; the Metal LU "
                         "kernels index a matrix with 32-bit integers")


class _MetalKernels:
    """The kernel contracts with ``metal/lu_*.metal`` (``metal`` on mps, ``emulator`` on CPU/CUDA);
    each kernel group's library is compiled on the first launch of one of its kernels."""

    name = "metal"

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        _check_tuning()
        self.device = torch.device(device)
        self.dtype = dtype
        self.look_slots = TUNING.look_slots.get(self.device.type, 32)

    def _kernel(self, name: str, *params: int):
        DISPATCHES[name] += 1  # every call site launches the kernel it looks up, once
        lib = load_library(KERNEL_SOURCES[name], self.device)  # cached: one dict lookup after the first
        return getattr(lib, kernel_name(name, self.dtype, *params))

    def small(self, LU: torch.Tensor, piv: torch.Tensor, info: torch.Tensor) -> None:
        B, M, N = LU.shape
        if max(M, N) > _SMALL_MAX:
            raise ValueError(f"lu_small factors matrices up to {_SMALL_MAX}x{_SMALL_MAX}, got {M}x{N}")
        if B == 0 or M == 0 or N == 0:
            return
        W = _small_lanes(max(M, N))
        rows = TUNING.small_rows if W == 32 and self.dtype == torch.float32 else 1  # instantiated
        params = (W, TUNING.small_stage) + ((rows,) if rows > 1 else ())
        roll = _per_dtype(TUNING.small_roll, self.dtype, 0)
        variant = _per_dtype(TUNING.small_roll_variant, self.dtype, 0) & (7 if self.dtype.is_complex else 3)
        opt = _per_dtype(TUNING.small_fma, self.dtype, 0) + 2 * roll + 4 * roll * variant  # (bit 4: complex only)
        if opt and W == 32 and TUNING.small_stage == 1 and rows == 1:  # instantiated
            params += (1, opt)  # lu_small_<dtype>_32_1_<rows = 1>_<OPT bits: 1 fma, 2 rolled, 4, 8, 16 its variants>
        self._kernel("lu_small", *params)(LU, piv, info, M, N, B, **_small_grid(B, W // rows))

    def small_solve(self, A: torch.Tensor, B: torch.Tensor, X: torch.Tensor, info: torch.Tensor) -> None:
        nb, n, k = B.shape
        if n > _SMALL_MAX or k > SMALL_SOLVE_MAX_RHS:
            raise ValueError(f"lu_small_solve takes n <= {_SMALL_MAX} and k <= {SMALL_SOLVE_MAX_RHS} "
                             f"right-hand sides, got n={n}, k={k}")
        if nb == 0 or n == 0 or k == 0:
            return
        W = _small_lanes(n)
        kc = 1 if k == 1 else SMALL_SOLVE_MAX_RHS
        stage = TUNING.small_stage if kc == 1 else 1  # only the staged variant exists for kc = 8
        self._kernel("lu_small_solve", W, kc, stage)(A, B, X, info, n, k, nb, **_small_grid(nb, W))

    def regs_fit(self, M: int, o: int, w: int) -> bool:
        """The panel at ``o`` fits ``lu_panel_regs``: at most ``_REGS_W`` columns and one row per
        thread (two for float32)."""
        rows = TUNING.panel_threads * (2 if self.dtype == torch.float32 else 1)
        return w <= _REGS_W and M - o <= rows

    def panel(self, LU: torch.Tensor, piv: torch.Tensor, info: torch.Tensor, o: int, w: int) -> None:
        """The panel contract by one threadgroup per matrix: ``lu_panel_regs`` where the panel fits
        its registers and ``TUNING.panel_regs`` asks for it, else ``lu_panel``."""
        B, M, N = LU.shape
        _check_int32(M, N)
        if not (0 <= o < M and 0 < w and o + w <= N):
            raise ValueError(f"lu_panel: the panel [{o}, {M}) x [{o}, {o + w}) is not inside a {M}x{N} matrix")
        K = piv.shape[-1]
        g = TUNING.panel_threads
        if TUNING.panel_regs and self.regs_fit(M, o, w):
            self._kernel("lu_panel_regs", _REGS_W)(LU, piv, info, M, N, K, o, w, threads=B * g, group_size=g)
            return
        self._kernel("lu_panel")(LU, piv, info, M, N, K, o, w, threads=B * g, group_size=g)

    def panel_tall(self, LU: torch.Tensor, piv: torch.Tensor, info: torch.Tensor, o: int, w: int) -> None:
        """The panel contract for a panel of any height by ONE threadgroup of
        ``TUNING.panel_tall_threads`` per matrix in ONE dispatch (``lu_panel_tall``: ``lu_panel``'s
        body, so the same pivots and factors)."""
        B, M, N = LU.shape
        _check_int32(M, N)
        if not (0 <= o < M and 0 < w and o + w <= N):
            raise ValueError(f"lu_panel_tall: the panel [{o}, {M}) x [{o}, {o + w}) is not inside a {M}x{N} matrix")
        g = TUNING.panel_tall_threads
        if B * g > 2**32 - g:  # thread_position_in_grid is a 32-bit uint
            raise ValueError(f"mpslinalg: lu_panel_tall would need {B * g} GPU threads for a batch of {B}, more "
                             "than one dispatch indexes with 32 bits; split the batch")
        self._kernel("lu_panel_tall")(LU, piv, info, M, N, piv.shape[-1], o, w, threads=B * g, group_size=g)

    def panel_scratch(self, LU: torch.Tensor, nb: int) -> tuple[torch.Tensor, ...]:
        """Candidate buffers of ``lu_panel_step`` for panels of ``LU`` up to ``nb`` columns wide
        (allocate once per factorization, pass to every :meth:`panel_steps`)."""
        B, M, _ = LU.shape
        G = max(1, -(-M // TUNING.panel_rows))
        return (torch.empty(B, 2, G, dtype=torch.float32, device=LU.device),
                torch.empty(B, 2, G, dtype=torch.int32, device=LU.device),
                torch.empty(B, 2, G + 1, nb, dtype=LU.dtype, device=LU.device))

    def panel_steps(self, LU: torch.Tensor, piv: torch.Tensor, info: torch.Tensor, o: int, w: int,
                    scratch: tuple[torch.Tensor, ...]) -> None:
        """The ``panel`` contract for a tall panel, shared by ``ceil((M - o) / panel_rows)``
        threadgroups per matrix: ``min(M - o, w) + 1`` dispatches of ``lu_panel_step``."""
        B, M, N = LU.shape
        _check_int32(M, N)
        if not (0 <= o < M and 0 < w and o + w <= N):
            raise ValueError(f"lu_panel_step: the panel [{o}, {M}) x [{o}, {o + w}) is not inside a {M}x{N} matrix")
        R = TUNING.panel_rows
        g = TUNING.panel_threads
        if R * w > g * _STEP_MAX_E or R > _STEP_MAX_ROWS:
            raise ValueError(f"mpslinalg.lu.TUNING.panel_rows = {R}: lu_panel_step holds a group's "
                             f"rows x {w} columns in registers, at most {_STEP_MAX_E} entries per thread "
                             f"({g} threads) and {_STEP_MAX_ROWS} rows")
        G = -(-(M - o) // R)
        cv, ci, rows = scratch
        if cv.shape[-1] < G or rows.shape[-1] < w:
            raise ValueError(f"lu_panel_step: scratch for {cv.shape[-1]} groups x {rows.shape[-1]} columns, "
                             f"needs {G} x {w}")
        K = piv.shape[-1]
        for step in range(min(M - o, w) + 1):
            self._kernel("lu_panel_step")(LU, piv, info, cv, ci, rows, M, N, K, o, w, step, G, R,
                                          threads=B * G * g, group_size=g)

    def look_k(self, M: int, o: int, w: int) -> int:
        """Columns per ``lu_panel_look`` dispatch for the panel at ``o`` (0: it does not fit)."""
        g = TUNING.panel_threads
        if w > _LOOK_MAX_W or TUNING.panel_rows > _LOOK_MAX_ROWS:
            return 0
        slots = self.look_slots * (2 if self.dtype == torch.float32 else 1)  # float32: half the registers
        cap = self.look_cap()
        return next((k for k in _LOOK_K if k <= cap and M - o <= g * slots // k), 0)

    def look_cap(self) -> int:
        """``TUNING.panel_look`` for this dtype (1: ``lu_panel_look`` is not used)."""
        return _per_dtype(TUNING.panel_look, self.dtype, 8)

    def look_buffers(self, LU: torch.Tensor, nb: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The two panel buffers of :meth:`panel_look` for panels of ``LU`` up to ``nb`` columns:
        ``[B, M, nb]`` each, column-major (``[B, nb, M]`` transposed) when
        ``TUNING.panel_colmajor``; allocate once per factorization."""
        B, M, _ = LU.shape
        shape = (B, nb, M) if TUNING.panel_colmajor else (B, M, nb)
        bufs = tuple(torch.empty(shape, dtype=LU.dtype, device=LU.device) for _ in range(2))
        return tuple(S.mT for S in bufs) if TUNING.panel_colmajor else bufs

    def panel_look(self, LU: torch.Tensor, piv: torch.Tensor, info: torch.Tensor, o: int, w: int,
                   bufs: tuple[torch.Tensor, torch.Tensor]) -> bool:
        """The ``panel`` contract for a tall panel, ``k`` columns per dispatch (``lu_panel_look``,
        ``k = look_k(...)``), through the two panel buffers ``bufs`` (``[B, M, >= w]``, row-major or
        column-major: :meth:`look_buffers`): ``ceil(min(M - o, w) / k)`` dispatches, the first
        reading the panel from ``LU`` (a panel of one dispatch is copied into ``bufs[0]`` first).
        Returns False (nothing done) when the panel does not fit the kernel."""
        B, M, N = LU.shape
        k = self.look_k(M, o, w)
        if k == 0:
            return False
        _check_int32(M, N)
        if not (0 <= o < M and 0 < w and o + w <= N):
            raise ValueError(f"lu_panel_look: the panel [{o}, {M}) x [{o}, {o + w}) is not inside a {M}x{N} matrix")
        S = bufs
        ls = S[0].shape[-1]
        cm = int(S[0].stride()[-2:] == (1, M))  # column-major: [B, ls, M] transposed
        dense = (ls * M, 1, M) if cm else (ls * M, ls, 1)
        if S[0].shape[:2] != (B, M) or ls < w or any(X.shape != S[0].shape or X.stride() != dense for X in S):
            raise ValueError(f"lu_panel_look: panel buffers of shape {tuple(S[0].shape)} and strides "
                             f"{tuple(S[0].stride())}, need two dense ({B}, {M}, >= {w}), row- or column-major")
        _check_int32(M, ls)  # the buffers are indexed with 32-bit ints too
        short_rows, short_r = TUNING.panel_rows_short
        R = min(TUNING.panel_rows, short_r) if M - o <= short_rows else TUNING.panel_rows
        G = -(-(M - o) // R)
        g = TUNING.panel_threads
        K = piv.shape[-1]
        kl = min(M - o, w)
        starts = list(range(0, kl, k))
        # the matrix-unit variant (1) exists for float32, k >= 8; the rolled one (2) for every k
        var = ()
        if TUNING.look_mma and self.dtype == torch.float32 and k >= 8:
            var = (1,)
        elif TUNING.look_roll:
            var = (2,)
        if len(starts) == 1:  # the only dispatch writes A: it cannot read the panel there too
            S[0][:, o:, :w].copy_(LU[:, o:, o:o + w])
            DISPATCHES["copy"] += 1
        for d, s0 in enumerate(starts):
            kc = min(k, kl - s0)
            last = int(d == len(starts) - 1)
            # phase 1: read the panel from LU, write only Sout; 2: move the rows it made final to LU
            phase = 0 if len(starts) == 1 else (1 if d == 0 else 2 if d == 1 else 0)
            look = self._kernel("lu_panel_look", k, self.look_slots, *var)
            look(LU, *(X.mT if cm else X for X in (S[d % 2], S[(d + 1) % 2])), piv, info, M, N, K, o, w, ls,
                 s0, kc, G, R, last, phase, cm, threads=B * G * g, group_size=g)
        return True

    def swap_around(self, X: torch.Tensor, piv: torch.Tensor, k1: int, k2: int, w: int, lo: int = 0,
                    hi: int | None = None, trsm: bool = False) -> None:
        """The interchanges ``piv[:, k1:k2]`` (at most ``SWAP_BLOCK_MAX``) on the columns ``[lo, hi)``
        (default: all) of ``X`` but the panel's ``[k1, k1 + w)``, left and right of it, in one
        dispatch: one permutation gather of the rows they move (``lu_laswp_block``), LAPACK
        ``getrf``'s two ``laswp`` calls per block. ``trsm`` (at most ``SWAP_TRSM_MAX``
        interchanges): also ``X[k1:k2, c] <- L11^{-1} X[k1:k2, c]`` for the columns right of the
        panel, ``L11`` the unit lower triangle of ``X[k1:k2, k1:k2]``."""
        B, M, N = X.shape
        _check_int32(M, N)
        hi = N if hi is None else hi
        if not 0 <= lo <= k1 <= k1 + w <= hi <= N:
            raise ValueError(f"lu_laswp_block: the panel columns [{k1}, {k1 + w}) must lie inside [{lo}, {hi}) "
                             f"within the {N} columns")
        cnt = k2 - k1
        nc = hi - lo - w
        if cnt <= 0 or nc <= 0:
            return
        if cnt > SWAP_BLOCK_MAX or (trsm and (cnt > SWAP_TRSM_MAX or k2 > k1 + w)):
            raise ValueError(f"lu_laswp_block applies at most {SWAP_BLOCK_MAX} interchanges ({SWAP_TRSM_MAX} with "
                             f"the triangular solve, whose L11 is the panel's), got {cnt} (panel width {w})")
        ngc = -(-nc // 32)  # 32 columns per threadgroup
        threads = B * ngc * _SWAP_THREADS
        if threads > 2**32 - _SWAP_THREADS:  # thread_position_in_grid is a 32-bit uint
            raise ValueError(f"mpslinalg: lu_laswp_block would need {threads} GPU threads for a batch of {B} "
                             f"{M}x{N} matrices, more than one dispatch indexes with 32 bits; split the batch")
        laswp = self._kernel("lu_laswp_block", *((1,) if trsm else ()))  # _1: with the triangular solve
        laswp(X, piv, M, N, piv.shape[-1], k1, cnt, lo, nc, k1, w, 0, ngc, threads=threads, group_size=_SWAP_THREADS)

    def swap(self, X: torch.Tensor, piv: torch.Tensor, k1: int, k2: int, c0: int, nc: int,
             reverse: bool = False) -> None:
        if k2 <= k1 or nc <= 0:
            return
        B, M, N = X.shape
        _check_int32(M, N)
        K = piv.shape[-1]
        total = B * nc
        self._kernel("lu_laswp")(X, piv, M, N, K, k1, k2, c0, nc, int(reverse), B,
                                 threads=total, group_size=min(_LASWP_GROUP, total))


_TORCH_KERNELS = _TorchKernels()


def _on_kernels(x: torch.Tensor) -> bool:
    """``x`` is served by the ``.metal`` kernels (``metal``/``emulator`` backend, float32/complex64,
    no ``torch.func`` transform wrapping it); else by torch ops."""
    return x.dtype in E.GPU_DTYPES and backend_for(x.device) != "torch" and not _functorch()


def _kernels(x: torch.Tensor):
    if _on_kernels(x):
        return _MetalKernels(x.device, x.dtype)
    return _TORCH_KERNELS


