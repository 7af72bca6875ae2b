"""Tests for ddpcheck.worker.recorder: what a probe records for the report."""

from __future__ import annotations

import json

from ddpcheck.worker.recorder import Recorder


def test_a_fresh_recorder_is_empty() -> None:
    rec = Recorder()
    assert (rec.figure, rec.measurements) == ("", {})


def test_key_figure_is_the_last_one_set() -> None:
    rec = Recorder()
    rec.key_figure("0.50 GB/s busbw")
    rec.key_figure("1.02 GB/s busbw")
    assert rec.figure == "1.02 GB/s busbw"


def test_measurements_are_kept_by_name_and_serialise() -> None:
    rec = Recorder()
    rec.measure("peak_busbw_gbps", 1.02)
    rec.measure("allreduce_sweep", [{"bytes": 4096, "busbw": 0.1}])
    rec.measure("peak_busbw_gbps", 1.5)
    assert rec.measurements == {"peak_busbw_gbps": 1.5,
                                "allreduce_sweep": [{"bytes": 4096, "busbw": 0.1}]}
    assert json.loads(json.dumps(rec.measurements)) == rec.measurements


def test_recorders_do_not_share_measurements() -> None:
    a, b = Recorder(), Recorder()
    a.measure("x", 1)
    assert b.measurements == {}
