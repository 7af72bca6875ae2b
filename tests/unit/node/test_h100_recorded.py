"""Node health read through the real readers from what an H100 node printed (stop 31).

Every command output below was recorded on the device tool's machine (one NVIDIA H100 80GB
HBM3, driver 580.159.04, NCCL 2.28.9, torch 2.11.0+cu130) by ``bench/gpu_record.sh``'s
shims while ``ddpcheck run`` ran there: idle, and with another process holding 60 GiB of
the GPU. The runner maps each command line to its recorded output, so the whole of
``read_health`` runs as it did there.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ddpcheck.launcher.nodehealth import HealthSources, read_health
from ddpcheck.node import gpuquery, ncclinfo

DATA = Path(__file__).parents[2] / "data" / "gpu"


def recorded(query: str, apps: str, tmp_path: Path):  # noqa: ANN201 - a gpu.Runner
    outputs = {
        "--query-gpu": query, "--query-remapped-rows": "nvidia-smi-query-remapped-rows-h100.csv",
        "--query-compute-apps": apps, "nvlink": "",  # a PCIe H100 prints nothing for nvlink -s
        "-L": "nvidia-smi-L-h100x1.txt", "dmesg": "dmesg-h100-nvrm-no-xid.txt"}
    asked: list[str] = []

    def runner(argv: Sequence[str], timeout: float) -> str | None:
        key = argv[0] if argv[0] != "nvidia-smi" else argv[1].split("=")[0]
        asked.append(key)
        name = outputs.get(key)
        if name is None:
            return None  # not on that machine (journalctl, systemctl)
        return (DATA / name).read_text() if name else ""
    runner.asked = asked  # type: ignore[attr-defined]
    return runner


def sources(runner, tmp_path: Path) -> HealthSources:  # noqa: ANN001
    for d in ("ib", "module", "dev", "nvswitch"):
        (tmp_path / d).mkdir()
    return HealthSources(runner=runner, infiniband=str(tmp_path / "ib"),
                         sys_module=str(tmp_path / "module"), dev=str(tmp_path / "dev"),
                         nvswitch_proc=str(tmp_path / "nvswitch"))


def test_an_idle_h100_is_healthy_and_every_field_is_read(tmp_path: Path) -> None:
    runner = recorded("nvidia-smi-query-h100-idle.csv", "nvidia-smi-compute-apps-h100-none.csv",
                      tmp_path)
    found, notes, unread = read_health({}, sources(runner, tmp_path))
    assert (found, notes, unread) == ([], [], [])
    assert runner.asked == ["--query-gpu", "--query-remapped-rows", "--query-compute-apps",
                            "nvlink", "dmesg"]
    # driver 580 accepts clocks_throttle_reasons.* and prints them as clocks_event_reasons.*;
    # retired_pages.pending is [N/A] on an H100 (it remaps rows instead of retiring pages)
    gpus, why = gpuquery.read_gpus(runner)
    assert why == "" and len(gpus) == 1
    g = gpus[0]
    assert (g.index, g.bus_id, g.name) == (0, "00000000:00:06.0", "NVIDIA H100 80GB HBM3")
    assert (g.memory_used_mib, g.memory_total_mib) == (0, 81559)
    assert g.retired_pending is None and (g.remap_pending, g.remap_failed) == (False, False)
    assert (g.idle, g.slowdowns, g.ecc_uncorrected) == (True, (), 0)
    assert (g.pcie_gen, g.pcie_width) == ((5, 5), (16, 16))
    assert (g.fabric_state, g.recovery_action) == (None, "None")


def test_sixty_gib_held_by_another_process_is_named_by_pid_and_memory(tmp_path: Path) -> None:
    runner = recorded("nvidia-smi-query-h100-60gib-held.csv",
                      "nvidia-smi-compute-apps-h100-holder.csv", tmp_path)
    found, _, unread = read_health({}, sources(runner, tmp_path))
    assert unread == [] and [f.problem.code for f in found] == ["gpu-memory-in-use"]
    p = found[0].problem
    assert p.observed == ("GPU 0 (00000000:00:06.0, GPU-1f00a3c9-70f5-12e4-d9d9-9baa430053a0): "
                          "held by pid 1210 (61958 MiB) before the job started")
    assert "kill 1210" in p.fix


def test_a_one_rank_communicator_logs_its_network_and_no_connection() -> None:
    log = ncclinfo.parse((DATA / "nccl-info-h100x1-one-rank.log").read_text())
    assert log.network == "Socket" and log.counts() == {}
