"""runner.py over its one record: what a node learns becomes one report, built once, and
what it tells the other nodes is its whole judgement (baseline included).

Like pytest-xdist's DSession tests with a mock node, the other nodes are a MockPeers that
records what this node publishes and answers with a chosen verdict; the launch is a fake
that writes the rank files a real run writes. No torchrun, no store, no network.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ddpcheck import results
from ddpcheck.cluster.checkin import NodeCard
from ddpcheck.cluster.ending import Outcome
from ddpcheck.cluster.lifecycle import ClusterState
from ddpcheck.diagnoses import (
    BAD_SOCKET_IFNAME,
    RANK_KILLED,
    WRONG_COLLECTIVE_RESULT,
    Problem,
)
from ddpcheck.launcher import runner
from ddpcheck.launcher.config import RunConfig
from ddpcheck.launcher.fdlimit import FileLimits
from ddpcheck.launcher.launch import LaunchOutcome
from ddpcheck.launcher.noderun import (
    LAUNCHED,
    NETWORK_CHECK,
    STOPPED,
    NodeRun,
    adopt,
    node_outcome,
    node_report,
)
from ddpcheck.scheduler.detect import JobEnv
from ddpcheck.stages import PREFLIGHT
from tests.unit.report.events import STAGES, all_pass

HOST = socket.gethostname()
PORT_BUSY = BAD_SOCKET_IFNAME  # any preflight problem


def regression() -> Problem:
    from ddpcheck.judgements.compare import REGRESSION

    return REGRESSION.problem("all_reduce busbw 2.0 GB/s, baseline 9.0 GB/s", hosts=[HOST])


def launched(**kw: object) -> NodeRun:
    run = NodeRun(HOST, STAGES, 2, elapsed=1.0, mode=LAUNCHED,
                  events={0: all_pass(0), 1: all_pass(1)})
    return run.with_(**kw)


# --- the record becomes one report -----------------------------------------------------------
def test_a_launched_run_of_passing_ranks_is_ready_with_preflight_first() -> None:
    report = node_report(launched(results_note="results: /tmp/x"))
    assert report.ready and [s.name for s in report.stages] == [PREFLIGHT, *STAGES]
    assert report.stages[0].status == results.PASS and report.notes == ["results: /tmp/x"]


def test_a_stopped_run_blocks_every_stage_on_preflight_and_names_the_nodes() -> None:
    problem = PORT_BUSY.problem("port 29500 is taken", hosts=["n1"], stage=PREFLIGHT)
    run = NodeRun(HOST, STAGES, 4, mode=STOPPED, preflight=(problem,), checked_in=("n1",))
    report = node_report(run)
    assert not report.ready and report.problems[0].code == PORT_BUSY.code
    assert report.stages[0].status == results.FAIL
    assert {(s.status, s.blocked_by) for s in report.stages[1:]} == {
        (results.BLOCKED, PREFLIGHT)}
    assert report.nodes == sorted({"n1", HOST})


def test_network_only_mode_reports_the_nodes_probed_and_no_rank() -> None:
    run = NodeRun(HOST, (), 4, mode=NETWORK_CHECK, checked_in=("a", "b"))
    report = node_report(run)
    assert report.ready and [s.name for s in report.stages] == [PREFLIGHT]
    assert "2 nodes checked in and probed" in report.notes[0]


def test_baseline_regressions_are_part_of_the_judgement_and_the_outcome() -> None:
    run = launched(baseline_problems=(regression(),), baseline_notes=("baseline b.json: 1",))
    report = node_report(run)
    assert not report.ready and report.problems[-1].code == "regression"
    assert report.notes == ["baseline b.json: 1"]
    told = node_outcome(run)  # what this node publishes: NOT READY, with the regression
    assert not told.ready and "regression" in [p.code for p in told.problems]


def test_an_adopted_verdict_is_this_nodes_story_too() -> None:
    killed = RANK_KILLED.problem("rank 3 on n1 was killed by SIGKILL", ranks=[3], hosts=["n1"],
                                 stage="collectives")
    run = adopt(launched(), Outcome("n0", False, (killed,)))
    report = node_report(run)
    assert not report.ready and report.problems[0].code == RANK_KILLED.code
    assert node_report(adopt(launched(), WRONG_COLLECTIVE_RESULT.problem("x"))).problems


def test_the_report_is_built_from_the_record_alone() -> None:
    run = launched(rank0_here=False, rank0_host="n0")
    first, again = node_report(run), node_report(run)
    assert first.notes == again.notes == [
        f"this is {HOST}'s part; the whole report is printed on the node hosting rank 0 (n0)"]
    assert run.preflight == () and run.adopted == ()  # building changed nothing


# --- run() end to end with a mock launch and mock peers --------------------------------------
class MockPeers:
    """The other nodes: record what this node publishes; answer with a chosen verdict."""

    def __init__(self, verdict: Outcome | Problem | None = None,
                 collected: list[Problem] | None = None) -> None:
        self.verdict, self.collected = verdict, collected or []
        self.calls: list[tuple[str, object]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        e = runner.ending
        monkeypatch.setattr(e, "post_outcome", lambda st, o: self.calls.append(("post", o)))
        monkeypatch.setattr(e, "publish_verdict",
                            lambda st, o: self.calls.append(("publish", o)))
        monkeypatch.setattr(e, "await_verdict", lambda st: self._answer())
        monkeypatch.setattr(e, "collect_outcomes", lambda st: self._collect())
        monkeypatch.setattr(e, "release", lambda st: self.calls.append(("release", None)))

    def _answer(self) -> Outcome | Problem:
        self.calls.append(("await", None))
        assert self.verdict is not None
        return self.verdict

    def _collect(self) -> list[Problem]:
        self.calls.append(("collect", None))
        return self.collected


def fake_launch(ranks: list[int]):  # type: ignore[no-untyped-def]
    """A launch whose ranks all pass: the rank and exit files the wrappers would write."""
    def launch(cfg, results_dir, nproc, start, plan=None):  # type: ignore[no-untyped-def]
        for r in ranks:
            log = results.RankLog(results_dir, r)
            for event in all_pass(r):
                log.write(event)
            results.write_exit(results_dir, results.ExitStatus(rank=r, returncode=0,
                                                               finished=True))
        return LaunchOutcome(0, 0.5), "torchrun: all ranks finished\n"
    return launch


@pytest.fixture
def node(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A node of a 2-node run whose preflight passes and whose check-in succeeds."""
    monkeypatch.setattr(runner, "node_preflight", lambda cfg, env, nproc: [])
    monkeypatch.setattr(runner, "open_file_limits",
                        lambda *a, **k: FileLimits(1 << 16, 1 << 16, 257, 0, 257))
    me = NodeCard(HOST, 2, "r1", 1, 1)
    cards = [NodeCard("other", 2, "r1", 1, 2), me]
    monkeypatch.setattr(runner.lifecycle, "connect",
                        lambda *a, **k: ClusterState(cards=cards, me=me, store=object()))


def config(tmp_path: Path, **kw: object) -> RunConfig:
    return RunConfig(nodes=2, nproc_per_node=1, stages=STAGES, results_dir=tmp_path / "res",
                  json_path=tmp_path / "report.json", **kw)  # type: ignore[arg-type]


def test_a_node_publishes_after_its_baseline_judgement_then_adopts(
        node: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(runner, "_launch", fake_launch([1]))
    from ddpcheck.judgements import compare
    from ddpcheck.launcher import compare_command

    monkeypatch.setattr(compare_command, "against_baseline",
                        lambda data, path, ratio: ([regression()], ["baseline: 1 regression"]))
    monkeypatch.setattr(compare, "load_report", lambda path, what: {"measurements": {}})
    peers = MockPeers(verdict=Outcome("n0", False, (regression(),)))
    peers.install(monkeypatch)
    code = runner.run(config(tmp_path, baseline=tmp_path / "base.json"), JobEnv("none"))
    assert [c for c, _ in peers.calls] == ["post", "await", "release"]
    posted = peers.calls[0][1]
    assert isinstance(posted, Outcome) and not posted.ready  # never READY, then a regression
    assert "regression" in [p.code for p in posted.problems]
    data = results.read_json(tmp_path / "report.json")
    assert code == 1 and data["ready"] is False
    assert [p["code"] for p in data["problems"]].count("regression") == 1  # merged, once
    assert "NOT READY" in capsys.readouterr().out


def test_the_rank0_node_collects_the_others_before_it_publishes(
        node: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "_launch", fake_launch([0, 1]))
    silent = RANK_KILLED.problem("node other sent no outcome", hosts=["other"])
    peers = MockPeers(collected=[silent])
    peers.install(monkeypatch)
    code = runner.run(config(tmp_path), JobEnv("none"))
    assert [c for c, _ in peers.calls] == ["collect", "publish", "release"]
    published = peers.calls[1][1]
    assert isinstance(published, Outcome) and not published.ready
    assert silent.observed in [p.observed for p in published.problems] and code == 1


def test_a_healthy_node_publishes_ready_and_reports_ready(
        node: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "_launch", fake_launch([0, 1]))
    peers = MockPeers()
    peers.install(monkeypatch)
    assert runner.run(config(tmp_path), JobEnv("none")) == 0
    published = peers.calls[1][1]
    assert isinstance(published, Outcome) and published.ready and not published.problems
    data = results.read_json(tmp_path / "report.json")
    assert data["ready"] is True and data["stages"][0]["name"] == PREFLIGHT


def test_a_preflight_problem_stops_before_the_launch_and_the_exchange(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = PORT_BUSY.problem("port 29500 is taken", hosts=[HOST])
    monkeypatch.setattr(runner, "node_preflight", lambda cfg, env, nproc: [problem])
    monkeypatch.setattr(runner, "_launch", lambda *a, **k: pytest.fail("launched"))
    peers = MockPeers()
    peers.install(monkeypatch)
    cfg = RunConfig(nodes=1, nproc_per_node=1, stages=STAGES, results_dir=tmp_path / "res",
                 json_path=tmp_path / "report.json")
    assert runner.run(cfg, JobEnv("none")) == 1 and peers.calls == []
    data = results.read_json(tmp_path / "report.json")
    assert [s["status"] for s in data["stages"]] == ["FAIL", *["BLOCKED"] * len(STAGES)]


def test_an_interrupted_run_still_reports_and_exits_128_plus_the_signal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "node_preflight", lambda cfg, env, nproc: [])
    monkeypatch.setattr(runner, "open_file_limits",
                        lambda *a, **k: FileLimits(1 << 16, 1 << 16, 257, 0, 257))

    def interrupted(cfg, results_dir, nproc, start, plan=None):  # type: ignore[no-untyped-def]
        return LaunchOutcome(None, 0.5, interrupted="SIGTERM"), ""
    monkeypatch.setattr(runner, "_launch", interrupted)
    cfg = RunConfig(nodes=1, nproc_per_node=2, stages=STAGES, results_dir=tmp_path / "res",
                 json_path=tmp_path / "report.json")
    assert runner.run(cfg, JobEnv("none")) == 128 + 15
    data = results.read_json(tmp_path / "report.json")
    assert not data["ready"] and "run-interrupted" in [p["code"] for p in data["problems"]]
