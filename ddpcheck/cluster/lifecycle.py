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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ddpcheck.cluster import board
from ddpcheck.cluster import nodeflow as flow
from ddpcheck.cluster.board import Verdict
from ddpcheck.cluster.checkin import (
    ENDPOINT_NODE_STOPPED,
    ENDPOINT_NOT_A_STORE,
    NodeCard,
    host_store,
    join_store,
)
from ddpcheck.cluster.nodeflow import STORE_LOST, ClusterState
from ddpcheck.cluster.peerprobe import Listener
from ddpcheck.diagnoses import Problem, register
from ddpcheck.launcher.config import Config
from ddpcheck.launcher.userjob import hosting_problem
from ddpcheck.node.interfaces import Interface, nccl_matches, propose_interface
from ddpcheck.node.netprobe import (
    bind_check,
    connect_with_grace,
    describe_bind,
    describe_connect,
    interfaces,
    is_loopback,
    resolve,
)

CONNECT_TIMEOUT = 3.0
FINAL_WAIT = 10.0

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


def connect(cfg: Config, env: dict[str, str], nproc: int, local: list[Problem],
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
                     [p.to_dict() for p in local], socket.getfqdn(), **(card_fields or {}))
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
    from ddpcheck.node.netprobe import ConnectResult

    return ConnectResult("resolve-failed", "", 0.0, res.error)


NODE_OUTCOME_MISSING = register(
    "node-outcome-missing", "a node did not report the end of its run",
    "its launcher was killed or hung, its torchrun ran past the others, or it lost the "
    "rendezvous store before the end",
    "read that node's own report or job output; rerun once it is healthy")
VERDICT_UNKNOWN = register(
    "verdict-unknown", "this node could not learn the whole run's verdict",
    "the node hosting rank 0 did not publish its verdict in time (it stopped, hung, or "
    "lost the rendezvous store), so this node cannot say the job is ready",
    "read the rank-0 node's report; if it is missing, that node failed: rerun without it")


@dataclass(frozen=True)
class Outcome:
    """What one node's launcher saw of its part of the run, shared at the end."""

    host: str
    ready: bool
    problems: tuple[Problem, ...]

    def to_json(self) -> str:
        return json.dumps({"host": self.host, "ready": self.ready,
                           "problems": [p.to_dict() for p in self.problems]})

    @classmethod
    def from_json(cls, text: str | bytes) -> Outcome:
        data = json.loads(text)
        return cls(str(data["host"]), bool(data["ready"]),
                   tuple(Problem.from_dict(p) for p in data.get("problems", [])))


def _final_key(st: ClusterState) -> str:
    assert st.me is not None
    return f"ddpcheck/final/{st.me.run_id}"


def _hosts(st: ClusterState) -> list[str]:
    assert st.me is not None
    return [c.host for c in st.cards if c.run_id == st.me.run_id] or [st.me.host]


def post_outcome(st: ClusterState, outcome: Outcome) -> bool:
    """Publish this node's outcome for the rank-0 node; False when the store is gone."""
    if st.store is None or st.me is None:
        return False
    try:
        st.store.set(f"{_final_key(st)}/node/{outcome.host}", outcome.to_json())
        return True
    except (RuntimeError, ValueError, TimeoutError):
        return False


def collect_outcomes(st: ClusterState, wait: float = FINAL_WAIT) -> list[Problem]:
    """On the rank-0 node: every other node's problems, and a problem per silent node."""
    if st.store is None or st.me is None:
        return []
    others = [h for h in _hosts(st) if h != st.me.host]
    key = _final_key(st)
    got = gather_keys(st.store, {h: f"{key}/node/{h}" for h in others}, wait)
    problems = [p for text in got.values() for p in Outcome.from_json(text).problems]
    for h in others:
        if h not in got:
            problems.append(NODE_OUTCOME_MISSING.problem(
                f"{h} did not report the end of its run within {wait:g} s after "
                f"{st.me.host}'s ended", hosts=[h]))
    return problems


def publish_verdict(st: ClusterState, outcome: Outcome) -> None:
    """On the rank-0 node: the whole run's verdict, which every other node adopts."""
    if st.store is None or st.me is None:
        return
    try:
        st.store.set(f"{_final_key(st)}/verdict", outcome.to_json())
    except (RuntimeError, ValueError, TimeoutError):
        pass


def await_verdict(st: ClusterState, wait: float = 2 * FINAL_WAIT + 5) -> Outcome | Problem:
    """On the other nodes: the rank-0 node's verdict, or the problem of not learning it."""
    if st.store is not None and st.me is not None:
        key = f"{_final_key(st)}/verdict"
        got = gather_keys(st.store, {"verdict": key}, wait)
        if "verdict" in got:
            return Outcome.from_json(got["verdict"])
    host = st.me.host if st.me else socket.gethostname()
    return VERDICT_UNKNOWN.problem(
        f"{host} got no verdict from the node hosting rank 0 within {wait:g} s after its own "
        "part ended", hosts=[host])


def release(st: ClusterState, wait: float = FINAL_WAIT) -> None:
    """Say this node is done with the store; its host keeps it up until all are (bounded)."""
    if st.store is None or st.me is None:
        return
    key = f"{_final_key(st)}/read"
    try:
        st.store.add(key, 1)
        if st.is_host:  # the others read through our store: keep it up until they have
            end = time.monotonic() + wait
            while int(st.store.add(key, 0)) < len(_hosts(st)) and time.monotonic() < end:
                time.sleep(0.1)
    except (RuntimeError, ValueError, TimeoutError):  # the store's host is gone
        pass


def gather_keys(store: Any, keys: dict[str, str], wait: float) -> dict[str, str]:
    """Read the keys that appear within ``wait`` seconds (one store ``wait``, one
    ``multi_get``, as board.await_key does for one key); the absent ones are left out."""
    try:
        store.wait(list(keys.values()), timedelta(seconds=max(wait, 0.001)))
    except RuntimeError:  # the wait timed out (DistStoreError), or the store's host is gone
        pass
    try:
        present = [name for name, key in keys.items() if store.check([key])]
        raw = store.multi_get([keys[n] for n in present]) if present else []
    except (RuntimeError, ValueError, TimeoutError):  # the store's host went away
        return {}
    return {name: bytes(value).decode() for name, value in zip(present, raw)}
