"""The Metal sources as PyTorch's ``compile_shader`` sees them: one instantiation idiom and naming
scheme (``metal/scalar.h``, :func:`mpslinalg.kernels.kernel_name`), ASCII-only text, safe math
pinned where the language allows (issues 10.4, 17.2, 17.4)."""

from __future__ import annotations

import re
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from helpers import require_emulator

from mpslinalg.kernels import kernel_name, loader, metal_dir, metal_source

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = sorted(p.stem for p in metal_dir().glob("*.metal"))


def test_kernel_name_scheme():
    assert kernel_name("lu_panel", torch.float32) == "lu_panel_f32"
    assert kernel_name("lu_panel", torch.complex64) == "lu_panel_c64"
    assert kernel_name("small_inv", torch.complex64, 4) == "small_inv_c64_4"
    with pytest.raises(TypeError, match="float64"):
        kernel_name("lu_panel", torch.float64)


@pytest.mark.parametrize("family", ["lu", "triangular", "qr", "small"])
def test_every_instantiation_follows_the_scheme(family):
    """The host names the emulator reads from the source are exactly the scheme's names, and the
    call sites' kernel_name(...) calls name only instantiated kernels."""
    require_emulator()
    from mpslinalg.emulator import compile_shader

    # the family's one file, or its kernel groups metal/<family>_<group>.metal (one library each)
    sources = [p.stem for p in sorted(metal_dir().glob("*.metal")) if p.stem.split("_")[0] == family]
    names = {k for s in sources for k in dir(compile_shader(metal_source(s))) if not k.startswith("_")}
    names -= {"source", "target", "key"}
    assert names and all(re.fullmatch(r"[a-z0-9_]+_(f32|c64)(_\d+)*", k) for k in names), names
    package = ROOT / "mpslinalg" / family  # the family's package: every module's call sites
    text = "\n".join(p.read_text() for p in sorted(package.glob("*.py")))
    called = set(re.findall(r'(?:kernel_name|_kernel)\("([a-z_0-9]+)"', text))
    assert called, f"mpslinalg/{family}/ names no kernel through kernel_name"
    for base in called:  # every dtype instantiated (with or without trailing parameters, small's n)
        for d in loader.DTYPE_TAGS:
            stem = kernel_name(base, d)
            assert any(k == stem or re.fullmatch(re.escape(stem) + r"(_\d+)+", k) for k in names), stem


def test_the_instantiation_idiom_in_the_emulator(tmp_path):
    """MPSL_INSTANTIATE (decltype form) gives callable kernels whose parameters and attributes come
    from the template: buffers, an index-map list, a thread position, a non-type parameter. The
    results are exact (one rounding of a real product or fma-free complex product of integers)."""
    require_emulator()
    from mpslinalg.emulator import compile_shader

    for h in metal_dir().glob("*.h"):
        shutil.copy(h, tmp_path / h.name)
    shutil.copy(ROOT / "tests" / "emulator" / "kernels" / "instantiate.metal", tmp_path / "instantiate.metal")
    lib = compile_shader(metal_source("instantiate", root=tmp_path))
    for dtype in (torch.float32, torch.complex64):
        x = torch.arange(8).to(dtype) + (1j if dtype.is_complex else 0)
        y = torch.ones(8, dtype=dtype)
        a = torch.tensor([2 + (3j if dtype.is_complex else 0)], dtype=dtype)
        getattr(lib, kernel_name("axpy", dtype))(x, y, a, [1, 2], threads=3, group_size=3)
        ref = torch.ones(8, dtype=dtype)
        ref[1:7:2] += a * x[1:7:2]
        assert torch.equal(y, ref)
    for dtype, p in ((torch.float32, 3), (torch.complex64, 5)):
        x = torch.arange(4).to(dtype) * (1 - 2j if dtype.is_complex else 1)
        out = torch.empty_like(x)
        getattr(lib, kernel_name("scale", dtype, p))(x, out, threads=4, group_size=4)
        assert torch.equal(out, x * p)


@pytest.mark.parametrize("path", sorted(metal_dir().iterdir()), ids=lambda p: p.name)
def test_metal_sources_are_ascii(path):
    data = path.read_bytes()
    bad = [i for i, b in enumerate(data) if b > 127]
    line = data.count(b"\n", 0, bad[0]) + 1 if bad else 0
    assert not bad, f"{path.name}: non-ASCII bytes from line {line}"


def test_loader_rejects_non_ascii(tmp_path):
    (tmp_path / "fam.metal").write_text("// caf\u00e9\nkernel void k() {}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"fam.metal:1: non-ASCII byte 0xc3"):
        metal_source("fam", root=tmp_path)


@pytest.mark.parametrize("family", FAMILIES)
def test_safe_math_pinned_in_every_family(family):
    """Every family source carries the safe-math pragmas (via scalar.h, inlined), guarded by the
    MSL version that has them (3.2), so torch's fast-math option cannot reach our kernels there."""
    src = metal_source(family)
    block = re.search(r"#if defined\(__METAL_VERSION__\) && __METAL_VERSION__ >= 320\n"
                      r"#pragma METAL fp math_mode\(safe\)\n#pragma METAL fp contract\(off\)\n#endif", src)
    assert block is not None
    first_kernel = src.index("kernel void")
    assert block.start() < first_kernel


def test_fast_math_request_warns_once(monkeypatch):
    monkeypatch.setattr(loader, "_fast_math_warned", [])
    monkeypatch.setenv("PYTORCH_MPS_FAST_MATH", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader._warn_fast_math()  # "0": torch compiles with safe math, nothing to say
    monkeypatch.setenv("PYTORCH_MPS_FAST_MATH", "1")
    with pytest.warns(RuntimeWarning, match="PYTORCH_MPS_FAST_MATH"):
        loader._warn_fast_math()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader._warn_fast_math()  # once per process


# --------------------------------------------------------------------------------------------------
# scripts/mac_smoke.py: runnable here in every part that does not need a Mac
# --------------------------------------------------------------------------------------------------


def _mac_smoke():
    import importlib.util

    spec = importlib.util.spec_from_file_location("mac_smoke", ROOT / "scripts" / "mac_smoke.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mac_smoke_skips_clearly_off_a_mac(tmp_path, capsys):
    from mpslinalg.kernels import mps_available

    if mps_available():
        pytest.skip("on a Mac the script runs for real")  # pragma: no cover
    out = tmp_path / "report.md"
    assert _mac_smoke().main(["--out", str(out), "--no-tests"]) == 0
    assert "mac_smoke: skipped - needs an Apple-silicon Mac" in capsys.readouterr().out
    assert not out.exists()


@pytest.mark.parametrize("family", FAMILIES)
def test_mac_smoke_lists_every_kernel(family):
    """The script names each family's kernels from the source (torch's library object may not list
    them): exactly the kernels the emulator instantiates."""
    require_emulator()
    from mpslinalg.emulator import compile_shader

    src = metal_source(family)
    emulated = {k for k in dir(compile_shader(src)) if not k.startswith("_")} - {"source", "target", "key"}
    assert set(_mac_smoke()._kernel_names(src)) == emulated


def test_mac_smoke_cases_pass_on_the_emulator():
    """The Mac's view / non-finite cases through the same library code on the emulator backend:
    the neg-bit and conj views, NaN pivots, a finite entry 2e38 + 2e38i, issue 14.5's solve."""
    require_emulator()
    import mpslinalg

    with mpslinalg.use_backend("emulator"):
        rows = _mac_smoke().view_and_nonfinite_cases("cpu")
    assert len(rows) == 8
    assert [r["case"] for r in rows if not r.get("ok")] == [], rows
