"""GPU health judged on recorded real query outputs: memory errors fail, speed is shown."""

from __future__ import annotations

from pathlib import Path

from ddpcheck.node import gpuhealth, gpuquery
from ddpcheck.node.gpuquery import GpuHealth

DATA = Path(__file__).parents[2] / "data" / "gpu"


def gpus_of(name: str) -> list[GpuHealth]:
    rows = gpuquery.parse_table((DATA / name).read_text()).rows
    return [g for g in (gpuquery.gpu_from_row(r) for r in rows) if g]


def codes(found) -> list[tuple[str, bool]]:
    return [(f.problem.code, f.performance_only) for f in found]


def test_idle_l40s_links_at_gen_1_are_power_saving_not_a_fault():
    assert gpuhealth.check_gpus(gpus_of("nvidia-smi-query-pcie-l40s-idle.csv"), []) == []


def test_a_lane_short_link_is_a_performance_finding_naming_the_gpu():
    found = gpuhealth.check_gpus(gpus_of("nvidia-smi-query-pcie-x8-of-x16.csv"), [])
    assert codes(found) == [("gpu-pcie-degraded", True)]
    assert found[0].problem.observed.startswith("GPU 1: PCIe link x8 of x16")


def test_generation_below_max_counts_only_on_a_busy_gpu():
    busy = GpuHealth(0, "00000000:18:00.0", "GPU-x", idle=False, pcie_gen=(3, 5),
                     pcie_width=(16, 16))
    assert codes(gpuhealth.check_speed(busy)) == [("gpu-pcie-degraded", True)]
    assert gpuhealth.check_speed(GpuHealth(0, idle=True, pcie_gen=(1, 5))) == []


def test_throttle_reasons_idle_is_healthy_slowdowns_are_shown():
    assert gpuhealth.check_gpus(gpus_of("nvidia-smi-query-throttle-idle.csv"), []) == []
    hot = GpuHealth(2, "00000000:2A:00.0", "GPU-a", slowdowns=("hw_thermal_slowdown",))
    f = gpuhealth.check_speed(hot)
    assert codes(f) == [("gpu-throttled", True)] and "HW thermal slowdown" in \
        f[0].problem.observed


def test_memory_errors_are_problems_with_the_drain_line():
    sick = GpuHealth(3, "00000000:4E:00.0", "GPU-4e", ecc_uncorrected=2, retired_pending=True,
                     remap_pending=True, remap_failed=True)
    found = gpuhealth.check_memory_errors(sick)
    assert [c for c, perf in codes(found) if not perf] == [
        "gpu-row-remap-failed", "gpu-row-remap-pending", "gpu-retired-pages-pending",
        "gpu-ecc-uncorrectable"]
    for f in found:
        assert "GPU 3 (00000000:4E:00.0, GPU-4e)" in f.problem.observed
        assert "scontrol update nodename=" in f.problem.fix and "state=drain" in f.problem.fix
    assert "RMA" in found[0].problem.fix and "nvidia-smi -r -i 00000000:4E:00.0" in \
        found[1].problem.fix


def test_a_previous_jobs_process_is_named_by_pid_and_memory():
    gpus = gpus_of("nvidia-smi-query-memory-used-4gpu.csv")
    apps = gpuquery.apps_from_rows(gpuquery.parse_table(
        (DATA / "nvidia-smi-compute-apps-leftover.csv").read_text()).rows)
    found = gpuhealth.check_leftovers(gpus, apps)
    assert codes(found) == [("gpu-memory-in-use", False)] * 3
    assert "pid 3891903 (74698 MiB)" in found[1].problem.observed
    assert found[1].problem.observed.startswith("GPU 2 (GPU-f7c1496c")


def test_memory_held_with_no_visible_process_is_named_too_but_not_idle_use():
    gpus = gpus_of("nvidia-smi-query-memory-used-4gpu.csv")
    found = gpuhealth.check_leftovers(gpus, [])
    assert [f.problem.observed.split(":")[0] for f in found] == ["GPU 2 (GPU-f7c1496c-b7f5-"
                                                                  "b1d2-78ea-68826f778059)"]
    assert gpuhealth.check_leftovers(gpus, [], apps_read=False) == []


def test_the_drivers_recovery_action_and_an_unregistered_fabric_are_problems():
    # Values as nvidia-smi prints them: gpu_recovery_action None / GPU Reset / Node Reboot /
    # Drain P2P / Drain and Reset; fabric.state Not Supported / Not Started / In Progress /
    # Completed (NVML nvmlGpuFabricState_t).
    fine = GpuHealth(0, recovery_action="None", fabric_state="Completed", fabric_status="Success")
    assert gpuhealth.check_recovery_and_fabric(fine) == []
    assert gpuhealth.check_recovery_and_fabric(GpuHealth(0, fabric_state="Not Supported")) == []
    sick = GpuHealth(5, "00000000:9B:00.0", "GPU-9b", recovery_action="Node Reboot",
                     fabric_state="In Progress", fabric_status="N/A")
    found = gpuhealth.check_recovery_and_fabric(sick)
    assert [f.problem.code for f in found] == ["gpu-recovery-action", "fabric-manager-down"]
    assert "reboot the node" in found[0].problem.fix and "state=drain" in found[0].problem.fix
    assert "fabric.state is In Progress" in found[1].problem.observed


def test_fabric_and_recovery_columns_are_read_by_name():
    text = ("index, fabric.state, fabric.status, gpu_recovery_action\n"
            "0, Completed, Success, None\n1, [N/A], [N/A], [N/A]\n")
    gpus = [gpuquery.gpu_from_row(r) for r in gpuquery.parse_table(text).rows]
    assert [(g.fabric_state, g.recovery_action) for g in gpus if g] == [
        ("Completed", "None"), (None, None)]
