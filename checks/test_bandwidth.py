"""Stage *bandwidth*: all-reduce sweep over message sizes, timed like nccl-tests.

Runs inside every worker. Every rank runs the same deterministic schedule (sizes,
warm-up, iterations, trials) so the ranks enter the same collectives; the time of a trial
is the slowest rank's, and rates come from the median trial time. Only rows at sizes and
iteration counts where the reference applies (judgements.bandwidth.judge_rule: 256 MiB and
5+ iterations on NCCL) are judged; smaller ones are shown (docs/bandwidth.md).
"""

from __future__ import annotations

import pytest
import torch

from ddpcheck.diagnoses import ProblemFound
from ddpcheck.judgements import expectations
from ddpcheck.judgements.bandwidth import SweepRow, judge_rule, judged_peak, sizes, sweep_row
from ddpcheck.node import nics
from ddpcheck.report.tables import format_sweep
from ddpcheck.stages import stage
from ddpcheck.worker.timing import iterations, time_all_reduce, warm_up

TRIALS = 3


def _expectation(pg, settings):
    """(minimum busbw GB/s, where it comes from) for the sweep over the whole world.

    A reference is compared only with what it describes: a single-node world with the GPU
    model's NVLink/NVSwitch (or PCIe) figure, a multi-node world with the NICs' line rate
    (its busbw is network-bound). --expect-busbw overrides both.
    """
    if settings.expected_busbw is not None or pg.backend != "nccl":
        return nics.sweep_reference(1, settings.expected_busbw, None, None)
    nodes = len({pg.hosts_by_rank.get(r, f"rank{r}") for r in range(pg.world_size)})
    intra = expectations.reference_busbw(torch.cuda.get_device_name(), pg.local_world_size,
                                         "nccl") if nodes == 1 else None
    nic = nics.world_reference(pg, "sweep", pg.local_world_size) if nodes > 1 else None
    return nics.sweep_reference(nodes, None, intra, nic)


@stage("bandwidth")
def test_all_reduce_bandwidth_sweep(pg, settings, record):
    """all-reduce time, algbw and busbw over message sizes (nccl-tests' definitions)."""
    if pg.world_size < 2:
        pytest.skip("bandwidth needs at least 2 ranks")
    rule = judge_rule(pg.backend)
    max_bytes = (256 << 20) if pg.backend == "nccl" else (16 << 20)
    rows: list[SweepRow] = []
    for nbytes in sizes(4 << 10, max_bytes, factor=4):
        t = torch.ones(nbytes // 4, dtype=torch.float32, device=pg.device)
        iters = iterations(nbytes, pg.backend, warm_up(t, pg.backend))
        trials = [time_all_reduce(t, iters, pg.backend) for _ in range(TRIALS)]
        rows.append(sweep_row(nbytes, 4, "float", trials, pg.world_size, iters,
                              rule.applies(nbytes, iters)))
        del t
    peak = max(r.busbw for r in rows)
    record.measure("allreduce_sweep", [r.to_dict() for r in rows])
    record.measure("peak_busbw_gbps", peak)
    record.key_figure(f"{peak:.2f} GB/s busbw")
    expected, what = _expectation(pg, settings)
    if expected is not None:
        record.measure("expected_busbw_gbps", expected)
        record.measure("expected_busbw_source", what)
        record.measure("busbw_judge_rule", rule.describe())
        judged = judged_peak(rows)
        if judged is not None:
            record.measure("judged_busbw_gbps", judged.busbw)
            problems = expectations.judge_expectation(
                judged.busbw, expected, f"{what}; {rule.describe()}")
            if problems:
                raise ProblemFound(*problems)
    if pg.rank == 0:
        sweep = [r.to_dict() for r in rows]
        print("\n" + format_sweep(sweep, pg.world_size, pg.backend))  # shown with pytest -s
