"""Tests for cluster.pairing: the three pairing plans (peer probes, round robin, link rounds),
their properties, and the link verdicts on generated matrices."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddpcheck.cluster import pairing
from ddpcheck.cluster.pairing import peer_targets, round_robin
from ddpcheck.judgements import links


def test_up_to_the_threshold_the_plan_is_the_whole_matrix() -> None:
    n = pairing.FULL_MATRIX_MAX
    rounds = pairing.initial_rounds(n)
    assert rounds == round_robin(n) and len(rounds) == n - 1
    assert pairing.followup_rounds(n, {(0, 1): 0.01, (1, 0): 0.01, (2, 3): 1.0}) == []


@pytest.mark.parametrize("n", [33, 48, 63, 64, 100, 513, 1024])
def test_above_it_rounds_are_disjoint_o_log_n_and_cover_every_node(n: int) -> None:
    rounds = pairing.initial_rounds(n)
    assert len(rounds) <= math.log2(n) + 4 <= 2 * math.log2(n) + 8
    degree: Counter[int] = Counter()
    for r in rounds:
        nodes = [x for pair in r for x in pair]
        assert len(nodes) == len(set(nodes)), "a node in two pairs of one round"
        assert all(0 <= a < b < n for a, b in r)
        degree.update(nodes)
    assert len(degree) == n and min(degree.values()) >= 3
    well = sum(d >= math.floor(math.log2(n)) for d in degree.values())
    assert well >= 0.9 * n  # nearly every node meets ~log2 n partners
    pairs = {p for r in rounds for p in r}
    assert all((i, i + 1) in pairs for i in range(n - 1)) and (0, n - 1) in pairs  # the ring
    assert len(pairs) == sum(map(len, rounds))  # no pair measured twice


def _measure(n: int, speed, rng: random.Random, rounds) -> dict[tuple[int, int], float]:
    return {k: speed(*k) * rng.uniform(0.7, 1.3)
            for r in rounds for a, b in r for k in ((a, b), (b, a))}


@pytest.mark.parametrize("fault", ["healthy", "node", "link"])
def test_the_injected_fault_and_only_it_is_named_at_256_nodes(fault: str) -> None:
    n, rng = 256, random.Random(7)

    def speed(a: int, b: int) -> float:
        if fault == "node" and 77 in (a, b):
            return 2.0
        if fault == "link" and {a, b} == {100, 101}:
            return 1.0
        return 10.0

    first = pairing.initial_rounds(n)
    matrix = _measure(n, speed, rng, first)
    more = pairing.followup_rounds(n, matrix)
    assert (more == []) == (fault == "healthy")  # targeted tests only for suspects
    matrix |= _measure(n, speed, rng, more)
    assert len(first) + len(more) <= 2 * math.log2(n) + 8
    named = [(p.code, p.hosts) for p in links.judge_links(
        {(f"n{a:03d}", f"n{b:03d}"): v for (a, b), v in matrix.items()})]
    expected = {"healthy": [], "node": [("slow-node", ("n077",))],
                "link": [("slow-link", ("n100", "n101"))]}[fault]
    assert named == expected


def test_followups_pair_each_suspect_with_fresh_healthy_partners_in_disjoint_rounds() -> None:
    n = 64
    first = pairing.initial_rounds(n)
    matrix = {k: (0.1 if 5 in k else 1.0) for r in first for a, b in r for k in ((a, b), (b, a))}
    more = pairing.followup_rounds(n, matrix)
    tests = [p for r in more for p in r]
    suspects = pairing.suspects(n, matrix, 0.5)
    assert 5 in suspects
    assert all(frozenset(p) not in {frozenset(k) for k in matrix} for p in tests)
    assert Counter(x for p in tests for x in p if x in suspects)[5] == pairing.SUSPECT_PARTNERS
    for r in more:
        nodes = [x for p in r for x in p]
        assert len(nodes) == len(set(nodes))


def test_a_slow_fabric_is_the_norm_not_a_list_of_suspects() -> None:
    n = 40
    matrix = {(a, b): (0.1 if a % 2 else 1.0) for a in range(n) for b in range(n) if a != b}
    assert pairing.suspects(n, matrix, 0.5) == []


# --- the sampled pattern ----------------------------------------------------------------------

def test_up_to_the_threshold_every_node_probes_every_other() -> None:
    n = pairing.FULL_MESH_MAX
    assert peer_targets(3, n) == [j for j in range(n) if j != 3]


@pytest.mark.parametrize("n", [33, 100, 1024])
def test_above_the_threshold_each_node_probes_o_log_n_peers_and_is_probed_as_often(n: int
                                                                                   ) -> None:
    plan = {i: peer_targets(i, n, endpoint=0, seed="job-1") for i in range(n)}
    log2 = math.ceil(math.log2(n))
    assert all(len(t) <= log2 + 2 + pairing.RANDOM_PEERS for t in plan.values())
    assert all(i not in t and (i + 1) % n in t and (i - 1) % n in t for i, t in plan.items())
    inbound = Counter(j for t in plan.values() for j in t)
    assert min(inbound[j] for j in range(1, n)) >= log2 - 1  # enough probers to blame by majority
    assert inbound[0] == n - 1  # everyone probes the endpoint node
    assert sum(len(t) for t in plan.values()) <= n * (log2 + 4)
    assert plan == {i: peer_targets(i, n, endpoint=0, seed="job-1") for i in range(n)}


# --- round_robin -------------------------------------------------------------------------------
@pytest.mark.parametrize("n", range(2, 18))
def test_round_robin_pairs_every_node_once_and_no_node_twice_per_round(n):
    rounds = round_robin(n)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    pairs = [p for rnd in rounds for p in rnd]
    assert sorted(pairs) == list(itertools.combinations(range(n), 2))
    for rnd in rounds:
        nodes = [x for p in rnd for x in p]
        assert len(nodes) == len(set(nodes))
        assert len(rnd) == n // 2  # odd n: exactly one node sits out each round
    if n % 2:
        byes = [(set(range(n)) - {x for p in rnd for x in p}).pop() for rnd in rounds]
        assert sorted(byes) == list(range(n))  # every node sits out exactly once


def test_round_robin_is_deterministic_with_ordered_pairs():
    assert round_robin(4) == [[(0, 3), (1, 2)], [(0, 2), (1, 3)], [(0, 1), (2, 3)]]
    assert round_robin(6) == round_robin(6)
    assert all(a < b for rnd in round_robin(9) for a, b in rnd)


@pytest.mark.parametrize("n, expected", [(0, []), (1, []), (2, [[(0, 1)]]),
                                         (3, [[(1, 2)], [(0, 2)], [(0, 1)]])])
def test_round_robin_small_worlds(n, expected):
    assert round_robin(n) == expected


def test_round_robin_rejects_negative_n():
    with pytest.raises(ValueError):
        round_robin(-1)


# --- properties every plan keeps (generated sizes) ----------------------------------------------
Round = list[tuple[int, int]]


def _no_node_twice(rnd: Round) -> bool:
    nodes = [x for pair in rnd for x in pair]
    return len(nodes) == len(set(nodes))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 96))
def test_round_robin_meets_every_pair_once_in_at_most_n_disjoint_rounds(n: int) -> None:
    rounds = round_robin(n)
    assert sorted(p for r in rounds for p in r) == list(itertools.combinations(range(n), 2))
    assert all(_no_node_twice(r) for r in rounds)
    assert len(rounds) == (0 if n < 2 else n - 1 if n % 2 == 0 else n)
    assert rounds == round_robin(n)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 700))
def test_link_rounds_are_disjoint_new_pairs_bounded_and_deterministic(n: int) -> None:
    rounds = pairing.initial_rounds(n)
    pairs = [p for r in rounds for p in r]
    assert all(0 <= a < b < n for a, b in pairs)
    assert all(_no_node_twice(r) and r for r in rounds)
    assert len(pairs) == len(set(pairs)), "a pair measured twice"
    assert {x for p in pairs for x in p} == set(range(n)), "a node never measured"
    if n <= pairing.FULL_MATRIX_MAX:  # every pair, once: the round robin
        assert sorted(pairs) == list(itertools.combinations(range(n), 2))
        assert len(rounds) <= n
    else:
        assert len(rounds) <= 2 * math.log2(n) + 8
    assert rounds == pairing.initial_rounds(n)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 1100).flatmap(lambda n: st.tuples(
    st.just(n), st.integers(0, n - 1), st.integers(0, n - 1), st.text(max_size=6))))
def test_peer_targets_are_other_nodes_bounded_and_the_same_on_every_node(args) -> None:
    n, index, endpoint, seed = args
    targets = peer_targets(index, n, endpoint, seed)
    assert targets == sorted(set(targets)) and index not in targets
    assert all(0 <= j < n for j in targets)
    assert targets == peer_targets(index, n, endpoint, seed)  # every node computes the same
    if n <= pairing.FULL_MESH_MAX:  # every ordered pair probed, exactly once
        assert targets == [j for j in range(n) if j != index]
    else:
        assert len(targets) <= math.ceil(math.log2(n)) + 2 + pairing.RANDOM_PEERS
        assert {(index - 1) % n, (index + 1) % n} <= set(targets)
        assert endpoint == index or endpoint in targets


@settings(max_examples=60, deadline=None)
@given(st.sets(st.tuples(st.integers(0, 40), st.integers(0, 40)).filter(lambda p: p[0] < p[1]),
               max_size=120))
def test_schedule_places_each_pair_once_in_disjoint_rounds(tests: set[tuple[int, int]]) -> None:
    given_pairs = sorted(tests)
    rounds = pairing.schedule(given_pairs)
    assert sorted(p for r in rounds for p in r) == given_pairs
    assert all(_no_node_twice(r) for r in rounds)
    degree = Counter(x for p in given_pairs for x in p)
    assert len(rounds) <= max(2 * max(degree.values(), default=0) - 1, 0)  # greedy colouring
    assert rounds == pairing.schedule(given_pairs)


@settings(max_examples=25, deadline=None)
@given(st.integers(33, 300).flatmap(lambda n: st.tuples(
    st.just(n), st.sets(st.integers(0, n - 1), min_size=1, max_size=3))))
def test_followups_are_fresh_disjoint_pairs_for_suspects_only(args) -> None:
    n, slow = args
    first = pairing.initial_rounds(n)
    matrix = {k: (0.1 if set(k) & slow else 1.0) for r in first for a, b in r
              for k in ((a, b), (b, a))}
    more = pairing.followup_rounds(n, matrix)
    suspects = set(pairing.suspects(n, matrix, 0.5))
    measured = {frozenset(k) for k in matrix}
    tests = [p for r in more for p in r]
    assert all(_no_node_twice(r) for r in more)
    assert all(frozenset(p) not in measured and set(p) & suspects for p in tests)
    assert len(tests) == len(set(tests))
    assert more == pairing.followup_rounds(n, matrix)
