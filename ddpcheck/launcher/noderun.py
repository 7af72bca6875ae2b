"""One node's run as one typed record, and the one place its report is built from it.

Runs in the launcher of every node. ``launcher.runner`` gathers into a NodeRun everything
this node learns, step by step (preflight and check-in, the launch and what the ranks left
in their files, the other nodes' outcomes, the baseline comparison, the notes), each step
a ``dataclasses.replace``; ``node_report`` turns the record into the report, pure, and
nothing edits a report afterwards. The record is what the node publishes to the others too
(``node_outcome``), after the whole node-side judgement, baseline included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ddpcheck import results
from ddpcheck.cluster.ending import Outcome
from ddpcheck.diagnoses import Problem
from ddpcheck.judgements.readiness import Expected
from ddpcheck.report.build import (
    Report,
    StageResult,
    build_report,
    mark_consequences,
    merge_problems,
)
from ddpcheck.stages import PREFLIGHT

# NodeRun.mode: how far this node's run went.
STOPPED = "stopped"  # preflight or check-in found problems: no rank was started
NETWORK_CHECK = "network-only"  # --stages preflight: check-in and peer probes, no ranks
LAUNCHED = "launched"  # the ranks ran (or tried to): their files are the evidence


@dataclass(frozen=True)
class NodeRun:
    """Everything one node learned in one ``ddpcheck run``."""

    node: str  # this host
    stages: tuple[str, ...]  # the probe stages asked for
    world: int  # ranks in the whole run
    elapsed: float = 0.0
    mode: str = STOPPED
    # preflight and check-in
    preflight: tuple[Problem, ...] = ()
    checked_in: tuple[str, ...] = ()  # hosts that checked in (this one included)
    node_notes: tuple[str, ...] = ()  # shown, not failed: node health, the open-file limit
    # the launch
    events: Mapping[int, list[results.Event]] = field(default_factory=dict)
    exits: Mapping[int, results.ExitStatus] = field(default_factory=dict)
    launch_problems: tuple[Problem, ...] = ()  # what postmortem made of the launch
    expected: Expected | None = None  # the ranks this node's report must show
    evidence: tuple[str, ...] = ()  # the last lines torchrun and the ranks printed
    rank0_here: bool = True
    rank0_host: str = ""  # where the whole report is printed (several nodes)
    # the other nodes
    peer_problems: tuple[Problem, ...] = ()  # rank-0 node: the others' outcomes
    adopted: tuple[Problem, ...] = ()  # other nodes: the rank-0 node's verdict
    # after the judgement
    baseline_problems: tuple[Problem, ...] = ()  # --baseline regressions
    baseline_notes: tuple[str, ...] = ()
    plots: tuple[str, ...] = ()
    results_note: str = ""

    def with_(self, **changes: object) -> NodeRun:
        return replace(self, **changes)  # type: ignore[arg-type]


def node_report(run: NodeRun) -> Report:
    """The report of this node's run, built once from its record."""
    if run.mode == LAUNCHED:
        report = build_report(run.events, run.stages, [*run.launch_problems, *run.peer_problems],
                              run.elapsed, run.world, run.expected, run.evidence)
        preflight = results.PASS
    elif run.mode == NETWORK_CHECK:  # this mode starts no rank at all
        report = build_report({}, (), run.preflight, run.elapsed, run.world,
                              Expected(run.world, frozenset()))
        preflight = results.FAIL if run.preflight else results.PASS
    else:
        report = build_report({}, run.stages, run.preflight, run.elapsed, run.world)
        preflight = results.FAIL
    stages = [StageResult(PREFLIGHT, preflight), *report.stages]
    if preflight == results.FAIL and run.mode == STOPPED:
        for s in stages[1:]:
            s.status, s.blocked_by = results.BLOCKED, PREFLIGHT
    problems = [*report.problems, *run.baseline_problems]
    if run.adopted:  # the rank-0 node's verdict (which holds what this node told it)
        problems = mark_consequences(merge_problems([*problems, *run.adopted]))
    report.stages, report.problems = stages, problems
    report.notes = _notes(run)
    if run.mode != LAUNCHED:
        report.nodes = sorted({*run.checked_in, run.node})
    return report


def _notes(run: NodeRun) -> list[str]:
    notes = list(run.node_notes)
    if run.mode == LAUNCHED and run.rank0_host and not run.rank0_here:
        notes.append(f"this is {run.node}'s part; the whole report is printed on the node "
                     f"hosting rank 0 ({run.rank0_host})")
    if run.mode == NETWORK_CHECK:
        nodes = len(run.checked_in) or 1
        notes.append(f"network-only mode (--stages preflight): {nodes} node"
                     f"{'s' if nodes != 1 else ''} checked in and probed; no torchrun")
    notes += run.baseline_notes
    if run.plots:
        notes.append("plots: " + ", ".join(run.plots))
    if run.results_note:
        notes.append(run.results_note)
    return notes


def node_outcome(run: NodeRun) -> Outcome:
    """What this node tells the others at the end: its whole judgement, baseline included."""
    report = node_report(run)
    return Outcome(run.node, report.ready, tuple(report.problems))


def adopt(run: NodeRun, whole: Outcome | Problem) -> NodeRun:
    """Take the rank-0 node's verdict (or the problem of not learning it)."""
    found = (whole,) if isinstance(whole, Problem) else tuple(whole.problems)
    return run.with_(adopted=found)
