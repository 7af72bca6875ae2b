"""Tests for ddpcheck.node.nics: ports read from a /sys tree laid out like a real node's."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpcheck.node import nics
from ddpcheck.node.nics import Nic


def ib_port(root: Path, dev: str, rate: str, state: str = "4: ACTIVE") -> None:
    port = root / "class" / "infiniband" / dev / "ports" / "1"
    port.mkdir(parents=True)
    (port / "rate").write_text(rate + "\n")
    (port / "state").write_text(state + "\n")


def net(root: Path, name: str, speed: str, state: str = "up") -> None:
    d = root / "class" / "net" / name
    d.mkdir(parents=True)
    (d / "speed").write_text(speed + "\n")
    (d / "operstate").write_text(state + "\n")


@pytest.mark.parametrize("text, gbit", [("400 Gb/sec (4X NDR)", 400.0),
                                        ("200 Gb/sec (4X HDR)", 200.0),
                                        ("25.78125 Gb/sec (1X EDR)", 25.78125),
                                        ("garbage", None)])
def test_parse_ib_rate(text: str, gbit: float | None) -> None:
    assert nics.parse_ib_rate(text) == gbit


def test_rdma_ports_are_preferred_and_inactive_ones_skipped(tmp_path: Path) -> None:
    for i in range(4):
        ib_port(tmp_path, f"mlx5_{i}", "400 Gb/sec (4X NDR)")
    ib_port(tmp_path, "mlx5_9", "400 Gb/sec (4X NDR)", "1: DOWN")
    net(tmp_path, "eth0", "100000")
    got = nics.node_nics({}, str(tmp_path))
    assert [n.name for n in got] == [f"mlx5_{i}:1" for i in range(4)] and got[0].rdma
    only_eth = nics.node_nics({"NCCL_IB_DISABLE": "1"}, str(tmp_path))
    assert only_eth == [Nic("eth0", 100.0, False)]


def test_ethernet_ports_follow_nccl_socket_ifname(tmp_path: Path) -> None:
    net(tmp_path, "lo", "-1")
    net(tmp_path, "docker0", "10000")
    net(tmp_path, "eth0", "25000")
    net(tmp_path, "eth1", "100000", "down")
    net(tmp_path, "ens5", "100000")
    assert [n.name for n in nics.ethernet_ports({}, str(tmp_path))] == ["ens5", "eth0"]
    assert [n.name for n in nics.ethernet_ports({"NCCL_SOCKET_IFNAME": "eth"},
                                                str(tmp_path))] == ["eth0"]


def test_ndr_port_is_at_most_50_gb_per_second() -> None:
    minimum, why = nics.nic_reference([Nic("mlx5_0:1", 400.0, True)], 1)
    assert minimum == pytest.approx(30.0)  # 60% of 50 GB/s
    assert "1 x 400 Gbit/s RDMA" in why and "at most 50.0 GB/s (line rate)" in why


def test_ranks_use_at_most_one_port_each() -> None:
    eight = [Nic(f"mlx5_{i}:1", 400.0, True) for i in range(8)]
    assert nics.nic_reference(eight, 8)[0] == pytest.approx(240.0)  # 8 x 50 x 60%
    assert nics.nic_reference(eight, 2)[0] == pytest.approx(60.0)
    minimum, why = nics.nic_reference([Nic("eth0", 100.0, False)], 8)
    assert minimum == pytest.approx(12.5 * 0.25) and "Ethernet (NCCL sockets)" in why
    assert nics.nic_reference([], 8) is None


def test_the_slowest_node_sets_the_reference() -> None:
    assert nics.slowest([None, [30.0, "a"], [3.1, "b"]]) == (3.1, "b")
    assert nics.slowest([None, None]) is None


NVLINK = (250.0, "8x H100-SXM on NVSwitch")
NDR = (30.0, "1 x 400 Gbit/s RDMA")


def test_a_multi_node_world_is_never_judged_by_an_nvlink_reference() -> None:
    assert nics.sweep_reference(1, None, NVLINK, None) == (
        250.0, "busbw (intra-node reference, 8x H100-SXM on NVSwitch)")
    assert nics.sweep_reference(2, None, NVLINK, NDR) == (
        30.0, "busbw across 2 nodes (NIC reference, 1 x 400 Gbit/s RDMA)")
    assert nics.sweep_reference(2, None, NVLINK, None) == (None, "")
    assert nics.sweep_reference(4, 40.0, NVLINK, NDR) == (40.0, "busbw (--expect-busbw)")
    assert nics.sweep_reference(1, None, None, None) == (None, "")
