"""Tests for ddpcheck.worker.agreement: rank 0's decision rules and the layout codec."""

from __future__ import annotations

from ddpcheck.worker.agreement import decode_hosts, encode_hosts, odd_collections, probe_decision
from ddpcheck.worker.world import Exchange


def test_the_layout_crosses_as_one_run_per_node_and_back() -> None:
    hosts = {0: "a", 1: "a", 2: "b", 3: "b", 5: "a"}
    runs = encode_hosts(hosts)
    assert runs == [["a", 0, 2], ["b", 2, 2], ["a", 5, 1]]
    assert decode_hosts(runs) == hosts
    big = {r: f"n{r // 8}" for r in range(8192)}
    assert len(encode_hosts(big)) == 1024 and decode_hosts(encode_hosts(big)) == big


def test_a_probe_fails_for_all_when_it_failed_anywhere() -> None:
    ok = {"status": "PASS", "breaks_world": False}
    assert probe_decision(Exchange({0: ok, 1: ok}, ())) == {
        "fail": False, "breaks": False, "own_only": False}
    failed = {"status": "FAIL", "breaks_world": False}
    assert probe_decision(Exchange({0: ok, 1: failed}, ())) == {
        "fail": True, "breaks": False, "own_only": False}
    broken = {"status": "FAIL", "breaks_world": True}
    assert probe_decision(Exchange({0: broken, 1: ok}, ())) == {
        "fail": True, "breaks": True, "own_only": False}


def test_ddpchecks_own_failures_alone_leave_the_world_usable() -> None:
    own = {"status": "FAIL", "breaks_world": False, "own": True}
    ok = {"status": "PASS", "breaks_world": False}
    assert probe_decision(Exchange({0: own, 1: ok}, ()))["own_only"] is True
    # a peer's collective timed out after it: not only ddpcheck's own any more
    broken = {"status": "FAIL", "breaks_world": True}
    assert probe_decision(Exchange({0: own, 1: broken}, ())) == {
        "fail": True, "breaks": True, "own_only": False}


def test_the_ranks_that_collected_other_probes_than_rank_0_are_named() -> None:
    ref = {"digest": "aa", "count": 3}
    got = odd_collections(Exchange({0: ref, 1: ref, 2: {"digest": "bb", "count": 4}}, ()))
    assert got == {"odd": [2], "reference": ref}
