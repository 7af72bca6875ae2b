"""A spawned world that never formed, named from the exit files of a real run (a dropped
master port on namespace hosts: tests/data/launch/master-port-dropped.json)."""

from __future__ import annotations

import json

from ddpcheck.diagnoses import RANK_EXITED, Problem
from ddpcheck.launcher.spawn.formation import replace_generic, world_not_formed
from ddpcheck.results import ExitStatus
from tests.helpers.paths import DATA

RECORDED = json.loads((DATA / "launch" / "master-port-dropped.json").read_text())["exits"]


def exits(host: str) -> dict[int, ExitStatus]:
    return {int(r): ExitStatus.from_dict(ex) for r, ex in RECORDED[host].items()}


def test_each_side_of_a_dropped_master_port_says_what_its_ranks_saw() -> None:
    rank0 = world_not_formed(exits("node0"), "node0", ("node0", 29790))
    assert rank0 is not None and rank0.code == "world-not-formed" and rank0.ranks == (0,)
    assert "rank 0 on node0 did not form the world: env:// (node0:29790) within 8 s: " \
           "Timed out after 9 seconds waiting for clients. 1/2 clients joined." == rank0.observed
    other = world_not_formed(exits("node1"), "node1", ("node0", 29790))
    assert other is not None and other.hosts == ("node1",)
    assert "timed out after 8000ms while trying to connect to (node0, 29790)" in other.observed
    assert "open TCP port 29790 on node0" in other.fix


def test_it_replaces_the_bare_exits_of_the_same_ranks_only() -> None:
    found = world_not_formed(exits("node1"), "node1", ("node0", 29790))
    assert found is not None
    bare = RANK_EXITED.problem("rank 1 exited with code 3", ranks=[1], hosts=["node1"])
    other = RANK_EXITED.problem("rank 4 exited with code 1", ranks=[4], hosts=["node1"])
    got = replace_generic([bare, other], found)
    assert [p.ranks for p in got] == [(1,), (4,)] and isinstance(got[0], Problem)
    assert got[0].code == "world-not-formed"


def test_ranks_that_formed_the_world_give_nothing() -> None:
    fine = {0: ExitStatus(finished=True, tail=("5 passed in 1.2s",))}
    assert world_not_formed(fine, "node0", ("node0", 29500)) is None
