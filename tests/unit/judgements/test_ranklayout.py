"""The rank layout of a spawn-style job across nodes: overlaps, gaps, world sizes, the fix."""

from __future__ import annotations

from ddpcheck.judgements.ranklayout import NodeRanks, judge


def node(host: str, node_rank: int, first: int, nproc: int, world: int) -> NodeRanks:
    return NodeRanks(host, node_rank, first, nproc, world)


def codes(problems) -> list[str]:
    return [p.code for p in problems]


def test_an_even_layout_and_an_uneven_one_with_offsets_are_whole() -> None:
    assert judge([node("a", 0, 0, 8, 16), node("b", 1, 8, 8, 16)]) == []
    assert judge([node("a", 0, 0, 8, 10), node("b", 1, 8, 2, 10)]) == []


def test_node_rank_times_gpus_on_8_and_2_gpu_nodes_overlaps_and_leaves_ranks_missing() -> None:
    # rank = node_rank * gpus + local_rank, world = nodes * gpus, each node with its own gpus
    got = judge([node("gpu-a", 0, 0, 8, 16), node("gpu-b", 1, 2, 2, 4)])
    assert codes(got) == ["world-size-differs", "rank-overlap", "rank-missing"]
    mismatch, overlap, missing = got
    assert "a world of 16 on gpu-a" in mismatch.observed
    assert mismatch.hosts == ("gpu-a", "gpu-b")  # one node each: a tie names both
    assert overlap.ranks == (2, 3) and overlap.hosts == ("gpu-a", "gpu-b")
    assert "ranks 2-3 are started by both gpu-a (ranks 0-7) and gpu-b (ranks 2-3)" \
        in overlap.observed
    assert missing.ranks == tuple(range(8, 16))
    assert "ranks 8-15 of a world of 16" in missing.observed
    for p in got:
        assert "--rank-offsets 0,8 --world-size 10" in p.fix


def test_a_gap_names_the_missing_rank_and_a_rank_beyond_the_world_is_out_of_range() -> None:
    gap = judge([node("a", 0, 0, 2, 4), node("b", 1, 3, 1, 4)])
    assert codes(gap) == ["rank-missing"] and gap[0].ranks == (2,)
    assert "rank 2 of a world of 4 is started by no node" in gap[0].observed
    beyond = judge([node("a", 0, 0, 2, 2), node("b", 1, 2, 1, 2)])
    assert codes(beyond) == ["rank-out-of-range"] and beyond[0].hosts == ("b",)


def test_one_node_judged_alone_and_the_same_answer_in_any_card_order() -> None:
    assert codes(judge([node("a", 0, 0, 2, 3)])) == ["rank-missing"]
    cards = [node(f"n{i}", i, i * 4, 4 if i != 5 else 2, 4096) for i in range(1024)]
    forward, backward = judge(cards), judge(list(reversed(cards)))
    assert forward == backward
    assert codes(forward) == ["rank-missing"]  # ranks 22-23 (node 5 starts 2 of 4)
    assert forward[0].ranks == (22, 23)
    assert "and 1020 more" in forward[0].observed  # bounded text at 1,024 nodes
