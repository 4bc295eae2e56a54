"""A pytest plugin for the SVD CUDA fault hunt: logs every Triton ``CompiledKernel`` that is garbage collected
(recent Triton unloads its CUDA module in ``__del__``: a module unloaded while one of its launches is still
queued is an illegal memory access or a hang). ``TRITON_KEEP_MODULES=1`` keeps the modules loaded instead.

    python -m pytest -p benchmarks.triton_unload_probe ...
"""

from __future__ import annotations

import os
import sys
import traceback

try:
    from triton.compiler.compiler import CompiledKernel
except Exception:  # noqa: BLE001 - no Triton: nothing to log
    CompiledKernel = None

if CompiledKernel is not None:
    _real_del = getattr(CompiledKernel, "__del__", None)
    print(f"triton_unload_probe: CompiledKernel.__del__ {'present' if _real_del else 'absent'}", file=sys.stderr)

    def _logged_del(self):
        if getattr(self, "module", None) is not None:
            where = "".join(traceback.format_stack(limit=6)[:-1]).replace("\n", " | ")
            print(f"triton_unload_probe: collected {self.name} (module loaded) at {where}", file=sys.stderr,
                  flush=True)
            if os.environ.get("TRITON_KEEP_MODULES") == "1":
                self.module = None  # leak it: never unloaded
                return
        if _real_del is not None:
            _real_del(self)

    CompiledKernel.__del__ = _logged_del
