"""Node health before any rank runs: GPUs, NVLink/NVSwitch, Xid events, InfiniBand.

Runs in the launcher's preflight on every node, without torch (a CPU-only torch still sees
it), and only when nvidia-smi lists GPUs and the backend is not gloo. It reads nvidia-smi's
query interface (``node.gpuquery``, judged by ``node.gpuhealth``), ``nvidia-smi nvlink -s``
and the Fabric Manager (``node.nvlinkfabric``), the kernel log (``node.xid``) and
/sys/class/infiniband (``node.infiniband``). Every call has a deadline, and all of them
share HEALTH_BUDGET seconds. A fault that loses the job (memory errors, a fatal Xid, NVLink
down, no Fabric Manager, leftover processes, NCCL_IB_HCA naming nothing) is a problem; a
finding that only costs speed (throttling, a slow PCIe link or port, no GPUDirect RDMA) is
shown in the report's notes, and fails the run with ``--strict-health``
(DDPCHECK_STRICT_HEALTH=1). A source that cannot be read is said so in the notes.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass

from ddpcheck.diagnoses import Problem
from ddpcheck.launcher.config import RunConfig
from ddpcheck.node import devices, gpu, gpuhealth, gpuquery, infiniband, nvlinkfabric, xid
from ddpcheck.node.findings import Finding, Unread

HEALTH_BUDGET = 20.0  # seconds for every health read of this node together
CALL_TIMEOUT = 5.0  # seconds for one command (nvidia-smi, dmesg, systemctl)
STRICT_HINT = "--strict-health or DDPCHECK_STRICT_HEALTH=1 makes it fail the run"


@dataclass(frozen=True)
class HealthSources:
    """Where health is read from; tests point these at recorded outputs and a fake sysfs."""

    runner: gpu.Runner = gpu.subprocess_runner
    infiniband: str = infiniband.SYSFS
    sys_module: str = "/sys/module"
    dev: str = "/dev"
    nvswitch_proc: str = "/proc/driver/nvidia-nvswitch"
    budget: float = HEALTH_BUDGET


@dataclass(frozen=True)
class NodeHealth:
    """What preflight does with this node's health: problems fail, notes are shown."""

    problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = ()


class _Deadline:
    def __init__(self, budget: float) -> None:
        self.end = time.monotonic() + budget

    def call_timeout(self) -> float:
        return max(0.0, min(CALL_TIMEOUT, self.end - time.monotonic()))


def node_health(cfg: RunConfig, env: Mapping[str, str],
                src: HealthSources = HealthSources()) -> NodeHealth:
    """This node's health findings, split into problems and shown notes."""
    if cfg.backend == "gloo":
        return NodeHealth()
    listed = gpu.list_gpus(src.runner)
    if not listed:
        return NodeHealth()  # no GPUs: nothing of GPU health to read (gpustate says why)
    findings, notes, unread = read_health(env, src)
    return split(findings, notes, unread, cfg.strict_health, socket.gethostname())


def read_health(env: Mapping[str, str], src: HealthSources
                ) -> tuple[list[Finding], list[str], list[Unread]]:
    """Every reader in turn, each with what is left of the budget."""
    clock = _Deadline(src.budget)
    found: list[Finding] = []
    notes: list[str] = []
    unread: list[Unread] = []

    def timeout(what: str) -> float | None:
        left = clock.call_timeout()
        if left <= 0:
            unread.append(Unread(what, f"the node-health deadline of {src.budget:g} s passed"))
            return None
        return left

    gpus: list[gpuquery.GpuHealth] = []
    if (t := timeout("nvidia-smi --query-gpu")) is not None:
        gpus, why = gpuquery.read_gpus(src.runner, t)
        if why:
            unread.append(Unread("nvidia-smi --query-gpu", why))
    mine = job_gpus(env.get("CUDA_VISIBLE_DEVICES"), gpus)
    if mine is not None:  # another job's GPUs on a shared node are not this job's problem
        gpus = [g for g in gpus if g.index in mine]
    if gpus and (t := timeout("nvidia-smi --query-compute-apps")) is not None:
        apps, why = gpuquery.read_apps(src.runner, t)
        if why:
            unread.append(Unread("nvidia-smi --query-compute-apps", why))
        found += gpuhealth.check_gpus(gpus, apps, apps_read=not why)
    switches = nvlinkfabric.nvswitch_devices(src.dev, src.nvswitch_proc)
    if (t := timeout("nvidia-smi nvlink -s")) is not None:
        links = [g for g in nvlinkfabric.read_nvlinks(src.runner, t) or []
                 if mine is None or g.index in mine]
        found += nvlinkfabric.check_nvlinks(links, bool(switches))
    if switches and (t := timeout("Fabric Manager state")) is not None:
        fm, fm_unread = nvlinkfabric.check_fabric_manager(
            nvlinkfabric.fabric_manager_state(src.runner, t), len(switches))
        found, unread = found + fm, unread + fm_unread
    if (t := timeout("kernel log for Xid errors")) is not None:
        events, xid_unread = xid.kernel_xids(t, src.runner)
        buses = {xid.short_bus(g.bus_id) for g in gpus if g.bus_id}
        if mine is not None and buses:
            notes += [f"Xid {e.xid} on PCI {e.bus}, a GPU this job does not use "
                      "(CUDA_VISIBLE_DEVICES)" for e in events if xid.short_bus(e.bus) not in buses]
            events = [e for e in events if xid.short_bus(e.bus) in buses]
        xid_found, xid_notes = xid.check_xids(events, _names(gpus))
        found, notes, unread = found + xid_found, notes + xid_notes, unread + xid_unread
    ports = infiniband.read_ports(src.infiniband)
    found += infiniband.check_ports(ports, env)
    found += infiniband.check_gpudirect(ports, infiniband.peermem_loaded(src.sys_module))
    return found, notes, unread


def job_gpus(cuda_visible_devices: str | None, gpus: list[gpuquery.GpuHealth]
             ) -> set[int] | None:
    """The nvidia-smi indices of the GPUs this job's ranks get; None: all of them.

    CUDA_VISIBLE_DEVICES as CUDA reads it (``devices.parse_cuda_visible_devices``): indices,
    or GPU- UUIDs (a unique prefix is enough). MIG- UUIDs name a slice, not a board: all.
    """
    vd = devices.parse_cuda_visible_devices(cuda_visible_devices)
    if not vd.is_set or (vd.effective and vd.effective[0].startswith("MIG-")):
        return None
    if not vd.uses_uuids:
        return set(vd.indices)
    return {g.index for g in gpus for e in vd.effective if g.uuid.startswith(e)}


def _names(gpus: list[gpuquery.GpuHealth]) -> dict[str, str]:
    return {xid.short_bus(g.bus_id): g.named() for g in gpus if g.bus_id}


def split(findings: list[Finding], notes: list[str], unread: list[Unread], strict: bool,
          host: str) -> NodeHealth:
    """Problems fail the run; performance-only findings are shown unless strict."""
    problems, shown = [], []
    for f in findings:
        p = f.problem.where(stage="preflight", hosts=(host,))
        if f.performance_only and not strict:
            shown.append(f"health warning {p.code} on {host}: {p.observed}. Fix: {p.fix} "
                         f"(performance only: {STRICT_HINT})")
        else:
            problems.append(p)
    shown += [f"health note on {host}: {n}" for n in notes]
    shown += [u.text() for u in unread]
    return NodeHealth(tuple(problems), tuple(shown))
