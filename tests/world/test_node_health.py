"""A sick GPU is named in a real ``ddpcheck run`` report: a fake ``nvidia-smi`` on PATH.

World tier: the real launcher on this CPU-only host, with an ``nvidia-smi`` script that
answers each query with what a real one printed on a node where another job's process
holds 74,698 MiB of GPU 2 (the `-L` listing is another recorded node's: only its count
matters here; recorded outputs in tests/data/gpu, sources in SOURCES.md).
Node health runs in the launcher's preflight, before torchrun, without torch.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

pytestmark = pytest.mark.world
DATA = Path(__file__).parent.parent / "data" / "gpu"
LEFTOVER_GPU = "GPU 2 (GPU-f7c1496c-b7f5-b1d2-78ea-68826f778059)"


def fake_nvidia_smi(folder: Path, answers: dict[str, str]) -> dict[str, str]:
    """An nvidia-smi printing answers[pattern] for the first shell pattern its args match."""
    folder.mkdir(exist_ok=True)
    cases = []
    for i, (pattern, name) in enumerate(answers.items()):
        (folder / f"{i}.txt").write_text((DATA / name).read_text())
        cases.append(f"  {pattern}) cat '{folder / f'{i}.txt'}' ;;")
    script = folder / "nvidia-smi"
    script.write_text("#!/bin/sh\ncase \"$*\" in\n" + "\n".join(cases) +
                      "\n  *) exit 0 ;;\nesac\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


SICK = {"-L": "nvidia-smi-L-h100x4.txt",
        "--query-gpu=*": "nvidia-smi-query-memory-used-4gpu.csv",
        "--query-compute-apps=*": "nvidia-smi-compute-apps-leftover.csv",
        "--query-remapped-rows=*": "nvidia-smi-compute-apps-none.csv",
        "nvlink*": "nvidia-smi-nvlink-s-gb200.txt"}


def test_a_gpu_held_by_another_jobs_process_stops_the_run_naming_gpu_and_pid(
        ddpcheck_run, tmp_path):
    env = fake_nvidia_smi(tmp_path / "bin", SICK)
    run = ddpcheck_run("--probe-timeout", "5", env=env)
    assert run.finish(timeout=90) == 1, run.stdout + run.stderr
    report = run.report()
    assert report["ready"] is False
    held = [p for p in report["problems"] if p["code"] == "gpu-memory-in-use"]
    assert held, [p["code"] for p in report["problems"]]
    assert any(p["observed"].startswith(LEFTOVER_GPU) and "pid 3891903 (74698 MiB)"
               in p["observed"] for p in held), held
    assert all(p["stage"] == "preflight" and "kill" in p["fix"] for p in held)
    assert "FAIL  gpu-memory-in-use" in run.stdout and LEFTOVER_GPU in run.stdout
    assert not list(run.results_dir.glob("rank-*.jsonl")), "torchrun must not have started"


def test_a_slow_pcie_link_is_shown_and_fails_only_with_strict_health(ddpcheck_run, tmp_path):
    slow = {**SICK, "--query-gpu=*": "nvidia-smi-query-pcie-x8-of-x16.csv",
            "--query-compute-apps=*": "nvidia-smi-compute-apps-none.csv"}
    env = fake_nvidia_smi(tmp_path / "bin", slow)
    run = ddpcheck_run("--stages", "preflight", env=env)
    assert run.finish(timeout=90) == 0, run.stdout + run.stderr
    notes = run.report()["notes"]
    assert any("gpu-pcie-degraded" in n and "GPU 1: PCIe link x8 of x16" in n for n in notes)
    strict = ddpcheck_run("--stages", "preflight", "--strict-health", env=env)
    assert strict.finish(timeout=90) == 1, strict.stdout + strict.stderr
    assert [p["code"] for p in strict.report()["problems"]] == ["gpu-pcie-degraded"]


def test_a_healthy_recorded_node_reads_ready_with_no_health_note(ddpcheck_run, tmp_path):
    healthy = {**SICK, "--query-gpu=*": "nvidia-smi-query-pcie-l40s-idle.csv",
               "--query-compute-apps=*": "nvidia-smi-compute-apps-none.csv",
               "--query-remapped-rows=*": "nvidia-smi-query-remapped-rows.csv"}
    env = fake_nvidia_smi(tmp_path / "bin", healthy)
    run = ddpcheck_run("--stages", "preflight", env=env)
    assert run.finish(timeout=90) == 0, run.stdout + run.stderr
    report = run.report()
    assert report["ready"] is True and report["problems"] == []
    assert not [n for n in report["notes"] if n.startswith("health warning")], report["notes"]
