"""Seeding and argument plumbing shared by the generators (``reference.matrices`` and
``reference.matrices_structured``)."""

from __future__ import annotations

import math

import torch

_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
Batch = tuple[int, ...] | int


def _rng(generator: torch.Generator | None, seed: int | None) -> torch.Generator | None:
    if generator is not None and seed is not None:
        raise ValueError("pass either generator= or seed=, not both")
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        return generator
    if seed is not None:
        return torch.Generator().manual_seed(int(seed))
    return None


def _batch(batch: Batch) -> tuple[int, ...]:
    if isinstance(batch, int):
        batch = (batch,)
    batch = tuple(int(b) for b in batch)
    if any(b < 0 for b in batch):
        raise ValueError(f"batch must be non-negative sizes, got {batch}")
    return batch


def _dtype(dtype: torch.dtype) -> torch.dtype:
    if dtype not in _DTYPES:
        raise TypeError(f"dtype must be one of float32, float64, complex64, complex128; got {dtype}")
    return dtype


def _size(name: str, v: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ValueError(f"{name} must be a non-negative int, got {v!r}")
    return v


def _randn(shape: tuple[int, ...], cplx: bool, g: torch.Generator | None) -> torch.Tensor:
    """Float64 N(0,1), or complex128 with E|z|^2 = 1."""
    if cplx:
        re = torch.randn(shape, dtype=torch.float64, generator=g)
        im = torch.randn(shape, dtype=torch.float64, generator=g)
        return torch.complex(re, im) / math.sqrt(2.0)
    return torch.randn(shape, dtype=torch.float64, generator=g)


def _phases(shape: tuple[int, ...], g: torch.Generator | None) -> torch.Tensor:
    """Random unit-modulus complex128 numbers."""
    phi = torch.rand(shape, dtype=torch.float64, generator=g) * (2 * math.pi)
    return torch.polar(torch.ones_like(phi), phi)
