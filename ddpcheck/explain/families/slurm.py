"""Slurm step and task-layout errors printed by srun (src/srun, slurm_errno strings)."""

from __future__ import annotations

from ddpcheck.explain.codes import SLURM_STEP_REJECTED
from ddpcheck.explain.matching import pattern

PATTERNS = [
    pattern(SLURM_STEP_REJECTED,
            r"srun: error: Unable to create step for job \S+: (?P<why>.+)$",
            "ddpcheck run --nodes N inside the same allocation (one srun task per node)",
            cause="srun asked for a layout the allocation cannot give: {why}"),
]
