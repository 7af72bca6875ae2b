"""The CUDA stack under torch (families/cudastack.py): the driver, the runtime, the build."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause


def test_a_driver_too_old_in_torchs_and_the_runtimes_words_is_cuda_unusable():
    for line in (
            # c10/cuda/CUDAFunctions.cpp device_count_impl
            "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). "
            "Please update your GPU driver by downloading and installing a new version from "
            "the URL: http://www.nvidia.com/Download/index.aspx",
            # cudaErrorUnsupportedPtxVersion (222), as torch >= 2.1 prints it
            "torch.AcceleratorError: CUDA error: the provided PTX was compiled with an "
            "unsupported toolchain.",
            # cudaErrorCallRequiresNewerDriver (36)
            "RuntimeError: CUDA error: API call is not supported in the installed CUDA driver",
            # cudaErrorStubLibrary (34)
            "RuntimeError: CUDA error: CUDA driver is a stub library",
            # nvidia-smi after a driver upgrade without a reboot
            "Failed to initialize NVML: Driver/library version mismatch"):
        e = explain_texts([("r.log", line + "\n")])
        assert e.problems[0].code == "cuda-unusable" and not e.undetermined, line
    assert "driver" in first_fix("The NVIDIA driver on your system is too old (found version "
                                 "11040).")
    # near miss: a healthy driver banner
    assert first_cause("NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2"
                       ) == "none"


def first_fix(*lines: str) -> str:
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    return e.problems[0].fix if e.problems else ""


def test_a_gpu_arch_the_build_lacks_in_torchs_warning_and_hips_words():
    warn = ("UserWarning: NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible "
            "with the current PyTorch installation.")
    assert first_cause(warn, "RuntimeError: CUDA error: no kernel image is available for "
                       "execution on the device") == "cuda-unusable"
    assert first_cause("\"hipErrorNoBinaryForGpu: Unable to find code object for all current "
                       "devices!\"") == "cuda-unusable"
    # the warning alone is a condition (a warning grade), and a failure of another kind wins
    assert first_cause(warn, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                       "2.00 GiB") == "cuda-out-of-memory"


def test_cuda_unknown_error_at_start_is_a_cuda_unusable_hint():
    # c10/cuda/CUDAFunctions.cpp, cudaErrorUnknown from cudaGetDeviceCount
    line = ("RuntimeError: CUDA unknown error - this may be due to an incorrectly set up "
            "environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start. "
            "Setting the available devices to be zero.")
    e = explain_texts([("r.log", line + "\n")])
    assert e.problems[0].code == "cuda-unusable" and "nvidia-uvm" in e.problems[0].cause
    assert first_cause(line, "RuntimeError: CUDA error: invalid device ordinal") == \
        "invalid-device-ordinal"


def test_a_cpu_only_torch_asked_for_cuda():
    assert first_cause('  File "/x/torch/cuda/__init__.py", line 310, in _lazy_init',
                       '    raise AssertionError("Torch not compiled with CUDA enabled")',
                       "AssertionError: Torch not compiled with CUDA enabled") == \
        "cpu-only-torch-on-gpu-node"


def test_rocm_builds_without_the_gpus_target():
    assert first_cause("rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary"
                       ".dat: Illegal seek for GPU arch : gfx1032") == "cuda-unusable"
    e = explain_texts([("r.log", "RuntimeError: HIP error: invalid device function\n")])
    assert e.problems[0].code == "cuda-unusable" and not e.undetermined
    assert first_cause("RuntimeError: No HIP GPUs are available") == \
        "cuda-visible-devices-invalid"
    # near miss: a rocBLAS message about something else
    assert first_cause("rocBLAS warning: No paths matched /opt/rocm/lib/rocblas/library/*gfx90a"
                       ) != "cuda-unusable"


def test_a_cpu_builds_missing_cuda_binding_is_cpu_only_torch():
    # runs/s32b-cuda-on-cpu-torch: torch.cuda.set_device skips _lazy_init's own message
    assert first_cause("AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'") \
        == "cpu-only-torch-on-gpu-node"
    assert first_cause("AttributeError: module 'torch' has no attribute 'compile'") != \
        "cpu-only-torch-on-gpu-node"
