"""One node's steps of the check-in and the peer probes, in the order every node runs them.

Runs in the launcher of every node of a multi-node run (called by ddpcheck.cluster.lifecycle, after
the store is open). Each exchange is split into a post (every node) and a decide (the node
hosting the store) or receive (the others), so a simulation (tests/helpers/simnodes.py) can play
1,024 nodes phase by phase through the same code. Costs: a node O(1) store operations,
the host O(N) keys read in a few multi_gets (ddpcheck.cluster.board).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from threading import Thread
from typing import Any

from ddpcheck import storekeys
from ddpcheck.cluster import board, peerprobe
from ddpcheck.cluster.board import Board, CheckinDecision
from ddpcheck.cluster.checkin import ENDPOINT_NODE_STOPPED, NodeCard
from ddpcheck.cluster.namecheck import (
    RESOLVE_TIMEOUT,
    judge_resolutions,
    names_to_resolve,
    resolve_all,
)
from ddpcheck.cluster.pairing import peer_targets
from ddpcheck.cluster.pathjudge import judge_bulk
from ddpcheck.cluster.peerprobe import (
    BULK_TIMEOUT,
    Listener,
    judge_addresses,
    judge_peers,
)
from ddpcheck.cluster.store import CONNECT_TIMEOUT as PEER_TIMEOUT
from ddpcheck.cluster.store import hold
from ddpcheck.diagnoses import Problem, register

FINAL_WAIT = 10.0
DECISION_SLACK = 5.0  # beyond the host's own deadline, for clocks and a slow host
PEER_STEP = PEER_TIMEOUT + BULK_TIMEOUT  # a node's connects, then its payload exchanges

STORE_LOST = register(
    "rendezvous-store-lost", "the rendezvous store went away during check-in",
    "ddpcheck on the endpoint node stopped (a problem it found, Ctrl-C, or the node failed)",
    "read the endpoint node's own report; it names the problem that stopped it")


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
    decision: CheckinDecision | None = None
    figures: dict[str, Any] = field(default_factory=dict)  # network-only mode's report

    def close(self) -> None:
        if self.listener:
            self.listener.close()
            self.listener = None


# --- check-in ------------------------------------------------------------------------------
def check_in(st: ClusterState, deadline: float, rdzv_timeout: float,
             expected_hosts: Sequence[str]) -> None:
    """Post this node's card; the host judges every card, the others wait for its decision."""
    post_card(st)
    if st.is_host:
        decide_check_in(st, deadline, expected_hosts)
    else:
        receive_check_in(st, rdzv_timeout)


def post_card(st: ClusterState) -> None:
    assert st.me is not None
    board.publish(st.store, st.me)
    st.figures["joined_at"] = time.time()  # wall clock: comparable across the nodes


def decide_check_in(st: ClusterState, deadline: float, expected_hosts: Sequence[str]) -> None:
    assert st.me is not None
    reader = Board(st.store, st.me, expected_hosts)
    decision = reader.collect(deadline)
    board.publish_decision(st.store, decision)
    st.cards = reader.cards
    _take(st, decision)


def receive_check_in(st: ClusterState, rdzv_timeout: float) -> None:
    """Wait for the host's decision: it decides by its own deadline, at most rdzv_timeout
    after this node joined."""
    assert st.me is not None
    got = board.await_decision(st.store, time.monotonic() + rdzv_timeout + DECISION_SLACK)
    decision = got or CheckinDecision([STORE_LOST.problem(
        f"the endpoint node published no check-in verdict within {rdzv_timeout:g} s + "
        f"{DECISION_SLACK:g} s of {st.me.host} joining", hosts=[st.me.host])])
    if decision.stopped:
        decision.problems.insert(0, ENDPOINT_NODE_STOPPED.problem(
            f"ddpcheck on {decision.host} (the endpoint node) stopped before the check-in "
            f"on its own problems: {', '.join(p.code for p in decision.problems)}",
            hosts=[decision.host]))
    st.cards = [NodeCard(h, st.me.nodes, st.me.run_id, st.me.nproc, 0, advertised=a,
                         probe_port=p) for h, a, p in decision.nodes]
    _take(st, decision)


def _take(st: ClusterState, decision: CheckinDecision) -> None:
    st.decision = decision
    st.problems += decision.problems
    st.figures["checkin_verdict_at"] = time.time()


# --- peer probes ------------------------------------------------------------------------------
def probe_peers_step(st: ClusterState) -> bool:
    """Probe this node's planned peers at once and post the results; False if not a member."""
    assert st.me is not None and st.decision is not None
    nodes = st.decision.nodes
    hosts = [h for h, _, _ in nodes]
    if st.me.host not in hosts:
        return False
    index = hosts.index(st.me.host)
    ep = hosts.index(st.decision.host) if st.decision.host in hosts else 0
    targets = [nodes[j] for j in peer_targets(index, len(nodes), ep, st.me.run_id)]
    # The names first, at once with the connects: both run under their own deadlines.
    spawned = st.me.launch != "--launch torchrun"
    if spawned:  # this node's ranks dial its own master host, which must be rank 0's node
        dial = {h: st.me.master for h in st.decision.names if st.me.master}
    else:
        dial = names_to_resolve(st.me.host, st.decision.names, [t[0] for t in targets])
    names: dict[str, dict] = {}
    lookup = Thread(target=lambda: names.update(resolve_all(list(dial.values()))), daemon=True)
    lookup.start()
    mine = peerprobe.probe_peers((st.me.host, st.me.advertised, st.me.probe_port), targets)
    lookup.join(RESOLVE_TIMEOUT + 1)
    st.figures["connections_out"] = len(mine)
    st.figures["names_resolved"] = len(dial)
    answers = {h: {**names.get(n, {"addresses": [], "error": "lookup did not finish"}),
                   "name": n} for h, n in dial.items()}
    if spawned:  # one that does not resolve is mastercheck's master-addr-unresolvable
        answers = {h: a for h, a in answers.items() if a["addresses"]}
    st.peers = {st.me.host: mine}  # the host replaces it with every node's
    board.post_results(st.store, index, {"peers": mine, "names": answers})
    return True


def dial_problems(docs: dict[str, dict], cards: Sequence[NodeCard],
                  names: dict[str, str]) -> list[Problem]:
    """Every node's answers for the names its ranks would dial, judged once on the host."""
    addrs = {c.host: [a for v in c.addresses.values() for a in v] + [c.advertised]
             for c in cards}
    answers = {h: d.get("names") or {} for h, d in docs.items()}
    return judge_resolutions(answers, names, addrs)


def decide_peers(st: ClusterState, port: int, wait: float = PEER_STEP + 5) -> None:
    """The host: every node's results, judged once, published as one decision."""
    assert st.me is not None and st.decision is not None
    nodes = st.decision.nodes
    hosts = [h for h, _, _ in nodes]
    docs = board.collect_results(st.store, nodes, time.monotonic() + wait)
    st.peers = {h: d.get("peers") or {} for h, d in docs.items()}
    silent = [h for h in hosts if h not in st.peers]
    cards = [c for c in st.cards if c.host in hosts and c.run_id == st.me.run_id]
    problems = judge_addresses(cards)
    problems += judge_peers(st.peers, port, silent)
    problems += judge_bulk(st.peers, cards)
    problems += dial_problems(docs, cards, st.decision.names)
    board.publish_decision(st.store, CheckinDecision(problems, nodes, st.me.host),
                           storekeys.PEER_DECISION)
    _peers_done(st, problems)


def receive_peers(st: ClusterState, wait: float = PEER_STEP + 15) -> None:
    """The host's decision; without it, this node's own payload stalls are still named: a
    path that drops large frames can drop the decision too (a store reply above the MTU)."""
    assert st.decision is not None and st.me is not None
    own = judge_bulk(st.peers, [st.me])
    try:
        raw = board.await_key(st.store, storekeys.PEER_DECISION, time.monotonic() + wait)
        why = f"within {wait:g} s"
    except (RuntimeError, ValueError, TimeoutError) as exc:
        if not own:
            raise  # the store's host went away: the caller names it
        raw, why = None, f"({str(exc).splitlines()[0][:120]})"
    if raw is not None:
        _peers_done(st, CheckinDecision.from_json(raw).problems)
        return
    _peers_done(st, [*own, STORE_LOST.problem(
        f"the endpoint node published no peer-probe verdict {why}"
        + (": a reply larger than the path passes is dropped too" if own else ""),
        hosts=[st.decision.host])])


def _peers_done(st: ClusterState, problems: list[Problem]) -> None:
    """The listener stays open until the decision: peers may still be connecting to it."""
    st.problems += problems
    st.figures["peer_verdict_at"] = time.time()
    if st.listener:
        st.listener.settle()
        st.figures["connections_in"] = st.listener.accepted
        st.figures["exchanges_in"] = st.listener.exchanges
    st.close()


def probe_peers(st: ClusterState, port: int) -> None:
    """Probe, post, and take the host's decision on every node's results."""
    if not probe_peers_step(st):
        return
    if st.is_host:
        decide_peers(st, port)
    else:
        receive_peers(st)


def settle(st: ClusterState) -> None:
    """Every node says it has judged; the store's host waits for that before going on.

    Without it, a host that stops on a problem closes the store while slower nodes are
    still reading the cards that explain why.
    """
    assert st.me is not None
    key = storekeys.settled(st.me.run_id)
    st.store.add(key, 1)
    if not st.is_host:
        return
    n = len([c for c in st.cards if c.run_id == st.me.run_id]) or 1
    hold(st.store, key, n, FINAL_WAIT, pause=0.05)


