"""The settings map of the job's environment (Slurm, PBS) for the run config, with sources.

Runs in the launcher. Maps the scheduler's view of the job (ddpcheck.scheduler.detect)
onto config settings, each with the variable it came from, so flags and DDPCHECK_*
variables override it; contradictions between the two become problems in the report, not crashes.
"""

from __future__ import annotations

from typing import Any

from ddpcheck.parsing import UsageError
from ddpcheck.parsing import endpoint as parse_endpoint
from ddpcheck.scheduler.detect import JobEnv

DEFAULT_PORT = 29500  # torchrun's default rendezvous port (torch/distributed/run.py)


def scheduler_settings(job: JobEnv) -> dict[str, tuple[Any, str]]:
    """{setting: (value, source)} from the scheduler's view of the job (``detect``'s JobEnv)."""
    if job.source not in ("slurm", "pbs"):
        return {}  # torchrun/MASTER_* variables describe a job ddpcheck is not running inside
    if job.invalid:  # a malformed job variable is bad input, like a malformed flag
        raise UsageError(f"{job.invalid[0]} (from the {job.source} job's environment)")
    out: dict[str, tuple[Any, str]] = {}
    if job.nnodes:
        out["nodes"] = (job.nnodes, job.origin("nnodes") or job.source)
    if job.node_rank is not None:
        out["node_rank"] = (job.node_rank, job.origin("node_rank") or job.source)
    if job.endpoint:
        text = job.endpoint if ":" in job.endpoint else f"{job.endpoint}:{DEFAULT_PORT}"
        out["rdzv_endpoint"] = (parse_endpoint(text), job.origin("endpoint") or job.source)
    if job.job_id:
        out["rdzv_id"] = (f"ddpcheck-{job.job_id}", job.origin("job_id") or job.source)
    return out
