"""Tests for judgements.readiness: the one verdict rule, on hand-made and generated result sets.

The property tests build rank events the way workers write them (typed Start, Probe and
End records), then drop ranks, cut logs short, empty them, or add launcher problems, and check the
rule through the real report: READY only with every expected rank and every stage passing;
NOT READY always with at least one cause.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ddpcheck import results
from ddpcheck.diagnoses import RANK_KILLED
from ddpcheck.judgements.readiness import Expected, is_ready, missing_cause_problems, missing_ranks
from ddpcheck.report.as_json import to_json
from ddpcheck.report.build import StageResult, build_report
from ddpcheck.report.text import render_text

STAGES = ["node", "rendezvous", "collectives"]


def rank_log(rank: int, host: str, statuses: dict[str, str],
             end: bool = True) -> list[results.Event]:
    evs: list[results.Event] = [results.Start(rank=rank, host=host, backend="gloo")]
    for stage, status in statuses.items():
        evs.append(results.ProbeStart(nodeid=f"t::{stage}", stage=stage))
        evs.append(results.Probe(nodeid=f"t::{stage}", name=f"test_{stage}", stage=stage,
                                 status=status))
    if end:
        evs.append(results.End())
    return evs


def healthy(world: int) -> dict[int, list[results.Event]]:
    return {r: rank_log(r, f"h{r // 2}", dict.fromkeys(STAGES, results.PASS))
            for r in range(world)}


def test_a_complete_healthy_world_is_ready() -> None:
    rep = build_report(healthy(4), STAGES, [], 1.0, 4)
    assert rep.ready and rep.exit_code == 0 and not rep.problems


def test_two_of_sixteen_ranks_reporting_is_not_ready_and_names_the_others() -> None:
    events = {r: evs for r, evs in healthy(16).items() if r < 2}
    rep = build_report(events, STAGES, [], 1.0, 16, evidence=["torchrun: exitcode -9"])
    assert not rep.ready and rep.exit_code == 1
    (p,) = rep.problems
    assert p.code == "rank-no-result" and p.ranks == tuple(range(2, 16))
    assert "14 of 16 ranks never reported" in p.observed and "exitcode -9" in p.observed
    assert "NOT READY: 1 problem" in render_text(rep)


def test_a_run_that_ended_early_without_a_cause_gets_one_with_the_evidence() -> None:
    events: dict[int, list[results.Event]] = {
        r: [results.Start(rank=r, host="h", backend="gloo"), results.End()] for r in range(2)}
    rep = build_report(events, STAGES, [], 1.0, 2,
                       evidence=["ERROR: module or package not found: ddpcheck.checks"])
    assert not rep.ready
    assert [p.code for p in rep.problems] == ["run-unexplained"]
    assert "the run ending early" in rep.problems[0].observed
    assert "module or package not found" in rep.problems[0].observed


def test_a_node_part_needs_its_own_ranks_only() -> None:
    events = {r: evs for r, evs in healthy(4).items() if r >= 2}
    part = Expected.node_part(4, {2, 3}, nproc=2)
    assert build_report(events, STAGES, [], 1.0, 4, part).ready
    short = Expected.node_part(4, {3}, nproc=2)
    rep = build_report({3: events[3]}, STAGES, [], 1.0, 4, short)
    assert not rep.ready and rep.problems[0].code == "rank-no-result"
    assert "1 of the 2 ranks of this node" in rep.problems[0].observed


def stage(status: str, **per_rank: str) -> StageResult:
    return StageResult("s", status, {int(r[1:]): v for r, v in per_rank.items()})


def test_is_ready_needs_every_rank_passing_every_stage_and_no_problem() -> None:
    exp = Expected.whole(2)
    assert is_ready([stage("PASS", r0="PASS", r1="SKIP"), stage("PASS")], [], exp, {0, 1})
    assert not is_ready([], [], exp, {0, 1})
    assert not is_ready([stage("PASS", r0="PASS")], [], exp, {0})
    assert not is_ready([stage("PASS", r0="PASS")], [], exp, {0, 1}), "rank 1 has no result"
    assert not is_ready([stage("BLOCKED")], [], exp, {0, 1})
    assert not is_ready([stage("PASS")], [RANK_KILLED.problem("x")], exp, {0, 1})
    assert missing_ranks(exp, {1}) == [0]


def test_a_rank_that_stopped_reporting_midway_is_named() -> None:
    events = healthy(2)
    events[1] = rank_log(1, "h0", {"node": results.PASS}, end=True)
    rep = build_report(events, STAGES, [], 1.0, 2)
    assert not rep.ready
    assert "rank 1 reported no result for some stages" in rep.problems[0].observed


def test_explain_adds_nothing_when_a_cause_is_already_named() -> None:
    cause = RANK_KILLED.problem("rank 1 killed", ranks=[1])
    assert missing_cause_problems([stage("FAIL")], [cause], Expected.whole(2), {0, 1}, []) == []


# --- generated result sets ----------------------------------------------------------------
STATUS = st.sampled_from([results.PASS, results.SKIP, results.FAIL, results.BLOCKED])


@st.composite
def result_sets(draw: st.DrawFn) -> tuple[dict[int, list[results.Event]], int, list]:
    world = draw(st.integers(1, 12))
    events: dict[int, list[results.Event]] = {}
    for r in range(world):
        kind = draw(st.sampled_from(["full", "full", "full", "missing", "empty", "partial",
                                     "crashed"]))
        statuses = {s: draw(STATUS) if draw(st.booleans()) else results.PASS for s in STAGES}
        if kind == "missing":
            continue
        if kind == "empty":
            events[r] = []
        elif kind == "partial":
            cut = draw(st.integers(0, len(STAGES)))
            events[r] = rank_log(r, "h", dict(list(statuses.items())[:cut]), end=True)
        elif kind == "crashed":
            events[r] = rank_log(r, "h", dict(list(statuses.items())[:1]), end=False)
        else:
            events[r] = rank_log(r, "h", statuses)
    launcher = [RANK_KILLED.problem("rank 0 killed", ranks=[0])] if draw(st.booleans()) else []
    return events, world, launcher


@settings(max_examples=300, deadline=None)
@given(result_sets())
def test_the_verdict_rule_holds_on_generated_result_sets(case: tuple) -> None:
    events, world, launcher = case
    rep = build_report(events, STAGES, launcher, 1.0, world, evidence=["last line"])
    started = {r for r, evs in events.items() if any(isinstance(e, results.Start) for e in evs)}
    if rep.ready:
        assert started == set(range(world))
        assert all(s.status in (results.PASS, results.SKIP) for s in rep.stages)
        assert not rep.problems and rep.exit_code == 0
        assert render_text(rep).rstrip().splitlines()[-1].startswith("READY")
    else:
        causes = [p for p in rep.problems if not p.consequence_of]
        assert causes, "NOT READY must name at least one cause"
        assert rep.exit_code == 1 and to_json(rep)["problems"]
        assert render_text(rep).rstrip().splitlines()[-1].startswith("NOT READY: ")
    every_rank_passed = all(
        any(isinstance(e, results.Probe) and e.stage == s and e.status in ("PASS", "SKIP")
            for e in events.get(r, [])) for r in range(world) for s in STAGES)
    assert rep.ready == (started == set(range(world)) and not launcher
                                      and every_rank_passed)


def test_a_node_part_says_which_share_of_the_world_it_shows() -> None:
    events = {r: evs for r, evs in healthy(16).items() if r in (4, 5, 6, 7)}
    rep = build_report(events, STAGES, [], 1.0, 16, Expected.node_part(16, {4, 5, 6, 7}, 4))
    assert rep.ready
    assert "4 of 16 ranks here, the whole run judged with the rank-0 node" in render_text(rep)
