"""Stage *bandwidth*, continued: which node or link is slow, and who arrives last.

Runs inside every worker. Pairwise links are measured between one leader rank per node, in
rounds planned by ddpcheck.cluster.linkplan (the pairs of a round at the same time):
every pair up to 32 nodes, O(log N) rounds above. Intra-node and cross-node all-reduce
are measured on their own groups. Measurement stays apart from judgement: the figures are
recorded, and ddpcheck.verdicts.links turns them into verdicts.
"""

from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist

from ddpcheck.cluster import linkplan
from ddpcheck.diagnoses import ProblemFound
from ddpcheck.node import nics
from ddpcheck.stages import stage
from ddpcheck.verdicts import expectations, links, straggler
from ddpcheck.verdicts.bandwidth import allreduce_busbw, judge_rule
from ddpcheck.worker.timing import iterations, link_gbps, time_all_reduce, warm_up

P2P_TRIALS = 5
STRAGGLER_ITERS = 20
ROUND_S = 10.0  # one round of pair tests: 5 transfers each way, with margin
# The size the intra-/cross-node all-reduce is measured at: the judge rule's on NCCL (256 MiB,
# where the NVLink and NIC references apply: docs/bandwidth.md), 4 MiB on gloo (CPU, fast).
INTRA_INTER_BYTES = {"nccl": 256 << 20, "gloo": 4 << 20}


def _layout(world):
    """(hosts in leader order, {host: its ranks}); the leader of a host is its lowest rank."""
    by_host: dict[str, list[int]] = {}
    for rank in range(world.world_size):
        by_host.setdefault(world.hosts_by_rank.get(rank, f"rank{rank}"), []).append(rank)
    hosts = sorted(by_host, key=lambda h: by_host[h][0])
    return hosts, by_host


@stage("bandwidth")
@pytest.mark.ddpcheck_link_rounds
def test_links_between_every_pair_of_nodes(pg, settings, record):
    """Point-to-point GB/s between node pairs, both ways; slow links and slow nodes named."""
    hosts, by_host = _layout(pg)
    if len(hosts) < 2:
        pytest.skip("pairwise links need at least 2 nodes")
    leaders = [by_host[h][0] for h in hosts]
    group = dist.new_group(leaders)  # every rank must call new_group, leaders or not
    first = linkplan.initial_rounds(len(hosts))
    mine: dict[str, float] = {}
    start = time.monotonic()
    played = len(first)
    if pg.rank in leaders:
        me = leaders.index(pg.rank)
        _play(pg, first, me, leaders, hosts, mine, group, "first")
        if len(hosts) > linkplan.FULL_MATRIX_MAX:  # every leader plans the same follow-ups
            seen: list[dict[str, float]] = [{} for _ in leaders]
            dist.all_gather_object(seen, mine, group=group)
            index = {h: i for i, h in enumerate(hosts)}
            so_far = {(index[k.split("->")[0]], index[k.split("->")[1]]): v
                      for row in seen for k, v in row.items()}
            more = linkplan.followup_rounds(len(hosts), so_far, settings.slow_link_ratio)
            _play(pg, more, me, leaders, hosts, mine, group, "more")
            played += len(more)
    # the ranks that lead no node wait for the leaders: a deadline that grows with the rounds
    budget = linkplan.round_budget(len(first) + 4, ROUND_S, pg.timeout)
    got = pg.exchange("links", mine, timeout=budget)
    matrix = {tuple(k.split("->")): v for row in got.values.values() for k, v in row.items()}
    record.measure("link_matrix", {f"{a}->{b}": v for (a, b), v in matrix.items()})
    record.measure("link_hosts", hosts)
    record.measure("links_wall_s", round(time.monotonic() - start, 3))
    record.measure("link_rounds", played)
    slowest = min(matrix.values()) if matrix else 0.0
    record.key_figure(f"slowest link {slowest:.2f} GB/s")
    problems = links.link_verdicts(matrix, settings.slow_link_ratio)
    if problems:
        raise ProblemFound(*[p.where(ranks=[by_host[h][0] for h in p.hosts if h in by_host])
                             for p in problems])


def _play(pg, rounds, me, leaders, hosts, mine, group, phase) -> None:
    """Measure this leader's pairs of each round, both ways; a barrier ends each round.

    Each transfer's handshake goes through the store under a key of its own (phase, round,
    pair): a pair measured again in the follow-ups never reads an old handshake.
    """
    for i, pairs in enumerate(rounds):
        for a, b in pairs:
            if me in (a, b):
                for src, dst in ((a, b), (b, a)):
                    rate = link_gbps(pg.rank, leaders[src], leaders[dst], P2P_TRIALS,
                                     pg.device, pg.store,
                                     f"link/{phase}{i}/{leaders[src]}-{leaders[dst]}")
                    if pg.rank == leaders[src]:
                        mine[f"{hosts[src]}->{hosts[dst]}"] = rate
        dist.barrier(group=group)  # the next round starts when every pair is done


@stage("bandwidth")
def test_intra_node_and_cross_node_all_reduce(pg, record):
    """all-reduce busbw within each node and across nodes (one rank per node), apart."""
    hosts, by_host = _layout(pg)
    multi_rank = [h for h in hosts if len(by_host[h]) > 1]
    if not multi_rank and len(hosts) < 2:
        pytest.skip("one rank on one node: nothing to split into intra- and cross-node")
    groups = {h: dist.new_group(by_host[h]) for h in hosts}  # same order on every rank
    cross = dist.new_group([by_host[h][0] for h in hosts])
    nbytes = INTRA_INTER_BYTES.get(pg.backend, INTRA_INTER_BYTES["gloo"])
    t = torch.ones(nbytes // 4, dtype=torch.float32, device=pg.device)
    rule = judge_rule(pg.backend)
    intra: dict[str, float] = {}
    intra_iters = inter_iters = 0
    for h in multi_rank:
        if pg.rank in by_host[h]:
            secs, intra_iters = _median_time(t, groups[h], pg.backend)
            intra[h] = allreduce_busbw(nbytes, secs, len(by_host[h]))
    dist.barrier()
    inter = None
    if len(hosts) > 1 and pg.rank in [by_host[h][0] for h in hosts]:
        secs, inter_iters = _median_time(t, cross, pg.backend)
        inter = allreduce_busbw(nbytes, secs, len(hosts))
    dist.barrier()
    got = pg.exchange("intra-inter", {"intra": intra, "inter": inter,
                                      "judged": [rule.applies(nbytes, intra_iters),
                                                 rule.applies(nbytes, inter_iters)]})
    merged = {h: v for val in got.values.values() for h, v in val["intra"].items()}
    cross_bw = next((v["inter"] for v in got.values.values() if v["inter"] is not None), None)
    # a figure is judged only when every rank that measured it ran where the rule applies
    intra_ok = all(v["judged"][0] for v in got.values.values() if v["intra"])
    inter_ok = all(v["judged"][1] for v in got.values.values() if v["inter"] is not None)
    record.measure("intra_node_busbw", merged)
    record.measure("cross_node_busbw", cross_bw)
    record.measure("intra_inter_bytes", nbytes)
    figures = [f"intra {min(merged.values()):.2f}" if merged else "",
               f"cross {cross_bw:.2f}" if cross_bw is not None else ""]
    record.key_figure(" / ".join(f for f in figures if f) + " GB/s")
    if pg.backend == "nccl":  # the references are NCCL's; gloo's figures are shown
        record.measure("busbw_judge_rule", rule.describe())
        _raise_below_reference(pg, merged if intra_ok else {},
                               cross_bw if inter_ok else None, by_host, record)


def _raise_below_reference(pg, intra, cross_bw, by_host, record) -> None:
    """Intra-node busbw against the GPU model's NVLink figure, cross-node against the NICs
    (figures measured where the judge rule applies; the caller leaves the others out)."""
    name = torch.cuda.get_device_name()
    rule = judge_rule(pg.backend).describe()
    problems = []
    for host, value in intra.items():
        ref = expectations.reference_busbw(name, len(by_host[host]), "nccl")
        if ref:
            problems += [p.where(hosts=[host], ranks=by_host[host])
                         for p in expectations.expect_verdict(
                             value, ref[0],
                             f"intra-node busbw on {host} (reference, {ref[1]}; {rule})")]
    if cross_bw is not None:
        ref = nics.world_reference(pg, "cross", 1)  # one rank per node: one port's worth
        if ref:
            record.measure("cross_node_expected_gbps", ref[0])
            problems += expectations.expect_verdict(
                cross_bw, ref[0],
                f"cross-node busbw (NIC reference, {ref[1]}; {rule})")
    if problems:
        raise ProblemFound(*problems)


def _median_time(t: torch.Tensor, group, backend: str) -> tuple[float, int]:
    """(median seconds per all-reduce over 3 trials, iterations per trial)."""
    iters = iterations(t.numel() * 4, backend, warm_up(t, backend, group))
    trials = sorted(time_all_reduce(t, iters, backend, group) for _ in range(3))
    return trials[1], iters


@stage("bandwidth")
def test_no_rank_is_a_straggler(pg, record):
    """No rank is consistently the last to reach the collectives (a slow node or GPU)."""
    if pg.world_size < 2:
        pytest.skip("a straggler needs at least 2 ranks")
    # The same work on every rank, long enough (~20 ms on a CPU core) that a rank 25% slower
    # than its peers is clearly late, beyond scheduling jitter. Lateness is judged from each
    # rank's own work time, not from time spent inside the collective: that needs no clock
    # shared between nodes, and a rank slowed everywhere (throttled, suspended) is late in
    # its work but, being slow inside the collective too, would not look it there.
    size, reps = (4096, 10) if pg.backend == "nccl" else (320, 6)
    a = torch.randn(size, size, device=pg.device) / size ** 0.5
    flag = torch.zeros(1, device=pg.device)
    work = []
    for _ in range(STRAGGLER_ITERS):
        begin = time.perf_counter()
        for _ in range(reps):
            a = torch.tanh(a @ a)
        if pg.backend == "nccl":
            torch.cuda.synchronize()
        work.append(time.perf_counter() - begin)
        dist.all_reduce(flag)  # everyone waits for the last: the iterations stay aligned
        # "In the case of CUDA operations, it is not guaranteed that the CUDA operation is
        # completed" when a synchronous collective returns (pytorch.org/docs/stable/
        # distributed.html, Synchronous and asynchronous collective operations): reading
        # the flag waits for the collective, so the next work period never includes it.
        flag.item()
    got = pg.exchange("straggler", work).values
    waits = straggler.waits_from_work(got)
    slowest = [max(w[i] for w in got.values()) for i in range(STRAGGLER_ITERS)]
    step = sorted(slowest)[len(slowest) // 2]
    record.measure("straggler_work_ms", {r: [round(x * 1e3, 3) for x in w]
                                         for r, w in got.items()})
    record.key_figure(f"work {step * 1e3:.1f} ms per iteration")
    problems = straggler.straggler_verdict(waits, pg.hosts_by_rank, iteration_s=step)
    if problems:
        raise ProblemFound(*problems)
