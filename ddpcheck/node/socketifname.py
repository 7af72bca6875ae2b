"""*_SOCKET_IFNAME: NCCL's syntax, and both variables checked against this node's interfaces.

Runs in the launcher's node preflight and check-in (the advertised address), and in the
worker's link probes (``node.nics``); never imports torch. Matching rules mirror the
libraries: gloo takes comma-separated exact names and uses the first; NCCL takes
comma-separated name prefixes, a leading ``^`` excludes them, a leading ``=`` makes them
exact (NCCL's ``parseStringList``/``matchIfList``, src/misc/utils.cc, used by
``ncclFindInterfaces`` in src/misc/socket.cc), and bootstraps over the first matching
interface that has an address (IPv4 first).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ddpcheck import diagnoses
from ddpcheck.diagnoses import Diagnosis, Problem, register
from ddpcheck.node.interfaces import (
    Interface,
    RouteLookup,
    in_subnet,
    is_loopback,
    propose_interface,
    route_interface,
)

SOCKET_IFNAME_UNREACHABLE = register(
    "socket-ifname-unreachable", "a *_SOCKET_IFNAME interface cannot reach the other nodes",
    "the interface is loopback or sits on a network that does not lead to the rendezvous host",
    "set the variable to the interface on the network all nodes share, or unset it")


@dataclass(frozen=True)
class IfnameSpec:
    """NCCL_SOCKET_IFNAME as NCCL reads it.

    A comma list of name prefixes (`eth` matches eth0, eth1); a leading `^` excludes the
    listed ones, a leading `=` makes them exact names, `^=` excludes exact names. Empty items
    and `:port` suffixes are dropped; spaces are kept and matched literally. Unset, NCCL
    prefers ib* interfaces, then anything but docker* and lo.
    """

    names: tuple[str, ...]
    exclude: bool = False
    exact: bool = False

    def matches(self, ifname: str) -> bool:
        if not self.names:  # NCCL treats an empty list as "no restriction"
            return True
        hit = any(ifname == n if self.exact else ifname.startswith(n) for n in self.names)
        return hit != self.exclude

    def select(self, interfaces: Iterable[str]) -> list[str]:
        return [i for i in interfaces if self.matches(i)]


def parse_socket_ifname(value: str) -> IfnameSpec:
    """NCCL_SOCKET_IFNAME=value as NCCL reads it (the one parser of that syntax)."""
    rest = value
    exclude = rest.startswith("^")
    rest = rest[1:] if exclude else rest
    exact = rest.startswith("=")
    rest = rest[1:] if exact else rest
    names = tuple(n.split(":")[0] for n in rest.split(",") if n.split(":")[0])
    return IfnameSpec(names, exclude, exact)


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
    spec = parse_socket_ifname(value)
    return [i for i in ifaces if spec.matches(i.name)]


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
