"""InfiniBand configured, none found: NCCL fell back to TCP sockets (nccl-socket-fallback).

Runs inside ``ddpcheck explain``, after the patterns (a refinement over all records, since
the evidence is two lines of one file). NCCL's IB transport says it found no usable HCA at
INFO level (src/transport/net_ib.cc: ``NET/IB : No device found.``) and goes on over its
socket transport (``NET/Socket : Using ...``, ``Using network Socket``). On a single node,
or on a cluster without InfiniBand, that is no failure. It is one when the job configured
InfiniBand: NCCL prints the variables it read from the environment (src/misc/param.cc:
``NCCL_IB_DISABLE set by environment to 0.``, ``NCCL_IB_HCA set by environment to
mlx5_0:1,...``; older releases ``NCCL_IB_HCA set to ...``; ``NCCL_NET set by environment to
IB``), so the same file showing both is a job that asked for InfiniBand and got TCP: the
slow inter-node traffic, or the hang, that follows. The run side reads the same lines
(``ddpcheck.node.ncclinfo``, which knows the node's RDMA ports).

Graded a warning: it answers only when the log shows no other failure. A file whose NCCL
connection lines show every peer inside the node (``via P2P``/``via SHM``, no ``via NET``)
or a connection ``via NET/IB`` (IB did work for it), or NCCL's ``Using network X`` naming
another network than ``Socket`` (a net plugin such as aws-ofi-nccl), is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ddpcheck.explain.causality import WARNING, Explained
from ddpcheck.explain.families.ncclinterfaces import inside_node, vias_by_file
from ddpcheck.explain.prefilter import records_for
from ddpcheck.explain.reader import Record
from ddpcheck.node.ncclinfo import NCCL_SOCKET_FALLBACK

NO_IB_DEVICE = re.compile(r"NET/IB ?: ?No device found")
IB_WANTED = re.compile(r"NCCL_IB_HCA set (?:by environment )?to \S|"
                       r"NCCL_IB_DISABLE set by environment to 0\b|"
                       r"NCCL_NET set by environment to IB\b")
NEXT = ("ddpcheck run --nodes N --stages collectives,bandwidth (names the transport each "
        "rank's connections used, and why NCCL gave up InfiniBand)")


def refine(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """``found`` plus one nccl-socket-fallback warning per file that configured InfiniBand
    and shows NCCL finding no IB device (none when a pattern already names it)."""
    if any(e.problem.code == NCCL_SOCKET_FALLBACK.code for e in found):
        return found
    if not any(NO_IB_DEVICE.search(r.text) for r in records_for(records, NO_IB_DEVICE)):
        return list(found)  # no file shows NCCL finding no IB device
    by_file: dict[str, list[Record]] = {}
    for r in records:
        by_file.setdefault(r.source, []).append(r)
    out = list(found)
    for recs in by_file.values():
        none = next((r for r in recs if NO_IB_DEVICE.search(r.text)), None)
        wanted = next((r for r in recs if IB_WANTED.search(r.text)), None)
        if none is None or wanted is None or _ib_not_needed_or_used(recs):
            continue
        said = IB_WANTED.search(wanted.text)
        out.append(Explained(
            NCCL_SOCKET_FALLBACK.problem(
                f"NCCL found no InfiniBand device (\"{NO_IB_DEVICE.search(none.text)[0]}\") "
                f"although the job configured it (\"{said[0] if said else ''}...\")",
                cause="the job asked for InfiniBand but NCCL could open no HCA, so it carried "
                      "inter-node traffic over TCP sockets: slow, and a hang where the socket "
                      "path is blocked (a container without /dev/infiniband or libibverbs, "
                      "RDMA not enabled, NCCL_IB_HCA naming devices this node lacks)",
                fix="make the HCAs visible to the job: in a container pass /dev/infiniband "
                    "(--device /dev/infiniband, --privileged or the RDMA device plugin) and "
                    "install libibverbs/rdma-core; check NCCL_IB_HCA against ibv_devices",
                ranks=(none.rank,) if none.rank is not None else (),
                hosts=(none.host,) if none.host else ()),
            none, True, NEXT, (f"{none.source}:{none.lineno}", f"{wanted.source}:{wanted.lineno}"),
            WARNING))
    return out


# The network NCCL chose (init.cc "Using network %s", 2.7 onwards): "Socket" is the fallback;
# any other name (IB, a plugin's "AWS Libfabric", "Libfabric") carries the traffic over RDMA, so
# a "No device found" from NCCL's own IB transport beside it is no fallback.
NETWORK_CHOSEN = re.compile(r"NCCL INFO Using network (?!Socket\b)\w")


def _ib_not_needed_or_used(recs: Sequence[Record]) -> bool:
    return (any(inside_node(v) for v in vias_by_file(recs).values())
            or any("via NET/IB" in r.text or NETWORK_CHOSEN.search(r.text) for r in recs))
