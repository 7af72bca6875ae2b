"""Tests for ddpcheck.node.interfaces: interface facts, route parsing, the proposed interface.

Everything here is pure (constructed Interface lists, recorded `ip route get` output) except
a few real lookups on loopback; no packet leaves this host.
"""

from __future__ import annotations

import socket
import subprocess
from types import SimpleNamespace

import pytest

from ddpcheck.node import interfaces as ifs
from ddpcheck.node.interfaces import Interface, propose_interface
from tests.helpers.paths import DATA

DATA = DATA / "net"

LO = Interface.of("lo", "127.0.0.1/8", "::1/128", mtu=65536)
ETH0 = Interface.of("eth0", "10.1.0.5/24", "fe80::5/64")
IB0 = Interface.of("ib0", "10.2.0.5/16", mtu=2044)
DOCKER0 = Interface.of("docker0", "172.17.0.1/16")
ETH1_DOWN = Interface.of("eth1", "10.9.0.5/24", up=False)
IB1_V6 = Interface.of("ib1", "fe80::1/64")
NODE = [LO, ETH0, IB0, DOCKER0, ETH1_DOWN, IB1_V6]


def no_route(ip: str) -> None:
    return None


def via(name: str):
    return lambda ip: name


# --- Interface / build_interfaces -----------------------------------------------------------
def test_interface_of_sorts_addresses():
    assert [str(a) for a in ETH0.ipv4] == ["10.1.0.5/24"]
    assert ETH0.ipv6[0].link_local and not ETH0.is_loopback
    assert LO.is_loopback and str(LO.ipv4[0].network) == "127.0.0.0/8"
    assert IB1_V6.ipv4 == () and IB1_V6.ipv6[0].link_local


def test_build_interfaces_from_psutil_shaped_data():
    def a(family, address, netmask):
        return SimpleNamespace(family=family, address=address, netmask=netmask)
    addrs = {
        "lo": [a(socket.AF_INET, "127.0.0.1", "255.0.0.0")],
        "eth0": [a(socket.AF_INET, "10.1.0.5", "255.255.255.0"),
                 a(socket.AF_INET6, "fe80::5%eth0", "ffff:ffff:ffff:ffff::"),
                 a(getattr(socket, "AF_PACKET", 17), "02:00:00:00:00:01", None)],
        "tun0": [a(socket.AF_INET, "10.8.0.2", None)],
    }
    stats = {"lo": SimpleNamespace(isup=True, mtu=65536, flags="up,loopback,running"),
             "eth0": SimpleNamespace(isup=True, mtu=9000, flags="up,broadcast,running"),
             "tun0": SimpleNamespace(isup=False, mtu=1500),
             "ifb0": SimpleNamespace(isup=False, mtu=1500, flags="broadcast,noarp")}
    built = {i.name: i for i in ifs.build_interfaces(addrs, stats)}
    assert list(built) == ["lo", "eth0", "tun0", "ifb0"]
    assert built["lo"].is_loopback and built["lo"].is_up and built["lo"].mtu == 65536
    eth0 = built["eth0"]
    assert str(eth0.ipv4[0]) == "10.1.0.5/24" and eth0.mtu == 9000
    assert eth0.ipv6 == (ifs.Ipv6Addr("fe80::5", 64, True),)
    assert str(built["tun0"].ipv4[0]) == "10.8.0.2/32" and not built["tun0"].is_up
    assert built["ifb0"].ipv4 == () and built["ifb0"].ipv6 == ()


def test_real_interfaces_include_an_up_loopback():
    loops = [i for i in ifs.interfaces() if i.is_loopback]
    assert loops and loops[0].is_up
    assert any(a.address == "127.0.0.1" for a in loops[0].ipv4)


@pytest.mark.parametrize("addr,expected", [
    ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("10.0.0.1", False),
    ("localhost", False), ("", False)])
def test_is_loopback(addr, expected):
    assert ifs.is_loopback(addr) is expected


# --- routes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name,dev", [
    ("local_loopback.txt", "lo"), ("via_gateway.txt", "eth0"), ("direct_ib0.txt", "ib0"),
    ("own_address.txt", "lo"), ("broadcast.txt", "eth0"), ("vlan_table.txt", "bond0.100"),
    ("ipv6.txt", "eth0"), ("multiline_no_o.txt", "lo"), ("unreachable.txt", None)])
def test_parse_ip_route_get(name, dev):
    assert ifs.parse_ip_route_get((DATA / name).read_text()) == dev


def test_parse_ip_route_get_empty():
    assert ifs.parse_ip_route_get("") is None
    assert ifs.parse_ip_route_get("10.0.0.1 dev") is None


@pytest.mark.parametrize("dest,dev", [
    ("10.2.5.9", "ib0"),     # longest prefix (/24) wins
    ("10.2.9.9", "ib0"),     # two /16 routes: lower metric wins
    ("10.2.8.1", "ib0"),     # the /24 via eth2 is not up
    ("192.0.2.77", "eth0"),  # connected network
    ("8.8.8.8", "eth0"),     # default route
])
def test_parse_proc_net_route(dest, dev):
    assert ifs.parse_proc_net_route((DATA / "proc_net_route.txt").read_text(), dest) == dev


def test_parse_proc_net_route_without_default():
    text = (DATA / "proc_net_route_noroute.txt").read_text()
    assert ifs.parse_proc_net_route(text, "8.8.8.8") is None
    assert ifs.parse_proc_net_route(text, "192.0.2.9") == "eth0"


def test_route_interface_loopback_real():
    loop = next(i.name for i in ifs.interfaces() if i.is_loopback)
    assert ifs.route_interface("127.0.0.1") == loop


def test_route_interface_falls_back_without_ip_command(monkeypatch):
    def missing(*args, **kwargs):
        raise FileNotFoundError("ip")
    monkeypatch.setattr(subprocess, "run", missing)
    loop = next(i.name for i in ifs.interfaces() if i.is_loopback)
    assert ifs.route_interface("127.0.0.1") == loop


def test_route_interface_kernel_answer_vs_broken_ip_command(monkeypatch):
    def fake(stderr: str):
        return lambda *a, **k: subprocess.CompletedProcess(a[0], 2, "", stderr)
    monkeypatch.setattr(subprocess, "run", fake("RTNETLINK answers: Network is unreachable\n"))
    assert ifs.route_interface("127.0.0.1") is None
    monkeypatch.setattr(subprocess, "run", fake("Option \"-o\" is unknown\n"))
    assert ifs.route_interface("127.0.0.1") is not None  # fell back to /proc + local table


def test_route_interface_rejects_non_ip():
    with pytest.raises(ValueError):
        ifs.route_interface("-h")


# --- propose_interface ----------------------------------------------------------------------
def test_propose_interface_by_subnet():
    assert propose_interface(NODE, "10.1.0.7", route=no_route) == ETH0
    assert propose_interface(NODE, "10.2.77.1", route=no_route) == IB0


def test_propose_interface_by_kernel_route():
    assert propose_interface(NODE, "203.0.113.9", route=via("ib0")) == IB0
    assert propose_interface(NODE, "203.0.113.9", route=via("lo")) is None  # never loopback
    assert propose_interface(NODE, "10.9.0.7", route=via("eth1")) is None  # eth1 is down


def test_propose_interface_single_node_prefers_loopback():
    assert propose_interface(NODE, None) == LO
    assert propose_interface(NODE, "127.0.0.1") == LO
    assert propose_interface([ETH0], None) == ETH0
    assert propose_interface([ETH1_DOWN, IB1_V6], None) is None
