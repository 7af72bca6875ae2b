"""CUDA, Xid, DDP usage and NCCL plugin lines; warnings are not failures."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause


def test_cuda_and_gpu_health():
    assert first_cause("RuntimeError: No CUDA GPUs are available") == \
        "cuda-visible-devices-invalid"
    assert first_cause("NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE (double bit error)") == \
        "gpu-ecc-error"
    assert first_cause("RuntimeError: Distributed package doesn't have NCCL built in") == \
        "backend-unavailable"
    assert first_cause("node:1:1 [0] NCCL WARN Cuda failure 'out of memory'") == \
        "cuda-out-of-memory"


def test_ddp_usage_errors():
    assert first_cause("RuntimeError: Expected to mark a variable ready only once.") == \
        "ddp-param-ready-twice"
    assert first_cause("Parameter indices which did not receive grad for rank 1: 17 18") == \
        "ddp-unused-parameters"
    assert first_cause("RuntimeError: Tensors must be CUDA and dense") == "nccl-cpu-tensor"


def test_an_unloadable_net_plugin_but_not_an_absent_one():
    assert first_cause("[0] NCCL INFO NET/Plugin : dlerror=/opt/efa/lib/libfabric.so.1: "
                       "version `FABRIC_1.7' not found (required by libnccl-net.so)") == \
        "nccl-net-plugin-unusable"
    assert first_cause("[0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open "
                       "shared object file: No such file or directory") == "none"


def test_warnings_and_nccl_info_are_a_healthy_log():
    e = explain_texts([("ok.log", "[W reducer.cpp:1303] Warning: find_unused_parameters=True "
                        "was specified in DDP constructor, but did not find any unused "
                        "parameters in the forward pass.\nnode:1:1 [0] NCCL INFO TUNER/Plugin: "
                        "Failed to find ncclTunerPlugin_v3 symbol.\nepoch 3 loss 0.12\n")])
    assert e.exit_code == 0 and e.verdict().startswith("NO FAILURE FOUND")


def test_a_torch_build_without_kernels_for_the_gpu():
    assert first_cause("RuntimeError: CUDA error: no kernel image is available for execution "
                       "on the device") == "cuda-unusable"


def test_a_busy_gpu_is_ranks_sharing_an_exclusive_mode_gpu_in_both_cuda_wordings():
    for line in ("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
                 "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable"):
        e = explain_texts([("r.log", line + "\n")])
        assert e.problems[0].code == "duplicate-device" and not e.undetermined
        assert "LOCAL_RANK" in e.problems[0].fix and "nvidia-smi" in e.problems[0].fix
    # a GPU that is merely busy computing is no CUDA error
    assert first_cause("GPU 0 is busy: utilisation 100%\n") != "duplicate-device"


def test_cuda_system_not_ready_is_the_fabric_manager():
    # cudaErrorSystemNotReady (802), as torch and nccl-tests print it
    assert first_cause("RuntimeError: CUDA error: system not yet initialized") == \
        "fabric-manager-not-ready"
    assert first_cause("node1: Test CUDA failure common.cu:941 'system not yet initialized'") \
        == "fabric-manager-not-ready"
    assert first_cause("THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=47 "
                       "error=802 : system not yet initialized") == "fabric-manager-not-ready"


def test_a_gpu_that_stopped_answering_is_lost():
    # the driver's message wraps; nvidia-smi on a GPU that no longer answers
    assert first_cause("[ 1843.4] NVRM: GPU 0000:c1:00.0: GPU has",
                       "               NVRM: fallen off the bus and is not responding to "
                       "commands.") == "gpu-lost"
    assert first_cause("Unable to determine the device handle for GPU0000:03:00.0: Unknown "
                       "Error") == "gpu-lost"


# --- CUDA runtime strings of other versions (cudaGetErrorString), torch's driver checks

def test_cuda_9_busy_or_unavailable_wording():
    assert first_cause("RuntimeError: cuda runtime error (46) : all CUDA-capable devices are "
                       "busy or unavailable at /pytorch/aten/src/THC/THCGeneral.cpp:51") == \
        "duplicate-device"


def test_driver_mismatch_and_missing_driver_are_cuda_unusable():
    for line in ("RuntimeError: CUDA error: system has unsupported display driver / cuda "
                 "driver combination",
                 "AssertionError: Found no NVIDIA driver on your system. Please check that you "
                 "have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download",
                 "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                 "driver. Make sure that the latest NVIDIA driver is installed and running."):
        assert first_cause(line) == "cuda-unusable", line


def test_rocm_out_of_memory_is_gpu_oom():
    assert first_cause("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB"
                       ) == "cuda-out-of-memory"


def test_nccl_numbered_cuda_failure_out_of_memory():
    # NCCL >= 2.19 include/checks.h prints the CUDA error number first
    assert first_cause("node1:1:1 [3] init.cc:1542 NCCL WARN Cuda failure 2 'out of memory'") \
        == "cuda-out-of-memory"


def test_an_illegal_memory_access_is_not_a_device_setup_problem():
    assert first_cause("RuntimeError: CUDA error: an illegal memory access was encountered") \
        not in {"cuda-unusable", "invalid-device-ordinal", "cuda-out-of-memory"}


OOM = ("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
       "has a total capacity of 79.15 GiB of which 3.75 MiB is free. Process 4243 has 38.00 GiB "
       "memory in use. Including non-PyTorch memory, this process has 41.00 GiB memory in use.")


def test_an_oom_on_a_gpu_another_worker_holds_is_a_duplicate_device():
    # CUDACachingAllocator.cpp (torch >= 2.1) lists the GPU's processes; elastic api.py
    # names each worker's pid
    assert first_cause(OOM, "ERROR:torch.distributed.elastic.multiprocessing.api:failed "
                       "(exitcode: 1) local_rank: 1 (pid: 4243) of binary: /usr/bin/python") == \
        "duplicate-device"


def test_an_oom_on_a_gpu_a_stranger_holds_stays_an_oom():
    assert first_cause(OOM, "ERROR:torch.distributed.elastic.multiprocessing.api:failed "
                       "(exitcode: 1) local_rank: 1 (pid: 5555) of binary: /usr/bin/python") == \
        "cuda-out-of-memory"


def test_other_words_for_a_gpu_that_stopped_answering():
    for line in ("Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  "
                 "Reboot the system to recover this GPU",
                 "[ 9912.1] NVRM: Xid (PCI:0000:3b:00): 119, pid=4242, name=python, Timeout "
                 "waiting for RPC from GSP0! Expected function 76 (GSP_RM_CONTROL)"):
        assert first_cause(line) == "gpu-lost", line


def test_an_application_xid_is_not_a_lost_gpu():
    # Xid 13 (graphics engine exception) and 31 (MMU fault) are the program's own faults
    assert first_cause("[ 9912.1] NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, Ch 00000018, "
                       "intr 10000000. MMU Fault") != "gpu-lost"


def test_cublas_alloc_failure_is_gpu_memory_and_other_cublas_errors_are_not():
    assert first_cause("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
                       "`cublasCreate(handle)`") == "cuda-out-of-memory"
    assert first_cause("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling "
                       "`cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb)`") != \
        "cuda-out-of-memory"


# --- stop 27 audit: the same causes in other producers' and versions' words

def test_torch_asserting_an_invalid_device_id_is_the_ordinal():
    # torch/cuda/__init__.py get_device_properties (1.x-2.13): index not below device_count()
    assert first_cause('  File "/x/torch/cuda/__init__.py", line 469, in get_device_properties',
                       "    raise AssertionError(\"Invalid device id\")",
                       "AssertionError: Invalid device id") == "invalid-device-ordinal"
    # the driver API's and HIP's names for it, as CuPy / HIP print them
    assert first_cause("cupy_backends.cuda.api.runtime.CUDARuntimeError: "
                       "cudaErrorInvalidDevice: invalid device ordinal") == \
        "invalid-device-ordinal"
    assert first_cause("RuntimeError: HIP error: hipErrorInvalidDevice") == \
        "invalid-device-ordinal"
    # near miss: a user's own message about a device id
    assert first_cause("ValueError: Invalid device id in config: gpu") != \
        "invalid-device-ordinal"


def test_atens_device_count_assertion_is_an_ordinal_hint():
    # ATen/cuda/CUDAContext.cpp getDeviceProperties AT_ASSERT, wrapped by torch.cuda lazy init
    line = ("RuntimeError: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED at "
            "\"../aten/src/ATen/cuda/CUDAContext.cpp\":50, please report a bug to PyTorch. "
            "device=1, num_gpus=")
    e = explain_texts([("r.log", line + "\n")])
    assert e.problems[0].code == "invalid-device-ordinal" and not e.undetermined
    # a line that names its cause outranks the hint
    assert first_cause(line, "RuntimeError: The NVIDIA driver on your system is too old "
                       "(found version 10010).") == "cuda-unusable"


def test_rocm_and_error_name_wordings():
    assert first_cause("RuntimeError: HIP error: no ROCm-capable device is detected") == \
        "cuda-visible-devices-invalid"
    assert first_cause("numba.cuda.cudadrv.driver.CudaAPIError: [2] Call to cuMemAlloc "
                       "results in CUDA_ERROR_OUT_OF_MEMORY") == "cuda-out-of-memory"
    assert first_cause("cupy_backends.cuda.api.runtime.CUDARuntimeError: "
                       "cudaErrorECCUncorrectable: uncorrectable ECC error encountered") == \
        "gpu-ecc-error"
    assert first_cause("pynvml.nvml.NVMLError_GPUIsLost: GPU is lost") == "gpu-lost"


def test_node_fault_xids_are_gpu_xid_errors_and_program_xids_are_not():
    # NVIDIA's Xid catalogue via ddpcheck/node/xid.py: 74 NVLink, 62 micro-controller halt
    for line, xid in (("[ 812.3] NVRM: Xid (PCI:0000:3b:00): 74, pid=4242, name=python, "
                       "NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, "
                       "0x0, 0x0)", 74),
                      ("NVRM: Xid (PCI:0000:b1:00): 62, pid='<unknown>', name=<unknown>, "
                       "2a0f8(1230) 00000000 00000000", 62),
                      ("NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 "
                       "(0x00000000 0x00000000)", 149)):
        e = explain_texts([("kern.log", line + "\n")])
        assert e.problems[0].code == "gpu-xid-error", line
        assert f"Xid {xid}" in e.problems[0].cause and "xid-errors" in e.problems[0].fix
    # Xid 13 (graphics engine exception) is the program's own fault; NVLink 5 nonfatal too
    assert first_cause("NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, Graphics Exception") != \
        "gpu-xid-error"
    assert first_cause("NVRM: Xid (PCI:0019:01:00): 149, NETIR Nonfatal XC0 i0 Link -1") != \
        "gpu-xid-error"


def test_cudas_uncorrectable_nvlink_error_is_nvlink_down():
    # cudaErrorNvlinkUncorrectable (220), runtime and driver wordings
    for line in ("RuntimeError: CUDA error: uncorrectable NVLink error was detected during the "
                 "execution",
                 "CUDA_ERROR_NVLINK_UNCORRECTABLE: uncorrectable NVLink error detected during "
                 "the execution"):
        assert first_cause(line) == "nvlink-down", line
    assert first_cause("NVLink error counters: 0 replay errors") != "nvlink-down"


def test_old_thc_and_container_wordings():
    # torch <= 1.4 THC (aten/src/THC/THCGeneral.cpp, THCCachingAllocator)
    assert first_cause("RuntimeError: cuda runtime error (2) : out of memory at "
                       "/pytorch/aten/src/THC/THCCachingHostAllocator.cpp:278") == \
        "cuda-out-of-memory"
    assert first_cause("THCudaCheck FAIL file=/pytorch/aten/src/THC/generic/THCStorage.cu "
                       "line=58 error=2 : out of memory") == "cuda-out-of-memory"
    assert first_cause("RuntimeError: cuda runtime error (30) : unknown error at "
                       "/pytorch/aten/src/THC/THCGeneral.cpp:50") == "cuda-unusable"
    # a THC unknown error elsewhere (a kernel's) is not CUDA failing to start
    assert first_cause("RuntimeError: cuda runtime error (30) : unknown error at "
                       "/pytorch/aten/src/THC/generic/THCTensorMath.cu:35") != "cuda-unusable"
    # libnvidia-container: the image needs a newer driver than the host's
    assert first_cause("docker: Error response from daemon: failed to create shim task: OCI "
                       "runtime create failed: nvidia-container-cli: requirement error: "
                       "unsatisfied condition: cuda>=12.8, please update your driver to a newer "
                       "version, or use an earlier cuda container: unknown.") == "cuda-unusable"


def test_a_checkpoint_saved_on_a_gpu_the_process_does_not_see():
    # torch/serialization.py validate_cuda_device
    e = explain_texts([("r.log", "RuntimeError: Attempting to deserialize object on CUDA device "
                        "3 but torch.cuda.device_count() is 1. Please use torch.load with "
                        "map_location to map your storages to an existing device.\n")])
    assert e.problems[0].code == "invalid-device-ordinal"
    assert "map_location" in e.problems[0].fix and "cuda:3" in e.problems[0].cause
    # under srun's per-task binding it stays torch.load's (map_location is the fix)
    assert first_cause("#SBATCH --gpus-per-task=1", "RuntimeError: Attempting to deserialize "
                       "object on CUDA device 3 but torch.cuda.device_count() is 1.") == \
        "invalid-device-ordinal"
    # the CPU-only form names no index: not this rule
    assert first_cause("RuntimeError: Attempting to deserialize object on a CUDA device but "
                       "torch.cuda.is_available() is False.") != "invalid-device-ordinal"


def test_lightning_asking_for_more_gpus_than_the_process_sees():
    # lightning/fabric/utilities/device_parser.py _sanitize_gpu_ids
    lines = ("lightning.fabric.utilities.exceptions.MisconfigurationException: You requested "
             "gpu: [0, 1]", " But your machine only has: [0]")
    assert first_cause(*lines) == "invalid-device-ordinal"
    # with srun's per-task binding in the script: that binding
    assert first_cause("#SBATCH --ntasks-per-node=2", "#SBATCH --gpus-per-task=1", *lines) == \
        "srun-device-ordinal"
    # no GPU at all: several causes, not an ordinal
    assert first_cause("pytorch_lightning.utilities.exceptions.MisconfigurationException: You "
                       "requested GPUs: [0]", " But your machine only has: []") != \
        "invalid-device-ordinal"


def test_the_ordinals_error_name_is_not_the_device_functions():
    # torch >= 2.4 appends "Search for `cudaError...'" to every CUDA error
    assert first_cause("torch.AcceleratorError: CUDA error: invalid device function",
                       "Search for `cudaErrorInvalidDeviceFunction' in https://docs.nvidia.com/"
                       "cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.") \
        == "cuda-unusable"


def test_nccl_on_a_host_without_a_gpu_in_both_torch_wordings_is_cuda_unusable():
    # ProcessGroupNCCL's constructor (<= 2.13) and 2.14+'s _nccl2_device
    # (runs-torch2.15/s32-nccl-on-cpu-torch: a CUDA build on a host with no GPU)
    assert first_cause("ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs "
                       "found!") == "cuda-unusable"
    assert first_cause("RuntimeError: nccl2 requires at least one CUDA device") == \
        "cuda-unusable"
