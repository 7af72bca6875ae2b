"""This node's facts for ``ddpcheck env``: software, GPUs, interfaces, shared memory.

Runs in the launcher. Reads versions from package metadata instead of importing torch, so it
answers in well under a second; secrets never appear (see envinfo).
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
from importlib import metadata
from typing import Any

from ddpcheck.node import gpu
from ddpcheck.node.interfaces import interfaces
from ddpcheck.node.netprobe import resolve


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def node_summary() -> dict[str, Any]:
    """Facts that matter to distributed training on this node, JSON-serialisable."""
    gpus = gpu.list_gpus()
    host = socket.gethostname()
    shm = shutil.disk_usage("/dev/shm") if os.path.isdir("/dev/shm") else None
    return {
        "hostname_resolves_to": list(resolve(host).addresses),
        "arch": platform.machine(),
        "cpus": os.cpu_count(),
        "torch": _version("torch"),
        "nvidia_nccl": _version("nvidia-nccl-cu12") or _version("nvidia-nccl-cu11"),
        "gpus": None if gpus is None else [
            {"index": g.index, "name": g.name, "uuid": g.uuid} for g in gpus],
        "interfaces": {i.name: {"up": i.is_up, "ipv4": [f"{a.address}/{a.prefixlen}"
                                                        for a in i.ipv4], "mtu": i.mtu}
                       for i in interfaces()},
        "dev_shm_free_bytes": shm.free if shm else None,
    }
