"""Node-to-node reachability beyond the rendezvous port, before torchrun starts.

Runs in the launcher of a multi-node run, after check-in. torchrun's workers do not only use
the rendezvous port: the rank-0 node's agent hosts the workers' store on a random port, and
gloo/NCCL open connections between every pair of nodes on ephemeral ports. So each node
listens on an ephemeral port at the address it advertises, every node connects to every
other, and a firewall that lets only the rendezvous port through is named in seconds
(torchrun would spend minutes in SYN retries). Also catches advertised addresses that peers
cannot use: loopback, or the same address on two hosts (docker0's 172.17.0.1).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ddpcheck.checkin import NodeCard
from ddpcheck.diagnoses import Problem, register
from ddpcheck.netprobe import is_loopback, tcp_connect

CONNECT_TIMEOUT = 3.0


PEER_PORTS_BLOCKED = register(
    "peer-ports-blocked", "nodes cannot open connections to each other beyond the rendezvous "
    "port", "a firewall lets only the rendezvous port through; the workers' store (a random "
    "port on the rank-0 node) and gloo/NCCL connections (ephemeral ports) are dropped",
    "allow TCP between the job's nodes on all ports (or at least the ephemeral range, "
    "net.ipv4.ip_local_port_range), e.g. iptables -A INPUT -s <cluster subnet> -j ACCEPT")
PEER_UNREACHABLE = register(
    "peer-unreachable", "a node's advertised address cannot be reached from another node",
    "the interface ddpcheck/gloo/NCCL picked is on a network the other node does not reach",
    "set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME on every node to the interface of the "
    "network the nodes share")
ADDRESS_UNUSABLE = register(
    "address-unusable", "a node advertises an address peers cannot use",
    "the interface is loopback, or a bridge such as docker0 whose address repeats on every node",
    "set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME to the interface of the network the nodes "
    "share")


class Listener:
    """An ephemeral TCP listener that accepts (and closes) connections in the background."""

    def __init__(self, addr: str = "0.0.0.0") -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((addr, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def probe_peers(me: NodeCard, cards: Sequence[NodeCard]) -> dict[str, dict[str, Any]]:
    """Connect from this node to every other node's listener: {peer host: outcome}."""
    out = {}
    for c in cards:
        if c.host == me.host or not c.probe_port:
            continue
        res = tcp_connect(c.advertised, c.probe_port, CONNECT_TIMEOUT,
                          source_addr=me.advertised or None)
        out[c.host] = {"address": f"{c.advertised}:{c.probe_port}", "outcome": res.outcome,
                       "elapsed": round(res.elapsed, 3), "error": res.error}
    return out


def exchange_results(store: Any, me: NodeCard, mine: dict, hosts: Sequence[str],
                     deadline: float) -> dict[str, dict]:
    """Publish this node's peer results and wait (until deadline) for every node's."""
    store.set(f"ddpcheck/peers/{me.run_id}/{me.host}", json.dumps(mine))
    got: dict[str, dict] = {}
    while True:
        for h in hosts:
            key = f"ddpcheck/peers/{me.run_id}/{h}"
            if h not in got and store.check([key]):
                got[h] = json.loads(store.get(key))
        if len(got) == len(hosts) or time.monotonic() >= deadline:
            return got
        time.sleep(0.1)


def judge_addresses(cards: Sequence[NodeCard]) -> list[Problem]:
    """Advertised addresses that are loopback or shared by two hosts."""
    problems = []
    by_addr: dict[str, list[str]] = {}
    for c in cards:
        by_addr.setdefault(c.advertised, []).append(c.host)
        if c.advertised and is_loopback(c.advertised):
            problems.append(ADDRESS_UNUSABLE.problem(
                f"{c.host} advertises {c.advertised}, a loopback address (its hostname "
                "resolves to loopback, or *_SOCKET_IFNAME=lo)", hosts=[c.host]))
    for addr, hosts in by_addr.items():
        if addr and len(set(hosts)) > 1 and not is_loopback(addr):
            problems.append(ADDRESS_UNUSABLE.problem(
                f"{', '.join(sorted(set(hosts)))} all advertise {addr}", hosts=sorted(set(hosts))))
    return problems


def judge_peers(results: Mapping[str, Mapping[str, Mapping[str, Any]]],
                rdzv_port: int) -> list[Problem]:
    """Problems from every node's connect results: {from host: {to host: outcome}}."""
    failures: dict[str, list[str]] = {}
    for src, row in sorted(results.items()):
        for dst, res in sorted(row.items()):
            if res["outcome"] != "ok":
                failures.setdefault(res["outcome"], []).append(
                    f"{src} -> {dst} {res['address']}")
    problems = []
    blocked = failures.pop("timeout", []) + failures.pop("refused", [])
    if blocked:  # the listener is up, so a timeout means dropped and refused means rejected
        problems.append(PEER_PORTS_BLOCKED.problem(
            f"connects to ephemeral ports failed (timed out after {CONNECT_TIMEOUT:g} s = "
            f"dropped, or refused = rejected) while the rendezvous port {rdzv_port} answers: "
            f"{'; '.join(blocked)}", hosts=sorted({p.split(" -> ")[1].split()[0]
                                                   for p in blocked})))
    for outcome, pairs in failures.items():
        problems.append(PEER_UNREACHABLE.problem(
            f"connect {outcome}: {'; '.join(pairs)}",
            hosts=sorted({p.split(" -> ")[0] for p in pairs})))
    return problems
