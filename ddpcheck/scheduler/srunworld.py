"""The torch.distributed environment of a rank started by ``srun`` without torchrun.

Runs inside every worker (pure over the environment). Slurm starts one process per task and
sets SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID and the step's node list, but
no MASTER_ADDR/MASTER_PORT: the first node of the step hosts the store, on MASTER_PORT when
the job sets it, else on a port derived from the job id (so concurrent jobs sharing a node
do not collide).
"""

from __future__ import annotations

from collections.abc import Mapping

from ddpcheck.scheduler.hostlist import expand_slurm_nodelist, parse_slurm_tasks_per_node

PORT_BASE, PORT_SPAN = 20000, 10000


def is_srun_rank(env: Mapping[str, str]) -> bool:
    """A task of an srun step, not a torchrun worker (torchrun sets RANK itself)."""
    return "RANK" not in env and bool(env.get("SLURM_PROCID", "").strip())


def torch_env(env: Mapping[str, str]) -> dict[str, str]:
    """RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR/PORT."""
    nodes = expand_slurm_nodelist(env.get("SLURM_STEP_NODELIST") or env["SLURM_JOB_NODELIST"])
    node = int(env.get("SLURM_NODEID", "0"))
    per_node = parse_slurm_tasks_per_node(env.get("SLURM_STEP_TASKS_PER_NODE")
                                          or env.get("SLURM_TASKS_PER_NODE", "1"))
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or "0"
    port = env.get("MASTER_PORT") or str(PORT_BASE + int(job) % PORT_SPAN)
    return {
        "RANK": env["SLURM_PROCID"],
        "WORLD_SIZE": env.get("SLURM_STEP_NUM_TASKS") or env["SLURM_NTASKS"],
        "LOCAL_RANK": env.get("SLURM_LOCALID", "0"),
        "LOCAL_WORLD_SIZE": str(per_node[min(node, len(per_node) - 1)]),
        "GROUP_RANK": str(node),
        "MASTER_ADDR": env.get("MASTER_ADDR") or nodes[0],
        "MASTER_PORT": port,
    }
