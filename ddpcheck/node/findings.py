"""A node-health finding: a Problem, and whether it only costs speed (shown, not failed).

Pure records, no I/O; shared by the node-health readers (``gpuquery``/``gpuhealth``,
``nvlinkfabric``, ``xid``, ``infiniband``) and the launcher's ``nodehealth``, which fails the
run on the problems and shows the performance-only findings unless ``--strict-health``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from ddpcheck.diagnoses import Problem


@dataclass(frozen=True)
class Finding:
    """One health fact about this node, as the problem it would be."""

    problem: Problem
    performance_only: bool = False  # lowers speed only: shown unless --strict-health


@dataclass(frozen=True)
class Unread:
    """A source that could not be read: said in the report, never taken for healthy."""

    source: str  # e.g. "kernel log (dmesg)"
    why: str  # e.g. "read kernel buffer failed: Operation not permitted"

    def text(self) -> str:
        return f"node health: {self.source} not readable ({self.why}); not checked"


def slurm_node(env: Mapping[str, str] | None = None) -> str:
    """The node's name as Slurm knows it (SLURMD_NODENAME), else the short host name."""
    env = os.environ if env is None else env
    return env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def drain_line(reason: str, node: str | None = None) -> str:
    """The Slurm command that takes this node out of service until it is mended."""
    return (f'scontrol update nodename={node or slurm_node()} state=drain '
            f'reason="{reason}"')
