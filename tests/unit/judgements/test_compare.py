"""compare: regressions beyond threshold and noise, node matching, the CLI's exit codes."""

from __future__ import annotations

import copy
import json

import pytest

from ddpcheck.judgements.compare import compare_reports, load_report, match_nodes
from ddpcheck.launcher.cli import main
from ddpcheck.parsing import UsageError
from tests.helpers.paths import DATA

RUNS = DATA / "runs"
HEALTHY = RUNS / "healthy-2ranks" / "report.json"
FAILED = RUNS / "below-expected-2ranks" / "report.json"


def healthy() -> dict:
    return json.loads(HEALTHY.read_text())


def with_links(report: dict, hosts: list[str], rate: float = 0.12) -> dict:
    out = copy.deepcopy(report)
    out["measurements"]["link_hosts"] = hosts
    out["measurements"]["link_matrix"] = {f"{a}->{b}": rate for a in hosts for b in hosts
                                          if a != b}
    return out


def verdicts(result) -> dict[str, str]:
    return {r.what: r.verdict for r in result.rows}


def test_a_report_against_itself_has_no_regression():
    result = compare_reports(healthy(), healthy())
    assert not result.regressions and all(r.verdict == "same" for r in result.rows)
    whats = verdicts(result)
    assert "torch version" in whats and "peak all-reduce busbw" in whats
    assert "all-reduce busbw at 16 MiB" in whats and "DDP step time at world size 2" in whats
    assert "stage bandwidth" in whats and "intra-node busbw on vm" in whats


def test_one_slow_link_is_the_only_regression_and_names_both_hosts():
    base = with_links(healthy(), ["node0", "node1", "node2"])
    new = copy.deepcopy(base)
    new["measurements"]["link_matrix"]["node0->node2"] = 0.036  # 300 Mbit/s
    result = compare_reports(base, new, 0.8)
    assert [r.what for r in result.regressions] == ["link node0 -> node2"]
    problem = result.problems(0.8)[0]
    assert problem.code == "regression" and problem.hosts == ("node0", "node2")
    assert "0.036 GB/s, baseline 0.120 GB/s" in problem.observed


def test_a_drop_is_a_regression_only_beyond_the_trials_min_max_and_the_threshold():
    base, new = healthy(), healthy()
    row = next(r for r in new["measurements"]["allreduce_sweep"] if r["size"] == 4 << 20)
    base_row = next(r for r in base["measurements"]["allreduce_sweep"] if r["size"] == 4 << 20)
    factor = 1.6  # 1.6x slower: below 0.8x on the medians
    for key in ("busbw", "algbw"):
        row[key] /= factor
    row["time_us"] *= factor
    row["time_max_us"] = row["time_us"] * 1.1
    # The new fastest trial is slower than the baseline's slowest, but not by the threshold.
    row["time_min_us"] = base_row["time_max_us"] * 1.1
    assert verdicts(compare_reports(base, new))["all-reduce busbw at 4 MiB"] == "worse (noise)"
    row["time_min_us"] = base_row["time_max_us"] / 0.8 * 1.05  # beyond both now
    assert verdicts(compare_reports(base, new))["all-reduce busbw at 4 MiB"] == "REGRESSION"


def test_latency_bound_sizes_are_shown_not_judged():
    base, new = healthy(), healthy()
    row = next(r for r in new["measurements"]["allreduce_sweep"] if r["size"] == 4 << 10)
    for key in ("busbw", "algbw"):
        row[key] /= 10
    for key in ("time_us", "time_min_us", "time_max_us"):
        row[key] *= 10
    assert verdicts(compare_reports(base, new))["all-reduce busbw at 4 KiB"] == (
        "worse (latency-bound, not judged)")


def test_slower_ddp_step_and_a_failed_stage_are_regressions_versions_only_changes():
    base, new = healthy(), healthy()
    new["measurements"]["ddp_scaling"][-1]["step_time_s"] *= 2
    new["stages"][4]["status"] = "FAIL"
    for facts in new["measurements"]["ranks"].values():
        facts["torch"] = "2.14.0+cpu"
    got = verdicts(compare_reports(base, new))
    assert got["DDP step time at world size 2"] == "REGRESSION"
    assert got[f"stage {new['stages'][4]['name']}"] == "REGRESSION"
    assert got["torch version"] == "changed"


def test_nodes_with_other_names_are_matched_by_position_and_the_result_says_so():
    base = with_links(healthy(), ["a", "b"])
    new = with_links(healthy(), ["x", "y"], rate=0.05)
    mapping, how = match_nodes(base, new)
    assert mapping == {"a": "x", "b": "y"} and "matched by position (a -> x, b -> y)" in how
    result = compare_reports(base, new)
    assert how in result.notes
    assert {r.what for r in result.regressions} == {"link x (baseline a) -> y (baseline b)",
                                                    "link y (baseline b) -> x (baseline a)"}


def test_cli_exit_codes(tmp_path, capsys):
    assert main(["compare", str(HEALTHY), str(HEALTHY)]) == 0
    assert "NO REGRESSION" in capsys.readouterr().out
    assert main(["compare", str(HEALTHY), str(FAILED)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  regression" in out and out.rstrip().splitlines()[-1].startswith("REGRESSION")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["compare", str(HEALTHY), str(bad)]) == 2
    assert main(["compare", str(HEALTHY), str(HEALTHY), "--regression-ratio", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "not JSON" in err and "--regression-ratio" in err


def test_load_report_rejects_files_that_are_not_reports(tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{"a": 1}')
    with pytest.raises(UsageError, match="not a ddpcheck report"):
        load_report(other)


MESH = RUNS / "mesh3-1gbit"  # real runs: 3 namespace hosts, every link a 1 Gbit/s tc bucket


def test_recorded_namespace_runs_healthy_pair_and_one_slowed_link():
    base = load_report(MESH / "base.json")
    assert not compare_reports(base, load_report(MESH / "again.json")).regressions
    slow = compare_reports(base, load_report(MESH / "slow-node0-node2-300mbit.json"))
    links = [r.what for r in slow.regressions if r.what.startswith("link ")]
    assert links == ["link node0 -> node2", "link node2 -> node0"]
    first = slow.problems(0.8)[0]
    assert first.hosts == ("node0", "node2") and first.observed.startswith("link node0 -> node2")
