"""``ddpcheck run --launch spawn`` on namespace hosts: each node's launcher starts its own
ranks as mp.spawn does, the world forms through env:// or file://, and every launch fault
(rank layout, master address and port, the init file) is named on every node before any
rank starts.

Test side only: each host runs the real launcher, which starts real per-rank wrappers and
pytest workers. The fault runs stop before any rank starts, so they take seconds.
"""

from __future__ import annotations

import subprocess
import time

from tests.cluster.hosts import HostRun, finish_all, start_runs

SPAWN = ["--launch", "spawn", "--rdzv-timeout", "15", "--probe-timeout", "8", "--timeout", "90"]


def spawn(cluster, tmp_path, *args, per_host=None, env=None, wrap=None) -> list[HostRun]:
    """Start ``ddpcheck run --launch spawn`` on every host, host i with --node-rank i."""
    return start_runs(cluster.hosts, tmp_path, *SPAWN, *args, endpoint=None, node_ranks=True,
                      results=True, env=env, per_host_args=per_host, wrap=wrap)


def master(port: int) -> dict[str, str]:
    return {"MASTER_ADDR": "node0", "MASTER_PORT": str(port)}


UNEVEN = {"node0": ["--nproc-per-node", "2"], "node1": ["--nproc-per-node", "1"]}


def test_spawn_with_two_ranks_and_one_rank_per_node_is_ready(make_cluster, tmp_path):
    # tcp:// here; env:// forms its world READY in the Slurm spawn job (test_slurm_jobs.py)
    cluster = make_cluster(2)
    runs = spawn(cluster, tmp_path, "--rank-offsets", "0,2", "--world-size", "3",
                 "--init-method", "tcp://node0:29710", "--stages", "rendezvous,collectives",
                 per_host=UNEVEN)
    assert finish_all(runs) == [0, 0], runs[0].out + runs[1].out
    whole = runs[0].report()
    assert whole["ready"] and whole["world_size"] == 3
    assert {int(r): h for r, h in whole["hosts"].items()} == {0: "node0", 1: "node0",
                                                              2: "node1"}


def test_file_init_on_a_shared_directory_is_ready_and_leaves_no_file(make_cluster, tmp_path):
    cluster = make_cluster(2)
    shared = tmp_path / "shared"
    shared.mkdir()
    runs = spawn(cluster, tmp_path, "--init-method", f"file://{shared}/init",
                 "--rdzv-endpoint", "node0:29720", "--nproc-per-node", "1",
                 "--stages", "rendezvous")
    assert finish_all(runs) == [0, 0], runs[0].out + runs[1].out
    assert runs[0].report()["world_size"] == 2
    assert sorted(p.name for p in shared.iterdir()) == []  # token and ranks' file removed


def test_a_stale_init_file_and_a_directory_not_shared_are_named_on_every_node(
        make_cluster, tmp_path):
    cluster = make_cluster(2)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "init").write_bytes(b"\x00" * 64)  # left by an earlier run that was killed
    # node1 mounts a tmpfs of its own over the directory: node-local storage at that path.
    local = ["unshare", "-m", "sh", "-c", f'mount -t tmpfs tmpfs {shared} && exec "$@"', "sh"]
    began = time.monotonic()
    runs = spawn(cluster, tmp_path, "--init-method", f"file://{shared}/init",
                 "--rdzv-endpoint", "node0:29730", "--nproc-per-node", "1",
                 wrap={"node1": lambda argv: [*local, *argv]})
    assert finish_all(runs) == [1, 1], runs[0].out + runs[1].out
    assert time.monotonic() - began < 30
    for run in runs:
        stale = run.problem("init-file-stale")
        assert stale["hosts"] == ["node0"] and f"rm {shared}/init" in stale["fix"]
        unshared = run.problem("init-file-not-shared")
        assert unshared["hosts"] == ["node1"] and str(shared) in unshared["observed"]
    assert not list(runs[0].report()["stages"][1:]) or all(
        s["status"] == "BLOCKED" for s in runs[0].report()["stages"][1:])


def test_an_unresolvable_master_and_overlapping_ranks_are_named_on_every_node(
        make_cluster, tmp_path):
    cluster = make_cluster(2)
    # rank = node_rank * nproc + local_rank with 2 and 1 ranks: node0 0-1, node1 1
    runs = spawn(cluster, tmp_path, "--rdzv-endpoint", "node0:29740", per_host=UNEVEN,
                 env={"MASTER_ADDR": "nosuchhost.invalid", "MASTER_PORT": "29741"})
    assert finish_all(runs) == [1, 1], runs[0].out + runs[1].out
    for run in runs:
        codes = run.codes()
        unresolved = [p for p in run.report()["problems"]
                      if p["code"] == "master-addr-unresolvable"]
        assert {h for p in unresolved for h in p["hosts"]} == {"node0", "node1"}
        overlap = run.problem("rank-overlap")
        assert overlap["ranks"] == [1] and "node0 (ranks 0-1)" in overlap["observed"]
        assert "--rank-offsets 0,2 --world-size 3" in overlap["fix"]
        assert "world-size-differs" in codes


def test_a_taken_master_port_and_a_missing_rank_are_named_on_every_node(make_cluster,
                                                                       tmp_path):
    cluster = make_cluster(2)
    squatter = cluster[0].popen_python(
        "import socket,time; s=socket.socket(); s.bind(('0.0.0.0', 29750)); s.listen(); "
        "print('up', flush=True); time.sleep(120)", stdout=subprocess.PIPE, text=True)
    assert squatter.stdout.readline().strip() == "up"
    runs = spawn(cluster, tmp_path, "--rank-offsets", "0,3", "--world-size", "4",
                 per_host=UNEVEN, env=master(29750))
    assert finish_all(runs) == [1, 1], runs[0].out + runs[1].out
    for run in runs:
        taken = run.problem("master-port-in-use")
        assert taken["hosts"] == ["node0"] and str(squatter.pid) in taken["observed"]
        assert run.problem("rank-missing")["ranks"] == [2]


def test_a_tcp_init_method_on_a_node_without_rank_0_is_named_within_seconds(make_cluster,
                                                                          tmp_path):
    cluster = make_cluster(2)
    began = time.monotonic()
    # rank 0 starts on node0 and serves port 29760 there; every rank connects to node1:29760
    runs = spawn(cluster, tmp_path, "--init-method", "tcp://node1:29760",
                 "--nproc-per-node", "1")
    assert finish_all(runs) == [1, 1], runs[0].out + runs[1].out
    assert time.monotonic() - began < 30
    for run in runs:
        wrong = [p for p in run.report()["problems"] if p["code"] == "master-addr-not-rank0-node"]
        assert {h for p in wrong for h in p["hosts"]} == {"node0", "node1"}


def test_a_loopback_master_on_two_nodes_is_named_on_every_node(make_cluster, tmp_path):
    cluster = make_cluster(2)
    runs = spawn(cluster, tmp_path, "--nproc-per-node", "1", "--rdzv-endpoint", "node0:29770",
                 env={"MASTER_ADDR": "localhost", "MASTER_PORT": "29771"})
    assert finish_all(runs) == [1, 1], runs[0].out + runs[1].out
    for run in runs:
        loop = [p for p in run.report()["problems"] if p["code"] == "master-addr-loopback"]
        assert {h for p in loop for h in p["hosts"]} == {"node0", "node1"}
