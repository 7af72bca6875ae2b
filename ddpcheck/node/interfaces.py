"""Interface facts for the launcher's preflight: this node's NICs, their addresses, kernel routes.

Runs in the launcher on every node, never imports torch. Reads psutil's interface table and
the kernel's route to an address (``ip route get``, /proc/net/route), and proposes the
interface a *_SOCKET_IFNAME should name (``ddpcheck.node.socketifname`` checks the variables).
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

import psutil

RouteLookup = Callable[[str], Optional[str]]



@dataclass(frozen=True)
class Ipv4Addr:
    address: str
    prefixlen: int

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"{self.address}/{self.prefixlen}", strict=False)

    def __str__(self) -> str:
        return f"{self.address}/{self.prefixlen}"


@dataclass(frozen=True)
class Ipv6Addr:
    address: str
    prefixlen: int
    link_local: bool

    def __str__(self) -> str:
        return f"{self.address}/{self.prefixlen}" + (" link-local" if self.link_local else "")


@dataclass(frozen=True)
class Interface:
    """One network interface of this node."""

    name: str
    is_up: bool
    ipv4: tuple[Ipv4Addr, ...] = ()
    ipv6: tuple[Ipv6Addr, ...] = ()
    mtu: int = 0
    is_loopback: bool = False

    @classmethod
    def of(cls, name: str, *cidrs: str, up: bool = True, mtu: int = 1500) -> Interface:
        """Build from CIDR strings, e.g. ``Interface.of("eth0", "10.1.0.5/24", "fe80::1/64")``."""
        nets = [ipaddress.ip_interface(c) for c in cidrs]
        v4 = tuple(Ipv4Addr(str(n.ip), n.network.prefixlen) for n in nets if n.version == 4)
        v6 = tuple(Ipv6Addr(str(n.ip), n.network.prefixlen, n.ip.is_link_local)
                   for n in nets if n.version == 6)
        loop = name == "lo" or any(n.ip.is_loopback for n in nets)
        return cls(name, up, v4, v6, mtu, loop)


def interfaces() -> list[Interface]:
    """This node's interfaces, in the order the system lists them."""
    return build_interfaces(psutil.net_if_addrs(), psutil.net_if_stats())


def build_interfaces(addrs: Mapping[str, Sequence[Any]],
                     stats: Mapping[str, Any]) -> list[Interface]:
    """Interfaces from psutil.net_if_addrs() / net_if_stats()-shaped data (pure)."""
    names = list(addrs) + [n for n in stats if n not in addrs]
    return [_build_one(n, addrs.get(n, ()), stats.get(n)) for n in names]


def _build_one(name: str, entries: Sequence[Any], stat: Any) -> Interface:
    v4 = tuple(Ipv4Addr(e.address, _prefixlen(e.netmask, 32))
               for e in entries if e.family == socket.AF_INET)
    v6 = tuple(_v6(e.address, e.netmask) for e in entries if e.family == socket.AF_INET6)
    flags = str(getattr(stat, "flags", "") or "").split(",")
    loop = "loopback" in flags or name == "lo" or any(is_loopback(a.address) for a in v4)
    up = bool(stat is not None and stat.isup)
    return Interface(name, up, v4, v6, int(stat.mtu) if stat is not None else 0, loop)


def _v6(address: str, netmask: str | None) -> Ipv6Addr:
    ip = ipaddress.IPv6Address(address.split("%", 1)[0])
    return Ipv6Addr(str(ip), _prefixlen(netmask, 128), ip.is_link_local)


def _prefixlen(netmask: str | None, full: int) -> int:
    if not netmask:
        return full
    return bin(int(ipaddress.ip_address(netmask))).count("1")


def is_loopback(addr: str) -> bool:
    """True if addr is a loopback IP literal (127.0.0.0/8, ::1); False for names and junk."""
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


# --- kernel routes ---------------------------------------------------------------------------
def parse_ip_route_get(text: str) -> str | None:
    """The device in ``ip [-o] route get ADDR`` output, None for errors (RTNETLINK answers ...)."""
    tokens = text.split()
    for i, token in enumerate(tokens[:-1]):
        if token == "dev":
            return tokens[i + 1]
    return None


def parse_proc_net_route(text: str, dest_ip: str) -> str | None:
    """The device of the longest-prefix (then lowest-metric) /proc/net/route entry for dest_ip."""
    dest = int(ipaddress.IPv4Address(dest_ip))
    best: tuple[int, int, str, int] | None = None
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 8 or not int(f[3], 16) & 0x1:  # RTF_UP
            continue
        net, mask = (_le_hex_ip(f[1]), _le_hex_ip(f[7]))
        if dest & mask != net & mask:
            continue
        key = (bin(mask).count("1"), -int(f[6]), f[0], int(f[3], 16))
        if best is None or key[:2] > best[:2]:
            best = key
    if best is None or best[3] & 0x0200:  # RTF_REJECT
        return None
    return best[2]


def _le_hex_ip(field: str) -> int:
    return int(ipaddress.IPv4Address(struct.pack("<L", int(field, 16))))


def route_interface(dest_ip: str) -> str | None:
    """The interface the kernel would send to dest_ip through (no packet is sent)."""
    ip = ipaddress.ip_address(dest_ip)  # validates: never hand odd strings to a subprocess
    try:
        out = subprocess.run(["ip", "-o", "route", "get", str(ip)], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return _route_fallback(ip)
    if out.returncode != 0:  # "RTNETLINK answers: ..." is the kernel saying no route
        return None if "RTNETLINK" in out.stderr else _route_fallback(ip)
    return parse_ip_route_get(out.stdout)


def _route_fallback(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    local = interfaces()
    if ip.is_loopback or any(a.address == str(ip) for i in local for a in i.ipv4):
        return next((i.name for i in local if i.is_loopback), None)  # the "local" table
    if ip.version != 4:
        return None
    try:
        with open("/proc/net/route") as f:
            return parse_proc_net_route(f.read(), str(ip))
    except OSError:
        return None


def in_subnet(iface: Interface, dest_ip: str) -> bool:
    """dest_ip lies inside one of iface's IPv4 networks (or is one of its addresses)."""
    ip = ipaddress.ip_address(dest_ip)
    return ip.version == 4 and any(ip in a.network for a in iface.ipv4)


def propose_interface(ifaces: Sequence[Interface], endpoint_ip: str | None = None,
                      route: RouteLookup = route_interface) -> Interface | None:
    """The interface to use: up, IPv4, and reaching endpoint_ip (loopback for single-node)."""
    usable = [i for i in ifaces if i.is_up and i.ipv4]
    if endpoint_ip is None or is_loopback(endpoint_ip):
        return next((i for i in usable if i.is_loopback), usable[0] if usable else None)
    outward = [i for i in usable if not i.is_loopback]
    direct = next((i for i in outward if in_subnet(i, endpoint_ip)), None)
    if direct is not None:
        return direct
    via = route(endpoint_ip)
    return next((i for i in outward if i.name == via), None)
