"""Tests for ddpcheck.cluster.board: the O(N) check-in protocol on a real in-process c10d store.

Stores are HashStores wrapped in the counting store; simulated nodes run the real
ddpcheck.cluster.lifecycle steps (tests/helpers/simnodes.py), with connects simulated.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import torch.distributed as dist

from ddpcheck import diagnoses, storekeys
from ddpcheck.cluster import board
from ddpcheck.cluster.board import Board, CheckinDecision
from ddpcheck.cluster.checkin import NodeCard
from ddpcheck.diagnoses import Problem
from tests.helpers import simnodes
from tests.helpers.counting_store import CountingStore


def card(host: str, nodes: int = 2, run_id: str = "job-1", **kw: Any) -> NodeCard:
    return NodeCard(host, nodes, run_id, 4, pid=1000 + len(host), **kw)


def test_the_host_reads_each_card_once_as_it_arrives() -> None:
    store = CountingStore(dist.HashStore())
    a, b = card("a", 3), card("b", 3)
    board.publish(store.client("a"), a)
    reader = Board(store.client("host"), a)
    reader.poll()
    board.publish(store.client("b"), b)
    reader.poll()
    reader.poll()
    assert reader.cards == [a, b]
    # add + check + multi_get of 1 new card, twice; then add alone: no card read twice
    assert store.ops["host"]["multi_get"] == 2 and store.keys["host"] == 3 + 3 + 1


def test_collect_returns_when_every_node_is_in_and_stops_at_the_deadline() -> None:
    store = dist.HashStore()
    a, b = card("a"), card("b")
    board.publish(store, a)
    start = time.monotonic()
    v = Board(store, a, ["a", "b"]).collect(start + 0.3)
    assert [p.code for p in v.problems] == ["node-missing"] and v.problems[0].hosts == ("b",)
    assert 0.3 <= time.monotonic() - start < 1.5
    board.publish(store, b)
    v = Board(store, a).collect(time.monotonic() + 30)
    assert v.problems == [] and v.nodes == [("a", "", 0), ("b", "", 0)]


def test_collect_stops_at_once_on_a_contradiction() -> None:
    store = dist.HashStore()
    a = card("a", nodes=3)
    board.publish(store, a)
    board.publish(store, card("b", nodes=2))
    start = time.monotonic()
    v = Board(store, a).collect(start + 30)
    assert [p.code for p in v.problems] == ["nodes-mismatch"]
    assert time.monotonic() - start < 1.0


def test_an_absurd_card_count_is_refused_without_reading_or_waiting() -> None:
    store = CountingStore(dist.HashStore())
    a = card("a")
    board.publish(store.client("a"), a)
    store.store.add(board.COUNT_KEY, 10**9)  # a stranger on the rendezvous port
    start = time.monotonic()
    v = Board(store.client("host"), a).collect(start + 0.5)
    assert "checkin-refused" in [p.code for p in v.problems]
    assert any("1000000001 check-ins were counted on a job of 2 nodes" in p.observed
               for p in v.problems)
    assert time.monotonic() - start < 1.0
    assert store.keys["host"] < 100  # never 10^9 keys


@pytest.mark.parametrize("raw", [b"x" * (board.MAX_CARD_BYTES + 1), b"not json", b"[1, 2]"])
def test_oversized_or_foreign_cards_are_refused_by_index(raw: bytes) -> None:
    store = dist.HashStore()
    a = card("a")
    board.publish(store, a)
    store.set(storekeys.checkin_card(1), raw)
    store.add(board.COUNT_KEY, 1)
    v = Board(store, a).collect(time.monotonic() + 0.3)
    refused = [p for p in v.problems if p.code == "checkin-refused"]
    assert refused and refused[0].observed.startswith("check-in card 1 is not a ddpcheck card")


def test_a_huge_card_of_our_own_is_trimmed_to_fit() -> None:
    store = dist.HashStore()
    big = card("a", addresses={f"eth{i}": ["10.0.0.1"] * 50 for i in range(100)},
               problems=(diagnoses.BAD_SOCKET_IFNAME.problem("y" * 100),) * 200)
    board.publish(store, big)
    raw = store.get(storekeys.checkin_card(0))
    assert len(raw) <= board.MAX_CARD_BYTES
    assert NodeCard.from_json(raw).host == "a"


def test_await_verdict_returns_none_at_the_deadline_and_the_verdict_once_set() -> None:
    store = dist.HashStore()
    start = time.monotonic()
    assert board.await_decision(store, start + 0.2) is None
    assert 0.15 <= time.monotonic() - start < 1.5
    board.publish_decision(store, CheckinDecision([], [("a", "10.0.0.1", 4000)], "a"))
    got = board.await_decision(store, time.monotonic() + 5)
    assert got is not None and got.nodes == [("a", "10.0.0.1", 4000)] and got.host == "a"


def test_collect_results_names_nothing_for_a_silent_node_but_returns_the_others() -> None:
    store = dist.HashStore()
    nodes = [("a", "", 1), ("b", "", 1)]
    board.post_results(store, 0, {"b": {"outcome": "ok"}})
    got = board.collect_results(store, nodes, time.monotonic() + 0.2)
    assert got == {"a": {"b": {"outcome": "ok"}}}
    assert json.loads(store.get(storekeys.peer_result(0))) == got["a"]


@pytest.mark.parametrize("n", [4, 48])
def test_simulated_nodes_check_in_with_constant_store_operations_per_node(n: int) -> None:
    got = simnodes.simulate(n)
    assert all(st.problems == [] for st in got.states)
    mean, worst, host = got.ops_per_node()
    assert worst <= 10  # card 2, verdict 2, peers 2, peer verdict 2, settle 1: O(1)
    assert host <= 60  # O(polls), bounded by time, plus one multi_get per batch


def test_one_node_refusing_connections_is_named_on_every_simulated_node() -> None:
    got = simnodes.simulate(40, refusing="node0007")
    for st in got.states:
        assert [(p.code, p.hosts) for p in st.problems] == [("peer-ports-blocked",
                                                              ("node0007",))]


def test_a_node_that_died_between_its_index_and_its_card_does_not_hide_later_cards() -> None:
    store = dist.HashStore()
    a, c = card("a", 2), card("c", 2)
    board.publish(store, a)
    store.add(board.COUNT_KEY, 1)  # index 1 taken, card never set: that node was killed
    board.publish(store, c)
    v = Board(store, a).collect(time.monotonic() + 5)
    assert v.problems == [] and [n[0] for n in v.nodes] == ["a", "c"]


def test_a_nodes_own_problem_waits_for_every_node_so_each_learns_all() -> None:
    store = dist.HashStore()
    a = card("a", problems=(Problem("master-port-in-use", "s", "o", "c", "f", hosts=("a",)),))
    board.publish(store, a)
    start = time.monotonic()
    v = Board(store, a).collect(start + 0.4)  # b never comes: the deadline, not at once
    assert time.monotonic() - start >= 0.4 and [p.code for p in v.problems] == [
        "master-port-in-use"]
    board.publish(store, card("b"))
    v = Board(store, a).collect(time.monotonic() + 30)  # b is in: at once, with a's problem
    assert v.nodes == [("a", "", 0), ("b", "", 0)] and v.problems[0].code == "master-port-in-use"


def test_the_verdict_carries_the_names_torchrun_nodes_dial() -> None:
    cards = [NodeCard("a", 2, "j", 1, 1, fqdn="a.x", launch="--launch torchrun"),
             NodeCard("b", 2, "j", 1, 1, fqdn="b.x", launch="--launch spawn env://")]
    names = board.dial_names(cards)
    assert names == {"a": "a.x"}  # spawn's ranks dial MASTER_ADDR (mastercheck), not FQDNs
    sent = CheckinDecision([], [("a", "10.0.0.1", 1)], "a", names=names)
    got = CheckinDecision.from_json(sent.to_json())
    assert got.names == {"a": "a.x"}
    assert CheckinDecision.from_json('{"problems": [], "nodes": []}').names == {}
    spawn = [NodeCard("a", 2, "j", 1, 1, launch="--launch spawn env://", first_rank=0,
                      master="head"),
             NodeCard("b", 2, "j", 1, 1, launch="--launch spawn env://", first_rank=1,
                      master="head")]
    assert board.dial_names(spawn) == {"a": "head"}  # the node starting rank 0: its master
