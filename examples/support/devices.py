"""The examples' ``--device`` argument: a device this machine has, or a one-line error.

``python examples/vmc_slogdet.py --device mps`` on a machine without an Apple GPU used to end in a
raw traceback from inside torch (issue 34.8); with ``type=device`` argparse prints the usage line
and the reason, and exits 2.
"""

from __future__ import annotations

import argparse

import torch


def device(text: str) -> torch.device:
    """``argparse`` type: ``text`` as a ``torch.device`` that is available here.

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` names no device, or one this machine lacks (with what to do instead).
    """
    try:
        dev = torch.device(text)
    except RuntimeError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a device ({exc})") from None
    if dev.type == "mps" and not (torch.backends.mps.is_available()):
        raise argparse.ArgumentTypeError(
            "mps is not available here (torch.backends.mps.is_available() is False: it needs a Mac with "
            "Apple silicon and macOS 15 or later); on this machine use --device cpu (and for the Metal "
            "kernels emulated on the CPU, MPSLINALG_BACKEND=emulator with it)")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError("cuda is not available here (torch.cuda.is_available() is False); "
                                         "use --device cpu")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise argparse.ArgumentTypeError(f"expected cpu, cuda or mps, got {text!r}")
    return dev
