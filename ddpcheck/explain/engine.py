"""Apply every family's matchers to the records, order the problems, render text and JSON.

Runs wherever ``ddpcheck explain`` runs (no torch, no network). Each record is claimed by
the first pattern that matches it (families go from specific to generic), hits of one code
become one Problem, ``causality`` orders them, and the run report's ``render_problem``
prints each block so a log and a run read the same. A ``ddpcheck run`` JSON report fed
back keeps its problems as they are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ddpcheck.diagnoses import RANK_KILLED, Problem, load_catalogue
from ddpcheck.explain import codes
from ddpcheck.explain.causality import Explained, order
from ddpcheck.explain.families import PATTERNS
from ddpcheck.explain.matching import Hit, default_combine
from ddpcheck.explain.reader import Record, read_text
from ddpcheck.report.text import render_problem

# Lines that show something failed, quoted when no pattern explains the log.
ERROR_LINE = re.compile(r"Error\b|Exception|Traceback|FAILED|\bfailed\b|WARN|fatal|Killed",
                        re.IGNORECASE)
QUOTED_ERRORS = 3
# Signals a rank receives *because* of another failure: the agent's teardown, the watchdog.
ECHO_SIGNALS = ("SIGTERM", "SIGABRT")


@dataclass
class Explanation:
    """What explain found: problems (causes first) with what to run next, and the verdict."""

    found: list[Explained]
    sources: list[str]

    @property
    def problems(self) -> list[Problem]:
        return [e.problem for e in self.found]

    @property
    def exit_code(self) -> int:
        """1 when a failure is explained (or unexplained), 0 when the log shows none."""
        return 1 if self.found else 0

    def verdict(self) -> str:
        causes = [e.problem for e in self.found if not e.problem.consequence_of]
        if not causes:
            return "NO FAILURE FOUND: no error line in " + ", ".join(self.sources)
        first = causes[0]
        echoes = len(self.found) - len(causes)
        more = f" (+{echoes} consequence{'s' if echoes != 1 else ''})" if echoes else ""
        if first.code == codes.UNEXPLAINED.code:
            return "UNEXPLAINED: the log shows a failure ddpcheck does not recognise"
        return f"EXPLAINED: {len(causes)} cause{'s' if len(causes) != 1 else ''}{more}; " \
               f"first: {first.code}{_where(first)}"

    def render_text(self) -> str:
        parts = []
        for e in self.found:
            if e.problem.consequence_of:
                continue
            parts.append(render_problem(e.problem, {}) + f"\n  next      {e.next_run}")
        echoes = [e.problem for e in self.found if e.problem.consequence_of]
        if echoes:
            parts.append("consequences (what the other ranks saw; fix the cause above):\n"
                         + "\n".join(f"  {p.code}{_where(p)}: {p.observed}" for p in echoes))
        parts.append(self.verdict())
        return "\n\n".join(parts) + "\n"

    def to_json(self) -> dict[str, Any]:
        explained = bool(self.found) and self.found[0].problem.code != codes.UNEXPLAINED.code
        return {"explained": explained,
                "exit_code": self.exit_code, "verdict": self.verdict(), "sources": self.sources,
                "problems": [e.problem.to_dict() for e in self.found],
                "next": {e.problem.code: e.next_run for e in self.found}}


def _where(p: Problem) -> str:
    from ddpcheck.ranges import format_ranks

    bits = [f"rank {format_ranks(p.ranks)}"] if p.ranks else []
    bits += [f"host {', '.join(p.hosts)}"] if p.hosts else []
    return f" on {'; '.join(bits)}" if bits else ""


def explain_texts(named_texts: Iterable[tuple[str, str]]) -> Explanation:
    """Explain every input (name, text) together: one job's logs from several nodes."""
    _load_catalogue()
    records: list[Record] = []
    found: list[Explained] = []
    sources = []
    for name, text in named_texts:
        sources.append(name)
        own = _own_json(text)
        if own is not None:
            found.extend(Explained(p, Record(name, i, p.observed), not p.consequence_of,
                                   "ddpcheck run") for i, p in enumerate(own))
        else:
            records.extend(read_text(name, text))
    found.extend(_match(records))
    if not found and (errors := [r for r in records if ERROR_LINE.search(r.text)]):
        found.append(_unexplained(errors))
    return Explanation(order(found), sources)


def _match(records: list[Record]) -> list[Explained]:
    groups: dict[tuple[str, str], list[Hit]] = {}
    for rec in records:
        for pat in PATTERNS:
            m = pat.regex.search(rec.text)
            if m:
                key = m[pat.group_by] if pat.group_by else ""
                groups.setdefault((pat.code, key), []).append(Hit(pat, rec, m))
                break
    out = []
    for hits in groups.values():
        pat = hits[0].pattern
        problem = (pat.combine or default_combine)(hits)
        root = pat.root and not (problem.code == RANK_KILLED.code
                                 and any(s in problem.cause[:8] for s in ECHO_SIGNALS))
        first = min((h.record for h in hits), key=lambda r: r.order)
        out.append(Explained(problem, first, root, pat.next_run))
    return out


def _unexplained(errors: list[Record]) -> Explained:
    quoted = " | ".join(r.text.strip()[:200] for r in errors[:QUOTED_ERRORS])
    where = {"ranks": sorted({r.rank for r in errors if r.rank is not None}),
             "hosts": sorted({r.host for r in errors if r.host})}
    return Explained(codes.UNEXPLAINED.problem(f"first error lines: {quoted}", **where),
                     errors[0], True, codes.UNEXPLAINED.fix)


def _own_json(text: str) -> list[Problem] | None:
    """A ddpcheck run (or explain) JSON report: its problems, as they are."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    if isinstance(data, dict) and isinstance(data.get("problems"), list):
        return [Problem.from_dict(p) for p in data["problems"] if isinstance(p, dict)]
    return None


def _load_catalogue() -> None:
    """Import every module that registers codes, so any report's code is known."""
    load_catalogue()
