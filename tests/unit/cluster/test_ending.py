"""Tests for ddpcheck.cluster.ending: sharing each node's outcome and the whole run's verdict
at the end of a multi-node run, through an in-process store."""

from __future__ import annotations

import torch.distributed as dist

from ddpcheck import diagnoses
from ddpcheck.cluster import ending
from ddpcheck.cluster.checkin import NodeCard
from ddpcheck.cluster.nodeflow import ClusterState


def test_without_a_store_nothing_is_shared_and_the_verdict_is_unknown() -> None:
    st = ClusterState()
    assert ending.collect_outcomes(st) == []
    assert not ending.post_outcome(st, ending.Outcome("a", True, ()))
    got = ending.await_verdict(st, wait=0.1)
    assert isinstance(got, diagnoses.Problem) and got.code == "verdict-unknown"


def _two_nodes(me: str) -> ClusterState:
    a = NodeCard("a", 2, "job-1", 2, 1)
    b = NodeCard("b", 2, "job-1", 2, 2)
    stray = NodeCard("c", 2, "other-run", 2, 3)
    return ClusterState(cards=[a, b, stray], me=a if me == "a" else b,
                                store=dist.HashStore())


def test_the_rank0_node_collects_the_other_nodes_problems() -> None:
    st = _two_nodes("a")
    theirs = diagnoses.RANK_KILLED.problem("rank 3 killed by SIGKILL", hosts=["b"], ranks=[3])
    other = ClusterState(cards=st.cards, me=st.cards[1], store=st.store)
    assert ending.post_outcome(other, ending.Outcome("b", False, (theirs,)))
    assert ending.collect_outcomes(st, wait=1.0) == [theirs]


def test_a_node_that_never_reports_its_end_is_a_problem_on_the_rank0_node() -> None:
    st = _two_nodes("a")
    got = ending.collect_outcomes(st, wait=0.2)
    assert [(p.code, p.hosts) for p in got] == [("node-outcome-missing", ("b",))]
    assert "within 0.2 s" in got[0].observed


def test_the_other_nodes_adopt_the_published_verdict() -> None:
    st = _two_nodes("b")
    theirs = diagnoses.RANK_EXITED.problem("rank 0 exited", hosts=["a"], ranks=[0])
    rank0 = ClusterState(cards=st.cards, me=st.cards[0], store=st.store)
    ending.publish_verdict(rank0, ending.Outcome("a", False, (theirs,)))
    got = ending.await_verdict(st, wait=1.0)
    assert isinstance(got, ending.Outcome) and got.problems == (theirs,) and not got.ready


def test_no_published_verdict_means_this_node_cannot_say_ready() -> None:
    got = ending.await_verdict(_two_nodes("b"), wait=0.2)
    assert isinstance(got, diagnoses.Problem)
    assert got.code == "verdict-unknown" and got.hosts == ("b",)


def test_release_counts_the_readers_and_the_store_host_waits_for_them() -> None:
    st = _two_nodes("a")
    st.is_host = True
    other = ClusterState(cards=st.cards, me=st.cards[1], store=st.store)
    ending.release(other)
    ending.release(st, wait=5.0)  # both have read: returns at once
    assert int(st.store.add("ddpcheck/final/job-1/read", 0)) == 2
