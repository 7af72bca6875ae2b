"""Never hang: a stopped rank, or ddpcheck's own per-rank process killed mid-stage (its rank
left orphaned), ends the run on every node within --probe-timeout + 15 s.

Test side only: real launchers, torchrun and workers on two namespace hosts. The killed
wrapper runs at the defaults, as users run it, and reads the default --probe-timeout (20 s)
in force on both nodes and in every rank's probe deadline. The stopped rank waits its
deadline out for real, so it is given a shorter one explicitly (8 s, as the other
multi-node fault tests): the same code path as the default, 12 s less waiting. Each test
prints the measured times.
"""

from __future__ import annotations

import json
import time

from ddpcheck.cluster import deadlines
from ddpcheck.worker.settings import DEFAULT_PROBE_TIMEOUT
from tests.cluster.hosts import start_runs

from .test_same_story import _wait_for

STAGES = ["--stages", "node,rendezvous,collectives,bandwidth,ddp"]
SHORT_PROBE_TIMEOUT = 8.0  # the stopped rank's, given explicitly (waited out for real)
SWEEP = "bandwidth_sweep"


def bound(probe_timeout: float) -> float:
    return probe_timeout + 15


def start_runs_with(cluster, tmp_path, *args: str):
    return start_runs(cluster.hosts, tmp_path, *STAGES, *args, nodes=len(cluster.hosts),
                      results=True)


def ended_after(runs, since: float) -> list[float]:
    ended = []
    for run in runs:
        run.finish(timeout=180)
        ended.append(round(time.monotonic() - since, 1))
    return ended


def run_with_fault(make_cluster, tmp_path, fault, what: str,
                   probe_timeout: float | None = None) -> list:
    """Start both nodes (at the defaults, or with ``--probe-timeout probe_timeout``), apply
    ``fault(cluster, pytest pid of a node1 rank in the sweep)``, and time each node's end
    from the fault against ``bound`` of the probe timeout in force; returns the runs."""
    cluster = make_cluster(2)
    extra = ["--probe-timeout", f"{probe_timeout:g}"] if probe_timeout is not None else []
    runs = start_runs_with(cluster, tmp_path, *extra)
    _, events = _wait_for(tmp_path / "results-node1", lambda evs: any(
        e["event"] == "probe-start" and SWEEP in e["nodeid"] for e in evs))
    fault(cluster, events[0]["pid"])
    wall = time.time()
    ended = ended_after(runs, time.monotonic())
    _timeline(tmp_path, wall)
    limit = bound(DEFAULT_PROBE_TIMEOUT if probe_timeout is None else probe_timeout)
    setting = "at the defaults" if probe_timeout is None else f"--probe-timeout {probe_timeout:g}"
    print(f"{what} {setting}: node0 ended {ended[0]} s, node1 {ended[1]} s after the "
          f"fault (bound {limit:g} s)")
    assert [r.proc.returncode for r in runs] == [1, 1], runs[0].out + runs[1].out
    assert max(ended) < limit, ended
    return runs


def test_a_stopped_rank_ends_every_node_within_its_probe_deadline(make_cluster, tmp_path):
    def stop(cluster, pid: int) -> None:
        cluster[1].exec_admin(["kill", "-STOP", str(pid)])

    runs = run_with_fault(make_cluster, tmp_path, stop, "stopped rank", SHORT_PROBE_TIMEOUT)
    for run in runs:
        first = run.report()["problems"][0]
        assert first["code"] == "rank-unresponsive" and first["hosts"] == ["node1"], run.out
    assert "is stopped" in runs[0].problem("rank-unresponsive")["observed"]


def test_a_killed_wrapper_mid_stage_ends_every_node_within_the_default_probe_deadline(
        make_cluster, tmp_path):
    def kill_wrapper(cluster, pid: int) -> None:  # the rank's pytest is left orphaned
        wrapper = cluster[1].exec_admin(["ps", "-o", "ppid=", "-p", str(pid)]).stdout.strip()
        cluster[1].exec_admin(["kill", "-9", wrapper])

    runs = run_with_fault(make_cluster, tmp_path, kill_wrapper, "killed wrapper")
    for run in runs:
        assert "rank-killed" in run.codes(), run.out
        # The default probe timeout was in force on this node (no flag, no variable set it)
        config = run.report()["config"]
        assert config["probe_timeout"] == DEFAULT_PROBE_TIMEOUT, config
        assert "probe_timeout" not in config["sources"], config["sources"]
    # ... and reached the ranks of both nodes: each deadline they recorded for the sweep is
    # the one computed from it (worker.plugin.RankSession._deadline: the probe timeout + 20 s,
    # 4 ranks, 2 nodes). Both of node0's ranks and the faulted one start the sweep; node1's
    # other rank may be ended by its torchrun just before it does.
    expected = deadlines.probe(DEFAULT_PROBE_TIMEOUT + 20, 4, 2)
    for node in ("node0", "node1"):
        recorded = [json.loads(x)["deadline"] for f in (tmp_path / f"results-{node}").glob(
            "rank-*.jsonl") for x in f.read_text().splitlines()
            if '"probe-start"' in x and SWEEP in x]
        assert recorded and set(recorded) == {expected}, (node, recorded)


def _timeline(tmp_path, wall: float) -> None:
    """Print when each rank ended, each exit was recorded and each report written (s after
    the fault): the figures of the closing note, and where the time goes when it grows."""
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
