"""The readiness report: built from rank files and launcher observations, rendered twice.

Runs in the launcher. ``build_report`` is pure over the rank events, the exit files and the
problems the launcher found itself; ``render_text`` prints the stage x rank table, one block
per problem (root cause first) and a verdict line; ``to_json`` mirrors it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tabulate import tabulate

from ddpcheck import results
from ddpcheck.diagnoses import CONSEQUENCE, ROOT_CAUSE, Problem
from ddpcheck.ranges import format_ranks, ranks_with_hosts
from ddpcheck.verdicts.bandwidth import format_sweep
from ddpcheck.verdicts.links import format_intra_inter, format_matrix, format_scaling, hosts_of
from ddpcheck.verdicts.readiness import Expected, explain, is_ready

# How statuses combine over probes and ranks: a stage is SKIP only when nothing in it ran.
ORDER = {results.SKIP: 0, results.PASS: 1, results.BLOCKED: 2, results.FAIL: 3}
NO_RESULT = "-"
MISSING = "NO RESULT"


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
    def exit_code(self) -> int:
        return 0 if self.ready else 1


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
    problems += explain(stage_results, mark_consequences(list(problems)), expected, hosts,
                        evidence, blocked)
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
        status = max((p.status for p in probes), key=ORDER.__getitem__)
        if status == results.BLOCKED:
            res.blocked_by = probes[0].message.replace("blocked by stage ", "")
        res.per_rank[rank] = status
        res.figures[rank] = next((p.figure for p in probes if p.figure), "")
        if status == results.SKIP and not res.figures[rank]:
            res.figures[rank] = _short(probes[0].message)
        if rank == min(events):
            res.probes = [{"name": p.name, "doc": " ".join(p.doc), "status": p.status,
                           "duration": p.duration, "message": p.message} for p in probes]
    if res.per_rank:
        res.status = max(res.per_rank.values(), key=ORDER.__getitem__)
    return res


def _mark_failed_ranks(stages: list[StageResult], problems: list[Problem]) -> None:
    """A rank that died or hung in a stage has no result there: it failed that stage."""
    by_name = {s.name: s for s in stages}
    for p in problems:
        s = by_name.get(p.stage)
        if s is None:
            continue
        for r in p.ranks:
            if s.per_rank.get(r) in (None, results.BLOCKED):
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


# --- rendering --------------------------------------------------------------------------
def render_text(report: Report) -> str:
    parts = [_table(report)]
    parts.extend(render_measurements(report.measurements, report.world_size, report.backend))
    causes = [p for p in report.problems if not p.consequence_of]
    echoes = [p for p in report.problems if p.consequence_of]
    for p in causes:
        parts.append(render_problem(p, report.hosts_by_rank))
    if echoes:
        parts.append("consequences (what the other ranks saw; fix the cause above):\n" + "\n".join(
            f"  {p.code} on rank {ranks_with_hosts(p.ranks, report.hosts_by_rank)}: "
            f"{p.observed}" for p in echoes))
    parts.extend(report.notes)
    parts.append(verdict(report))
    return "\n\n".join(parts) + "\n"


def render_measurements(m: dict[str, Any], world_size: int, backend: str) -> list[str]:
    """The figures a user reads at a glance: sweep, link matrix, intra/inter, scaling."""
    parts = []
    if m.get("allreduce_sweep"):
        parts.append(format_sweep(m["allreduce_sweep"], world_size, backend))
    if m.get("link_matrix"):
        matrix = {tuple(k.split("->")): v for k, v in m["link_matrix"].items()}
        parts.append("# point-to-point links, one direction (best of trials)\n"
                     + format_matrix(m.get("link_hosts") or hosts_of(matrix), matrix))
    if m.get("intra_node_busbw") or m.get("cross_node_busbw") is not None:
        parts.append("# all-reduce busbw within nodes and across nodes\n"
                     + format_intra_inter(m.get("intra_node_busbw") or {},
                                          m.get("cross_node_busbw")))
    if m.get("ddp_scaling"):
        parts.append("# DDP scaling (subgroups of the first k ranks)\n"
                     + format_scaling(m["ddp_scaling"]))
    return parts


def _table(report: Report) -> str:
    if not report.hosts_by_rank:  # no rank ever started: one column per node we know of
        nodes = report.nodes or ["this node"]
        rows = [[s.name, *[_cell(s.status, "", s.blocked_by)] * len(nodes)]
                for s in report.stages]
        return tabulate(rows, headers=["stage", *nodes], tablefmt="simple")
    ranks = sorted(report.hosts_by_rank)
    if len(ranks) > MAX_RANK_COLUMNS:
        return _host_table(report)
    headers = ["stage"] + [f"rank {r}\n{report.hosts_by_rank.get(r, '?')}" for r in ranks]
    rows = []
    for s in report.stages:
        cells = []
        for r in ranks:
            cells.append(_cell(_status(s, r), s.figures.get(r, ""), s.blocked_by))
        rows.append([s.name, *cells])
    return tabulate(rows, headers=headers, tablefmt="simple")


MAX_RANK_COLUMNS = 8


def _status(s: StageResult, rank: int) -> str:
    return s.per_rank.get(rank, MISSING if s.per_rank else s.status)


def _host_table(report: Report) -> str:
    """Many ranks: one column per host; ranks that differ from the host's majority are named."""
    by_host: dict[str, list[int]] = {}
    for r, h in sorted(report.hosts_by_rank.items()):
        by_host.setdefault(h, []).append(r)
    headers = ["stage"] + [f"{h}\nranks {format_ranks(rs)}" for h, rs in by_host.items()]
    rows = []
    for s in report.stages:
        cells = []
        for rs in by_host.values():
            statuses = {r: _status(s, r) for r in rs}
            worst = max(statuses.values(), key=lambda st: ORDER.get(st, 4))
            odd = [r for r, st in statuses.items() if st == worst]
            who = f" on {format_ranks(odd)}" if len(odd) < len(rs) else ""
            cells.append(_cell(worst, s.figures.get(rs[0], "") if not who else "",
                               s.blocked_by) + who)
        rows.append([s.name, *cells])
    return tabulate(rows, headers=headers, tablefmt="simple")


def _cell(status: str, figure: str, blocked_by: str) -> str:
    if status == results.BLOCKED:
        return f"BLOCKED ({blocked_by})" if blocked_by else status
    return f"{status} {figure}".strip()


def render_problem(p: Problem, hosts_by_rank: dict[int, str]) -> str:
    where = []
    if p.ranks:
        where.append(f"rank {ranks_with_hosts(p.ranks, hosts_by_rank)}")
    elif p.hosts:
        where.append(f"node {', '.join(p.hosts)}")
    if p.stage:
        where.append(f"stage {p.stage}")
    head = f"FAIL  {p.code}   {'; '.join(where)}".rstrip()
    return "\n".join([head, f"  summary   {p.summary}", f"  observed  {p.observed}",
                      f"  cause     {p.cause}", f"  fix       {p.fix}"])


def verdict(report: Report) -> str:
    n_hosts = len(set(report.hosts_by_rank.values()) or report.nodes) or 1
    where = f"{_n(report.world_size, 'rank')} on {_n(n_hosts, 'host')}"
    if report.expected and report.expected.local_count and report.hosts_by_rank:
        where = (f"{len(report.hosts_by_rank)} of {report.world_size} ranks here, the whole "
                 "run judged with the rank-0 node")
    if not report.hosts_by_rank:
        where = f"stopped before torchrun ({_n(report.world_size, 'rank')} expected on " \
                f"{_n(len(report.nodes) or 1, 'node')} known)"
    if report.ready:
        passed = sum(s.status == results.PASS for s in report.stages)
        skipped = sum(s.status == results.SKIP for s in report.stages)
        return (f"READY: {_n(passed, 'stage')} passed, {skipped} skipped, {where}, "
                f"in {report.elapsed:.1f} s")
    causes = [p for p in report.problems if not p.consequence_of]
    first = causes[0] if causes else None
    lead = (f"; first: {first.code} on rank {format_ranks(first.ranks)}" if first and first.ranks
            else f"; first: {first.code}" if first else "")
    echoes = len(report.problems) - len(causes)
    more = f" (+{_n(echoes, 'consequence')})" if echoes else ""
    return f"NOT READY: {_n(len(causes), 'problem')}{more}, {where}{lead}"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def to_json(report: Report, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "ready": report.ready,
        "exit_code": report.exit_code,
        "verdict": verdict(report),
        "world_size": report.world_size,
        "backend": report.backend,
        "elapsed_s": round(report.elapsed, 3),
        "hosts": {str(r): h for r, h in sorted(report.hosts_by_rank.items())},
        "stages": [{"name": s.name, "status": s.status, "blocked_by": s.blocked_by or None,
                    "ranks": {str(r): st for r, st in s.per_rank.items()},
                    "figures": {str(r): f for r, f in s.figures.items() if f},
                    "probes": s.probes} for s in report.stages],
        "problems": [p.to_dict() for p in report.problems],
        "measurements": report.measurements,
        **(extra or {}),
    }
