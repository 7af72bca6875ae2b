"""Slurm step and task-layout errors printed by srun (src/srun, slurm_errno strings)."""

from __future__ import annotations

from ddpcheck.explain.codes import SLURM_JOB_REJECTED, SLURM_STEP_REJECTED, SLURM_WITHOUT_SRUN
from ddpcheck.explain.matching import pattern

PATTERNS = [
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
