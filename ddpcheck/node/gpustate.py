"""Is this a GPU node, and can its GPUs be used? nvidia-smi failures, lost GPUs, device files.

Pure logic plus two thin readers (/dev, /proc/driver/nvidia/version); no torch import. Used
by the launcher's preflight (before torchrun: a broken driver stops the run) and by the
worker's node probe (which adds what torch says). The point is that a GPU node is never
read as a CPU node: a failing nvidia-smi, `/dev/nvidia*` device files that torch cannot use,
or a CPU-only torch next to NVIDIA devices is a problem, never a quiet gloo run.
Recorded real outputs and their sources: tests/data/gpu/SOURCES.md.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Sequence

from ddpcheck.diagnoses import CPU_ONLY_TORCH, Problem, register
from ddpcheck.node import devices, gpu

GPU_DRIVER_FAILED = register(
    "gpu-driver-failed", "nvidia-smi fails: the NVIDIA driver is not usable on this node",
    "the kernel module is not loaded, or it differs from the user-space driver library "
    "(a driver upgrade without a reboot), so neither nvidia-smi nor CUDA can reach the GPUs",
    "on the node: dmesg | grep -i nvrm; cat /proc/driver/nvidia/version; reload the driver "
    "or reboot the node, and drain it (Slurm: scontrol update nodename=NODE state=drain "
    "reason=driver) until nvidia-smi works")
GPU_LOST = register(
    "gpu-lost", "a GPU on this node no longer answers (fallen off the bus)",
    "the GPU stopped responding to the driver (Xid 79 'GPU has fallen off the bus', power, "
    "heat or a PCIe fault); CUDA no longer counts it",
    "drain the node (Slurm: scontrol update nodename=NODE state=drain reason=gpu-lost), check "
    "dmesg | grep -i xid, then reset the GPU (nvidia-smi -r -i BUS_ID) or reboot")
CUDA_UNUSABLE = register(
    "cuda-unusable", "this node has NVIDIA devices but torch cannot use CUDA",
    "torch's CUDA runtime cannot initialise: a driver older than torch's CUDA, no access to "
    "/dev/nvidia*, or CUDA_VISIBLE_DEVICES hiding every device",
    "install a torch build for this node's driver (pip install torch --index-url "
    "https://download.pytorch.org/whl/cu121 for an R530+ driver), or update the driver; "
    "python -c 'import torch; torch.cuda.init()' shows torch's reason")

# What nvidia-smi prints instead of a GPU list when NVML cannot start (first line kept).
_FAILURES = ("NVIDIA-SMI has failed", "Failed to initialize NVML", "NVML library version",
             "couldn't communicate with the NVIDIA driver", "No devices were found")
_MISMATCH = "Driver/library version mismatch"
_NVRM = re.compile(r"Kernel Module\s+(\d+(?:\.\d+)+)")


def device_files(dev: str = "/dev") -> list[str]:
    """The GPU device files (/dev/nvidia0, ...): present when the driver saw the boards."""
    return sorted(glob.glob(f"{dev}/nvidia[0-9]*"), key=lambda p: (len(p), p))


def kernel_driver_version(text: str | None = None) -> str | None:
    """The loaded kernel module's version from /proc/driver/nvidia/version text, or None."""
    if text is None:
        try:
            with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
                text = fh.read()
        except OSError:
            return None
    m = _NVRM.search(text)
    return m.group(1) if m else None


def nvidia_smi_failure(text: str | None) -> str | None:
    """nvidia-smi's error message when it ran but could not list GPUs, else None.

    None for no output (not installed) and for a usable list, even one with lost GPUs
    (those are gpu.lost_gpus' job). "No devices were found" counts only next to device
    files: see check_node_gpus.
    """
    if not text or not text.strip() or gpu.parse_nvidia_smi_list(text):
        return None
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if any(ln.startswith("Unable to determine the device handle") for ln in lines):
        return None
    hit = next((ln for ln in lines if any(f in ln for f in _FAILURES)), None)
    return " ".join(lines[:2]) if hit and _MISMATCH in text else hit or lines[0][:300]


def _driver_advice(message: str, kernel: str | None) -> dict[str, str]:
    if _MISMATCH not in message:
        return {}
    loaded = f" ({kernel})" if kernel else ""
    return {"cause": f"the user-space driver was upgraded but the old kernel module{loaded} is "
                     "still loaded",
            "fix": "reboot the node (or unload and reload the nvidia kernel modules); drain "
                   "it until nvidia-smi works"}


def check_node_gpus(smi_text: str | None, dev_files: Sequence[str], *,
                    kernel_version: str | None = None, cpu_run: bool = False) -> list[Problem]:
    """Problems visible without torch: nvidia-smi fails, a GPU is lost, devices without GPUs.

    smi_text is `nvidia-smi -L` output (None: not installed or could not start). cpu_run:
    the user asked for gloo; a failing nvidia-smi without any GPU device file is then a CUDA
    image on a CPU node, not a broken GPU node.
    """
    problems: list[Problem] = []
    failure = nvidia_smi_failure(smi_text)
    devices = _devices_text(dev_files)
    if failure and cpu_run and not dev_files:
        failure = None
    if failure and (not failure.startswith("No devices were found") or dev_files):
        problems.append(GPU_DRIVER_FAILED.problem(
            f"nvidia-smi failed: \"{failure}\"" + (f"; {devices} exist" if dev_files else ""),
            **_driver_advice(failure, kernel_version)))
    lost = gpu.lost_gpus(smi_text or "")
    if lost:
        listed = len(gpu.parse_nvidia_smi_list(smi_text or ""))
        problems.append(GPU_LOST.problem(
            f"nvidia-smi cannot reach GPU {', '.join(lost)} (\"Unable to determine the device "
            f"handle\"); it lists {listed} working GPU(s)"))
    return problems


def _devices_text(dev_files: Sequence[str]) -> str:
    if not dev_files:
        return "no /dev/nvidiaN device files"
    return f"{len(dev_files)} GPU device files ({dev_files[0]}" + \
        (f" ... {dev_files[-1]})" if len(dev_files) > 1 else ")")


def check_torch_sees_gpus(dev_files: Sequence[str], smi_gpus: int, cuda_build: bool,
                          torch_count: int, torch_error: str = "") -> list[Problem]:
    """Problems when the node has NVIDIA devices but torch cannot use them (worker side).

    torch_error is the first line of torch.cuda.init()'s exception, if any.
    """
    if not dev_files and not smi_gpus:
        return []
    seen = _devices_text(dev_files) if dev_files else f"nvidia-smi lists {smi_gpus} GPU(s)"
    if not cuda_build:
        return [CPU_ONLY_TORCH.problem(
            f"{seen} but torch is a CPU-only build (torch.version.cuda is None): auto mode "
            "would run gloo on the CPU")]
    if torch_count == 0:
        why = f": {torch_error}" if torch_error else ""
        return [CUDA_UNUSABLE.problem(
            f"{seen} but torch.cuda.device_count() is 0{why}")]
    return []


def cuda_device_count(gpus: Sequence[gpu.GpuInfo], cuda_visible_devices: str | None) -> int:
    """Devices one process of this node gets from CUDA, as CUDA counts them.

    CUDA_VISIBLE_DEVICES is applied the way CUDA reads it (devices.visible_count: indices, GPU-/
    MIG- UUIDs, -1, empty). A MIG list is one device: "With CUDA 11/R450 and CUDA 12/R525,
    only enumeration of a single MIG instance is supported" (NVIDIA MIG User Guide, CUDA
    Device Enumeration, https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
    mig-device-names.html).
    """
    count = devices.visible_count(cuda_visible_devices, gpus)
    vd = devices.parse_cuda_visible_devices(cuda_visible_devices)
    if vd.uses_uuids and vd.effective and vd.effective[0].startswith("MIG-"):
        return min(count, 1)
    return count


def device_slots(local_rank: int, local_world_size: int, visible: int, per_replica: int,
                 srun_task: bool) -> tuple[int, int]:
    """(processes that share this process's visible devices, this process's slot among them).

    Under torchrun every local rank sees the node's devices and takes slot LOCAL_RANK. A task
    that srun started with its own devices (--gpus-per-task: Slurm sets CUDA_VISIBLE_DEVICES
    per task) sees only those, so it is alone on them: slot 0 of 1. Whether the tasks really
    got different boards is the placement stage's UUID check.
    """
    if srun_task and per_replica <= visible < local_world_size * per_replica:
        return 1, 0
    return local_world_size, local_rank


def first_device(local_rank: int, local_world_size: int, visible: int, per_replica: int,
                 srun_task: bool) -> int:
    """The CUDA index a rank binds its NCCL group to: its replica's first device.

    Local rank r drives cuda:r*K..r*K+K-1 (``devices.device_plan``, what the placement stage
    checks), so with --gpus-per-replica K > 1 the rank's own device is r*K, not r. Wrapped
    into the visible devices: an unfit plan is the node stage's problem to name.
    """
    _, slot = device_slots(local_rank, local_world_size, visible, per_replica, srun_task)
    return (slot * per_replica) % max(visible, 1)
