"""``ddpcheck run --nodes N`` on namespace hosts: a healthy cluster passes, and every
rendezvous or network fault ends with exit 1, the right problem code and host, in seconds.

Test side only: each host runs the real launcher, real torchrun and real pytest workers.
"""

from __future__ import annotations

import json
import subprocess
import time

from tests.cluster.hosts import PORT, HostRun, finish_all, start_runs

FAST = ["--rdzv-timeout", "8", "--probe-timeout", "8", "--timeout", "120"]
FEW_STAGES = ["--stages", "node,rendezvous,collectives"]


def start(cluster, tmp_path, *args, hosts=None, env=None, per_host_env=None) -> list[HostRun]:
    """Start ``ddpcheck run`` on each host (node0 hosts the endpoint)."""
    return start_runs(cluster.hosts if hosts is None else hosts, tmp_path, *FAST, *args,
                      nodes=len(cluster.hosts), results=True, env=env, per_host_env=per_host_env)


def wait_for_listener(host, port: int, timeout: float = 60) -> None:
    """Wait until something listens on ``port`` in ``host`` (a launcher hosting the store)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = host.run(["ss", "-Hltn", f"sport = :{port}"]).stdout
        if out.strip():
            return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on {host.name}:{port} after {timeout} s")


def test_healthy_two_node_cluster_is_ready(make_cluster, tmp_path):
    cluster = make_cluster(2)
    runs = start(cluster, tmp_path, "--stages", "node,rendezvous,collectives,bandwidth,ddp")
    assert finish_all(runs) == [0, 0], runs[0].out + runs[1].out
    whole = runs[0].report()
    assert whole["ready"] and whole["world_size"] == 4
    assert set(whole["hosts"].values()) == {"node0", "node1"}
    m = whole["measurements"]
    assert set(m["intra_node_busbw"]) == {"node0", "node1"} and m["cross_node_busbw"] > 0
    assert set(m["link_matrix"]) == {"node0->node1", "node1->node0"}
    assert "whole report is printed on the node hosting rank 0 (node0)" in runs[1].out


def test_dropped_endpoint_port_is_named_in_seconds(make_cluster, tmp_path):
    cluster = make_cluster(2)
    cluster[0].drop_port(PORT)
    began = time.monotonic()
    runs = start(cluster, tmp_path)
    assert runs[1].finish() == 1
    assert time.monotonic() - began < 15
    problem = runs[1].problem("endpoint-unreachable")
    assert "timed out" in problem["observed"] and problem["hosts"] == ["node1"]
    assert f"open TCP port {PORT}" in problem["fix"]
    assert runs[0].finish() == 1
    assert runs[0].codes() == ["node-missing"]


def test_node_that_never_starts_is_named_by_hostname(make_cluster, tmp_path):
    cluster = make_cluster(3)
    # the environment of `srun --ntasks-per-node=1` in a 3-node allocation
    slurm = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "node[0-2]", "SLURM_NNODES": "3",
             "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "node[0-2]", "SLURM_NTASKS": "3",
             "SLURM_STEP_NUM_NODES": "3", "SLURM_STEP_TASKS_PER_NODE": "1(x3)"}
    per_host = {h.name: {"SLURM_NODEID": str(i), "SLURMD_NODENAME": h.name}
                for i, h in enumerate(cluster.hosts)}
    began = time.monotonic()
    runs = start(cluster, tmp_path, hosts=cluster.hosts[:2], env=slurm, per_host_env=per_host)
    assert finish_all(runs) == [1, 1]
    assert time.monotonic() - began < 8 + 15
    for run in runs:
        problem = run.problem("node-missing")
        assert problem["hosts"] == ["node2"]
        assert "2 of 3 nodes joined" in problem["observed"]


def test_gloo_interface_missing_on_one_node_is_named_on_every_node(make_cluster, tmp_path):
    cluster = make_cluster(2)
    runs = start(cluster, tmp_path, per_host_env={"node1": {"GLOO_SOCKET_IFNAME": "eth9"}})
    assert finish_all(runs) == [1, 1]
    for run in runs:
        problem = run.problem("socket-ifname-invalid")
        assert problem["hosts"] == ["node1"] and "eth9" in problem["observed"]
        assert "GLOO_SOCKET_IFNAME=eth0" in problem["fix"]


def test_gloo_interface_without_route_to_the_others_is_named(make_cluster, tmp_path):
    cluster = make_cluster(2, dummy=[1])
    runs = start(cluster, tmp_path, per_host_env={"node1": {"GLOO_SOCKET_IFNAME": "dummy0"}})
    assert finish_all(runs) == [1, 1]
    codes = runs[1].codes()
    assert "socket-ifname-unreachable" in codes, runs[1].out
    assert runs[1].problem("socket-ifname-unreachable")["hosts"] == ["node1"]


def test_firewall_that_only_lets_the_rendezvous_port_through_is_named(make_cluster, tmp_path):
    cluster = make_cluster(2)
    for h in cluster.hosts:
        h.drop_all_tcp_except([PORT])
    began = time.monotonic()
    runs = start(cluster, tmp_path)
    assert finish_all(runs) == [1, 1]
    assert time.monotonic() - began < 30
    problem = runs[0].problem("peer-ports-blocked")
    assert str(PORT) in problem["observed"]


def test_nodes_started_with_different_node_counts_are_named(make_cluster, tmp_path):
    cluster = make_cluster(2)
    runs = start(cluster, tmp_path)
    runs[1].proc.kill()
    runs[1].proc.communicate()
    [other] = start_runs([cluster[1]], tmp_path, *FAST, nodes=3, tag="three")
    assert other.finish() == 1, other.out
    assert runs[0].finish() == 1
    assert "nodes-mismatch" in runs[0].codes()
    assert "nodes-mismatch" in other.codes()


def test_nodes_started_with_different_run_ids_are_named(make_cluster, tmp_path):
    cluster = make_cluster(2)
    runs = start(cluster, tmp_path, per_host_env={"node1": {"DDPCHECK_RDZV_ID": "other"}})
    assert finish_all(runs) == [1, 1]
    for run in runs:
        problem = run.problem("run-id-mismatch")
        assert "'other'" in problem["observed"] and "'ddpcheck'" in problem["observed"]


def test_two_launchers_on_one_node_are_named(make_cluster, tmp_path):
    cluster = make_cluster(2)
    # The first waits for node1 long enough to still host the store when the second starts
    # (the default 8 s of FAST could run out on a loaded machine before the second binds).
    first = start(cluster, tmp_path, "--rdzv-timeout", "60", hosts=cluster.hosts[:1])[0]
    wait_for_listener(cluster.hosts[0], PORT)  # the first one hosts the rendezvous store
    (tmp_path / "again").mkdir()
    second = start(cluster, tmp_path / "again", hosts=cluster.hosts[:1])[0]
    assert second.finish() == 1
    problem = second.problem("two-launchers-on-node")
    assert problem["hosts"] == ["node0"] and "ddpcheck" in problem["observed"]
    first.proc.terminate()  # still waiting for node1: Ctrl-C-like end, with its own report
    assert first.finish() != 0


def test_port_held_by_another_program_is_named_with_its_holder(make_cluster, tmp_path):
    cluster = make_cluster(2)
    squatter = cluster[0].popen_python(
        "import socket,time; s=socket.socket(); "
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
        f"s.bind(('0.0.0.0', {PORT})); s.listen(); print('up', flush=True); time.sleep(300)",
        stdout=subprocess.PIPE, text=True)
    assert squatter.stdout.readline().strip() == "up"
    runs = start(cluster, tmp_path)
    assert finish_all(runs) == [1, 1]
    held = runs[0].problem("endpoint-port-in-use")
    assert str(squatter.pid) in held["observed"] and held["hosts"] == ["node0"]
    assert "endpoint-not-a-store" in runs[1].codes()


def test_rank_killed_mid_stage_on_one_node_is_in_the_whole_report(make_cluster, tmp_path):
    cluster = make_cluster(2)
    # No bandwidth stage: the kill is in ddp, and a healthy two-node run through bandwidth is
    # test_healthy_two_node_cluster_is_ready's (its measurements are not read here).
    runs = start(cluster, tmp_path, "--stages", "node,rendezvous,collectives,ddp")
    pid = _wait_for_probe(tmp_path / "results-node1", "test_ddp_steps_match")
    cluster[1].exec_admin(["kill", "-9", str(pid)])
    assert finish_all(runs) == [1, 1]
    for run in runs:
        killed = run.problem("rank-killed")
        assert "SIGKILL" in killed["observed"] and killed["hosts"] == ["node1"]


def _wait_for_probe(results_dir, probe, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in sorted(results_dir.glob("rank-*.jsonl")):
            events = [json.loads(line) for line in path.read_text().splitlines() if line]
            if any(e["event"] == "probe-start" and probe in e["nodeid"] for e in events):
                return events[0]["pid"]
        time.sleep(0.05)
    raise AssertionError(f"no rank in {results_dir} started {probe}")

