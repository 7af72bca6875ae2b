"""Which transport each NCCL connection used, from NCCL_DEBUG=INFO lines, and the verdict.

Pure (no torch): the worker's transport probe (checks/test_transport.py) passes the text of
its own rank's NCCL debug file and this node's ACTIVE RDMA ports (node.nics.rdma_ports);
unit-tested on recorded real logs (tests/data/gpu/SOURCES.md).

NCCL prints one line per connection it sets up, under INFO(NCCL_INIT|NCCL_P2P) or
INFO(NCCL_INIT|NCCL_NET) (src/transport/p2p.cc, shm.cc, net.cc), so SUBSYS=INIT shows it:
``Channel 00/0 : 9[0] -> 0[0] [receive] via NET/IB/0/GDRDMA`` (a network connection over
InfiniBand/RoCE port 0, GPUDirect RDMA), ``via NET/Socket/0`` (TCP), ``via NET/IBext_v8/1``
(the nccl-rdma-sharp plugin), ``via NET/AWS Libfabric/0/GDRDMA`` (aws-ofi-nccl),
``via P2P/CUMEM``, ``P2P/IPC/read``, ``P2P/direct pointer`` (NVLink or PCIe peer-to-peer)
and ``via SHM/direct/direct`` (host shared memory). Its network choice is logged as
``Using network IB|Socket|IBext_v8|AWS Libfabric`` (INIT|NET). When InfiniBand is not used it
says why in the same subsystems: ``NET/IB : No device found.``, ``NCCL_IB_DISABLE set by
environment to 1.``, ``NCCL_NET set by environment to Socket``, a plugin that failed to load.

Capture (:func:`capture_env`, NCCL_DEBUG_SUBSYS=INIT,NET,ENV) writes each rank's lines to
a file of its own (NCCL_DEBUG_FILE; NCCL expands %h to the host name and %p to the pid,
and flushes every line: src/debug.cc), so nothing reaches the user's terminal.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ddpcheck.diagnoses import Problem, register

NCCL_SOCKET_FALLBACK = register(
    "nccl-socket-fallback",
    "NCCL carried traffic between nodes over TCP sockets on a node with active InfiniBand",
    "NCCL did not use the node's InfiniBand/RoCE ports (they are ACTIVE) and fell back to "
    "its socket transport, which runs at a small fraction of the fabric's speed",
    "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET and read the NET/ lines; unset "
    "NCCL_IB_DISABLE / NCCL_NET; give the container /dev/infiniband and libibverbs")

DEBUG_FILE_NAME = "nccl-debug.%h.%p.log"
SUBSYSTEMS = ("INIT", "NET", "ENV")
_CHANNEL = re.compile(r"NCCL INFO Channel (\d+)(?:/\d+)? : (\d+)\[[0-9a-fA-Fx]+\] -> "
                      r"(\d+)\[[0-9a-fA-Fx]+\](?: \[(send|receive)\])? via (.+?)\s*$", re.M)
_USING_NETWORK = re.compile(r"NCCL INFO Using network (\S.*?)\s*$", re.M)
# Why InfiniBand was not used, in the order a fix should address them (first found wins).
_REASONS: tuple[tuple[str, str, str], ...] = (
    (r"NCCL_IB_DISABLE set by environment to [1-9]\d*\.?",
     "NCCL_IB_DISABLE is set", "unset NCCL_IB_DISABLE (or set NCCL_IB_DISABLE=0) in the "
     "job's environment"),
    (r"NCCL_NET set by environment to \S+",
     "NCCL_NET forces a network", "unset NCCL_NET (or set NCCL_NET=IB)"),
    (r"NCCL_IBEXT_DISABLE set by environment to [1-9]\d*\.?",
     "NCCL_IBEXT_DISABLE is set", "unset NCCL_IBEXT_DISABLE"),
    (r"NET/IB : No device found\.?",
     "NCCL's IB transport found no usable device",
     "make the HCAs visible to the job: in a container pass /dev/infiniband (--device "
     "/dev/infiniband, --privileged or the RDMA device plugin) and install libibverbs/"
     "rdma-core; check that NCCL_IB_HCA names existing devices (ibv_devices)"),
    (r"(?:NET/IB : )?Failed to open libibverbs\S*",
     "libibverbs could not be loaded", "install rdma-core/libibverbs in the job's image"),
    (r"NET/Plugin ?: ?(?:Plugin load \(\S+\) returned \d+ : .+|Failed to .+)",
     "the NCCL network plugin failed to load",
     "fix the plugin's install (LD_LIBRARY_PATH, NCCL_NET_PLUGIN) or set "
     "NCCL_NET_PLUGIN=none to use NCCL's internal IB transport"),
)


@dataclass(frozen=True)
class Connection:
    """One connection line: channel, global ranks, direction and the transport text."""

    channel: int
    src: int
    dst: int
    direction: str  # "send", "receive" or "" (intra-node lines print none)
    via: str  # as printed: "NET/IB/0/GDRDMA", "P2P/CUMEM/read", "SHM/direct/direct"

    @property
    def transport(self) -> str:
        """The transport without port and mode: "NET/IB", "NET/Socket", "P2P/CUMEM", "SHM"."""
        parts = self.via.split("/")
        if parts[0] == "SHM":
            return "SHM"
        return "/".join(parts[:2]).split(" ")[0] if parts[0] == "P2P" else "/".join(parts[:2])

    @property
    def network(self) -> str | None:
        """The network of a NET connection ("IB", "Socket", "IBext_v8", "AWS Libfabric")."""
        return self.via.split("/")[1] if self.via.startswith("NET/") else None

    @property
    def gdr(self) -> bool:
        return self.via.endswith("/GDRDMA")


@dataclass(frozen=True)
class TransportLog:
    """What one rank's NCCL_DEBUG=INFO lines say about its connections."""

    connections: tuple[Connection, ...]
    network: str | None  # "Using network X"
    reasons: tuple[tuple[str, str, str], ...]  # (line, what it means, fix) in _REASONS order

    def counts(self) -> dict[str, int]:
        """Connections per transport: {"P2P/CUMEM": 48, "NET/IB": 16}."""
        return dict(Counter(c.transport for c in self.connections))

    def socket_connections(self) -> list[Connection]:
        return [c for c in self.connections if c.network == "Socket"]


def parse(text: str) -> TransportLog:
    """Connections, network choice and the reasons NCCL gave, from NCCL_DEBUG=INFO text."""
    conns = tuple(Connection(int(m.group(1)), int(m.group(2)), int(m.group(3)),
                             m.group(4) or "", m.group(5)) for m in _CHANNEL.finditer(text))
    using = _USING_NETWORK.findall(text)
    reasons = []
    for pattern, meaning, fix in _REASONS:
        m = re.search(pattern, text)
        if m:
            reasons.append((m.group(0).strip(), meaning, fix))
    return TransportLog(conns, using[-1] if using else None, tuple(reasons))


def socket_fallback(log: TransportLog, active_rdma: Sequence[str], host: str,
                    rank: int) -> list[Problem]:
    """nccl-socket-fallback when this rank's NET connections went over sockets (or NCCL
    chose the Socket network) while the node has ACTIVE RDMA ports, naming NCCL's reason."""
    sockets = log.socket_connections()
    if not active_rdma or (not sockets and log.network != "Socket"):
        return []
    what = (f"{len(sockets)} of rank {rank}'s connections went via NET/Socket "
            f"(e.g. {_describe(sockets[0])})" if sockets
            else f"NCCL on rank {rank} chose 'Using network Socket'")
    ports = ", ".join(active_rdma[:8]) + (" ..." if len(active_rdma) > 8 else "")
    if log.reasons:
        line, meaning, fix = log.reasons[0]
        said = f"; NCCL said: \"{line}\" ({meaning})"
    else:
        said, fix = "; NCCL gave no reason in its INIT/NET lines", ""
    return [NCCL_SOCKET_FALLBACK.problem(
        f"{what} while {host} has ACTIVE RDMA port(s) {ports}{said}",
        fix=fix, hosts=[host], ranks=[rank])]


def _describe(c: Connection) -> str:
    side = f" [{c.direction}]" if c.direction else ""
    return f"channel {c.channel}: {c.src} -> {c.dst}{side} via {c.via}"


def capture_env(env: Mapping[str, str], folder: str) -> dict[str, str]:
    """The variables that make NCCL write INFO lines of INIT, NET and ENV to a file per
    process: connections are INIT|P2P or INIT|NET lines, "NET/IB : No device found." is
    INIT|NET, and "NCCL_IB_DISABLE set by environment to 1." is an ENV line (src/misc/param.cc:
    INFO(NCCL_ENV, "%s set by environment to %lld.")).

    NCCL_DEBUG stays at the user's level when it is already INFO or TRACE; the user's
    NCCL_DEBUG_SUBSYS keeps its subsystems, with these added. The file name is the
    same string on every rank (NCCL expands %h and %p), so ranks still agree on NCCL_*.
    """
    level = env.get("NCCL_DEBUG", "").upper()
    out = {"NCCL_DEBUG": level if level in ("INFO", "TRACE") else "INFO",
           "NCCL_DEBUG_FILE": f"{folder.rstrip('/')}/{DEBUG_FILE_NAME}"}
    subsys = [s for s in env.get("NCCL_DEBUG_SUBSYS", "").split(",") if s.strip()]
    if subsys and not subsys[0].startswith("^"):
        out["NCCL_DEBUG_SUBSYS"] = ",".join(subsys + [s for s in SUBSYSTEMS
                                                      if s not in {x.upper() for x in subsys}])
    else:  # unset, or "^..." (all but some): these only, the least that says it
        out["NCCL_DEBUG_SUBSYS"] = ",".join(SUBSYSTEMS)
    return out


def debug_file_glob(folder: str, pid: int) -> str:
    """The glob that finds this process's file (the host part as NCCL writes it)."""
    return f"{folder.rstrip('/')}/{DEBUG_FILE_NAME.replace('%h', '*').replace('%p', str(pid))}"
