"""Tests for cluster.namecheck: lookups under a deadline, and who is blamed for a name that
does not resolve or resolves elsewhere (the resolving node, or the name's own node when
most nodes fail it)."""

from __future__ import annotations

import threading
import time

from ddpcheck.cluster.namecheck import judge_resolutions, names_to_resolve, resolve_all
from ddpcheck.node.netprobe import Resolution

NAMES = {"n0": "n0.cluster", "n1": "n1.cluster", "n2": "n2.cluster"}
ADDRS = {"n0": ["10.0.0.1", "127.0.0.1"], "n1": ["10.0.0.2"], "n2": ["10.0.0.3"]}
GAI = "[Errno -2] Name or service not known"


def good(owner: str) -> dict:
    return {"addresses": [ADDRS[owner][0]], "error": ""}


def bad() -> dict:
    return {"addresses": [], "error": GAI}


def test_a_node_that_cannot_resolve_one_name_is_named_with_the_name_and_the_fix() -> None:
    answers = {"n0": {"n0": good("n0"), "n1": good("n1")},
               "n1": {"n1": good("n1"), "n0": bad()}}
    [p] = judge_resolutions(answers, NAMES, ADDRS)
    assert p.code == "dial-name-unresolvable" and p.hosts == ("n1",)
    assert "on n1, the name 'n0.cluster' its ranks dial to reach n0 does not resolve" \
        in p.observed
    assert GAI in p.observed
    assert "on n1: add `10.0.0.1 n0.cluster` to /etc/hosts" in p.fix
    assert "search" in p.fix and "--local-addr" in p.fix


def test_a_name_that_fails_on_most_nodes_is_its_own_nodes_fault() -> None:
    answers = {h: {"n0": bad(), "n1": good("n1"), "n2": good("n2")} for h in NAMES}
    [p] = judge_resolutions(answers, NAMES, ADDRS)
    assert p.code == "advertised-name-unresolvable" and p.hosts == ("n0",)
    assert "3 of 3 nodes" in p.observed


def test_a_wrong_or_loopback_address_on_another_node_is_named() -> None:
    answers = {"n0": {"n1": {"addresses": ["10.0.0.9"], "error": ""}},
               "n1": {"n1": good("n1"), "n0": {"addresses": ["127.0.1.1"], "error": ""}},
               "n2": {"n2": good("n2")}}
    [p] = judge_resolutions(answers, NAMES, ADDRS)
    assert p.code == "dial-name-wrong-address" and p.hosts == ("n0", "n1")
    assert "resolves to 10.0.0.9, not an address of n1 (10.0.0.2)" in p.observed
    assert "127.0.1.1 (loopback, on another node)" in p.observed


def test_a_node_resolving_its_own_name_to_loopback_is_fine_here() -> None:
    answers = {"n1": {"n1": {"addresses": ["127.0.1.1"], "error": ""}}}
    assert judge_resolutions(answers, NAMES, ADDRS) == []


def test_names_to_resolve_are_this_nodes_own_and_its_targets() -> None:
    assert names_to_resolve("n1", NAMES, ["n0"]) == {"n1": "n1.cluster", "n0": "n0.cluster"}
    assert names_to_resolve("n1", {}, ["n0"]) == {}


def test_a_lookup_that_hangs_is_a_timeout_at_the_deadline() -> None:
    release = threading.Event()

    def resolver(name: str) -> Resolution:
        if name == "slow":
            release.wait(10)
        return Resolution(name, ("10.0.0.1",))

    began = time.monotonic()
    got = resolve_all(["fast", "slow"], timeout=0.3, resolver=resolver)
    release.set()
    assert time.monotonic() - began < 2
    assert got["fast"]["addresses"] == ["10.0.0.1"]
    assert got["slow"] == {"addresses": [], "elapsed": 0.3, "error": "no answer within 0.3 s"}


def test_real_lookups_of_localhost_and_a_name_that_cannot_exist() -> None:
    got = resolve_all(["localhost", "no-such-host.invalid"], timeout=5)
    assert "127.0.0.1" in got["localhost"]["addresses"]
    assert got["no-such-host.invalid"]["addresses"] == []


def test_under_spawn_each_node_is_judged_on_the_master_name_it_dials_itself() -> None:
    names = {"n0": "master"}  # the rank-0 node's MASTER_ADDR
    answers = {"n1": {"n0": {"addresses": ["10.0.0.1"], "name": "master", "error": ""}},
               "n2": {"n0": {"addresses": ["10.0.0.7"], "name": "old-master", "error": ""}}}
    [p] = judge_resolutions(answers, names, ADDRS)
    assert p.code == "dial-name-wrong-address" and p.hosts == ("n2",)
    assert "'old-master' its ranks dial to reach n0 resolves to 10.0.0.7" in p.observed
    assert "on n2: add `10.0.0.1 old-master` to /etc/hosts" in p.fix
