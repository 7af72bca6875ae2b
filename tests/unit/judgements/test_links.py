"""Tests for ddpcheck.judgements.links: link/node verdicts, scaling.

Matrices and wait times are in tests/data/links: recorded gloo runs on this machine
(waits_recorded_*, allreduce_sweep_*), and seeded or hand-written inputs modelled on real
clusters (each file's "description" says which).
"""

from __future__ import annotations

import itertools
import json
import random

import pytest

from ddpcheck.diagnoses import CATALOGUE
from ddpcheck.judgements.expectations import judge_expectation
from ddpcheck.judgements.links import (
    hosts_of,
    judge_links,
    link_figures,
    scaling_table,
)
from tests.helpers.linkdata import load_matrix, scaling_rows
from tests.helpers.paths import DATA

DATA = DATA / "links"


def load_waits(name: str) -> tuple[dict[int, list[float]], dict[int, str]]:
    data = json.loads((DATA / name).read_text())
    return ({int(r): w for r, w in data["waits"].items()},
            {int(r): h for r, h in data["hosts"].items()})


def noisy_matrix(hosts: list[str], nominal, noise: float, rnd: random.Random):
    return {(a, b): nominal(a, b) * rnd.uniform(1 - noise, 1 + noise)
            for a, b in itertools.permutations(hosts, 2)}


# --- link figures ------------------------------------------------------------------------------
def test_link_figure_is_the_faster_direction_in_host_order():
    m = {("a", "b"): 2.0, ("b", "a"): 1.5, ("a", "c"): 0.3, ("c", "a"): 0.4}
    assert hosts_of(m) == ["a", "b", "c"]
    assert link_figures(m) == {("a", "b"): 2.0, ("a", "c"): 0.4}


def test_one_slow_direction_alone_is_not_a_slow_link():
    m = {(a, b): 1.0 for a in "pqrs" for b in "pqrs" if a != b}
    m[("p", "q")] = 0.2  # a busy host at that moment, not a bad link
    assert judge_links(m) == []
    m[("q", "p")] = 0.25
    [problem] = judge_links(m)
    assert problem.code == "slow-link" and problem.hosts == ("p", "q")


def test_link_figure_uses_the_one_direction_measured():
    assert link_figures({("a", "b"): 1.2}) == {("a", "b"): 1.2}


# --- link verdicts on recorded matrices ---------------------------------------------------------
@pytest.mark.parametrize("name", ["healthy_4node_ib.json", "healthy_8node_25gbe_noisy.json",
                                  "healthy_6node_two_leaves.json", "healthy_3node_edges.json"])
def test_healthy_matrices_give_no_problem(name):
    assert judge_links(load_matrix(name)) == []


def test_one_slow_pair_is_a_slow_link_with_both_directions():
    m = load_matrix("slow_link_4node.json")
    [p] = judge_links(m)
    assert p.code == "slow-link"
    assert p.hosts == ("gpu-a", "gpu-c")
    assert p.observed.startswith(
        "link gpu-a <-> gpu-c: 0.11 GB/s (gpu-a->gpu-c 0.11, gpu-c->gpu-a 0.10), "
        "the median link is ")
    assert p.observed.endswith(" GB/s")


def test_one_slow_pair_among_three_nodes_is_a_slow_link_not_a_slow_node():
    m = {(a, b): 1.9 for a, b in itertools.permutations("abc", 2)}
    m[("a", "c")], m[("c", "a")] = 0.11, 0.12
    [p] = judge_links(m)
    assert (p.code, p.hosts) == ("slow-link", ("a", "c"))
    assert p.observed == ("link a <-> c: 0.12 GB/s (a->c 0.11, c->a 0.12), the median link is "
                          "1.9 GB/s")


def test_a_node_with_every_link_slow_is_one_slow_node_problem():
    problems = judge_links(load_matrix("slow_node_8node.json"))
    assert [p.code for p in problems] == ["slow-node"]
    p = problems[0]
    assert p.hosts == ("gpu-c",)
    assert p.observed.startswith("every link of gpu-c is slow: 0.10-0.13 GB/s, the median link")
    assert "2.0 GB/s" in p.observed


def test_slow_node_among_three_nodes_despite_two_of_three_links_being_slow():
    [p] = judge_links(load_matrix("slow_node_3node.json"))
    assert (p.code, p.hosts) == ("slow-node", ("gpu-c",))
    assert "the median link is 2.0 GB/s" in p.observed


def test_two_slow_nodes_are_two_slow_node_problems_and_their_shared_link_is_not_repeated():
    problems = judge_links(load_matrix("two_slow_nodes_8node.json"))
    assert [(p.code, p.hosts) for p in problems] == [("slow-node", ("gpu-c",)),
                                                      ("slow-node", ("gpu-f",))]


def test_two_nodes_have_no_relative_verdict_but_an_absolute_one():
    m = load_matrix("two_node_slow.json")
    assert judge_links(m) == []
    [p] = judge_expectation(min(link_figures(m).values()), 9.0, "per link (100 GbE)")
    assert p.code == "below-expected-bandwidth"
    assert p.observed == "expected >= 9.0 GB/s per link (100 GbE), measured 1.1 GB/s"


def test_slow_node_and_an_unrelated_slow_link_are_both_reported():
    hosts = [f"n{i}" for i in range(6)]
    m = {(a, b): 2.0 for a, b in itertools.permutations(hosts, 2)}
    for other in hosts[1:]:
        m[("n0", other)] = m[(other, "n0")] = 0.2
    m[("n3", "n4")], m[("n4", "n3")] = 0.4, 0.45
    problems = judge_links(m)
    assert [(p.code, p.hosts) for p in problems] == [("slow-node", ("n0",)),
                                                      ("slow-link", ("n3", "n4"))]
    assert "(n3->n4 0.40, n4->n3 0.45)" in problems[1].observed


def test_when_most_nodes_are_slow_nothing_is_relatively_slow():
    hosts = [f"n{i}" for i in range(8)]
    fast = {"n0", "n1", "n2"}
    m = {(a, b): 2.0 if {a, b} <= fast else 0.2 for a, b in itertools.permutations(hosts, 2)}
    assert judge_links(m) == []


def test_a_missing_direction_shows_as_unknown():
    m = {(a, b): 2.0 for a, b in itertools.permutations("abcd", 2)}
    m[("a", "c")] = 0.1
    del m[("c", "a")]
    [p] = judge_links(m)
    assert "(a->c 0.10, c->a ?)" in p.observed


def test_a_zero_figure_is_slow():
    m = {(a, b): 2.0 for a, b in itertools.permutations("abcd", 2)}
    m[("b", "d")] = m[("d", "b")] = 0.0
    assert [(p.code, p.hosts) for p in judge_links(m)] == [("slow-link", ("b", "d"))]


@pytest.mark.parametrize("n", [3, 4, 5, 8, 16])
def test_thirty_percent_noise_never_gives_a_verdict(n):
    rnd = random.Random(n)
    hosts = [f"gpu-{i}" for i in range(n)]
    for _ in range(200):
        assert judge_links(noisy_matrix(hosts, lambda a, b: 1.9, 0.30, rnd)) == []


@pytest.mark.parametrize("n", [3, 4, 5, 8, 16])
def test_a_node_at_a_fifth_of_the_speed_is_found_through_thirty_percent_noise(n):
    # 0.4 x 1.3 = 0.52 < 0.5 x 1.9 x 0.7 = 0.67: separable whatever the noise draws
    rnd = random.Random(100 + n)
    hosts = [f"gpu-{i}" for i in range(n)]
    for _ in range(100):
        slow = rnd.choice(hosts)
        m = noisy_matrix(hosts, lambda a, b, s=slow: 0.4 if s in (a, b) else 1.9, 0.30, rnd)
        assert [(p.code, p.hosts) for p in judge_links(m)] == [("slow-node", (slow,))]


def test_slow_ratio_moves_the_threshold():
    m = {(a, b): 2.0 for a, b in itertools.permutations("abcd", 2)}
    m[("a", "b")] = m[("b", "a")] = 1.2
    assert judge_links(m) == []
    assert [p.code for p in judge_links(m, slow_ratio=0.7)] == ["slow-link"]


# --- scaling -----------------------------------------------------------------------------------
def test_scaling_table_sorts_and_adds_efficiency_against_the_smallest_world():
    rows = scaling_rows()
    table = scaling_table(rows)
    assert [r["world_size"] for r in table] == [1, 8, 16, 32]
    assert table[0]["efficiency"] == pytest.approx(1.0)
    assert table[1]["efficiency"] == pytest.approx((1813.0 / 8) / 246.0)
    assert table[3]["efficiency"] == pytest.approx((5704.7 / 32) / 246.0)
    assert "efficiency" not in rows[0]  # the input is not modified


def test_scaling_table_edge_cases():
    assert scaling_table([]) == []
    [row] = scaling_table([{"world_size": 2, "step_time_s": 0.1, "samples_per_s": 0.0}])
    assert row["efficiency"] is None


# --- catalogue ---------------------------------------------------------------------------------
@pytest.mark.parametrize("code", ["slow-link", "slow-node", "below-expected-bandwidth"])
def test_codes_are_registered_with_summary_cause_and_fix(code):
    d = CATALOGUE[code]
    assert d.code == code and d.summary and d.cause and d.fix
