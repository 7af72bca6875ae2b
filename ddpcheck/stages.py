"""The stages, in the order they run, and the marker that puts a probe in one.

Shared by both sides: the launcher lists and selects stages, the worker plugin orders probes.
"""

from __future__ import annotations

from typing import Callable, TypeVar

import pytest

F = TypeVar("F", bound=Callable[..., object])

MARKER = "ddpcheck_stage"

# The launcher's own stage, before any rank starts: no probe is in it, so it is not one of
# STAGES (what ranks run and --stages selects); a report's stages are REPORT_STAGES.
PREFLIGHT = "preflight"
PREFLIGHT_DOC = "this node's own checks before any rank starts (network, ports, limits, GPUs)"

STAGES: dict[str, str] = {
    "node": "this node's torch build, GPUs, NCCL and shared memory",
    "rendezvous": "the world forms and every rank runs the same stack",
    "collectives": "all_reduce, broadcast, all_gather, reduce_scatter, send/recv: exact",
    "bandwidth": "all-reduce bandwidth sweep over message sizes (algbw, busbw)",
    "ddp": "DistributedDataParallel trains in lockstep with a single-process reference",
    "placement": "the rank-to-device plan for --gpus-per-replica is valid and runs",
    "checkpoint": "a checkpoint saved by rank 0 loads on every rank (--checkpoint-dir)",
}

REPORT_STAGES: dict[str, str] = {PREFLIGHT: PREFLIGHT_DOC, **STAGES}


def stage(name: str) -> Callable[[F], F]:
    """Mark a probe as belonging to a stage: ``@stage("collectives")``."""
    if name not in STAGES:
        raise ValueError(f"unknown stage {name!r}; stages: {', '.join(STAGES)}")
    return pytest.mark.ddpcheck_stage(name)  # type: ignore[return-value]


def parse_stages(text: str) -> tuple[str, ...]:
    """Parse a comma list of stage names (``all`` for every stage), in run order."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names or names == ["all"]:
        return tuple(STAGES)
    unknown = [n for n in names if n not in STAGES]
    if unknown:
        raise ValueError(f"unknown stage {unknown[0]!r} (stages: {', '.join(STAGES)})")
    return tuple(s for s in STAGES if s in names)
