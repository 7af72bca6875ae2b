"""Tests for ddpcheck.peerprobe: judging addresses and connect results, real probes on loopback.

Listeners and probes only use 127.0.0.1; the exchange runs through an in-process HashStore.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import torch.distributed as dist

from ddpcheck import peerprobe
from ddpcheck.checkin import NodeCard
from ddpcheck.peerprobe import (
    Listener,
    exchange_results,
    judge_addresses,
    judge_peers,
    probe_peers,
)


def card(host: str, advertised: str = "", probe_port: int = 0, run_id: str = "job-1"
         ) -> NodeCard:
    return NodeCard(host, 2, run_id, 4, 1, advertised=advertised, probe_port=probe_port)


def outcome(result: str, address: str = "10.0.0.2:40000") -> dict[str, object]:
    return {"address": address, "outcome": result, "elapsed": 0.01, "error": ""}


@pytest.fixture
def listener() -> Iterator[Listener]:
    lst = Listener("127.0.0.1")
    yield lst
    lst.close()


def test_codes_are_registered() -> None:
    from ddpcheck.diagnoses import CATALOGUE

    for diag in (peerprobe.PEER_PORTS_BLOCKED, peerprobe.PEER_UNREACHABLE,
                 peerprobe.ADDRESS_UNUSABLE):
        assert CATALOGUE[diag.code] is diag


# --- judge_addresses ------------------------------------------------------------------------

def test_distinct_cluster_addresses_are_fine() -> None:
    assert judge_addresses([card("a", "10.0.0.1"), card("b", "10.0.0.2")]) == []


def test_loopback_advertised_address_is_unusable() -> None:
    [problem] = judge_addresses([card("a", "127.0.1.1"), card("b", "10.0.0.2")])
    assert problem.code == "address-unusable"
    assert problem.hosts == ("a",)
    assert problem.observed.startswith("a advertises 127.0.1.1, a loopback address")


def test_loopback_on_every_host_is_named_per_host_not_as_a_shared_address() -> None:
    problems = judge_addresses([card("a", "127.0.0.1"), card("b", "127.0.0.1")])
    assert [p.hosts for p in problems] == [("a",), ("b",)]
    assert all("loopback" in p.observed for p in problems)


def test_the_same_address_on_two_hosts_is_unusable() -> None:
    cards = [card("b", "172.17.0.1"), card("a", "172.17.0.1"), card("c", "10.0.0.3")]
    [problem] = judge_addresses(cards)
    assert problem.code == "address-unusable"
    assert problem.hosts == ("a", "b")
    assert problem.observed == "a, b all advertise 172.17.0.1"


def test_nodes_that_advertise_nothing_are_not_judged() -> None:
    assert judge_addresses([card("a"), card("b")]) == []


# --- judge_peers ----------------------------------------------------------------------------

def test_all_connects_ok_is_no_problem() -> None:
    results = {"a": {"b": outcome("ok")}, "b": {"a": outcome("ok", "10.0.0.1:40001")}}
    assert judge_peers(results, 29500) == []


def test_timeouts_and_refusals_are_blocked_peer_ports_naming_the_targets() -> None:
    results = {
        "a": {"b": outcome("timeout", "10.0.0.2:40000"), "c": outcome("ok")},
        "b": {"a": outcome("ok"), "c": outcome("refused", "10.0.0.3:40002")},
        "c": {"a": outcome("ok"), "b": outcome("timeout", "10.0.0.2:40000")},
    }
    [problem] = judge_peers(results, 29500)
    assert problem.code == "peer-ports-blocked"
    assert problem.hosts == ("b", "c")
    assert "while the rendezvous port 29500 answers" in problem.observed
    assert problem.observed.endswith("a -> b 10.0.0.2:40000; c -> b 10.0.0.2:40000; "
                                     "b -> c 10.0.0.3:40002")


def test_no_route_is_peer_unreachable_naming_the_sources() -> None:
    results = {"a": {"b": outcome("ok")},
               "b": {"a": outcome("no-route", "10.0.0.1:40001")}}
    [problem] = judge_peers(results, 29500)
    assert problem.code == "peer-unreachable"
    assert problem.hosts == ("b",)
    assert problem.observed == "connect no-route: b -> a 10.0.0.1:40001"


def test_blocked_and_unreachable_are_reported_apart() -> None:
    results = {"a": {"b": outcome("timeout")}, "b": {"a": outcome("unreachable")}}
    assert [p.code for p in judge_peers(results, 29400)] == ["peer-ports-blocked",
                                                             "peer-unreachable"]


# --- Listener + probe_peers on loopback -----------------------------------------------------

def test_listener_takes_an_ephemeral_port() -> None:
    lst = Listener("127.0.0.1")
    try:
        assert lst.port > 0
    finally:
        lst.close()


def test_probe_peers_reaches_a_listening_peer(listener: Listener) -> None:
    mine = Listener("127.0.0.1")
    try:
        me = card("a", "127.0.0.1", mine.port)
        peer = card("b", "127.0.0.1", listener.port)
        got = probe_peers(me, [me, peer])
    finally:
        mine.close()
    assert list(got) == ["b"]  # never itself
    assert got["b"]["outcome"] == "ok"
    assert got["b"]["address"] == f"127.0.0.1:{listener.port}"
    assert got["b"]["error"] == ""


def test_probe_peers_finds_a_closed_port_refused() -> None:
    gone = Listener("127.0.0.1")
    port = gone.port
    gone.close()
    me, peer = card("a", "127.0.0.1"), card("b", "127.0.0.1", port)
    got = probe_peers(me, [me, peer])
    assert got["b"]["outcome"] == "refused"
    assert got["b"]["elapsed"] < peerprobe.CONNECT_TIMEOUT
    assert judge_peers({"a": got}, 29500)[0].code == "peer-ports-blocked"


def test_probe_peers_skips_peers_without_a_listener() -> None:
    me = card("a", "127.0.0.1")
    assert probe_peers(me, [me, card("b", "127.0.0.1", 0)]) == {}


# --- exchange_results -------------------------------------------------------------------------

def test_exchange_results_collects_every_hosts_results() -> None:
    store = dist.HashStore()
    theirs = {"a": outcome("ok")}
    store.set("ddpcheck/peers/job-1/b", json.dumps(theirs))
    mine = {"b": outcome("ok")}
    start = time.monotonic()
    got = exchange_results(store, card("a"), mine, ["a", "b"], time.monotonic() + 30)
    assert got == {"a": mine, "b": theirs}
    assert time.monotonic() - start < 1.0


def test_exchange_results_stops_at_the_deadline_without_a_silent_host() -> None:
    store = dist.HashStore()
    store.set("ddpcheck/peers/other-run/b", json.dumps({}))  # another run's key is not b's
    mine = {"b": outcome("timeout")}
    start = time.monotonic()
    got = exchange_results(store, card("a"), mine, ["a", "b"], start + 0.3)
    assert got == {"a": mine}
    assert 0.3 <= time.monotonic() - start < 1.5
