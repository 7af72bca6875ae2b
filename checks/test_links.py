"""Stage *bandwidth*, continued: which node or link is slow, and who arrives last.

Runs inside every worker. Pairwise links are measured between one leader rank per node, in
rounds planned by ddpcheck.cluster.pairing (the pairs of a round at the same time):
every pair up to 32 nodes, O(log N) rounds above. Intra-node and cross-node all-reduce
are measured on their own groups. Measurement stays apart from judgement: the figures are
recorded, and ddpcheck.judgements.links turns them into verdicts.
"""

from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist

from ddpcheck.cluster import deadlines, pairing
from ddpcheck.diagnoses import ProblemFound
from ddpcheck.judgements import expectations, links, straggler
from ddpcheck.judgements.bandwidth import allreduce_busbw, judge_rule
from ddpcheck.node import nics
from ddpcheck.stages import stage
from ddpcheck.worker import subgroups
from ddpcheck.worker.timing import iterations, link_gbps, time_all_reduce, warm_up

P2P_TRIALS = 5
STRAGGLER_ITERS = 20
ROUND_S = 10.0  # one round of pair tests: 5 transfers each way, with margin
# The size the intra-/cross-node all-reduce is measured at: the judge rule's on NCCL (256 MiB,
# where the NVLink and NIC references apply: docs/bandwidth.md), 4 MiB on gloo (CPU, fast).
INTRA_INTER_BYTES = {"nccl": 256 << 20, "gloo": 4 << 20}


@stage("bandwidth")
@pytest.mark.ddpcheck_link_rounds
def test_links_between_every_pair_of_nodes(pg, settings, record):
    """Point-to-point GB/s between node pairs, both ways; slow links and slow nodes named."""
    lay = subgroups.layout(pg)
    if len(lay.hosts) < 2:
        pytest.skip("pairwise links need at least 2 nodes")
    group = subgroups.node_groups(pg, lay).leaders  # made once, shared with the busbw probe
    start = time.monotonic()
    mine, played = play_link_rounds(pg, lay, group, settings.slow_link_ratio)
    judge_links(pg, lay, mine, played, settings.slow_link_ratio, record, start)


def play_link_rounds(pg, lay, group, slow_link_ratio: float) -> tuple[dict[str, float], int]:
    """This leader's measured links ({"a->b": GB/s}) and the rounds played.

    Cost: O(log N) rounds above 32 nodes (N-1 up to it), one leader group made once; store
    operations per leader ~14 per pair it plays (handshakes of ddpcheck.worker.timing), and
    above 32 nodes one ``decide_each`` (3 operations) in which rank 0 plans the follow-up
    rounds from every leader's figures and each leader reads only its own pairs: O(1) bytes
    per rank (was an all_gather_object of the whole N log N table on every leader).
    """
    leaders, hosts = lay.leaders, list(lay.hosts)
    first = pairing.initial_rounds(len(hosts))
    me = leaders.index(pg.rank) if pg.rank in leaders else None
    mine: dict[str, float] = {}
    if me is not None:
        _play(pg, first, me, leaders, hosts, mine, group, "first")
    if len(hosts) <= pairing.FULL_MATRIX_MAX:
        return mine, len(first)
    index = {h: i for i, h in enumerate(hosts)}

    def plan(ex) -> dict[int, dict]:
        so_far = {(index[a], index[b]): v for row in ex.values.values() if row
                  for a, b, v in ((*k.split("->"), v) for k, v in row.items())}
        more = pairing.followup_rounds(len(hosts), so_far, slow_link_ratio)
        parts: dict[int, dict] = {r: {"rounds": len(more), "pairs": []} for r in leaders}
        for i, pairs in enumerate(more):
            for a, b in pairs:
                parts[leaders[a]]["pairs"].append([i, a, b])
                parts[leaders[b]]["pairs"].append([i, a, b])
        return parts
    budget = deadlines.round_budget(len(first) + 4, ROUND_S, pg.timeout)
    part, _ = pg.decide_each("links-plan", mine, plan, timeout=budget)
    if me is None or not part:
        return mine, len(first)
    more: list[list[tuple[int, int]]] = [[] for _ in range(part["rounds"])]
    for i, a, b in part["pairs"]:
        more[i].append((a, b))
    _play(pg, more, me, leaders, hosts, mine, group, "more")
    return mine, len(first) + len(more)


def judge_links(pg, lay, mine, played, slow_link_ratio, record, start) -> None:
    """Every leader's links gathered to rank 0, judged and recorded there only.

    Cost: one gather (a non-zero rank 3 operations, O(log N) figures sent by a leader, none
    read back); rank 0 reads the N log N table once. The others record only their own row.
    """
    budget = deadlines.round_budget(len(pairing.initial_rounds(len(lay.hosts))) + 4, ROUND_S,
                                    pg.timeout)
    got = pg.gather("links", mine, timeout=budget)
    record.measure("links_wall_s", round(time.monotonic() - start, 3))
    record.measure("link_rounds", played)
    if pg.rank != 0:
        if mine:
            record.measure("links_from_here", mine)
            record.key_figure(f"slowest link from here {min(mine.values()):.2f} GB/s")
        return
    matrix = {tuple(k.split("->")): v for row in got.values.values() if row
              for k, v in row.items()}
    record.measure("link_matrix", {f"{a}->{b}": v for (a, b), v in matrix.items()})
    record.measure("link_hosts", list(lay.hosts))
    slowest = min(matrix.values()) if matrix else 0.0
    record.key_figure(f"slowest link {slowest:.2f} GB/s")
    problems = links.judge_links(matrix, slow_link_ratio)
    if problems:
        raise ProblemFound(*[p.where(ranks=[lay.ranks[h][0] for h in p.hosts if h in lay.ranks])
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
    lay = subgroups.layout(pg)
    mine_host = pg.hosts_by_rank.get(pg.rank, f"rank{pg.rank}")
    multi_rank = [h for h in lay.hosts if len(lay.ranks[h]) > 1]
    if not multi_rank and len(lay.hosts) < 2:
        pytest.skip("one rank on one node: nothing to split into intra- and cross-node")
    groups = subgroups.node_groups(pg, lay)  # one node group per rank, one leader group
    nbytes = INTRA_INTER_BYTES.get(pg.backend, INTRA_INTER_BYTES["gloo"])
    t = torch.ones(nbytes // 4, dtype=torch.float32, device=pg.device)
    rule = judge_rule(pg.backend)
    intra: dict[str, float] = {}
    judged = [True, True]  # whether this rank's figures were measured where the rule applies
    if len(lay.ranks[mine_host]) > 1:
        secs, iters = _median_time(t, groups.node, pg.backend)
        judged[0] = rule.applies(nbytes, iters)
        if pg.rank == lay.ranks[mine_host][0]:  # the node's leader speaks for it
            intra[mine_host] = allreduce_busbw(nbytes, secs, len(lay.ranks[mine_host]))
    dist.barrier()
    inter = None
    if len(lay.hosts) > 1 and groups.leaders is not None:
        secs, iters = _median_time(t, groups.leaders, pg.backend)
        judged[1] = rule.applies(nbytes, iters)
        inter = allreduce_busbw(nbytes, secs, len(lay.hosts))
    dist.barrier()
    judge_busbw(pg, lay, intra, inter, judged, nbytes, record)


def judge_busbw(pg, lay, intra, inter, judged, nbytes, record) -> None:
    """Node leaders' figures gathered to rank 0, recorded and judged there only; a figure is
    judged only when every rank that measured it ran where the judge rule applies
    (judgements.bandwidth.judge_rule: large messages, enough iterations).

    Cost: one gather (3 operations per non-zero rank, O(1) bytes each), and under NCCL the
    NIC reference (one ``decide``: 3 operations, O(1) bytes back). Communicators: one per
    node and one leader group, made once (ddpcheck.worker.subgroups), 2 all-reduce timings.
    """
    got = pg.gather("intra-inter", {"intra": intra, "inter": inter, "judged": judged})
    nic = (nics.world_reference(pg, "cross", 1)  # every rank: an agreement
           if pg.backend == "nccl" and len(lay.hosts) > 1 else None)
    if pg.rank != 0:
        if intra:
            record.key_figure(f"intra {min(intra.values()):.2f} GB/s")
        return
    rule = judge_rule(pg.backend)
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
                               cross_bw if inter_ok else None, lay, nic, record)


def _raise_below_reference(pg, intra, cross_bw, lay, nic, record) -> None:
    """Intra-node busbw against the GPU model's NVLink figure, cross-node against the NICs
    (``nic``: the slowest node's reference, one port's worth per node; figures measured where
    the judge rule applies, the caller leaves the others out). Rank 0 only."""
    name = torch.cuda.get_device_name()
    rule = judge_rule(pg.backend).describe()
    problems = []
    for host, value in intra.items():
        ref = expectations.reference_busbw(name, len(lay.ranks[host]), "nccl")
        if ref:
            problems += [p.where(hosts=[host], ranks=lay.ranks[host])
                         for p in expectations.judge_expectation(
                             value, ref[0],
                             f"intra-node busbw on {host} (reference, {ref[1]}; {rule})")]
    if cross_bw is not None:
        ref = nic
        if ref:
            record.measure("cross_node_expected_gbps", ref[0])
            problems += expectations.judge_expectation(
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
    judge_stragglers(pg, work, record)


def judge_stragglers(pg, work: list[float], record) -> None:
    """Every rank's work times gathered to rank 0 and judged there only.

    Cost: one gather (a non-zero rank 3 operations, STRAGGLER_ITERS figures sent, nothing
    world-sized read back); rank 0 reads R x STRAGGLER_ITERS figures once and runs the
    O(R x iterations) verdict (ddpcheck.judgements.straggler). Communicators: the default
    group, STRAGGLER_ITERS all-reduces of one element.
    """
    got = pg.gather("straggler", [round(x, 6) for x in work]).values
    if pg.rank != 0:
        record.key_figure(f"work {sorted(work)[len(work) // 2] * 1e3:.1f} ms here")
        return
    waits = straggler.waits_from_work(got)
    count = min(len(w) for w in got.values())
    slowest = [max(w[i] for w in got.values()) for i in range(count)]
    step = sorted(slowest)[len(slowest) // 2]
    record.measure("straggler_work_ms", {r: [round(x * 1e3, 3) for x in w]
                                         for r, w in got.items()})
    record.key_figure(f"work {step * 1e3:.1f} ms per iteration")
    problems = straggler.judge_stragglers(waits, pg.hosts_by_rank, iteration_s=step)
    if problems:
        raise ProblemFound(*problems)
