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
  nodes.`` once all came;
- Megatron-LM ``_initialize_distributed`` (megatron/initialize.py, megatron/training/
  initialize.py, and the DeepSpeed fork): ``> initializing torch distributed ...`` (rank 0,
  just before ``init_process_group``), then, once it returned, ``> initialized tensor model
  parallel with size 1`` / ``> initialized pipeline model parallel with size 1`` (older mpu:
  ``> initializing model parallel with size 1``);
- torchrun's agents, before any worker starts (torch/distributed/elastic, 1.9-2.13):
  dynamic_rendezvous.py ``The node 'n1_42_0' attempts to join the next round of the
  rendezvous 'job'.``, and ``... has joined round 0 of the rendezvous 'job' as rank 0 in a world
  of size 2.`` once every node came (agent api.py then ``Rendezvous complete for workers``);
  torch 2.13's torchrun with ``LOGLEVEL=INFO`` shows only the agent's ``[default]
  Rendezvous'ing worker group`` before it (a real run here, one of two nodes started);
  the etcd backend ``Attempting to join next rendezvous`` / ``Waiting for remaining peers.``,
  then ``Rendezvous version N is complete``. A log that ends there is the agents' world,
  not yet the workers' (``RDZV_CAUSE``);
- HF accelerate prints no line before ``init_process_group``, but its state's repr, which
  scripts log once ``PartialState`` is up (accelerate/state.py, 0.x-1.x), says a process got
  through: ``Distributed environment: MULTI_GPU  Backend: nccl`` (older
  ``DistributedType.MULTI_GPU``; ``DEEPSPEED``, ``FSDP``, ``MEGATRON_LM``).

NCCL's own INFO log (``NCCL_DEBUG=INFO``; its default subsystems include INIT) says the same
of a communicator, which torch creates at a group's first collective: ``init.cc`` prints
``comm 0x... rank R nranks N ... - Init START`` when a rank begins ``ncclCommInitRank`` (NCCL
2.18.3+; 2.21+ prefixes the function, ``ncclCommInitRank comm ...``, 2.30 ``[Rank R]``) and
``... - Init COMPLETE`` when that rank's communicator is up (2.4-2.30; 2.3 ``comm 0x... rank R
nranks N - COMPLETE``); ``Destroy COMPLETE`` / ``Abort COMPLETE`` (2.12+) end one. Before 2.18.3
no line marks the start, but the INIT lines it prints on the way (``Bootstrap : Using``,
``Using network``, ``Setting affinity for GPU``, ``Trees``, ``threadThresholds``, ``N coll
channels``, ``Connected all rings``, 2.7-2.30) do. A log that ends in those lines with a
communicator started and never completed stopped inside NCCL's communicator init, or was cut
there: users paste NCCL's start-up lines of working runs as context (4 of the 27 healthy dev
logs, nccl-tests and torch runs, stop inside NCCL's init), so that is no problem of its own:
``nccl_unfinished`` says it in a note beside NO FAILURE FOUND, with what would decide.

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
from ddpcheck.explain.reader import Record, last_lines
from ddpcheck.launcher.spawn.formation import WORLD_NOT_FORMED

# torchrun's agents entered their rendezvous (dynamic_rendezvous.py next_rendezvous; etcd)
RDZV_ENTERED = (r"attempts to join the next round of the rendezvous|\] Rendezvous'ing worker group|"
                r"Attempting to join next rendezvous|Waiting for remaining peers\.")
# A rank entered init_process_group (or the barrier inside it).
ENTERED = re.compile(
    r"init_distributed\] cdb=None\s*$|"
    r"Initializing TorchBackend in DeepSpeed with backend \w+|"
    r"Initializing torch distributed with backend: \w+|"
    r"(?i:initializing (?:ddp|distributed)): GLOBAL_RANK: \d+, MEMBER: \d+/\d+|"
    r"\| distributed init \(rank \d+\)|"
    r"Added key: store_based_barrier_key:\d+ to store for rank: ?\d+|"
    r"Waiting in store based barrier to initialize process group for|"
    r"^\s*> initializing torch distributed \.\.\.\s*$|" + RDZV_ENTERED)
AGENTS = re.compile(RDZV_ENTERED)
# The world formed: every rank got through (or rank 0's init returned).
FORMED = re.compile(r"All distributed processes registered|\| initialized host \S+ as rank|"
                    r"Completed store-based barrier|distributed init done|"
                    r"> initiali[sz](?:ed|ing) (?:tensor |pipeline )?model parallel with size|"
                    r"has joined round \d+ of the rendezvous|Rendezvous complete for workers|"
                    r"Rendezvous version \d+ is complete|"
                    r"Distributed environment: (?:DistributedType\.)?(?:MULTI_|DEEPSPEED|FSDP|"
                    r"MEGATRON)")
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
RDZV_CAUSE = ("the log ends while torchrun's agents were still in their rendezvous, before "
              "any worker started, and no line says every node came: if the job stopped there, "
              "a node never ran torchrun (or with another --rdzv-id / --nnodes), or could not "
              "reach the rendezvous endpoint (--rdzv-endpoint wrong, its port closed); a log "
              "cut there from a healthy job looks the same")
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
    last = last_lines(records)
    if not last or not all(ENTERED.search(r.text) for r in last.values()):
        return None
    first = min(last.values(), key=lambda r: r.order)
    counts = [m for r in records if (m := COUNT.search(r.text))]
    came = (f"; {counts[-1]['came']} of {counts[-1]['world']} ranks had joined"
            if counts else "")
    ranks = sorted({r.rank for r in last.values() if r.rank is not None})
    agents = bool(AGENTS.search(first.text))
    problem = WORLD_NOT_FORMED.problem(
        ("the log ends inside torchrun's rendezvous" if agents else
         "the log ends inside process-group initialisation")
        + f", with no line saying the world formed: {first.text.strip()[:200]}{came}",
        cause=RDZV_CAUSE if agents else CAUSE, fix=FIX, ranks=ranks)
    return Explained(problem, first, True, NEXT,
                     tuple(f"{r.source}:{r.lineno}" for r in last.values()), SYMPTOM)


# NCCL init.cc, a communicator's lines (2.3-2.30): "comm 0x55d5 rank 0 nranks 2 cudaDev 0
# nvmlDev 0 busId 1000 commId 0x8e1f - Init START" (2.18.3+), "... - Init COMPLETE" (2.4+),
# "comm 0x55d5 rank 0 nranks 2 - COMPLETE" (2.3), "... - Destroy COMPLETE" / "Abort COMPLETE".
NCCL_COMM = re.compile(r"NCCL INFO .*\bcomm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) "
                       r"nranks (?P<n>\d+)\b.*?-\s*(?P<what>Init START|(?:\w+ )?COMPLETE)\b")
# INIT-subsystem lines printed on the way through init (init.cc, bootstrap.cc, graph/*.cc,
# transport.cc, 2.7-2.30; "Connected all rings" 2.12+), never after it completed; the ring
# listing "Channel 00/02 :    0   1", not the P2P connections "Channel 00/1 : 0[0] -> 1[1] via"
# that NCCL also opens later, at a first send/recv.
NCCL_INIT_STEP = re.compile(r"NCCL INFO (?:Bootstrap ?: ?Using|Using network |Setting affinity "
                            r"for GPU|Trees|threadThresholds |\d+ coll channels|Connected all "
                            r"(?:rings|trees)|Channel \d+/\d+ :(?: +\d+)+\s*$)")
BOOTSTRAP = re.compile(r"NCCL INFO Bootstrap ?: ?Using")
# "host:pid:tid [dev] NCCL INFO": one process (a comm's address is the process's own)
NCCL_WHO = re.compile(r"(?P<who>[^\s:]+:\d+):\d+ \[\d+\] NCCL INFO")
NCCL_NOTE = ("the log ends inside NCCL's communicator initialisation ({what}): if the job "
             "hung there, a rank never called the group's first collective (torch creates the "
             "communicator then) or NCCL's connections between the ranks cannot open "
             "(NCCL_SOCKET_IFNAME, a firewall on the ephemeral ports, a P2P or InfiniBand "
             "transport that hangs); a log cut there from a working run looks the same. Give "
             "explain every rank's whole log: a rank without `Init START` never reached it")


def nccl_unfinished(records: Sequence[Record]) -> str | None:
    """A note when every file ends at an NCCL INFO line and a communicator's init started
    (``Init START``; before NCCL 2.18.3 the bootstrap and the init steps, with no
    ``COMPLETE`` anywhere) without completing; else None."""
    last = last_lines(records)
    if not last or not all("NCCL INFO" in r.text for r in last.values()):
        return None
    started: dict[tuple[str, str, str], Record] = {}
    done: set[tuple[str, str, str]] = set()
    steps = []
    for r in records:
        if "NCCL INFO" not in r.text:
            continue
        if m := NCCL_COMM.search(r.text):
            who = NCCL_WHO.search(r.text)
            key = (r.source, who["who"] if who else "", m["comm"].lower())
            if m["what"] == "Init START":
                started.setdefault(key, r)
            else:
                done.add(key)
        elif NCCL_INIT_STEP.search(r.text):
            steps.append(r)
    pending = [r for k, r in started.items() if k not in done]
    # before 2.18.3 (no START line): a log that holds NCCL's start in the process (the
    # bootstrap's interface, printed once by ncclInit) and whose every file ends at one of
    # the init steps, not a fragment of NCCL's lines (a pasted excerpt of transport lines)
    if not pending and (started or done or not any(BOOTSTRAP.search(r.text) for r in steps)
                        or not all(NCCL_INIT_STEP.search(r.text) for r in last.values())):
        return None
    if pending:
        m = NCCL_COMM.search(pending[0].text)
        what = (f"rank {m['rank']} of {m['n']} started communicator {m['comm']} "
                f"[{pending[0].source}:{pending[0].lineno}] and no line says it completed"
                if m else "")
    else:
        what = (f"NCCL printed its init steps, the last at [{steps[-1].source}:"
                f"{steps[-1].lineno}], and no communicator completed (no `Init COMPLETE`)")
    return NCCL_NOTE.format(what=what)
