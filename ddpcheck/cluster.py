"""The multi-node part of a run: reach the endpoint, check in, probe peers, share the end.

Runs in the launcher of every node when --nodes > 1, between the node preflight and
torchrun, and again after torchrun to share each node's diagnoses. Every step has a
deadline derived from --rdzv-timeout, so a missing node, a dropped port or a squatted port
is named in seconds, and the world only starts when every node is known to be ready.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ddpcheck import board
from ddpcheck.board import Board, Verdict
from ddpcheck.checkin import (
    ENDPOINT_NODE_STOPPED,
    ENDPOINT_NOT_A_STORE,
    NodeCard,
    host_store,
    join_store,
)
from ddpcheck.config import Config
from ddpcheck.diagnoses import Problem, register
from ddpcheck.interfaces import Interface, nccl_matches, propose_interface
from ddpcheck.netprobe import (
    bind_check,
    connect_with_grace,
    describe_bind,
    describe_connect,
    interfaces,
    is_loopback,
    resolve,
)
from ddpcheck.peerprobe import CONNECT_TIMEOUT as PEER_TIMEOUT
from ddpcheck.peerprobe import Listener, judge_addresses, judge_peers, peer_targets, probe_peers

CONNECT_TIMEOUT = 3.0
FINAL_WAIT = 10.0
VERDICT_SLACK = 5.0  # beyond the host's own deadline, for clocks and a slow host
PEER_VERDICT = "ddpcheck/peers/verdict"

HOSTNAME_LOOPBACK = register(
    "hostname-loopback", "this node's hostname resolves to a loopback address",
    "Debian/Ubuntu put `127.0.1.1 <hostname>` in /etc/hosts; gloo then advertises 127.0.1.1 to "
    "the other nodes, which connect to themselves",
    "fix /etc/hosts so the hostname resolves to the cluster address, or set "
    "GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) to the cluster interface")
STORE_LOST = register(
    "rendezvous-store-lost", "the rendezvous store went away during check-in",
    "ddpcheck on the endpoint node stopped (a problem it found, Ctrl-C, or the node failed)",
    "read the endpoint node's own report; it names the problem that stopped it")
TWO_LAUNCHERS = register(
    "two-launchers-on-node", "more than one ddpcheck runs on one node",
    "the job starts ddpcheck once per task instead of once per node (or it was started twice)",
    "start exactly one ddpcheck per node (Slurm: srun --ntasks-per-node=1; by hand: once per "
    "host)")
ENDPOINT_LOOPBACK = register(
    "endpoint-loopback", "the rendezvous endpoint is a loopback address on a multi-node run",
    "localhost/127.x only reaches the node itself; the other nodes cannot join",
    "pass --rdzv-endpoint with node rank 0's cluster address or name")


@dataclass
class ClusterState:
    """What the multi-node steps found; ``store`` stays open until the run ends."""

    problems: list[Problem] = field(default_factory=list)
    cards: list[NodeCard] = field(default_factory=list)
    me: NodeCard | None = None
    store: Any = None
    is_host: bool = False
    advertised: str = ""
    listener: Listener | None = None
    peers: dict[str, dict] = field(default_factory=dict)
    verdict: Verdict | None = None
    figures: dict[str, Any] = field(default_factory=dict)  # network-only mode's report

    def close(self) -> None:
        if self.listener:
            self.listener.close()
            self.listener = None


def advertised_address(env: dict[str, str], backend: str, ifaces: Sequence[Interface],
                       endpoint_ip: str) -> tuple[str, str]:
    """(address, how it was chosen): what gloo/NCCL on this node will tell its peers."""
    var = "NCCL_SOCKET_IFNAME" if backend == "nccl" else "GLOO_SOCKET_IFNAME"
    value = env.get(var, "")
    if value:
        if backend == "nccl":  # NCCL's syntax: prefixes, ^ excludes, = exact
            chosen = [i for i in nccl_matches(value, ifaces) if i.ipv4]
        else:  # gloo: exact names, the first one is used
            chosen = [i for i in ifaces if i.name == value.split(",")[0] and i.ipv4]
        if chosen:
            return chosen[0].ipv4[0].address, f"{var}={value}"
    res = resolve(socket.gethostname())
    if res.ok and res.addresses:
        return res.addresses[0], f"hostname {socket.gethostname()}"
    best = propose_interface(ifaces, endpoint_ip)
    return (best.ipv4[0].address if best and best.ipv4 else ""), "route to the endpoint"


def connect(cfg: Config, env: dict[str, str], nproc: int, local: list[Problem],
            deadline: float, expected_hosts: Sequence[str] = ()) -> ClusterState:
    """Everything before torchrun: endpoint, store, check-in, peer probes."""
    st = ClusterState()
    node = socket.gethostname()
    assert cfg.rdzv_endpoint is not None
    host, port = cfg.rdzv_endpoint
    res = resolve(host)
    if not res.ok:
        st.problems.append(describe_connect(_unresolved(res), host, port, node))  # type: ignore
        return st
    ep_ip = res.addresses[0]
    if is_loopback(ep_ip):
        st.problems.append(ENDPOINT_LOOPBACK.problem(
            f"--rdzv-endpoint {host}:{port} resolves to {ep_ip} on {node}", hosts=[node]))
        return st
    ifaces = interfaces()
    st.is_host = any(a.address == ep_ip for i in ifaces for a in i.ipv4)
    st.advertised, how = advertised_address(env, cfg.backend, ifaces, ep_ip)
    if is_loopback(st.advertised) and how.startswith("hostname"):
        best = propose_interface(ifaces, ep_ip)
        fix = (f"fix /etc/hosts so {node} resolves to its cluster address"
               + (f", or set GLOO_SOCKET_IFNAME={best.name}" if best else ""))
        local.append(HOSTNAME_LOOPBACK.problem(
            f"{node} resolves to {st.advertised} on {node}; gloo would advertise it to the "
            "other nodes", fix=fix, hosts=[node]))
    if not _open_store(st, host, port, node, cfg.rdzv_timeout):
        return st
    st.store = board.CountedStore(st.store)
    st.listener = Listener()
    st.me = NodeCard(node, cfg.nodes, cfg.rdzv_id, nproc, os.getpid(), cfg.node_rank,
                     st.advertised, st.listener.port,
                     {i.name: [a.address for a in i.ipv4] for i in ifaces if i.is_up},
                     [p.to_dict() for p in local])
    try:
        _check_in(st, deadline, cfg.rdzv_timeout, expected_hosts)
        if not st.problems:
            _probe_peers(st, port)
        _settle(st)
        st.figures["store_ops"] = st.store.ops
    except (RuntimeError, ValueError, TimeoutError) as exc:  # the store's host went away
        st.problems.append(STORE_LOST.problem(
            f"the rendezvous store on {host}:{port} closed while {node} was checking in "
            f"({str(exc).splitlines()[0][:120]})", hosts=[host]))
    return st


def _check_in(st: ClusterState, deadline: float, rdzv_timeout: float,
              expected_hosts: Sequence[str]) -> None:
    """Post this node's card; the host judges every card, the others wait for its verdict."""
    assert st.me is not None
    board.publish(st.store, st.me)
    st.figures["joined_at"] = time.time()  # wall clock: comparable across the nodes
    if st.is_host:
        reader = Board(st.store, st.me, expected_hosts)
        verdict = reader.collect(deadline)
        board.publish_verdict(st.store, verdict)
        st.cards = reader.cards
    else:  # the host decides by its own deadline, at most rdzv_timeout after we joined
        got = board.await_verdict(st.store, time.monotonic() + rdzv_timeout + VERDICT_SLACK)
        verdict = got or Verdict([STORE_LOST.problem(
            f"the endpoint node published no check-in verdict within {rdzv_timeout:g} s + "
            f"{VERDICT_SLACK:g} s of {st.me.host} joining", hosts=[st.me.host])])
        if verdict.stopped:
            verdict.problems.insert(0, ENDPOINT_NODE_STOPPED.problem(
                f"ddpcheck on {verdict.host} (the endpoint node) stopped before the check-in "
                f"on its own problems: {', '.join(p.code for p in verdict.problems)}",
                hosts=[verdict.host]))
        st.cards = [NodeCard(h, st.me.nodes, st.me.run_id, st.me.nproc, 0, advertised=a,
                             probe_port=p) for h, a, p in verdict.nodes]
    st.verdict = verdict
    st.problems += verdict.problems
    st.figures["checkin_verdict_at"] = time.time()


def _settle(st: ClusterState) -> None:
    """Every node says it has judged; the store's host waits for that before going on.

    Without it, a host that stops on a problem closes the store while slower nodes are
    still reading the cards that explain why.
    """
    assert st.me is not None
    key = f"ddpcheck/settled/{st.me.run_id}"
    st.store.add(key, 1)
    if not st.is_host:
        return
    n = len([c for c in st.cards if c.run_id == st.me.run_id]) or 1
    end = time.monotonic() + FINAL_WAIT
    while int(st.store.add(key, 0)) < n and time.monotonic() < end:
        time.sleep(0.05)


def _open_store(st: ClusterState, host: str, port: int, node: str, grace: float) -> bool:
    if st.is_host:
        bound = bind_check(port)
        problem = describe_bind(bound, node)
        if "ddpcheck" in bound.holder_cmdline:  # not a stranger: a second launcher here
            problem = TWO_LAUNCHERS.problem(
                f"{bound.holder} already hosts the rendezvous on {node}:{port}; this is a "
                f"second ddpcheck on the same node", hosts=[node])
        if problem is None:
            try:
                st.store = host_store(port, timeout=grace)
                return True
            except (RuntimeError, ValueError) as exc:  # lost a race for the port
                problem = ENDPOINT_NOT_A_STORE.problem(f"cannot host the store on {node}:{port}: "
                                                       f"{exc}", hosts=[node])
        st.problems.append(problem)
        return False
    result = connect_with_grace(host, port, CONNECT_TIMEOUT, grace)
    problem = describe_connect(result, host, port, node)
    if problem is None:
        try:
            st.store = join_store(host, port, timeout=CONNECT_TIMEOUT + 2)
            return True
        except TimeoutError as exc:
            problem = ENDPOINT_NOT_A_STORE.problem(
                f"TCP connect to {host}:{port} succeeds from {node}, but no c10d store answers "
                f"there ({str(exc).splitlines()[0][:160]})", hosts=[host])
        except (RuntimeError, ValueError) as exc:  # the peer closed: a store that stopped
            problem = ENDPOINT_NODE_STOPPED.problem(
                f"TCP connect to {host}:{port} succeeds from {node}, then the endpoint closed "
                f"the connection before the store answered ({str(exc).splitlines()[0][:120]})",
                cause="ddpcheck on the endpoint node stopped (its own report says why), or "
                "another program holds the port and hangs up", hosts=[host])
    st.problems.append(problem)
    return False


def _probe_peers(st: ClusterState, port: int) -> None:
    """Probe the planned peers at once; the host judges every node's results, in one verdict.

    The listener stays open until the verdict: peers may still be connecting to it.
    """
    assert st.me is not None and st.verdict is not None
    nodes = st.verdict.nodes
    hosts = [h for h, _, _ in nodes]
    if st.me.host not in hosts:
        return
    index = hosts.index(st.me.host)
    ep = hosts.index(st.verdict.host) if st.verdict.host in hosts else 0
    targets = [nodes[j] for j in peer_targets(index, len(nodes), ep, st.me.run_id)]
    mine = probe_peers((st.me.host, st.me.advertised, st.me.probe_port), targets)
    st.figures["connections_out"] = len(mine)
    board.post_results(st.store, index, mine)
    if st.is_host:
        st.peers = board.collect_results(st.store, nodes, time.monotonic() + PEER_TIMEOUT + 5)
        silent = [h for h in hosts if h not in st.peers]
        problems = judge_addresses([c for c in st.cards
                                    if c.host in hosts and c.run_id == st.me.run_id])
        problems += judge_peers(st.peers, port, silent)
        board.publish_verdict(st.store, Verdict(problems, nodes, st.me.host), PEER_VERDICT)
    else:
        raw = board.await_key(st.store, PEER_VERDICT, time.monotonic() + PEER_TIMEOUT + 15)
        problems = Verdict.from_json(raw).problems if raw is not None else [STORE_LOST.problem(
            f"the endpoint node published no peer-probe verdict within {PEER_TIMEOUT + 15:g} s",
            hosts=[st.verdict.host])]
    st.problems += problems
    st.figures["peer_verdict_at"] = time.time()
    if st.listener:
        st.figures["connections_in"] = st.listener.accepted
    st.close()


def announce_stop(cfg: Config, problems: list[Problem]) -> None:
    """On the endpoint node stopping before the check-in: say why to the nodes that ask.

    Hosts the store just long enough (until every other node has read the verdict, at most
    FINAL_WAIT) that the others name this node and its problems instead of a refused port.
    """
    assert cfg.rdzv_endpoint is not None
    host, port = cfg.rdzv_endpoint
    res = resolve(host)
    mine = {a.address for i in interfaces() for a in i.ipv4}
    if not res.ok or res.addresses[0] not in mine or not bind_check(port).ok:
        return
    try:
        store = host_store(port, timeout=FINAL_WAIT)
        board.publish_verdict(store, Verdict(problems, [], socket.gethostname(), stopped=True))
        end = time.monotonic() + FINAL_WAIT
        while int(store.add(f"ddpcheck/settled/{cfg.rdzv_id}", 0)) < cfg.nodes - 1 \
                and time.monotonic() < end:
            time.sleep(0.1)
    except (RuntimeError, ValueError):  # lost the port: the others see a refused or odd port
        return


def _unresolved(res: Any) -> Any:
    from ddpcheck.netprobe import ConnectResult

    return ConnectResult("resolve-failed", "", 0.0, res.error)


def share_final(st: ClusterState, problems: list[Problem], rank0_here: bool) -> list[Problem]:
    """Publish this node's own diagnoses; on the rank-0 node, collect every node's."""
    if st.store is None or st.me is None:
        return []
    me, key = st.me, f"ddpcheck/final/{st.me.run_id}"
    try:
        st.store.set(f"{key}/{me.host}", json.dumps([p.to_dict() for p in problems]))
        hosts = [c.host for c in st.cards if c.run_id == me.run_id]
        got = _collect(st.store, key, hosts, time.monotonic() + FINAL_WAIT) if rank0_here else {}
        st.store.add(f"{key}/read", 1)
        if st.is_host:  # the others read through our store: keep it up until they have
            end = time.monotonic() + FINAL_WAIT
            while int(st.store.add(f"{key}/read", 0)) < len(hosts) and time.monotonic() < end:
                time.sleep(0.1)
    except (RuntimeError, ValueError, TimeoutError):  # the store's host is gone
        return []
    return [Problem.from_dict(p) for h, ps in got.items() if h != me.host for p in ps]


def _collect(store: Any, key: str, hosts: Sequence[str], deadline: float) -> dict[str, list]:
    got: dict[str, list] = {}
    while len(got) < len(hosts) and time.monotonic() < deadline:
        for h in hosts:
            if h not in got and store.check([f"{key}/{h}"]):
                got[h] = json.loads(store.get(f"{key}/{h}"))
        time.sleep(0.1)
    return got
