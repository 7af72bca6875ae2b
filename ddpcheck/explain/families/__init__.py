"""One module per failure family, each a list of matchers (``PATTERNS``), in match order."""

from __future__ import annotations

from ddpcheck.explain.families import (
    ddp,
    device,
    launcher,
    nccl,
    network,
    own_report,
    rendezvous,
    slurm,
    watchdog,
)
from ddpcheck.explain.matching import Pattern

FAMILIES = (own_report, rendezvous, network, nccl, watchdog, device, ddp, launcher, slurm)
PATTERNS: tuple[Pattern, ...] = tuple(p for f in FAMILIES for p in f.PATTERNS)
