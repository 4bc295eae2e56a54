"""The op layer: what turns a family's declaration into a torch op (see ``op.py``), the input
checks and errors every public op shares (``checks.py``), and the derivative formulas that more
than one op uses (``derivatives.py``)."""

from . import checks
from .op import Op, declared, defop, functorch_active, needs_custom_op

__all__ = ["Op", "checks", "declared", "defop", "functorch_active", "needs_custom_op"]
