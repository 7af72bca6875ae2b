"""Stage *collectives*: every collective of the backend under test gives exact results.

Runs inside every worker, on the default process group of the backend under test.
Values are integers so the checks are exact, whatever the reduction order.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from ddpcheck.diagnoses import WRONG_COLLECTIVE_RESULT
from ddpcheck.stages import stage
from ddpcheck.worker import subgroups
from ddpcheck.worker.timing import exchange


def _wrong(world, what, got, expected):
    return WRONG_COLLECTIVE_RESULT.fail(f"{what} on rank {world.rank} ({world.host}) gave "
                                        f"{got}, expected {expected}")


@stage("collectives")
def test_barrier_is_reached_by_every_rank(pg):
    """Every rank reaches a barrier (gloo: monitored, naming ranks that do not arrive)."""
    if pg.backend == "gloo":
        from datetime import timedelta

        dist.monitored_barrier(timeout=timedelta(seconds=pg.timeout), wait_all_ranks=True)
    else:
        dist.barrier()


@stage("collectives")
def test_all_reduce_sums_exactly(pg):
    """all_reduce(SUM) of each rank's id gives n(n-1)/2 on every rank."""
    t = torch.arange(1024, dtype=torch.int64, device=pg.device) + pg.rank
    dist.all_reduce(t)
    n = pg.world_size
    expected = torch.arange(1024, dtype=torch.int64, device=pg.device) * n + n * (n - 1) // 2
    if not torch.equal(t, expected):
        raise _wrong(pg, "all_reduce", t[:4].tolist(), expected[:4].tolist())


@stage("collectives")
def test_broadcast_from_every_root_arrives_intact(pg):
    """broadcast from the first, the last and each node's leader rank (up to 64 roots)
    delivers that rank's exact values.

    Cost: min(nodes + 2, 64) broadcasts of 32 KiB on the default group, no store operation
    (was one broadcast per rank: 8,192 sequential broadcasts at 8,192 ranks).
    """
    lay = subgroups.layout(pg)
    for root in subgroups.broadcast_roots(pg.world_size, lay.leaders):
        t = torch.full((4096,), pg.rank * 1000 + 7, dtype=torch.int64, device=pg.device)
        dist.broadcast(t, src=root)
        if not bool((t == root * 1000 + 7).all()):
            raise _wrong(pg, f"broadcast from rank {root}", t[0].item(), root * 1000 + 7)


@stage("collectives")
def test_all_gather_collects_every_rank_in_order(pg):
    """all_gather returns every rank's tensor, in rank order."""
    mine = torch.full((256,), pg.rank, dtype=torch.int64, device=pg.device)
    out = [torch.empty_like(mine) for _ in range(pg.world_size)]
    dist.all_gather(out, mine)
    got = [int(o[0]) for o in out]
    if got != list(range(pg.world_size)) or any(not bool((o == o[0]).all()) for o in out):
        raise _wrong(pg, "all_gather", got, list(range(pg.world_size)))


@stage("collectives")
def test_reduce_scatter_gives_each_rank_its_sum(pg):
    """reduce_scatter gives rank r the sum over ranks of chunk r."""
    n = pg.world_size
    inputs = [torch.full((128,), pg.rank + 10 * r, dtype=torch.int64, device=pg.device)
              for r in range(n)]
    out = torch.empty(128, dtype=torch.int64, device=pg.device)
    try:
        dist.reduce_scatter(out, inputs)
    except (RuntimeError, NotImplementedError) as exc:
        if "not supported" in str(exc).lower() or "unimplemented" in str(exc).lower():
            pytest.skip(f"{pg.backend} has no reduce_scatter in torch {torch.__version__}")
        raise
    expected = n * (n - 1) // 2 + 10 * pg.rank * n
    if not bool((out == expected).all()):
        raise _wrong(pg, "reduce_scatter", int(out[0]), expected)


@stage("collectives")
def test_send_recv_around_the_ring(pg):
    """Each rank sends to the next and receives from the previous, values intact."""
    n = pg.world_size
    if n == 1:
        pytest.skip("send/recv needs at least 2 ranks")
    nxt, prv = (pg.rank + 1) % n, (pg.rank - 1) % n
    out = torch.full((8192,), pg.rank, dtype=torch.int64, device=pg.device)
    got = torch.empty_like(out)
    # One batch (ncclGroupStart/End under NCCL): with 2 ranks prev == next, and NCCL's
    # send and recv block on the GPU unless grouped (ddpcheck.worker.timing cites the docs).
    exchange([(out, nxt)], [(got, prv)])
    if not bool((got == prv).all()):
        raise _wrong(pg, f"recv from rank {prv}", int(got[0]), prv)
