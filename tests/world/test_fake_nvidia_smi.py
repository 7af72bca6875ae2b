"""A GPU node whose GPUs cannot be used is never READY: a fake ``nvidia-smi`` on PATH.

World tier: real ``ddpcheck run`` (and, for the CPU-only torch case, real torchrun workers)
on this CPU-only host, with an ``nvidia-smi`` script that prints what a real one prints on a
broken node (recorded outputs in tests/data/gpu, sources in SOURCES.md) and exits non-zero
like it. Auto mode must end NOT READY with the driver's message and a fix, never fall back
to a quiet CPU/gloo READY.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

pytestmark = pytest.mark.world
DATA = Path(__file__).parent.parent / "data" / "gpu"


def torch_is_a_cuda_build() -> bool:
    """Whether the installed torch was built with CUDA (CPU builds' versions end in +cpu)."""
    from importlib.metadata import version

    return "+cpu" not in version("torch")


def fake_nvidia_smi(folder: Path, output: str, code: int) -> dict[str, str]:
    """Put an nvidia-smi printing `output` and exiting `code` first on PATH."""
    folder.mkdir(exist_ok=True)
    (folder / "out.txt").write_text(output)
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ncat '{folder / 'out.txt'}'\nexit {code}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


def problem(report: dict, code: str) -> dict:
    found = [p for p in report["problems"] if p["code"] == code]
    assert found, [p["code"] for p in report["problems"]]
    return found[0]


def test_failing_driver_stops_the_run_with_its_message(ddpcheck_run, tmp_path):
    env = fake_nvidia_smi(tmp_path / "bin", (DATA / "nvidia-smi-failed-no-driver.txt")
                          .read_text(), 9)
    run = ddpcheck_run("--probe-timeout", "5", env=env)
    assert run.finish(timeout=90) == 1, run.stdout + run.stderr
    report = run.report()
    assert report["ready"] is False
    p = problem(report, "gpu-driver-failed")
    assert "couldn't communicate with the NVIDIA driver" in p["observed"]
    assert "reboot" in p["fix"] and p["stage"] == "preflight"
    assert "FAIL  gpu-driver-failed" in run.stdout
    assert not list(run.results_dir.glob("rank-*.jsonl")), "torchrun must not have started"


def test_driver_library_mismatch_says_reboot(ddpcheck_run, tmp_path):
    env = fake_nvidia_smi(tmp_path / "bin", (DATA / "nvidia-smi-nvml-mismatch.txt")
                          .read_text(), 18)
    run = ddpcheck_run("--probe-timeout", "5", env=env)
    assert run.finish(timeout=90) == 1, run.stdout + run.stderr
    p = problem(run.report(), "gpu-driver-failed")
    assert "Driver/library version mismatch" in p["observed"]
    assert p["fix"].startswith("reboot the node")


def test_lost_gpu_is_named_by_bus_id(ddpcheck_run, tmp_path):
    env = fake_nvidia_smi(tmp_path / "bin", (DATA / "nvidia-smi-L-a100x7-of-8.txt")
                          .read_text(), 0)
    run = ddpcheck_run("--probe-timeout", "5", env=env)
    assert run.finish(timeout=90) == 1, run.stdout + run.stderr
    p = problem(run.report(), "gpu-lost")
    assert "0000:4E:00.0" in p["observed"] and "drain" in p["fix"]


def test_cpu_only_torch_on_a_gpu_node_is_not_ready(ddpcheck_run, tmp_path):
    two = "\n".join((DATA / "nvidia-smi-L-a100x8.txt").read_text().splitlines()[:2]) + "\n"
    env = fake_nvidia_smi(tmp_path / "bin", two, 0)
    run = ddpcheck_run("--probe-timeout", "10", "--stages", "node", env=env)
    assert run.finish(timeout=150) == 1, run.stdout + run.stderr
    report = run.report()
    if torch_is_a_cuda_build():  # PyPI's torch (2.15 here): no driver on this host for it
        assert sorted(problem(report, "cuda-unusable")["ranks"]) == [0, 1]
        return
    p = problem(report, "cpu-only-torch-on-gpu-node")
    assert "2 GPU" in p["observed"] and "CPU-only" in p["observed"]
    assert sorted(p["ranks"]) == [0, 1]  # auto nproc: one rank per listed GPU
    assert "pip install torch" in p["fix"]
