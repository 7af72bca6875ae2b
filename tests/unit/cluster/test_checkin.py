"""Tests for ddpcheck.cluster.checkin: node cards, judge() and check-in through a real c10d store.

Stores are in-process (HashStore) or a TCPStore on 127.0.0.1; the squatter is a plain
listening socket on loopback. Deadlines are short, so the whole file runs in a few seconds.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from ddpcheck import diagnoses
from ddpcheck.cluster.checkin import NodeCard, judge


def card(host: str, nodes: int = 2, run_id: str = "job-1", nproc: int = 4, **kw: Any
         ) -> NodeCard:
    return NodeCard(host, nodes, run_id, nproc, pid=1000 + len(host), **kw)


def codes(problems: list[diagnoses.Problem]) -> list[str]:
    return [p.code for p in problems]


# --- NodeCard ----------------------------------------------------------------------------

def test_node_card_survives_a_json_round_trip() -> None:
    problem = diagnoses.BAD_SOCKET_IFNAME.problem("eth9: no such interface", hosts=["a"])
    original = card("a.cluster", node_rank=0, advertised="10.0.0.1", probe_port=40123,
                    addresses={"eth0": ["10.0.0.1"], "lo": ["127.0.0.1"]},
                    problems=(problem,))
    text = original.to_json()
    back = NodeCard.from_json(text.encode())  # store.get returns bytes
    assert NodeCard.from_json(text) == back
    assert replace(back, problems=()) == replace(original, problems=())
    assert back.problems == (problem,)  # typed Problems both ways
    assert json.loads(text)["message"] == "node-card" and json.loads(text)["version"] >= 1


def test_node_card_ignores_fields_a_newer_ddpcheck_adds() -> None:
    newer = card("a").to_json()[:-1] + ', "gpu_model": "H100"}'
    assert NodeCard.from_json(newer) == card("a")


def test_a_message_of_another_kind_is_refused_not_read_as_a_card() -> None:
    from ddpcheck.cluster.ending import Outcome

    with pytest.raises(ValueError, match="node-card"):
        NodeCard.from_json(Outcome("a", True).to_json())


# --- judge ---------------------------------------------------------------------------------

def test_complete_cluster_has_no_problem() -> None:
    cards = [card("a"), card("b")]
    assert judge(cards, cards[0]) == []
    assert judge(cards, cards[1], final=True) == []


def test_run_id_mismatch_names_the_odd_hosts() -> None:
    me = card("a", nodes=3)
    cards = [me, card("b", nodes=3), card("c", nodes=3, run_id="job-2"),
             card("d", nodes=3, run_id="job-3")]
    [problem] = judge(cards, me)
    assert problem.code == "run-id-mismatch"
    assert problem.hosts == ("c", "d")
    assert problem.observed == ("run id 'job-1' on a, b; run id 'job-2' on c; "
                                "run id 'job-3' on d")
    # every node names the same odd hosts, whichever node judges
    assert judge(cards, cards[2])[0].hosts == ("c", "d")


def test_nodes_mismatch_names_the_nodes_started_differently() -> None:
    me = card("a", nodes=2)
    [problem] = judge([me, card("b", nodes=3)], me)
    assert problem.code == "nodes-mismatch"
    assert problem.observed == "a started with --nodes 2; b started with --nodes 3"
    assert problem.hosts == ("b",)


def test_nproc_mismatch_names_the_nodes_with_other_rank_counts() -> None:
    me = card("a", nproc=8)
    [problem] = judge([me, card("b", nproc=4)], me)
    assert problem.code == "nproc-mismatch"
    assert problem.observed == "b start 4 ranks; a start 8 ranks"
    assert problem.hosts == ("b",)


def test_more_launchers_than_nodes_is_too_many_nodes() -> None:
    me = card("a", nodes=2)
    cards = [me, card("b"), card("b")]  # e.g. srun started two ddpchecks on b
    [problem] = judge(cards, me)
    assert problem.code == "too-many-nodes"
    assert problem.observed == "3 launchers joined but --nodes is 2: a, b"
    assert problem.hosts == ("a", "b")


def test_missing_nodes_are_only_reported_at_the_deadline() -> None:
    me = card("a", nodes=3)
    assert judge([me], me, ["a", "b", "c"], final=False) == []
    [problem] = judge([me], me, ["a", "b", "c"], final=True)
    assert problem.code == "node-missing"
    assert problem.hosts == ("b", "c")
    assert problem.observed == ("1 of 3 nodes joined within the rendezvous deadline "
                                "(joined: a); missing: b, c")


@pytest.mark.parametrize("joined,expected", [
    ("gpu-07.hpc.example.org", ["gpu-07", "gpu-08"]),  # hostname is an FQDN, Slurm lists short
    ("gpu-07", ["gpu-07.hpc.example.org", "gpu-08.hpc.example.org"]),  # and the other way round
])
def test_missing_nodes_match_short_names_and_fqdns(joined: str, expected: list[str]) -> None:
    me = card(joined)
    [problem] = judge([me], me, expected, final=True)
    assert problem.hosts == (expected[1],)
    assert problem.observed.endswith(f"missing: {expected[1]}")


def test_missing_nodes_without_a_node_list_say_names_unknown() -> None:
    me = card("a", nodes=4)
    [problem] = judge([me, card("b", nodes=4)], me, final=True)
    assert problem.code == "node-missing"
    assert problem.hosts == ()
    assert problem.observed.endswith("missing: 2 nodes (names unknown)")
    one = card("a", nodes=2)
    assert judge([one], one, final=True)[0].observed.endswith("missing: 1 node (names unknown)")


def test_a_contradiction_is_reported_instead_of_missing_nodes() -> None:
    me = card("a", nodes=3)
    assert codes(judge([me, card("b", nodes=2)], me, ["a", "b", "c"], final=True)) == [
        "nodes-mismatch"]


def test_preflight_problems_carried_in_cards_are_surfaced() -> None:
    bad = diagnoses.BAD_SOCKET_IFNAME.problem("GLOO_SOCKET_IFNAME=eth9: no such interface",
                                              hosts=["b"], stage="preflight")
    me = card("a")
    problems = judge([me, card("b", problems=(bad,))], me)
    assert problems == [bad]


def test_cards_of_another_run_do_not_carry_their_problems_over() -> None:
    bad = diagnoses.BAD_SOCKET_IFNAME.problem("eth9", hosts=["c"])
    me = card("a")
    cards = [me, card("b"), card("c", run_id="other", problems=(bad,))]
    assert codes(judge(cards, me)) == ["run-id-mismatch"]


def test_spawned_nodes_are_judged_by_their_rank_layout_not_their_rank_counts() -> None:
    a = card("a", nproc=8, node_rank=0, first_rank=0, world_size=10)
    b = card("b", nproc=2, node_rank=1, first_rank=8, world_size=10)
    assert judge([a, b], a) == []  # 8 + 2 ranks with offsets: one world
    b = card("b", nproc=2, node_rank=1, first_rank=2, world_size=4)  # node_rank * its gpus
    assert codes(judge([a, b], a)) == ["world-size-differs", "rank-overlap", "rank-missing"]
    assert judge([a], a) == []  # the layout waits for every card


def test_a_missing_spawned_node_is_named_with_the_ranks_it_would_start() -> None:
    a = card("a", nodes=3, nproc=2, node_rank=0, first_rank=0, world_size=5)
    c = card("c", nodes=3, nproc=1, node_rank=2, first_rank=4, world_size=5)
    (gone,) = judge([a, c], a, expected_hosts=["a", "b", "c"], final=True)
    assert gone.code == "node-missing" and gone.hosts == ("b",) and gone.ranks == (2, 3)
    assert "missing: b (their ranks: 2-3)" in gone.observed


def test_nodes_with_different_launch_styles_are_named_on_the_odd_node() -> None:
    a, b = (card(h, nodes=3, launch="--launch spawn env://") for h in "ab")
    c = card("c", nodes=3, launch="--launch spawn file:///shared/init")
    (p,) = judge([a, b, c], a)
    assert p.code == "launch-mismatch" and p.hosts == ("c",)
    assert "a, b launch with --launch spawn env://" in p.observed
    assert "c launch with --launch spawn file:///shared/init" in p.observed
