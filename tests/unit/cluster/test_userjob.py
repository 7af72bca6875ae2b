"""Tests for ddpcheck.cluster.userjob: the conditions of the user's own torchrun that ddpcheck's
launch does differently (who hosts the store, the FQDN rank 0 advertises)."""

from __future__ import annotations

import socket

import pytest

from ddpcheck.cluster import userjob


def test_an_endpoint_torch_does_not_recognise_on_its_node_is_named() -> None:
    p = userjob.hosting_problem("10.9.0.5", "node0", True, would_host=lambda h: False)
    assert p is not None and p.code == "endpoint-not-recognised" and p.hosts == ("node0",)
    assert "would not host the store" in p.observed


def test_an_endpoint_that_also_matches_another_node_is_named() -> None:
    p = userjob.hosting_problem("head", "node1", False, would_host=lambda h: True)
    assert p is not None and p.code == "endpoint-matches-other-node"


@pytest.mark.parametrize("here,torch_says", [(True, True), (False, False)])
def test_agreeing_choices_are_no_problem(here: bool, torch_says: bool) -> None:
    assert userjob.hosting_problem("n0", "n0", here, would_host=lambda h: torch_says) is None


def test_every_peer_name_is_checked_on_small_clusters() -> None:
    hosts = [f"n{i}" for i in range(5)]
    assert userjob.peers_to_check("n2", hosts) == ["n0", "n1", "n3", "n4"]


def test_large_clusters_check_a_bounded_sample_that_covers_every_name() -> None:
    hosts = [f"n{i:04d}" for i in range(1024)]
    picked = {h: userjob.peers_to_check(h, hosts) for h in hosts}
    assert max(len(v) for v in picked.values()) <= 8
    checked_by: dict[str, int] = {}
    for targets in picked.values():
        for t in targets:
            checked_by[t] = checked_by.get(t, 0) + 1
    assert set(checked_by) == set(hosts) and min(checked_by.values()) >= 4


def test_names_that_fail_or_point_elsewhere_are_blamed_on_their_node() -> None:
    fqdns = {"a": "a.cluster", "b": "b.cluster", "c": "c.cluster"}
    addrs = {"a": ["10.0.0.1"], "b": ["10.0.0.2"], "c": ["10.0.0.3"]}
    table = {"b.cluster": ["10.0.0.2"], "c.cluster": ["10.9.9.9"]}

    def resolve(name: str) -> list[str]:
        if name not in table:
            raise socket.gaierror(-2, "Name or service not known")
        return table[name]
    got = userjob.judge_names("a", fqdns, addrs, resolve)
    assert [(p.code, p.hosts) for p in got] == [("advertised-name-wrong-address", ("c",))]
    fqdns["b"] = "b.unknown"
    got = userjob.judge_names("a", fqdns, addrs, resolve)
    assert ("advertised-name-unresolvable", ("b",)) in [(p.code, p.hosts) for p in got]
    assert "Name or service not known" in got[0].observed


def test_resolve_ipv4_of_localhost() -> None:
    assert "127.0.0.1" in userjob.resolve_ipv4("localhost")
