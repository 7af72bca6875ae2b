"""One module per failure family, each a list of matchers (``PATTERNS``), in match order."""

from __future__ import annotations

from ddpcheck.explain.families import (
    addresses,
    ddp,
    device,
    filesystems,
    launcher,
    memory,
    nccl,
    ncclresult,
    ncclshm,
    network,
    own_report,
    rendezvous,
    slurm,
    watchdog,
    workers,
    wrappers,
)
from ddpcheck.explain.matching import Pattern

FAMILIES = (own_report, rendezvous, network, ncclshm, nccl, watchdog, device, ddp, memory, workers,
            launcher, slurm, addresses, wrappers, ncclresult, filesystems)
PATTERNS: tuple[Pattern, ...] = (*(p for f in FAMILIES for p in f.PATTERNS),
                                 *memory.SHELL_KILLED)
