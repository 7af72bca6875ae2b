"""Interface facts for the launcher's preflight: this node's NICs, kernel routes, *_SOCKET_IFNAME.

Runs in the launcher on every node, never imports torch. `netprobe` re-exports the public API.
Matching rules mirror the libraries: gloo takes comma-separated exact names; NCCL takes
comma-separated name prefixes, a leading ``^`` excludes them, a leading ``=`` makes them exact,
and NCCL bootstraps over the first matching interface that has an address (IPv4 first).
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

from ddpcheck import diagnoses
from ddpcheck.diagnoses import Diagnosis, Problem, register

RouteLookup = Callable[[str], Optional[str]]


SOCKET_IFNAME_UNREACHABLE = register(
    "socket-ifname-unreachable", "a *_SOCKET_IFNAME interface cannot reach the other nodes",
    "the interface is loopback or sits on a network that does not lead to the rendezvous host",
    "set the variable to the interface on the network all nodes share, or unset it")


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


def interface_reaches(iface: Interface, dest_ip: str, route: RouteLookup = route_interface) -> bool:
    """dest_ip is on one of iface's IPv4 networks, or the kernel routes dest_ip via iface."""
    return in_subnet(iface, dest_ip) or route(dest_ip) == iface.name


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


# --- *_SOCKET_IFNAME -------------------------------------------------------------------------
@dataclass(frozen=True)
class _Check:
    var: str
    value: str
    ifaces: tuple[Interface, ...]
    endpoint: str | None
    node: str
    route: RouteLookup

    @property
    def multi_node(self) -> bool:
        return self.endpoint is not None and not is_loopback(self.endpoint)

    @property
    def nccl(self) -> bool:
        return self.var.upper().startswith("NCCL")

    def problem(self, diag: Diagnosis, what: str, cause: str = "") -> Problem:
        names = ", ".join(i.name for i in self.ifaces) or "none"
        observed = f"{self.var}={self.value}: {what} on node {self.node} (interfaces: {names})"
        return diag.problem(observed, cause=cause, fix=self.fix(), hosts=(self.node,))

    def fix(self) -> str:
        best = propose_interface(self.ifaces, self.endpoint, self.route)
        if best is None:
            target = f" and reaches {self.endpoint}" if self.multi_node else ""
            return (f"unset {self.var}, or set it to an interface that is up, has an IPv4 "
                    f"address{target} (none on this node qualifies: check the endpoint address "
                    "and this node's cabling/VLAN)")
        return f"set {self.var}={self._value_for(best.name)} ({self._reason(best)})"

    def _value_for(self, name: str) -> str:
        shadowed = any(i.name != name and i.name.startswith(name) for i in self.ifaces)
        return f"={name}" if self.nccl and shadowed else name

    def _reason(self, iface: Interface) -> str:
        addrs = ", ".join(str(a) for a in iface.ipv4)
        if not self.multi_node:
            return f"{iface.name} has {addrs}; enough for a single-node run"
        if self.endpoint is not None and in_subnet(iface, self.endpoint):
            return f"{iface.name} has {addrs}, which reaches {self.endpoint}"
        return f"{iface.name} has {addrs}; the kernel routes {self.endpoint} via {iface.name}"


def check_socket_ifname(var_name: str, value: str, ifaces: Sequence[Interface],
                        endpoint_ip: str | None = None, *, node: str | None = None,
                        route: RouteLookup = route_interface) -> list[Problem]:
    """Problems with GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME=value on this node.

    endpoint_ip is the rendezvous host's address; None or loopback means a single-node run.
    `route` looks up the kernel's interface for an address (injectable for tests).
    """
    chk = _Check(var_name, value, tuple(ifaces), endpoint_ip, node or socket.gethostname(), route)
    if chk.nccl:
        return _check_nccl(chk) if len(value) > 1 else []  # NCCL ignores 0/1-char values
    return _check_gloo(chk) if value else []


def _check_gloo(chk: _Check) -> list[Problem]:
    if chk.value[0] in "^=":
        return [chk.problem(diagnoses.BAD_SOCKET_IFNAME,
                            f"'{chk.value[0]}' is NCCL syntax; gloo takes exact interface names",
                            cause="gloo looks the whole text up as interface names, so "
                                  f"'{chk.value.split(',')[0]}' matches no interface")]
    by_name = {i.name: i for i in chk.ifaces}
    names = chk.value.split(",")
    problems = []
    for name in names:
        label = f"{name!r}: " if len(names) > 1 else ""
        iface = by_name.get(name)
        found = (chk.problem(diagnoses.BAD_SOCKET_IFNAME, f"{label}no such interface")
                 if iface is None else _usability(chk, iface, label))
        if found is not None:
            problems.append(found)
    return problems


def nccl_matches(value: str, ifaces: Sequence[Interface]) -> list[Interface]:
    """The interfaces NCCL_SOCKET_IFNAME=value selects, in system order."""
    exclude = value.startswith("^")
    rest = value[1:] if exclude else value
    exact = rest.startswith("=")
    rest = rest[1:] if exact else rest
    items = [p.split(":", 1)[0] for p in rest.split(",") if p]  # NCCL allows prefix:port
    if not items:
        return list(ifaces)

    def hit(name: str) -> bool:
        return any(name == p if exact else name.startswith(p) for p in items)
    return [i for i in ifaces if hit(i.name) != exclude]


def _check_nccl(chk: _Check) -> list[Problem]:
    matched = nccl_matches(chk.value, chk.ifaces)
    if not matched:
        what = "excludes every interface" if chk.value.startswith("^") else "matches no interface"
        return [chk.problem(diagnoses.BAD_SOCKET_IFNAME, what)]
    with_v4 = [i for i in matched if i.ipv4]
    chosen = (with_v4 or [i for i in matched if any(not is_loopback(a.address) for a in i.ipv6)]
              or matched)[0]
    label = f"NCCL would use {chosen.name} (first of {', '.join(i.name for i in matched)}): "
    found = _usability(chk, chosen, label if len(matched) > 1 else "")
    return [found] if found is not None else []


def _usability(chk: _Check, iface: Interface, label: str) -> Problem | None:
    bad = diagnoses.BAD_SOCKET_IFNAME
    if not iface.is_up:
        return chk.problem(bad, f"{label}{iface.name} is down")
    if not iface.ipv4:
        v6 = ", ".join(str(a) for a in iface.ipv6) or "no IPv6 either"
        return chk.problem(bad, f"{label}{iface.name} has no IPv4 address (IPv6: {v6})",
                           cause="the interface has no IPv4 address, so the rendezvous "
                                 "(an IPv4 address) cannot be reached from it")
    if not chk.multi_node:
        return None
    if iface.is_loopback:
        return chk.problem(SOCKET_IFNAME_UNREACHABLE,
                           f"{label}{iface.name} is loopback but the run spans nodes "
                           f"(endpoint {chk.endpoint})",
                           cause="a loopback interface only reaches this node itself")
    endpoint = str(chk.endpoint)
    if in_subnet(iface, endpoint):
        return None
    via = chk.route(endpoint)
    if via == iface.name:
        return None
    kernel = f"the kernel routes it via {via}" if via else "this node has no route to it"
    addrs = ", ".join(str(a) for a in iface.ipv4)
    return chk.problem(SOCKET_IFNAME_UNREACHABLE,
                       f"{label}{iface.name} ({addrs}) does not reach the endpoint {endpoint} "
                       f"({kernel})")
