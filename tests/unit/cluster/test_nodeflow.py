"""Tests for cluster.nodeflow's peer step: two nodes through one in-process store, real
listeners and probes on loopback, real lookups; and a node whose host verdict is lost."""

from __future__ import annotations

import time

import torch.distributed as dist

from ddpcheck.cluster import nodeflow as flow
from ddpcheck.cluster.board import CheckinDecision
from ddpcheck.cluster.checkin import NodeCard
from ddpcheck.cluster.nodeflow import ClusterState
from ddpcheck.cluster.peerprobe import Listener


def state(store: object, host: str, fqdn: str, is_host: bool) -> ClusterState:
    st = ClusterState(store=store, is_host=is_host, advertised="127.0.0.1")
    st.listener = Listener("127.0.0.1")
    st.me = NodeCard(host, 2, "job", 1, 1, advertised="127.0.0.1",
                     probe_port=st.listener.port, addresses={"lo": ["127.0.0.1"]},
                     fqdn=fqdn, launch="--launch torchrun", mtus={"lo": 65536})
    return st


def test_every_node_resolves_the_names_and_moves_payloads_before_the_verdict() -> None:
    store = dist.HashStore()
    a = state(store, "a", "localhost", True)
    b = state(store, "b", "no-such-host.invalid", False)
    try:
        for st in (a, b):
            flow.post_card(st)
        flow.decide_check_in(a, time.monotonic() + 5, ())
        flow.receive_check_in(b, 5)
        assert b.decision is not None and b.decision.names == {
            "a": "localhost", "b": "no-such-host.invalid"}
        assert flow.probe_peers_step(a) and flow.probe_peers_step(b)
        flow.decide_peers(a, 29500)
        flow.receive_peers(b)
    finally:
        a.close()
        b.close()
    for st in (a, b):
        got = {p.code: p for p in st.problems}
        # b's name resolves nowhere: its own node is named, with the resolver's answer
        assert got["advertised-name-unresolvable"].hosts == ("b",)
        assert "2 of 2 nodes" in got["advertised-name-unresolvable"].observed
        # b resolves a's name to loopback: b's entry is wrong for another node
        assert got["dial-name-wrong-address"].hosts == ("b",)
        assert "large-frames-dropped" not in got and "peer-data-stalled" not in got
    bulk = a.peers["a"]["b"]["bulk"]
    assert bulk["outcome"] == "ok" and bulk["largest_ok"] == 2 << 20
    assert a.figures["names_resolved"] == 2


def test_a_node_whose_verdict_is_lost_still_names_its_own_stalled_payloads() -> None:
    st = ClusterState(store=dist.HashStore(), advertised="10.0.0.2")
    st.me = NodeCard("b", 2, "job", 1, 1, advertised="10.0.0.2", addresses={"eth0": ["10.0.0.2"]},
                     mtus={"eth0": 9000})
    st.decision = CheckinDecision([], [("a", "10.0.0.1", 1), ("b", "10.0.0.2", 2)], "a")
    st.peers = {"b": {"a": {"outcome": "ok", "bulk": {
        "outcome": "stalled", "largest_ok": 1024, "failed_size": 65536, "sent": 65536,
        "received": 0, "elapsed": 4.0, "dev": "eth0", "mtu": 9000}}}}
    flow.receive_peers(st, wait=0.2)
    assert [p.code for p in st.problems] == ["large-frames-dropped", "rendezvous-store-lost"]
    assert "b (eth0, MTU 9000) -> a" in st.problems[0].observed
    assert "larger than the path passes" in st.problems[1].observed
