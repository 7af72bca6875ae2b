"""Tests for ddpcheck.plugin: a real pytest session with the plugin, as a world of one rank.

Each session runs in a subprocess (pytester.runpytest_subprocess) with no MASTER_ADDR and
WORLD_SIZE unset, so the world is this one process on an in-process store. The probe file
below is written out of stage order on purpose. One session serves the tests that read its
rank file (it is run once and cached), because every session pays for importing torch.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

PROBES = '''
import pytest

from ddpcheck.diagnoses import WRONG_COLLECTIVE_RESULT
from ddpcheck.stages import stage


@stage("ddp")
def test_ddp_trains():
    """DDP trains in lockstep."""


@stage("checkpoint")
def test_checkpoint_loads():
    pass


@stage("collectives")
def test_all_reduce_wrong():
    raise WRONG_COLLECTIVE_RESULT.fail("all_reduce gave 3, expected 4")


@stage("collectives")
def test_broadcast_asserts():
    assert False


@stage("collectives")
def test_all_gather_ok(record):
    record.key_figure("1 rank")
    record.measure("bytes", 4096)


@stage("bandwidth")
def test_bandwidth_sweep():
    pass


def test_not_a_probe():
    pass


@stage("rendezvous")
def test_world_has_gpus():
    pytest.skip("no GPU here")


@stage("node")
def test_node_first(world, settings):
    assert world.world_size == 1
    assert settings.probe_timeout == 5
'''

# stages run: everything but bandwidth (and placement, which has no probe here)
STAGES = "node,rendezvous,collectives,ddp,checkpoint"
# plugins of this environment that the sessions do not need; they only slow the start
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark")


@dataclass
class Session:
    result: pytest.RunResult
    results_dir: Path

    @property
    def events(self) -> list[dict[str, Any]]:
        lines = (self.results_dir / "rank-0.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    @property
    def probes(self) -> dict[str, dict[str, Any]]:
        return {e["name"]: e for e in self.events if e["event"] == "probe"}


_SESSIONS: dict[str, Session] = {}


def run_session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                results_dir: Path, stages: str) -> Session:
    for name in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
                 "LOCAL_WORLD_SIZE", "GROUP_RANK", "SLURM_PROCID", "SLURM_JOB_ID",
                 "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE", "DDPCHECK_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DDPCHECK_RESULTS_DIR", str(results_dir))
    monkeypatch.setenv("DDPCHECK_PROBE_TIMEOUT", "5")
    monkeypatch.setenv("DDPCHECK_STAGES", stages)
    pytester.makepyfile(test_probes=PROBES)
    result = pytester.runpytest_subprocess("-p", "ddpcheck.plugin", *QUIET, timeout=120)
    return Session(result, results_dir)


@pytest.fixture
def session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
            tmp_path_factory: pytest.TempPathFactory) -> Session:
    """The probe file run once with DDPCHECK_STAGES=STAGES (shared by the tests below)."""
    if "main" not in _SESSIONS:
        _SESSIONS["main"] = run_session(pytester, monkeypatch,
                                        tmp_path_factory.mktemp("results"), STAGES)
    return _SESSIONS["main"]


def test_probes_run_in_stage_order_regardless_of_file_order(session: Session) -> None:
    order = [e["name"] for e in session.events if e["event"] == "probe"]
    assert order == ["test_node_first", "test_world_has_gpus", "test_all_reduce_wrong",
                     "test_broadcast_asserts", "test_all_gather_ok", "test_ddp_trains",
                     "test_checkpoint_loads"]
    assert [e["stage"] for e in session.events if e["event"] == "probe"] == [
        "node", "rendezvous", "collectives", "collectives", "collectives", "ddp", "checkpoint"]


def test_unmarked_tests_and_unselected_stages_are_deselected(session: Session) -> None:
    outcomes = session.result.parseoutcomes()
    assert outcomes["deselected"] == 2
    assert "test_not_a_probe" not in session.probes
    assert "test_bandwidth_sweep" not in session.probes
    assert len(session.probes) == 7


def test_a_diagnosed_failure_is_recorded_with_its_problem(session: Session) -> None:
    probe = session.probes["test_all_reduce_wrong"]
    assert (probe["status"], probe["agreed"]) == ("FAIL", "FAIL")
    [problem] = probe["problems"]
    assert problem["code"] == "wrong-collective-result"
    assert problem["observed"] == "all_reduce gave 3, expected 4"
    assert (problem["stage"], problem["ranks"]) == ("collectives", [0])


def test_a_bare_assert_is_ddpchecks_own_failure_with_its_place(session: Session) -> None:
    """A probe must raise a diagnosis; a bare assert is a bug of the probe, not the cluster's."""
    probe = session.probes["test_broadcast_asserts"]
    assert probe["status"] == "FAIL"
    [problem] = probe["problems"]
    assert (problem["code"], problem["role"]) == ("ddpcheck-error", "own-failure")
    assert problem["observed"].startswith("probe test_broadcast_asserts raised AssertionError")
    assert re.search(r"/test_probes\.py:\d+\)", problem["observed"]), problem["observed"]


def test_the_rest_of_a_failed_stage_still_runs(session: Session) -> None:
    probe = session.probes["test_all_gather_ok"]
    assert (probe["status"], probe["figure"], probe["measurements"]) == (
        "PASS", "1 rank", {"bytes": 4096})


def test_a_failed_stage_blocks_the_later_stages(session: Session) -> None:
    for name in ("test_ddp_trains", "test_checkpoint_loads"):
        probe = session.probes[name]
        assert (probe["status"], probe["message"]) == ("BLOCKED",
                                                        "blocked by stage collectives")
        assert probe["blocked_by"] == "collectives"  # typed: the report reads this field
    end = session.events[-1]
    assert (end["event"], end["blocked_by"]) == ("end", "collectives")


def test_a_skip_reason_is_recorded(session: Session) -> None:
    probe = session.probes["test_world_has_gpus"]
    assert (probe["status"], probe["message"]) == ("SKIP", "no GPU here")


def test_passing_probes_and_their_docstrings_are_recorded(session: Session) -> None:
    assert session.probes["test_node_first"]["status"] == "PASS"  # world of 1, settings read
    assert session.probes["test_ddp_trains"]["doc"] == ["DDP trains in lockstep."]


def test_the_pytest_outcome_matches_the_rank_file(session: Session) -> None:
    session.result.assert_outcomes(passed=2, failed=2, skipped=3, deselected=2)
    assert session.result.ret == 1


def test_world_json_holds_the_ranks_events(session: Session) -> None:
    world = json.loads((session.results_dir / "world.json").read_text())
    assert world["missing"] == []
    assert list(world["ranks"]) == ["0"]
    assert [e["event"] for e in world["ranks"]["0"]] == [e["event"] for e in session.events]
    start, hello = world["ranks"]["0"][:2]
    assert (start["event"], start["rank"], start["world_size"]) == ("start", 0, 1)
    assert (hello["event"], hello["missing"]) == ("hello", [])


def test_a_bad_stages_value_is_one_line_without_traceback(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bad = run_session(pytester, monkeypatch, tmp_path / "results", "node,nodes")
    errors = [line for line in bad.result.errlines if line.strip()]
    assert errors == ["ERROR: ddpcheck: DDPCHECK_STAGES='node,nodes' (environment): unknown "
                      "stage 'nodes' (stages: node, rendezvous, collectives, bandwidth, ddp, "
                      "placement, checkpoint)"]
    assert "Traceback" not in "\n".join(bad.result.outlines + bad.result.errlines)
    assert bad.result.ret == pytest.ExitCode.USAGE_ERROR
    assert not (tmp_path / "results").exists()

