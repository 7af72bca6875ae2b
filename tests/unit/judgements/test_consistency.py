"""Tests for ddpcheck.judgements.consistency: the odd ranks out and the line that names them."""

from __future__ import annotations

from ddpcheck.judgements.consistency import describe_disagreement, odd_ranks


def test_odd_ranks_of_agreeing_ranks_is_the_value_and_nothing_else():
    assert odd_ranks({0: "2.4", 1: "2.4", 2: "2.4"}) == ("2.4", {})


def test_odd_ranks_names_the_minority_ranks_by_value():
    values = {0: "a", 1: "a", 2: "b", 3: "a", 4: "c", 5: "b"}
    assert odd_ranks(values) == ("a", {"b": [2, 5], "c": [4]})


def test_odd_ranks_majority_wins_even_against_rank_0():
    assert odd_ranks({0: "x", 1: "y", 2: "y"}) == ("y", {"x": [0]})


def test_odd_ranks_tie_goes_to_the_lowest_ranks_value():
    assert odd_ranks({0: "x", 1: "y"}) == ("x", {"y": [1]})
    assert odd_ranks({3: "y", 1: "x", 2: "y", 4: "x"}) == ("x", {"y": [2, 3]})


def test_odd_ranks_of_nothing():
    assert odd_ranks({}) == (None, {})


def test_odd_ranks_works_with_any_hashable_value():
    assert odd_ranks({0: (2, 4), 1: (2, 4), 2: (2, 3)}) == ((2, 4), {(2, 3): [2]})


def test_describe_disagreement_is_none_when_all_agree():
    assert describe_disagreement("torch", {0: "2.4", 1: "2.4"}, {0: "a", 1: "b"}) is None
    assert describe_disagreement("torch", {}, {}) is None


def test_describe_disagreement_names_values_ranks_and_hosts():
    values = {0: "2.4", 1: "2.4", 2: "2.3", 3: "2.3", 4: "2.4"}
    hosts = {0: "gpu-a", 1: "gpu-a", 2: "gpu-b", 3: "gpu-b", 4: "gpu-c"}
    assert describe_disagreement("torch", values, hosts) == (
        "torch: 2.4 on most ranks, but 2.3 on rank 2-3 (gpu-b)")


def test_describe_disagreement_lists_every_odd_value():
    line = describe_disagreement("arch", {0: "x86_64", 1: "aarch64", 2: "x86_64", 3: "ppc64le"},
                                 {})
    assert line == "arch: x86_64 on most ranks, but aarch64 on rank 1; ppc64le on rank 3"
