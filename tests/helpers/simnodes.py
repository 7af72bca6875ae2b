"""Simulated nodes driving the real check-in and peer-probe verdict code through one store.

Test and bench side only. Each simulated node runs ddpcheck.cluster.nodeflow's own steps (card,
verdict, peer results, peer verdict, settle), phase by phase in one thread, against a
shared :class:`counting_store.CountingStore`, so the operation counts are those of the
real protocol. Only the TCP connects of the peer probes are simulated (``refusing`` names a node
every connect to which times out), so 1,024 nodes fit in one process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from unittest import mock

import torch.distributed as dist

from ddpcheck.cluster import nodeflow as flow
from ddpcheck.cluster import peerprobe
from ddpcheck.cluster.checkin import NodeCard
from ddpcheck.cluster.nodeflow import ClusterState
from tests.helpers.counting_store import CountingStore


@dataclass
class SimResult:
    store: CountingStore
    states: list[ClusterState]
    seconds: float

    def ops_per_node(self) -> tuple[float, int, int]:
        """(mean, max over non-host nodes, the host's) store operations."""
        per = self.store.per_client()
        others = [v for k, v in per.items() if k != "node0000"]
        return sum(per.values()) / len(per), max(others, default=0), per.get("node0000", 0)


def simulate(n: int, refusing: str | None = None, rdzv_timeout: float = 60.0) -> SimResult:
    """Run the real check-in of n simulated nodes (node0000 hosts the store), phase by phase.

    Every node posts its card; the host decides; every other node receives the verdict;
    every node probes (connects simulated) and posts; the host decides; the others receive;
    all settle. Each step is ddpcheck.cluster.nodeflow's own, in the order a real node runs it.
    """
    store = CountingStore(dist.HashStore())
    states = [_state(store, i, n) for i in range(n)]
    host, others = states[0], states[1:]

    def fake_probe(me: tuple[str, str, int], targets: list[tuple[str, str, int]],
                   timeout: float = 3.0) -> dict[str, dict[str, Any]]:
        return {h: {"address": f"{a}:{p}", "outcome": "timeout" if h == refusing else "ok",
                    "elapsed": 0.001, "error": ""} for h, a, p in targets}

    start = time.monotonic()
    with mock.patch.object(peerprobe, "probe_peers", fake_probe):
        for st in states:
            flow.post_card(st)
        flow.decide_check_in(host, time.monotonic() + rdzv_timeout, ())
        for st in others:
            flow.receive_check_in(st, rdzv_timeout)
        members = [st for st in states if not st.problems and flow.probe_peers_step(st)]
        if host in members:
            flow.decide_peers(host, 29500)
        for st in members:
            if st is not host:
                flow.receive_peers(st)
        for st in others + [host]:
            flow.settle(st)
    return SimResult(store, states, time.monotonic() - start)


def _state(store: CountingStore, i: int, n: int) -> ClusterState:
    host = f"node{i:04d}"
    addr = f"10.{i // 250}.{i % 250}.1"
    st = ClusterState(store=store.client(host), is_host=i == 0, advertised=addr)
    st.me = NodeCard(host, n, "sim", 8, 1000 + i, None, st.advertised, 40000,
                     {"eth0": [st.advertised]}, ())
    return st
