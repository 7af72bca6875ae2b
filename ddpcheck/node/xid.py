"""Xid events in the kernel log: what the NVIDIA driver reported about this node's GPUs.

Runs in the launcher's preflight (``ddpcheck.launcher.nodehealth``); no torch. Reads the
kernel log since boot (``dmesg``, else ``journalctl -k -b``; both with a deadline) for
"NVRM: Xid (PCI:BUS): N, ..." lines and the driver's "fallen off the bus" message, which
newer drivers print without an Xid (leptonai/gpud#1209). A log that cannot be read
(kernel.dmesg_restrict, a container without CAP_SYSLOG) is said so, never read as healthy.
Meanings and actions are those of NVIDIA's Xid catalogue
(https://docs.nvidia.com/deploy/xid-errors/index.html). Xids a program causes (13, 31, 43,
45) are shown, not failed: they say the last job crashed, not that the node is broken.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ddpcheck.diagnoses import register
from ddpcheck.node import gpu
from ddpcheck.node.findings import Finding, Unread, drain_line

CATALOGUE_URL = "https://docs.nvidia.com/deploy/xid-errors/index.html"

GPU_XID = register(
    "gpu-xid-error", "the kernel log has an Xid error that takes a GPU out of service",
    "the NVIDIA driver logged an Xid event that NVIDIA's Xid catalogue ties to a hardware or "
    "driver fault needing a GPU reset, a reboot or a replacement",
    f"drain the node, then reset the GPU or reboot as the catalogue says ({CATALOGUE_URL})")


@dataclass(frozen=True)
class XidMeaning:
    name: str
    fault: str  # "node": fails the run; "program": shown; "performance": shown unless strict
    action: str


# NVIDIA Xid catalogue (CATALOGUE_URL): name and recommended action.
XIDS: dict[int, XidMeaning] = {
    13: XidMeaning("Graphics Engine Exception", "program",
                   "usually a program's fault (an out-of-range access); run GPU diagnostics "
                   "if it repeats with different programs"),
    31: XidMeaning("GPU memory page fault", "program",
                   "usually a program's invalid memory access"),
    43: XidMeaning("GPU stopped processing", "program",
                   "a program hit an error and its channel was stopped; the GPU is usable"),
    45: XidMeaning("Preemptive cleanup, due to previous errors", "program",
                   "a program was ended (killed, or after another Xid)"),
    48: XidMeaning("Double Bit ECC Error", "node",
                   "reset the GPU or reboot; RMA if it repeats"),
    61: XidMeaning("Internal micro-controller breakpoint/warning", "node",
                   "reset the GPU or reboot"),
    62: XidMeaning("Internal micro-controller halt", "node", "reset the GPU or reboot"),
    63: XidMeaning("ECC page retirement or row remapping recording event", "node",
                   "reset the GPU or reboot to apply the retirement or remap"),
    64: XidMeaning("ECC page retirement or row remapper recording failure", "node",
                   "reset the GPU or reboot; RMA if it repeats"),
    74: XidMeaning("NVLink Error", "node",
                   "reset the GPU or reboot; check the links (nvidia-smi nvlink -s)"),
    79: XidMeaning("GPU has fallen off the bus", "node",
                   "reboot (power-cycle) the node; RMA if it repeats"),
    92: XidMeaning("High single-bit ECC error rate", "performance",
                   "watch the GPU; plan a reset and see whether the rate returns"),
    94: XidMeaning("Contained ECC error", "node",
                   "reset the GPU to remap the row; programs on other GPUs were not affected"),
    95: XidMeaning("Uncontained ECC error", "node", "reset the GPU or reboot"),
    119: XidMeaning("GSP RPC timeout", "node", "reset the GPU or reboot"),
    120: XidMeaning("GSP error", "node", "reset the GPU or reboot"),
}

# Xid 144-150: NVLink errors of NVLink 5 (Blackwell) with a unit name and "Fatal" or
# "Nonfatal" in the message ("NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1
# (...)", leptonai/gpud#1174); the catalogue's action for a fatal one is a GPU reset.
NVLINK5_XIDS = range(144, 151)
NVLINK5_FATAL = XidMeaning("NVLink error, fatal", "node",
                           "reset the GPU or reboot; check the links (nvidia-smi nvlink -s)")
_FATAL = re.compile(r"\bFatal\b")


def meaning_of(event: XidEvent) -> XidMeaning | None:
    """The catalogue's meaning of an event; None for an Xid it does not judge here."""
    if event.xid in NVLINK5_XIDS:
        return NVLINK5_FATAL if _FATAL.search(event.last) else None
    return XIDS.get(event.xid)


_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+),?\s*(.*)$")
_FALLEN = re.compile(r"NVRM: The NVIDIA GPU ([0-9A-Fa-f:.]+)")
_PRIVATE = re.compile(r"\bpid=[^,]*,\s*|\bname=[^,]*,\s*")  # another process's pid and name
_DENIED = ("Operation not permitted", "Permission denied", "No journal files")


@dataclass(frozen=True)
class XidEvent:
    bus: str  # as the driver prints it, e.g. "0000:3b:00"
    xid: int
    count: int
    last: str  # the last such line's message, without pid/name


def parse_xids(text: str) -> list[XidEvent]:
    """Xid events by (bus, xid), in order of first appearance, with their count."""
    seen: dict[tuple[str, int], XidEvent] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _XID.search(line)
        fallen = _FALLEN.search(line)
        if m:
            key, msg = (m.group(1), int(m.group(2))), _PRIVATE.sub("", m.group(3)).strip()
        elif fallen and "fallen off the bus" in " ".join(lines[i:i + 3]):
            key, msg = (fallen.group(1), 79), "GPU has fallen off the bus"
        else:
            continue
        old = seen.get(key)
        seen[key] = XidEvent(key[0], key[1], (old.count if old else 0) + 1, msg[:160])
    return list(seen.values())


def check_xids(events: Sequence[XidEvent], names: dict[str, str] | None = None
               ) -> tuple[list[Finding], list[str]]:
    """(findings, notes): node faults are problems; program Xids and unknown ones are notes.

    names maps a bus id (lower case, without the domain's leading zeros) to "GPU i (bus,
    uuid)" so each finding names its GPU.
    """
    found, notes = [], []
    for e in events:
        meaning = meaning_of(e)
        gpu_name = (names or {}).get(short_bus(e.bus), f"GPU at PCI {e.bus}")
        seen = f"{gpu_name}: Xid {e.xid}" + (f" ({meaning.name})" if meaning else "") + \
            f" x{e.count} in the kernel log since boot, last: \"{e.last}\""
        if meaning is None or meaning.fault == "program":
            notes.append(f"{seen}; " + (meaning.action if meaning else
                                        f"see NVIDIA's Xid catalogue, {CATALOGUE_URL}"))
            continue
        reason = f"Xid {e.xid} on {e.bus}"
        found.append(Finding(GPU_XID.problem(
            seen, cause=f"NVIDIA's Xid catalogue: Xid {e.xid} is '{meaning.name}'",
            fix=f"{drain_line(reason)}; then {meaning.action} ({CATALOGUE_URL}); the line "
                "stays in the kernel log until the node reboots"),
            performance_only=meaning.fault == "performance"))
    return found, notes


def short_bus(bus: str) -> str:
    """'0000:3b:00' and '00000000:3B:00.0' both become '3b:00'."""
    parts = bus.lower().split(".")[0].split(":")
    return ":".join(parts[-2:])


def read_kernel_log(timeout: float, runner: gpu.Runner = gpu.subprocess_runner
                    ) -> tuple[str | None, str]:
    """(log text, "") or (None, why it could not be read): dmesg, else journalctl -k."""
    why = ""
    for argv in (("dmesg",), ("journalctl", "-k", "-b", "--no-pager", "-q")):
        try:
            text = runner(argv, timeout)
        except Exception:  # noqa: BLE001 - a seam must never take the preflight down
            text = None
        if text is None:
            why = why or f"{argv[0]} did not run within {timeout:g} s"
            continue
        first = text.strip().splitlines()[0] if text.strip() else ""
        if any(d in first for d in _DENIED) or not text.strip():
            why = why or (first[:160] or f"{argv[0]} printed nothing")
            continue
        return text, ""
    return None, why


def kernel_xids(timeout: float, runner: gpu.Runner = gpu.subprocess_runner
                ) -> tuple[list[XidEvent], list[Unread]]:
    text, why = read_kernel_log(timeout, runner)
    if text is None:
        return [], [Unread("kernel log for Xid errors (dmesg, journalctl -k)",
                           f"{why}; run as root or set kernel.dmesg_restrict=0")]
    return parse_xids(text), []
