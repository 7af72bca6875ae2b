"""Tests for ddpcheck.report.build: build_report over synthetic rank events.

The events are built in tests/unit/report/events.py as the plugin writes them.
"""

from __future__ import annotations

import pytest

from ddpcheck import diagnoses, results
from ddpcheck.report.as_json import to_json
from ddpcheck.report.build import NO_RESULT, Report, build_report, mark_consequences, merge_problems
from ddpcheck.report.text import render_text, verdict
from tests.unit.report.events import (
    STAGES,
    WRONG,
    all_pass,
    blocked,
    probe,
    rank_events,
    stage_of,
    start,
    status_of,
)


# --- statuses ----------------------------------------------------------------------------------
def test_all_ranks_passing_every_stage_is_ready():
    report = build_report({0: all_pass(0), 1: all_pass(1)}, STAGES, [], 1.0)
    assert [s.status for s in report.stages] == ["PASS"] * 4
    assert report.ready and report.exit_code == 0
    assert report.hosts_by_rank == {0: "host0", 1: "host0"}
    assert report.world_size == 2 and report.backend == "gloo"


def test_stage_is_skip_only_when_every_probe_on_every_rank_skipped():
    some = {r: rank_events(r, probe("node", "test_a", "SKIP"), probe("node", "test_b"))
            for r in (0, 1)}
    assert status_of(build_report(some, ("node",), [], 0), "node") == "PASS"
    every = {r: rank_events(r, probe("node", "test_a", "SKIP", message="no GPU"),
                            probe("node", "test_b", "SKIP")) for r in (0, 1)}
    report = build_report(every, ("node",), [], 0)
    assert status_of(report, "node") == "SKIP"
    assert report.ready  # skipped stages do not make a node unready
    assert stage_of(report, "node").figures[0] == "no GPU"  # the skip reason is shown


def test_a_rank_skipping_and_another_passing_gives_pass():
    events = {0: rank_events(0, probe("node", "test_a", "SKIP")),
              1: rank_events(1, probe("node", "test_a", "PASS"))}
    report = build_report(events, ("node",), [], 0)
    assert stage_of(report, "node").per_rank == {0: "SKIP", 1: "PASS"}
    assert status_of(report, "node") == "PASS"


def test_fail_wins_over_pass_skip_and_blocked():
    problem = WRONG.problem("got 3, expected 4", ranks=[1], stage="collectives")
    events = {0: rank_events(0, probe("collectives", "test_a", "SKIP"),
                             probe("collectives", "test_b", agreed="FAIL")),
              1: rank_events(1, probe("collectives", "test_a", "PASS"),
                             probe("collectives", "test_b", "FAIL", problems=[problem]))}
    report = build_report(events, ("collectives",), [], 0)
    assert stage_of(report, "collectives").per_rank == {0: "PASS", 1: "FAIL"}
    assert status_of(report, "collectives") == "FAIL"
    assert not report.ready and report.exit_code == 1


def test_probes_of_the_lowest_rank_are_listed_with_their_docs():
    report = build_report({0: all_pass(0), 1: all_pass(1)}, STAGES, [], 0)
    probes = stage_of(report, "node").probes
    assert [(p["name"], p["doc"], p["status"]) for p in probes] == [("test_a", "test_a works",
                                                                     "PASS")]


def test_key_figure_is_the_first_non_empty_figure_of_a_rank():
    events = {0: rank_events(0, probe("bandwidth", "test_a"),
                             probe("bandwidth", "test_b", figure="1.50 GB/s busbw"))}
    assert stage_of(build_report(events, ("bandwidth",), [], 0), "bandwidth").figures == {
        0: "1.50 GB/s busbw"}


# --- blocking ----------------------------------------------------------------------------------
def test_stages_without_results_after_a_failed_stage_are_blocked_by_it():
    problem = WRONG.problem("got 3, expected 4", stage="rendezvous")
    events = {r: rank_events(r, probe("node", "test_a"),
                             probe("rendezvous", "test_b", "FAIL", problems=[problem]))
              for r in (0, 1)}
    report = build_report(events, STAGES, [], 0)
    assert [(s.status, s.blocked_by) for s in report.stages] == [
        ("PASS", ""), ("FAIL", ""), ("BLOCKED", "rendezvous"), ("BLOCKED", "rendezvous")]


def test_blocked_probes_keep_the_stage_that_blocked_them():
    problem = WRONG.problem("got 3, expected 4", stage="node")
    events = {r: rank_events(r, probe("node", "test_a", "FAIL", problems=[problem]),
                             blocked("rendezvous", "test_b", "node"),
                             blocked("collectives", "test_c", "node")) for r in (0, 1)}
    report = build_report(events, STAGES, [], 0)
    assert [(s.status, s.blocked_by) for s in report.stages] == [
        ("FAIL", ""), ("BLOCKED", "node"), ("BLOCKED", "node"), ("BLOCKED", "node")]


def test_stages_missing_at_the_end_without_a_failure_are_blocked_by_the_run_ending_early():
    events = {r: rank_events(r, probe("node", "test_a"), end=False) for r in (0, 1)}
    report = build_report(events, ("node", "rendezvous"), [], 0)
    assert status_of(report, "rendezvous") == "BLOCKED"
    assert stage_of(report, "rendezvous").blocked_by == "the run ending early"
    assert not report.ready


def test_no_events_at_all_is_not_ready():
    report = build_report({}, STAGES, [], 0, expected_world=4)
    assert all(s.status == "BLOCKED" for s in report.stages)
    assert report.world_size == 4 and not report.ready and report.exit_code == 1


# --- problems ----------------------------------------------------------------------------------
def test_same_problem_from_several_ranks_merges_ranks_and_hosts():
    events = {r: rank_events(r, probe("node", "test_a", "FAIL", problems=[
        diagnoses.DEV_SHM_TOO_SMALL.problem("/dev/shm has 64 MiB free", ranks=[r],
                                            hosts=[f"host{r // 2}"], stage="node")]))
        for r in range(4)}
    report = build_report(events, ("node",), [], 0)
    (merged,) = report.problems
    assert merged.ranks == (0, 1, 2, 3) and merged.hosts == ("host0", "host1")
    assert merged.code == "dev-shm-too-small"


def test_problems_with_a_different_observation_stay_separate():
    a = WRONG.problem("got 3", ranks=[0])
    b = WRONG.problem("got 5", ranks=[1])
    c = WRONG.problem("got 3", ranks=[2], hosts=["h2"])
    merged = merge_problems([a, b, c])
    assert [(p.observed, p.ranks, p.hosts) for p in merged] == [
        ("got 3", (0, 2), ("h2",)), ("got 5", (1,), ())]


def test_launcher_problems_come_first_then_rank_problems():
    launcher = diagnoses.RANK_KILLED.problem("rank 1 was killed by SIGKILL", ranks=[1])
    rank = WRONG.problem("got 3", ranks=[0], stage="collectives")
    events = {0: rank_events(0, probe("collectives", "test_a", "FAIL", problems=[rank]))}
    report = build_report(events, ("collectives",), [launcher], 0)
    assert [p.code for p in report.problems] == ["rank-killed", "wrong-collective-result"]


def test_problems_events_are_collected_too():
    problem = diagnoses.RANK_UNRESPONSIVE.problem("rank 1 did not finish", ranks=[1],
                                                  stage="rendezvous")
    events = {0: [start(0), results.Problems(stage="rendezvous", problems=(problem,)),
                  results.End()]}
    report = build_report(events, ("rendezvous",), [], 0)
    assert report.problems == [problem]


def test_a_problem_naming_a_rank_in_a_stage_without_its_result_marks_that_rank_failed():
    killed = diagnoses.RANK_KILLED.problem("rank 1 was killed by SIGKILL", ranks=[1],
                                           stage="collectives")
    events = {0: rank_events(0, probe("node", "test_a"), probe("collectives", "test_b")),
              1: rank_events(1, probe("node", "test_a"), end=False)}
    report = build_report(events, ("node", "collectives", "bandwidth"), [killed], 0)
    coll = stage_of(report, "collectives")
    assert coll.per_rank == {0: "PASS", 1: "FAIL"} and coll.status == "FAIL"
    assert status_of(report, "node") == "PASS"
    assert (status_of(report, "bandwidth"), stage_of(report, "bandwidth").blocked_by) == (
        "BLOCKED", "collectives")


def test_a_problem_naming_a_rank_in_a_stage_nobody_reached_fails_that_stage():
    hung = diagnoses.RANK_UNRESPONSIVE.problem("rank 0 stopped", ranks=[0], stage="rendezvous")
    events = {r: rank_events(r, probe("node", "test_a"), end=False) for r in (0, 1)}
    report = build_report(events, ("node", "rendezvous", "collectives"), [hung], 0)
    assert stage_of(report, "rendezvous").per_rank == {0: "FAIL"}
    assert [s.status for s in report.stages] == ["PASS", "FAIL", "BLOCKED"]


def test_a_problem_without_stage_or_ranks_leaves_the_stages_alone_but_is_not_ready():
    deadline = diagnoses.RUN_DEADLINE.problem("the run did not end within --timeout 300 s")
    report = build_report({0: all_pass(0)}, STAGES, [deadline], 0)
    assert all(s.status == "PASS" for s in report.stages)
    assert not report.ready and report.exit_code == 1


# --- measurements ------------------------------------------------------------------------------
def test_measurements_take_the_lowest_ranks_value():
    events = {1: rank_events(1, probe("node", "test_a", measurements={"torch": "b", "x": 1})),
              0: rank_events(0, probe("node", "test_a", measurements={"torch": "a"}))}
    assert build_report(events, ("node",), [], 0).measurements == {"torch": "a", "x": 1}


@pytest.mark.parametrize("status", ["PASS", "SKIP"])
def test_ready_is_false_with_any_problem_whatever_the_stages_say(status):
    events = {0: rank_events(0, probe("node", "test_a", status))}
    problem = diagnoses.ENV_MISMATCH.problem("NCCL_IB_HCA differs")
    report = build_report(events, ("node",), [problem], 0)
    assert status_of(report, "node") == status
    assert report.ready is False and report.exit_code == 1 and to_json(report)["ready"] is False


def test_no_result_marker_is_used_only_for_stages_that_never_ran():
    report = build_report({0: all_pass(0)}, STAGES, [], 0)
    assert all(s.status != NO_RESULT for s in report.stages)


def test_what_peers_saw_of_a_stopped_rank_is_marked_as_its_consequence():
    stopped = diagnoses.RANK_UNRESPONSIVE.problem(
        "rank 1 (pid 7) on vm is stopped (state T)", ranks=[1], stage="bandwidth",
        role=diagnoses.ROOT_CAUSE)  # as postmortem makes it
    echo = diagnoses.COLLECTIVE_FAILED.problem("Timed out waiting 5000ms", ranks=[0],
                                               stage="bandwidth")
    missing = diagnoses.RANK_UNRESPONSIVE.problem("rank 1 did not finish probe x", ranks=[1],
                                                  stage="bandwidth")
    unrelated = diagnoses.DEV_SHM_TOO_SMALL.problem("64 MiB", ranks=[0], stage="node")
    marked = mark_consequences([echo, missing, stopped, unrelated])
    assert [p.code for p in marked if not p.consequence_of] == ["rank-unresponsive",
                                                                 "dev-shm-too-small"]
    assert {p.consequence_of for p in marked if p.consequence_of} == {"rank-unresponsive"}
    report = Report([], marked, {0: "vm", 1: "vm"}, {}, 2, 1.0)
    text = render_text(report)
    assert text.count("FAIL  ") == 2 and "consequences (what the other ranks saw" in text
    assert verdict(report).startswith("NOT READY: 2 problems (+2 consequences)")
