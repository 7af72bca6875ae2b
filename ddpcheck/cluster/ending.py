"""The end of a multi-node run: every node shares its outcome, all adopt one verdict.

Runs in the launcher of every node when --nodes > 1, after torchrun ends, on the store
opened by ``ddpcheck.cluster.lifecycle``. Every other node posts its outcome (one key);
the node hosting rank 0 gathers them (one store wait, one multi_get: ``cluster.store``),
names the silent ones, and publishes the whole run's verdict, which the others wait on, so
every node prints the same verdict. The store's host stays up until all have read it.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import ClassVar

from ddpcheck import storekeys
from ddpcheck.cluster import deadlines, messages
from ddpcheck.cluster.nodeflow import FINAL_WAIT, ClusterState
from ddpcheck.cluster.store import gather_keys, hold
from ddpcheck.diagnoses import Problem, register

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

    KIND: ClassVar[str] = "run-outcome"
    host: str
    ready: bool
    problems: tuple[Problem, ...] = ()

    def to_json(self) -> str:
        return messages.encode(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> Outcome:
        return messages.decode(cls, text, {"host": str, "ready": bool})


def _run_id(st: ClusterState) -> str:
    assert st.me is not None
    return st.me.run_id


def _hosts(st: ClusterState) -> list[str]:
    assert st.me is not None
    return [c.host for c in st.cards if c.run_id == st.me.run_id] or [st.me.host]


def post_outcome(st: ClusterState, outcome: Outcome) -> bool:
    """Publish this node's outcome for the rank-0 node; False when the store is gone."""
    if st.store is None or st.me is None:
        return False
    try:
        st.store.set(storekeys.final_node(_run_id(st), outcome.host), outcome.to_json())
        return True
    except (RuntimeError, ValueError, TimeoutError):
        return False


def _world(st: ClusterState) -> tuple[int, int]:
    """(nodes, ranks) of this run, from the check-in cards."""
    assert st.me is not None
    cards = [c for c in st.cards if c.run_id == st.me.run_id] or [st.me]
    return len(cards), sum(max(c.nproc, 1) for c in cards)


def collect_outcomes(st: ClusterState, wait: float | None = None) -> list[Problem]:
    """On the rank-0 node: every other node's problems, and a problem per silent node.

    The wait grows with the nodes (``cluster.deadlines.outcomes``; FINAL_WAIT at its base).
    """
    if st.store is None or st.me is None:
        return []
    wait = deadlines.outcomes(FINAL_WAIT, _world(st)[0]) if wait is None else wait
    others = [h for h in _hosts(st) if h != st.me.host]
    run_id = _run_id(st)
    try:
        got, _ = gather_keys(st.store, {h: storekeys.final_node(run_id, h) for h in others},
                             wait)
    except (RuntimeError, ValueError, TimeoutError):  # the store's host went away
        got = {}
    problems = [p for raw in got.values() for p in Outcome.from_json(raw).problems]
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
        st.store.set(storekeys.final_verdict(_run_id(st)), outcome.to_json())
    except (RuntimeError, ValueError, TimeoutError):
        pass


def await_verdict(st: ClusterState, wait: float | None = None) -> Outcome | Problem:
    """On the other nodes: the rank-0 node's verdict, or the problem of not learning it.

    The wait grows with the world (``cluster.deadlines.verdict``: nodes and ranks, since
    the rank-0 node gathers every rank's events and builds the report after the others).
    """
    if wait is None:
        wait = (deadlines.verdict(2 * FINAL_WAIT + 5, *_world(st)) if st.me is not None
                else 2 * FINAL_WAIT + 5)
    if st.store is not None and st.me is not None:
        key = storekeys.final_verdict(_run_id(st))
        try:
            got, _ = gather_keys(st.store, {"verdict": key}, wait)
        except (RuntimeError, ValueError, TimeoutError):  # the store's host went away
            got = {}
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
    key = storekeys.final_read(_run_id(st))
    try:
        st.store.add(key, 1)
        if st.is_host:  # the others read through our store: keep it up until they have
            hold(st.store, key, len(_hosts(st)), wait)
    except (RuntimeError, ValueError, TimeoutError):  # the store's host is gone
        pass
