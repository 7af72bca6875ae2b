"""Tests for ddpcheck.report.plots: PNGs from recorded measurements, and the no-matplotlib path."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ddpcheck.judgements.links import scaling_table
from ddpcheck.report.plots import (
    BUSBW_PNG,
    INSTALL_HINT,
    SCALING_PNG,
    PlotsUnavailable,
    matplotlib_available,
    write_plots,
)
from tests.helpers.paths import DATA

DATA = DATA / "links"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

needs_matplotlib = pytest.mark.skipif(
    not matplotlib_available(), reason="matplotlib is not installed (pip install 'ddpcheck[plot]')")


def measurements() -> dict:
    sweep = json.loads((DATA / "allreduce_sweep_gloo_2ranks.json").read_text())
    scaling = json.loads((DATA / "ddp_scaling.json").read_text())["rows"]
    return {"allreduce_sweep": sweep["allreduce_sweep"], "world_size": sweep["world_size"],
            "backend": sweep["backend"], "ddp_scaling": scaling_table(scaling)}


def assert_png(path: Path) -> None:
    assert path.is_file()
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 1000


@needs_matplotlib
def test_write_plots_writes_both_pngs(tmp_path):
    out = tmp_path / "plots" / "nested"
    paths = write_plots(measurements(), out)
    assert [p.name for p in paths] == [BUSBW_PNG, SCALING_PNG]
    for p in paths:
        assert p.parent == out
        assert_png(p)


@needs_matplotlib
def test_write_plots_accepts_scaling_rows_without_efficiency(tmp_path):
    rows = json.loads((DATA / "ddp_scaling.json").read_text())["rows"]
    [path] = write_plots({"ddp_scaling": rows}, tmp_path)
    assert path.name == SCALING_PNG
    assert_png(path)


@needs_matplotlib
def test_write_plots_writes_only_what_was_measured(tmp_path):
    assert write_plots({}, tmp_path) == []
    assert write_plots({"allreduce_sweep": [], "ddp_scaling": []}, tmp_path) == []
    [path] = write_plots({"allreduce_sweep": measurements()["allreduce_sweep"]}, tmp_path)
    assert path.name == BUSBW_PNG
    assert_png(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [BUSBW_PNG]


@needs_matplotlib
def test_write_plots_does_not_switch_the_pyplot_backend(tmp_path):
    import matplotlib

    before = matplotlib.get_backend()
    write_plots(measurements(), tmp_path)
    assert matplotlib.get_backend() == before


def test_plots_unavailable_without_matplotlib(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert matplotlib_available() is False
    with pytest.raises(PlotsUnavailable) as info:
        write_plots(measurements(), tmp_path / "plots")
    assert str(info.value) == INSTALL_HINT
    assert str(info.value) == "matplotlib is not installed: pip install 'ddpcheck[plot]'"
    assert not (tmp_path / "plots").exists()


def test_plots_unavailable_is_a_runtime_error():
    assert issubclass(PlotsUnavailable, RuntimeError)


@needs_matplotlib
def test_compare_plots_draw_baseline_and_now_for_the_sweep_and_the_links(tmp_path):
    from ddpcheck.report.plots import BASELINE_BUSBW_PNG, BASELINE_LINKS_PNG, compare_plots

    base = {**measurements(), "link_matrix": {"a->b": 0.12, "b->a": 0.12}}
    now = {**measurements(), "link_matrix": {"a->b": 0.04, "b->a": 0.12}}
    paths = compare_plots(base, now, tmp_path)
    assert [p.name for p in paths] == [BASELINE_BUSBW_PNG, BASELINE_LINKS_PNG]
    for p in paths:
        assert_png(p)
    assert compare_plots({}, now, tmp_path / "none") == []
