"""The Metal source loader: header inlining, include rules, per-process caching, compiler injection."""

import pytest
import torch

from mpslinalg.kernels import load_library, loader, metal_dir, metal_source, set_compiler


def test_metal_dir_is_the_checkouts_or_wheels():
    d = metal_dir()
    assert (d / "complex.h").is_file()


def test_inlines_our_headers_once_with_line_markers(tmp_path):
    (tmp_path / "a.h").write_text('#include "b.h"\ninline float fa() { return fb(); }\n')
    (tmp_path / "b.h").write_text("inline float fb() { return 1.0f; }\n")
    (tmp_path / "fam.metal").write_text(
        '#include <metal_stdlib>\n#include "a.h"\n#include "b.h"\nkernel void k() {}\n'
    )
    src = metal_source("fam", root=tmp_path)
    assert src.count("inline float fb()") == 1  # b.h inlined once although included twice
    assert src.index("inline float fb()") < src.index("inline float fa()")
    assert "#include <metal_stdlib>" in src
    assert '#include "' not in src
    assert '#line 1 "a.h"' in src and '#line 4 "fam.metal"' in src


@pytest.mark.parametrize("bad", ["#include <c10/metal/utils.h>", "#include <cmath>"])
def test_rejects_foreign_includes(tmp_path, bad):
    (tmp_path / "fam.metal").write_text(bad + "\nkernel void k() {}\n")
    with pytest.raises(ValueError, match="only <metal_stdlib>"):
        metal_source("fam", root=tmp_path)


def test_missing_header_and_family(tmp_path):
    (tmp_path / "fam.metal").write_text('#include "nope.h"\n')
    with pytest.raises(FileNotFoundError, match="nope.h"):
        metal_source("fam", root=tmp_path)
    with pytest.raises(FileNotFoundError, match="no Metal source 'other'"):
        metal_source("other", root=tmp_path)


def test_compiles_once_per_process_and_device_type(monkeypatch, tmp_path):
    (tmp_path / "fam.metal").write_text("kernel void k() {}\n")
    monkeypatch.setattr(loader, "metal_dir", lambda: tmp_path)
    calls = []

    def fake_compiler(source):
        calls.append(source)
        return object()

    previous = set_compiler("cpu", fake_compiler)
    try:
        lib1 = load_library("fam", torch.device("cpu"))
        lib2 = load_library("fam", "cpu")
        assert lib1 is lib2
        assert len(calls) == 1 and "kernel void k()" in calls[0]
    finally:
        set_compiler("cpu", previous)


def test_mps_compiler_unavailable_here():
    from mpslinalg.kernels import BackendUnavailableError, mps_available

    if mps_available():
        pytest.skip("this machine has an Apple GPU; the error path is for machines without one")
    with pytest.raises(BackendUnavailableError, match="Apple GPU"):
        loader._mps_compiler("kernel void k() {}")
