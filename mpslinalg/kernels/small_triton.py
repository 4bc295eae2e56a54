"""Moved to :mod:`mpslinalg.small.triton` (issue 29: a family's generated-code backends live in its folder).

Transitional alias, for the SVD modules only (``kernels/svd_*.py`` import it by its old name): the
same module object, not a copy. Delete it once they import from the small family's folder.
"""

import sys

from ..small import triton as _moved

sys.modules[__name__] = _moved
