"""Issue 12's CUDA fault, fixed: the SVD family's Triton kernels that spread a matrix over a warp's lanes
launch without FMA contraction (``svd_triton_rot.UNIFORM``; docs/ops/svd.md "The CUDA fault").

Triton reduces within a warp by butterfly shuffles and leaves a copy of each column sum in every lane
that holds the column. With contraction ptxas fused a lane's own product with its partner's rounded one
(``SHFL.BFLY R2, R71; FFMA R0, x, x, R2``), so the copies could differ in the last bit; a convergence
test at its threshold then split the Jacobi sweep loop's exit inside a warp and the next round's
shuffles ran with lanes missing (H200, Triton 3.6: stores to garbage addresses, hangs). The checks:

* every launch of a multi-lane kernel of the family passes ``**UNIFORM`` (the source; the
  one-matrix-per-lane kernels, launched with ``BLOCK=``, keep each sum in one thread);
* compiled for sm_90 (no GPU needed), the one-launch kernel has no ``FFMA`` reading a
  ``SHFL.BFLY`` result with ``UNIFORM``, and has such ``FFMA`` without it (so the check can fail);
* on CUDA, the matrix and the seeded batches that faulted every time before the fix.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import tempfile

import pytest
import torch
from svd.harness import assert_svd_ratios

import mpslinalg as LA

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNELS = os.path.join(ROOT, "mpslinalg", "svd")
FAMILY = ("triton_jacobi.py", "triton_fused.py", "triton_regs.py", "triton_square.py", "triton_complete.py")
#: row 173 of the H200's ``torch.manual_seed(1); randn(512, 7, 3)`` after the test's 4096x3x3 draw: it
#: faulted alone in every run before the fix (benchmarks/svd_fault_replay.sh's bisection)
FAULTING_7x3 = [[-1.3351813554763794, -0.4442659318447113, 0.18008454144001007],
                [-2.444969654083252, -0.2570827305316925, 0.06677056849002838],
                [0.35439372062683105, 1.8286606073379517, -1.4686658382415771],
                [-1.0919479131698608, -0.5076055526733398, 1.0255045890808105],
                [-0.23468230664730072, -0.7631975412368774, 0.9557758569717407],
                [-0.34660226106643677, -1.0508668422698975, 1.0931841135025024],
                [0.9916174411773682, 0.47115495800971985, 1.1088916063308716]]


def _launches(path: str) -> list[tuple[int, ast.Call]]:
    """The ``kernel[grid](...)`` calls of a module (a call on a subscript: nothing else in these modules)."""
    tree = ast.parse(open(path).read())
    return [(node.lineno, node) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)]


def test_multilane_launches_take_uniform():
    seen = 0
    for name in FAMILY:
        for line, call in _launches(os.path.join(KERNELS, name)):
            kw = {k.arg for k in call.keywords}
            if "BLOCK" in kw:  # one matrix per lane: its sums never cross lanes
                continue
            seen += 1
            spread = [k.value.id for k in call.keywords if k.arg is None and isinstance(k.value, ast.Name)]
            assert "UNIFORM" in spread, f"{name}:{line}: a multi-lane SVD kernel launched without **UNIFORM"
    assert seen == 7, seen  # fused, registers, tile, prep, complete x2, finish: a new launch is listed here


def _sass_fused_kernel(fp_fusion: bool) -> str:
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from mpslinalg.svd import triton_fused as sf

    nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
    if not os.path.exists(nvdisasm):
        pytest.skip(f"Triton {triton.__version__} ships no nvdisasm at {nvdisasm}")
    sig = {"A": "*fp32", "U": "*fp32", "S": "*fp32", "V": "*fp32", "INFO": "*i32", "B": "i32", "m": "i32",
           "n": "i32", "npad": "i32", "ucols": "i32", "sweeps": "i32", "tol": "fp32", "ctol": "fp32"}
    # the launch that faulted: 7x3, U and V, full, two matrices a program, one warp
    const = dict(MB=2, MP=8, NP=4, UP=8, WANT_UV=True, SLOTS=False, JOINT=False, GATHER=False, RELOAD=True,
                 SCATTER=True)
    names = list(sf._svd_fused_kernel.arg_names)
    src = ASTSource(sf._svd_fused_kernel, {**sig, **{k: "constexpr" for k in const}},
                    constexprs={(names.index(k),): v for k, v in const.items()})
    options = {"num_warps": 1, **({"enable_fp_fusion": True} if fp_fusion else sf.UNIFORM)}
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(kernel.asm["cubin"])
        fh.flush()
        return subprocess.run([nvdisasm, "-c", fh.name], capture_output=True, text=True, check=True).stdout


def _ffma_reading_shuffles(sass: str) -> int:
    """``FFMA`` instructions reading a register last written by ``SHFL.BFLY`` (straight-line scan)."""
    shuffled: set[str] = set()
    count = 0
    for line in sass.splitlines():
        m = re.search(r"/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);", line)
        if not m:
            continue
        op = m.group(1)
        args = [re.sub(r"\.reuse$", "", a.strip().lstrip("-|")) for a in m.group(2).split(",")]
        if op.startswith("FFMA") and any(a in shuffled for a in args[1:]):
            count += 1
        dst = args[1] if op.startswith("SHFL") and len(args) > 1 else args[0]  # SHFL's first is a predicate
        shuffled.discard(dst)
        if op.startswith("SHFL.BFLY"):
            shuffled.add(dst)
    return count


def test_uniform_launch_contracts_nothing_across_shuffles():
    assert _ffma_reading_shuffles(_sass_fused_kernel(fp_fusion=True)) > 0  # the hazard the option removes
    assert _ffma_reading_shuffles(_sass_fused_kernel(fp_fusion=False)) == 0


@pytest.mark.cuda
def test_faulting_inputs_cuda():
    """The matrix and the seeded 512x7x3 batches (the test's second draw) that faulted before the fix:
    LAPACK xDRVBD ratios below 50 (``svd.harness.assert_svd_ratios``, as ``test_svd_triton_fused.py``),
    ``S`` ordered, ``info`` zero."""
    batches = [torch.tensor([FAULTING_7x3], device="cuda")]
    for seed in (1, 5, 13, 14):  # 1, 13, 14 faulted, 5 hung, in every run on the H200
        torch.manual_seed(seed)
        torch.randn(4096, 3, 3, device="cuda")
        batches.append(torch.randn(512, 7, 3, device="cuda"))
    for seed, A in zip(("row 173", 1, 5, 13, 14), batches):
        U, S, Vh, info = LA.svd_ex(A)
        torch.cuda.synchronize()
        assert int(info.count_nonzero()) == 0, seed
        assert_svd_ratios(A.cpu(), U.cpu(), S.cpu(), Vh.cpu(), 50.0, seed)
