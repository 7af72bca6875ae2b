"""Stage *bandwidth*: all-reduce sweep over message sizes, timed like nccl-tests.

Runs inside every worker. Every rank runs the same deterministic schedule (sizes,
warm-up, iterations, trials) so the ranks enter the same collectives; the time of a trial
is the slowest rank's, and rates come from the median trial time.
"""

from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist

from ddpcheck.bandwidth import format_sweep, sizes, sweep_row
from ddpcheck.stages import stage

WARMUP, TRIALS = 2, 3


def _iterations(nbytes: int) -> int:
    """More iterations for small messages so each trial lasts long enough to time."""
    return max(2, min(50, (8 << 20) // max(nbytes, 1)))


def _time_trial(t: torch.Tensor, iters: int, backend: str) -> float:
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    if backend == "nccl":
        torch.cuda.synchronize()
    local = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
    dist.all_reduce(local, op=dist.ReduceOp.MAX)  # the collective is as slow as its slowest rank
    return float(local.item())


@stage("bandwidth")
def test_all_reduce_bandwidth_sweep(pg, record):
    """all-reduce time, algbw and busbw over message sizes (nccl-tests' definitions)."""
    if pg.world_size < 2:
        pytest.skip("bandwidth needs at least 2 ranks")
    max_bytes = (256 << 20) if pg.backend == "nccl" else (16 << 20)
    rows = []
    for nbytes in sizes(4 << 10, max_bytes, factor=4):
        t = torch.ones(nbytes // 4, dtype=torch.float32, device=pg.device)
        iters = _iterations(nbytes)
        for _ in range(WARMUP):
            dist.all_reduce(t)
        trials = [_time_trial(t, iters, pg.backend) for _ in range(TRIALS)]
        rows.append(sweep_row(nbytes, 4, "float", trials, pg.world_size).to_dict())
    peak = max(r["busbw"] for r in rows)
    record.measure("allreduce_sweep", rows)
    record.measure("peak_busbw_gbps", peak)
    record.key_figure(f"{peak:.2f} GB/s busbw")
    if pg.rank == 0:
        print("\n" + format_sweep(rows, pg.world_size, pg.backend))  # shown with pytest -s
