"""Matchers: a regex over one record that, when it hits, is evidence for a catalogue problem.

Runs wherever ``ddpcheck explain`` runs. A family module lists ``Pattern`` objects; the
engine applies every pattern to every record once (O(records x patterns)), collects the
``Hit`` objects per code and lets the pattern's ``combine`` (or the default) turn them
into one Problem with every rank, host and the exact lines that were seen.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ddpcheck.diagnoses import Diagnosis, Problem
from ddpcheck.explain.reader import Record

MAX_OBSERVED_LINES = 3


@dataclass(frozen=True)
class Hit:
    """One record that matched one pattern."""

    pattern: Pattern
    record: Record
    match: re.Match[str]


@dataclass(frozen=True)
class Pattern:
    """Evidence for ``diagnosis``; ``root`` False marks what peers see of another failure,
    ``grade`` how surely the line names the cause."""

    diagnosis: Diagnosis
    regex: re.Pattern[str]
    next_run: str
    root: bool = True
    cause: str = ""
    fix: str = ""
    combine: Callable[[Sequence[Hit]], Problem | None] | None = None  # None: no failure here
    group_by: str = ""  # a regex group whose value splits hits into separate problems
    # "cause" when the line names the cause in its own words; "hint" when other causes print
    # it too (a bare SIGKILL, a bus error): a hint gives way to cause-grade evidence
    # (causality.order); "symptom" when the line does not say which of several causes (whose
    # name did not resolve): explain shows it and abstains. A hit only on warning or INFO
    # lines is graded "warning" whatever the pattern says (the engine's _grade).
    grade: str = "cause"

    @property
    def code(self) -> str:
        return self.diagnosis.code


def pattern(diagnosis: Diagnosis, regex: str, next_run: str, **kw: object) -> Pattern:
    return Pattern(diagnosis, re.compile(regex), next_run, **kw)  # type: ignore[arg-type]


def observed_lines(hits: Sequence[Hit]) -> str:
    """The exact lines that matched (distinct, the first few), as the observed fact."""
    seen: list[str] = []
    for h in hits:
        line = h.record.text.strip()
        if line not in seen:
            seen.append(line)
    extra = len(seen) - MAX_OBSERVED_LINES
    more = f" (+{extra} more lines)" if extra > 0 else ""
    return " | ".join(_short(s) for s in seen[:MAX_OBSERVED_LINES]) + more


def _short(line: str, limit: int = 300) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


def where(hits: Sequence[Hit]) -> dict[str, tuple]:
    ranks = sorted({h.record.rank for h in hits if h.record.rank is not None})
    hosts = sorted({h.record.host for h in hits if h.record.host})
    return {"ranks": tuple(ranks), "hosts": tuple(hosts)}


def default_combine(hits: Sequence[Hit]) -> Problem:
    """One problem for every hit of one code: all ranks and hosts, the lines seen."""
    p = hits[0].pattern
    cause = p.cause.format(**hits[0].match.groupdict()) if p.cause else ""
    fix = p.fix.format(**hits[0].match.groupdict()) if p.fix else ""
    return p.diagnosis.problem(observed_lines(hits), cause=cause, fix=fix, **where(hits))
