"""Every node tells the same story, in time: faults of a rank or of ddpcheck's own processes
on one node reach every node's verdict (a stopped rank ending the run everywhere within
--probe-timeout + 15 s is tests/cluster/test_deadlines.py's).

Test side only: real launchers, torchrun and workers on namespace hosts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .test_multinode_run import finish_all, start


def _rank_events(results: Path) -> dict[int, list[dict]]:
    out = {}
    for path in sorted(results.glob("rank-*.jsonl")):
        out[int(path.stem.split("-")[1])] = [json.loads(x) for x in
                                              path.read_text().splitlines() if x.strip()]
    return out


def _wait_for(results: Path, check, timeout: float = 150) -> tuple[int, list[dict]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for rank, events in _rank_events(results).items():
            if check(events):
                return rank, events
        time.sleep(0.05)
    raise AssertionError(f"nothing in {results} matched")


def test_a_killed_ddpcheck_worker_on_node1_makes_every_node_not_ready(make_cluster, tmp_path):
    """ddpcheck's own per-rank process dies after its rank finished: the probes all passed,
    but node1's torchrun failed. No node may say READY."""
    cluster = make_cluster(2)
    runs = start(cluster, tmp_path, "--stages", "node,rendezvous,collectives")
    rank, events = _wait_for(tmp_path / "results-node1",
                             lambda evs: any(e["event"] == "end" for e in evs))
    pytest_pid = events[0]["pid"]
    wrapper = cluster[1].exec_admin(["ps", "-o", "ppid=", "-p", str(pytest_pid)]).stdout.strip()
    cluster[1].exec_admin(["kill", "-9", wrapper])
    assert finish_all(runs) == [1, 1], runs[0].out + runs[1].out
    for run in runs:
        codes = [p["code"] for p in run.report()["problems"]]
        assert "rank-killed" in codes, run.out
        assert not run.report()["ready"]
        assert "READY: " not in run.out.replace("NOT READY: ", "")
