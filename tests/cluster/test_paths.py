"""What the user's workers need of the network beyond a connect, on namespace hosts: the name
they dial resolves on every node, and large payloads cross the path (jumbo frames on the
hosts, a 1500-byte switch). Each fault is named before torchrun starts, on every node, in
seconds, with the node, the name or the interfaces and MTUs, and the fix.

Test side only: real launchers on namespace hosts; the faults are one hosts-file line, and
MTU 9000 inside both hosts with the bridge side left at 1500 (offloads off, so the large
frames really are frames: veth passes GSO packets whatever their size). And the case that
must stay READY: two hosts with different MTUs on a switch that passes the larger.
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from .hosts import start_runs
from .netns import ETC_NETNS
from .test_multinode_run import FEW_STAGES

# A rendezvous deadline that a loaded test machine's start-up spread cannot miss: neither
# fault waits for it (both are found once every node has joined).
ARGS = ["--rdzv-timeout", "30", "--probe-timeout", "8", "--timeout", "120", *FEW_STAGES]
VERDICT_WITHIN = 60.0  # seconds, start to exit on every node, start-up included (measured:
# 5 s for the name and 11-15 s for the MTU fault on an idle machine; the bound leaves room
# for a loaded one)


def _timed(runs, began: float) -> list[tuple[int, float]]:
    """(exit code, seconds from start to exit) of every host's run (output read after)."""
    ended: dict[int, float] = {}
    while len(ended) < len(runs) and time.monotonic() - began < 150:
        for i, run in enumerate(runs):
            if i not in ended and run.proc.poll() is not None:
                ended[i] = round(time.monotonic() - began, 1)
        time.sleep(0.05)
    return [(run.finish(10), ended.get(i, -1.0)) for i, run in enumerate(runs)]


def _no_rank_ran(tmp_path, runs) -> bool:
    return not any(list((tmp_path / f"results-{r.host.name}").glob("rank-*.jsonl")) for r in runs)


def test_a_node_that_cannot_resolve_rank0s_name_is_named_on_every_node(make_cluster, tmp_path):
    cluster = make_cluster(2)
    hosts = ETC_NETNS / cluster[1].ns / "hosts"
    text = "".join(line for line in hosts.read_text().splitlines(keepends=True)
                   if not line.rstrip().endswith("\tnode0"))
    with open(hosts, "w") as fh:  # in place: the namespace's bind mount sees it
        fh.write(text)
    # The endpoint by address (node1 can join), as a job script with $MASTER_IP does: the
    # name that fails is the one torchrun's rank-0 agent would advertise, node0's FQDN.
    began = time.monotonic()
    runs = start_runs(cluster.hosts, tmp_path, *ARGS, results=True,
                      endpoint=cluster[0].addr)
    timed = _timed(runs, began)
    assert [c for c, _ in timed] == [1, 1], runs[0].out + runs[1].out
    assert max(t for _, t in timed) < VERDICT_WITHIN, timed
    for run in runs:
        problem = run.problem("dial-name-unresolvable")
        assert problem["hosts"] == ["node1"], run.out
        assert "'node0'" in problem["observed"] and "on node1" in problem["observed"]
        # The resolver's own answer (here no DNS server: EAI_AGAIN, -3; with one: -2).
        assert "does not resolve ([Errno -" in problem["observed"], problem
        assert f"{cluster[0].addr} node0" in problem["fix"] and "/etc/hosts" in problem["fix"]
        assert "--local-addr" in problem["fix"]
        assert run.report()["ready"] is False
    assert _no_rank_ran(tmp_path, runs)
    print(f"\nname fault: exit code, seconds to verdict per node: {timed}\n{runs[1].out}")


def test_jumbo_hosts_behind_a_1500_byte_switch_are_named_as_an_mtu_path(make_cluster, tmp_path):
    if not shutil.which("ethtool"):
        pytest.skip("ethtool is not installed (.ci/run installs it)")
    cluster = make_cluster(2)
    for host in cluster:
        host.exec_admin(["ethtool", "-K", "eth0", "tso", "off", "gso", "off", "gro", "off"])
        host.exec_admin(["ip", "link", "set", "dev", "eth0", "mtu", "9000"])
    # The switch: the bridge and its veth ends stay at 1500 and drop larger frames.
    began = time.monotonic()
    runs = start_runs(cluster.hosts, tmp_path, *ARGS, results=True)
    timed = _timed(runs, began)
    assert [c for c, _ in timed] == [1, 1], runs[0].out + runs[1].out
    assert max(t for _, t in timed) < VERDICT_WITHIN, timed
    for run in runs:
        assert "collective-failed" not in run.codes() and "rank-killed" not in run.codes()
        problem = run.problem("large-frames-dropped")
        assert problem["hosts"] == ["node0", "node1"], run.out
        observed = problem["observed"]
        assert "node0 (eth0, MTU 9000)" in observed and "node1 (eth0, MTU 9000)" in observed
        assert "1 KiB went both ways" in observed and "stalled" in observed
        assert "Every node's cluster interface has MTU 9000" in observed
        assert "on node0: ip link set dev eth0 mtu 1500" in problem["fix"]
        assert "on node1: ip link set dev eth0 mtu 1500" in problem["fix"]
    assert _no_rank_ran(tmp_path, runs)
    print(f"\nMTU fault: exit code, seconds to verdict per node: {timed}\n{runs[1].out}")


def test_a_spawn_master_name_that_resolves_elsewhere_on_node1_is_named(make_cluster, tmp_path):
    # --launch spawn: every rank dials MASTER_ADDR. node1's hosts file sends "node0" to an
    # address nobody has; the check-in endpoint is given by address, so node1 still joins.
    cluster = make_cluster(2)
    hosts = ETC_NETNS / cluster[1].ns / "hosts"
    wrong = cluster[0].addr.rsplit(".", 1)[0] + ".250"
    text = hosts.read_text().replace(f"{cluster[0].addr}\tnode0", f"{wrong}\tnode0")
    with open(hosts, "w") as fh:
        fh.write(text)
    began = time.monotonic()
    runs = start_runs(cluster.hosts, tmp_path, "--launch", "spawn", *ARGS, results=True,
                      endpoint=cluster[0].addr, port=29751, node_ranks=True,
                      env={"MASTER_ADDR": "node0", "MASTER_PORT": "29750"})
    timed = _timed(runs, began)
    assert [c for c, _ in timed] == [1, 1], runs[0].out + runs[1].out
    for run in runs:
        problem = run.problem("dial-name-wrong-address")
        assert problem["hosts"] == ["node1"], run.out
        assert f"'node0' its ranks dial to reach node0 resolves to {wrong}" in problem["observed"]
        assert f"on node1: add `{cluster[0].addr} node0`" in problem["fix"]
    assert _no_rank_ran(tmp_path, runs)
    print(f"\nspawn master fault: exit code, seconds to verdict per node: {timed}")


def test_hosts_with_different_mtus_on_a_jumbo_switch_are_ready(make_cluster, tmp_path):
    # TCP agrees on the smaller segment size in the handshake: nothing is dropped, so the
    # payloads cross and the MTU difference alone is no reason for NOT READY.
    if not shutil.which("ethtool"):
        pytest.skip("ethtool is not installed (.ci/run installs it)")
    cluster = make_cluster(2)
    for dev in ("h0e0", "h1e0", "br0"):
        subprocess.run(["ip", "-n", cluster.bridge_ns, "link", "set", "dev", dev, "mtu", "9000"],
                       check=True)
    for host, mtu in ((cluster[0], "9000"), (cluster[1], "1500")):
        host.exec_admin(["ethtool", "-K", "eth0", "tso", "off", "gso", "off", "gro", "off"])
        host.exec_admin(["ip", "link", "set", "dev", "eth0", "mtu", mtu])
    runs = start_runs(cluster.hosts, tmp_path, "--stages", "preflight", "--rdzv-timeout", "30",
                      results=True)
    for run in runs:
        assert run.finish(150) == 0, run.out
        assert run.report()["network"]["exchanges_in"] == 1, run.out
