"""Slurm step and task-layout errors printed by srun (src/srun, slurm_errno strings)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.explain.causality import Explained
from ddpcheck.explain.codes import (
    HOST_OOM,
    SLURM_JOB_CANCELLED,
    SLURM_JOB_REJECTED,
    SLURM_STEP_REJECTED,
    SLURM_WITHOUT_SRUN,
)
from ddpcheck.explain.matching import pattern
from ddpcheck.explain.reader import Record

PATTERNS = [
    # slurmstepd: "*** JOB 123 ON node1 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***"
    # Not a root: a job that hangs (a rank that never joined, a node never started) ends this
    # way, so any other failure in the log comes first; it explains the kills that follow.
    pattern(SLURM_JOB_CANCELLED,
            r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+"
            r"(?P<why>(?: DUE TO [A-Z]+(?: [A-Z]+)*| BY \S+)?)",
            "sacct -j JOBID -o JobID,State,Elapsed,Timelimit,ExitCode", root=False,
            cause="slurmstepd cancelled it{why}: the ranks' SIGTERM/SIGKILL that follow are "
                  "the scheduler's, not a crash"),
    # Lightning's own hint (lightning/fabric/plugins/environments/slurm.py) when it runs
    # under a Slurm allocation without srun: one process where the job asked for many.
    pattern(SLURM_WITHOUT_SRUN,
            r"The `srun` command is available on your system but is not used",
            "ddpcheck run --nodes N --launch srun inside the same allocation"),
    pattern(SLURM_STEP_REJECTED,
            r"srun: error: Unable to create step for job \S+: (?P<why>.+)$",
            "ddpcheck run --nodes N inside the same allocation (one srun task per node)",
            cause="srun asked for a layout the allocation cannot give: {why}"),
    pattern(SLURM_JOB_REJECTED,
            r"(?:sbatch|salloc|srun): error: (?:Batch job submission failed|"
            r"Job submit/allocate failed|Unable to allocate resources): (?P<why>.+)$|"
            r"Invalid generic resource \(gres\) specification",
            "sinfo -o '%P %c %m %G' (what the partition's nodes offer)"),
]


# A batch script pasted into the log: its node count and its launch line.
SBATCH_NODES = re.compile(r"^\s*#SBATCH\s+(?:--nodes[= ]|-N\s*)(?P<n>\d+)")
LAUNCH = re.compile(r"^\s*(?:torchrun|python\S*\s+-m\s+torch\.distributed\.(?:run|launch)|"
                    r"accelerate\s+launch|deepspeed)\b")
SRUN = re.compile(r"^\s*(?:srun|\S+=\S+\s+srun)\b|\$\(srun|`srun")
# What a launcher started on one node of several shows: nobody else joins.
WAITED = frozenset({"rendezvous-timeout", "endpoint-unreachable", "endpoint-refused",
                    "collective-timeout", "rank-zero-only-step-timeout", "unexplained"})


def refine(found: list[Explained], records: Sequence[Record] = ()) -> list[Explained]:
    """Kills after a Slurm cancellation are its consequences; a multi-node batch script
    whose launcher runs without srun (the wait that follows is its consequence)."""
    if any(e.problem.code == SLURM_JOB_CANCELLED.code for e in found):
        found = [replace(e, root=False, problem=e.problem.where(
                     consequence_of=SLURM_JOB_CANCELLED.code))
                 if e.problem.code == HOST_OOM.code and "killed by SIGKILL" in e.problem.observed
                 else e for e in found]
    nodes = next((r for r in records if (m := SBATCH_NODES.match(r.text)) and int(m["n"]) > 1),
                 None)
    launch = next((r for r in records if LAUNCH.match(r.text)), None)
    if (nodes is None or launch is None or any(SRUN.search(r.text) for r in records)
            or not any(e.problem.code in WAITED for e in found)):
        return found
    problem = SLURM_WITHOUT_SRUN.problem(
        f"{nodes.text.strip()} [{nodes.source}:{nodes.lineno}] but the launcher runs once, "
        f"without srun: {launch.text.strip()[:160]} [{launch.source}:{launch.lineno}]")
    first = replace(launch, time=float("-inf"))  # the script runs before anything it starts
    return [Explained(problem, first, True, "ddpcheck run --nodes N --launch srun",
                      (f"{nodes.source}:{nodes.lineno}", f"{launch.source}:{launch.lineno}")),
            *(replace(e, root=False) if e.problem.code in WAITED else e for e in found)]
