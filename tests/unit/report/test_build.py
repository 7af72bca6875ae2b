"""Tests for ddpcheck.report.build: build_report over synthetic rank events, text and JSON output.

Events are the typed records ddpcheck.plugin writes (ddpcheck.results): Start, Hello,
ProbeStart, Probe (status/agreed/figure/measurements/problems), Problems and End.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from ddpcheck import diagnoses, results
from ddpcheck.diagnoses import Problem
from ddpcheck.report.build import (
    MISSING,
    NO_RESULT,
    Report,
    build_report,
    mark_consequences,
    merge_problems,
    render_problem,
    render_text,
    to_json,
    verdict,
)

STAGES = ("node", "rendezvous", "collectives", "bandwidth")


def start(rank: int, host: str = "", backend: str = "gloo") -> results.Start:
    return results.Start(rank=rank, world_size=2, backend=backend,
                         host=host or f"host{rank // 2}", local_rank=rank % 2,
                         node_rank=rank // 2, pid=1000 + rank)


def probe(stage: str, name: str, status: str = "PASS", *, agreed: str = "", figure: str = "",
          measurements: dict | None = None, problems: Sequence[Problem] = (),
          message: str = "") -> results.Probe:
    return results.Probe(nodeid=f"checks/test_{stage}.py::{name}", name=name, stage=stage,
                         doc=(f"{name} works",), status=status, agreed=agreed or status,
                         duration=0.01, message=message, figure=figure,
                         measurements=measurements or {}, problems=tuple(problems))


def blocked(stage: str, name: str, by: str) -> results.Probe:
    return probe(stage, name, "BLOCKED", message=f"blocked by stage {by}")


def rank_events(rank: int, *probes: results.Probe, end: bool = True) -> list[results.Event]:
    return [start(rank), results.Hello(), *probes, *([results.End()] if end else [])]


def all_pass(rank: int) -> list[results.Event]:
    return rank_events(rank, probe("node", "test_a"), probe("rendezvous", "test_b"),
                       probe("collectives", "test_c"), probe("bandwidth", "test_d"))


def status_of(report, name: str) -> str:
    return next(s for s in report.stages if s.name == name).status


def stage_of(report, name: str):
    return next(s for s in report.stages if s.name == name)


WRONG = diagnoses.WRONG_COLLECTIVE_RESULT


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


# --- text --------------------------------------------------------------------------------------
def failing_report():
    shm = diagnoses.DEV_SHM_TOO_SMALL.problem("/dev/shm has 64 MiB free", ranks=[0, 1],
                                              hosts=["host0"], stage="node")
    killed = diagnoses.RANK_KILLED.problem("rank 3 was killed by SIGKILL", ranks=[3],
                                           hosts=["host1"], stage="rendezvous")
    events = {r: rank_events(r, probe("node", "test_a", "FAIL" if r < 2 else "PASS",
                                      problems=[shm] if r < 2 else []),
                             probe("rendezvous", "test_b")) for r in range(3)}
    events[3] = [start(3)]
    return build_report(events, STAGES, [killed], 2.5)


def test_render_text_has_the_stage_by_rank_table():
    text = render_text(failing_report())
    for r in range(4):
        assert f"rank {r}" in text
    assert "host0" in text and "host1" in text
    for name in STAGES:
        assert name in text
    assert "BLOCKED (node)" in text


def test_render_text_shows_ranks_without_a_result_in_a_stage_that_ran():
    events = {0: rank_events(0, probe("node", "test_a")), 1: [start(1)]}
    text = render_text(build_report(events, ("node",), [], 0))
    assert MISSING in text


def test_render_text_has_one_block_per_problem_with_code_observed_cause_fix():
    report = failing_report()
    text = render_text(report)
    assert text.count("\nFAIL  ") == len(report.problems) == 2
    for p in report.problems:
        block = render_problem(p, report.hosts_by_rank)
        assert block in text
        head, *rest = block.splitlines()
        assert head.startswith(f"FAIL  {p.code}")
        assert [ln.split()[0] for ln in rest] == ["summary", "observed", "cause", "fix"]
        assert p.observed in block and p.cause in block and p.fix in block


def test_render_problem_names_ranks_with_hosts_and_stage():
    report = failing_report()
    block = render_problem(report.problems[0], report.hosts_by_rank)
    assert block.splitlines()[0] == "FAIL  rank-killed   rank 3 (host1); stage rendezvous"


def test_render_problem_without_ranks_names_the_node():
    p = diagnoses.DEV_SHM_TOO_SMALL.problem("64 MiB", hosts=["gpu-a", "gpu-b"])
    assert render_problem(p, {}).splitlines()[0] == "FAIL  dev-shm-too-small   node gpu-a, gpu-b"


def test_verdict_line_is_last_and_says_not_ready_with_the_first_problem():
    report = failing_report()
    last = render_text(report).rstrip("\n").splitlines()[-1]
    assert last == verdict(report)
    assert last.startswith("NOT READY: 2 problems, 4 ranks on 2 hosts")
    assert "first: rank-killed on rank 3" in last


def test_verdict_line_says_ready_with_counts():
    events = {0: rank_events(0, probe("node", "test_a"), probe("rendezvous", "test_b", "SKIP"))}
    report = build_report(events, ("node", "rendezvous"), [], 1.3)
    last = render_text(report).rstrip("\n").splitlines()[-1]
    assert last == verdict(report)
    assert last.startswith("READY: 1 stage") and "1 skipped" in last
    assert "on 1 host" in last and last.endswith("in 1.3 s")


def test_render_text_includes_the_bandwidth_sweep_and_notes():
    row = {"size": 4096, "count": 1024, "dtype": "float", "time_us": 10.0, "time_min_us": 9.0,
           "time_max_us": 11.0, "algbw": 0.41, "busbw": 0.41}
    events = {r: rank_events(r, probe("bandwidth", "test_d",
                                      measurements={"allreduce_sweep": [row]})) for r in (0, 1)}
    report = build_report(events, ("bandwidth",), [], 0)
    report.notes.append("results: /tmp/x")
    text = render_text(report)
    assert "# all_reduce, 2 ranks, backend gloo" in text
    assert "# Peak bus bandwidth : 0.41 GB/s" in text
    assert "results: /tmp/x" in text


# --- JSON --------------------------------------------------------------------------------------
def test_to_json_mirrors_the_report_and_is_serialisable():
    report = failing_report()
    data = json.loads(json.dumps(to_json(report, {"config": {"nodes": 2}})))
    assert data["ready"] is False and data["exit_code"] == 1
    assert data["verdict"].startswith("NOT READY")
    assert [(s["name"], s["status"]) for s in data["stages"]] == [
        ("node", "FAIL"), ("rendezvous", "FAIL"), ("collectives", "BLOCKED"),
        ("bandwidth", "BLOCKED")]
    assert data["stages"][2]["blocked_by"] == "node"
    first = data["problems"][0]
    assert {"code", "hosts", "ranks", "observed", "cause", "fix"} <= set(first)
    assert (first["code"], first["ranks"], first["hosts"]) == ("rank-killed", [3], ["host1"])
    assert data["hosts"] == {"0": "host0", "1": "host0", "2": "host1", "3": "host1"}
    assert data["measurements"] == {} and data["config"] == {"nodes": 2}
    assert data["world_size"] == 4


def test_to_json_of_a_ready_report():
    data = to_json(build_report({0: all_pass(0)}, STAGES, [], 0))
    assert data["ready"] is True and data["exit_code"] == 0 and data["problems"] == []
    assert data["stages"][0]["ranks"] == {"0": "PASS"}


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


def test_many_ranks_are_shown_one_column_per_host_with_the_odd_ranks_named():
    events = {}
    for r in range(16):
        status = "FAIL" if r == 9 else "PASS"
        events[r] = [results.Start(host=f"gpu-{r // 8}", backend="gloo"),
                     results.Probe(name="p", stage="collectives", status=status)]
    report = build_report(events, ["collectives"], [], 1.0)
    table = render_text(report).split("\n\n")[0]
    assert "gpu-0" in table and "ranks 0-7" in table and "ranks 8-15" in table
    row = next(line for line in table.splitlines() if line.startswith("collectives"))
    assert "PASS" in row and "FAIL on 9" in row and "rank 15" not in table
