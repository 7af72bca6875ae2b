"""Tests for ddpcheck.report.comparison: the text of a run compared with its baseline.

Inputs are the JSON reports of recorded real runs (tests/data/runs).
"""

from __future__ import annotations

import json

from ddpcheck.judgements.compare import compare_reports
from ddpcheck.report.comparison import render_comparison, verdict_line
from tests.helpers.paths import DATA

RUNS = DATA / "runs"


def report(run: str) -> dict:
    return json.loads((RUNS / run / "report.json").read_text())


def test_the_same_report_shows_no_table_and_says_no_regression():
    result = compare_reports(report("healthy-2ranks"), report("healthy-2ranks"))
    text = render_comparison(result, 0.8, "base.json", "now.json")
    lines = text.rstrip().splitlines()
    assert lines[0] == "# baseline base.json vs now now.json"
    assert [ln for ln in lines if ln] == [lines[0], verdict_line(result, 0.8)]  # no table
    assert lines[-1].startswith("NO REGRESSION: ")


def test_a_worse_run_shows_what_differs_each_regression_and_the_verdict_last():
    result = compare_reports(report("healthy-2ranks"), report("below-expected-2ranks"))
    text = render_comparison(result, 0.8, "base.json", "now.json")
    table = text.split("\n\n")[1].splitlines()
    assert table[0].split() == ["figure", "baseline", "now", "verdict"]
    assert len(table) == 2 + sum(r.verdict != "same" for r in result.rows)
    assert "FAIL  regression" in text
    assert text.rstrip().splitlines()[-1].startswith("REGRESSION: ")
