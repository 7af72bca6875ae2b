"""InfiniBand/RoCE ports for NCCL: port state and rate, NCCL_IB_HCA, GPUDirect RDMA.

Runs in the launcher's preflight (``ddpcheck.launcher.nodehealth``); no torch. Reads
``/sys/class/infiniband/DEV/ports/N/{state,phys_state,rate,link_layer}`` (the files
``ibstatus`` prints: "4: ACTIVE", "100 Gb/sec (4X EDR)") and whether the GPUDirect RDMA
module is loaded (``nvidia_peermem``, or the older ``nv_peer_mem``, in /sys/module).
NCCL_IB_HCA follows NCCL's documented syntax (https://docs.nvidia.com/deeplearning/nccl/
user-guide/docs/env.html#nccl-ib-hca): comma-separated ``dev[:port]`` entries matched as
prefixes, ``=`` for exact names, ``^`` to exclude. NCCL skips ports that are not ACTIVE
and, without GPUDirect RDMA, stages GPU buffers through host memory: both cost speed,
so they are performance-only unless the user's NCCL_IB_HCA selected the port.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ddpcheck.diagnoses import register
from ddpcheck.node.findings import Finding

SYSFS = "/sys/class/infiniband"
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")

IB_PORT_DOWN = register(
    "ib-port-down", "an InfiniBand/RoCE port is not ACTIVE",
    "the port has no link (cable, switch port) or no subnet manager brought it up (state "
    "INIT); NCCL skips it, so the job has fewer network rails, or none",
    "check the cable and switch port (ibstat DEV PORT), and that a subnet manager runs; or "
    "leave the port out of NCCL_IB_HCA")
IB_PORT_SLOW = register(
    "ib-port-slow", "an InfiniBand/RoCE port runs at a lower rate than the node's others",
    "the port trained at a lower speed or width than its peers (a bad cable or transceiver, a "
    "switch port setting); traffic through it is slower",
    "reseat or replace the cable, check the switch port (ibstat DEV PORT shows Rate)")
NCCL_IB_HCA_UNKNOWN = register(
    "nccl-ib-hca-unknown", "NCCL_IB_HCA names an InfiniBand device or port this node lacks",
    "NCCL uses only the devices NCCL_IB_HCA selects; one that does not exist selects "
    "nothing, and NCCL falls back to sockets or fails",
    "set NCCL_IB_HCA to devices listed in /sys/class/infiniband (ibv_devices), or unset it")
GPUDIRECT_RDMA_MISSING = register(
    "gpudirect-rdma-missing", "InfiniBand is present but the GPUDirect RDMA module is not loaded",
    "without nvidia_peermem NCCL cannot register GPU memory with the NIC (unless DMA-BUF is "
    "available: NCCL 2.13+, Linux 5.12+, the open kernel modules), so every transfer is "
    "staged through host memory",
    "modprobe nvidia_peermem (shipped with the driver since R470) and add it to "
    "/etc/modules-load.d/")


@dataclass(frozen=True)
class IbPort:
    device: str
    port: int
    state: str  # "ACTIVE", "DOWN", "INIT", ...
    rate_gbps: float | None = None
    rate_text: str = ""
    link_layer: str = ""

    @property
    def name(self) -> str:
        return f"{self.device}:{self.port}"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def read_ports(root: str = SYSFS) -> list[IbPort]:
    """Every port under /sys/class/infiniband; none when the directory is absent."""
    ports = []
    base = Path(root)
    for dev in sorted(base.iterdir()) if base.is_dir() else []:
        for pdir in sorted((dev / "ports").glob("*"), key=lambda p: p.name):
            if not pdir.name.isdigit():
                continue
            state = _read(pdir / "state").split(":")[-1].strip()
            rate = _read(pdir / "rate")
            try:
                gbps = float(rate.split()[0]) if rate else None
            except ValueError:
                gbps = None
            ports.append(IbPort(dev.name, int(pdir.name), state, gbps, rate,
                                _read(pdir / "link_layer")))
    return ports


@dataclass(frozen=True)
class HcaSelection:
    exclude: bool
    exact: bool
    entries: tuple[tuple[str, int | None], ...]  # (device, port or None)


def parse_nccl_ib_hca(value: str) -> HcaSelection:
    text = value.strip()
    exclude = text.startswith("^")
    text = text.lstrip("^")
    exact = text.startswith("=")
    text = text.lstrip("=")
    entries = []
    for item in (e.strip() for e in text.split(",") if e.strip()):
        dev, _, port = item.partition(":")
        entries.append((dev, int(port) if port.isdigit() else None))
    return HcaSelection(exclude, exact, tuple(entries))


def _matches(sel: HcaSelection, dev: str, port: IbPort) -> bool:
    return (port.device == dev) if sel.exact else port.device.startswith(dev)


def selected(ports: Sequence[IbPort], sel: HcaSelection | None) -> list[IbPort]:
    """The ports NCCL would consider under NCCL_IB_HCA (all of them without it)."""
    if sel is None or not sel.entries:
        return list(ports)
    hit = [p for p in ports if any(_matches(sel, d, p) and n in (None, p.port)
                                   for d, n in sel.entries)]
    return [p for p in ports if p not in hit] if sel.exclude else hit


def check_ports(ports: Sequence[IbPort], env: Mapping[str, str]) -> list[Finding]:
    """NCCL_IB_HCA against the ports, ports not ACTIVE, ports slower than their peers."""
    hca = env.get("NCCL_IB_HCA", "").strip()
    sel = parse_nccl_ib_hca(hca) if hca else None
    out = []
    if sel and not sel.exclude:
        for dev, n in sel.entries:
            if not any(_matches(sel, dev, p) and n in (None, p.port) for p in ports):
                have = ", ".join(p.name for p in ports) or "none"
                out.append(Finding(NCCL_IB_HCA_UNKNOWN.problem(
                    f"NCCL_IB_HCA={hca} names {dev}{f':{n}' if n else ''}, but this node's "
                    f"ports are: {have}",
                    fix=f"set NCCL_IB_HCA to ports this node has ({have}), or unset it")))
    chosen = selected(ports, sel)
    pinned = bool(sel and not sel.exclude)
    for p in chosen:
        if p.state != "ACTIVE":
            out.append(Finding(IB_PORT_DOWN.problem(
                f"port {p.name} ({p.link_layer or 'link layer unknown'}) is "
                f"{p.state or 'in an unknown state'}"
                + (f", and NCCL_IB_HCA={hca} selects it" if pinned else ""),
                fix=f"check the cable and switch port (ibstat {p.device} {p.port}) and that "
                    "a subnet manager runs"
                    + ("; or take it out of NCCL_IB_HCA" if pinned else
                       "; or leave it out with NCCL_IB_HCA")),
                performance_only=not pinned))
    out += _slow_ports([p for p in chosen if p.state == "ACTIVE"])
    return out


def _slow_ports(active: Sequence[IbPort]) -> list[Finding]:
    out = []
    for layer in sorted({p.link_layer for p in active}):
        same = [p for p in active if p.link_layer == layer and p.rate_gbps]
        top = max((p.rate_gbps or 0.0 for p in same), default=0.0)
        best = next((p for p in same if p.rate_gbps == top), None)
        for p in same:
            if best and (p.rate_gbps or 0.0) < top:
                out.append(Finding(IB_PORT_SLOW.problem(
                    f"port {p.name} runs at {p.rate_text}, {best.name} at {best.rate_text}",
                    fix=f"reseat or replace the cable of {p.name}, check its switch port "
                        f"(ibstat {p.device} {p.port})"), performance_only=True))
    return out


def peermem_loaded(sys_module: str = "/sys/module") -> bool:
    return any(os.path.isdir(os.path.join(sys_module, m)) for m in PEERMEM_MODULES)


def check_gpudirect(ports: Sequence[IbPort], loaded: bool) -> list[Finding]:
    active = [p for p in ports if p.state == "ACTIVE"]
    if not active or loaded:
        return []
    return [Finding(GPUDIRECT_RDMA_MISSING.problem(
        f"{len(active)} ACTIVE port(s) ({', '.join(p.name for p in active[:4])}"
        f"{' ...' if len(active) > 4 else ''}) but neither nvidia_peermem nor nv_peer_mem "
        "is loaded (/sys/module)"), performance_only=True)]
