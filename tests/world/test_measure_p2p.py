"""ddpcheck.worker.timing's point-to-point on real gloo ranks: the same code NCCL runs.

World tier: two spawned processes with a TCPStore on loopback. The two-rank ring (prev ==
next, the case that deadlocks with ungrouped NCCL send/recv) and the link probe (store
handshake, one batch per transfer, ack) must finish within a deadline with intact data.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from tests.helpers.spawned import run_ranks

pytestmark = pytest.mark.world


def _worker(rank: int, port: int, out: dict) -> None:
    from ddpcheck.worker.timing import exchange, link_gbps

    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timedelta(seconds=30))
    dist.init_process_group("gloo", store=dist.PrefixStore("pg", store), rank=rank,
                            world_size=2, timeout=timedelta(seconds=30))
    try:
        mine = torch.full((4096,), rank, dtype=torch.int64)
        got = torch.empty_like(mine)
        exchange([(mine, 1 - rank)], [(got, 1 - rank)])
        rates = [link_gbps(rank, src, 1 - src, 2, torch.device("cpu"), store, f"t/{src}")
                 for src in (0, 1)]
        out[rank] = (int(got[0]), bool((got == 1 - rank).all()), rates)
    finally:
        dist.destroy_process_group()


def test_ring_and_link_probe_complete_with_intact_data_on_gloo() -> None:
    out = run_ranks(_worker, timeout=120)
    assert out[0][:2] == (1, True) and out[1][:2] == (0, True)
    # each direction's rate is known on its sender only
    assert out[0][2][0] > 0.01 and out[0][2][1] == 0.0
    assert out[1][2][1] > 0.01 and out[1][2][0] == 0.0
