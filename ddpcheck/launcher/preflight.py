"""Node preflight: what must hold on this node before torchrun starts (seconds, no torch).

Runs in the launcher on every node. A problem found here stops the run before torchrun,
because each of them would otherwise cost the user a hang or a cryptic error later:
interface variables naming unusable interfaces, fewer GPUs than the job needs,
a malformed CUDA_VISIBLE_DEVICES.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from ddpcheck.diagnoses import Problem
from ddpcheck.launcher.config import RunConfig
from ddpcheck.node import devices, gpu, gpustate
from ddpcheck.node.diskspace import space_problems
from ddpcheck.node.interfaces import interfaces
from ddpcheck.node.netprobe import resolve
from ddpcheck.node.socketifname import check_socket_ifname
from ddpcheck.stages import PREFLIGHT

IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
CPU_RANKS = 2  # --nproc-per-node auto without GPUs


def auto_nproc(gpus: list[gpu.GpuInfo] | None = None,
               env: Mapping[str, str] | None = None) -> int:
    """One rank per device CUDA gives this node, else 2 CPU ranks.

    CUDA_VISIBLE_DEVICES counts as CUDA reads it (a MIG list is one device). A node whose
    nvidia-smi fails lists no GPUs here; preflight then stops the run (gpu-driver-failed).
    """
    found = gpu.list_gpus() if gpus is None else gpus
    cvd = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    count = gpustate.cuda_device_count(found, cvd) if found else 0
    return count or CPU_RANKS


def endpoint_ip(cfg: RunConfig) -> str | None:
    """The rendezvous host's IPv4 address, or None on a single-node run."""
    if cfg.rdzv_endpoint is None or cfg.nodes == 1:
        return None
    res = resolve(cfg.rdzv_endpoint[0])
    return res.addresses[0] if res.ok and res.addresses else None


def node_preflight(cfg: RunConfig, env: Mapping[str, str], nproc: int) -> list[Problem]:
    """Every node-local problem that must stop the run before torchrun starts."""
    node = socket.gethostname()
    problems: list[Problem] = []
    ifaces = interfaces()
    ep = endpoint_ip(cfg)
    for var in IFNAME_VARS:
        if env.get(var):
            problems += check_socket_ifname(var, env[var], ifaces, ep, node=node)
    problems += _gpu_problems(cfg, env, nproc)
    if cfg.checkpoint_dir is not None:  # before anything is written: the space one needs
        problems += space_problems(cfg.checkpoint_dir, cfg.checkpoint_size, node)
    return [p.where(stage=p.stage or PREFLIGHT, hosts=p.hosts or (node,)) for p in problems]


def _gpu_problems(cfg: RunConfig, env: Mapping[str, str], nproc: int) -> list[Problem]:
    # A broken driver or a lost GPU stops the run whatever the backend: the node is not fit
    # for GPU training, and auto mode must never turn it into a quiet CPU/gloo READY.
    health = gpustate.check_node_gpus(gpu.run_nvidia_smi(("-L",)), gpustate.device_files(),
                                      kernel_version=gpustate.kernel_driver_version(),
                                      cpu_run=cfg.backend == "gloo")
    if cfg.backend == "gloo":
        return health
    gpus = gpu.list_gpus()
    if not gpus:
        return health  # no GPUs: the worker's node stage compares with torch's view
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    problems = health + devices.check_cuda_visible_devices(cvd, gpus)
    problems += devices.check_device_plan(nproc, cfg.gpus_per_replica,
                                      gpustate.cuda_device_count(gpus, cvd),
                                      cuda_visible_devices=cvd)
    return problems
