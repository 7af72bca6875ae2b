"""JUnit XML from reports of recorded real runs, read back with junitparser (a real parser)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from junitparser import Failure, JUnitXml, Skipped

from ddpcheck import results
from ddpcheck.diagnoses import Problem
from ddpcheck.report import junit
from ddpcheck.report.build import StageResult, build_report
from ddpcheck.stages import STAGES
from tests.helpers.paths import DATA

RUNS = DATA / "runs"


def events_of(run: str) -> dict[int, list[results.Event]]:
    return results.rank_events(RUNS / run)


def written(tmp_path: Path, report, events) -> JUnitXml:
    path = tmp_path / "r.xml"
    junit.write(path, report, events)
    return JUnitXml.fromfile(str(path))


def with_preflight(report, status: str = results.PASS):
    report.stages.insert(0, StageResult("preflight", status))
    return report


def test_counts_match_the_report_of_a_healthy_run(tmp_path):
    events = events_of("healthy-2ranks")
    report = with_preflight(build_report(events, STAGES, [], 19.2, 2))
    xml = written(tmp_path, report, events)
    suites = {s.name: s for s in xml}
    assert list(suites) == ["preflight", *STAGES, "verdict"]
    probes = {s: len(report.stages[i + 1].probes) for i, s in enumerate(STAGES)}
    for stage in report.stages:
        suite = suites[stage.name]
        assert suite.tests == 2 * max(probes.get(stage.name, 1), 1)  # 2 ranks
        assert (suite.failures > 0) == (stage.status == results.FAIL)
    assert suites["checkpoint"].skipped == 2 and suites["node"].skipped == 4
    assert suites["verdict"].failures == 0 and xml.failures == 0
    assert xml.tests == sum(s.tests for s in xml)


def test_a_failed_stage_carries_its_problem_blocks_and_blocked_stages_their_blocker(tmp_path):
    events = events_of("below-expected-2ranks")
    saved = json.loads((RUNS / "below-expected-2ranks" / "report.json").read_text())
    report = with_preflight(build_report(events, STAGES, [], 28.8, 2))
    assert not report.ready
    suites = {s.name: s for s in written(tmp_path, report, events)}
    failed = {s["name"] for s in saved["stages"] if s["status"] == "FAIL"}
    assert {n for n, s in suites.items() if s.failures and n != "verdict"} == failed
    sweep = next(c for c in suites["bandwidth"] if c.name.startswith(
        "test_all_reduce_bandwidth_sweep [rank 0"))
    fail = next(r for r in sweep.result if isinstance(r, Failure))
    assert fail.type == "below-expected-bandwidth"
    assert "FAIL  below-expected-bandwidth" in fail.text and "fix" in fail.text
    for case in suites["ddp"]:
        assert [r.message for r in case.result if isinstance(r, Skipped)] == [
            "blocked by stage bandwidth"]
    verdict = next(iter(suites["verdict"]))
    assert next(iter(verdict.result)).message.startswith("NOT READY")


def test_above_8_ranks_one_testcase_per_probe_and_host(tmp_path):
    base = events_of("healthy-2ranks")
    events = {}
    for r in range(16):
        host = f"gpu-{r // 8}"
        events[r] = [replace(e, host=host) if isinstance(e, results.Start) else e
                     for e in base[r % 2]]
    report = with_preflight(build_report(events, STAGES, [], 1.0, 16))
    suites = {s.name: s for s in written(tmp_path, report, events)}
    names = [c.name for c in suites["collectives"]]
    assert len(names) == 2 * 6 and any(n.endswith("[gpu-1 (ranks 8-15)]") for n in names)


def test_preflight_failure_fails_preflight_and_blocks_every_stage(tmp_path):
    problem = Problem("endpoint-unreachable", "s", "TCP connect timed out", "c", "f",
                      hosts=("gpu-b",))
    report = build_report({}, STAGES, [problem], 3.0, 4)
    report.nodes = ["gpu-a", "gpu-b"]
    for s in report.stages:
        s.status, s.blocked_by = results.BLOCKED, "preflight"
    report = with_preflight(report, results.FAIL)
    xml = written(tmp_path, report, {})
    suites = {s.name: s for s in xml}
    assert suites["preflight"].failures == 2  # one testcase per node
    assert suites["ddp"].skipped == 2 and suites["ddp"].failures == 0
    assert suites["verdict"].failures == 1 and xml.failures == 3
    text = (tmp_path / "r.xml").read_text()
    assert "endpoint-unreachable" in text and "TCP connect timed out" in text
