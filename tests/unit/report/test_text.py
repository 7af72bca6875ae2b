"""Tests for ddpcheck.report.text: the table, the problem blocks and the verdict line."""

from __future__ import annotations

from ddpcheck import diagnoses, results
from ddpcheck.report.build import build_report
from ddpcheck.report.text import MISSING, render_problem, render_text, verdict
from tests.unit.report.events import STAGES, failing_report, probe, rank_events, start


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


def test_above_eight_hosts_each_stage_is_one_row_with_the_odd_hosts_named():
    events = {}
    for r in range(1024 * 2):
        status = "FAIL" if r // 2 in (5, 700) else "PASS"
        events[r] = [results.Start(host=f"n{r // 2}", backend="gloo"),
                     results.Probe(name="p", stage="collectives", status=status)]
    report = build_report(events, ["collectives"], [], 1.0)
    table = render_text(report).split("\n\n")[0]
    assert len(table.splitlines()) == 3 and max(len(line) for line in table.splitlines()) < 120
    row = table.splitlines()[-1]
    assert "PASS on 1022 of 1024 hosts" in row and "FAIL on n5, n700" in row
