"""The CUDA stack under torch: a driver missing, too old or mismatched, a build without the GPU.

Runs wherever ``ddpcheck explain`` runs (a list of matchers; no torch). Part of the device
family (``families/device.py`` splices ``PATTERNS`` into its own, in this place of its
order). Every line here says that CUDA cannot run on this node with this torch, in the words
of the producer that found it: the CUDA runtime's error strings (``cudaGetErrorString``,
CUDA 9-12), c10/cuda/CUDAFunctions.cpp, torch/cuda/__init__.py, nvidia-smi/NVML,
libnvidia-container, HIP and rocBLAS. The codes are the run's own (``cuda-unusable``,
``cpu-only-torch-on-gpu-node``), so a node check and a log read say the same.
"""

from __future__ import annotations

from ddpcheck.diagnoses import CPU_ONLY_TORCH
from ddpcheck.explain.causality import HINT
from ddpcheck.explain.matching import pattern
from ddpcheck.node.gpustate import CUDA_UNUSABLE

PATTERNS = [
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
            r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver|"
            # nvidia-smi/NVML after a driver upgrade without a reboot (NVML_ERROR_LIB_RM_
            # VERSION_MISMATCH); the CUDA runtime's cudaErrorStubLibrary (34, CUDA >= 11.1:
            # the toolkit's stub libcuda loaded instead of the driver's)
            r"Failed to initialize NVML: Driver/library version mismatch|"
            r"CUDA driver is a stub library",
            "ddpcheck run --stages node",
            cause="the NVIDIA kernel driver is missing, not loaded, or of another version than "
                  "the user-space CUDA driver (libcuda) the job loads (a driver upgrade without "
                  "a reboot, or a container's compat libraries on an unsupported GPU)",
            fix="load / reinstall the NVIDIA driver matching libcuda (reboot after an "
                "upgrade); nvidia-smi must work on the node before the job starts"),
    # ROCm: rocBLAS has no kernels for the GPU's gfx target (rocBLAS handle.cpp "rocBLAS
    # error: Cannot read .../TensileLibrary.dat: ... for GPU arch : gfx1031"); "invalid device
    # function" (cudaErrorInvalidDeviceFunction 98 / hipErrorInvalidDeviceFunction: "not
    # compiled for the proper device architecture", also a kernel symbol a binary lacks) as a
    # hint.
    pattern(CUDA_UNUSABLE, r"rocBLAS error: Cannot read \S*TensileLibrary",
            "ddpcheck run --stages node",
            cause="this ROCm torch build has no rocBLAS kernels for the GPU's gfx target",
            fix="install a torch ROCm build that supports the GPU, or (consumer GPUs of a "
                "supported family) set HSA_OVERRIDE_GFX_VERSION to the supported target"),
    pattern(CUDA_UNUSABLE, r"(?:CUDA|HIP) error: invalid device function",
            "ddpcheck run --stages node", grade=HINT,
            cause="a kernel has no code for this GPU's architecture (a torch or extension "
                  "build for other compute capabilities / gfx targets)",
            fix="install builds (torch and extensions) compiled for the GPU's architecture "
                "(TORCH_CUDA_ARCH_LIST / PYTORCH_ROCM_ARCH when building)"),
    # A driver older than torch's CUDA, in the words of c10/cuda/CUDAFunctions.cpp
    # device_count_impl (cudaErrorInsufficientDriver with a driver present, torch 1.x-2.x:
    # "The NVIDIA driver on your system is too old (found version 11040)"), of the runtime
    # for a kernel whose PTX the driver cannot JIT (cudaErrorUnsupportedPtxVersion 222: "the
    # provided PTX was compiled with an unsupported toolchain.", a toolkit newer than the
    # driver) and for an API the driver lacks (cudaErrorCallRequiresNewerDriver 36, CUDA >=
    # 11.1: "API call is not supported in the installed CUDA driver"). Each is the driver's
    # age; the runtime API's error list names no other cause.
    pattern(CUDA_UNUSABLE,
            r"The NVIDIA driver on your system is too old|"
            r"PTX was compiled with an unsupported toolchain|cudaErrorUnsupportedPtxVersion|"
            r"API call is not supported in the installed CUDA driver|"
            r"cudaErrorCallRequiresNewerDriver|"
            # libnvidia-container's check of the image's NVIDIA_REQUIRE_CUDA against the host
            # driver: "nvidia-container-cli: requirement error: unsatisfied condition:
            # cuda>=12.8, please update your driver to a newer version, or use an earlier
            # cuda container" (the container never starts)
            r"requirement error: unsatisfied condition: cuda>=",
            "ddpcheck run --stages node",
            cause="the NVIDIA driver is older than the CUDA this torch (or an extension's "
                  "kernels) was built with",
            fix="upgrade the NVIDIA driver, or install a torch build for the driver's CUDA "
                "(nvidia-smi shows it; pip install torch --index-url "
                "https://download.pytorch.org/whl/cuXYZ)"),
    # c10/cuda/CUDAFunctions.cpp, cudaErrorUnknown from cudaGetDeviceCount: "CUDA unknown error
    # - this may be due to an incorrectly set up environment, e.g. changing env variable
    # CUDA_VISIBLE_DEVICES after program start" (often as torch's "CUDA initialization:"
    # warning). CUDA says nothing more: the variable changed after start, the nvidia-uvm module
    # not loaded (after a suspend or a driver reload), /dev/nvidia* not reachable. A hint.
    # (torch <= 1.4 THC: "cuda runtime error (30) : unknown error at .../THCGeneral.cpp:50",
    # the same cudaErrorUnknown from THCudaInit's device count)
    pattern(CUDA_UNUSABLE, r"CUDA unknown error - this may be due to an incorrectly set up|"
            r"cuda runtime error \(30\) : unknown error at \S*THCGeneral",
            "ddpcheck run --stages node", grade=HINT,
            cause="CUDA could not start and said only 'unknown error': CUDA_VISIBLE_DEVICES "
                  "changed after the program started, the nvidia-uvm kernel module is not "
                  "loaded (modprobe nvidia-uvm), or the process cannot open /dev/nvidia*"),
    # torch/cuda/__init__.py _lazy_init: a CPU-only torch asked for CUDA. Calls that skip
    # _lazy_init reach torch._C's CUDA bindings directly, which a CPU build lacks:
    # torch.cuda.set_device -> torch._C._cuda_setDevice (2.x), "AttributeError: module
    # 'torch._C' has no attribute '_cuda_setDevice'" (a real run: runs/s32b-cuda-on-cpu-torch,
    # read as rank-exited until stop 32).
    pattern(CPU_ONLY_TORCH, r"Torch not compiled with CUDA enabled|"
            r"module 'torch\._C' has no attribute '_cuda_\w+'",
            "ddpcheck run --stages node",
            cause="this torch is a CPU-only build (its version ends in +cpu, or it came from "
                  "the default index on a machine without CUDA) and the job asked for CUDA; on "
                  "a node without a GPU the job itself is on the wrong node"),
]
