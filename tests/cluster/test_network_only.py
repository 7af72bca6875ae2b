"""``ddpcheck run --stages preflight`` on namespace hosts: check-in and peer probes only.

Test side only: each host runs the real launcher; no torchrun may start. A healthy cluster
exits 0 on every host; a host that rejects every incoming connection but the rendezvous
port is named, alone, on every host.
"""

from __future__ import annotations

import json
import subprocess
import sys

PORT = 29500


def run_all(cluster, tmp_path) -> list[tuple[int, dict, str]]:
    procs = []
    for h in cluster.hosts:
        js, res = tmp_path / f"{h.name}.json", tmp_path / f"res-{h.name}"
        argv = [sys.executable, "-m", "ddpcheck", "run", "--nodes", str(len(cluster.hosts)),
                "--stages", "preflight", "--rdzv-endpoint", f"node0:{PORT}", "--rdzv-timeout",
                "40", "--timeout", "100", "--json", str(js), "--results-dir", str(res)]
        procs.append((h.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True), js, res))
    out = []
    for proc, js, res in procs:
        text, _ = proc.communicate(timeout=150)
        assert js.exists(), text
        assert not (res / "torchrun.log").exists(), "network-only mode started torchrun"
        out.append((proc.returncode, json.loads(js.read_text()), text))
    return out


def test_network_only_mode_on_a_healthy_cluster_is_ready_without_torchrun(make_cluster,
                                                                           tmp_path):
    cluster = make_cluster(3)
    for code, report, text in run_all(cluster, tmp_path):
        assert code == 0 and report["ready"], text
        assert report["network"]["connections_out"] == 2
        assert "network-only mode (--stages preflight): 3 nodes checked in" in text


def test_a_host_refusing_every_incoming_connection_is_named_alone(make_cluster, tmp_path):
    cluster = make_cluster(3)
    cluster[2].iptables("-A", "INPUT", "!", "-i", "lo", "-p", "tcp", "--syn", "!", "--dport",
                        str(PORT), "-j", "REJECT", "--reject-with", "tcp-reset")
    for code, report, text in run_all(cluster, tmp_path):
        assert code == 1, text
        named = [(p["code"], p["hosts"]) for p in report["problems"]]
        assert named == [("peer-ports-blocked", ["node2"])], text
