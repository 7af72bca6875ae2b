"""Tests for node.gpustate on recorded real nvidia-smi outputs (tests/data/gpu/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpcheck.node import gpu, gpustate
from tests.helpers.paths import DATA

DATA = DATA / "gpu"
DEVS = [f"/dev/nvidia{i}" for i in range(8)]


def read(name: str) -> str:
    return (DATA / name).read_text()


def codes(problems) -> list[str]:
    return [p.code for p in problems]


def test_a_healthy_list_is_no_failure() -> None:
    assert gpustate.nvidia_smi_failure(read("nvidia-smi-L-a100x8.txt")) is None
    assert gpustate.nvidia_smi_failure(None) is None  # not installed: nothing to say here
    assert gpustate.check_node_gpus(read("nvidia-smi-L-a100x8.txt"), DEVS) == []
    assert gpustate.check_node_gpus(None, []) == []  # a CPU node


def test_driver_that_cannot_be_reached_is_a_problem_with_its_message() -> None:
    [p] = gpustate.check_node_gpus(read("nvidia-smi-failed-no-driver.txt"), DEVS)
    assert p.code == "gpu-driver-failed"
    assert "couldn't communicate with the NVIDIA driver" in p.observed
    assert "8 GPU device files (/dev/nvidia0 ... /dev/nvidia7) exist" in p.observed
    assert "reboot" in p.fix


def test_a_cuda_image_on_a_cpu_node_may_run_gloo() -> None:
    text = (DATA / "nvidia-smi-failed-no-driver.txt").read_text()
    assert gpustate.check_node_gpus(text, [], cpu_run=True) == []  # asked for gloo, no devices
    assert codes(gpustate.check_node_gpus(text, [])) == ["gpu-driver-failed"]  # auto mode
    assert codes(gpustate.check_node_gpus(text, DEVS, cpu_run=True)) == ["gpu-driver-failed"]


def test_driver_library_mismatch_names_both_versions_and_says_reboot() -> None:
    kernel = gpustate.kernel_driver_version(read("proc-driver-nvidia-version.txt"))
    assert kernel == "580.173.02"
    [p] = gpustate.check_node_gpus(read("nvidia-smi-nvml-mismatch.txt"), DEVS,
                                   kernel_version=kernel)
    assert "Driver/library version mismatch NVML library version: 550.144" in p.observed
    assert "580.173.02" in p.cause and p.fix.startswith("reboot the node")


def test_no_devices_found_is_a_failure_only_next_to_device_files() -> None:
    text = "No devices were found\n"
    assert gpustate.check_node_gpus(text, []) == []
    assert codes(gpustate.check_node_gpus(text, DEVS[:2])) == ["gpu-driver-failed"]


def test_lost_gpu_is_reported_with_its_bus_id() -> None:
    [p] = gpustate.check_node_gpus(read("nvidia-smi-L-a100x7-of-8.txt"), DEVS)
    assert p.code == "gpu-lost"
    assert "0000:4E:00.0" in p.observed and "lists 7 working GPU(s)" in p.observed
    [p] = gpustate.check_node_gpus(read("nvidia-smi-L-lost-only.txt"), DEVS[:1])
    assert p.code == "gpu-lost" and "0000:0B:00.0" in p.observed


def test_device_files_without_a_usable_torch_are_problems() -> None:
    [p] = gpustate.check_torch_sees_gpus(DEVS, 8, False, 0)
    assert p.code == "cpu-only-torch-on-gpu-node" and "gloo" in p.observed
    [p] = gpustate.check_torch_sees_gpus(DEVS, 0, True, 0,
                                         "The NVIDIA driver on your system is too old")
    assert p.code == "cuda-unusable" and p.observed.endswith("too old")
    assert gpustate.check_torch_sees_gpus(DEVS, 8, True, 8) == []
    assert gpustate.check_torch_sees_gpus([], 0, False, 0) == []  # a CPU node


def test_device_files_are_read_from_dev(tmp_path: Path) -> None:
    for name in ("nvidia0", "nvidia1", "nvidia10", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert [Path(p).name for p in gpustate.device_files(str(tmp_path))] == [
        "nvidia0", "nvidia1", "nvidia10"]


A100X8 = gpu.parse_nvidia_smi_list(read("nvidia-smi-L-a100x8.txt"))
MIG = gpu.parse_nvidia_smi_list(read("nvidia-smi-L-a100-mig.txt"))


@pytest.mark.parametrize("cvd, expected", [
    (None, 8), ("0,1,2,3", 4), ("-1", 0), ("", 0), ("0,1,-1,2", 2), ("5", 1)])
def test_cuda_device_count_follows_cuda_visible_devices(cvd, expected) -> None:
    assert gpustate.cuda_device_count(A100X8, cvd) == expected


def test_a_mig_list_is_one_device() -> None:
    uuids = ",".join(m.uuid for m in MIG[0].mig)
    assert gpustate.cuda_device_count(MIG, uuids) == 1
    assert gpustate.cuda_device_count(MIG, MIG[0].mig[2].uuid) == 1


def test_srun_task_with_its_own_device_is_alone_on_it() -> None:
    assert gpustate.device_slots(3, 8, 1, 1, srun_task=True) == (1, 0)
    assert gpustate.device_slots(3, 8, 8, 1, srun_task=True) == (8, 3)  # --gres, all visible
    assert gpustate.device_slots(3, 8, 1, 1, srun_task=False) == (8, 3)  # torchrun: shared
    assert gpustate.device_slots(1, 4, 2, 2, srun_task=True) == (1, 0)


@pytest.mark.parametrize("k, visible, expected", [
    (1, 8, [0, 1, 2, 3]),     # one GPU per rank: the local rank
    (2, 8, [0, 2, 4, 6]),     # --gpus-per-replica 2: each rank's replica starts at r*2
    (2, 4, [0, 2, 0, 2]),     # unfit (4 ranks x 2 > 4): wrapped; the node stage names it
])
def test_a_rank_binds_its_nccl_group_to_its_replicas_first_device(k, visible, expected):
    assert [gpustate.first_device(r, 4, visible, k, False) for r in range(4)] == expected


def test_an_srun_task_with_its_own_devices_binds_to_its_first_one():
    assert gpustate.first_device(3, 4, 2, 2, True) == 0  # --gpus-per-task=2: slot 0 of 1
