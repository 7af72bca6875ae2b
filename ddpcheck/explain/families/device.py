"""CUDA device errors: invalid device ordinal (local-rank arithmetic) and out of memory.

Messages from c10/cuda (CUDA error strings: "invalid device ordinal", "out of memory") and
the caching allocator ("CUDA out of memory. Tried to allocate ...",
c10/cuda/CUDACachingAllocator.cpp).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.diagnoses import BACKEND_UNAVAILABLE, CUDA_VISIBLE_DEVICES_INVALID, DUPLICATE_DEVICE
from ddpcheck.explain.causality import HINT, Explained
from ddpcheck.explain.codes import (
    CUDA_OOM,
    FABRIC_MANAGER_NOT_READY,
    GPU_ECC_ERROR,
    INVALID_DEVICE_ORDINAL,
)
from ddpcheck.explain.matching import pattern
from ddpcheck.explain.reader import Record
from ddpcheck.node.gpustate import CUDA_UNUSABLE, GPU_LOST

PATTERNS = [
    # cudaErrorInvalidDevice's string; wrappers re-print it in their own case ("CUDA Invalid
    # device ordinal in trainer.py:195", Ultralytics)
    pattern(INVALID_DEVICE_ORDINAL, r"(?i)invalid device ordinal",
            "ddpcheck run --stages node,placement --nproc-per-node N"),
    # torch/cuda/__init__.py get_device_properties (1.x to 2.13; DataParallel and scripts
    # call it): "AssertionError: Invalid device id" for an index >= device_count() and for a
    # negative one, i.e. also a local rank left at its -1 default (no launcher set it): a
    # hint. (can_device_access_peer's "Invalid peer device id" is the same check.)
    pattern(INVALID_DEVICE_ORDINAL, r"AssertionError: Invalid (?:peer )?device id\b",
            "ddpcheck run --stages node,placement --nproc-per-node N", grade="hint",
            cause="torch.cuda.get_device_properties got a GPU index this process does not see: "
                  "one >= the visible GPU count (more ranks than GPUs, CUDA_VISIBLE_DEVICES, a "
                  "global rank used as the device), or a negative one (a --local_rank / "
                  "LOCAL_RANK left at its -1 default because no launcher set it)"),
    # Xid codes: NVIDIA's "XID Errors" table (48 DBE, 63/64 row remapping, 94/95 contained /
    # uncontained ECC; 79 fallen off the bus), as the kernel log prints them.
    pattern(GPU_ECC_ERROR,
            r"(?i)uncorrectable ECC error|NVRM: Xid \([^)]*\): (?:48|63|64|94|95)\b",
            "ddpcheck run --stages node (GPU health per node)"),
    # the driver's message may wrap ("NVRM: GPU ... has / NVRM: fallen off the bus"), and
    # nvidia-smi cannot get a handle for a GPU that stopped answering
    # nvidia-smi's other wordings for a GPU that stopped answering ("...: GPU is lost. Reboot
    # the system to recover this GPU", "GPU requires reset"), and Xid 119/120 (GSP RPC
    # timeout / GSP error, NVIDIA's Xid catalogue: reset the GPU)
    pattern(GPU_LOST, r"NVRM: Xid \([^)]*\): (?:79|119|120)\b|fallen off the bus|"
            r"Unable to determine the device handle for GPU\S*: (?:Unknown Error|GPU is lost)|"
            r"GPU is lost\. Reboot the system|GPU requires reset",
            "ddpcheck run --stages node (GPU health per node)"),
    # c10/cuda: cudaErrorNoDevice with GPUs installed means CUDA_VISIBLE_DEVICES hides them
    # cudaErrorSystemNotReady (802), CUDA runtime API: "the system is not yet ready to start
    # any CUDA work ... all required driver daemons are actively running" (Fabric Manager).
    pattern(FABRIC_MANAGER_NOT_READY,
            r"system not yet initialized|cudaErrorSystemNotReady|CUDA error(?: code)?:? 802\b|"
            r"runtime error \(802\)", "ddpcheck run --stages node (GPU and NVLink fabric state)"),
    pattern(CUDA_VISIBLE_DEVICES_INVALID,
            r"No CUDA GPUs are available|no CUDA-capable device is detected",
            "ddpcheck run --stages node (compares torch's GPUs with nvidia-smi)",
            cause="CUDA found no device: CUDA_VISIBLE_DEVICES is empty or names GPUs that do "
                  "not exist on this node (or the job was given no GPU: --gres=gpu:N)"),
    pattern(CUDA_UNUSABLE, r"ProcessGroupNCCL is only supported with GPUs, no GPUs found",
            "ddpcheck run --stages node"),
    pattern(CUDA_UNUSABLE, r"no kernel image is available for execution on the device",
            "ddpcheck run --stages node",
            cause="this torch build has no kernels for the GPU's architecture (a wheel built "
                  "for other compute capabilities, e.g. an old torch on a new GPU)",
            fix="install a torch build whose CUDA version supports the GPU (pip install torch "
                "--index-url https://download.pytorch.org/whl/cuXYZ); torch.cuda."
                "get_arch_list() lists what the build supports"),
    # cudaErrorDevicesUnavailable (46): CUDA >= 10 "CUDA-capable device(s) is/are busy or
    # unavailable", CUDA <= 9.2 "all CUDA-capable devices are busy or unavailable". The CUDA
    # runtime API's error list gives its causes: a GPU in exclusive-process (or prohibited)
    # compute mode that another process already holds, or long-running kernels. In a
    # distributed job that other process is most often a sibling rank: ranks that all pick
    # cuda:0 (the device taken from no rank, or from the global rank) on a cluster whose GPUs
    # are in exclusive-process mode, the default of many HPC sites. A stray process holding
    # the GPU prints the same line, so the cause and fix name both, and it is a hint: any
    # cause-grade line in the log comes first.
    pattern(DUPLICATE_DEVICE, r"CUDA-capable device\(s\) is/are busy or unavailable|"
            r"all CUDA-capable devices are busy or unavailable",
            "ddpcheck run --stages node,placement",
            cause="the GPU is in exclusive-process compute mode and another process already "
                  "holds it: most often another rank of this job on the same GPU (every rank "
                  "on cuda:0), else a stuck or foreign process (nvidia-smi shows which)",
            fix="give each rank its own GPU: torch.cuda.set_device(int(os.environ["
                "'LOCAL_RANK'])) before any CUDA call; or stop the other process on that GPU "
                "(nvidia-smi), or set the compute mode to default (nvidia-smi -c 0)",
            grade=HINT),
    # The driver itself: cudaErrorSystemDriverMismatch (803) "system has unsupported display
    # driver / cuda driver combination", cudaErrorCompatNotSupportedOnDevice (804) "forward
    # compatibility was attempted on non supported HW"; torch/cuda/__init__.py _lazy_init
    # "Found no NVIDIA driver on your system"; c10/cuda "CUDA driver initialization failed,
    # you might not have a CUDA gpu."; nvidia-smi "NVIDIA-SMI has failed because it couldn't
    # communicate with the NVIDIA driver".
    pattern(CUDA_UNUSABLE,
            r"system has unsupported display driver / cuda driver combination|"
            r"forward compatibility was attempted on non supported HW|"
            r"Found no NVIDIA driver on your system|CUDA driver initialization failed|"
            r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
            "ddpcheck run --stages node",
            cause="the NVIDIA kernel driver is missing, not loaded, or of another version than "
                  "the user-space CUDA driver (libcuda) the job loads (a driver upgrade without "
                  "a reboot, or a container's compat libraries on an unsupported GPU)",
            fix="load / reinstall the NVIDIA driver matching libcuda (reboot after an "
                "upgrade); nvidia-smi must work on the node before the job starts"),
    pattern(BACKEND_UNAVAILABLE,
            r"Distributed package doesn't have (?P<b>NCCL|MPI|Gloo|UCC) built in",
            "ddpcheck run --backend gloo (works on every torch build)"),
    # c10/cuda/CUDACachingAllocator.cpp "CUDA out of memory. Tried to allocate ..." (ROCm
    # builds hipify it to "HIP out of memory"), cudaErrorMemoryAllocation "out of memory"
    # cuBLAS's CUBLAS_STATUS_ALLOC_FAILED ("Resource allocation failed inside the cuBLAS
    # library. This is usually caused by a cudaMalloc() failure", cuBLAS docs): creating a
    # handle on a full GPU
    # (not ray.exceptions.OutOfMemoryError, Ray's host-RAM monitor killing a worker, nor
    # Java's: host-out-of-memory, memory.py)
    pattern(CUDA_OOM, r"(?:CUDA|HIP) out of memory|CUDA error: out of memory|"
            r"(?<!ray\.exceptions\.)(?<!java\.lang\.)OutOfMemoryError|"
            r"CUBLAS_STATUS_ALLOC_FAILED",
            "ddpcheck run --stages node (GPU memory in use by other processes)"),
]


# c10/cuda/CUDACachingAllocator.cpp (torch >= 2.1) lists every process on the GPU in its OOM
# message: "GPU 0 has a total capacity of 79.15 GiB of which 3.75 MiB is free. Process 4242
# has 30.00 GiB memory in use. ..." torchrun names each worker's pid ("local_rank: 1 (pid:
# 4242)", elastic api.py; "PID 4242" in its failure summary). A worker of the same job
# holding memory on the GPU that ran out means two ranks share one GPU.
OOM_PROCESS = re.compile(r"Process (?P<pid>\d+) has [\d.]+ [KMGT]i?B memory in use")
WORKER_PID = re.compile(r"local_rank: \d+ \(pid: (?P<pid>\d+)\)|\(pid: (?P<pid2>\d+)\)|"
                        r"received by PID (?P<pid3>\d+)")


def shared_gpu(found: Sequence[Explained], records: Sequence[Record]) -> list[Explained]:
    """A GPU OOM whose process list holds another worker of this job: a duplicate device."""
    ooms = [e for e in found if e.problem.code == CUDA_OOM.code and e.root]
    if not ooms:
        return list(found)
    workers = {m["pid"] or m["pid2"] or m["pid3"] for r in records
               for m in WORKER_PID.finditer(r.text)}
    out = []
    for e in found:
        if e in ooms:
            holders = {m["pid"] for r in records if r.source == e.first.source
                       for m in OOM_PROCESS.finditer(r.text)}
            shared = sorted(holders & workers)
            if shared:
                p = e.problem
                e = replace(e, problem=DUPLICATE_DEVICE.problem(
                    f"{p.observed} | the GPU that ran out also holds worker pid "
                    f"{', '.join(shared)} of this job",
                    cause="two ranks of the job drive the same GPU (the device was chosen from "
                          "the global rank, set_device was not called, or CUDA_VISIBLE_DEVICES "
                          "is the same for both), so their memory adds up until one runs out",
                    ranks=p.ranks, hosts=p.hosts))
        out.append(e)
    return out


# torch/cuda/__init__.py set_device -> torch._C._cuda_setDevice: what it raises, from CUDA's
# error list (cudaSetDevice; CUDA >= 12 also creates the context there) and torch's lazy init.
SET_DEVICE_CALL = re.compile(r"\bset_device\(|_cuda_setDevice\(")
SET_DEVICE_ERRORS = ("torch.cuda.set_device raises 'CUDA error: invalid device ordinal' when "
                     "the index is not below the GPUs this process sees (more ranks on the node "
                     "than GPUs: --nproc-per-node, CUDA_VISIBLE_DEVICES, srun's per-task GPUs), "
                     "'busy or unavailable' when a GPU in exclusive-process mode is held, 'No "
                     "CUDA GPUs are available' or a driver error; the missing error line says "
                     "which")


def cut_at(where: str) -> str:
    """What a call that a traceback stopped in (``tracebacks.cut_short``) can raise, or ""."""
    return SET_DEVICE_ERRORS if SET_DEVICE_CALL.search(where) else ""
