"""Stage *bandwidth*, last: the transport NCCL used for each connection is the fabric's.

Runs inside every worker, after the sweep and the link tests made NCCL connect its rings
and trees (connections are set up lazily, at the first collective that needs them). Each
rank reads its own NCCL_DEBUG=INFO file (written there by World.init_process_group,
ddpcheck.node.ncclinfo.capture_env) and this node's ACTIVE RDMA ports
(/sys/class/infiniband/*/ports/*/state); traffic to other nodes over NET/Socket on a node
with ACTIVE ports is ``nccl-socket-fallback`` with the reason NCCL gave.
"""

from __future__ import annotations

import glob
import os

import pytest

from ddpcheck.diagnoses import ProblemFound
from ddpcheck.node import ncclinfo, nics
from ddpcheck.stages import stage


@stage("bandwidth")
def test_nccl_carried_traffic_over_the_fabric_not_sockets(pg, record):
    """Connections to other nodes used InfiniBand/RoCE where the node has ACTIVE ports."""
    if pg.backend != "nccl":
        pytest.skip("transports are NCCL's (gloo always uses TCP)")
    if pg.world_size < 2:  # seen on an H100: a one-rank communicator connects to nothing
        pytest.skip("NCCL connects ranks: a world of one rank has no connection")
    folder = pg.nccl_debug_dir
    files = glob.glob(ncclinfo.debug_file_glob(folder, os.getpid())) if folder else []
    if not files:
        pytest.skip("no NCCL debug file for this rank (run through `ddpcheck run`, which sets "
                    "NCCL_DEBUG_FILE, or set DDPCHECK_RESULTS_DIR)")
    with open(files[0], encoding="utf-8", errors="replace") as fh:
        log = ncclinfo.parse(fh.read())
    ports = [p.name for p in nics.rdma_ports()]
    counts = log.counts()
    record.measure("nccl_transports", counts)
    record.measure("nccl_network", log.network or "-")
    record.key_figure(", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))
                      or "NCCL logged no connection")
    problems = ncclinfo.socket_fallback(log, ports, pg.host, pg.rank)
    if problems:
        raise ProblemFound(*problems)
