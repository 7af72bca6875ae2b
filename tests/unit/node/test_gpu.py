"""Tests for ddpcheck.node.gpu: nvidia-smi parsing, CUDA_VISIBLE_DEVICES, device plan, GPU counts.

Pure unit tests on recorded nvidia-smi output (tests/data/gpu/); nothing here needs a GPU.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

import pytest

from ddpcheck import diagnoses as dg
from ddpcheck.node import gpu
from ddpcheck.node.gpu import GpuInfo, MigDevice
from tests.helpers.paths import DATA

DATA = DATA / "gpu"


def read(name: str) -> str:
    return (DATA / name).read_text()


A100X8 = gpu.parse_nvidia_smi_list(read("nvidia-smi-L-a100x8.txt"))
H100X4 = gpu.parse_nvidia_smi_list(read("nvidia-smi-L-h100x4.txt"))
MIG = gpu.parse_nvidia_smi_list(read("nvidia-smi-L-a100-mig.txt"))
A100X7 = gpu.parse_nvidia_smi_list(read("nvidia-smi-L-a100x7-of-8.txt"))


def codes(problems: Sequence[dg.Problem]) -> list[str]:
    return [p.code for p in problems]


# --- nvidia-smi -L / --query-gpu ------------------------------------------------------------

def test_list_a100x8() -> None:
    assert [g.index for g in A100X8] == list(range(8))
    assert A100X8[0] == GpuInfo(0, "NVIDIA A100-SXM4-80GB",
                                "GPU-7a139639-df4b-4d8a-88e2-e74e60048780")
    assert all(g.mig == () for g in A100X8)


def test_list_h100x4() -> None:
    assert len(H100X4) == 4
    assert {g.name for g in H100X4} == {"NVIDIA H100 80GB HBM3"}
    assert H100X4[3].uuid == "GPU-7257a403-4998-4f64-9652-4e1f667edb55"


def test_list_mig_devices_belong_to_gpu_above() -> None:
    assert len(MIG) == 2
    assert [m.profile for m in MIG[0].mig] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert MIG[0].mig[0] == MigDevice("3g.40gb", 0, "MIG-e69c4f5b-8fa5-4a99-841f-c776b8c80768")
    assert MIG[0].mig[3].index == 3
    assert MIG[1].mig == ()


def test_list_old_driver_mig_format() -> None:
    text = ("GPU 0: A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
            "  MIG 3g.20gb Device 0: (UUID: MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/1/0)\n")
    [g] = gpu.parse_nvidia_smi_list(text)
    assert g.mig == (MigDevice("3g.20gb", 0, "MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/1/0"),)


def test_list_skips_error_lines_and_stray_mig() -> None:
    assert len(A100X7) == 7
    assert gpu.lost_gpus(read("nvidia-smi-L-a100x7-of-8.txt")) == ["0000:4E:00.0"]
    assert gpu.lost_gpus(read("nvidia-smi-L-a100x8.txt")) == []
    assert gpu.parse_nvidia_smi_list("  MIG 1g.10gb Device 0: (UUID: MIG-x)\n") == []
    driver_gone = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                   "driver. Make sure that the latest NVIDIA driver is installed and running.\n")
    assert gpu.parse_nvidia_smi_list(driver_gone) == []


def test_query_csv() -> None:
    gpus = gpu.parse_nvidia_smi_query(read("nvidia-smi-query-a100x8.csv"))
    assert len(gpus) == 8
    assert gpus[3] == GpuInfo(3, "NVIDIA A100-SXM4-80GB",
                              "GPU-9e5928b4-9494-4386-867a-adbe6e0a1692", (),
                              "00000000:4E:00.0", 81920, "535.129.03")
    assert [g.uuid for g in gpus] == [g.uuid for g in A100X8]


def test_query_csv_unknown_memory_and_junk_rows() -> None:
    text = ("0, NVIDIA A100-SXM4-80GB, GPU-aa, 00000000:07:00.0, [N/A], 535.129.03\n"
            "No devices were found\n"
            "index, name\n")
    [g] = gpu.parse_nvidia_smi_query(text)
    assert g.memory_mib is None and g.bus_id == "00000000:07:00.0"
    assert gpu.QUERY_ARGS[0].startswith("--query-gpu=index,name,uuid,pci.bus_id")


# --- running nvidia-smi ---------------------------------------------------------------------

def test_run_nvidia_smi_uses_runner_with_timeout() -> None:
    calls = []

    def runner(argv: Sequence[str], timeout: float) -> str:
        calls.append((tuple(argv), timeout))
        return read("nvidia-smi-L-h100x4.txt")

    assert gpu.list_gpus(runner) == H100X4
    assert calls == [(("nvidia-smi", "-L"), 5.0)]
    assert gpu.run_nvidia_smi(gpu.QUERY_ARGS, runner) is not None
    assert calls[-1][0] == ("nvidia-smi", *gpu.QUERY_ARGS)


def test_run_nvidia_smi_never_raises() -> None:
    def broken(argv: Sequence[str], timeout: float) -> str:
        raise RuntimeError("boom")

    assert gpu.run_nvidia_smi(runner=broken) is None
    assert gpu.list_gpus(lambda argv, timeout: None) is None


def test_subprocess_runner_absent_binary_and_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gpu.subprocess_runner(["ddpcheck-no-such-binary"], 5.0) is None
    assert gpu.subprocess_runner(["sh", "-c", "echo out; echo err >&2; exit 9"], 5.0) \
        == "out\nerr\n"

    def slow(*args: object, **kwargs: object) -> None:
        raise subprocess.TimeoutExpired("nvidia-smi", 5.0)

    monkeypatch.setattr(gpu.subprocess, "run", slow)
    assert gpu.run_nvidia_smi() is None


def test_subprocess_runner_passes_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        seen.update(kwargs, argv=argv)
        return subprocess.CompletedProcess(argv, 0, stdout="GPU 0: X (UUID: GPU-1)\n")

    monkeypatch.setattr(gpu.subprocess, "run", fake_run)
    assert gpu.list_gpus() == [GpuInfo(0, "X", "GPU-1")]
    assert seen["timeout"] == 5.0 and seen["argv"] == ["nvidia-smi", "-L"]
