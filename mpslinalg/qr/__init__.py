"""The QR family: ``qr``, ``geqrf``, ``householder_product`` (``orgqr``), ``ormqr`` with torch's
signatures and semantics (DESIGN §6, §7).

LAPACK's Householder conventions exactly, so results equal torch's/SciPy's up to rounding, signs
included: ``larfg`` gives ``beta`` real, ``tau`` complex with ``1 <= Re tau <= 2``, ``tau = 0`` for
an already-zero column (``H = I``); ``geqrf`` packs ``R`` on and above the diagonal and the
reflectors ``v`` (unit first entry implied) below; ``Q = H_1 H_2 ... H_k``, ``H_i = I - tau_i v_i
v_iᴴ``; ``R`` has a real diagonal.

Algorithm
---------
``geqrf`` of a batch ``[B, M, N]`` (a copy of the input, factored in place):

* small matrices are one **whole-matrix** call (``small``: the ``qr_small`` Metal kernel with the
  matrix in threadgroup memory; on CUDA float32/complex64 the Triton kernel of
  :mod:`mpslinalg.qr.triton`; else a Householder loop over columns vectorised over the batch);
  ``qr`` has both kernels form the thin ``Q`` in the same launch;
* larger ones are **compact-WY blocked** (LAPACK ``geqrf``): factor an ``nb``-wide panel
  (``panel``: ``geqr2`` plus its ``T`` factor, ``larft``), then apply ``Qᴴ = I - V Tᴴ Vᴴ`` to the
  trailing columns by three matrix products (``larfb``);
* on the ``torch`` backend, single large matrices call the device's ``geqrf`` (LAPACK on CPU,
  cuSOLVER on CUDA) — never slower than ``torch.linalg`` —, see ``qr.kernels.Tuning``.

``householder_product`` and ``ormqr`` apply the blocks by matrix products (backward accumulation
for ``Q``, touching only the trailing part); the thin ``Q`` never forms the ``m x m`` one.
Tall-skinny ``qr`` (``m >= Tuning.tsqr_ratio * n``) is a Householder **TSQR** (:mod:`mpslinalg.qr.tsqr`):
batched small QRs in a tree, then LAPACK's signs recovered from the first ``n`` rows of ``Q``.

Internal entry points (no checks; torch conventions; used by the SVD family):
:func:`geqrf_impl`, :func:`householder_product_impl`, :func:`ormqr_impl`, :func:`qr_impl`,
:func:`qr_plain` (no TSQR route).

Modules: ``kernels.py`` (tuning, the kernel contract, torch and Metal kernels), ``algorithm.py``,
``tsqr.py``, ``ops.py`` (declarations and derivatives), ``api.py`` (public ops), ``workloads.py``
(main-job rows); the CUDA (Triton) kernels ``triton.py`` (batched small QR in one launch) and
``triton_blocked.py`` (blocked QR of square batches up to 64), imported on first use.
"""

from __future__ import annotations

import torch

from ..oplayer.family import Family, Route, takes
from ..oplayer.table import EVERY_SIZE
from .algorithm import geqrf_impl, householder_product_impl, ormqr_impl, qr_plain
from .api import geqrf, householder_product, ormqr, qr
from .kernels import TUNING, Tuning
from .ops import qr_impl

__all__ = [
    "FAMILY",
    "TUNING",
    "Tuning",
    "geqrf",
    "geqrf_impl",
    "householder_product",
    "householder_product_impl",
    "ormqr",
    "ormqr_impl",
    "qr",
    "qr_impl",
    "qr_plain",
]


#: The QR family's CUDA (Triton) kernels that other families' Triton code calls (the SVD's
#: preconditioner and its V completion): package-level names, imported on first use (Triton is
#: needed only on CUDA). Name -> (module, attribute).
_CUDA_KERNELS = {
    "square_qr_into": ("triton", "square_qr_into"),
    "square_qr_fits": ("triton", "fits"),
    "qr_small_kernel": ("triton", "_qr_small_kernel"),
    "geqrf_square": ("triton_blocked", "geqrf_square"),
    "geqrf_square_fits": ("triton_blocked", "fits"),
}


def __getattr__(name: str):
    if name in _CUDA_KERNELS:
        import importlib

        module, attr = _CUDA_KERNELS[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _route_qr(op, A, mode="reduced"):
    return op(A, mode=mode) if takes(A) else None


FAMILY = Family(
    name="qr",
    order=40,
    ops=("qr", "geqrf", "householder_product", "ormqr"),
    routes=(Route("qr", "linalg_qr", _route_qr),),
    # 2026-12-01, H200, torch 2.11+cu130: the main job's rows (--mainjob: 145x/249x routed)
    when={"cuda": {"qr": {torch.float32: ((32, 32, 512),), torch.complex64: ((32, 32, 512),)}},
          "mps": {"qr": {torch.float32: EVERY_SIZE, torch.complex64: EVERY_SIZE}}},  # torch: the CPU there
    metal=("qr",),
    workloads="mpslinalg.qr.workloads",
)
