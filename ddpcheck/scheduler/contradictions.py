"""Contradictions between the job's shape (ddpcheck.scheduler.detect) and ddpcheck's flags.

Runs in the launcher; pure. Each contradiction is a Problem naming the scheduler's
variable and the flag, never an exception: a wrong --nodes in a Slurm job is a finding
to report, not a crash.
"""

from __future__ import annotations

from ddpcheck import diagnoses
from ddpcheck.diagnoses import Problem, register
from ddpcheck.scheduler.detect import JobEnv
from ddpcheck.scheduler.hostlist import compress_hostlist, same_host

SHAPE_MISMATCH = register(
    "job-shape-mismatch", "ddpcheck's flags disagree with the job's allocation",
    "--nodes (or --nproc-per-node) was written for a different allocation",
    "pass the allocation's values, or change the allocation to match the flags")
TOO_MANY_TASKS = register(
    "too-many-tasks-per-node", "the scheduler starts more than one ddpcheck per node",
    "srun inherited --ntasks-per-node (or -n) from the job, and every task starts torchrun",
    "start one ddpcheck per node: srun --ntasks-per-node=1 ddpcheck run ...")
TASKS_GPUS_MISMATCH = register(
    "tasks-gpus-mismatch", "Slurm tasks per node differ from GPUs per node",
    "--ntasks-per-node and --gres=gpu:N (or --gpus-per-node) were set to different numbers, "
    "so ranks launched by srun directly would share GPUs or leave some idle",
    "make --ntasks-per-node equal the GPUs per node, or use --ntasks-per-node=1 with torchrun")
NOT_PER_NODE = register(
    "not-launched-per-node", "ddpcheck runs on only one node of a multi-node allocation",
    "it was started in the batch script (or salloc shell) itself, not once per node by srun",
    "start it on every node: srun --ntasks-per-node=1 ddpcheck run ...")
NODE_RANK_INVALID = register(
    "node-rank-invalid", "this node's rank is outside 0..nodes-1",
    "NODE_RANK / PET_NODE_RANK / SLURM_NODEID was set for a larger job or by hand",
    "give every node a distinct rank below --nodes, or unset the variable")
NOT_IN_ALLOCATION = register(
    "node-not-in-allocation", "this host is not in the job's node list",
    "ddpcheck runs on a login node or another machine (e.g. an salloc shell without srun), "
    "or the scheduler's node names differ from the hostname",
    "start it on the job's nodes (srun --ntasks-per-node=1 ..., or pbsdsh -u / mpiexec --ppn 1)")




def shape_problems(job: JobEnv, nodes_flag: int | None, nproc_per_node: int | None = None,
                   gpus_per_replica: int = 1) -> list[Problem]:
    """Contradictions between the job's shape and ddpcheck's flags (None = flag not given).

    Parse errors are not repeated: they are in job.problems.
    """
    found = _node_count(job, nodes_flag, nproc_per_node)
    if not found:  # a wrong --nodes already explains an out-of-range rank
        found += _rank(job, nodes_flag)
    return (found + _launch(job, nodes_flag) + _membership(job)
            + _gpus(job, nproc_per_node, gpus_per_replica))


def _allocation(job: JobEnv) -> str:
    size = f"{job.nnodes} node{'' if job.nnodes == 1 else 's'}"
    listed = f" ({compress_hostlist(job.nodes)})" if job.nodes else ""
    if job.source == "slurm":
        verb = "the srun step runs on" if job.step_id else "the Slurm allocation has"
        return f"{verb} {size}{listed}"
    if job.source == "pbs":
        return f"the PBS job has {size}{listed}"
    return f"{job.origin('nnodes') or 'the environment'} says {size}"


def _node_count(job: JobEnv, flag: int | None, nproc: int | None) -> list[Problem]:
    out: list[Problem] = []
    n, tasks, hosts = job.nnodes, job.tasks_per_node, _hosts(job)
    batch_one = job.source == "slurm" and not job.step_id and flag == 1  # one node, legitimately
    if flag is not None and n is not None and flag != n and not batch_one:
        nodes = "node" if flag == 1 else "nodes"
        fix = {"slurm": f"pass --nodes {n}, or allocate {flag} {nodes} (sbatch --nodes={flag}) "
                        "and start ddpcheck with srun --ntasks-per-node=1",
               "pbs": f"pass --nodes {n}, or request {flag} nodes (qsub -l select={flag}:...)"}
        out.append(SHAPE_MISMATCH.problem(f"--nodes {flag} but {_allocation(job)}", hosts=hosts,
                                          fix=fix.get(job.source, f"pass --nodes {n}, or set "
                                                      f"{_var(job, 'nnodes')} to {flag}")))
    if job.source in ("torchrun", "env") and nproc and tasks and nproc != tasks:
        out.append(SHAPE_MISMATCH.problem(
            f"--nproc-per-node {nproc} but {job.origin('tasks_per_node')}", hosts=hosts,
            fix=f"pass --nproc-per-node {tasks}, or set {_var(job, 'tasks_per_node')} to {nproc}"))
    return out


def _rank(job: JobEnv, flag: int | None) -> list[Problem]:
    limit, rank = flag if flag is not None else job.nnodes, job.node_rank
    if rank is None or limit is None or rank < limit:
        return []
    what = f"--nodes {flag}" if flag is not None else _allocation(job)
    return [NODE_RANK_INVALID.problem(
        f"node rank {rank} ({job.origin('node_rank') or 'derived'}) but {what}: "
        f"valid ranks are 0-{limit - 1}", hosts=_hosts(job))]


def _launch(job: JobEnv, flag: int | None) -> list[Problem]:
    if job.source != "slurm":
        return []
    out: list[Problem] = []
    tasks, gpus, host = job.tasks_per_node, job.gpus_per_node, job.hostname or "this node"
    if job.step_id and tasks and tasks > 1:
        out.append(TOO_MANY_TASKS.problem(
            f"srun started {tasks} ddpcheck tasks on {host} ({job.origin('tasks_per_node')}); "
            "each would start its own torchrun", hosts=_hosts(job)))
    if tasks and tasks > 1 and gpus is not None and tasks != gpus:
        out.append(TASKS_GPUS_MISMATCH.problem(
            f"{tasks} Slurm tasks per node ({job.origin('tasks_per_node')}) but {gpus} GPUs "
            f"per node ({job.origin('gpus_per_node')})", hosts=_hosts(job),
            fix=f"if srun launches the ranks, set --ntasks-per-node={gpus} to match "
                f"--gres=gpu:{gpus}; with ddpcheck or torchrun, use --ntasks-per-node=1 and "
                f"--nproc-per-node {gpus}"))
    on_node = any(same_host(host, n) for n in job.nodes)
    if not job.step_id and (job.nnodes or 0) > 1 and flag != 1 and on_node:
        out.append(NOT_PER_NODE.problem(
            f"ddpcheck runs in the batch script on {host} only (no srun step), but "
            f"{_allocation(job)}", hosts=_hosts(job),
            fix=f"srun --ntasks-per-node=1 ddpcheck run --nodes {flag or job.nnodes} ..."))
    return out


def _membership(job: JobEnv) -> list[Problem]:
    host = job.hostname
    if not job.nodes or not host or any(same_host(host, n) for n in job.nodes):
        return []
    return [NOT_IN_ALLOCATION.problem(
        f"this host ({host}) is not in the {_label(job)} node list {compress_hostlist(job.nodes)}",
        hosts=(host,))]


def _gpus(job: JobEnv, nproc: int | None, per_replica: int) -> list[Problem]:
    gpus, per_replica = job.gpus_per_node, max(per_replica, 1)
    need = (nproc or 0) * per_replica
    if gpus is None or not nproc or need <= gpus:
        return []
    lower = f"lower --nproc-per-node to {gpus // per_replica}, or " if gpus >= per_replica else ""
    return [diagnoses.TOO_FEW_GPUS.problem(
        f"--nproc-per-node {nproc} x --gpus-per-replica {per_replica} needs {need} GPUs per "
        f"node but the {_label(job)} job gives this node {gpus} ({job.origin('gpus_per_node')})",
        hosts=_hosts(job), fix=f"{lower}request {need} GPUs per node (e.g. --gres=gpu:{need})")]


def _hosts(job: JobEnv) -> tuple[str, ...]:
    return (job.hostname,) if job.hostname else ()


def _label(job: JobEnv) -> str:
    return {"slurm": "Slurm", "pbs": "PBS"}.get(job.source, job.source)


def _var(job: JobEnv, field: str) -> str:
    return job.origin(field).split("=", 1)[0] or "the variable"
