"""The multi-node part of a run before torchrun: reach the endpoint, check in, probe peers.

Runs in the launcher of every node when --nodes > 1, between the node preflight and
torchrun (the end of the run, after torchrun, is ``ddpcheck.cluster.ending``). Every step
has a deadline derived from --rdzv-timeout, so a missing node, a dropped port or a squatted
port is named in seconds, and the world only starts when every node is known to be ready.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ddpcheck import storekeys
from ddpcheck.cluster import board
from ddpcheck.cluster import nodeflow as flow
from ddpcheck.cluster.board import CheckinDecision
from ddpcheck.cluster.checkin import ENDPOINT_NODE_STOPPED, ENDPOINT_NOT_A_STORE, NodeCard
from ddpcheck.cluster.nodeflow import FINAL_WAIT, STORE_LOST, ClusterState
from ddpcheck.cluster.peerprobe import Listener
from ddpcheck.cluster.store import CONNECT_TIMEOUT, hold, host_store, join_store
from ddpcheck.cluster.userjob import hosting_problem
from ddpcheck.diagnoses import Problem, register
from ddpcheck.node.interfaces import Interface, interfaces, is_loopback, propose_interface
from ddpcheck.node.netprobe import (
    bind_check,
    connect_with_grace,
    describe_bind,
    describe_connect,
    resolve,
)
from ddpcheck.node.socketifname import nccl_matches

HOSTNAME_LOOPBACK = register(
    "hostname-loopback", "this node's hostname resolves to a loopback address",
    "Debian/Ubuntu put `127.0.1.1 <hostname>` in /etc/hosts; gloo then advertises 127.0.1.1 to "
    "the other nodes, which connect to themselves",
    "fix /etc/hosts so the hostname resolves to the cluster address, or set "
    "GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) to the cluster interface")
TWO_LAUNCHERS = register(
    "two-launchers-on-node", "more than one ddpcheck runs on one node",
    "the job starts ddpcheck once per task instead of once per node (or it was started twice)",
    "start exactly one ddpcheck per node (Slurm: srun --ntasks-per-node=1; by hand: once per "
    "host)")
ENDPOINT_LOOPBACK = register(
    "endpoint-loopback", "the rendezvous endpoint is a loopback address on a multi-node run",
    "localhost/127.x only reaches the node itself; the other nodes cannot join",
    "pass --rdzv-endpoint with node rank 0's cluster address or name")


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


class ClusterSettings(Protocol):
    """What these steps read of the launcher's settings (``launcher.config.RunConfig``)."""

    @property
    def rdzv_endpoint(self) -> tuple[str, int] | None: ...
    @property
    def rdzv_id(self) -> str: ...
    @property
    def rdzv_timeout(self) -> float: ...
    @property
    def nodes(self) -> int: ...
    @property
    def node_rank(self) -> int | None: ...
    @property
    def backend(self) -> str: ...
    @property
    def launch(self) -> str: ...
    @property
    def init_method(self) -> Any: ...  # launcher.spawn.launchspec.InitMethod | None


def connect(cfg: ClusterSettings, env: dict[str, str], nproc: int, local: list[Problem],
            deadline: float, expected_hosts: Sequence[str] = (),
            card_fields: dict[str, Any] | None = None,
            before_card: Callable[[ClusterState], list[Problem]] | None = None) -> ClusterState:
    """Everything before torchrun: endpoint, store, check-in, peer probes.

    ``card_fields`` go on this node's card (the rank layout of a spawn-style launch);
    ``before_card`` runs once the store is open and adds this node's problems (the file://
    share check, which needs the store)."""
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
    # ddpcheck hosts the store itself; the user's torchrun would pick its host by torch's rule.
    hosting = hosting_problem(host, node, st.is_host) if cfg.launch == "torchrun" else None
    if hosting:
        local.append(hosting)
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
    if before_card:
        local = [*local, *before_card(st)]
    st.listener = Listener()
    st.me = NodeCard(node, cfg.nodes, cfg.rdzv_id, nproc, os.getpid(), cfg.node_rank,
                     st.advertised, st.listener.port,
                     {i.name: [a.address for a in i.ipv4] for i in ifaces if i.is_up},
                     tuple(local), socket.getfqdn(), launch=launch_text(cfg),
                     mtus={i.name: i.mtu for i in ifaces if i.is_up and i.ipv4},
                     **(card_fields or {}))
    try:
        flow.check_in(st, deadline, cfg.rdzv_timeout, expected_hosts)
        if not st.problems:
            flow.probe_peers(st, port)
        flow.settle(st)
        st.figures["store_ops"] = st.store.ops
    except (RuntimeError, ValueError, TimeoutError) as exc:  # the store's host went away
        st.problems.append(STORE_LOST.problem(
            f"the rendezvous store on {host}:{port} closed while {node} was checking in "
            f"({str(exc).splitlines()[0][:120]})", hosts=[host]))
    return st


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


def announce_stop(cfg: ClusterSettings, problems: list[Problem]) -> None:
    """On the endpoint node stopping before the check-in: say why to the nodes that ask.

    Hosts the store just long enough (until every other node has read the decision, at most
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
        board.publish_decision(store, CheckinDecision(problems, [], socket.gethostname(),
                                                      stopped=True))
        hold(store, storekeys.settled(cfg.rdzv_id), cfg.nodes - 1, FINAL_WAIT)
    except (RuntimeError, ValueError):  # lost the port: the others see a refused or odd port
        return


def _unresolved(res: Any) -> Any:
    from ddpcheck.node.netprobe import ConnectResult

    return ConnectResult("resolve-failed", "", 0.0, res.error)


def launch_text(cfg: ClusterSettings) -> str:
    """How this node starts its ranks, as the cards compare it: "torchrun", "spawn env://"."""
    init = f" {cfg.init_method.url}" if cfg.launch != "torchrun" and cfg.init_method else ""
    return f"--launch {cfg.launch}{init}"
