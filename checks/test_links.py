"""Stage *bandwidth*, continued: which node or link is slow, and who arrives last.

Runs inside every worker. Pairwise links are measured between one leader rank per node,
scheduled as a round-robin tournament (n-1 rounds, the pairs of a round at the same time),
so the cost grows linearly with the number of nodes. Intra-node and cross-node all-reduce
are measured on their own groups. Measurement stays apart from judgement: the figures are
recorded, and ddpcheck.links turns them into verdicts.
"""

from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist

from ddpcheck import links
from ddpcheck.bandwidth import allreduce_busbw
from ddpcheck.diagnoses import ProblemFound
from ddpcheck.measure import iterations, link_gbps, time_all_reduce
from ddpcheck.stages import stage

P2P_TRIALS = 3
STRAGGLER_ITERS = 20
INTRA_INTER_BYTES = 4 << 20


def _layout(world):
    """(hosts in leader order, {host: its ranks}); the leader of a host is its lowest rank."""
    by_host: dict[str, list[int]] = {}
    for rank in range(world.world_size):
        by_host.setdefault(world.hosts_by_rank.get(rank, f"rank{rank}"), []).append(rank)
    hosts = sorted(by_host, key=lambda h: by_host[h][0])
    return hosts, by_host


@stage("bandwidth")
def test_links_between_every_pair_of_nodes(pg, settings, record):
    """Point-to-point GB/s between every pair of nodes, both ways; slow links/nodes named."""
    hosts, by_host = _layout(pg)
    if len(hosts) < 2:
        pytest.skip("pairwise links need at least 2 nodes")
    leaders = [by_host[h][0] for h in hosts]
    group = dist.new_group(leaders)  # every rank must call new_group, leaders or not
    mine: dict[str, float] = {}
    start = time.monotonic()
    if pg.rank in leaders:
        me = leaders.index(pg.rank)
        for pairs in links.round_robin(len(hosts)):
            for a, b in pairs:
                if me in (a, b):
                    for src, dst in ((a, b), (b, a)):
                        rate = link_gbps(pg.rank, leaders[src], leaders[dst], P2P_TRIALS,
                                         pg.device)
                        if pg.rank == leaders[src]:
                            mine[f"{hosts[src]}->{hosts[dst]}"] = rate
            dist.barrier(group=group)  # the next round starts when every pair is done
    got = pg.exchange("links", mine)
    matrix = {tuple(k.split("->")): v for row in got.values.values() for k, v in row.items()}
    record.measure("link_matrix", {f"{a}->{b}": v for (a, b), v in matrix.items()})
    record.measure("link_hosts", hosts)
    record.measure("links_wall_s", round(time.monotonic() - start, 3))
    slowest = min(matrix.values()) if matrix else 0.0
    record.key_figure(f"slowest link {slowest:.2f} GB/s")
    problems = links.link_verdicts(matrix, settings.slow_link_ratio)
    if problems:
        raise ProblemFound(*[p.where(ranks=[by_host[h][0] for h in p.hosts if h in by_host])
                             for p in problems])


@stage("bandwidth")
def test_intra_node_and_cross_node_all_reduce(pg, record):
    """all-reduce busbw within each node and across nodes (one rank per node), apart."""
    hosts, by_host = _layout(pg)
    multi_rank = [h for h in hosts if len(by_host[h]) > 1]
    if not multi_rank and len(hosts) < 2:
        pytest.skip("one rank on one node: nothing to split into intra- and cross-node")
    groups = {h: dist.new_group(by_host[h]) for h in hosts}  # same order on every rank
    cross = dist.new_group([by_host[h][0] for h in hosts])
    t = torch.ones(INTRA_INTER_BYTES // 4, dtype=torch.float32, device=pg.device)
    intra: dict[str, float] = {}
    for h in multi_rank:
        if pg.rank in by_host[h]:
            secs = _median_time(t, groups[h], pg.backend)
            intra[h] = allreduce_busbw(t.numel() * 4, secs, len(by_host[h]))
    dist.barrier()
    inter = None
    if len(hosts) > 1 and pg.rank in [by_host[h][0] for h in hosts]:
        inter = allreduce_busbw(t.numel() * 4, _median_time(t, cross, pg.backend), len(hosts))
    dist.barrier()
    got = pg.exchange("intra-inter", {"intra": intra, "inter": inter})
    merged = {h: v for val in got.values.values() for h, v in val["intra"].items()}
    cross_bw = next((v["inter"] for v in got.values.values() if v["inter"] is not None), None)
    record.measure("intra_node_busbw", merged)
    record.measure("cross_node_busbw", cross_bw)
    figures = [f"intra {min(merged.values()):.2f}" if merged else "",
               f"cross {cross_bw:.2f}" if cross_bw is not None else ""]
    record.key_figure(" / ".join(f for f in figures if f) + " GB/s")


def _median_time(t: torch.Tensor, group, backend: str) -> float:
    iters = iterations(t.numel() * 4)
    dist.all_reduce(t, group=group)  # warm-up
    trials = sorted(time_all_reduce(t, iters, backend, group) for _ in range(3))
    return trials[1]


@stage("bandwidth")
def test_no_rank_is_a_straggler(pg, record):
    """No rank is consistently the last to reach the collectives (a slow node or GPU)."""
    if pg.world_size < 2:
        pytest.skip("a straggler needs at least 2 ranks")
    a = torch.randn(192, 192, device=pg.device)
    flag = torch.zeros(1, device=pg.device)
    waits, steps = [], []
    for _ in range(STRAGGLER_ITERS):
        begin = time.perf_counter()
        for _ in range(4):
            a = torch.tanh(a @ a)  # the same work on every rank: a slow rank shows up late
        if pg.backend == "nccl":
            torch.cuda.synchronize()
        entered = time.perf_counter()
        dist.all_reduce(flag)
        if pg.backend == "nccl":
            torch.cuda.synchronize()
        waits.append(time.perf_counter() - entered)
        steps.append(time.perf_counter() - begin)
    got = pg.exchange("straggler", {"waits": waits, "step": sorted(steps)[len(steps) // 2]})
    all_waits = {r: v["waits"] for r, v in got.values.items()}
    step = max(v["step"] for v in got.values.values())
    record.measure("straggler_waits_ms_median",
                   {r: round(sorted(w)[len(w) // 2] * 1e3, 3) for r, w in all_waits.items()})
    record.key_figure(f"step {step * 1e3:.1f} ms")
    problems = links.straggler_verdict(all_waits, pg.hosts_by_rank, iteration_s=step)
    if problems:
        raise ProblemFound(*problems)
