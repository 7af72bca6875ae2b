"""This node's network ports as NCCL would use them, and the cross-node busbw they allow.

Runs inside every worker (reads /sys); the arithmetic is pure and unit-tested. A cross-node
all-reduce is bounded by the NICs, not by NVLink, so a multi-node figure is judged against
the ports' line rate: 400 Gbit/s (4X NDR) moves at most 50 GB/s per port, and nccl-tests'
busbw "should be independent of the number of ranks" and comparable to the hardware's peak
(https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ddpcheck.node.socketifname import parse_socket_ifname

# Share of line rate below which the cross-node figure is a problem. ddpcheck's margins, not
# NVIDIA figures: RDMA (NET/IB) reaches ~90% of line rate in nccl-tests at large sizes, TCP
# sockets (NET/Socket) far less and very unevenly, and ddpcheck stops at 256 MiB messages.
RDMA_SHARE, SOCKET_SHARE = 0.6, 0.25
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


@dataclass(frozen=True)
class Nic:
    """One port: an RDMA port (InfiniBand or RoCE) or an Ethernet interface."""

    name: str
    gbit: float
    rdma: bool


def parse_ib_rate(text: str) -> float | None:
    """Gbit/s from /sys/class/infiniband/DEV/ports/N/rate ("400 Gb/sec (4X NDR)")."""
    m = _RATE.match(text)
    return float(m.group(1)) if m else None


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def rdma_ports(sys_root: str = "/sys") -> list[Nic]:
    """Active RDMA ports with their rate (state "4: ACTIVE")."""
    base = os.path.join(sys_root, "class", "infiniband")
    ports = []
    for dev in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        pdir = os.path.join(base, dev, "ports")
        for port in sorted(os.listdir(pdir)) if os.path.isdir(pdir) else []:
            here = os.path.join(pdir, port)
            rate = parse_ib_rate(_read(os.path.join(here, "rate")))
            if rate and "ACTIVE" in _read(os.path.join(here, "state")):
                ports.append(Nic(f"{dev}:{port}", rate, True))
    return ports


def ethernet_ports(env: Mapping[str, str], sys_root: str = "/sys") -> list[Nic]:
    """Up interfaces NCCL's socket transport may use (NCCL_SOCKET_IFNAME, else not lo/docker)."""
    base = os.path.join(sys_root, "class", "net")
    spec = parse_socket_ifname(env.get("NCCL_SOCKET_IFNAME", "^lo,docker"))
    ports = []
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        speed = _read(os.path.join(base, name, "speed"))
        up = _read(os.path.join(base, name, "operstate")) == "up"
        if up and spec.matches(name) and speed.isdigit() and int(speed) > 0:
            ports.append(Nic(name, int(speed) / 1000, False))
    return ports


def node_nics(env: Mapping[str, str], sys_root: str = "/sys") -> list[Nic]:
    """The ports NCCL would send over: RDMA ports unless NCCL_IB_DISABLE=1, else Ethernet."""
    if env.get("NCCL_IB_DISABLE", "0").strip() not in ("1",):
        rdma = rdma_ports(sys_root)
        if rdma:
            return rdma
    return ethernet_ports(env, sys_root)


def nic_reference(nics: Sequence[Nic], ranks_per_node: int) -> tuple[float, str] | None:
    """(minimum expected cross-node busbw GB/s, why) for one node's ports, None if unknown.

    A node's ranks spread their rings over at most one port each, so min(ports, ranks) of the
    fastest ports bound the node's cross-node busbw.
    """
    if not nics or ranks_per_node < 1:
        return None
    used = sorted(nics, key=lambda n: -n.gbit)[:ranks_per_node]
    line = sum(n.gbit for n in used) / 8
    rdma = all(n.rdma for n in used)
    share = RDMA_SHARE if rdma else SOCKET_SHARE
    rates = sorted({n.gbit for n in used})
    each = "/".join(f"{r:g}" for r in rates)
    kind = "RDMA (InfiniBand/RoCE)" if rdma else "Ethernet (NCCL sockets)"
    text = (f"{len(used)} x {each} Gbit/s {kind} port(s) per node carry at most {line:.1f} "
            f"GB/s (line rate); the minimum expected here is {share:.0%} of it "
            f"({'NET/IB reaches ~90% in nccl-tests' if rdma else 'TCP reaches far less'})")
    return line * share, f"{text}: {line * share:.1f} GB/s"


def slowest(refs: Sequence[Sequence[object] | None]) -> tuple[float, str] | None:
    """The lowest (GB/s, why) among the nodes' references (None entries: node unknown)."""
    known = [(float(r[0]), str(r[1])) for r in refs if r]  # type: ignore[arg-type]
    return min(known, key=lambda r: r[0]) if known else None


def world_reference(world: Any, key: str, ranks_per_node: int) -> tuple[float, str] | None:
    """The slowest node's NIC reference; every rank reads its own node's ports.

    Cost: one ``decide`` (3 store operations per non-zero rank); rank 0 reads every rank's
    reference (O(R) bytes once) and every rank reads back only the slowest (O(1) bytes).
    """
    mine = nic_reference(node_nics(os.environ), ranks_per_node)
    decision, _ = world.decide(f"nic-reference/{key}", list(mine) if mine else None,
                               lambda ex: slowest(list(ex.values.values())))
    return (float(decision[0]), str(decision[1])) if decision else None


def sweep_reference(nodes: int, expect_busbw: float | None, intra: tuple[float, str] | None,
                    nic: tuple[float, str] | None) -> tuple[float | None, str]:
    """(minimum busbw, what it is) for an all-reduce over the whole world: the scope rule.

    --expect-busbw wins. A single-node world is judged by the GPU model's intra-node figure
    (NVLink/NVSwitch or PCIe), a multi-node world by the NICs (it is network-bound): a
    multi-node figure is never compared with an NVLink reference.
    """
    if expect_busbw is not None:
        return expect_busbw, "busbw (--expect-busbw)"
    if nodes <= 1:
        return (intra[0], f"busbw (intra-node reference, {intra[1]})") if intra else (None, "")
    if nic:
        return nic[0], f"busbw across {nodes} nodes (NIC reference, {nic[1]})"
    return None, ""
