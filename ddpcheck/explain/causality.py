"""Root cause before consequences: order explained problems by time and by what causes what.

Runs wherever ``ddpcheck explain`` runs. One rank's crash, OOM or stop makes every other
rank time out in its next collective, and torchrun then reports each worker it tore down.
So: a problem whose evidence is only what peers see (``Pattern.root`` False, or a generic
code) becomes a consequence of the earliest root problem; roots are ordered by the time of
their first line (then by position in the log), like the run report's causes-first order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ddpcheck.diagnoses import RANK_EXITED, Problem
from ddpcheck.explain.codes import NCCL_ERROR
from ddpcheck.explain.reader import Record

# Codes too generic to stand next to a specific cause: they follow from it.
GENERIC = frozenset({NCCL_ERROR.code, RANK_EXITED.code})
# Symptoms: what a rank saw when something else went wrong (a collective that timed out, an
# endpoint or NCCL peer that did not answer or refused, a rendezvous that ran out of time, a
# worker ended by a signal other than the OOM killer's, a job Slurm cancelled at its limit).
# The line names no cause: a peer that crashed or never started, a firewall, a wrong address,
# a long step of one rank all print the same. They give way to any specific cause, and alone
# they leave the root cause undetermined.
SYMPTOMS = frozenset({"collective-timeout", "endpoint-unreachable", "endpoint-refused",
                      "rendezvous-timeout", "rank-killed", "peer-unreachable",
                      "slurm-job-cancelled"})
# First causes that say the log cannot tell why: explain abstains and quotes the first errors.
UNDETERMINED = frozenset({"unexplained", *GENERIC, *SYMPTOMS})


@dataclass(frozen=True)
class Explained:
    """A problem with what ordering needs: first line, whether it can be a root, next run."""

    problem: Problem
    first: Record
    root: bool
    next_run: str
    evidence: tuple[str, ...] = ()  # "file:line" of the lines that showed it, first first


def order(found: Sequence[Explained]) -> list[Explained]:
    """Roots first (earliest first); the rest marked as consequences of the first root."""
    roots = sorted((e for e in found if e.root and e.problem.code not in UNDETERMINED),
                   key=lambda e: e.first.order)
    if not roots:  # nothing specific: a symptom, then the generic ones, are the best we have
        roots = sorted((e for e in found if e.root and e.problem.code not in GENERIC),
                       key=lambda e: e.first.order)
    if not roots:
        roots = sorted((e for e in found if e.root), key=lambda e: e.first.order)
    if not roots:
        return sorted(found, key=lambda e: e.first.order)
    cause = roots[0].problem.code
    rest = [e for e in found if e not in roots]
    echoes = [Explained(e.problem.where(consequence_of=cause), e.first, e.root, e.next_run,
                        e.evidence)
              for e in sorted(rest, key=lambda e: e.first.order)]
    return [*roots, *echoes]
