"""A log that ends inside process-group initialisation: the world may never have formed.

Runs wherever ``ddpcheck explain`` runs, on a log that shows no failure line. torch prints
nothing while ``init_process_group`` waits for the other ranks, but the code around it says
when a rank enters it and, often, when the world formed:

- DeepSpeed ``deepspeed/comm/comm.py`` ``init_distributed``: ``cdb=None`` (each rank, on
  entry) and ``Initializing TorchBackend in DeepSpeed with backend nccl`` (rank 0, just
  before ``TorchBackend`` calls ``init_process_group``); DeepSpeed <= 0.6
  ``Initializing torch distributed with backend: nccl``;
- Lightning ``_init_dist_connection``: ``Initializing distributed: GLOBAL_RANK: 1, MEMBER:
  2/8`` (1.x ``initializing ddp: ...``) before it, and on rank 0 after it returned ``All
  distributed processes registered. Starting with 8 processes``;
- fairseq ``distributed_utils.py`` and the codebases that copied it (DeiT, MAE, DINO):
  ``| distributed init (rank 3): tcp://host:9000`` before, ``| initialized host node2 as
  rank 3`` after;
- torch ``distributed_c10d.py`` ``_store_based_barrier`` (1.8-2.0): ``Added key:
  store_based_barrier_key:1 to store for rank: 3``, ``Waiting in store based barrier to
  initialize process group for rank: 3, key: ... (world_size=8, worker_count=5, ...)``
  while ranks are missing, ``Rank 3: Completed store-based barrier for key:... with 8
  nodes.`` once all came.

When every file of the log ends at such an entry line and no line says the world formed,
the job stopped there (it hung waiting for ranks, or was killed), or the paste was cut
there: the text cannot tell which, so explain shows ``world-not-formed`` undecided (a
symptom: a rank that never started, an address or port the others cannot reach, a world
size larger than the processes started all look the same) and says what would decide.
The same when Slurm cancelled the job right after ranks entered init (a job that waited
there until its time ran out): the cancellation is the end, the unformed world what it shows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.explain.causality import CLOCK_SLACK_S, SYMPTOM, Explained
from ddpcheck.explain.reader import Record
from ddpcheck.launcher.spawn.formation import WORLD_NOT_FORMED

# A rank entered init_process_group (or the barrier inside it).
ENTERED = re.compile(
    r"init_distributed\] cdb=None\s*$|"
    r"Initializing TorchBackend in DeepSpeed with backend \w+|"
    r"Initializing torch distributed with backend: \w+|"
    r"(?i:initializing (?:ddp|distributed)): GLOBAL_RANK: \d+, MEMBER: \d+/\d+|"
    r"\| distributed init \(rank \d+\)|"
    r"Added key: store_based_barrier_key:\d+ to store for rank: ?\d+|"
    r"Waiting in store based barrier to initialize process group for")
# The world formed: every rank got through (or rank 0's init returned).
FORMED = re.compile(r"All distributed processes registered|\| initialized host \S+ as rank|"
                    r"Completed store-based barrier|distributed init done")
# The barrier's own count: how many ranks of the world had come.
COUNT = re.compile(r"world_size=(?P<world>\d+), (?:worker_count|num_workers_joined)="
                   r"(?P<came>\d+)")
NEXT = ("ddpcheck run --nodes N --stages rendezvous (on every node, with the job's "
        "MASTER_ADDR and MASTER_PORT)")
CAUSE = ("the log ends while ranks were still forming the world (inside init_process_group) "
         "and no line says it formed: if the job stopped there, some rank never arrived (not "
         "started, crashed before it, or a world size larger than the processes started) or "
         "could not reach rank 0's store (MASTER_ADDR/MASTER_PORT wrong, a port of 0, a "
         "firewall); a log cut there from a healthy job looks the same")
FIX = ("check that every rank started and reaches MASTER_ADDR:MASTER_PORT (a fixed port, open "
       "between the nodes); rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL and TORCH_CPP_LOG_LEVEL="
       "INFO, which log each rank's store connection, and give explain every rank's log")


# slurmstepd's cancellation ("*** JOB 1 ON n1 CANCELLED AT ..." / "*** STEP 1.0 ...").
CANCELLED = re.compile(r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT ")
WORLD = re.compile(r"MEMBER: \d+/(?P<world>\d+)")
CANCELLED_CAUSE = ("the ranks entered init_process_group and waited there until Slurm "
                   "cancelled the job: some rank never arrived (not started, crashed before "
                   "it, or a world size larger than the processes started) or could not reach "
                   "rank 0's store (MASTER_ADDR/MASTER_PORT wrong, a firewall)")
IN_SLURM = ("; with Lightning under Slurm the world is every srun task (SLURM_NTASKS): "
            "--ntasks-per-node must equal Trainer(devices), one task per GPU")


def cancelled_while_forming(records: Sequence[Record]) -> Explained | None:
    """``world-not-formed``, undecided, when Slurm cancelled the job right after ranks
    entered ``init_process_group`` (nothing but entry lines between) and no line says the
    world formed: the job waited there until the cancellation; else None."""
    if any(FORMED.search(r.text) for r in records):
        return None
    cancel = next((r for r in records if CANCELLED.search(r.text)), None)
    if cancel is None:
        return None
    before = [r for r in records if r.source == cancel.source and r.lineno < cancel.lineno
              and r.text.strip()]
    if not before or not ENTERED.search(before[-1].text):
        return None
    entry = before[-1]
    world = WORLD.search(entry.text)
    problem = WORLD_NOT_FORMED.problem(
        f"{entry.text.strip()[:200]} [{entry.source}:{entry.lineno}], then Slurm cancelled the "
        f"job: {cancel.text.strip()[:160]}; no line says the world"
        + (f" of {world['world']} ranks" if world else "") + " formed",
        cause=CANCELLED_CAUSE + (IN_SLURM if world else ""), fix=FIX,
        ranks=(entry.rank,) if entry.rank is not None else ())
    if cancel.time is not None and entry.time is None:  # printed before it, in one stream
        entry = replace(entry, time=cancel.time - 2 * CLOCK_SLACK_S)
    return Explained(problem, entry, True, NEXT, (f"{entry.source}:{entry.lineno}",
                                                  f"{cancel.source}:{cancel.lineno}"), SYMPTOM)


def stopped_forming(records: Sequence[Record]) -> Explained | None:
    """``world-not-formed``, undecided, when every file ends at a rank entering
    ``init_process_group`` and no line says the world formed; else None."""
    if any(FORMED.search(r.text) for r in records):
        return None
    last: dict[str, Record] = {}
    for r in records:
        if r.text.strip():
            last[r.source] = r
    if not last or not all(ENTERED.search(r.text) for r in last.values()):
        return None
    first = min(last.values(), key=lambda r: r.order)
    counts = [m for r in records if (m := COUNT.search(r.text))]
    came = (f"; {counts[-1]['came']} of {counts[-1]['world']} ranks had joined"
            if counts else "")
    ranks = sorted({r.rank for r in last.values() if r.rank is not None})
    problem = WORLD_NOT_FORMED.problem(
        "the log ends inside process-group initialisation, with no line saying the world "
        f"formed: {first.text.strip()[:200]}{came}", cause=CAUSE, fix=FIX, ranks=ranks)
    return Explained(problem, first, True, NEXT,
                     tuple(f"{r.source}:{r.lineno}" for r in last.values()), SYMPTOM)
