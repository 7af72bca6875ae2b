"""Progress lines from rank files, replayed line by line from recorded real runs."""

from __future__ import annotations

import io
import json
from pathlib import Path

from ddpcheck.launcher.progress import CLEAR, Progress
from tests.helpers.paths import DATA

RUNS = DATA / "runs"


def recorded(run: str) -> dict[int, list[str]]:
    return {int(p.stem.split("-")[1]): p.read_text().splitlines(keepends=True)
            for p in sorted((RUNS / run).glob("rank-*.jsonl"))}


class Clock:
    def __init__(self) -> None:
        self.now = 1_795_000_000.0

    def __call__(self) -> float:
        return self.now


def replay(tmp_path: Path, run: str, live: bool = False, ranks: tuple[int, ...] | None = None,
           after_each=None) -> tuple[str, Progress]:
    """Write every recorded line in time order, ticking after each; return the output."""
    lines = recorded(run)
    ranks = ranks if ranks is not None else tuple(lines)
    merged = sorted((json.loads(line)["time"], r, line) for r in ranks for line in lines[r])
    out, clock = io.StringIO(), Clock()
    prog = Progress(tmp_path, out=out, live=live, clock=clock)
    for when, rank, line in merged:
        clock.now = when
        with open(tmp_path / f"rank-{rank}.jsonl", "a") as fh:
            fh.write(line)
        prog.tick()
        if after_each:
            after_each(json.loads(line), rank, out.getvalue())
    prog.close()
    return out.getvalue(), prog


def test_plain_lines_one_per_node_joining_and_per_stage_outcome(tmp_path):
    text, _ = replay(tmp_path, "healthy-2ranks")
    lines = [line.split("ddpcheck: ", 1)[1] for line in text.splitlines()]
    assert lines[0] == "node vm joined: ranks 0-1 (2 of 2 ranks in)"
    stages = [line.split()[:3] for line in lines[1:]]
    assert stages == [["node", "PASS", "2/2"], ["rendezvous", "PASS", "2/2"],
                      ["collectives", "PASS", "2/2"], ["bandwidth", "PASS", "2/2"],
                      ["ddp", "PASS", "2/2"], ["placement", "PASS", "2/2"],
                      ["checkpoint", "SKIP", "2/2"]]
    assert all(line.startswith("[") and "] ddpcheck: " in line for line in text.splitlines())
    assert "\r" not in text  # a log file never gets carriage returns


def test_a_stage_line_comes_when_the_stage_ends_not_before(tmp_path):
    seen: list[tuple[str, str]] = []

    def check(event, rank, output):
        if event["event"] == "probe-start" and rank == 0:
            seen.append((event["stage"], output))

    replay(tmp_path, "healthy-2ranks", after_each=check)
    first_ddp = next(out for stage, out in seen if stage == "ddp")
    assert "bandwidth    PASS" in first_ddp and "ddp          PASS" not in first_ddp


def test_failures_name_their_codes_and_blocked_stages_say_so(tmp_path):
    text, _ = replay(tmp_path, "below-expected-2ranks")
    band = next(line for line in text.splitlines() if "bandwidth" in line)
    assert "FAIL" in band and "below-expected-bandwidth" in band
    assert any("ddp" in line and "BLOCKED" in line for line in text.splitlines())


def test_live_line_shows_the_running_stage_and_is_replaced_by_its_outcome(tmp_path):
    text, _ = replay(tmp_path, "healthy-2ranks", live=True)
    assert CLEAR + "bandwidth    running  0/2 ranks" in text
    assert CLEAR + "bandwidth    PASS     2/2 ranks" in text
    assert text.endswith("s\n")  # no live line left over when the report comes


def test_a_node_without_rank_0_shows_its_own_ranks_only(tmp_path):
    text, prog = replay(tmp_path, "healthy-2ranks", ranks=(1,))
    assert not prog.world_scope
    assert "node vm joined: ranks 1 (" in text
    assert "bandwidth    PASS     1/1 ranks" in text


def test_half_written_line_waits_for_the_next_tick(tmp_path):
    line = recorded("healthy-2ranks")[0][0]
    out = io.StringIO()
    prog = Progress(tmp_path, out=out, live=False)
    path = tmp_path / "rank-0.jsonl"
    path.write_text(line[:20])
    prog.tick()
    assert prog.world_size == 0
    with open(path, "a") as fh:
        fh.write(line[20:])
    prog.tick()
    assert prog.world_size == 2

