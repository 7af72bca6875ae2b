"""NVLink links and the NVSwitch fabric: links down, Fabric Manager not running.

Runs in the launcher's preflight (``ddpcheck.launcher.nodehealth``); no torch. Reads
``nvidia-smi nvlink -s`` (one "Link N: <speed>" or "Link N: <inactive>" line per link under
each "GPU i: NAME (UUID: ...)" line), the NVSwitch device files and the Fabric Manager's
systemd state (``systemctl is-active nvidia-fabricmanager``). On an NVSwitch system (HGX,
DGX) CUDA cannot start until Fabric Manager has configured the fabric: "system not yet
initialized" (cudaErrorSystemNotReady, 802; NVIDIA Fabric Manager User Guide,
https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/). Parsers are pure; the
readers take the runner seam of ``gpu`` (every call has a deadline).
"""

from __future__ import annotations

import glob
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ddpcheck.diagnoses import register
from ddpcheck.node import gpu
from ddpcheck.node.findings import Finding, Unread, drain_line

NVLINK_DOWN = register(
    "nvlink-down", "NVLink links of a GPU are down",
    "a GPU's NVLink links did not train (a bad link, a GPU or NVSwitch fault, or the fabric "
    "not configured): traffic between GPUs falls back to slower paths or fails",
    "drain the node, reset the GPUs or reboot; if links stay down, ask for the baseboard to "
    "be inspected (dcgmi diag -r 2 names the link)")
FABRIC_MANAGER_DOWN = register(
    "fabric-manager-down", "NVSwitch system without a running NVIDIA Fabric Manager",
    "on NVSwitch systems (HGX/DGX) the Fabric Manager configures the NVLink fabric; without "
    "it CUDA fails to start with 'system not yet initialized' (error 802)",
    "start it: systemctl enable --now nvidia-fabricmanager (its version must match the "
    "driver's); journalctl -u nvidia-fabricmanager says why it stopped")


@dataclass(frozen=True)
class GpuLinks:
    index: int
    name: str
    uuid: str
    active: tuple[int, ...] = ()
    inactive: tuple[int, ...] = ()

    def named(self) -> str:
        return f"GPU {self.index} ({self.uuid})" if self.uuid else f"GPU {self.index}"


_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]*)\)")
_LINK = re.compile(r"^\s+Link (\d+): (.+?)\s*$")


def parse_nvlink_status(text: str) -> list[GpuLinks]:
    """Parse ``nvidia-smi nvlink -s``: a link is up when it reports a speed (GB/s)."""
    out: list[GpuLinks] = []
    for line in text.splitlines():
        head, link = _GPU.match(line), _LINK.match(line)
        if head:
            out.append(GpuLinks(int(head.group(1)), head.group(2), head.group(3)))
        elif link and out:
            g, n = out[-1], int(link.group(1))
            up = "GB/s" in link.group(2)
            down = "inactive" in link.group(2).lower()
            out[-1] = GpuLinks(g.index, g.name, g.uuid, g.active + ((n,) if up else ()),
                               g.inactive + ((n,) if down else ()))
    return out


def check_nvlinks(gpus: Sequence[GpuLinks], nvswitch: bool) -> list[Finding]:
    """GPUs with links down.

    A GPU with some links up and some down has lost links. A GPU with every link down is
    judged only on an NVSwitch system, where every GPU is on the fabric: elsewhere a board
    without an NVLink bridge lists its links as inactive too (NVIDIA/NVSentinel#1481).
    """
    out = []
    for g in gpus:
        if not g.inactive or (not g.active and not nvswitch):
            continue
        links = ",".join(map(str, g.inactive))
        out.append(Finding(NVLINK_DOWN.problem(
            f"{g.named()}: NVLink link {links} inactive, {len(g.active)} of "
            f"{len(g.active) + len(g.inactive)} up (nvidia-smi nvlink -s)",
            fix=f"{drain_line(f'GPU {g.index} NVLink down')}; then reset the GPUs "
                "(nvidia-smi -r) or reboot; if the links stay down, have the baseboard "
                "inspected (dcgmi diag -r 2)")))
    return out


def nvswitch_devices(dev: str = "/dev", proc: str = "/proc/driver/nvidia-nvswitch"
                     ) -> list[str]:
    """NVSwitch devices the driver found (device files, or its /proc directory)."""
    return sorted(glob.glob(f"{dev}/nvidia-nvswitch[0-9]*")
                  or glob.glob(f"{proc}/devices/*"))


def check_fabric_manager(state_text: str | None, switches: int) -> tuple[list[Finding],
                                                                          list[Unread]]:
    """Judge ``systemctl is-active nvidia-fabricmanager`` output on a node with NVSwitches."""
    if not switches:
        return [], []
    what = "Fabric Manager state (systemctl is-active nvidia-fabricmanager)"
    state = (state_text or "").strip().splitlines()
    if not state or not re.fullmatch(r"[a-z-]+", state[0].strip()):
        why = state[0].strip()[:160] if state else "systemctl did not answer"
        return [], [Unread(what, why)]
    if state[0].strip() == "active":
        return [], []
    return [Finding(FABRIC_MANAGER_DOWN.problem(
        f"{switches} NVSwitch device(s) but nvidia-fabricmanager is {state[0].strip()} "
        "(systemctl is-active)",
        fix="systemctl enable --now nvidia-fabricmanager (same version as the driver); "
            "journalctl -u nvidia-fabricmanager says why it stopped; if it will not start, "
            f"{drain_line('fabric manager down')}"))], []


def read_nvlinks(runner: gpu.Runner = gpu.subprocess_runner, timeout: float = 5.0
                 ) -> list[GpuLinks] | None:
    text = gpu.run_nvidia_smi(("nvlink", "-s"), runner, timeout)
    return None if text is None else parse_nvlink_status(text)


def fabric_manager_state(runner: gpu.Runner = gpu.subprocess_runner,
                         timeout: float = 5.0) -> str | None:
    try:
        return runner(("systemctl", "is-active", "nvidia-fabricmanager"), timeout)
    except Exception:  # noqa: BLE001 - a seam must never take the preflight down
        return None
