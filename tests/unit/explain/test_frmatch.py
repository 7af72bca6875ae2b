"""Comparing ranks' Flight Recorder traces the way torch's fr_trace does."""

from __future__ import annotations

from ddpcheck.explain.flightrec import Entry, RankTrace, read_dump
from ddpcheck.explain.frmatch import analyse, stuck_in
from tests.helpers.paths import DATA

FR = DATA / "flightrec"


def _traces(scenario: str) -> list[RankTrace]:
    out = []
    for p in sorted((FR / scenario).iterdir()):
        t = read_dump(str(p), p.read_bytes())
        assert t is not None
        out.append(t)
    return out


def _trace(rank: int, *calls: tuple[str, str], members: tuple[int, ...] = ()) -> RankTrace:
    entries = tuple(Entry("0", i, op, size, size, "['Float']->['Float']", "scheduled",
                          i < len(calls), False, "") for i, (op, size) in enumerate(calls, 1))
    return RankTrace(f"fr_{rank}", rank, "2.10", (("0", members),) if members else (), entries)


def test_recorded_desync_is_named_at_the_first_differing_collective():
    (f,) = analyse(_traces("desync"))
    assert f.problem.code == "collective-desync" and f.seq == 3
    assert "rank 0 ran all_reduce in=[[8]]" in f.problem.observed
    assert "rank 1 ran broadcast in=[[3]]" in f.problem.observed


def test_recorded_missing_rank_names_the_laggard_and_the_rank_without_a_dump():
    (f,) = analyse(_traces("missing"))
    assert f.problem.code == "rank-never-joined" and f.problem.ranks == (1, 2)
    assert stuck_in(_traces("missing")) == {0: "#3 all_reduce", 2: "#2 barrier (completed)"}


def test_same_op_with_different_sizes_is_a_size_mismatch():
    (f,) = analyse([_trace(0, ("all_reduce", "[[4]]"), ("all_gather", "[[10]]")),
                    _trace(1, ("all_reduce", "[[4]]"), ("all_gather", "[[7]]"))])
    assert f.problem.code == "collective-size-mismatch" and f.seq == 2


def test_pg_config_members_name_a_missing_last_rank_and_agreeing_ranks_are_healthy():
    ok = [_trace(r, ("all_reduce", "[[4]]"), members=(0, 1, 2)) for r in (0, 1)]
    (f,) = analyse(ok)
    assert f.problem.code == "rank-never-joined" and f.problem.ranks == (2,)
    assert analyse([_trace(r, ("all_reduce", "[[4]]")) for r in (0, 1)]) == []
