"""CUDA device errors: invalid device ordinal (local-rank arithmetic) and out of memory.

Messages from c10/cuda (CUDA error strings: "invalid device ordinal", "out of memory") and
the caching allocator ("CUDA out of memory. Tried to allocate ...",
c10/cuda/CUDACachingAllocator.cpp).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.diagnoses import (
    BACKEND_UNAVAILABLE,
    CUDA_VISIBLE_DEVICES_INVALID,
    DUPLICATE_DEVICE,
    Problem,
)
from ddpcheck.explain.causality import HINT, Explained
from ddpcheck.explain.codes import (
    CUDA_OOM,
    FABRIC_MANAGER_NOT_READY,
    GPU_ECC_ERROR,
    INVALID_DEVICE_ORDINAL,
)
from ddpcheck.explain.families import cudastack
from ddpcheck.explain.matching import Hit, observed_lines, pattern, where
from ddpcheck.explain.reader import Record
from ddpcheck.node.gpustate import CUDA_UNUSABLE, GPU_LOST
from ddpcheck.node.nvlinkfabric import NVLINK_DOWN
from ddpcheck.node.xid import CATALOGUE_URL, GPU_XID, NVLINK5_FATAL, XIDS

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
    # The same failure in other producers' words: the error's names (cudaErrorInvalidDevice,
    # the driver API's CUDA_ERROR_INVALID_DEVICE, HIP's hipErrorInvalidDevice, printed bare by
    # CuPy, Numba and JAX).
    pattern(INVALID_DEVICE_ORDINAL,
            r"\b(?:cudaErrorInvalidDevice|CUDA_ERROR_INVALID_DEVICE|hipErrorInvalidDevice)\b",
            "ddpcheck run --stages node,placement --nproc-per-node N"),
    # torch/serialization.py validate_cuda_device (1.x-2.13): a checkpoint saved from cuda:N
    # loaded where the process sees N GPUs or fewer. Only torch.load prints it.
    pattern(INVALID_DEVICE_ORDINAL,
            r"Attempting to deserialize object on (?:a )?CUDA device (?P<idx>\d+) but "
            r"torch\.cuda\.device_count\(\) is (?P<n>\d+)",
            "ddpcheck run --stages node,placement --nproc-per-node N",
            cause="torch.load restores tensors to the GPU they were saved from (cuda:{idx}), "
                  "and this process sees {n} GPU(s)",
            fix="torch.load(path, map_location=f'cuda:{{local_rank}}') (or map_location='cpu' "
                "and move the model after)"),
    # (Lightning's device parser, 'You requested gpu: [..]' / 'But your machine only has:
    # [..]': families/wrappers.py)
    # ATen/cuda/CUDAContext.cpp getDeviceProperties (torch 1.5-2.x): AT_ASSERT(device >= 0 &&
    # device < num_gpus, "device=", device, ", num_gpus=", num_gpus), wrapped by torch.cuda's
    # lazy init as "CUDA call failed lazily at initialization with error: ...". Who else
    # prints it: an index past the GPUs torch counted (the ordinal), but also a count of 0
    # (CUDA_VISIBLE_DEVICES changed after torch counted, CUDA failed to start) and a GPU the
    # driver lists that CUDA cannot open; DeviceIndex is int8_t, so the numbers are often
    # blank. A hint: a line that names the cause outranks it.
    pattern(INVALID_DEVICE_ORDINAL,
            r"device >= 0 && device < num_gpus INTERNAL ASSERT FAILED",
            "ddpcheck run --stages node,placement --nproc-per-node N", grade=HINT,
            cause="a rank asked torch for a GPU index not below the GPUs torch counted: more "
                  "ranks per node than GPUs, the device taken from the global RANK, or "
                  "CUDA_VISIBLE_DEVICES set after torch counted the GPUs (torch's own check; "
                  "a count of 0 means CUDA saw no GPU at all)"),
    # Xid codes: NVIDIA's "XID Errors" table (48 DBE, 63/64 row remapping, 94/95 contained /
    # uncontained ECC; 79 fallen off the bus), as the kernel log prints them.
    # (cudaErrorECCUncorrectable's name too, as CuPy / Numba print it)
    pattern(GPU_ECC_ERROR,
            r"(?i)uncorrectable ECC error|NVRM: Xid \([^)]*\): (?:48|63|64|94|95)\b|"
            r"cudaErrorECCUncorrectable|CUDA_ERROR_ECC_UNCORRECTABLE",
            "ddpcheck run --stages node (GPU health per node)"),
    # the driver's message may wrap ("NVRM: GPU ... has / NVRM: fallen off the bus"), and
    # nvidia-smi cannot get a handle for a GPU that stopped answering
    # nvidia-smi's other wordings for a GPU that stopped answering ("...: GPU is lost. Reboot
    # the system to recover this GPU", "GPU requires reset"), and Xid 119/120 (GSP RPC
    # timeout / GSP error, NVIDIA's Xid catalogue: reset the GPU)
    pattern(GPU_LOST, r"NVRM: Xid \([^)]*\): (?:79|119|120)\b|fallen off the bus|"
            r"Unable to determine the device handle for GPU\S*: (?:Unknown Error|GPU is lost)|"
            r"GPU is lost\. Reboot the system|GPU requires reset|"
            # NVML's NVML_ERROR_GPU_IS_LOST as pynvml raises it (nvml.py: NVMLError_GPUIsLost,
            # message "GPU is lost"), e.g. from DCGM exporters or torch.cuda's NVML queries
            r"NVMLError_GPUIsLost",
            "ddpcheck run --stages node (GPU health per node)"),
    # The other Xids that NVIDIA's Xid catalogue ties to the GPU or its driver, not to the
    # program (ddpcheck/node/xid.py, the run's own catalogue: 61/62 micro-controller, 74
    # NVLink; NVLink 5's 144-150 when the driver calls them Fatal). Xid 13/31/43/45 are the
    # program's own faults (an illegal access, a killed process) and stay unread here.
    pattern(GPU_XID, r"NVRM: Xid \([^)]*\): (?P<xid>" + "|".join(
                str(x) for x, m in XIDS.items() if m.fault == "node"
                and x not in (48, 63, 64, 79, 94, 95, 119, 120)) + r")\b|"
            r"NVRM: Xid \([^)]*\): (?P<xid5>14[4-9]|150)\b.*\bFatal\b",
            "ddpcheck run --stages node (GPU health per node)", combine=lambda hits: _xid(hits)),
    # CUDA's own word for an NVLink fault: cudaErrorNvlinkUncorrectable (220; the runtime's
    # and driver's strings "uncorrectable NVLink error (was) detected during the execution").
    pattern(NVLINK_DOWN, r"uncorrectable NVLink error (?:was )?detected|"
            r"cudaErrorNvlinkUncorrectable|CUDA_ERROR_NVLINK_UNCORRECTABLE",
            "ddpcheck run --stages node (NVLink state per GPU)"),
    # c10/cuda: cudaErrorNoDevice with GPUs installed means CUDA_VISIBLE_DEVICES hides them
    # cudaErrorSystemNotReady (802), CUDA runtime API: "the system is not yet ready to start
    # any CUDA work ... all required driver daemons are actively running" (Fabric Manager).
    pattern(FABRIC_MANAGER_NOT_READY,
            r"system not yet initialized|cudaErrorSystemNotReady|CUDA error(?: code)?:? 802\b|"
            r"runtime error \(802\)", "ddpcheck run --stages node (GPU and NVLink fabric state)"),
    # Who else prints it: c10 device_count_ensure_non_zero raises it on cudaErrorNoDevice
    # (CUDAFunctions.cpp), which CUDA returns whenever the process sees no GPU: the variable
    # hides them, the job got no GPU (Slurm's cgroup hides /dev/nvidia*), a container started
    # without GPUs. One fact, "this process sees no GPU", which the code and the cause below
    # say; kept a cause (as a hint, a quoted source line of a notebook traceback outranked it).
    # (HIP's hipErrorNoDevice is "no ROCm-capable device is detected", hip_error.cpp)
    pattern(CUDA_VISIBLE_DEVICES_INVALID,
            r"No (?:CUDA|HIP) GPUs are available|no (?:CUDA|ROCm)-capable device is detected",
            "ddpcheck run --stages node (compares torch's GPUs with nvidia-smi)",
            cause="CUDA found no device: CUDA_VISIBLE_DEVICES is empty or names GPUs that do "
                  "not exist on this node (or the job was given no GPU: --gres=gpu:N, or a "
                  "container started without --gpus)"),
    # ProcessGroupNCCL's constructor (ProcessGroupNCCL.cpp, torch <= 2.13); torch 2.14+ checks
    # first in Python (distributed_c10d.py _nccl2_device: "nccl2 requires at least one CUDA
    # device"; a real run under 2.15's CUDA build on a node without a GPU:
    # runs-torch2.15/s32-nccl-on-cpu-torch)
    pattern(CUDA_UNUSABLE, r"ProcessGroupNCCL is only supported with GPUs, no GPUs found|"
            r"nccl2 requires at least one CUDA device",
            "ddpcheck run --stages node"),
    # cudaErrorNoKernelImageForDevice (209): who else prints it: any binary without the GPU's
    # architecture, torch's own kernels or an extension's (the cause names both); HIP's
    # hipErrorNoBinaryForGpu ("Unable to find code object for all current devices", ROCm
    # builds without the GPU's gfx target); torch's
    # own start-up warnings for it (torch/cuda/__init__.py _check_cubins, 1.x-2.x: "<GPU>
    # with CUDA capability sm_120 is not compatible with the current PyTorch installation";
    # _warn_unsupported_code, 2.8+: "Your installed torch==X does not include kernels for this
    # GPU"): warnings, which yield to a failure of another kind (engine _grade).
    pattern(CUDA_UNUSABLE, r"no kernel image is available for execution on the device|"
            r"hipErrorNoBinaryForGpu|Unable to find code object for all current devices|"
            r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation|"
            r"does not include kernels for this GPU",
            "ddpcheck run --stages node",
            cause="this torch build (or a CUDA extension it loads: flash-attn, apex, xformers) "
                  "has no kernels for the GPU's architecture (built for other compute "
                  "capabilities, e.g. an old torch on a new GPU)",
            fix="install a torch build whose CUDA version supports the GPU (pip install torch "
                "--index-url https://download.pytorch.org/whl/cuXYZ) and rebuild extensions "
                "for it (TORCH_CUDA_ARCH_LIST); torch.cuda.get_arch_list() lists what the "
                "build supports"),
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
    # ProcessGroupNCCL (torch 2.3+, a group bound to one device by init_process_group(...,
    # device_id=...)): "DistBackendError: Attempt to perform collective on tensor not on
    # device passed to init_process_group" (stop-33b dev gh45-pytorch-146767). The rank bound
    # one GPU and put its tensor on another: most often every rank's tensors on cuda:0
    # (torch.cuda.set_device(local_rank) missing) while device_id follows the local rank, or
    # device_id the same on every rank. A hint: the two may simply disagree on one rank.
    pattern(DUPLICATE_DEVICE,
            r"Attempt to perform collective on tensor not on device passed to "
            r"init_process_group", "ddpcheck run --stages node,placement",
            cause="the rank's tensor is on another GPU than the device_id it gave "
                  "init_process_group: ranks that put their tensors on one GPU (cuda:0, no "
                  "torch.cuda.set_device(local_rank)) while device_id follows the local rank, "
                  "or a device_id that is the same on every rank",
            fix="bind each rank to its own GPU once, and use it everywhere: local_rank = "
                "int(os.environ['LOCAL_RANK']); torch.cuda.set_device(local_rank); "
                "init_process_group(..., device_id=torch.device('cuda', local_rank)); "
                "model.to(local_rank)",
            grade=HINT),
    # the CUDA stack itself: driver, runtime and build against the GPU (families/cudastack)
    *cudastack.PATTERNS,
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
    # (the error's names too: cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY,
    # hipErrorOutOfMemory, as CuPy / Numba / HIP print them)
    # (torch <= 1.4 THC: "cuda runtime error (2) : out of memory at ...", "THCudaCheck FAIL
    # file=... error=2 : out of memory")
    pattern(CUDA_OOM, r"(?:CUDA|HIP) out of memory|CUDA error: out of memory|"
            r"(?<!ray\.exceptions\.)(?<!java\.lang\.)OutOfMemoryError|"
            r"cuda runtime error \(2\) : out of memory|\berror=2 : out of memory|"
            r"CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|"
            r"hipErrorOutOfMemory",
            "ddpcheck run --stages node (GPU memory in use by other processes)"),
]


def _xid(hits: Sequence[Hit]) -> Problem:
    """A node-fault Xid, named and actioned as NVIDIA's catalogue (and ddpcheck run) does."""
    m = hits[0].match
    xid = int(m["xid"] or m["xid5"])
    meaning = XIDS.get(xid, NVLINK5_FATAL)
    return GPU_XID.problem(
        observed_lines(hits),
        cause=f"NVIDIA's Xid catalogue: Xid {xid} is '{meaning.name}', a fault of the GPU or "
              "its driver, not of the program",
        fix=f"drain the node; {meaning.action} ({CATALOGUE_URL})", **where(hits))


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
