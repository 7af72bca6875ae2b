"""An invalid device ordinal under srun's per-task GPU binding: the binding, named.

Runs wherever ``ddpcheck explain`` runs (a refinement over the problems found; no torch).
Part of the Slurm family: ``families/slurm.py``'s ``refine`` calls ``per_task_gpus``. The
code and its fix are the run's own (``scheduler/gpubinding.py``, srun-device-ordinal).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.explain.causality import Explained
from ddpcheck.explain.codes import INVALID_DEVICE_ORDINAL
from ddpcheck.explain.reader import Record
from ddpcheck.scheduler.gpubinding import SRUN_DEVICE_ORDINAL

# srun's per-task GPU binding as a command line, a batch script or an environment dump shows
# it. srun(1) (21.08+): --gpus-per-task "will implicitly set --gpu-bind=per_task:<N>" (26.05:
# --tres-bind=gres/gpu:per_task:<N>), --ntasks-per-gpu "--gpu-bind=single:<ntasks>"; srun
# reads SLURM_GPUS_PER_TASK (sbatch's --gpus-per-task) as --gpus-per-task; any --gpu-bind but
# none binds. The gres/gpu plugin then sets each task's CUDA_VISIBLE_DEVICES to its own GPUs
# (scheduler/gpubinding.py), numbered from 0 inside the task.
PER_TASK_GPUS = re.compile(
    r"(?:^\s*#SBATCH\b|\b(?:srun|sbatch|salloc)\b).*?(?:--gpus-per-task[= ]\S|"
    r"--ntasks-per-gpu[= ]\d|--gpu-bind[= ](?!(?:verbose,)?none\b)\w|"
    r"--tres-bind[= ]\S*gres/gpu:(?!(?:verbose,)?none\b)\w)|"
    r"\bSLURM_(?:GPUS_PER_TASK|NTASKS_PER_GPU)=\S")


def per_task_gpus(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """An invalid device ordinal in a job whose srun binds each task to its own GPUs is that
    binding (the index is LOCAL_RANK, the task sees only device 0)."""
    if not any(e.problem.code == INVALID_DEVICE_ORDINAL.code for e in found):
        return found
    bind = next((r for r in records if PER_TASK_GPUS.search(r.text)), None)
    if bind is None:
        return found
    out = []
    for e in found:
        # (a checkpoint's saved device is torch.load's map_location, whatever the binding)
        if e.problem.code == INVALID_DEVICE_ORDINAL.code and \
                "deserialize" not in e.problem.observed:
            p = e.problem
            srun = SRUN_DEVICE_ORDINAL.problem(
                f"{p.observed} | srun binds each task to its own GPUs: "
                f"{bind.text.strip()[:160]} [{bind.source}:{bind.lineno}]",
                ranks=p.ranks, hosts=p.hosts)
            if p.consequence_of:
                srun = srun.where(consequence_of=p.consequence_of)
            e = replace(e, problem=srun, evidence=(*e.evidence, f"{bind.source}:{bind.lineno}"))
        out.append(e)
    return out
