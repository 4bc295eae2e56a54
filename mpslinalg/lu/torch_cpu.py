"""torch.linalg's LU calls, guarded against torch's CPU batched-getrf race.

torch's CPU ``lu_factor`` of a batch splits the batch over its threads with a grain size that
truncates to 0 for matrices wider than ~14 columns, so several threads call MKL's ``xGETRF`` at once
(pytorch/pytorch#142815; the fix, PR #181570, is not in a release). MKL's row interchanges
(``xLASWP``) are not safe there: wrong factors, ``Intel oneMKL ERROR: Parameter 6 was incorrect on
entry to SLASWP``, "Pivots given to lu_solve must all be greater or equal to 1", or a hang. Measured
on torch 2.13.0+cpu at 2 threads, every dtype: a batch of 2 is wrong from 150 columns on (clean at
144 and below, at any row count; clean for 64 x 128 x 128); it reaches every op built on that LU
(``inv``, ``solve``, ``det``, ``slogdet``, ``lu``), also for expanded (stride-0) batches. A single
matrix, one thread, ``lu_solve``, Cholesky, QR, LDL and the eigensolvers are not affected.

Where it applies (:func:`unsafe`) the batch runs as one torch call per matrix: each is correct and
uses every thread inside LAPACK (what torch's fix does, on one thread). Every torch LU call of the LU
family goes through here; the front doors' fast paths test :func:`unsafe` before theirs.
"""

from __future__ import annotations

import torch

__all__ = ["MIN_COLUMNS", "det", "inv_ex", "linalg_det", "lu", "lu_factor_ex", "slogdet", "solve_ex", "unsafe"]

#: Columns from which a CPU batch is looped: below the smallest failing width measured (150), with
#: margin for other MKL builds; at 128 columns one factorisation costs ~30x the loop's per-item overhead.
MIN_COLUMNS = 128


def unsafe(A) -> bool:
    """Whether torch's batched CPU getrf may race on ``A``: a CPU batch of >= 2 matrices (expanded
    ones included) of >= :data:`MIN_COLUMNS` columns, with torch using more than one thread."""
    try:
        if not A.is_cpu or A.dim() < 3:
            return False
        m, n = A.shape[-2], A.shape[-1]
        return n >= MIN_COLUMNS and m > 0 and A.numel() >= 2 * m * n and torch.get_num_threads() > 1
    except AttributeError:  # not a tensor: torch's own call raises its error
        return False


def _each(fn, A: torch.Tensor, *rest):
    """``fn(A[i], *rest)`` per matrix of ``A``'s batch, the outputs stacked back to the batch (a
    torch.return_types result keeps its type)."""
    batch = A.shape[:-2]
    outs = [fn(a, *rest) for a in A.reshape(-1, *A.shape[-2:]).unbind(0)]
    first = outs[0]
    if isinstance(first, torch.Tensor):
        return torch.stack(outs).reshape(*batch, *first.shape)
    fields = [torch.stack(col).reshape(*batch, *col[0].shape) for col in zip(*outs)]
    return tuple(fields) if type(first) is tuple else type(first)(fields)


def lu_factor_ex(A: torch.Tensor):
    """``torch.linalg.lu_factor_ex(A)``."""
    return _each(torch.linalg.lu_factor_ex, A) if unsafe(A) else torch.linalg.lu_factor_ex(A)


def inv_ex(A: torch.Tensor):
    """``torch.linalg.inv_ex(A)``."""
    return _each(torch.linalg.inv_ex, A) if unsafe(A) else torch.linalg.inv_ex(A)


def lu(A: torch.Tensor):
    """``torch.linalg.lu(A)``."""
    return _each(torch.linalg.lu, A) if unsafe(A) else torch.linalg.lu(A)


def det(A: torch.Tensor) -> torch.Tensor:
    """``torch.linalg.det(A)``."""
    return _each(torch.linalg.det, A) if unsafe(A) else torch.linalg.det(A)


def slogdet(A: torch.Tensor):
    """``torch.linalg.slogdet(A)``."""
    return _each(torch.linalg.slogdet, A) if unsafe(A) else torch.linalg.slogdet(A)


def linalg_det(A: torch.Tensor):
    """``torch.ops.aten._linalg_det(A)``: ``(det, LU, pivots)``."""
    return _each(torch.ops.aten._linalg_det, A) if unsafe(A) else torch.ops.aten._linalg_det(A)


def solve_ex(A: torch.Tensor, B: torch.Tensor, left: bool = True):
    """``torch.linalg.solve_ex(A, B, left=left)`` for a matrix ``B`` (the callers' vector case is
    unsqueezed): where :func:`unsafe`, the looped factorisation and one (batched, safe) ``lu_solve``."""
    if not unsafe(A):
        return torch.linalg.solve_ex(A, B, left=left)
    LU, piv, info = _each(torch.linalg.lu_factor_ex, A)
    return torch.return_types.linalg_solve_ex((torch.linalg.lu_solve(LU, piv, B, left=left), info))
