"""Start this node's ranks as ``torch.multiprocessing.spawn`` does, and watch them.

Runs in the launcher with ``--launch spawn`` or ``srun``: no torchrun agent, so this
process starts one per-rank wrapper (``python -m ddpcheck.worker``, the same one torchrun
starts) for each local rank, with the environment a spawn-style job gives its processes:
RANK = first rank + local rank, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/MASTER_PORT, and the init
method (WorkerSettings.init_method, read by ddpcheck.worker.initmethod). It watches them under
the same deadlines as torchrun (ddpcheck.launcher.launch): the run deadline, the end grace
once a rank logged its end, stopped ranks; and, as mp.spawn's ``ProcessContext.join`` does
(torch/multiprocessing/spawn.py: when a process exits with a non-zero code, SIGTERM to the
others, SIGKILL after a grace period), it ends the other local ranks when one fails. The
wrappers' exit files and rank files feed the same postmortem as under torchrun.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO, Callable

from ddpcheck.launcher.launch import LaunchOutcome, watch
from ddpcheck.launcher.spawn.launchspec import LaunchSpec
from ddpcheck.scheduler import gpubinding
from ddpcheck.worker.settings import WorkerSettings

FAILED_GRACE_S = 2.0  # a rank failed: the others get this long before SIGTERM (mp.spawn)


def worker_argv() -> list[str]:
    return [sys.executable, "-m", "ddpcheck.worker"]


def rank_env(base: Mapping[str, str], spec: LaunchSpec, local_rank: int,
             init_url: str) -> dict[str, str]:
    """The environment of one spawned rank (pure): what mp.spawn's job sets before
    init_process_group, and nothing of torchrun's."""
    env = {k: v for k, v in base.items() if not k.startswith("TORCHELASTIC_")}
    for name in ("GROUP_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE"):
        env.pop(name, None)
    env.update({
        "RANK": str(spec.first_rank + local_rank),
        "WORLD_SIZE": str(spec.world_size),
        "LOCAL_RANK": str(local_rank),
        "LOCAL_WORLD_SIZE": str(spec.nproc),
        "GROUP_RANK": str(spec.node_rank),  # ddpcheck's own record of the node
    })
    # the worker settings, through their contract: the world this launch forms, and how
    settings = replace(WorkerSettings.from_env(base), init_method=init_url,
                       expected_world_size=spec.world_size)
    env.update(settings.to_env())
    if spec.master is not None:
        env["MASTER_ADDR"], env["MASTER_PORT"] = spec.master[0], str(spec.master[1])
    return srun_task(env, spec, local_rank) if spec.launch == "srun" else env


def srun_task(env: dict[str, str], spec: LaunchSpec, local_rank: int) -> dict[str, str]:
    """The same rank as ``srun --ntasks-per-node=K`` starts it: Slurm's task variables, no
    RANK (the worker then reads its place from SLURM_PROCID, ddpcheck.scheduler.srunworld),
    and with per-task GPU binding (SLURM_GPUS_PER_TASK, SLURM_GPU_BIND) the task's own
    CUDA_VISIBLE_DEVICES (ddpcheck.scheduler.gpubinding)."""
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(name, None)
    env.update({
        "SLURM_PROCID": str(spec.first_rank + local_rank),
        "SLURM_LOCALID": str(local_rank),
        "SLURM_NTASKS": str(spec.world_size),
        "SLURM_STEP_NUM_TASKS": str(spec.world_size),
        "SLURM_NODEID": str(spec.node_rank),
        # this node's count at its own index: what srunworld reads for LOCAL_WORLD_SIZE
        "SLURM_STEP_TASKS_PER_NODE": f"{spec.nproc}(x{spec.node_rank + 1})",
    })
    # srun --gpus-per-task / --gpu-bind: each task sees only its own GPUs, as srun sets them
    binding = gpubinding.detect(env)
    if binding is not None:
        count = spec.nproc * max(binding.gpus_per_task, 1)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(
            binding.task_gpus(gpubinding.node_gpus(env, count), local_rank))
    return env


def run_spawned(envs: list[dict[str, str]], results_dir: Path, deadline: float, log: IO[str],
                on_tick: Callable[[], None] | None = None) -> LaunchOutcome:
    """Start one wrapper per env, watch them to their end or the deadline; never hangs."""
    start = time.monotonic()
    # cwd: the results directory, so a checkout in the current directory never shadows
    # the installed probes (as for torchrun's workers).
    procs = [subprocess.Popen(worker_argv(), env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True, cwd=results_dir) for env in envs]
    outcome = LaunchOutcome(None, 0.0, launcher="the spawned ranks")
    watch(procs, results_dir, len(procs), deadline, outcome, on_tick, FAILED_GRACE_S)
    codes = [p.wait() for p in procs]
    outcome.returncode = next((c for c in codes if c != 0), 0)
    outcome.elapsed = time.monotonic() - start
    return outcome
