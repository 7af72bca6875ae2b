"""Tests for ddpcheck.results: the rank, exit and world files between workers and launcher."""

from __future__ import annotations

import json
from pathlib import Path

from ddpcheck import results
from ddpcheck.diagnoses import RANK_UNRESPONSIVE
from ddpcheck.results import (
    ExitStatus,
    RankLog,
    exit_statuses,
    rank_events,
    read_json,
    read_jsonl,
    write_json,
)
from tests.helpers.paths import DATA


def events(*names: str) -> list[dict[str, object]]:
    return [{"event": n, "time": float(i)} for i, n in enumerate(names)]


def write_lines(path: Path, records: list[dict[str, object]], tail: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail, encoding="utf-8")


def test_rank_log_appends_one_json_line_per_event(tmp_path: Path) -> None:
    log = RankLog(tmp_path / "results", 3)
    first = log.write(results.Start(rank=3, world_size=4))
    path = tmp_path / "results" / "rank-3.jsonl"
    # on disk as soon as write returns: a rank killed right after still leaves it
    assert json.loads(path.read_text()) == results.to_record(first)
    log.write(results.Probe(nodeid="checks/test_x.py::test_y", status="PASS"))
    lines = path.read_text().splitlines()
    assert [json.loads(line)["event"] for line in lines] == ["start", "probe"]
    assert first.rank == 3 and isinstance(first.time, float) and first.time > 0
    assert [type(e) for e in log.events] == [results.Start, results.Probe]
    assert log.records() == [json.loads(line) for line in lines]


def test_rank_log_appends_to_an_existing_file(tmp_path: Path) -> None:
    RankLog(tmp_path, 0).write(results.Start())
    RankLog(tmp_path, 0).write(results.End())
    assert [e["event"] for e in read_jsonl(tmp_path / "rank-0.jsonl")] == ["start", "end"]


def test_rank_log_without_a_directory_keeps_events_in_memory() -> None:
    log = RankLog(None, 0)
    log.write(results.End(blocked_by="node"))
    assert log.path is None
    assert log.events[0] == results.End(time=log.events[0].time, blocked_by="node")


def test_rank_log_writes_unserialisable_values_as_text(tmp_path: Path) -> None:
    RankLog(tmp_path, 1).write(results.Probe(measurements={"where": tmp_path / "x"}))
    assert read_jsonl(tmp_path / "rank-1.jsonl")[0]["measurements"] == {
        "where": str(tmp_path / "x")}


def test_every_kind_reads_back_as_written() -> None:
    problem = RANK_UNRESPONSIVE.problem("rank 1 did not finish", ranks=[1], stage="ddp")
    written = [
        results.Start(time=1.0, rank=1, world_size=2, backend="gloo", host="vm", local_rank=1,
                      node_rank=0, pid=42),
        results.Hello(time=2.0, ranks={0: {"host": "vm"}, 1: {"host": "vm"}}, missing=(3,),
                      coordinator="vm"),
        results.ProbeStart(time=3.0, nodeid="c/t.py::test_a", stage="ddp", deadline=40.0),
        results.Probe(time=4.0, nodeid="c/t.py::test_a", name="test_a", stage="ddp",
                      doc=("Trains.",), status="FAIL", agreed="FAIL", duration=0.5,
                      message="m", figure="1 GB/s", measurements={"k": [1, 2]},
                      problems=(problem,)),
        results.Problems(time=5.0, stage="rendezvous", problems=(problem,)),
        results.End(time=6.0, blocked_by="ddp"),
    ]
    lines = [json.loads(json.dumps(results.to_record(e))) for e in written]  # as on disk
    assert results.parse_events(lines) == written


def test_unknown_kinds_and_fields_are_skipped_and_missing_fields_default() -> None:
    got = results.parse_events([{"event": "from-the-future", "time": 1.0},
                                {"event": "start", "host": "vm", "new_field": 1},
                                {"event": "probe", "figure": None, "stage": None}, "torn"])
    assert got == [results.Start(host="vm"), results.Probe()]


def test_recorded_rank_files_read_as_typed_events() -> None:
    events = rank_events(DATA / "runs" / "healthy-2ranks")
    assert list(events) == [0, 1]
    first = events[0][0]
    assert isinstance(first, results.Start) and first.rank == 0 and first.host
    assert isinstance(events[0][-1], results.End)
    probes = [e for e in events[1] if isinstance(e, results.Probe)]
    assert probes and all(p.status in ("PASS", "SKIP") for p in probes)


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
    write_json(results.world_file(tmp_path), {"ranks": {"0": [{"event": "start", "host": "w"}]}})
    write_lines(tmp_path / "rank-0.jsonl", [{"event": "start", "host": "local"}])
    assert rank_events(tmp_path) == {0: [results.Start(host="local")]}


def test_rank_events_without_world_json_are_the_local_files(tmp_path: Path) -> None:
    write_lines(tmp_path / "rank-10.jsonl", events("start"))
    write_lines(tmp_path / "rank-2.jsonl", events("start"))
    assert list(rank_events(tmp_path)) == [2, 10]  # numeric order, not file-name order


def test_exit_statuses_by_rank_skip_unreadable_files(tmp_path: Path) -> None:
    write_json(results.exit_file(tmp_path, 0), {"rank": 0, "returncode": 0})
    write_json(results.exit_file(tmp_path, 11), {"rank": 11, "returncode": -9})
    results.exit_file(tmp_path, 1).write_text('{"rank": 1, "retu')  # torn by a crash
    assert exit_statuses(tmp_path) == {0: ExitStatus(rank=0, returncode=0),
                                       11: ExitStatus(rank=11, returncode=-9)}


def test_an_exit_status_reads_back_as_the_wrapper_wrote_it(tmp_path: Path) -> None:
    status = ExitStatus(rank=2, pid=77, returncode=-9, signal=9, signal_name="SIGKILL",
                        finished=False, session_error="", tail=("a", "b"), time=5.0)
    results.write_exit(tmp_path, status)
    on_disk = read_json(results.exit_file(tmp_path, 2))
    assert on_disk["tail"] == ["a", "b"] and on_disk["signal_name"] == "SIGKILL"
    assert exit_statuses(tmp_path) == {2: status}


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


def test_status_carries_its_order_and_is_its_text() -> None:
    from ddpcheck.results import Status

    assert [s.order for s in (Status.SKIP, Status.PASS, Status.BLOCKED, Status.FAIL)] == \
        [0, 1, 2, 3]
    assert Status.worst(["PASS", "SKIP", "BLOCKED"]) is Status.BLOCKED
    assert Status.worst(["PASS", "something else"]) is Status.NO_RESULT
    assert Status.NOT_RUN == "-" and f"{Status.NO_RESULT}" == "NO RESULT"
    assert json.loads(json.dumps({"s": Status.FAIL})) == {"s": "FAIL"}
    assert {"-": 1}[Status.NOT_RUN] == 1


def test_a_probe_reads_back_with_typed_status_and_blocked_by() -> None:
    from ddpcheck.results import Probe, Status, parse_event, to_record

    probe = Probe(name="t", stage="ddp", status="BLOCKED", blocked_by="collectives")
    back = parse_event(json.loads(json.dumps(to_record(probe))))
    assert isinstance(back, Probe) and back.status is Status.BLOCKED
    assert back.blocked_by == "collectives"


def test_a_session_failure_round_trips_through_its_file(tmp_path: Path) -> None:
    from ddpcheck.results import SessionFailure, read_failure, write_failure

    assert read_failure(tmp_path, 3) == SessionFailure()  # none written: nothing to say
    write_failure(tmp_path, 3, SessionFailure(world_connect="env:// (n0:1) within 8 s: x"))
    assert read_failure(tmp_path, 3).world_connect == "env:// (n0:1) within 8 s: x"
