"""Tests for ddpcheck.node.socketifname: NCCL's *_SOCKET_IFNAME syntax (the one parser) and
GLOO/NCCL_SOCKET_IFNAME checked against constructed interface lists (no packet leaves)."""

from __future__ import annotations

import pytest

from ddpcheck.node.interfaces import Interface
from ddpcheck.node.socketifname import (
    IfnameSpec,
    check_socket_ifname,
    nccl_matches,
    parse_socket_ifname,
)
from tests.unit.node.test_interfaces import (
    ETH0,
    IB0,
    IB1_V6,
    LO,
    NODE,
    no_route,
    via,
)


def check(var: str, value: str, ifaces=tuple(NODE), endpoint: str | None = "10.1.0.7",
          route=no_route):
    return check_socket_ifname(var, value, list(ifaces), endpoint, node="gpu-b", route=route)


# --- NCCL's syntax -------------------------------------------------------------------------

@pytest.mark.parametrize("value, spec", [
    ("eth", IfnameSpec(("eth",))),
    ("eth0,ib", IfnameSpec(("eth0", "ib"))),
    ("^docker,lo", IfnameSpec(("docker", "lo"), exclude=True)),
    ("=eth0", IfnameSpec(("eth0",), exact=True)),
    ("^=docker0,lo", IfnameSpec(("docker0", "lo"), exclude=True, exact=True)),
    ("=^eth0", IfnameSpec(("^eth0",), exact=True)),  # '^' must come first
    ("eth0:5000,,ib0", IfnameSpec(("eth0", "ib0"))),  # ports and empty items dropped
    ("", IfnameSpec(())),
])
def test_parse_socket_ifname(value: str, spec: IfnameSpec) -> None:
    assert parse_socket_ifname(value) == spec


def test_ifname_matching() -> None:
    ifaces = ["lo", "eth0", "eth10", "docker0", "ib0"]
    assert parse_socket_ifname("eth").select(ifaces) == ["eth0", "eth10"]
    assert parse_socket_ifname("=eth0").select(ifaces) == ["eth0"]
    assert parse_socket_ifname("^docker,lo").select(ifaces) == ["eth0", "eth10", "ib0"]
    assert parse_socket_ifname("^=eth1").select(ifaces) == ifaces
    assert parse_socket_ifname("^eth1").select(ifaces) == ["lo", "eth0", "docker0", "ib0"]
    assert parse_socket_ifname("").select(ifaces) == ifaces


# --- GLOO_SOCKET_IFNAME ---------------------------------------------------------------------
def test_gloo_missing_interface():
    [p] = check("GLOO_SOCKET_IFNAME", "eth9", ifaces=[LO, ETH0, IB0])
    assert p.code == "socket-ifname-invalid"
    assert p.observed == ("GLOO_SOCKET_IFNAME=eth9: no such interface on node gpu-b "
                          "(interfaces: lo, eth0, ib0)")
    assert p.fix == "set GLOO_SOCKET_IFNAME=eth0 (eth0 has 10.1.0.5/24, which reaches 10.1.0.7)"
    assert p.hosts == ("gpu-b",)


def test_gloo_down_interface():
    [p] = check("GLOO_SOCKET_IFNAME", "eth1")
    assert p.code == "socket-ifname-invalid" and "eth1 is down" in p.observed
    assert "GLOO_SOCKET_IFNAME=eth0" in p.fix


def test_gloo_ipv6_link_local_only():
    [p] = check("GLOO_SOCKET_IFNAME", "ib1")
    assert p.code == "socket-ifname-invalid"
    assert "ib1 has no IPv4 address (IPv6: fe80::1/64 link-local)" in p.observed


def test_gloo_loopback_on_multi_node_run():
    [p] = check("GLOO_SOCKET_IFNAME", "lo")
    assert p.code == "socket-ifname-unreachable"
    assert "lo is loopback but the run spans nodes (endpoint 10.1.0.7)" in p.observed
    assert p.fix.startswith("set GLOO_SOCKET_IFNAME=eth0 ")


@pytest.mark.parametrize("endpoint", [None, "127.0.0.1"])
def test_gloo_loopback_is_fine_on_a_single_node(endpoint):
    assert check("GLOO_SOCKET_IFNAME", "lo", endpoint=endpoint) == []


def test_gloo_no_route_to_endpoint():
    [p] = check("GLOO_SOCKET_IFNAME", "ib0", route=via("eth0"))
    assert p.code == "socket-ifname-unreachable"
    assert ("ib0 (10.2.0.5/16) does not reach the endpoint 10.1.0.7 "
            "(the kernel routes it via eth0)") in p.observed
    [p] = check("GLOO_SOCKET_IFNAME", "ib0", endpoint="203.0.113.9")
    assert "this node has no route to it" in p.observed
    assert p.fix.startswith("unset GLOO_SOCKET_IFNAME, or set it to an interface")


def test_gloo_reaches_through_a_gateway():
    assert check("GLOO_SOCKET_IFNAME", "ib0", endpoint="203.0.113.9", route=via("ib0")) == []


def test_gloo_good_value():
    assert check("GLOO_SOCKET_IFNAME", "eth0") == []
    assert check("GLOO_SOCKET_IFNAME", "") == []


def test_gloo_rejects_nccl_syntax():
    [p] = check("GLOO_SOCKET_IFNAME", "^eth")
    assert p.code == "socket-ifname-invalid"
    assert "'^' is NCCL syntax; gloo takes exact interface names" in p.observed
    assert "GLOO_SOCKET_IFNAME=eth0" in p.fix
    [p] = check("GLOO_SOCKET_IFNAME", "=eth0")
    assert "'=' is NCCL syntax" in p.observed


def test_gloo_list_checks_every_name():
    [p] = check("GLOO_SOCKET_IFNAME", "eth0,eth9")
    assert "GLOO_SOCKET_IFNAME=eth0,eth9: 'eth9': no such interface" in p.observed
    assert len(check("GLOO_SOCKET_IFNAME", "eth9,eth1")) == 2


def test_gloo_does_not_match_prefixes():
    [p] = check("GLOO_SOCKET_IFNAME", "eth")
    assert "no such interface" in p.observed


# --- NCCL_SOCKET_IFNAME ---------------------------------------------------------------------
def names(ifaces):
    return [i.name for i in ifaces]


def test_nccl_matches_syntax():
    assert names(nccl_matches("eth", NODE)) == ["eth0", "eth1"]
    assert names(nccl_matches("^lo,docker", NODE)) == ["eth0", "ib0", "eth1", "ib1"]
    assert names(nccl_matches("=eth0", NODE + [Interface.of("eth0.100", "10.5.0.1/24")])) \
        == ["eth0"]
    assert names(nccl_matches("eth0", NODE + [Interface.of("eth0.100", "10.5.0.1/24")])) \
        == ["eth0", "eth0.100"]
    assert names(nccl_matches("^=eth0,lo", [LO, ETH0, IB0])) == ["ib0"]
    assert names(nccl_matches("ib0:1", NODE)) == ["ib0"]  # NCCL's prefix:port form
    assert names(nccl_matches("=eth", NODE)) == []


def test_nccl_exclusion_picks_the_first_ipv4_match():
    assert check("NCCL_SOCKET_IFNAME", "^lo,docker") == []  # eth0 reaches 10.1.0.7
    [p] = check("NCCL_SOCKET_IFNAME", "^lo,docker", endpoint="10.2.3.4")
    assert p.code == "socket-ifname-unreachable"
    assert "NCCL would use eth0 (first of eth0, ib0, eth1, ib1)" in p.observed
    assert p.fix == "set NCCL_SOCKET_IFNAME=ib0 (ib0 has 10.2.0.5/16, which reaches 10.2.3.4)"


def test_nccl_exact_match():
    assert check("NCCL_SOCKET_IFNAME", "=eth0") == []
    [p] = check("NCCL_SOCKET_IFNAME", "=eth")
    assert p.code == "socket-ifname-invalid"
    assert "NCCL_SOCKET_IFNAME==eth: matches no interface on node gpu-b" in p.observed


def test_nccl_excludes_everything():
    [p] = check("NCCL_SOCKET_IFNAME", "^lo,eth,ib,docker")
    assert "excludes every interface" in p.observed


def test_nccl_prefix_problems():
    [p] = check("NCCL_SOCKET_IFNAME", "eth1")
    assert "eth1 is down" in p.observed
    [p] = check("NCCL_SOCKET_IFNAME", "ib1")
    assert "no IPv4 address" in p.observed
    [p] = check("NCCL_SOCKET_IFNAME", "lo")
    assert p.code == "socket-ifname-unreachable"
    assert check("NCCL_SOCKET_IFNAME", "lo", endpoint=None) == []


def test_nccl_ignores_one_character_values():
    assert check("NCCL_SOCKET_IFNAME", "x") == []


def test_nccl_fix_uses_exact_match_when_the_name_is_a_prefix_of_another():
    eth0_vlan = Interface.of("eth0.100", "10.5.0.1/24")
    [p] = check("NCCL_SOCKET_IFNAME", "ib1", ifaces=[LO, ETH0, eth0_vlan, IB1_V6])
    assert p.fix.startswith("set NCCL_SOCKET_IFNAME==eth0 (")
