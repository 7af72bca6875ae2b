"""The verdict rule, in one place: when a run is READY, and why it is not.

Runs in the launcher, on the report being built. READY needs all of:
  - every expected rank reported (nodes x ranks per node; on a node that does not host
    rank 0, the ranks of this node, the rest being judged by the rank-0 node);
  - every stage PASS or SKIP on every rank;
  - no problem at all (a node's launcher failure, another node's, a preflight finding).
NOT READY always carries at least one problem with its evidence: when nothing else
explains it (a rank that never reported, a run that ended early), ``missing_cause_problems``
adds one.
When every root cause is ddpcheck's own failure (its code raised), the verdict is UNKNOWN:
the check could not be completed, which says nothing about the cluster either way.

The exit codes follow the monitoring plugins' convention (Nagios plugin guidelines, also used
by NHC-style and gcm health checks): 0 OK (READY), 1 a problem found (NOT READY), 2 bad
usage (kept: ddpcheck's bad input has always exited 2), 3 UNKNOWN ("the check itself
failed": ddpcheck's own error).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ddpcheck import results
from ddpcheck.diagnoses import OWN_FAILURE, Problem, register
from ddpcheck.ranges import format_ranks

RANK_NO_RESULT = register(
    "rank-no-result", "expected ranks never reported a result",
    "the worker died or hung before its first result, torchrun did not start it, or its "
    "node's results did not reach this report",
    "read the evidence lines and the named node's own report; rerun with -v to see the "
    "workers' output")
SESSION_ERROR = register(
    "session-error", "a rank's probe session ended with an error instead of running the probes",
    "pytest could not collect or start the probes on that rank (an import error, a broken "
    "installation, an unknown option)",
    "read the evidence lines; reinstall ddpcheck with `pip install .` for the python the job "
    "uses, and rerun")
RUN_UNEXPLAINED = register(
    "run-unexplained", "the run ended without a verdict and ddpcheck could not tell why",
    "a stage did not run on every rank and no rank or launcher reported a failure",
    "read the evidence lines; rerun with -v and report the output if it does not explain it")

PASSING = (results.PASS, results.SKIP)


class ExitCode(enum.IntEnum):
    """The command's exit codes; the verdict words are the names (UNKNOWN: incomplete)."""

    READY = 0
    NOT_READY = 1
    USAGE = 2
    UNKNOWN = 3


def is_incomplete(problems: Sequence[Problem]) -> bool:
    """Every root cause is ddpcheck's own failure: the check could not be completed."""
    causes = [p for p in problems if not p.consequence_of]
    return bool(causes) and all(p.role == OWN_FAILURE for p in causes)


def exit_code(ready: bool, problems: Sequence[Problem]) -> ExitCode:
    if ready:
        return ExitCode.READY
    return ExitCode.UNKNOWN if is_incomplete(problems) else ExitCode.NOT_READY


class StageView(Protocol):
    """A stage as the report holds it: its agreed status and each rank's."""

    status: str
    per_rank: Mapping[int, str]


@dataclass(frozen=True)
class Expected:
    """Which ranks this report must show: all of them, or this node's part."""

    world_size: int
    ranks: frozenset[int]  # the ranks that must have reported here
    local_count: int = 0  # on a node without rank 0: how many ranks it must have

    @classmethod
    def whole(cls, world_size: int) -> Expected:
        return cls(world_size, frozenset(range(world_size)))

    @classmethod
    def node_part(cls, world_size: int, local_ranks: Collection[int], nproc: int) -> Expected:
        return cls(world_size, frozenset(local_ranks), nproc)


def missing_ranks(expected: Expected, reported: Collection[int]) -> list[int]:
    """Expected ranks with no result at all (no start event)."""
    return sorted(set(expected.ranks) - set(reported))


def is_ready(stages: Sequence[StageView], problems: Sequence[Problem], expected: Expected,
             reported: Collection[int]) -> bool:
    """The rule: every expected rank reported, every stage passed or skipped on every one of
    them (a stage with no per-rank results, such as preflight, by its own status), and no
    problem."""
    if problems or (not stages and expected.ranks):
        return False
    if missing_ranks(expected, reported):
        return False
    if expected.local_count and len(set(reported)) < expected.local_count:
        return False
    return all(_passed(s, expected.ranks or set(reported)) for s in stages)


def _passed(stage: StageView, ranks: Collection[int]) -> bool:
    if stage.status not in PASSING:
        return False
    if not stage.per_rank:
        return True
    return all(stage.per_rank.get(r) in PASSING for r in ranks)


def missing_cause_problems(stages: Sequence[StageView], problems: Sequence[Problem],
                           expected: Expected, reported: Collection[int],
                           evidence: Sequence[str], blocked_by: str = "") -> list[Problem]:
    """Problems that make a NOT READY explicit when nothing else names its cause."""
    out: list[Problem] = []
    lines = _evidence(evidence)
    absent = missing_ranks(expected, reported)
    named = [p for p in problems if not p.consequence_of]
    if absent and not reported and named:
        pass  # nothing ran (a preflight or launch problem stopped it): that problem says why
    elif absent:
        out.append(RANK_NO_RESULT.problem(
            f"{len(absent)} of {expected.world_size} ranks never reported "
            f"(rank {format_ranks(absent)}){lines}", ranks=absent))
    elif expected.local_count and len(set(reported)) < expected.local_count:
        out.append(RANK_NO_RESULT.problem(
            f"{len(set(reported))} of the {expected.local_count} ranks of this node reported"
            f"{lines}"))
    ready_without = is_ready(stages, [], expected, reported)
    causes = [p for p in [*problems, *out] if not p.consequence_of]
    if not ready_without and not causes:
        unfinished = sorted({r for s in stages if s.per_rank for r in expected.ranks
                             if s.per_rank.get(r) is None})
        why = (f"stages were blocked by {blocked_by}" if blocked_by
               else f"rank {format_ranks(unfinished)} reported no result for some stages"
               if unfinished else "not every stage passed on every rank")
        out.append(RUN_UNEXPLAINED.problem(f"{why}, yet no rank or launcher reported a "
                                           f"failure{lines}"))
    return out


def _evidence(lines: Sequence[str], limit: int = 6) -> str:
    kept = [ln.strip()[:200] for ln in lines if ln.strip()][-limit:]
    return ("; last output: " + " | ".join(kept)) if kept else ""
