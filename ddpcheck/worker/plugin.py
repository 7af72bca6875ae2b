"""The pytest plugin that turns a pytest session into one rank of a ddpcheck run.

Runs inside every worker (``torchrun ... -m pytest -p ddpcheck.plugin --pyargs ddpcheck.checks``).
It orders probes by stage, checks that every rank collected the same probes, and after each
probe has all ranks agree on its outcome through the control store (with a deadline), so
ranks never diverge on which collectives they enter. A failed stage blocks the later ones
on every rank. Each rank logs its events to its rank file; rank 0 gathers every rank's.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddpcheck import results
from ddpcheck.cluster import deadlines, pairing
from ddpcheck.diagnoses import (
    COLLECTION_MISMATCH,
    COLLECTIVE_FAILED,
    RANK_UNRESPONSIVE,
    Problem,
    ProblemFound,
)
from ddpcheck.parsing import UsageError
from ddpcheck.ranges import format_ranks
from ddpcheck.stages import MARKER, STAGES
from ddpcheck.worker import initmethod
from ddpcheck.worker.agreement import decode_hosts, encode_hosts, odd_collections, probe_decision
from ddpcheck.worker.blame import is_communication_error, own_failure
from ddpcheck.worker.recorder import Recorder
from ddpcheck.worker.settings import WorkerSettings
from ddpcheck.worker.world import Exchange, World, connect, first_line

AFTER_FAILURE_WAIT_S = 5.0
LINK_ROUNDS_MARKER = "ddpcheck_link_rounds"
RECORD_KEY = pytest.StashKey[Recorder]()
OUTCOME_KEY = pytest.StashKey[dict]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(name): the ddpcheck stage of a probe")
    config.addinivalue_line("markers", f"{LINK_ROUNDS_MARKER}: the probe plays the link rounds "
                            "(its deadline grows with them)")
    if not config.pluginmanager.has_plugin("ddpcheck-run"):
        config.pluginmanager.register(RankSession(config), "ddpcheck-run")


def stage_of(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker(MARKER)
    return mark.args[0] if mark else None


class RankSession:
    """State of this rank's session: the world, the log and what blocks later probes."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        try:
            self.settings = WorkerSettings.from_env(os.environ)
        except UsageError as exc:  # a bad DDPCHECK_* value: one line, no traceback
            raise pytest.UsageError(f"ddpcheck: {exc}") from None
        self.world: World | None = None
        self.log: results.RankLog | None = None
        self.blocked_by: str | None = None  # stage whose failure blocks the rest
        self.failed_stages: list[str] = []
        self.counter = 0
        self.exitstatus: int | None = None  # pytest's, kept for a hard exit of a broken world

    # --- session start: connect and say hello ---------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        s = self.settings
        try:
            self.world = connect(timeout=s.probe_timeout, settings=s)
        except Exception as exc:  # the store is unreachable: nothing can be agreed, stop here
            where = initmethod.describe(s.init_method, os.environ)
            seen = f"{where} within {s.probe_timeout:g} s: {first_line(exc)}"
            if s.results_dir:
                results.write_failure(s.results_dir, results.rank_from_env(os.environ),
                                      results.SessionFailure(world_connect=seen))
            pytest.exit(f"ddpcheck: cannot reach the control store at {seen}", returncode=3)
        self.log = results.RankLog(s.results_dir, self.world.rank)
        w = self.world
        me = {"host": w.host, "local_rank": w.local_rank, "node_rank": w.node_rank,
              "pid": os.getpid()}
        self.log.write(results.Start(rank=w.rank, world_size=w.world_size, backend=w.backend,
                                     **me))
        # Rank 0 gathers every rank's hello and publishes the layout (host of every rank,
        # run-length encoded: O(nodes) bytes) that the probes need on every rank.
        seen: dict[int, dict] = {}

        def layout(ex: Exchange) -> dict:
            seen.update(ex.values)
            return {"coordinator": w.host,
                    "hosts": encode_hosts({r: v["host"] for r, v in ex.values.items()})}
        decision, missing = w.decide("hello", me, layout, timeout=s.probe_timeout)
        if decision:
            w.hosts_by_rank = decode_hosts(decision["hosts"])
        self.log.write(results.Hello(ranks=seen or {w.rank: me}, missing=tuple(missing),
                                     coordinator=(decision or {}).get("coordinator")))
        if missing:
            self._block("rendezvous", [self._unresponsive(missing, "the start of the run",
                                                          w.deadline(s.probe_timeout))])

    # --- collection: order by stage, select, and check every rank collected the same -----
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list) -> None:
        order = {name: i for i, name in enumerate(STAGES)}
        keep = [it for it in items if stage_of(it) in self.settings.stages]
        dropped = [it for it in items if it not in keep]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        keep.sort(key=lambda it: order[stage_of(it)])  # stable: file order within a stage
        items[:] = keep
        for it in items:
            it.add_marker(pytest.mark.timeout(self._deadline(it), method="thread"))
        self._check_same_collection([it.nodeid for it in items])

    def _deadline(self, item: pytest.Item) -> float:
        """A probe's hard limit (``cluster.deadlines.probe``): the probe timeout and a margin,
        its agreement over R ranks, its communicators over N nodes, plus the rounds of the
        link stage for the probe that plays them (O(log N) above 32 nodes)."""
        base = self.settings.probe_timeout + 20
        if not self.world:
            return base
        nodes = len(set(self.world.hosts_by_rank.values())) or 1
        rounds = (len(pairing.initial_rounds(nodes)) + 4
                  if item.get_closest_marker(LINK_ROUNDS_MARKER) else 0)
        return deadlines.probe(base, self.world.world_size, nodes, rounds)

    def _check_same_collection(self, nodeids: list[str]) -> None:
        assert self.world and self.log
        digest = hashlib.sha256("\n".join(nodeids).encode()).hexdigest()[:16]
        mine = {"digest": digest, "count": len(nodeids)}
        decision, missing = self.world.decide("collection", mine, odd_collections)
        if decision and decision["odd"]:
            ref = decision["reference"]
            problems = [COLLECTION_MISMATCH.problem(
                f"rank 0 collected {ref['count']} probes ({ref['digest']}); ranks "
                f"{format_ranks(decision['odd'])} collected a different set",
                ranks=decision["odd"])] if self.world.rank == 0 else []
            self._block("collection", problems)
        elif missing and not self.blocked_by:
            self._block("rendezvous", [self._unresponsive(missing, "probe collection",
                                                          self.world.deadline())])

    # --- one probe ---------------------------------------------------------------------
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any) -> Iterator[None]:
        assert self.world and self.log
        stage = stage_of(item) or "?"
        if self.failed_stages and not self.blocked_by and stage not in self.failed_stages:
            self.blocked_by = self.failed_stages[0]
        item.stash[RECORD_KEY] = Recorder()
        self.log.write(results.ProbeStart(nodeid=item.nodeid, stage=stage,
                                          deadline=self._deadline(item)))
        start = time.monotonic()
        yield
        outcome = item.stash.get(OUTCOME_KEY, {"status": results.PASS, "problems": []})
        outcome["duration"] = round(time.monotonic() - start, 3)
        self._agree(item, stage, outcome)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.blocked_by:
            item.stash[OUTCOME_KEY] = {"status": results.BLOCKED, "problems": [],
                                       "message": f"blocked by stage {self.blocked_by}",
                                       "blocked_by": self.blocked_by}
            pytest.skip(f"BLOCKED by stage {self.blocked_by}")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Iterator:
        report = (yield).get_result()
        if item.stash.get(OUTCOME_KEY, {}).get("status") in (results.FAIL, results.BLOCKED):
            return
        if report.skipped and call.when in ("setup", "call"):
            rep = report.longrepr
            reason = rep[2] if isinstance(rep, tuple) else str(rep)
            item.stash[OUTCOME_KEY] = {"status": results.SKIP, "problems": [],
                                       "message": reason.removeprefix("Skipped: ")}
        elif report.failed:
            item.stash[OUTCOME_KEY] = self._failure(item, call)

    def _failure(self, item: pytest.Item, call: pytest.CallInfo) -> dict:
        """The probe's problems, and whose failure it is: a communication error leaves the
        process group suspect (later stages blocked, shorter waits); ddpcheck's own
        exception (blame.own_failure) does neither."""
        exc = call.excinfo.value if call.excinfo else None
        breaks = exc is not None and is_communication_error(exc)
        own = False
        if isinstance(exc, ProblemFound):
            problems = list(exc.problems)
        elif exc is not None and breaks:
            problems = [COLLECTIVE_FAILED.problem(f"{item.name}: {first_line(exc)}")]
        else:
            own = True
            failure = exc if exc is not None else RuntimeError(f"{call.when} failed")
            problems = [own_failure(item.name, failure, stage_of(item) or "?",
                                    self.settings.stages)]
        return {"status": results.FAIL, "problems": problems, "breaks_world": breaks,
                "own": own, "message": problems[0].observed}

    def _agree(self, item: pytest.Item, stage: str, outcome: dict) -> None:
        """All ranks publish their outcome of this probe and wait for each other's."""
        assert self.world and self.log
        w = self.world
        rec = item.stash[RECORD_KEY]
        problems = [self._locate(p, stage) for p in outcome["problems"]]
        mine = {"status": outcome["status"], "breaks_world": outcome.get("breaks_world", False),
                "own": outcome.get("own", False)}
        self.counter += 1
        decision: dict | None = {"fail": False, "breaks": False}
        missing: tuple[int, ...] = ()
        if outcome["status"] != results.BLOCKED:  # every live rank is blocked at the same point
            # After a collective timed out here, live peers time out at about the same moment:
            # waiting the full deadline again for a dead or stopped one only delays the report.
            wait = min(w.timeout, AFTER_FAILURE_WAIT_S) if mine["breaks_world"] else None
            decision, missing = w.decide(f"probe/{self.counter}", mine, probe_decision,
                                         timeout=wait)
        if missing:
            problems.append(self._unresponsive(missing, f"probe {item.name}", w.deadline(wait),
                                               stage))
        failed = bool(missing) or decision is None or decision["fail"]
        agreed = results.FAIL if failed else outcome["status"]
        self.log.write(results.Probe(
            nodeid=item.nodeid, name=item.name, stage=stage, doc=_doc_lines(item),
            status=outcome["status"], agreed=agreed, duration=outcome["duration"],
            message=outcome.get("message", ""), figure=rec.figure,
            measurements=rec.measurements, problems=tuple(problems),
            blocked_by=outcome.get("blocked_by", "")))
        if missing or decision is None or decision["breaks"]:
            self._block(stage, [])
        elif agreed == results.FAIL and not decision.get("own_only"):
            # ddpcheck's own failure leaves the world usable: the later stages still run
            if stage not in self.failed_stages:
                self.failed_stages.append(stage)

    def _locate(self, problem: Problem, stage: str) -> Problem:
        w = self.world
        assert w is not None
        ranks = problem.ranks or (w.rank,)
        hosts = problem.hosts or tuple(sorted({w.hosts_by_rank.get(r, "?") for r in ranks}))
        return problem.where(stage=problem.stage or stage, ranks=ranks, hosts=hosts)

    def _unresponsive(self, missing: tuple[int, ...] | list[int], what: str, waited: float,
                      stage: str = "rendezvous") -> Problem:
        """The ranks that did not publish within ``waited`` seconds, the deadline the world
        really applied (the probe timeout grown with the world, ``World.deadline``)."""
        w = self.world
        assert w is not None
        hosts = tuple(sorted({w.hosts_by_rank.get(r, "unknown host") for r in missing}))
        # The same words on every rank that saw it, so the report merges them into one.
        return RANK_UNRESPONSIVE.problem(
            f"rank {format_ranks(missing)} did not finish {what} within {waited:.3g} s",
            ranks=missing, hosts=hosts, stage=stage)

    def _block(self, stage: str, problems: list[Problem]) -> None:
        assert self.log
        if problems:
            self.log.write(results.Problems(stage=stage, problems=tuple(problems)))
        self.blocked_by = self.blocked_by or stage

    # --- session end: gather everything on rank 0 ------------------------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        w, log = self.world, self.log
        self.exitstatus = int(exitstatus)
        if w is None or log is None:
            return
        log.write(results.End(blocked_by=self.blocked_by))
        got = w.gather("events", log.records(),  # rank 0 only; grows with the world
                       timeout=deadlines.final_gather(min(w.timeout, 10.0), w.world_size))
        if w.rank == 0 and self.settings.results_dir:
            results.write_json(results.world_file(Path(self.settings.results_dir)),
                               {"ranks": got.values, "missing": list(got.missing)})
        if not self.blocked_by:
            w.close()

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """A rank ends now, once everything is written and printed.

        Tearing down a process group with a stopped or dead peer can block in gloo's and
        NCCL's destructors for as long as the process lives; the launcher would then wait
        out its grace period before ending it, and every node's verdict would come that much
        later. A healthy rank has destroyed its group already (``pytest_sessionfinish``), and
        Python's own shutdown after it (torch's atexit handlers, freeing every module) took
        1.5-5 s per rank and tells nothing. Nothing is left to do: the rank file (each
        record written and flushed on its own) holds this rank's whole story. A session that
        did not run (a usage or collection error, exit status 2-5) ends as pytest ends it:
        pytest prints its "ERROR: module or package not found" after unconfigure."""
        if self.world is None or self.exitstatus is None:
            return
        ran = self.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        if not (ran or self.blocked_by):
            return
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(self.exitstatus)


def _doc_lines(item: pytest.Item) -> tuple[str, ...]:
    """The probe's one-line, user-facing docstring (as a list, empty when missing)."""
    doc = (getattr(item, "obj", None).__doc__ or "").strip()  # type: ignore[union-attr]
    return tuple(doc.splitlines()[:1])


# --- fixtures the probes use --------------------------------------------------------------
@pytest.fixture(scope="session")
def settings(request: pytest.FixtureRequest) -> WorkerSettings:
    """The run's settings (backend, gpus per replica, checkpoint dir, ...)."""
    return request.config.pluginmanager.get_plugin("ddpcheck-run").settings


@pytest.fixture(scope="session")
def world(request: pytest.FixtureRequest) -> World:
    """This rank's World: identity and control store (no process group yet)."""
    return request.config.pluginmanager.get_plugin("ddpcheck-run").world


@pytest.fixture(scope="session")
def pg(world: World) -> World:
    """The World with the default process group of the backend under test initialised."""
    world.init_process_group()
    return world


@pytest.fixture
def record(request: pytest.FixtureRequest) -> Recorder:
    """Where a probe records its key figure and measurements for the report."""
    return request.node.stash[RECORD_KEY]
