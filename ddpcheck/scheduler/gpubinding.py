"""srun's per-task GPU binding: detect it, emulate it, and name what a script would hit.

Pure over the environment. Runs in the launcher (``--launch srun`` gives each task the
CUDA_VISIBLE_DEVICES srun would, ddpcheck.launcher.spawn.ranks) and in every worker (the node
stage's binding probe).

Slurm's documented variables (sbatch/srun man pages, OUTPUT ENVIRONMENT VARIABLES):
``SLURM_GPUS_PER_TASK`` ("only set if the --gpus-per-task option is specified";
``N`` or ``type:N``), ``SLURM_GPU_BIND`` (``--gpu-bind``: ``single:<tasks_per_gpu>``,
``per_task:<gpus_per_task>``, ``map_gpu:<list>``, ``closest``, ``none``),
``SLURM_STEP_GPUS`` / ``SLURM_JOB_GPUS`` (the GPU ids of the step / job). With per-task
binding each task gets a CUDA_VISIBLE_DEVICES of its own GPUs only, so a task sees
``torch.cuda.device_count() == 1`` (per GPU it got), and a script doing
``torch.cuda.set_device(LOCAL_RANK)`` (or SLURM_LOCALID) fails on every task but the first
with "CUDA error: invalid device ordinal".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ddpcheck.diagnoses import Problem, register

SRUN_DEVICE_ORDINAL = register(
    "srun-device-ordinal",
    "srun gives each task its own GPUs: set_device(LOCAL_RANK) fails on all but the first",
    "with --gpus-per-task or --gpu-bind, Slurm sets CUDA_VISIBLE_DEVICES per task to that "
    "task's GPUs only, so inside a task the devices are numbered from 0; a script that calls "
    "torch.cuda.set_device(LOCAL_RANK) (or SLURM_LOCALID) asks for a device the task does "
    "not see and fails with 'CUDA error: invalid device ordinal'",
    "in the script bind device 0 of the task (torch.cuda.set_device(0), or LOCAL_RANK % "
    "torch.cuda.device_count()); or give every task all of the node's GPUs (--gpus-per-node "
    "without --gpus-per-task, --gpu-bind=none) so LOCAL_RANK indexes them")

_COUNT = re.compile(r"^(?:[\w-]+:)?(\d+)$")


@dataclass(frozen=True)
class TaskBinding:
    """How srun binds GPUs to the tasks of a node: each task's share of the node's GPUs."""

    gpus_per_task: int = 0  # --gpus-per-task / per_task:N
    tasks_per_gpu: int = 0  # --gpu-bind=single:T (T tasks share one GPU)
    gpu_map: tuple[str, ...] = ()  # --gpu-bind=map_gpu:a,b,...
    source: str = ""  # the variables it was read from

    def task_gpus(self, node_gpus: Sequence[str], local_rank: int) -> list[str]:
        """The GPUs (entries of the node's list) srun gives task `local_rank`."""
        if self.gpu_map:
            return [self.gpu_map[local_rank % len(self.gpu_map)]]
        if self.tasks_per_gpu:
            index = local_rank // self.tasks_per_gpu
            return [node_gpus[index % len(node_gpus)]] if node_gpus else []
        k = self.gpus_per_task
        return list(node_gpus[local_rank * k:(local_rank + 1) * k])


def detect(env: Mapping[str, str]) -> TaskBinding | None:
    """srun's per-task binding from the job's variables, None when tasks share the node's."""
    bind = env.get("SLURM_GPU_BIND", "").strip()
    mode, _, arg = bind.partition(":")
    mode = mode.lower().split(",")[-1] if mode else ""
    if mode == "map_gpu" and arg:
        return TaskBinding(gpu_map=tuple(g.split("*")[0] for g in arg.split(",") if g),
                           source=f"SLURM_GPU_BIND={bind}")
    if mode == "single" and arg.isdigit() and int(arg) > 0:
        return TaskBinding(tasks_per_gpu=int(arg), source=f"SLURM_GPU_BIND={bind}")
    if mode == "per_task" and arg.isdigit() and int(arg) > 0:
        return TaskBinding(gpus_per_task=int(arg), source=f"SLURM_GPU_BIND={bind}")
    if mode == "none":
        return None
    m = _COUNT.match(env.get("SLURM_GPUS_PER_TASK", "").strip())
    if m and int(m.group(1)) > 0:
        return TaskBinding(gpus_per_task=int(m.group(1)),
                           source=f"SLURM_GPUS_PER_TASK={env['SLURM_GPUS_PER_TASK']}")
    return None


def node_gpus(env: Mapping[str, str], count: int) -> list[str]:
    """The node's GPUs as the launcher sees them: its CUDA_VISIBLE_DEVICES, else the step's
    or job's GPU ids, else indices 0..count-1."""
    for name in ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        value = env.get(name, "").strip()
        if value:
            return [v.strip() for v in value.split(",") if v.strip()]
    return [str(i) for i in range(count)]


def task_visible_devices(env: Mapping[str, str], local_rank: int, count: int) -> str | None:
    """CUDA_VISIBLE_DEVICES srun would give task `local_rank`, None without per-task binding."""
    binding = detect(env)
    if binding is None:
        return None
    return ",".join(binding.task_gpus(node_gpus(env, count), local_rank))


def ordinal_problem(local_rank: int, visible: int, gpus_per_replica: int,
                    env: Mapping[str, str]) -> list[Problem]:
    """srun-device-ordinal when this task sees too few devices for cuda:LOCAL_RANK*K.

    The script's likely call is set_device(LOCAL_RANK) (torch's DDP examples); the task's
    CUDA_VISIBLE_DEVICES is named as the fact, with what Slurm read it from.
    """
    wanted = local_rank * gpus_per_replica
    if wanted < visible:
        return []
    binding = detect(env)
    why = f" ({binding.source})" if binding else ""
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    shown = "unset" if cvd is None else f"={cvd}"
    return [SRUN_DEVICE_ORDINAL.problem(
        f"task with SLURM_LOCALID={local_rank} sees {visible} GPU(s) (CUDA_VISIBLE_DEVICES"
        f"{shown}{why}): torch.cuda.set_device({wanted}) from LOCAL_RANK would fail with "
        "'CUDA error: invalid device ordinal'; ddpcheck bound the task's device 0")]
