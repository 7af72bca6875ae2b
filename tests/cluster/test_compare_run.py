"""Baselines on namespace hosts: ``compare`` names a link slowed by tc, and only that link.

Test side only. Three hosts joined by a full mesh of veth links, each a 1 Gbit/s tc token
bucket (so the network, not which host got a core, sets the figures). A baseline run, a
second healthy run (no regression), then node0 <-> node2 slowed to 300 Mbit/s: ``ddpcheck run
--baseline`` and ``ddpcheck compare`` must both report a regression naming that link, exit 1.
The same runs prove the multi-node progress lines (the rank-0 node shows the world's, the
others their own) and that the JUnit file of a real multi-node run parses. The runs are the
session's ``mesh_bandwidth_runs`` (tests/cluster/conftest.py), which test_links_run.py reads
too. The 5-pair version of the healthy check is bench/compare_proof.py.
"""

from __future__ import annotations

import re
import subprocess
import sys

from junitparser import JUnitXml


def compare(base, new) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ddpcheck", "compare", str(base), str(new)],
                          capture_output=True, text=True, timeout=60)


def test_two_healthy_runs_are_ready_and_compare_as_no_regression(mesh_bandwidth_runs):
    runs, tmp_path = mesh_bandwidth_runs, mesh_bandwidth_runs["tmp"]
    for healthy_run in (runs["base"], runs["again"]):  # no bandwidth problem, run after run
        whole = healthy_run[0][3]
        assert whole["ready"], whole["problems"]
        assert len(whole["measurements"]["link_matrix"]) == 6  # every pair, both directions
    healthy = compare(tmp_path / "base-node0.json", tmp_path / "again-node0.json")
    assert healthy.returncode == 0, healthy.stdout
    assert "NO REGRESSION" in healthy.stdout


def test_progress_lines_show_the_world_on_the_rank0_node_and_its_own_rank_elsewhere(
        mesh_bandwidth_runs):
    # The rank-0 node printed every node joining and the world's stage outcomes; another node
    # printed its own rank only.
    err0, err1 = mesh_bandwidth_runs["again"][0][2], mesh_bandwidth_runs["again"][1][2]
    for node in ("node0", "node1", "node2"):
        assert f"node {node} joined" in err0, err0
    assert "bandwidth    PASS     3/3 ranks" in err0, err0
    assert "bandwidth    PASS     1/1 ranks" in err1 and "node node0 joined" not in err1, err1


def test_baseline_and_compare_name_the_slowed_link_and_only_it(mesh_bandwidth_runs):
    tmp_path = mesh_bandwidth_runs["tmp"]
    code, stdout, _, report = mesh_bandwidth_runs["slow"][0]
    assert code == 1, stdout
    regressions = [p for p in report["problems"] if p["code"] == "regression"]
    placed = [p for p in regressions if p["hosts"]]  # those naming a link or a node
    assert len(placed) == 1 and placed[0]["hosts"] == ["node0", "node2"], regressions
    named = re.findall(r"link (\S+ -> \S+):", placed[0]["observed"])
    assert named == ["node0 -> node2", "node2 -> node0"], placed[0]["observed"]

    result = compare(tmp_path / "base-node0.json", tmp_path / "slow-node0.json")
    assert result.returncode == 1, result.stdout
    assert "link node0 -> node2" in result.stdout and "link node0 -> node1" not in [
        line.split("  ")[0] for line in result.stdout.splitlines() if "REGRESSION" in line]


def test_the_junit_file_of_a_multinode_run_has_every_hosts_bandwidth_cases(mesh_bandwidth_runs):
    report = mesh_bandwidth_runs["slow"][0][3]
    suites = {s.name: s for s in JUnitXml.fromfile(str(mesh_bandwidth_runs["tmp"] / "slow.xml"))}
    assert suites["verdict"].failures == 1
    # per host, one testcase per probe of the bandwidth stage (rank 0 judges the world-sized
    # figures: a host it names gets an "outcome" case too, failed)
    probes = {p["name"] for s in report["stages"] if s["name"] == "bandwidth"
              for p in s["probes"]}
    cases = {case.name for case in suites["bandwidth"]}
    assert len(report["hosts"]) == 3 and len(probes) >= 4
    for rank, host in sorted(report["hosts"].items()):
        label = f"[rank {rank} ({host})]"
        assert {n for n in cases if n.endswith(label) and not n.startswith("outcome")} \
            == {f"{name} {label}" for name in probes}, cases
