"""Fresh Flight Recorder dumps from real gloo worlds, explained: a desync and a missing rank.

The two worlds are independent and spend most of their time waiting out their collective
timeouts, so the module makes both at once (nothing here measures time).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ddpcheck.launcher.cli import main
from tests.helpers.frworld import make_dumps


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each scenario's dump directory, both worlds run concurrently."""
    tmp = tmp_path_factory.mktemp("flightrec")
    with ThreadPoolExecutor(2) as pool:
        made = {s: pool.submit(make_dumps, s, tmp) for s in ("desync", "missing")}
    return {s: f.result() for s, f in made.items()}


def _explain(path, capsys) -> dict:
    assert main(["explain", str(path), "--json", "-"]) == 1
    return json.loads(capsys.readouterr().out)


def test_a_rank_that_skips_a_collective_is_a_desync_at_that_sequence_number(dumps, capsys):
    out = dumps["desync"]
    assert sorted(p.name for p in out.iterdir()) == ["fr_trace_0", "fr_trace_1"]
    (first, *_) = _explain(out, capsys)["problems"]
    assert first["code"] == "collective-desync"
    assert "collective #3" in first["observed"]
    assert "rank 0 ran all_reduce" in first["observed"]
    assert "rank 1 ran broadcast" in first["observed"]


def test_a_rank_that_never_arrives_and_one_that_died_are_named(dumps, capsys):
    out = dumps["missing"]
    assert sorted(p.name for p in out.iterdir()) == ["fr_trace_0", "fr_trace_2"]
    data = _explain(out, capsys)
    (first, *_) = data["problems"]
    assert first["code"] == "rank-never-joined"
    assert first["ranks"] == [1, 2]
    assert "rank 0 waited in collective #3 (all_reduce" in first["observed"]
    assert "rank 2 never joined it: its last collective was #2" in first["observed"]
    assert "rank 1 left no dump" in first["observed"]
    assert "rank 0: #3 all_reduce" in data["notes"][0]
