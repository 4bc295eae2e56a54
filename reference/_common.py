"""Argument checks and float64 widening shared by the oracle modules (``lapack``, ``mp``, ``metrics``)."""

from __future__ import annotations

import math

import numpy as np
import torch


def check_tensor(name: str, t: object, min_ndim: int = 2) -> torch.Tensor:
    """``t`` if it is a floating or complex tensor with at least ``min_ndim`` dimensions, else raise."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {tuple(t.shape)}")
    if not (t.is_floating_point() or t.is_complex()):
        raise TypeError(f"{name} must be a floating or complex tensor, got dtype {t.dtype}")
    return t


def check_square(name: str, t: torch.Tensor) -> None:
    """Raise unless ``t`` is a batch of square matrices."""
    if t.shape[-1] != t.shape[-2]:
        raise ValueError(f"{name} must be a batch of square matrices, got shape {tuple(t.shape)}")


def is_vector_rhs(A: torch.Tensor, B: torch.Tensor) -> bool:
    """``torch.linalg.solve``'s rule: ``B`` is a (batch of) vector(s) iff ``B.ndim == 1`` or
    (``B.ndim == A.ndim - 1`` and ``B.shape == A.shape[:-1]``)."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])


def wide_dtype(*ts: torch.Tensor) -> torch.dtype:
    """complex128 if any of ``ts`` is complex, else float64."""
    return torch.complex128 if any(t.is_complex() for t in ts) else torch.float64


def wide(t: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``t`` detached on the CPU, contiguous, conj/neg bits resolved, in ``dtype`` (default:
    float64 for real, complex128 for complex ``t``)."""
    t = t.detach().to("cpu")
    t = t.to(dtype or wide_dtype(t))
    return t.resolve_conj().resolve_neg().contiguous()


def flat_batch(t: torch.Tensor, batch: tuple[int, ...], core: int) -> np.ndarray:
    """Expand ``t`` to ``batch + t.shape[-core:]`` and return it as (N, *core) numpy array."""
    tail = tuple(t.shape[t.ndim - core :]) if core else ()
    return np.ascontiguousarray(t.expand(*batch, *tail).reshape(math.prod(batch), *tail).numpy())


def all_finite(a: np.ndarray) -> bool:
    """Whether every entry of ``a`` is finite."""
    return bool(np.isfinite(a).all())
