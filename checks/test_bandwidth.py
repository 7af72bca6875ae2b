"""Stage *bandwidth*: all-reduce sweep over message sizes, timed like nccl-tests.

Runs inside every worker. Every rank runs the same deterministic schedule (sizes,
warm-up, iterations, trials) so the ranks enter the same collectives; the time of a trial
is the slowest rank's, and rates come from the median trial time.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from ddpcheck import links
from ddpcheck.bandwidth import format_sweep, sizes, sweep_row
from ddpcheck.diagnoses import ProblemFound
from ddpcheck.measure import iterations, time_all_reduce
from ddpcheck.stages import stage

WARMUP, TRIALS = 2, 3


def _expectation(pg, settings):
    """(minimum busbw GB/s, where it comes from): --expect-busbw, else a GPU-model reference."""
    if settings.expected_busbw is not None:
        return settings.expected_busbw, "busbw (--expect-busbw)"
    if pg.backend == "nccl":
        name = torch.cuda.get_device_name()
        ref = links.reference_busbw(name, pg.local_world_size, "nccl")
        if ref:
            return ref[0], f"busbw (reference for {pg.local_world_size}x {name})"
    return None, ""


@stage("bandwidth")
def test_all_reduce_bandwidth_sweep(pg, settings, record):
    """all-reduce time, algbw and busbw over message sizes (nccl-tests' definitions)."""
    if pg.world_size < 2:
        pytest.skip("bandwidth needs at least 2 ranks")
    max_bytes = (256 << 20) if pg.backend == "nccl" else (16 << 20)
    rows = []
    for nbytes in sizes(4 << 10, max_bytes, factor=4):
        t = torch.ones(nbytes // 4, dtype=torch.float32, device=pg.device)
        iters = iterations(nbytes)
        for _ in range(WARMUP):
            dist.all_reduce(t)
        trials = [time_all_reduce(t, iters, pg.backend) for _ in range(TRIALS)]
        rows.append(sweep_row(nbytes, 4, "float", trials, pg.world_size).to_dict())
    peak = max(r["busbw"] for r in rows)
    record.measure("allreduce_sweep", rows)
    record.measure("peak_busbw_gbps", peak)
    record.key_figure(f"{peak:.2f} GB/s busbw")
    expected, what = _expectation(pg, settings)
    if expected is not None:
        record.measure("expected_busbw_gbps", expected)
        problems = links.expect_verdict(peak, expected, what)
        if problems:
            raise ProblemFound(*problems)
    if pg.rank == 0:
        print("\n" + format_sweep(rows, pg.world_size, pg.backend))  # shown with pytest -s
