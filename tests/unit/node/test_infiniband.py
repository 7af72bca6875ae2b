"""InfiniBand ports, NCCL_IB_HCA and GPUDirect RDMA on sysfs trees built from recorded output."""

from __future__ import annotations

from pathlib import Path

from ddpcheck.node import infiniband
from tests.helpers.ibsysfs import from_ibstat, from_ibstatus

DATA = Path(__file__).parents[2] / "data" / "gpu"


def roce(tmp_path: Path) -> str:
    return str(from_ibstatus((DATA / "ibstatus-mlx5-roce-100g.txt").read_text(), tmp_path))


def test_healthy_ports_read_active_with_their_rate(tmp_path):
    ports = infiniband.read_ports(roce(tmp_path))
    assert [(p.name, p.state, p.rate_gbps) for p in ports] == [
        ("mlx5_0:1", "ACTIVE", 100.0), ("mlx5_1:1", "ACTIVE", 100.0)]
    assert infiniband.check_ports(ports, {}) == []
    assert infiniband.check_ports(ports, {"NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1"}) == []


def test_a_port_down_and_a_slower_port_are_shown(tmp_path):
    ports = infiniband.read_ports(str(from_ibstat(
        (DATA / "ibstat-mlx4-port-down.txt").read_text(), tmp_path)))
    found = infiniband.check_ports(ports, {})
    assert [(f.problem.code, f.performance_only) for f in found] == [("ib-port-down", True)]
    assert "port mlx4_0:1 (InfiniBand) is DOWN" in found[0].problem.observed
    ports.append(infiniband.IbPort("mlx4_1", 1, "ACTIVE", 40.0, "40 Gb/sec", "InfiniBand"))
    slow = [f for f in infiniband.check_ports(ports, {}) if f.problem.code == "ib-port-slow"]
    assert slow and "mlx4_1:1 runs at 40 Gb/sec, mlx4_0:2 at 56 Gb/sec" in \
        slow[0].problem.observed


def test_a_port_the_user_selected_must_be_up(tmp_path):
    ports = infiniband.read_ports(str(from_ibstat(
        (DATA / "ibstat-mlx4-port-down.txt").read_text(), tmp_path)))
    found = infiniband.check_ports(ports, {"NCCL_IB_HCA": "=mlx4_0:1"})
    assert [(f.problem.code, f.performance_only) for f in found] == [("ib-port-down", False)]
    assert infiniband.check_ports(ports, {"NCCL_IB_HCA": "^mlx4_0:1"}) == []


def test_nccl_ib_hca_naming_a_missing_device_is_a_problem(tmp_path):
    ports = infiniband.read_ports(roce(tmp_path))
    found = infiniband.check_ports(ports, {"NCCL_IB_HCA": "mlx5_0,mlx5_7"})
    assert [f.problem.code for f in found] == ["nccl-ib-hca-unknown"]
    assert "names mlx5_7" in found[0].problem.observed and "mlx5_0:1, mlx5_1:1" in \
        found[0].problem.fix
    assert infiniband.check_ports(ports, {"NCCL_IB_HCA": "mlx5"}) == []  # a prefix matches


def test_gpudirect_rdma_missing_where_ib_is_active(tmp_path):
    ports = infiniband.read_ports(roce(tmp_path))
    assert infiniband.check_gpudirect(ports, loaded=True) == []
    found = infiniband.check_gpudirect(ports, loaded=False)
    assert found[0].problem.code == "gpudirect-rdma-missing" and found[0].performance_only
    (tmp_path / "mods" / "nvidia_peermem").mkdir(parents=True)
    assert infiniband.peermem_loaded(str(tmp_path / "mods"))
    assert infiniband.read_ports(str(tmp_path / "absent")) == []
