"""Tests for ddpcheck.ranges: rank lists as ranges, ranks grouped by host."""

from __future__ import annotations

import pytest

from ddpcheck.ranges import format_ranks, ranks_with_hosts


@pytest.mark.parametrize("ranks, text", [
    ([0, 1, 2, 3, 6], "0-3,6"),
    ([], ""),
    ([5], "5"),
    ([0, 2, 4], "0,2,4"),
    ([7, 6, 5, 1, 0], "0-1,5-7"),
    ([3, 3, 2, 2], "2-3"),
    ((r for r in range(8)), "0-7"),
    (["4", "5"], "4-5"),
])
def test_format_ranks_compresses_runs_into_ranges(ranks, text):
    assert format_ranks(ranks) == text


def test_ranks_with_hosts_groups_ranks_by_host_in_rank_order():
    hosts = {r: "gpu-a" if r < 4 else "gpu-b" for r in range(8)}
    assert ranks_with_hosts(range(8), hosts) == "0-3 (gpu-a), 4-7 (gpu-b)"


def test_ranks_with_hosts_with_interleaved_hosts():
    hosts = {0: "a", 1: "b", 2: "a", 3: "b"}
    assert ranks_with_hosts([3, 2, 1, 0], hosts) == "0,2 (a), 1,3 (b)"


def test_ranks_with_hosts_leaves_unknown_hosts_out():
    assert ranks_with_hosts([0, 1, 5], {0: "a"}) == "0 (a), 1,5"
    assert ranks_with_hosts([2], {}) == "2"


def test_ranks_with_hosts_of_no_ranks_is_empty():
    assert ranks_with_hosts([], {0: "a"}) == ""
