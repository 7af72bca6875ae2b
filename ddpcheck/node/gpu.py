"""GPU inventory: this node's GPUs as nvidia-smi lists them (``-L`` and ``--query-gpu``).

Used by the launcher's node preflight and the worker's node/placement probes; never imports
torch. :func:`run_nvidia_smi` runs the nvidia-smi binary (with a timeout, through an
injectable runner so tests feed recorded output); the parsers are pure. Which of these GPUs
the ranks get (CUDA_VISIBLE_DEVICES, the device plan) is ``ddpcheck.node.devices``.
"""

from __future__ import annotations

import csv
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable, Optional

NVIDIA_SMI_TIMEOUT = 5.0
QUERY_FIELDS = ("index", "name", "uuid", "pci.bus_id", "memory.total", "driver_version")
QUERY_ARGS = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")


@dataclass(frozen=True)
class MigDevice:
    """One MIG instance of a GPU, as `nvidia-smi -L` lists it under its parent."""

    profile: str  # e.g. "3g.40gb"
    index: int
    uuid: str  # "MIG-<uuid>" (R470+) or "MIG-GPU-<uuid>/<gi>/<ci>" (older drivers)


@dataclass(frozen=True)
class GpuInfo:
    """One physical GPU. bus_id/memory/driver are only known from the --query-gpu form."""

    index: int
    name: str
    uuid: str
    mig: tuple[MigDevice, ...] = ()
    bus_id: str = ""
    memory_mib: int | None = None
    driver_version: str = ""


_GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[^)\s]+)\)\s*$")
_MIG_LINE = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)\s*$")
_LOST_LINE = re.compile(r"Unable to determine the device handle for GPU\s*([0-9A-Fa-f:.]+)")


def parse_nvidia_smi_list(text: str) -> list[GpuInfo]:
    """Parse `nvidia-smi -L`; MIG lines attach to the GPU line above them; other lines skip."""
    gpus: list[GpuInfo] = []
    for line in text.splitlines():
        gpu, mig = _GPU_LINE.match(line), _MIG_LINE.match(line)
        if gpu:
            gpus.append(GpuInfo(int(gpu.group(1)), gpu.group(2), gpu.group(3)))
        elif mig and gpus:
            dev = MigDevice(mig.group(1), int(mig.group(2)), mig.group(3))
            last = gpus[-1]
            gpus[-1] = GpuInfo(last.index, last.name, last.uuid, last.mig + (dev,))
    return gpus


def lost_gpus(text: str) -> list[str]:
    """PCI bus ids nvidia-smi could not reach ("Unable to determine the device handle ...")."""
    return [m.group(1).rstrip(":") for m in _LOST_LINE.finditer(text)]


def parse_nvidia_smi_query(csv_text: str) -> list[GpuInfo]:
    """Parse `nvidia-smi` with QUERY_ARGS (csv, noheader, nounits); malformed rows skip."""
    gpus: list[GpuInfo] = []
    for row in csv.reader(csv_text.splitlines(), skipinitialspace=True):
        if len(row) != len(QUERY_FIELDS) or not row[0].strip().isdigit():
            continue
        index, name, uuid, bus, mem, driver = (f.strip() for f in row)
        gpus.append(GpuInfo(int(index), name, uuid, (), bus,
                            int(mem) if mem.isdigit() else None, driver))
    return gpus


Runner = Callable[[Sequence[str], float], Optional[str]]


def subprocess_runner(argv: Sequence[str], timeout: float) -> str | None:
    """Run argv; return stdout+stderr (even on a non-zero exit), None if it cannot run."""
    try:
        done = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return done.stdout


def run_nvidia_smi(args: Sequence[str] = ("-L",), runner: Runner = subprocess_runner,
                   timeout: float = NVIDIA_SMI_TIMEOUT) -> str | None:
    """Output of `nvidia-smi ARGS`, or None when it is absent, hangs or fails to start.

    Never raises. A broken driver still yields text ("NVIDIA-SMI has failed ..."), which
    parses to no GPUs; the runner seam lets tests and remote probes supply the output.
    """
    try:
        return runner(("nvidia-smi", *args), timeout)
    except Exception:  # noqa: BLE001 - a seam must never take the preflight down
        return None


def list_gpus(runner: Runner = subprocess_runner) -> list[GpuInfo] | None:
    """GPUs `nvidia-smi -L` lists, or None when nvidia-smi is not available."""
    text = run_nvidia_smi(("-L",), runner)
    return None if text is None else parse_nvidia_smi_list(text)
