"""Tests for ddpcheck.node.ncclinfo on recorded real NCCL_DEBUG=INFO output
(tests/data/gpu/SOURCES.md): transports per connection, NCCL's reason, the verdict."""

from __future__ import annotations

import pytest

from ddpcheck.node import ncclinfo
from tests.helpers.paths import DATA

DATA = DATA / "gpu"
IB_PORTS = ["mlx5_0:1", "mlx5_1:1"]


def log(name: str) -> ncclinfo.TransportLog:
    return ncclinfo.parse((DATA / name).read_text())


def test_h100_nodes_read_p2p_cumem_inside_and_ib_with_gdrdma_across():
    got = log("nccl-info-h100-cumem-ibext-gdrdma.log")
    assert got.counts() == {"P2P/CUMEM": 10, "NET/IBext_v8": 2}
    net = [c for c in got.connections if c.network]
    assert all(c.gdr and c.direction == "send" and c.dst == 15 for c in net)
    assert ncclinfo.socket_fallback(got, IB_PORTS, "h100clust-worker-1", 0) == []


def test_a100_ib_lines_with_bus_id_ranks_and_no_channel_suffix():
    got = log("nccl-info-a100-ib-gdrdma.log")
    assert got.counts() == {"NET/IB": 12}
    first = got.connections[0]
    assert (first.channel, first.src, first.dst, first.direction) == (1, 2, 0, "receive")
    assert first.via == "NET/IB/5/GDRDMA" and first.network == "IB"


def test_single_h100_node_has_no_network_connection_and_nothing_to_assert():
    got = log("nccl-info-h100-8gpu-cumem.log")
    assert got.counts() == {"P2P/CUMEM": 8} and got.network is None
    assert ncclinfo.socket_fallback(got, IB_PORTS, "h100-2", 0) == []


def test_sockets_across_nodes_with_active_ib_is_a_problem_naming_the_connection():
    got = log("nccl-info-socket-shm.log")
    assert got.counts() == {"NET/Socket": 8, "SHM": 7}
    [p] = ncclinfo.socket_fallback(got, IB_PORTS, "ubuntu", 15)
    assert p.code == "nccl-socket-fallback" and p.hosts == ("ubuntu",) and p.ranks == (15,)
    assert "8 of rank 15's connections went via NET/Socket" in p.observed
    assert "15 -> 0 [send] via NET/Socket/0" in p.observed and "mlx5_0:1" in p.observed
    assert "gave no reason" in p.observed
    assert ncclinfo.socket_fallback(got, [], "ubuntu", 15) == []  # no IB here: sockets it is


def test_ib_disable_is_named_as_the_reason_with_its_fix():
    got = log("nccl-info-ib-disabled-socket.log")
    assert got.network == "Socket"
    [p] = ncclinfo.socket_fallback(got, IB_PORTS, "user", 0)
    assert "chose 'Using network Socket'" in p.observed
    assert 'NCCL said: "NCCL_IB_DISABLE set by environment to 1."' in p.observed
    assert "unset NCCL_IB_DISABLE" in p.fix


def test_ib_disable_wins_over_ibext_disable_on_lo():
    got = log("nccl-info-lo-ib-disabled.log")
    assert [r[0] for r in got.reasons] == ["NCCL_IB_DISABLE set by environment to 1.",
                                           "NCCL_IBEXT_DISABLE set by environment to 1."]


def test_no_ib_device_found_is_named_with_the_container_fix():
    got = log("nccl-info-ib-no-device.log")
    line, meaning, fix = got.reasons[0]
    assert line == "NET/IB : No device found." and "/dev/infiniband" in fix
    assert "NCCL_IB_HCA" in fix


def test_a_plugin_that_failed_to_load_is_a_reason():
    got = log("nccl-info-plugin-load-failed.log")
    [(line, meaning, fix)] = got.reasons
    assert line.startswith("NET/Plugin : Plugin load (libnccl-net.so) returned 2 : ")
    assert "NCCL_NET_PLUGIN=none" in fix


def test_ib_in_use_gives_no_reason_even_with_ib_disable_0():
    got = log("nccl-info-ib-without-gdr.log")
    assert got.reasons == () and got.connections == ()


def test_roce_through_the_ibext_plugin_is_rdma_not_sockets():
    got = log("nccl-info-roce-ibext.log")
    assert got.network == "IBext_v8" and got.counts() == {"NET/IBext_v8": 3}
    assert ncclinfo.socket_fallback(got, IB_PORTS, "bigo", 2) == []


def test_other_transport_spellings():
    text = ("h:1:2 [3] NCCL INFO Channel 00/0 : 3[3] -> 2[2] via P2P/direct pointer\n"
            "h:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
            "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] "
            "via NET/AWS Libfabric/0/GDRDMA\n")
    got = ncclinfo.parse(text)
    assert got.counts() == {"P2P/direct": 1, "P2P/CUMEM": 1, "NET/AWS Libfabric": 1}


@pytest.mark.parametrize("name, network", [
    ("nccl-info-socket.log", "Socket"),
    ("nccl-info-ib.log", "IB"),
    ("nccl-info-ofi.log", "AWS Libfabric"),
])
def test_network_read_from_using_network_and_from_channel_lines_alone(name, network):
    text = (DATA / name).read_text()
    assert ncclinfo.parse(text).network == network
    channels_only = "".join(line for line in text.splitlines(keepends=True)
                            if "Using network" not in line)
    got = ncclinfo.parse(channels_only)
    assert got.network is None and {c.network for c in got.connections if c.network} == {network}


def test_a_plugin_not_found_line_names_no_network():
    plugin_only = ("h:1:1 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared "
                   "object file: No such file or directory No plugin found (libnccl-net.so), "
                   "using internal implementation\n")
    got = ncclinfo.parse(plugin_only)
    assert got.network is None and got.connections == () and got.reasons == ()
    assert ncclinfo.parse("h:1:2 [0] NCCL INFO Using network FasTrak\n").network == "FasTrak"


def test_capture_env_writes_info_of_init_and_net_to_a_file_per_process():
    env = ncclinfo.capture_env({}, "/tmp/r/")
    assert env == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": "/tmp/r/nccl-debug.%h.%p.log",
                   "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV"}
    kept = ncclinfo.capture_env({"NCCL_DEBUG": "trace", "NCCL_DEBUG_SUBSYS": "COLL"}, "/r")
    assert kept["NCCL_DEBUG"] == "TRACE" and kept["NCCL_DEBUG_SUBSYS"] == "COLL,INIT,NET,ENV"
    assert ncclinfo.capture_env({"NCCL_DEBUG": "WARN"}, "/r")["NCCL_DEBUG"] == "INFO"
    assert ncclinfo.debug_file_glob("/r", 42) == "/r/nccl-debug.*.42.log"
