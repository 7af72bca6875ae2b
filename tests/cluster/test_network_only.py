"""``ddpcheck run --stages preflight`` on namespace hosts: check-in and peer probes only.

Test side only: each host runs the real launcher; no torchrun may start. A healthy cluster
exits 0 on every host; a host that rejects every incoming connection but the rendezvous
port is named, alone, on every host.
"""

from __future__ import annotations

from tests.cluster.hosts import PORT, start_runs


def run_all(cluster, tmp_path) -> list[tuple[int, dict, str]]:
    runs = start_runs(cluster.hosts, tmp_path, "--stages", "preflight", "--rdzv-timeout", "40",
                      "--timeout", "100", results=True)
    out = []
    for run in runs:
        code = run.finish(timeout=150)
        assert run.has_report(), run.out
        assert run.results_dir is not None
        assert not (run.results_dir / "torchrun.log").exists(), "network-only mode started torchrun"
        out.append((code, run.report(), run.out))
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
