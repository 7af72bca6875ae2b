"""Tests for ddpcheck.results: the rank, exit and world files between workers and launcher."""

from __future__ import annotations

import json
from pathlib import Path

from ddpcheck import results
from ddpcheck.results import RankLog, exit_statuses, rank_events, read_json, read_jsonl, write_json


def events(*names: str) -> list[dict[str, object]]:
    return [{"event": n, "time": float(i)} for i, n in enumerate(names)]


def write_lines(path: Path, records: list[dict[str, object]], tail: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail, encoding="utf-8")


def test_rank_log_appends_one_json_line_per_event(tmp_path: Path) -> None:
    log = RankLog(tmp_path / "results", 3)
    first = log.write("start", rank=3, world_size=4)
    path = tmp_path / "results" / "rank-3.jsonl"
    # on disk as soon as write returns: a rank killed right after still leaves it
    assert json.loads(path.read_text()) == first
    log.write("probe", nodeid="checks/test_x.py::test_y", status="PASS")
    lines = path.read_text().splitlines()
    assert [json.loads(line)["event"] for line in lines] == ["start", "probe"]
    assert first["rank"] == 3 and isinstance(first["time"], float)
    assert [e["event"] for e in log.events] == ["start", "probe"]


def test_rank_log_appends_to_an_existing_file(tmp_path: Path) -> None:
    RankLog(tmp_path, 0).write("start")
    RankLog(tmp_path, 0).write("end")
    assert [e["event"] for e in read_jsonl(tmp_path / "rank-0.jsonl")] == ["start", "end"]


def test_rank_log_without_a_directory_keeps_events_in_memory(tmp_path: Path) -> None:
    log = RankLog(None, 0)
    log.write("start", path=tmp_path)
    assert log.path is None
    assert log.events[0]["path"] == tmp_path


def test_rank_log_writes_unserialisable_values_as_text(tmp_path: Path) -> None:
    RankLog(tmp_path, 1).write("probe", where=tmp_path / "x")
    assert read_jsonl(tmp_path / "rank-1.jsonl")[0]["where"] == str(tmp_path / "x")


def test_read_jsonl_ignores_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.jsonl"
    write_lines(path, events("start", "hello"), tail='{"event": "probe", "nod')
    assert [e["event"] for e in read_jsonl(path)] == ["start", "hello"]


def test_read_jsonl_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_jsonl(tmp_path / "rank-9.jsonl") == []


def test_read_json_of_a_missing_or_broken_file_is_none(tmp_path: Path) -> None:
    assert read_json(tmp_path / "nope.json") is None
    (tmp_path / "half.json").write_text('{"ranks": ')
    assert read_json(tmp_path / "half.json") is None


def test_rank_events_merge_world_json_with_local_rank_files(tmp_path: Path) -> None:
    write_json(results.world_file(tmp_path), {"ranks": {
        "0": events("start", "hello", "probe"),  # longer than the local file: kept
        "1": events("start"),  # shorter than the local file: replaced
        "4": events("start", "end"),  # another node's rank: no local file
    }, "missing": []})
    write_lines(tmp_path / "rank-0.jsonl", events("start"))
    write_lines(tmp_path / "rank-1.jsonl", events("start", "hello", "probe", "end"))
    write_lines(tmp_path / "rank-2.jsonl", events("start", "hello"))  # missing from world.json
    merged = rank_events(tmp_path)
    assert list(merged) == [0, 1, 2, 4]
    assert [len(merged[r]) for r in merged] == [3, 4, 2, 2]


def test_rank_events_prefer_the_local_file_when_equally_long(tmp_path: Path) -> None:
    write_json(results.world_file(tmp_path), {"ranks": {"0": [{"event": "start", "src": "w"}]}})
    write_lines(tmp_path / "rank-0.jsonl", [{"event": "start", "src": "local"}])
    assert rank_events(tmp_path) == {0: [{"event": "start", "src": "local"}]}


def test_rank_events_without_world_json_are_the_local_files(tmp_path: Path) -> None:
    write_lines(tmp_path / "rank-10.jsonl", events("start"))
    write_lines(tmp_path / "rank-2.jsonl", events("start"))
    assert list(rank_events(tmp_path)) == [2, 10]  # numeric order, not file-name order


def test_exit_statuses_by_rank_skip_unreadable_files(tmp_path: Path) -> None:
    write_json(results.exit_file(tmp_path, 0), {"rank": 0, "returncode": 0})
    write_json(results.exit_file(tmp_path, 11), {"rank": 11, "returncode": -9})
    results.exit_file(tmp_path, 1).write_text('{"rank": 1, "retu')  # torn by a crash
    assert exit_statuses(tmp_path) == {0: {"rank": 0, "returncode": 0},
                                       11: {"rank": 11, "returncode": -9}}


def test_write_json_is_atomic_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "exit-0.json"
    path.write_text("old")
    write_json(path, {"rank": 0, "dir": tmp_path})
    assert read_json(path) == {"rank": 0, "dir": str(tmp_path)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exit-0.json"]


def test_file_names() -> None:
    d = Path("/r")
    assert (results.rank_file(d, 2), results.exit_file(d, 2), results.world_file(d)) == (
        Path("/r/rank-2.jsonl"), Path("/r/exit-2.json"), Path("/r/world.json"))
