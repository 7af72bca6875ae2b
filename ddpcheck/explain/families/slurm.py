"""Slurm step and task-layout errors printed by srun (src/srun, slurm_errno strings)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.diagnoses import LAUNCH_FAILED, RUN_INTERRUPTED
from ddpcheck.explain.causality import HINT, SYMPTOM, WARNING, Explained
from ddpcheck.explain.codes import (
    HOST_OOM,
    SLURM_JOB_CANCELLED,
    SLURM_JOB_REJECTED,
    SLURM_STEP_REJECTED,
    SLURM_WITHOUT_SRUN,
)
from ddpcheck.explain.families import formation, slurmgpus
from ddpcheck.explain.matching import pattern
from ddpcheck.explain.prefilter import records_for
from ddpcheck.explain.reader import Record
from ddpcheck.scheduler.contradictions import SHAPE_MISMATCH as JOB_SHAPE_MISMATCH
from ddpcheck.scheduler.contradictions import TASKS_GPUS_MISMATCH
from ddpcheck.scheduler.detect import ENV_INVALID

# srun's report of a task that ended badly (src/srun, 17.x-25.x): "srun: error: node1: task 1:
# Exited with exit code 1", "srun: error: node0: task 0: Terminated". Its task N is rank N when
# srun starts the ranks itself, that is when no torchrun agent's lines (TORCHRUN_AGENT) are in
# the log (under torchrun, task N is node N's agent). Read by quietexit.srun_quiet_exit and
# rendezvous.master_not_rank0_under_srun.
SRUN_TASK = re.compile(r"^srun: error: (?P<node>[\w.-]+): task (?P<task>\d+): "
                       r"(?:Exited with exit code (?P<code>\d+))?")
TORCHRUN_AGENT = re.compile(r"torch/distributed/elastic/|\btorchrun\b|ChildFailedError")

PATTERNS = [
    # slurmstepd: "*** JOB 123 ON node1 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***"
    # Not a root: a job that hangs (a rank that never joined, a node never started) ends this
    # way, so any other failure in the log comes first; it explains the kills that follow.
    # (Slurm <= 14 put the node last: "*** JOB 123 CANCELLED AT ... DUE TO TIME LIMIT on n1 ***")
    # slurmstepd req.c (17.02-26.05) also prints "DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR
    # DETAILS", "DUE TO JOB REQUEUE", "DUE TO TASK FAILURE" (srun killed the step after a task
    # failed: that task's error is the cause) and, lower-case, "DUE to SIGNAL Terminated".
    pattern(SLURM_JOB_CANCELLED,
            r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT \S+"
            r"(?P<why>(?: DUE (?:TO|to) [A-Z]+(?: [A-Z][A-Za-z]*)*| BY \S+)?)",
            "sacct -j JOBID -o JobID,State,Elapsed,Timelimit,ExitCode", root=False,
            cause="slurmstepd cancelled it{why}: the ranks' SIGTERM/SIGKILL that follow are "
                  "the scheduler's, not a crash"),
    # slurmstepd cannot exec the step's program (src/slurmd/slurmstepd/exec_wait.c /
    # task.c, 17.x-25.x: "slurmstepd-node0: error: execve(): torchrun: No such file or
    # directory", real run s33f-slurm-export-none), then srun reports the task's exit code 2:
    # the program is not on the task's PATH on that node. No rank ran.
    pattern(LAUNCH_FAILED,
            r"slurmstepd(?:-[\w.-]+)?: error: execve\(\): (?P<cmd>[^:]+): (?:No such file or "
            r"directory|Permission denied)",
            "srun --nodes=N --ntasks-per-node=1 bash -c 'command -v {cmd}; echo $PATH'",
            cause="srun could not start {cmd} on the node: it is not on the task's PATH there "
                  "(the job's environment not passed on: srun --export=NONE, a venv or conda "
                  "environment activated on the login node only) or not installed on that node",
            fix="activate the environment in the batch script before srun and keep srun's "
                "default --export=ALL, or give the program's absolute path (e.g. "
                "/path/to/venv/bin/{cmd}) on a filesystem every node mounts"),
    # Lightning's own hint (lightning/fabric/plugins/environments/slurm.py) when it runs
    # under a Slurm allocation without srun: one process where the job asked for many.
    pattern(SLURM_WITHOUT_SRUN,
            r"The `srun` command is available on your system but is not used",
            "ddpcheck run --nodes N --launch srun inside the same allocation"),
    # Lightning's SLURMEnvironment.validate_settings / _validate_srun_variables
    # (lightning/fabric/plugins/environments/slurm.py, Lightning >= 2.0): the Trainer's
    # devices / num_nodes against what srun started.
    pattern(TASKS_GPUS_MISMATCH,
            r"You set `devices=(?P<dev>\d+)` in Lightning, but the number of tasks per node "
            r"configured in SLURM `--ntasks-per-node=(?P<tasks>\d+)` does not match",
            "ddpcheck run --nodes N inside the same allocation (compares tasks and GPUs)",
            cause="Lightning starts one process per srun task: the allocation gives {tasks} "
                  "task(s) per node while the Trainer asks for devices={dev}",
            fix="make them equal: #SBATCH --ntasks-per-node={dev} (one task per GPU), or "
                "Trainer(devices={tasks})"),
    pattern(JOB_SHAPE_MISMATCH,
            r"You set `num_nodes=(?P<n>\d+)` in Lightning, but the number of nodes configured "
            r"in SLURM `--nodes=(?P<m>\d+)` does not match",
            "ddpcheck run --nodes N inside the same allocation",
            cause="the launcher's configuration (Lightning's Trainer num_nodes / devices) "
                  "disagrees with the Slurm allocation (--nodes, --ntasks-per-node)",
            fix="set Trainer(num_nodes=...) to #SBATCH --nodes and devices to "
                "--ntasks-per-node (Lightning's --ntasks message: families/wrappers.py)"),
    # src/srun/launch.c: "Unable to create step for job %u: %m" (18.08-26.05); Slurm <= 17.11
    # (src/srun/libsrun/launch.c) "Unable to create job step: %m". Who else prints it: %m is
    # any slurm_errno string (src/common/slurm_errno.c); besides a layout the allocation
    # cannot give, "Job/step already completing or completed" (ESLURM_ALREADY_DONE: the job
    # had ended, its time limit or a cancellation is the story) and the controller's own
    # failures ("Socket timed out on send/recv operation", "Zero Bytes were transmitted or
    # received", "Unable to contact slurm controller (... failure)") are no layout.
    pattern(SLURM_STEP_REJECTED,
            r"srun: error: Unable to create (?:step for job \S+|job step): "
            r"(?P<why>Job/step already completing or completed|Job has been cancelled)",
            "sacct -j JOBID -o JobID,State,Elapsed,Timelimit,ExitCode", root=False,
            grade=SYMPTOM,
            cause="srun started a step after the job's allocation had ended ({why}): what "
                  "ended the job (its time limit, a cancellation, the batch step's failure) "
                  "comes first"),
    pattern(SLURM_STEP_REJECTED,
            r"srun: error: Unable to create (?:step for job \S+|job step): "
            r"(?P<why>Socket timed out on send/recv operation|Zero Bytes were transmitted or "
            r"received|Unable to contact slurm controller[^:]*)",
            "sdiag; scontrol ping (is slurmctld answering?)",
            cause="slurmctld did not answer srun's step request ({why}): an overloaded or "
                  "unreachable controller, not the job's layout",
            fix="retry the step (srun retries only some errors); if it repeats, ask the "
                "admins (sdiag, slurmctld's log); many steps started at once overload it"),
    pattern(SLURM_STEP_REJECTED,
            r"srun: error: Unable to create (?:step for job \S+|job step): (?P<why>.+)$",
            "ddpcheck run --nodes N inside the same allocation (one srun task per node)",
            cause="srun asked for a layout the allocation cannot give: {why}"),
    # src/srun/launch.c while the step waits for resources (the retry errnos, e.g. "Requested
    # nodes are busy"): "Job %u step creation temporarily disabled, retrying (%s)" (20.11+;
    # 19.05 without the reason, <= 18.08 "Job step creation temporarily disabled, retrying");
    # then "Step created for StepId=..." once it starts. Without that line the step never
    # started: other steps of the job hold the CPUs, memory or GPUs it asks for (steps are
    # exclusive by default since 20.11). A hint: it is a wait, not a refusal.
    pattern(SLURM_STEP_REJECTED,
            r"srun: Job (?:\d+ )?step creation (?:temporarily|still) disabled, retrying"
            r"(?: \((?P<why>[^)]*)\))?",
            "ddpcheck run --nodes N inside the same allocation (one srun task per node)",
            grade=HINT,
            cause="srun's step waited for resources that other steps of the same job hold "
                  "(another srun still running, or a step asking for all CPUs, memory or "
                  "GPUs of the node)",
            fix="let each srun ask for only its share (--exact, --mem / --gpus per step) or "
                "--overlap to share the allocation; scontrol show job JOBID / squeue -s show "
                "the steps holding it"),
    # src/common/slurm_opt.c (21.08-26.05): srun refuses to start when the environment it
    # inherits sets more than one memory option (the allocation's SLURM_MEM_PER_NODE and a
    # SLURM_MEM_PER_CPU set by the script or a wrapper)
    pattern(ENV_INVALID,
            r"srun: fatal: SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE are "
            r"mutually exclusive",
            "env | grep SLURM_MEM (inside the job)",
            cause="srun inherited more than one of SLURM_MEM_PER_CPU / SLURM_MEM_PER_GPU / "
                  "SLURM_MEM_PER_NODE (the allocation's and one the script exported)",
            fix="unset all but one before srun (e.g. unset SLURM_MEM_PER_CPU), or pass "
                "srun --mem explicitly"),
    # src/srun/allocate.c (17.02-26.05): srun given the id of a job that ended or never was
    # (SLURM_JOB_ID inherited by a shell that outlived its allocation, or --jobid): "Slurm
    # job %u has expired" / "Unable to confirm allocation for job %u: %m", then "Check
    # SLURM_JOB_ID environment variable. Expired or invalid job %u". Only srun prints them.
    pattern(ENV_INVALID,
            r"srun: error: (?:Unable to confirm allocation for job \S+: |Slurm job \S+ has "
            r"expired)|Check SLURM_JOB_ID environment variable\. Expired or invalid job",
            "echo $SLURM_JOB_ID; squeue -j $SLURM_JOB_ID (inside the shell that ran srun)",
            cause="srun ran with the SLURM_JOB_ID of a job that has ended or does not exist "
                  "(a shell or tmux session that outlived its allocation, a copied "
                  "environment, or --jobid of an old job)",
            fix="run srun inside a live allocation (salloc / sbatch), or unset SLURM_JOB_ID "
                "SLURM_JOBID so that srun allocates anew"),
    # srun --mpi names a plugin this cluster lacks, so no task starts: src/common/mpi.c /
    # slurm_mpi.c "cannot create mpi context for mpi/%s" (17.02-21.08), "MPI: Cannot create
    # context for %s" (22.05+, src/interfaces/mpi.c from 23.02), after src/common/plugin.c's
    # "Couldn't find the specified plugin name for mpi/%s looking at all files" (an error up
    # to 22.05, debug since). Torch's launchers need no MPI plugin.
    pattern(SLURM_STEP_REJECTED,
            r"(?:MPI: Cannot create context|cannot create mpi context) for (?P<mpi>\S+)|"
            r"srun: error: Couldn't (?:find|load) (?:the )?specified plugin name for "
            r"(?P<mpi2>mpi/\S+)",
            "srun --mpi=list (the MPI plugins this cluster has)",
            cause="srun could not load its MPI plugin ({mpi}{mpi2}), so the step never started",
            fix="pass srun --mpi=none (torchrun / torch.distributed need no MPI plugin) or one "
                "that srun --mpi=list shows; check SLURM_MPI_TYPE and MpiDefault"),
    pattern(SLURM_JOB_REJECTED,
            r"(?:sbatch|salloc|srun): error: (?:Batch job submission failed|"
            r"Job submit/allocate failed|Unable to allocate resources): (?P<why>.+)$|"
            # (a step's gres error is srun's step rejection above, not the job's)
            r"^(?!.*Unable to create step).*Invalid generic resource \(gres\) specification",
            "sinfo -o '%P %c %m %G' (what the partition's nodes offer)"),
    # a site's job_submit plugin rejects through slurm.log_user, which sbatch prints as
    # "sbatch: error: *** Error ..." lines before it gives up
    pattern(SLURM_JOB_REJECTED,
            r"^\s*(?:sbatch|salloc): error: \*+ ?(?P<site>Error.*?)\s*$",
            "sbatch --test-only <script> (the site's checks, without queuing the job)",
            cause="the cluster's own submit checks (a job_submit plugin) refused the job: "
                  "{site}; such checks classify a job by what it requests (GPUs per node, "
                  "partition, time)",
            fix="request what the site's rules expect (the cluster's documentation; e.g. "
                "--gpus-per-node=N instead of --gpus=N for a GPU partition) and check with "
                "sbatch --test-only before submitting"),
    # Any other "sbatch: error:" / "salloc: error:" line: sbatch.c and salloc.c print their
    # option checks and, when the controller refuses the job, the job_submit plugin's user
    # message (print_multi_line_string at LOG_LEVEL_ERROR, only on a failed submission;
    # accepted jobs print it as info) through error(), then exit without a job. The wrappers
    # that submit for the user (submitit's FailedJobError, dask-jobqueue) quote the line.
    # Left out: SPANK plugin lines ("sbatch: error: spank: ..."), which an optional plugin
    # prints before the job goes on.
    pattern(SLURM_JOB_REJECTED,
            r"\b(?:sbatch|salloc): error: (?!spank)(?P<msg>\S.*?)\s*$",
            "sbatch --test-only <script> (Slurm's and the site's checks, without queuing "
            "the job)",
            cause="Slurm refused to submit the job: {msg}",
            fix="change the #SBATCH / sbatch options the message names (the cluster's "
                "documentation says what it accepts) and check with sbatch --test-only "
                "before submitting"),
]


# srun's own line once a step that waited starts (src/srun/launch.c, 20.11+): the wait ended
STEP_CREATED = re.compile(r"srun: Step created for ")
STEP_WAIT = re.compile(r"step creation (?:temporarily|still) disabled")


def _step_started(e: Explained, records: Sequence[Record]) -> bool:
    """A step wait that a later 'Step created' line of the same file ended."""
    return (e.problem.code == SLURM_STEP_REJECTED.code and bool(STEP_WAIT.search(e.first.text))
            and any(STEP_CREATED.search(r.text) and r.source == e.first.source
                    and r.order > e.first.order for r in records))


# A batch script pasted into the log: its node count and its launch line.
SBATCH_NODES = re.compile(r"^\s*#SBATCH\s+(?:--nodes[= ]|-N\s*)(?P<n>\d+)")
# A script line that starts the training: a launcher, or a Python script itself (Lightning
# and plain scripts read SLURM_PROCID, so srun must start one per task).
LAUNCH = re.compile(r"^\s*(?:\S+=\S+\s+)*(?:torchrun|python\S*\s+-m\s+torch\.distributed\."
                    r"(?:run|launch)|accelerate\s+launch|deepspeed|lightning\s+run|"
                    r"python\S*\s+(?:-u\s+)?\S+\.py)\b")
# What starts a command on every node: srun, or an MPI / parallel-shell launcher.
SRUN = re.compile(r"^\s*(?:\S+=\S+\s+)*(?:srun|mpirun|mpiexec|pdsh|clush|pssh|pdsh)\b|"
                  r"\$\(srun|`srun|\bssh\s")
# What a launcher started on one node of several shows: nobody else joins.
WAITED = frozenset({"rendezvous-timeout", "endpoint-unreachable", "endpoint-refused",
                    "collective-timeout", "rank-zero-only-step-timeout", "unexplained",
                    "world-not-formed"})  # (a log that ends inside init: families/formation)
# What a launcher started on one node of several leads to: waits for peers that never come
# (timeouts, refusals). An exception no rule explains is no such wait: the script's own
# failure, which a batch script without srun does not explain.
WAITED_FOR_PEERS = WAITED - {"unexplained"}


# Lightning's DDP setup line (pytorch_lightning 1.x "initializing ddp: GLOBAL_RANK: 1, MEMBER:
# 2/8", >= 1.6 "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/8"): each process
# prints its own global rank once. Two processes of one job printing the same rank means
# the world Lightning computed (num_nodes x devices) is not the one Slurm started.
MEMBER = re.compile(r"(?i)initializing (?:ddp|distributed): GLOBAL_RANK: (?P<rank>\d+), "
                    r"MEMBER: \d+/(?P<world>\d+)")
RESTART = re.compile(r"(?i)restarting (?:workers|worker group)|\bRestart(?:ing)? (?:attempt|run)")


# A kill that names memory (the OOM killer, a memory limit) stays a cause under a
# cancellation; a bare SIGKILL or "Killed" is the scheduler's own kill.
OOM_WORDS = re.compile(r"(?i)\boom|out of memory|memory limit|cannot allocate memory")


def _repeated_member(records: Sequence[Record]) -> Explained | None:
    seen: dict[tuple[str, str, str], Record] = {}
    if any(RESTART.search(r.text) for r in records):
        return None
    for r in records:
        if m := MEMBER.search(r.text):
            key = (r.source, m["rank"], m["world"])
            if key in seen:
                first = seen[key]
                problem = JOB_SHAPE_MISMATCH.problem(
                    f"{first.text.strip()} [{first.source}:{first.lineno}] printed again "
                    f"[{r.source}:{r.lineno}]: two processes took global rank {m['rank']} "
                    f"of {m['world']}",
                    cause="Lightning computed a world of "
                          f"{m['world']} (Trainer num_nodes x devices) that is not the one "
                          "Slurm started: processes on different nodes took the same ranks "
                          "(#SBATCH --nodes / --ntasks-per-node disagree with the Trainer)",
                    fix="set Trainer(num_nodes=<#SBATCH --nodes>, devices=<--ntasks-per-node>) "
                        "and start the script with srun")
                return Explained(problem, first, True, "ddpcheck run --nodes N inside the "
                                 "same allocation", (f"{first.source}:{first.lineno}",
                                                     f"{r.source}:{r.lineno}"))
            seen[key] = r
    return None


# Lightning's srun hint (lightning/fabric/plugins/environments/slurm.py _validate_srun_used,
# 2.0-2.6.6) is printed whenever `srun` is on PATH and SLURM_NTASKS is unset: every Lightning
# run on a host with Slurm's client that srun did not start (a login node, a workstation, a
# single-node job, torchrun inside sbatch), healthy ones too (runs-wrappers/lightning-*: all
# 8 read slurm-without-srun before stop 29). What it would explain is a world that never
# formed. Once the log shows the world formed (formation.FORMED: Lightning's rank 0 "All
# distributed processes registered. Starting with N processes", printed after
# init_process_group returned) or every member of it entering init (Lightning's
# "Initializing distributed: GLOBAL_RANK: g, MEMBER: m/W" for m = 1..W: its launcher started
# them all), no process was left unstarted: the hint explains nothing that followed.
SRUN_HINT = re.compile(r"The `srun` command is available on your system but is not used")
STARTED = re.compile(r"Initializing distributed: GLOBAL_RANK: \d+, MEMBER: (?P<m>\d+)/(?P<w>\d+)",
                     re.IGNORECASE)


def srun_hint_moot(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """Lightning's srun hint left out where the log shows no process was left unstarted
    (before the engine looks for an unexplained failure: the hint then explains nothing)."""
    hint = [e for e in found if e.problem.code == SLURM_WITHOUT_SRUN.code
            and SRUN_HINT.search(e.first.text)]
    if not hint:
        return found
    members: dict[int, set[int]] = {}
    for r in records:
        if m := STARTED.search(r.text):
            members.setdefault(int(m["w"]), set()).add(int(m["m"]))
    if (any(formation.FORMED.search(r.text) for r in records)
            or any(len(seen) == world for world, seen in members.items())):
        return [e for e in found if e not in hint]
    return found


def refine(found: list[Explained], records: Sequence[Record] = ()) -> list[Explained]:
    """Kills after a Slurm cancellation are its consequences; a multi-node batch script
    whose launcher runs without srun (the wait that follows is its consequence); ranks that
    Lightning handed out twice; a step wait that ended; an invalid device ordinal under
    srun's per-task GPU binding."""
    found = slurmgpus.per_task_gpus([e for e in found if not _step_started(e, records)],
                                    records)
    if not any(e.root and e.grade != WARNING  # a warning is no failure of its own
               and e.problem.code not in WAITED | {"rank-exited", "nccl-error"}
               for e in found) and (shape := _repeated_member(records)):
        found = [shape, *found]
    if (all(e.problem.code == SLURM_JOB_CANCELLED.code for e in found if e.root or
            e.problem.code == SLURM_JOB_CANCELLED.code) and found
            and (forming := formation.cancelled_while_forming(records))):
        found = [forming, *found]  # what the job waited in until the cancellation
    if any(e.problem.code == SLURM_JOB_CANCELLED.code for e in found):
        # its SIGKILLs (no OOM words) and the SIGTERM torchrun's agent then got ("Received 15
        # death signal", real run s33c-slurm-job-cancelled: scancel mid-run) are its own
        found = [replace(e, root=False, problem=e.problem.where(
                     consequence_of=SLURM_JOB_CANCELLED.code))
                 if (e.problem.code == HOST_OOM.code
                     and not OOM_WORDS.search(e.problem.observed))
                 or e.problem.code == RUN_INTERRUPTED.code else e for e in found]
    nodes = next((r for r in records_for(records, SBATCH_NODES)
                  if (m := SBATCH_NODES.match(r.text)) and int(m["n"]) > 1), None)
    launch = next((r for r in records_for(records, LAUNCH) if LAUNCH.match(r.text)), None)
    if (nodes is None or launch is None or any(SRUN.search(r.text) for r in records)
            or not any(e.problem.code in WAITED_FOR_PEERS for e in found)):
        return found
    problem = SLURM_WITHOUT_SRUN.problem(
        f"{nodes.text.strip()} [{nodes.source}:{nodes.lineno}] but the launcher runs once, "
        f"without srun: {launch.text.strip()[:160]} [{launch.source}:{launch.lineno}]")
    first = replace(launch, time=float("-inf"))  # the script runs before anything it starts
    return [Explained(problem, first, True, "ddpcheck run --nodes N --launch srun",
                      (f"{nodes.source}:{nodes.lineno}", f"{launch.source}:{launch.lineno}")),
            *(replace(e, root=False) if e.problem.code in WAITED_FOR_PEERS else e
              for e in found)]
