"""The readiness report: built from the rank events and the launcher's own problems.

Runs in the launcher. ``build_report`` is pure over the rank events (typed records of
:mod:`ddpcheck.results`) and the problems the launcher found itself (preflight, postmortem):
stages agreed over ranks, problems merged across ranks with root causes first, and the
measurements. :mod:`ddpcheck.report.text` renders it for people, :mod:`ddpcheck.report.as_json`
for machines; :mod:`ddpcheck.judgements.readiness` holds the READY rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ddpcheck import results
from ddpcheck.diagnoses import CONSEQUENCE, ROOT_CAUSE, Problem
from ddpcheck.judgements.readiness import (
    Expected,
    exit_code,
    is_incomplete,
    is_ready,
    missing_cause_problems,
)

# How statuses combine over probes and ranks: a stage is SKIP only when nothing in it ran.
ORDER = {s: s.order for s in results.Status}
NO_RESULT = results.Status.NOT_RUN


@dataclass
class StageResult:
    name: str
    status: str  # agreed over ranks: FAIL > BLOCKED > SKIP > PASS; "-" when nothing ran
    per_rank: dict[int, str] = field(default_factory=dict)
    figures: dict[int, str] = field(default_factory=dict)
    blocked_by: str = ""
    probes: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Report:
    stages: list[StageResult]
    problems: list[Problem]
    hosts_by_rank: dict[int, str]
    measurements: dict[str, Any]
    world_size: int
    elapsed: float
    backend: str = ""
    notes: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)  # hosts known before any rank started
    expected: Expected | None = None  # the ranks this report must show (None: as reported)

    @property
    def ready(self) -> bool:
        """The one verdict rule (readiness.is_ready) over this report."""
        expected = self.expected or Expected.whole(0)
        return is_ready(self.stages, self.problems, expected, self.hosts_by_rank)

    @property
    def incomplete(self) -> bool:
        """Not READY only because ddpcheck's own code failed (verdict UNKNOWN, exit 3)."""
        return not self.ready and is_incomplete(self.problems)

    @property
    def exit_code(self) -> int:
        return int(exit_code(self.ready, self.problems))


def build_report(events: dict[int, list[results.Event]], stages: Sequence[str],
                 launcher_problems: Iterable[Problem], elapsed: float,
                 expected_world: int = 0, expected: Expected | None = None,
                 evidence: Sequence[str] = ()) -> Report:
    """Assemble stages, problems and measurements from every rank's events.

    ``expected`` names the ranks that must have reported (default: the whole world of
    ``expected_world``); a NOT READY without a named cause gets one, with ``evidence``
    (the last lines torchrun and the workers printed).
    """
    hosts = hosts_of_events(events)
    stage_results = [_stage(name, events) for name in stages]
    problems = merge_problems(_fill_hosts([*launcher_problems, *_rank_problems(events)], hosts))
    world = max([expected_world, len(events), *[r + 1 for r in events]])
    expected = expected or Expected.whole(world)
    _mark_failed_ranks(stage_results, problems)
    _mark_blocked(stage_results)
    blocked = next((s.blocked_by for s in stage_results if s.blocked_by), "")
    problems += missing_cause_problems(stage_results, mark_consequences(list(problems)),
                                       expected, hosts, evidence, blocked)
    problems = mark_consequences(problems)
    backend = next((e.backend for evs in events.values() for e in evs
                    if isinstance(e, results.Start)), "")
    return Report(stage_results, problems, hosts, _measurements(events), world, elapsed, backend,
                  expected=expected)


def _fill_hosts(problems: list[Problem], hosts: dict[int, str]) -> list[Problem]:
    """Name the hosts of problems a rank reported about ranks it knew only by number."""
    out = []
    for p in problems:
        if p.ranks and (not p.hosts or {"?", "unknown host"} & set(p.hosts)):
            known = sorted({hosts[r] for r in p.ranks if r in hosts})
            if known:
                p = p.where(hosts=tuple(known))
        out.append(p)
    return out


def hosts_of_events(events: dict[int, list[results.Event]]) -> dict[int, str]:
    hosts = {}
    for rank, evs in events.items():
        for e in evs:
            if isinstance(e, results.Start):
                hosts[rank] = e.host
    return hosts


def _stage(name: str, events: dict[int, list[results.Event]]) -> StageResult:
    res = StageResult(name, NO_RESULT)
    for rank, evs in events.items():
        probes = [e for e in evs if isinstance(e, results.Probe) and e.stage == name]
        if not probes:
            continue
        status = results.Status.worst(p.status for p in probes)
        if status == results.BLOCKED:
            res.blocked_by = next((p.blocked_by for p in probes if p.blocked_by), "")
        res.per_rank[rank] = status
        res.figures[rank] = next((p.figure for p in probes if p.figure), "")
        if status == results.SKIP and not res.figures[rank]:
            res.figures[rank] = _short(probes[0].message)
        if rank == min(events):
            res.probes = [{"name": p.name, "doc": " ".join(p.doc), "status": p.status,
                           "duration": p.duration, "message": p.message} for p in probes]
    if res.per_rank:
        res.status = results.Status.worst(res.per_rank.values())
    return res


def _mark_failed_ranks(stages: list[StageResult], problems: list[Problem]) -> None:
    """A rank that died or hung in a stage has no result there: it failed that stage. So did
    a rank that passed its own part of a probe judged on rank 0 (straggler, links) and that
    rank 0's problem names."""
    by_name = {s.name: s for s in stages}
    for p in problems:
        s = by_name.get(p.stage)
        if s is None:
            continue
        for r in p.ranks:
            if s.per_rank.get(r) in (None, results.BLOCKED, results.PASS):
                s.per_rank[r] = results.FAIL
        if p.ranks:
            s.status = results.FAIL


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _mark_blocked(stages: list[StageResult]) -> None:
    """A stage that never ran after a failed or blocked one is reported as blocked by it."""
    culprit = ""
    for s in stages:
        if s.status == NO_RESULT and culprit:
            s.status, s.blocked_by = results.BLOCKED, culprit
        elif s.status in (results.FAIL, results.BLOCKED) and not culprit:
            culprit = s.blocked_by or s.name
    if not culprit and any(s.status == NO_RESULT for s in stages):
        for s in stages:
            if s.status == NO_RESULT:
                s.status, s.blocked_by = results.BLOCKED, "the run ending early"


def _rank_problems(events: dict[int, list[results.Event]]) -> list[Problem]:
    return [p for evs in events.values() for e in evs
            if isinstance(e, (results.Probe, results.Problems)) for p in e.problems]


def merge_problems(problems: Iterable[Problem]) -> list[Problem]:
    """Merge the same problem reported by several ranks, keeping first-seen order."""
    merged: dict[tuple[str, str], Problem] = {}
    for p in problems:
        key = (p.code, p.observed)
        if key in merged:
            old = merged[key]
            merged[key] = old.where(hosts=tuple(sorted(set(old.hosts) | set(p.hosts))),
                                    ranks=tuple(sorted(set(old.ranks) | set(p.ranks))))
        else:
            merged[key] = p
    return list(merged.values())


def mark_consequences(problems: list[Problem]) -> list[Problem]:
    """Mark what peers saw of a rank that died or stopped as its consequence; causes first.

    A stopped rank also shows up as "rank 1 did not finish" (the agreement) and as a
    collective timeout on every other rank: true, but the user must act on the root cause.
    Each problem says which it is (Problem.role, set where it was made).
    """
    roots = [p for p in problems if p.role == ROOT_CAUSE]
    out = []
    for p in problems:
        root = next((r for r in roots if r is not p and r.stage == p.stage), None)
        if root and p.role == CONSEQUENCE:
            p = p.where(consequence_of=root.code)
        out.append(p)
    return sorted(out, key=lambda p: bool(p.consequence_of))  # stable: causes first


def _measurements(events: dict[int, list[results.Event]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rank in sorted(events):
        for e in events[rank]:
            if isinstance(e, results.Probe) and e.measurements:
                for k, v in e.measurements.items():
                    out.setdefault(k, v)  # the lowest rank's figure (all ranks agree on sweeps)
    return out
