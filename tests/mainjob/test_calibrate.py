"""``python -m mpslinalg calibrate`` (issue 36): an injected clock gives the expected table, the
front doors and ``enable(when="faster")`` follow a loaded table, a stale or corrupt cache is
ignored with one warning. No test asserts a measured speed: every duration is the fake clock's."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from helpers import FakeClock

import mpslinalg
from mpslinalg import routing
from mpslinalg.mainjob import calibrate, main
from mpslinalg.oplayer import calibrated, family
from mpslinalg.oplayer import table as T

F32 = torch.float32


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    """Every test's cache is its own directory (never the real home); the table is re-resolved."""
    monkeypatch.setenv("MPSLINALG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MPSLINALG_ROUTING_TABLE", raising=False)
    T.forget()
    yield
    T.forget()


def _cells(clock: FakeClock, speed: dict) -> list[calibrate.Cell]:
    """Cells of ``inv_ex`` float32 whose ours/torch take the fake durations ``speed[(n, batch)]``."""
    def make(ours_s, torch_s):
        return lambda: (clock.work(ours_s), clock.work(torch_s), None)

    return [calibrate.Cell("inv_ex", F32, n, b, make(o, t)) for (n, b), (o, t) in speed.items()]


# ours 2x faster at n = 4 from batch 64 up and at n = 8 from 64; torch 2x faster at n = 32; n = 16
# the same speed (inconclusive: the shipped decision, torch, stays)
SPEED = {(4, 1): (2e-3, 1e-3), (4, 64): (1e-3, 2e-3), (4, 1024): (1e-3, 2e-3),
         (8, 1): (2e-3, 1e-3), (8, 64): (1e-3, 2e-3), (8, 1024): (1e-3, 2e-3),
         (16, 1): (1e-3, 1e-3), (16, 64): (1e-3, 1e-3), (16, 1024): (1e-3, 1e-3),
         (32, 1): (2e-3, 1e-3), (32, 64): (2e-3, 1e-3), (32, 1024): (2e-3, 1e-3)}


def test_injected_clock_gives_the_expected_table(monkeypatch):
    clock = FakeClock(tick=1e-7).install(monkeypatch)
    rows = calibrate.measure(_cells(clock, SPEED), torch.device("cpu"), quick=True, budget=1e6, progress=False)
    verdicts = {(r["n"], r["batch"]): r["verdict"] for r in rows}
    assert verdicts[(4, 64)] == verdicts[(8, 1024)] == "faster"
    assert verdicts[(4, 1)] == verdicts[(32, 64)] == "slower"
    assert verdicts[(16, 64)] == "inconclusive"
    shipped = {"inv_ex": {F32: ((2, 2, 1), (64, 100, 8))}}  # below and above the grid: kept, clipped
    table = calibrate.build_table(rows, shipped)
    # n 4..15 from batch 64 (8 takes the sizes up to 15); 16 inconclusive: shipped (torch); 32 torch
    assert table == {"inv_ex": {F32: ((2, 2, 1), (4, 15, 64), (64, 100, 8))}}
    lines = calibrate.changes(rows, shipped)
    assert len(lines) == 4 and all("torch.linalg -> mpslinalg" in x for x in lines)


def test_budget_skips_cells_and_keeps_the_shipped_decision(monkeypatch):
    clock = FakeClock(tick=1e-7).install(monkeypatch)
    rows = calibrate.measure(_cells(clock, SPEED), torch.device("cpu"), quick=True, budget=0.1, progress=False)
    assert rows[0]["verdict"] != "skipped" and rows[-1]["verdict"] == "skipped"
    shipped = {"inv_ex": {F32: ((32, 32, 1),)}}
    assert calibrate.build_table([r for r in rows if r["n"] == 32], shipped) == {"inv_ex": {F32: ((32, 32, 1),)}}


def test_cli_writes_the_cache_and_the_decisions_follow_it(monkeypatch, routing_table, capsys):
    clock = FakeClock(tick=1e-7).install(monkeypatch)
    assert calibrate.main(["--device", "cpu", "--quick"], cells_for=lambda d, q: _cells(clock, SPEED)) == 0
    out = capsys.readouterr().out
    assert "changed against the shipped default" in out and "inv_ex" in out
    assert list((calibrated.cache_dir()).glob("routing-cpu-*.json"))
    t = routing.table("cpu")
    assert t["source"].startswith("calibrated ") and t["ops"]["inv_ex"][F32][-1] == (4, 15, 64)
    routing.reset_decisions()
    mpslinalg.inv_ex(torch.eye(4).expand(64, 4, 4))  # inside the calibrated region
    mpslinalg.inv_ex(torch.eye(4).expand(8, 4, 4))  # below its batch
    assert routing.decisions()["inv_ex"] == {"ours": 1, "torch": 1}
    with routing.enabled(devices="cpu", ops=("inv_ex",)):
        routing.reset_stats()
        torch.linalg.inv_ex(torch.eye(8).expand(64, 8, 8))
        torch.linalg.inv_ex(torch.eye(32).expand(64, 32, 32))
        assert routing.stats()["inv_ex"]["ours"] == 1 and routing.stats()["inv_ex"]["torch"] == 1


def test_export_and_the_environment_variable(tmp_path, monkeypatch, routing_table):
    here = {"inv_ex": {F32: ((3, 3, 2),)}}
    calibrated.save("cpu", here)
    T.forget()
    path = tmp_path / "attached.json"
    assert main(["calibrate", "--device", "cpu", "--export", str(path)]) == 0  # python -m mpslinalg calibrate
    doc = json.loads(path.read_text())
    assert doc["table"]["inv_ex"] == {"float32": [[3, 3, 2]]} and doc["source"].startswith("calibrated")
    doc["table"]["inv_ex"] = {"float32": [[5, 5, 1]]}
    doc["key"]["device_name"] = "someone else's machine"  # a file is used whatever it was measured on
    path.write_text(json.dumps(doc))
    monkeypatch.setenv("MPSLINALG_ROUTING_TABLE", str(path))
    T.forget()
    assert routing.table("cpu")["source"].startswith(f"file {path}")
    routing.reset_decisions()
    mpslinalg.inv_ex(torch.eye(5))
    assert routing.decisions()["inv_ex"] == {"ours": 1, "torch": 0}


@pytest.mark.parametrize("damage", ["stale", "corrupt", "not a table"])
def test_a_stale_or_corrupt_cache_is_ignored_with_one_warning(damage, routing_table):
    path = calibrated.save("cpu", {"inv_ex": {F32: ((2, 4, 1),)}})
    if damage == "stale":
        doc = json.loads(path.read_text())
        doc["key"]["torch"] = "1.0.0"
        path.write_text(json.dumps(doc))
    elif damage == "corrupt":
        path.write_text(path.read_text()[:40])
    else:
        path.write_text(json.dumps({"format": calibrated.FORMAT, "key": {}, "table": {"inv_ex": {"int8": []}}}))
    T.forget()
    with pytest.warns(RuntimeWarning, match="stale" if damage == "stale" else "ignored") as record:
        routing.reset_decisions()
        mpslinalg.inv_ex(torch.eye(3))
        mpslinalg.inv_ex(torch.eye(3))
    assert len([w for w in record if "mpslinalg" in str(w.message)]) == 1
    assert routing.table("cpu")["source"] == "shipped default"
    assert routing.decisions()["inv_ex"] == {"ours": 0, "torch": 2}  # the shipped table: torch at 3x3 x1


def test_threads_are_restored_and_checked(monkeypatch):
    clock = FakeClock(tick=1e-7).install(monkeypatch)
    before = torch.get_num_threads()
    assert calibrate.main(["--device", "cpu", "--threads", "0"]) == 2
    one = {(4, 1): (1e-3, 2e-3)}
    assert calibrate.main(["--device", "cpu", "--quick"], cells_for=lambda d, q: _cells(clock, one)) == 0
    assert torch.get_num_threads() == before


def test_cache_location(monkeypatch, tmp_path):
    monkeypatch.delenv("MPSLINALG_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert calibrated.cache_dir() == tmp_path / "xdg" / "mpslinalg"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert calibrated.cache_dir() == tmp_path / "home" / ".cache" / "mpslinalg"
    k = calibrated.key("cpu")
    assert set(k) == set(calibrated.KEY_FIELDS) and k["mpslinalg"] == mpslinalg.__version__
    assert calibrated.cache_path(k).name.startswith("routing-cpu-")


def test_every_route_has_a_grid_and_its_cells_run():
    from mpslinalg.registry import families

    fams = families()
    ops = {r.name for f in fams for r in f.routes}
    assert {op for f in fams for op in family.grids(f)} == ops
    # one small cell of each routed op: the declared inputs fit both calls (no timing)
    for cell in calibrate.cells(fams, torch.device("cpu"), quick=True):
        if cell.n == 4 and cell.batch == 1:
            ours, peer, cpu_path = cell.make()
            ours(), peer()
            assert cpu_path is None
    with pytest.raises(ValueError, match="none of its routes"):
        family.Family(name="_t", order=99, ops=("a",), grid={"a": family.Grid()})


def test_shipped_mps_default_routes_only_where_apples_timings_do_not_matter():
    mps = T.SHIPPED["mps"]
    assert mps["qr"][F32] == T.EVERY_SIZE and mps["ldl_factor_ex"][F32] == T.EVERY_SIZE
    assert mps["inv_ex"][F32] == ((1, 4, 0),) and mps["inv_ex"][torch.complex64] == T.EVERY_SIZE
    assert F32 not in mps["lu_factor_ex"] and F32 not in mps["solve_triangular"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert T.in_force("mps") == {**mps}
