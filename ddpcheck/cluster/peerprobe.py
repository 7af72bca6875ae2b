"""Node-to-node reachability beyond the rendezvous port, before torchrun starts.

Runs in the launcher of a multi-node run, after check-in. torchrun's workers do not only use
the rendezvous port: the rank-0 node's agent hosts the workers' store on a random port, and
gloo/NCCL open connections between every pair of nodes on ephemeral ports. So each node
listens (and accepts) on an ephemeral port at the address it advertises, and connects, all
at once under one deadline, to the nodes :func:`ddpcheck.cluster.pairing.peer_targets`
picks (every other node up to FULL_MESH_MAX nodes, a sample above: O(N log N) connections in
all). A firewall that lets only the rendezvous port through is named in seconds (torchrun
would spend minutes in SYN retries), and failures are blamed on the end they have in common
(:func:`judge_peers`).
Also catches advertised addresses that peers cannot use: loopback, or the same address on
two hosts (docker0's 172.17.0.1). Each target that accepts a connection then gets real
payloads, small to a few MiB, both ways (:mod:`ddpcheck.cluster.bulkprobe`), under a
deadline of its own: a path that passes handshakes but drops large frames is named here.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ddpcheck.cluster import bulkprobe
from ddpcheck.cluster.checkin import NodeCard
from ddpcheck.cluster.store import CONNECT_TIMEOUT
from ddpcheck.diagnoses import Problem, register
from ddpcheck.node.interfaces import interfaces, is_loopback, route_interface
from ddpcheck.node.netprobe import ConnectResult, tcp_connect

MAX_PARALLEL = 64  # connects in flight per node
BULK_TIMEOUT = 4.0  # the payload exchanges, after the connects: seconds for all targets
MAX_SERVED = 512  # connections a listener serves at once (each node is probed by ~log2 N + 4,
# or N - 1 <= 31 in a full mesh); beyond it a connection is closed: the store's trust model


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
PEER_RESULTS_MISSING = register(
    "peer-results-missing", "nodes checked in but posted no peer-probe results in time",
    "the node's ddpcheck stopped or hung between check-in and the peer probes, or its "
    "connects could not finish within the deadline",
    "read that node's own report; rerun, and if it repeats, check the node's load and logs")


SETTLE_S = 2.0  # how long the counts wait for connections still being served


class Listener:
    """An ephemeral TCP listener that accepts connections in a daemon thread and serves
    each one (:func:`bulkprobe.serve`: a connect-only probe just closes) in a thread of its own.

    Accepting matters at scale: with ``listen(n)`` alone the backlog fills after ~n peers
    and every later connect times out, a false ``peer-ports-blocked``.
    """

    def __init__(self, addr: str = "0.0.0.0") -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((addr, 0))
        self.sock.listen(socket.SOMAXCONN)
        self.sock.settimeout(0.2)  # the accept loop checks for close() this often
        self.port = self.sock.getsockname()[1]
        self.accepted = 0  # connect probes
        self.exchanges = 0  # payload exchanges (bulkprobe)
        self._count = threading.Condition()
        self._serving_now = 0  # connections a thread is still serving
        self._serving = threading.BoundedSemaphore(MAX_SERVED)
        self._open = True
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while self._open:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if not self._serving.acquire(blocking=False):  # no real job opens this many
                conn.close()
                continue
            with self._count:
                self._serving_now += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        rounds = 0
        try:
            rounds = bulkprobe.serve(conn)
        finally:
            self._serving.release()
            with self._count:
                if rounds:
                    self.exchanges += 1
                else:
                    self.accepted += 1  # a connect probe
                self._serving_now -= 1
                self._count.notify_all()

    def settle(self, timeout: float = SETTLE_S) -> None:
        """Wait (at most ``timeout``) for the connections still being served: a peer that
        finished its exchange may be counted here a moment later, when its serving thread
        reads the end of the stream (a loaded node read 0 exchanges of 1 in a real run)."""
        deadline = time.monotonic() + timeout
        with self._count:
            while self._serving_now and (left := deadline - time.monotonic()) > 0:
                self._count.wait(left)

    def close(self) -> None:
        self._open = False
        self._thread.join(1.0)
        self.sock.close()


def probe_peers(me: tuple[str, str, int], targets: Sequence[tuple[str, str, int]],
                timeout: float = CONNECT_TIMEOUT, bulk_timeout: float = BULK_TIMEOUT,
                ) -> dict[str, dict[str, Any]]:
    """Connect to every target's listener at once, under one deadline, then exchange
    payloads with each one that answered, under a second: {host: outcome}.

    A target whose payloads stalled also gets the local end of the path: the interface
    the kernel routes it through and that interface's MTU."""
    host, source, _ = me
    todo = [t for t in targets if t[0] != host and t[2]]
    if not todo:
        return {}
    deadline = time.monotonic() + timeout
    bulk_deadline = deadline + bulk_timeout

    def one(t: tuple[str, str, int]) -> tuple[ConnectResult, bulkprobe.BulkResult | None]:
        res = tcp_connect(t[1], t[2], max(0.05, deadline - time.monotonic()),
                          source_addr=source or None)
        if not res.ok:
            return res, None
        until = min(bulk_deadline, time.monotonic() + bulk_timeout)
        return res, bulkprobe.exchange(res.address, t[2], until, source or None)

    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(todo))) as pool:
        done = list(pool.map(one, todo))
    out = {t[0]: {"address": f"{t[1]}:{t[2]}", "outcome": r.outcome,
                  "elapsed": round(r.elapsed, 3), "error": r.error}
           for t, (r, _) in zip(todo, done)}
    moved = [(t, r, b) for t, (r, b) in zip(todo, done) if b is not None]
    mtus = {i.name: i.mtu for i in interfaces()} if any(b.outcome != "ok"
                                                        for _, _, b in moved) else {}
    for t, r, b in moved:
        bulk = b.to_dict()
        if b.outcome != "ok":
            dev = route_interface(r.address) or ""
            bulk.update(dev=dev, mtu=mtus.get(dev, 0))
        out[t[0]]["bulk"] = bulk
    return out


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


def judge_peers(results: dict[str, dict[str, dict[str, Any]]], rdzv_port: int,
                silent: Sequence[str] = ()) -> list[Problem]:
    """Problems from every node's connect results: {from host: {to host: outcome}}.

    Failures are tallied per destination and per source, and blamed on the common end: a
    node that most of its probers cannot reach (at least 2) is named once, as is a node that
    reaches few of its targets; the pairs left over are listed as pairs. So one node that
    refuses every incoming connection is one problem naming it, at 3 nodes or at 1,024.
    """
    fails = [(s, d, r) for s, row in sorted(results.items()) for d, r in sorted(row.items())
             if r["outcome"] != "ok"]
    probed_by = Counter(d for row in results.values() for d in row)
    probes_of = {s: len(row) for s, row in results.items()}
    into, out_of = Counter(d for _, d, _ in fails), Counter(s for s, _, _ in fails)
    bad_dst = {d for d, k in into.items() if k >= 2 and 2 * k >= probed_by[d]}
    bad_src = {s for s, k in out_of.items() if k >= 2 and 2 * k >= probes_of[s]} - bad_dst
    problems = [_blame_end(d, [f for f in fails if f[1] == d], probed_by[d], rdzv_port, True)
                for d in sorted(bad_dst)]
    problems += [_blame_end(s, [f for f in fails if f[0] == s and f[1] not in bad_dst],
                            probes_of[s], rdzv_port, False) for s in sorted(bad_src)]
    rest = [f for f in fails if f[1] not in bad_dst and f[0] not in bad_src]
    problems += _pairs(rest, rdzv_port)
    if silent:
        problems.append(PEER_RESULTS_MISSING.problem(
            f"{_names(sorted(silent))} posted no peer-probe results before the deadline",
            hosts=sorted(silent)))
    return problems


def _names(hosts: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(hosts[:limit])
    return shown + (f" and {len(hosts) - limit} more" if len(hosts) > limit else "")


def _outcomes(fails: Sequence[tuple[str, str, dict]]) -> str:
    counts = Counter(r["outcome"] for _, _, r in fails)
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))


def _blame_end(node: str, fails: list[tuple[str, str, dict]], tried: int, rdzv_port: int,
               incoming: bool) -> Problem:
    blocked = all(r["outcome"] in ("timeout", "refused") for _, _, r in fails)
    if incoming:
        address = fails[0][2]["address"]
        observed = (f"{len(fails)} of {tried} nodes that probed {node} ({address}) could not "
                    f"connect ({_outcomes(fails)}) while the rendezvous port {rdzv_port} "
                    f"answers: {_names(sorted({s for s, _, _ in fails}))}")
        fix = (f"allow incoming TCP on {node} from the job's nodes on all ports (check its "
               "iptables/nftables INPUT rules)") if blocked else ""
        diag = PEER_PORTS_BLOCKED if blocked else PEER_UNREACHABLE
        return diag.problem(observed, fix=fix, hosts=[node])
    observed = (f"{node} could not connect to {len(fails)} of the {tried} nodes it probed "
                f"({_outcomes(fails)}): {_names(sorted({d for _, d, _ in fails}))}")
    return PEER_UNREACHABLE.problem(
        observed, cause=f"{node}'s own outgoing connections fail: a local OUTPUT firewall rule, "
        "or the interface it uses does not reach the cluster network", hosts=[node])


def _pairs(fails: list[tuple[str, str, dict]], rdzv_port: int) -> list[Problem]:
    blocked = [f for f in fails if f[2]["outcome"] in ("timeout", "refused")]
    other = [f for f in fails if f not in blocked]
    problems = []
    if blocked:  # the listener is up, so a timeout means dropped and refused means rejected
        problems.append(PEER_PORTS_BLOCKED.problem(
            f"connects to ephemeral ports failed (timed out after {CONNECT_TIMEOUT:g} s = "
            f"dropped, or refused = rejected) while the rendezvous port {rdzv_port} answers: "
            + "; ".join(f"{s} -> {d} {r['address']}" for s, d, r in blocked[:16]),
            hosts=sorted({d for _, d, _ in blocked})))
    for outcome in sorted({r["outcome"] for _, _, r in other}):
        pairs = [f for f in other if f[2]["outcome"] == outcome]
        problems.append(PEER_UNREACHABLE.problem(
            f"connect {outcome}: " + "; ".join(f"{s} -> {d} {r['address']}"
                                               for s, d, r in pairs[:16]),
            hosts=sorted({s for s, _, _ in pairs})))
    return problems
