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
