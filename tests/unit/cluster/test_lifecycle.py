"""Tests for ddpcheck.cluster.lifecycle's pure parts: the advertised address, connect() stopping
before any network I/O (a loopback or unresolvable endpoint), and an endpoint node that stops
early telling the others why. The multi-node path itself runs in tests/cluster/.
"""

from __future__ import annotations

from typing import Callable

import pytest

from ddpcheck.cluster import lifecycle
from ddpcheck.cluster.checkin import NodeCard
from ddpcheck.launcher.config import RunConfig
from ddpcheck.node.interfaces import Interface
from ddpcheck.node.netprobe import Resolution

HostNamed = Callable[..., None]

IFACES = [
    Interface.of("lo", "127.0.0.1/8"),
    Interface.of("docker0", "172.17.0.1/16"),
    Interface.of("eth0", "10.1.0.5/24"),
    Interface.of("eth1", "192.168.7.5/24"),
    Interface.of("ib0", "fe80::1/64"),  # no IPv4
]


@pytest.fixture
def host_named(monkeypatch: pytest.MonkeyPatch) -> HostNamed:
    """Make this node 'node7', resolving to the given addresses (none: resolution fails)."""
    def setup(*addresses: str) -> None:
        monkeypatch.setattr(lifecycle.socket, "gethostname", lambda: "node7")

        def resolve(host: str) -> Resolution:
            assert host == "node7"
            return Resolution(host, addresses, "" if addresses else "Name or service not known")
        monkeypatch.setattr(lifecycle, "resolve", resolve)
    return setup


# --- advertised_address -----------------------------------------------------------------------

def test_gloo_advertises_the_gloo_socket_ifname_interface(host_named: HostNamed) -> None:
    host_named("10.1.0.5")
    env = {"GLOO_SOCKET_IFNAME": "eth1", "NCCL_SOCKET_IFNAME": "eth0"}
    assert lifecycle.advertised_address(env, "gloo", IFACES, "10.1.0.1") == (
        "192.168.7.5", "GLOO_SOCKET_IFNAME=eth1")


def test_nccl_advertises_the_nccl_socket_ifname_interface(host_named: HostNamed) -> None:
    host_named("10.1.0.5")
    env = {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth1"}
    assert lifecycle.advertised_address(env, "nccl", IFACES, "10.1.0.1") == (
        "192.168.7.5", "NCCL_SOCKET_IFNAME=eth1")


def test_nccl_exact_match_syntax_is_understood(host_named: HostNamed) -> None:
    host_named()
    env = {"NCCL_SOCKET_IFNAME": "=eth1"}
    assert lifecycle.advertised_address(env, "nccl", IFACES, "10.1.0.1") == (
        "192.168.7.5", "NCCL_SOCKET_IFNAME==eth1")


def test_the_first_listed_gloo_interface_is_advertised(host_named: HostNamed) -> None:
    host_named()
    env = {"GLOO_SOCKET_IFNAME": "eth1,eth0"}
    assert lifecycle.advertised_address(env, "gloo", IFACES, "10.1.0.1")[0] == "192.168.7.5"


def test_the_other_backends_variable_is_ignored(host_named: HostNamed) -> None:
    host_named("10.1.0.5")
    env = {"NCCL_SOCKET_IFNAME": "eth1"}
    assert lifecycle.advertised_address(env, "gloo", IFACES, "10.1.0.1") == (
        "10.1.0.5", "hostname node7")


@pytest.mark.parametrize("value", ["eth9", "ib0"])  # missing, or without IPv4
def test_an_unusable_socket_ifname_falls_back_to_the_hostname(host_named: HostNamed,
                                                              value: str) -> None:
    host_named("10.1.0.5", "10.1.0.6")
    assert lifecycle.advertised_address({"GLOO_SOCKET_IFNAME": value}, "gloo", IFACES,
                                      "10.1.0.1") == ("10.1.0.5", "hostname node7")


def test_without_a_socket_ifname_the_hostname_address_is_advertised(host_named: HostNamed) -> None:
    host_named("127.0.1.1")  # Debian's /etc/hosts: connect() turns this into hostname-loopback
    assert lifecycle.advertised_address({}, "gloo", IFACES, "10.1.0.1") == (
        "127.0.1.1", "hostname node7")


def test_an_unresolvable_hostname_falls_back_to_the_interface_reaching_the_endpoint(
        host_named: HostNamed) -> None:
    host_named()
    assert lifecycle.advertised_address({}, "gloo", IFACES, "192.168.7.200") == (
        "192.168.7.5", "route to the endpoint")


def test_nothing_usable_advertises_no_address(host_named: HostNamed) -> None:
    host_named()
    assert lifecycle.advertised_address({}, "gloo", [Interface.of("ib0", "fe80::1/64")],
                                      "10.1.0.1") == ("", "route to the endpoint")


def test_an_nccl_excluded_interface_is_never_advertised(host_named: HostNamed) -> None:
    host_named("10.1.0.5")
    env = {"NCCL_SOCKET_IFNAME": "^docker0"}
    address, _ = lifecycle.advertised_address(env, "nccl", IFACES[1:], "10.1.0.1")
    assert address != "172.17.0.1"


def test_an_nccl_prefix_advertises_the_interface_nccl_uses(host_named: HostNamed) -> None:
    host_named("10.9.9.9")
    env = {"NCCL_SOCKET_IFNAME": "eth"}
    assert lifecycle.advertised_address(env, "nccl", IFACES, "10.1.0.1")[0] == "10.1.0.5"


# --- connect() stops before the network on a bad endpoint -----------------------------------

def test_a_loopback_endpoint_stops_a_multi_node_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle.socket, "gethostname", lambda: "node7")
    cfg = RunConfig(nodes=2, rdzv_endpoint=("localhost", 29500))
    st = lifecycle.connect(cfg, {}, 2, [], deadline=0.0)
    [problem] = st.problems
    assert problem.code == "endpoint-loopback"
    assert problem.observed.startswith("--rdzv-endpoint localhost:29500 resolves to 127.")
    assert problem.hosts == ("node7",)
    assert st.store is None and st.listener is None


def test_an_unresolvable_endpoint_stops_before_the_store(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setattr(lifecycle, "resolve",
                        lambda host: Resolution(host, (), "Name or service not known"))
    cfg = RunConfig(nodes=2, rdzv_endpoint=("gpu-a", 29500))
    st = lifecycle.connect(cfg, {}, 2, [], deadline=0.0)
    assert [p.code for p in st.problems] == ["endpoint-unresolvable"]
    assert st.store is None


# --- ClusterState and the shared end of the run ---------------------------------------

def test_closing_the_state_closes_the_listener_once() -> None:
    st = lifecycle.ClusterState(listener=lifecycle.Listener("127.0.0.1"))
    sock = st.listener.sock  # type: ignore[union-attr]
    st.close()
    st.close()
    assert st.listener is None and sock.fileno() == -1


def test_an_endpoint_node_that_stops_early_tells_the_others_why() -> None:
    import socket
    import threading
    import time

    from ddpcheck.cluster import checkin, nodeflow
    from ddpcheck.cluster.store import join_store
    from ddpcheck.launcher.config import RunConfig

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = RunConfig(nodes=2, rdzv_endpoint=("127.0.0.1", port), rdzv_id="job")
    why = checkin.NODES_MISMATCH.problem("a started with --nodes 2; b started with --nodes 3")
    host = threading.Thread(target=lifecycle.announce_stop, args=(cfg, [why]), daemon=True)
    host.start()
    start = time.monotonic()
    store = None
    while store is None and time.monotonic() - start < 10:
        try:
            store = join_store("127.0.0.1", port, timeout=2)
        except (RuntimeError, TimeoutError):
            time.sleep(0.1)
    st = nodeflow.ClusterState(store=store)
    st.me = NodeCard("b", 2, "job", 2, 1)
    nodeflow.receive_check_in(st, rdzv_timeout=5)
    nodeflow.settle(st)
    host.join(15)
    assert not host.is_alive()
    assert [p.code for p in st.problems] == ["endpoint-node-stopped", "nodes-mismatch"]
    assert "stopped before the check-in on its own problems: nodes-mismatch" in \
        st.problems[0].observed
