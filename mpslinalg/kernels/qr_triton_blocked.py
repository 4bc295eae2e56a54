"""Moved to :mod:`mpslinalg.qr.triton_blocked` (issue 29: a family's generated-code backends live in its folder).

Transitional alias, for the SVD modules only (``kernels/svd_*.py`` import it by its old name): the
same module object, not a copy. Delete it once they import from the QR family's folder.
"""

import sys

from ..qr import triton_blocked as _moved

sys.modules[__name__] = _moved
