"""The check-in board: node cards in, one decision out, in O(N) store operations.

Runs in the launcher of every node of a multi-node run, on the c10d store hosted on the
rendezvous port. Every node writes one card (``add`` for its index, ``set`` for the card)
and one peer-probe result; only the node hosting the store reads them all (incrementally,
with ``multi_get``), judges, and publishes one decision key that every other node waits on
(``wait``, not a polling loop). So a node costs O(1) store operations and the host O(N)
(plus a poll of one counter, bounded by time, not by N), where reading every card on every
node cost O(N^2) per polling pass.

The store trusts whoever can reach the rendezvous port, as torchrun does (see
docs/trust.md): a card count or a card size no real job produces is refused with a
problem, never read or waited for.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ddpcheck import storekeys
from ddpcheck.cluster import messages
from ddpcheck.cluster.checkin import NodeCard, judge
from ddpcheck.cluster.store import gather_keys
from ddpcheck.diagnoses import Problem, register

COUNT_KEY = storekeys.CHECKIN_COUNT
DECISION_KEY = storekeys.CHECKIN_DECISION
MAX_CARD_BYTES = 16 << 10  # a real card is ~1 KiB: host, addresses, a few problems
MAX_RESULT_BYTES = 256 << 10  # one node's peer results: a few hundred bytes per target
EXTRA_CARDS = 8  # cards read beyond --nodes, to name who joined too many

CHECKIN_REFUSED = register(
    "checkin-refused", "the check-in store received input no ddpcheck node sends",
    "a program other than ddpcheck wrote to the rendezvous store (anyone who reaches the "
    "rendezvous port can, as with torchrun), or a node runs an incompatible ddpcheck",
    "make sure only the job's nodes reach the rendezvous port (firewall it to the cluster "
    "network) and run the same ddpcheck version on every node")


@dataclass
class CheckinDecision:
    """What the store's host decided: problems, and the nodes (host, address, probe port)."""

    KIND: ClassVar[str] = "checkin-decision"
    problems: list[Problem] = field(default_factory=list)
    nodes: list[tuple[str, str, int]] = field(default_factory=list)
    host: str = ""
    stopped: bool = False  # the host stopped on its own problems before the check-in
    names: dict[str, str] = field(default_factory=dict)  # host -> name its ranks' peers dial

    def to_json(self) -> str:
        return messages.encode(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> CheckinDecision:
        decision = messages.decode(cls, text, {"nodes": lambda nodes: [
            (str(h), str(a), int(p)) for h, a, p in nodes]})
        decision.problems = list(decision.problems)  # the endpoint node prepends to them
        return decision


class CountedStore:
    """A store proxy counting this node's operations, for the report's network figures."""

    def __init__(self, store: Any) -> None:
        self.store, self.ops = store, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.store, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.ops += 1
            return attr(*args, **kwargs)
        return counted


# --- every node --------------------------------------------------------------------------
def publish(store: Any, card: NodeCard) -> int:
    """Post this node's card (2 store operations); returns its index."""
    text = card.to_json()
    if len(text) > MAX_CARD_BYTES:  # too many interfaces or problems: keep what matters
        text = NodeCard(**{**card.__dict__, "addresses": {}, "problems": card.problems[:5]}
                        ).to_json()[:MAX_CARD_BYTES]
    index = int(store.add(COUNT_KEY, 1)) - 1
    store.set(storekeys.checkin_card(index), text)
    return index


def await_key(store: Any, key: str, deadline: float) -> bytes | None:
    """The value of key once set (one ``wait`` + one ``multi_get``), or None at the deadline.

    A store whose host went away raises (DistNetworkError): the caller names the host.
    """
    return gather_keys(store, {key: key}, deadline - time.monotonic())[0].get(key)


def await_decision(store: Any, deadline: float) -> CheckinDecision | None:
    raw = await_key(store, DECISION_KEY, deadline)
    return None if raw is None else CheckinDecision.from_json(raw)


# --- the node hosting the store ------------------------------------------------------------
@dataclass
class Board:
    """The host's incremental reader: each card is fetched once, judged as it arrives."""

    store: Any
    me: NodeCard
    expected_hosts: Sequence[str] = ()
    cards: list[NodeCard] = field(default_factory=list)
    refused: list[Problem] = field(default_factory=list)
    read: int = 0
    count: int = 0
    pending: set[int] = field(default_factory=set)  # indices counted, card not yet set
    taken: set[int] = field(default_factory=set)

    def poll(self) -> None:
        """Read the cards posted since the last poll (1 add + 1 check + 1 multi_get)."""
        self.count = int(self.store.add(COUNT_KEY, 0))
        upto = min(self.count, self.me.nodes + EXTRA_CARDS)
        todo = sorted(self.pending | set(range(self.read, upto)))
        self.read = max(self.read, upto)
        if not todo:
            return
        keys = [storekeys.checkin_card(i) for i in todo]
        if not self.store.check(keys):  # a card is set just after its index: or never, if
            # that node died in between; read the others, and retry the missing ones later
            todo = [i for i, k in zip(todo, keys) if self.store.check([k])]
            keys = [storekeys.checkin_card(i) for i in todo]
        self.pending = self.pending | set(range(self.read)) - set(todo) - self.taken
        for i, raw in zip(todo, self.store.multi_get(keys) if keys else []):
            self._take(i, bytes(raw))
            self.taken.add(i)
        self.pending -= self.taken

    def _take(self, index: int, raw: bytes) -> None:
        try:
            if len(raw) > MAX_CARD_BYTES:
                raise ValueError(f"{len(raw)} bytes, over the {MAX_CARD_BYTES} a card may have")
            self.cards.append(NodeCard.from_json(raw))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            self.refused.append(CHECKIN_REFUSED.problem(
                f"check-in card {index} is not a ddpcheck card ({str(exc)[:120]})",
                hosts=[self.me.host]))

    def judge(self, final: bool) -> list[Problem]:
        problems = [*self.refused, *judge(self.cards, self.me, self.expected_hosts, final)]
        cap = self.me.nodes + EXTRA_CARDS
        if self.count > cap:
            problems.append(CHECKIN_REFUSED.problem(
                f"{self.count} check-ins were counted on a job of {self.me.nodes} nodes; "
                f"ddpcheck read the first {cap} and refused the rest", hosts=[self.me.host]))
        return problems

    def collect(self, deadline: float,
                sleep: Callable[[float], None] = time.sleep) -> CheckinDecision:
        """Poll until every node is in, a contradiction shows, or the deadline passes."""
        pause = 0.02
        while True:
            self.poll()
            final = time.monotonic() >= deadline
            problems = self.judge(final)
            same = [c for c in self.cards if c.run_id == self.me.run_id]
            # A contradiction between cards stops the check-in at once; a node's own
            # problems wait for every node, so that each one learns all of them.
            decisive = len(problems) > sum(len(c.problems) for c in same)
            if decisive or len(same) >= self.me.nodes or final:
                return CheckinDecision(problems, node_list(same), self.me.host,
                                       names=dial_names(same))
            sleep(pause)
            pause = min(pause * 1.5, 0.25)  # O(deadline / 0.25 s) polls, whatever N


def node_list(cards: Sequence[NodeCard]) -> list[tuple[str, str, int]]:
    """(host, advertised address, probe port) of each node, sorted by host: one order for all."""
    return sorted((c.host, c.advertised, c.probe_port) for c in cards)


def dial_names(cards: Sequence[NodeCard]) -> dict[str, str]:
    """host -> the name the workers dial to reach rank 0 on it: under c10d torchrun every
    node's FQDN (any node can get rank 0); under spawn/srun the master host of the node that
    starts rank 0 (MASTER_ADDR or the tcp:// host; mastercheck checks it against that node
    there, this against every other node's resolver)."""
    names = {c.host: c.fqdn for c in cards if c.fqdn and c.launch == "--launch torchrun"}
    names.update({c.host: c.master for c in cards if c.master and c.first_rank == 0})
    return names


def publish_decision(store: Any, decision: CheckinDecision, key: str = DECISION_KEY) -> None:
    store.set(key, decision.to_json())


# --- peer-probe results ------------------------------------------------------------------
def post_results(store: Any, index: int, results: dict[str, Any]) -> None:
    """Post this node's peer-probe results under its index (2 store operations)."""
    store.set(storekeys.peer_result(index), json.dumps(results)[:MAX_RESULT_BYTES])
    store.add(storekeys.PEER_COUNT, 1)


def collect_results(store: Any, nodes: Sequence[tuple[str, str, int]], deadline: float,
                    sleep: Callable[[float], None] = time.sleep) -> dict[str, dict]:
    """The host reads every node's results once all are posted (or at the deadline)."""
    pause = 0.02
    while int(store.add(storekeys.PEER_COUNT, 0)) < len(nodes) and time.monotonic() < deadline:
        sleep(pause)
        pause = min(pause * 1.5, 0.25)
    keys = [storekeys.peer_result(i) for i in range(len(nodes))]
    present = [k for k in keys if store.check([k])] if not store.check(keys) else keys
    got: dict[str, dict] = {}
    for key, raw in zip(present, store.multi_get(present) if present else []):
        try:
            got[nodes[int(key.rsplit("/", 1)[1])][0]] = json.loads(bytes(raw))
        except ValueError:
            continue  # truncated or foreign: that node counts as silent
    return got
