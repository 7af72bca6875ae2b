"""Straggler verdicts: a rank (or a node's ranks) consistently last at the collectives.

Pure; the worker's straggler probe measures each rank's work time per iteration, gathers it
to rank 0 and calls these there only, so no clock has to be shared between nodes. Cost on
rank 0: O(ranks x iterations) (one pass finds who is last in each iteration; only a rank or
host last in most of them is judged further): 8,192 ranks x 20 iterations in well under a
second (bench/world_scale.py).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence

from ddpcheck.diagnoses import Problem, register
from ddpcheck.ranges import ranks_with_hosts

STRAGGLER = register(
    "straggler", "a rank arrives last at almost every collective",
    "the rank (or its node) is slower or busier than the others: CPU contention or another "
    "job on the node, a throttled or slower GPU, slower data loading, or extra work only this "
    "rank does (logging, checkpoint I/O on rank 0)",
    "check the node's load and clocks (top; nvidia-smi -q -d CLOCK,PERFORMANCE); move "
    "rank-only work off the step; exclude the node if its hardware is slower")


# --- stragglers --------------------------------------------------------------------------
def _ms(seconds: float) -> str:
    ms = round(seconds * 1000, 1)
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


def _mad(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    med = statistics.median(values)
    return statistics.median(abs(v - med) for v in values)


def waits_from_work(work: Mapping[int, Sequence[float]]) -> dict[int, list[float]]:
    """Per-iteration work times -> what each rank would wait for the slowest (last waits 0).

    Lets judge_stragglers judge ranks by their own work time, which needs no clock shared
    between nodes and is not blurred by time spent inside the collective.
    """
    count = min((len(w) for w in work.values()), default=0)
    slowest = [max(w[i] for w in work.values()) for i in range(count)]
    return {r: [slowest[i] - w[i] for i in range(count)] for r, w in work.items()}


def judge_stragglers(waits: Mapping[int, Sequence[float]], hosts: Mapping[int, str],
                      min_share: float = 0.8, min_lateness_s: float = 0.005, *,
                      noise_factor: float = 2.0, min_iterations: int = 5,
                      iteration_s: float | None = None,
                      min_iteration_share: float = 0.05) -> list[Problem]:
    """``straggler`` problems from the time each rank spent inside barrier-like collectives.

    waits[rank][i] is the seconds rank spent in the i-th collective; whoever arrives last
    waits least. Candidates are each rank and, with 2+ hosts, each host's ranks together
    (a slow node whose ranks take turns being last). A candidate is a straggler when:

    - it is last (holds the smallest wait) in >= min_share of the iterations;
    - its median lateness (over iterations: median wait of the others - its wait; for a
      host: minus its ranks' median wait) is >= min_lateness_s (absolute floor: 5 ms),
    - and >= noise_factor x the median spread (MAD) of the others' waits, so ordinary
      arrival jitter, which is as large among the others as it is for the candidate,
      never counts,
    - and, when iteration_s (the typical step or iteration time) is given,
      >= min_iteration_share of it: a few ms late in a 2 s step does not matter.

    Fewer than min_iterations common iterations, or fewer than 2 ranks: no verdict.
    """
    ranks = sorted(waits)
    count = min((len(waits[r]) for r in ranks), default=0)
    if len(ranks) < 2 or count < min_iterations:
        return []
    groups: list[tuple[int, ...]] = [(r,) for r in ranks]
    host_ranks: dict[str, list[int]] = {}
    for r in ranks:
        host_ranks.setdefault(hosts.get(r, ""), []).append(r)
    if len(host_ranks) > 1 and "" not in host_ranks:
        groups += [tuple(rs) for rs in host_ranks.values() if 1 < len(rs) < len(ranks)]

    # One pass over the table finds who is last in each iteration; only a candidate last in
    # >= min_share of them (at most one rank and one host) is judged further, so the whole
    # verdict costs O(ranks x iterations), not O(candidates x ranks x iterations).
    last_of: Counter[int] = Counter(
        min(ranks, key=lambda r: (waits[r][i], r)) for i in range(count))
    problems: list[Problem] = []
    flagged: set[int] = set()
    for group in groups:
        last = sum(last_of[r] for r in group)  # iterations the candidate holds the least wait
        if flagged & set(group) or last < min_share * count:
            continue
        members = set(group)
        lateness: list[float] = []
        spread: list[float] = []
        for i in range(count):
            row = {r: waits[r][i] for r in ranks}
            others = [row[r] for r in ranks if r not in members]
            mine = [row[r] for r in group]
            lateness.append(statistics.median(others) - statistics.median(mine))
            spread.append(_mad(others))
        late = statistics.median(lateness)
        floor = max(min_lateness_s, noise_factor * statistics.median(spread))
        if iteration_s is not None:
            floor = max(floor, min_iteration_share * iteration_s)
        if late < floor:
            continue
        flagged |= members
        who = (f"rank {ranks_with_hosts(group, hosts)}" if len(group) == 1
               else f"ranks {ranks_with_hosts(group, hosts)}")
        group_hosts = sorted({hosts[r] for r in group if r in hosts})
        problems.append(STRAGGLER.problem(
            f"{who} arrived last at {last} of {count} collectives, {_ms(late)} after the "
            f"others (median)", hosts=group_hosts, ranks=group))
    return problems
