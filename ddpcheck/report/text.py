"""The report as people read it: the stage x rank table, the measurements, one block per
problem (root causes first, then what the other ranks saw) and the verdict line.

Runs in the launcher; ``render_problem`` is shared with ``ddpcheck explain`` and ``ddpcheck
compare``, ``verdict`` with the JSON report. Pure: a Report in, text out.
"""

from __future__ import annotations

from tabulate import tabulate

from ddpcheck import results
from ddpcheck.diagnoses import OWN_FAILURE, Problem
from ddpcheck.ranges import format_ranks, ranks_with_hosts
from ddpcheck.report.build import Report, StageResult
from ddpcheck.report.tables import render_measurements

MISSING = results.Status.NO_RESULT
MAX_RANK_COLUMNS = 8  # above this, one column per host
MAX_HOST_COLUMNS = 8  # above this, one row per stage: how many hosts passed, which did not
NAMED_HOSTS = 6  # hosts named in a grouped row before "+N more"


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


def _table(report: Report) -> str:
    if not report.hosts_by_rank:  # no rank ever started: one column per node we know of
        nodes = report.nodes or ["this node"]
        rows = [[s.name, *[_cell(s.status, "", s.blocked_by)] * len(nodes)]
                for s in report.stages]
        return tabulate(rows, headers=["stage", *nodes], tablefmt="simple")
    ranks = sorted(report.hosts_by_rank)
    if len(set(report.hosts_by_rank.values())) > MAX_HOST_COLUMNS:
        return _grouped_table(report)
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
            worst = results.Status.worst(statuses.values())
            odd = [r for r, st in statuses.items() if st == worst]
            who = f" on {format_ranks(odd)}" if len(odd) < len(rs) else ""
            cells.append(_cell(worst, s.figures.get(rs[0], "") if not who else "",
                               s.blocked_by) + who)
        rows.append([s.name, *cells])
    return tabulate(rows, headers=headers, tablefmt="simple")


def _grouped_table(report: Report) -> str:
    """Many hosts (1,024 nodes): one row per stage with the hosts counted by their worst
    status, and the hosts that are not the majority named (a few, then how many more)."""
    by_host: dict[str, list[int]] = {}
    for r, h in sorted(report.hosts_by_rank.items()):
        by_host.setdefault(h, []).append(r)
    rows = []
    for s in report.stages:
        worst = {h: results.Status.worst(_status(s, r) for r in rs)
                 for h, rs in by_host.items()}
        groups: dict[str, list[str]] = {}
        for h, st in worst.items():
            groups.setdefault(st, []).append(h)
        common = max(groups, key=lambda st: len(groups[st]))
        odd = [f"{_cell(st, '', s.blocked_by)} on {_named(hs)}" for st, hs in groups.items()
               if st != common]
        figure = s.figures.get(0, "") if common != results.BLOCKED else ""
        rows.append([s.name, f"{_cell(common, figure, s.blocked_by)} on "
                     f"{len(groups[common])} of {len(by_host)} hosts", "; ".join(odd)])
    return tabulate(rows, headers=["stage", "hosts", "others"], tablefmt="simple")


def _named(hosts: list[str]) -> str:
    shown = ", ".join(hosts[:NAMED_HOSTS])
    return shown + (f" (+{len(hosts) - NAMED_HOSTS} more)" if len(hosts) > NAMED_HOSTS else "")


def _cell(status: str, figure: str, blocked_by: str) -> str:
    if status == results.BLOCKED:
        return f"BLOCKED ({blocked_by})" if blocked_by else status
    return f"{status} {figure}".strip()


def render_problem(p: Problem, hosts_by_rank: dict[int, str]) -> str:
    where = []
    if p.ranks:
        where.append(f"rank {ranks_with_hosts(p.ranks, hosts_by_rank)}")
    if p.hosts and not (p.ranks and all(r in hosts_by_rank for r in p.ranks)):
        # the nodes, unless the ranks already name them (before any rank ran, they cannot)
        where.append(f"node {', '.join(p.hosts)}")
    if p.stage:
        where.append(f"stage {p.stage}")
    word = "ERROR" if p.role == OWN_FAILURE else "FAIL "  # ddpcheck's own, not the cluster's
    head = f"{word} {p.code}   {'; '.join(where)}".rstrip()
    return "\n".join([head, f"  summary   {p.summary}", f"  observed  {p.observed}",
                      f"  cause     {p.cause}", f"  fix       {p.fix}"])


def verdict(report: Report) -> str:
    n_hosts = len(set(report.hosts_by_rank.values()) or report.nodes) or 1
    where = f"{_n(report.world_size, 'rank')} on {_n(n_hosts, 'host')}"
    if report.expected and report.expected.local_count and report.hosts_by_rank:
        where = (f"{len(report.hosts_by_rank)} of {report.world_size} ranks here, the whole "
                 "run judged with the rank-0 node")
    if not report.hosts_by_rank:
        # before any rank started (preflight, check-in), or ranks that never wrote a line
        where = f"no rank reported ({_n(report.world_size, 'rank')} expected on " \
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
    if report.incomplete:
        return (f"UNKNOWN: the check could not be completed: {_n(len(causes), 'failure')} of "
                f"ddpcheck's own{more}, not the cluster's, {where}{lead}")
    return f"NOT READY: {_n(len(causes), 'problem')}{more}, {where}{lead}"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
