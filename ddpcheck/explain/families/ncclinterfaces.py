"""What NCCL's INFO lines say of the interfaces and transports it used.

Runs inside ``ddpcheck explain`` (a pure reader of log lines), from the network family's
whole-log step (``netcontext.refine``) and ``ibfallback``. A bootstrap failing alone over an
interface NCCL picked itself is likely that interface (``bootstrap_interface``); an address
of no family is NCCL_SOCKET_IFNAME only where the variable is set and NCCL did not show it
found that interface (``odd_family``); an interface list names no cause when NCCL's own
connection lines show every peer inside the node (``one_node_interfaces``, ``vias_by_file``,
``inside_node``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.diagnoses import BAD_SOCKET_IFNAME
from ddpcheck.explain.causality import HINT, Explained
from ddpcheck.explain.codes import NCCL_ERROR, NCCL_WRONG_INTERFACE
from ddpcheck.explain.families.ncclresult import FILES, TRACE_LINE
from ddpcheck.explain.prefilter import records_for
from ddpcheck.explain.reader import Record

# The interface NCCL's bootstrap uses: bootstrap.cc "Bootstrap : Using ib0:10.1.2.3<0>" (2.4
# printed a list "Using [0]eth0:...<0> [1]docker0:...<0>"), and net_ib.cc's "NET/IB : Using
# [0]mlx5_0:1/IB ... ; OOB ibp75s0:192.168.0.103<0>" (the same interface, for IB's
# out-of-band exchange). misc/socket.cc ncclFindInterfaces picks it when
# NCCL_SOCKET_IFNAME is unset: ib* (IPoIB) first, then anything but docker*/lo, then docker*.
# NCCL >= 2.24 prints "Bootstrap: Using ib0:10.1.2.3<0>" (INFO(NCCL_BOOTSTRAP, ...), no space
# before the colon); its "Bootstrap: Using mlx5_0:1" (a net device's name and port, no
# address) is another line.
BOOTSTRAP_IF = re.compile(r"(?:Bootstrap ?: Using|; OOB) (?:\[0\])?(?P<ifname>[\w.-]+):"
                          r"(?P<addr>[^<\s]+)<")
# Interfaces that often carry no route to the other nodes: IPoIB without IP routing between
# the nodes, container bridges and veths, link-local addresses.
UNROUTED_IF = re.compile(r"^(?:ib|docker|br-|veth|virbr)")
UNROUTED_ADDR = re.compile(r"^(?:169\.254\.|fe80:)")
IFNAME_SET = re.compile(r"NCCL_SOCKET_IFNAME(?: set (?:by environment )?to|=)")


def bootstrap_interface(found: Sequence[Explained],
                        records: Sequence[Record]) -> list[Explained]:
    """NCCL's bootstrap failing with a system error (a trace through bootstrap.cc, "-> 2") and
    nothing else in the log, on an interface NCCL picked itself that often has no route to
    the other nodes: likely that interface (nccl-wrong-interface), as a hint.

    Why a hint: NCCL 2.18's socketPollConnect returns ncclSystemError without a WARN when
    the connect ends in an errno other than ECONNREFUSED/ETIMEDOUT (EHOSTUNREACH,
    ENETUNREACH): no route to the root's address, which a firewall that rejects with
    icmp-host-prohibited also gives; NCCL's maintainers answer such bootstrap failures with
    NCCL_SOCKET_IFNAME (the bootstrap uses TCP sockets only, NVIDIA/nccl#1000)."""
    found = list(found)
    if len(found) != 1 or found[0].problem.code != NCCL_ERROR.code or any(
            IFNAME_SET.search(r.text) for r in records):
        return found
    boot = [r for r in records if (m := TRACE_LINE.search(r.text))
            and FILES.get(m["file"]) == "bootstrap" and m["ret"] == "2"]
    picked = next((r for r in records if (m := BOOTSTRAP_IF.search(r.text))
                   and (UNROUTED_IF.match(m["ifname"]) or UNROUTED_ADDR.match(m["addr"]))),
                  None)
    if not boot or picked is None or not (m := BOOTSTRAP_IF.search(picked.text)):
        return found
    e = found[0]
    problem = NCCL_WRONG_INTERFACE.problem(
        f"{e.problem.observed} | {picked.text.strip()[:200]}", ranks=e.problem.ranks,
        hosts=e.problem.hosts,
        cause=f"NCCL's bootstrap failed to connect (a system error, no WARN: most often no "
              f"route to the root rank's address) over {m['ifname']} ({m['addr']}), the "
              "interface NCCL picked itself with NCCL_SOCKET_IFNAME unset (it prefers ib* "
              "IPoIB interfaces, then any but docker/lo), which often has no route between "
              "the nodes; a firewall rejecting NCCL's ports looks the same",
        fix="set NCCL_SOCKET_IFNAME to the NIC the nodes reach each other on (ip -4 addr; "
            "e.g. NCCL_SOCKET_IFNAME=eth0) on every node; if it persists, allow TCP between "
            "the nodes on all ports")
    where_seen = f"{picked.source}:{picked.lineno}"
    return [replace(e, problem=problem, grade=HINT, root=True,
                    evidence=(*e.evidence, where_seen)[:5])]


# NCCL misc/socket.cc: the address it was given has no known family. With
# NCCL_SOCKET_IFNAME set (NCCL INFO "NCCL_SOCKET_IFNAME set by environment to X") that is the
# interface; without it, a peer's bootstrap bytes read as an address (ranks on different
# NCCL versions) fit as well: the line alone cannot tell. With the variable set and NCCL
# showing the interface it found (bootstrap.cc "Bootstrap : Using eth0:10.0.0.1<0>",
# net_socket.cc "NET/Socket : Using [0]eth0:..."), the variable named a usable interface and
# the version reading is left: not the interface either. NCCL >= 2.24 writes "Bootstrap: Using
# eth0:10.0.0.1<0>"; net_socket.cc's "NET/Socket: Using 2 threads and 8 sockets per thread"
# names no interface.
ODD_FAMILY = "is neither AF_INET"
IF_FOUND = re.compile(r"(?:Bootstrap ?|NET/Socket ): Using (?:\[\d+\])?[\w.-]+:[^<\s]+<")


def odd_family(found: list[Explained], ifname_set: bool,
               records: Sequence[Record]) -> list[Explained]:
    """The odd family is the variable only when it is set and the same file does not show
    NCCL finding an interface (another node's or job's log beside it does not count)."""
    found_in = {r.source for r in records_for(records, IF_FOUND) if IF_FOUND.search(r.text)}
    return [e if ifname_set and e.first.source not in found_in else _hedged_family(e)
            for e in found]


def _hedged_family(e: Explained) -> Explained:
    if e.problem.code != BAD_SOCKET_IFNAME.code or ODD_FAMILY not in e.problem.observed:
        return e
    return replace(e, problem=NCCL_ERROR.problem(
        e.problem.observed, ranks=e.problem.ranks, hosts=e.problem.hosts,
        cause="NCCL got an address of no known family: NCCL_SOCKET_IFNAME naming no usable "
              "interface (NVIDIA/nccl#1837), or ranks running different NCCL versions (a "
              "peer's bootstrap message read as an address); the log does not say which",
        fix="compare the NCCL version of every node (the 'NCCL version' line, pip list | grep "
            "nccl) and install the same one everywhere; check that NCCL_SOCKET_IFNAME, if set, "
            "names an interface of every node (ip -4 addr)"))


# NCCL's connection lines (transport.cc / net.cc, NCCL_DEBUG=INFO): "Channel 00/0 : 0[0] ->
# 1[1] via P2P/IPC", "... via SHM/direct/direct", "Channel 00/0 : 1[0] -> 0[0] [receive] via
# NET/IB/0" (2.4: "Ring 00 : 0 -> 1 [send] via NET/Socket/0"). Only NET (and CollNet)
# connections cross nodes over the socket or IB interfaces.
CHANNEL = re.compile(r"(?:Channel|Ring) \d+(?:/\d+)? : .* via (?P<via>\w+)")
# The interface list as net_socket.cc prints it, on one line or one interface a line.
LISTING = re.compile(r"NET/Socket : Using|^\s*\[\d+\](?:br-|veth|docker|virbr)")


def one_node_interfaces(found: Sequence[Explained],
                        records: Sequence[Record]) -> list[Explained]:
    """An interface list (NCCL INFO "NET/Socket : Using [1]docker0:...") names no cause when
    NCCL's own connection lines show every peer reached inside the node (P2P, SHM): the
    interfaces carry no collective traffic there, and the bootstrap works over any local one."""
    vias = vias_by_file(records)
    return [e for e in found if not (e.problem.code == NCCL_WRONG_INTERFACE.code
                                     and LISTING.search(e.first.text)
                                     and inside_node(vias.get(e.first.source, set())))]


def vias_by_file(records: Sequence[Record]) -> dict[str, set[str]]:
    """The transports NCCL's connection lines name ("P2P", "SHM", "NET"), per file: another
    job's or node's log is not this one."""
    vias: dict[str, set[str]] = {}
    for r in records_for(records, CHANNEL):
        if m := CHANNEL.search(r.text):
            vias.setdefault(r.source, set()).add(m["via"])
    return vias


def inside_node(vias: set[str]) -> bool:
    """Every connection a file shows stays inside the node (none crosses over NET/CollNet)."""
    return bool(vias) and not vias & {"NET", "COLLNET", "CollNet"}
