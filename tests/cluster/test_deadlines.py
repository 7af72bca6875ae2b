"""Never hang, at the defaults: a stopped rank, or ddpcheck's own per-rank process killed
mid-stage (its rank left orphaned), ends the run on every node within --probe-timeout + 15 s.

Test side only: real launchers, torchrun and workers on two namespace hosts, with the default
--probe-timeout (20 s), as users run it. Each test prints the measured times.
"""

from __future__ import annotations

import time

from ddpcheck.worker.settings import DEFAULT_PROBE_TIMEOUT
from tests.cluster.hosts import start_runs

from .test_same_story import _wait_for

STAGES = ["--stages", "node,rendezvous,collectives,bandwidth,ddp"]
BOUND = DEFAULT_PROBE_TIMEOUT + 15


def start_default(cluster, tmp_path):
    return start_runs(cluster.hosts, tmp_path, *STAGES, nodes=len(cluster.hosts), results=True)


def ended_after(runs, since: float) -> list[float]:
    ended = []
    for run in runs:
        run.finish(timeout=180)
        ended.append(round(time.monotonic() - since, 1))
    return ended


def run_with_fault(make_cluster, tmp_path, fault, what: str) -> list:
    """Start both nodes at the defaults, apply ``fault(cluster, pytest pid of a node1 rank in
    the sweep)``, and time each node's end from the fault; returns the runs."""
    cluster = make_cluster(2)
    runs = start_default(cluster, tmp_path)
    _, events = _wait_for(tmp_path / "results-node1", lambda evs: any(
        e["event"] == "probe-start" and "bandwidth_sweep" in e["nodeid"] for e in evs))
    fault(cluster, events[0]["pid"])
    wall = time.time()
    ended = ended_after(runs, time.monotonic())
    _timeline(tmp_path, wall)
    print(f"{what} at the defaults: node0 ended {ended[0]} s, node1 {ended[1]} s after the "
          f"fault (bound {BOUND:g} s)")
    assert [r.proc.returncode for r in runs] == [1, 1], runs[0].out + runs[1].out
    assert max(ended) < BOUND, ended
    return runs


def test_a_stopped_rank_ends_every_node_within_the_default_probe_deadline(make_cluster,
                                                                         tmp_path):
    def stop(cluster, pid: int) -> None:
        cluster[1].exec_admin(["kill", "-STOP", str(pid)])

    runs = run_with_fault(make_cluster, tmp_path, stop, "stopped rank")
    for run in runs:
        first = run.report()["problems"][0]
        assert first["code"] == "rank-unresponsive" and first["hosts"] == ["node1"], run.out
    assert "is stopped" in runs[0].problem("rank-unresponsive")["observed"]


def test_a_killed_wrapper_mid_stage_ends_every_node_within_the_default_probe_deadline(
        make_cluster, tmp_path):
    def kill_wrapper(cluster, pid: int) -> None:  # the rank's pytest is left orphaned
        wrapper = cluster[1].exec_admin(["ps", "-o", "ppid=", "-p", str(pid)]).stdout.strip()
        cluster[1].exec_admin(["kill", "-9", wrapper])

    for run in run_with_fault(make_cluster, tmp_path, kill_wrapper, "killed wrapper"):
        assert "rank-killed" in run.codes(), run.out


def _timeline(tmp_path, wall: float) -> None:
    """Print when each rank ended, each exit was recorded and each report written (s after
    the fault): the figures of the closing note, and where the time goes when it grows."""
    import json

    for f in sorted(tmp_path.glob("results-*/rank-*.jsonl")):
        evs = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
        ends = [round(e["time"] - wall, 1) for e in evs if e["event"] == "end"]
        print(f"  {f.parent.name}/{f.name}: end at {ends or 'never'}")
    for f in sorted(tmp_path.glob("results-*/exit-*.json")):
        x = json.loads(f.read_text())
        print(f"  {f.parent.name}/{f.name}: {x['signal_name'] or x['returncode']}, "
              f"finished={x['finished']}, at {x['time'] - wall:.1f}")
    for f in sorted(tmp_path.glob("*.json")):
        print(f"  {f.name} written at {f.stat().st_mtime - wall:.1f}")
