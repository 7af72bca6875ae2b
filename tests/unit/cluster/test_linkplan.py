"""Tests for cluster.linkplan: the rounds of the link stage, and verdicts on generated matrices."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from ddpcheck.cluster import linkplan
from ddpcheck.verdicts import links


def test_up_to_the_threshold_the_plan_is_the_whole_matrix() -> None:
    n = linkplan.FULL_MATRIX_MAX
    rounds = linkplan.initial_rounds(n)
    assert rounds == links.round_robin(n) and len(rounds) == n - 1
    assert linkplan.followup_rounds(n, {(0, 1): 0.01, (1, 0): 0.01, (2, 3): 1.0}) == []


@pytest.mark.parametrize("n", [33, 48, 63, 64, 100, 513, 1024])
def test_above_it_rounds_are_disjoint_o_log_n_and_cover_every_node(n: int) -> None:
    rounds = linkplan.initial_rounds(n)
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

    first = linkplan.initial_rounds(n)
    matrix = _measure(n, speed, rng, first)
    more = linkplan.followup_rounds(n, matrix)
    assert (more == []) == (fault == "healthy")  # targeted tests only for suspects
    matrix |= _measure(n, speed, rng, more)
    assert len(first) + len(more) <= 2 * math.log2(n) + 8
    named = [(p.code, p.hosts) for p in links.link_verdicts(
        {(f"n{a:03d}", f"n{b:03d}"): v for (a, b), v in matrix.items()})]
    expected = {"healthy": [], "node": [("slow-node", ("n077",))],
                "link": [("slow-link", ("n100", "n101"))]}[fault]
    assert named == expected


def test_followups_pair_each_suspect_with_fresh_healthy_partners_in_disjoint_rounds() -> None:
    n = 64
    first = linkplan.initial_rounds(n)
    matrix = {k: (0.1 if 5 in k else 1.0) for r in first for a, b in r for k in ((a, b), (b, a))}
    more = linkplan.followup_rounds(n, matrix)
    tests = [p for r in more for p in r]
    suspects = linkplan.suspects(n, matrix, 0.5)
    assert 5 in suspects
    assert all(frozenset(p) not in {frozenset(k) for k in matrix} for p in tests)
    assert Counter(x for p in tests for x in p if x in suspects)[5] == linkplan.SUSPECT_PARTNERS
    for r in more:
        nodes = [x for p in r for x in p]
        assert len(nodes) == len(set(nodes))


def test_a_slow_fabric_is_the_norm_not_a_list_of_suspects() -> None:
    n = 40
    matrix = {(a, b): (0.1 if a % 2 else 1.0) for a in range(n) for b in range(n) if a != b}
    assert linkplan.suspects(n, matrix, 0.5) == []


def test_the_deadline_grows_with_the_rounds() -> None:
    assert linkplan.round_budget(14, 10.0, 20.0) == 160.0
