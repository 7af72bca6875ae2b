"""Tests for cluster.peerprobe: judging addresses and connect results, real probes on loopback.

Listeners and probes only use 127.0.0.1; the exchange runs through an in-process HashStore.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from ddpcheck.cluster import peerprobe
from ddpcheck.cluster.checkin import NodeCard
from ddpcheck.cluster.pairing import peer_targets
from ddpcheck.cluster.peerprobe import (
    Listener,
    judge_addresses,
    judge_peers,
    probe_peers,
)
from ddpcheck.node.netprobe import ConnectResult


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


def test_timeouts_and_refusals_are_blamed_on_the_common_end_then_listed_as_pairs() -> None:
    results = {
        "a": {"b": outcome("timeout", "10.0.0.2:40000"), "c": outcome("ok")},
        "b": {"a": outcome("ok"), "c": outcome("refused", "10.0.0.3:40002")},
        "c": {"a": outcome("ok"), "b": outcome("timeout", "10.0.0.2:40000")},
    }
    common, pair = judge_peers(results, 29500)
    assert (common.code, common.hosts) == ("peer-ports-blocked", ("b",))
    assert common.observed == ("2 of 2 nodes that probed b (10.0.0.2:40000) could not connect "
                               "(timeout x2) while the rendezvous port 29500 answers: a, c")
    assert (pair.code, pair.hosts) == ("peer-ports-blocked", ("c",))
    assert pair.observed.endswith("answers: b -> c 10.0.0.3:40002")


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
    got = probe_peers(("a", "127.0.0.1", 1), [("a", "127.0.0.1", 1),
                                               ("b", "127.0.0.1", listener.port)])
    assert list(got) == ["b"]  # never itself
    assert got["b"]["outcome"] == "ok"
    assert got["b"]["address"] == f"127.0.0.1:{listener.port}"
    assert got["b"]["error"] == ""


def test_the_listener_accepts_far_more_peers_than_a_listen_backlog(listener: Listener) -> None:
    targets = [(f"n{i}", "127.0.0.1", listener.port) for i in range(300)]
    got = probe_peers(("me", "127.0.0.1", 1), targets)
    assert [r["outcome"] for r in got.values()] == ["ok"] * 300
    deadline = time.monotonic() + 5
    while listener.accepted < 300 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert listener.accepted == 300


def test_probe_peers_runs_connects_at_once_under_one_deadline(monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    def slow_timeout(host: str, port: int, timeout: float, source_addr: str | None = None
                     ) -> ConnectResult:
        time.sleep(min(timeout, 0.5))  # a dropped SYN: the connect waits out its timeout
        return ConnectResult("timeout", host, min(timeout, 0.5), "no reply")

    monkeypatch.setattr(peerprobe, "tcp_connect", slow_timeout)
    start = time.monotonic()
    got = probe_peers(("me", "127.0.0.1", 1), [(f"n{i}", "10.0.0.9", 4000) for i in range(20)])
    assert {r["outcome"] for r in got.values()} == {"timeout"} and len(got) == 20
    assert time.monotonic() - start < 2.0  # one after another: 10 s


def test_probe_peers_finds_a_closed_port_refused() -> None:
    gone = Listener("127.0.0.1")
    port = gone.port
    gone.close()
    got = probe_peers(("a", "127.0.0.1", 1), [("b", "127.0.0.1", port)])
    assert got["b"]["outcome"] == "refused"
    assert got["b"]["elapsed"] < peerprobe.CONNECT_TIMEOUT
    assert judge_peers({"a": got}, 29500)[0].code == "peer-ports-blocked"


def test_probe_peers_skips_peers_without_a_listener() -> None:
    assert probe_peers(("a", "127.0.0.1", 1), [("b", "127.0.0.1", 0)]) == {}


# --- blame on the common end ------------------------------------------------------------------

def _mesh_results(n: int, bad: Callable[[str, str], str | None]) -> dict[str, dict]:
    hosts = [f"n{i:04d}" for i in range(n)]
    return {hosts[i]: {hosts[j]: outcome(bad(hosts[i], hosts[j]) or "ok", f"10.0.{j}.1:4000")
                       for j in peer_targets(i, n, 0, "s")} for i in range(n)}


@pytest.mark.parametrize("n", [3, 8, 64, 1024])
def test_a_node_refusing_every_incoming_connection_is_named_alone(n: int) -> None:
    victim = "n0002"
    results = _mesh_results(n, lambda s, d: "timeout" if d == victim else None)
    [problem] = judge_peers(results, 29500)
    assert problem.code == "peer-ports-blocked" and problem.hosts == (victim,)
    assert "could not connect (timeout x" in problem.observed
    assert "allow incoming TCP on n0002" in problem.fix


def test_a_node_that_reaches_nobody_is_named_as_the_source() -> None:
    results = _mesh_results(64, lambda s, d: "no-route" if s == "n0005" else None)
    [problem] = judge_peers(results, 29500)
    assert problem.code == "peer-unreachable" and problem.hosts == ("n0005",)
    assert "own outgoing connections fail" in problem.cause


def test_silent_nodes_are_named() -> None:
    [problem] = judge_peers({"a": {}}, 29500, silent=["b"])
    assert problem.code == "peer-results-missing" and problem.hosts == ("b",)
