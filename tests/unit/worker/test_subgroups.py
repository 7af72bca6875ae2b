"""Tests for worker.subgroups: the layout, the bounded broadcast roots."""

from __future__ import annotations

from types import SimpleNamespace

from ddpcheck.worker import subgroups


def test_the_layout_lists_hosts_in_leader_order() -> None:
    world = SimpleNamespace(world_size=6, hosts_by_rank={0: "b", 1: "b", 2: "a", 3: "a",
                                                         4: "c", 5: "c"})
    lay = subgroups.layout(world)
    assert lay.hosts == ("b", "a", "c") and lay.leaders == [0, 2, 4]
    assert lay.ranks["a"] == (2, 3)


def test_broadcast_roots_are_first_last_and_leaders_up_to_the_cap() -> None:
    assert subgroups.broadcast_roots(1, [0]) == [0]
    assert subgroups.broadcast_roots(8, [0, 4]) == [0, 4, 7]
    leaders = list(range(0, 8192, 8))
    roots = subgroups.broadcast_roots(8192, leaders)
    assert len(roots) == subgroups.BROADCAST_ROOTS_CAP
    assert roots[0] == 0 and roots[-1] == 8191 and set(roots) - {8191} <= set(leaders)
    assert roots[1] >= 8 and roots[-2] > 7000, "leaders spread over the world"
