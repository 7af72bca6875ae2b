"""Node health end to end in the launcher, fed recorded real outputs through the seams."""

from __future__ import annotations

from pathlib import Path

from ddpcheck.launcher.config import build_config
from ddpcheck.launcher.nodehealth import HealthSources, node_health, read_health, split
from tests.helpers.ibsysfs import from_ibstat, from_ibstatus

DATA = Path(__file__).parents[2] / "data" / "gpu"
L8 = (DATA / "nvidia-smi-L-a100x8.txt").read_text()


def read(name: str) -> str:
    return (DATA / name).read_text()


def runner_for(outputs: dict[str, str | None]):
    """A runner answering each command by its first distinguishing argument."""
    calls: list[tuple[str, ...]] = []

    def run(argv, timeout):
        assert timeout > 0
        calls.append(tuple(argv))
        key = next((k for k in outputs if any(a.startswith(k) for a in argv)), None)
        return outputs[key] if key else None
    run.calls = calls  # type: ignore[attr-defined]
    return run


HEALTHY = {"-L": L8, "--query-gpu": read("nvidia-smi-query-pcie-l40s-idle.csv"),
           "--query-remapped-rows": read("nvidia-smi-query-remapped-rows.csv"),
           "--query-compute-apps": read("nvidia-smi-compute-apps-none.csv"),
           "nvlink": read("nvidia-smi-nvlink-s-gb200.txt"), "is-active": "active\n",
           "dmesg": "[    0.000000] Linux version 6.8.0\n"}


def sources(tmp_path: Path, outputs: dict[str, str | None], ib: str = "roce",
            peermem: bool = True, nvswitch: bool = False) -> HealthSources:
    sysfs = tmp_path / "ib"
    if ib == "roce":
        from_ibstatus(read("ibstatus-mlx5-roce-100g.txt"), sysfs)
    elif ib == "down":
        from_ibstat(read("ibstat-mlx4-port-down.txt"), sysfs)
    mods = tmp_path / "module"
    (mods / ("nvidia_peermem" if peermem else "other")).mkdir(parents=True)
    dev = tmp_path / "dev"
    dev.mkdir()
    if nvswitch:
        (dev / "nvidia-nvswitch0").touch()
    return HealthSources(runner_for(outputs), str(sysfs), str(mods), str(dev),
                         str(tmp_path / "noproc"))


def cfg(*strict: str, backend: str = "auto"):
    env = {"DDPCHECK_STRICT_HEALTH": strict[0]} if strict else {}
    return build_config({"backend": backend}, env)


def test_a_healthy_node_has_no_problem_and_no_warning(tmp_path):
    health = node_health(cfg(), {}, sources(tmp_path, HEALTHY, nvswitch=True))
    assert health.problems == () and health.notes == ()


def test_a_sick_node_fails_naming_each_gpu_and_port(tmp_path):
    sick = {**HEALTHY, "nvlink": read("nvidia-smi-nvlink-s-v100-links-down.txt"),
            "dmesg": read("dmesg-xid-31-62-45.txt"),
            "--query-gpu": read("nvidia-smi-query-memory-used-4gpu.csv"),
            "--query-compute-apps": read("nvidia-smi-compute-apps-leftover.csv"),
            "is-active": "failed\n"}
    health = node_health(cfg(), {"NCCL_IB_HCA": "mlx5_9"},
                         sources(tmp_path, sick, nvswitch=True))
    codes = [p.code for p in health.problems]
    assert {"gpu-memory-in-use", "nvlink-down", "fabric-manager-down", "gpu-xid-error",
            "nccl-ib-hca-unknown"} <= set(codes)
    assert all(p.stage == "preflight" and p.hosts for p in health.problems)
    assert any("Xid 31" in n for n in health.notes)  # a program's Xid: shown


def test_performance_findings_are_shown_unless_strict(tmp_path):
    slow = {**HEALTHY, "--query-gpu": read("nvidia-smi-query-pcie-x8-of-x16.csv")}
    src = sources(tmp_path, slow, ib="down", peermem=False)
    shown = node_health(cfg(), {}, src)
    assert shown.problems == ()
    assert [n.split()[2] for n in shown.notes] == ["gpu-pcie-degraded", "ib-port-down",
                                                   "gpudirect-rdma-missing"]
    assert all("--strict-health" in n for n in shown.notes)
    strict = node_health(cfg("1"), {}, src)
    assert [p.code for p in strict.problems] == ["gpu-pcie-degraded", "ib-port-down",
                                                 "gpudirect-rdma-missing"]


def test_unreadable_sources_are_said(tmp_path):
    denied = {**HEALTHY, "dmesg": read("dmesg-not-permitted.txt"),
              "journalctl": "No journal files were found.\n"}
    health = node_health(cfg(), {}, sources(tmp_path, denied))
    assert any("kernel log for Xid errors" in n and "not readable" in n for n in health.notes)


def test_no_gpus_or_gloo_reads_nothing(tmp_path):
    src = sources(tmp_path, {"-L": None})
    assert node_health(cfg(), {}, src).notes == ()
    gloo = sources(tmp_path / "g", HEALTHY)
    assert node_health(cfg(backend="gloo"), {}, gloo) == node_health(cfg(), {}, src)
    assert gloo.runner.calls == []  # type: ignore[attr-defined]


def test_every_command_has_a_deadline_and_the_budget_is_shared(tmp_path):
    src = sources(tmp_path, HEALTHY)
    spent = HealthSources(src.runner, src.infiniband, src.sys_module, src.dev,
                          src.nvswitch_proc, budget=0.0)
    found, notes, unread = read_health({}, spent)
    assert found == [] and "deadline of 0 s passed" in unread[0].why
    assert split([], [], unread, False, "n1").notes[0].startswith("node health: ")


def test_strict_health_comes_from_the_flag_or_the_environment_and_bad_values_exit_2(
        monkeypatch, capsys):
    import pytest

    from ddpcheck.launcher.cli import main
    from ddpcheck.parsing import UsageError

    assert build_config({"strict_health": True}, {}).strict_health
    assert cfg("yes").strict_health and not cfg().strict_health
    with pytest.raises(UsageError, match="DDPCHECK_STRICT_HEALTH"):
        build_config({}, {"DDPCHECK_STRICT_HEALTH": "maybe"})
    monkeypatch.setenv("DDPCHECK_STRICT_HEALTH", "maybe")
    assert main(["run"]) == 2  # the flag, when given, wins over the variable
    assert "DDPCHECK_STRICT_HEALTH" in capsys.readouterr().err


def test_only_the_gpus_this_job_gets_are_judged(tmp_path):
    sick = {**HEALTHY, "--query-gpu": read("nvidia-smi-query-memory-used-4gpu.csv"),
            "--query-compute-apps": read("nvidia-smi-compute-apps-leftover.csv")}
    other = node_health(cfg(), {"CUDA_VISIBLE_DEVICES": "1"}, sources(tmp_path, sick))
    assert other.problems == ()  # GPU 1 is free; 0, 2 and 3 belong to another job
    by_uuid = node_health(cfg(), {"CUDA_VISIBLE_DEVICES": "GPU-f7c1496c"},
                          sources(tmp_path / "u", sick))
    assert [p.observed.split(":")[0] for p in by_uuid.problems] == [
        "GPU 2 (GPU-f7c1496c-b7f5-b1d2-78ea-68826f778059)"]


def test_an_xid_is_named_by_its_gpu_and_ignored_when_the_gpu_is_another_jobs(tmp_path):
    # The GPU's bus id and UUID are those the same recorded log prints ("NVRM: GPU at
    # PCI:0000:0a:00: GPU-760d0170-..."); GPU 1 is a second board of the node.
    query = ("index, pci.bus_id, uuid\n0, 00000000:0A:00.0, GPU-760d0170-b7c5-6817-9414-"
             "6cc7112645de\n1, 00000000:0B:00.0, GPU-0b\n")
    outputs = {**HEALTHY, "--query-gpu": query, "dmesg": read("dmesg-xid-31-62-45.txt")}
    mine = node_health(cfg(), {}, sources(tmp_path, outputs))
    assert [p.observed.split(": Xid")[0] for p in mine.problems] == [
        "GPU 0 (00000000:0A:00.0, GPU-760d0170-b7c5-6817-9414-6cc7112645de)"]
    other = node_health(cfg(), {"CUDA_VISIBLE_DEVICES": "1"}, sources(tmp_path / "o", outputs))
    assert other.problems == ()
    assert any("Xid 62 on PCI 0000:0a:00, a GPU this job does not use" in n
               for n in other.notes)
