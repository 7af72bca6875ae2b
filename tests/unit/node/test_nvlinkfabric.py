"""NVLink links down and the Fabric Manager, on recorded `nvidia-smi nvlink -s` outputs."""

from __future__ import annotations

from pathlib import Path

from ddpcheck.node import nvlinkfabric

DATA = Path(__file__).parents[2] / "data" / "gpu"


def links(name: str):
    return nvlinkfabric.parse_nvlink_status((DATA / name).read_text())


def test_healthy_gb200_links_are_all_up():
    gpus = links("nvidia-smi-nvlink-s-gb200.txt")
    assert len(gpus[0].active) == 18 and not gpus[0].inactive
    assert nvlinkfabric.check_nvlinks(gpus, nvswitch=True) == []


def test_links_down_on_a_v100_are_a_problem_naming_gpu_and_links():
    found = nvlinkfabric.check_nvlinks(links("nvidia-smi-nvlink-s-v100-links-down.txt"), False)
    assert [f.problem.code for f in found] == ["nvlink-down"]
    assert "GPU 3" in found[0].problem.observed and "link 3,5 inactive, 4 of 6 up" in \
        found[0].problem.observed
    assert "state=drain" in found[0].problem.fix


def test_a_board_without_any_link_up_is_judged_only_on_nvswitch_systems():
    text = "GPU 0: NVIDIA A100 80GB PCIe (UUID: GPU-a)\n\t Link 0: <inactive>\n"
    gpus = nvlinkfabric.parse_nvlink_status(text)
    assert nvlinkfabric.check_nvlinks(gpus, nvswitch=False) == []
    assert [f.problem.code for f in nvlinkfabric.check_nvlinks(gpus, True)] == ["nvlink-down"]


def test_fabric_manager_states():
    assert nvlinkfabric.check_fabric_manager("active\n", 4) == ([], [])
    assert nvlinkfabric.check_fabric_manager("failed\n", 0) == ([], [])
    found, _ = nvlinkfabric.check_fabric_manager("failed\n", 4)
    assert found[0].problem.code == "fabric-manager-down"
    assert "nvidia-fabricmanager is failed" in found[0].problem.observed
    _, unread = nvlinkfabric.check_fabric_manager(
        "System has not been booted with systemd as init system (PID 1). Can't operate.", 4)
    assert "not readable" in unread[0].text()


def test_nvswitch_devices_are_found_from_device_files(tmp_path):
    (tmp_path / "nvidia-nvswitch0").touch()
    (tmp_path / "nvidia0").touch()
    assert nvlinkfabric.nvswitch_devices(str(tmp_path), str(tmp_path / "none")) == [
        str(tmp_path / "nvidia-nvswitch0")]
