"""ddpcheck.worker.timing's point-to-point under real NCCL: batched, never deadlocked, bounded.

GPU tier. Two spawned ranks on GPUs 0 and 1 with a TCPStore, eager NCCL init (device_id):
the link probe (store handshake + one batch_isend_irecv per transfer) and the ring exchange
with two ranks (prev == next, the case that deadlocks with ungrouped NCCL send/recv).
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist

from tests.helpers.spawned import run_ranks


def _worker(rank: int, port: int, out: dict) -> None:
    from ddpcheck.worker.timing import exchange, link_gbps

    torch.cuda.set_device(rank)
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timedelta(seconds=60))
    dist.init_process_group("nccl", store=store, rank=rank, world_size=2,
                            timeout=timedelta(seconds=60), device_id=torch.device("cuda", rank))
    try:
        dev = torch.device("cuda", rank)
        mine = torch.full((1024,), rank, device=dev)
        got = torch.empty_like(mine)
        exchange([(mine, 1 - rank)], [(got, 1 - rank)])
        rate = link_gbps(rank, 0, 1, 3, dev, store, "gpu-test/0-1")
        out[rank] = (float(got[0]), rate)
    finally:
        dist.destroy_process_group()


def test_link_probe_and_two_rank_ring_complete_under_nccl(need_gpus) -> None:
    need_gpus(2)
    out = run_ranks(_worker, timeout=180)
    assert out[0][0] == 1.0 and out[1][0] == 0.0  # each got the other's tensor
    assert out[0][1] > 1.0 and out[1][1] == 0.0  # GB/s known on the sender only
