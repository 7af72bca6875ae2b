"""Judge the rank layout of a spawn-style job across nodes: overlaps, gaps, world sizes.

Pure; runs in the launcher of the node that judges the check-in (every node's first rank,
ranks and world size come on its card), or alone on a one-node run, before any rank starts.
A job that computes ``rank = node_rank * gpus + local_rank`` on nodes with 8 and 2 GPUs
starts ranks 0-7 and 2-3: two processes claim ranks 2-3, ranks 8-15 never come, and the
world never forms (rank 0's store waits for clients that do not exist). Costs O(N log N).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ddpcheck.diagnoses import Problem, register
from ddpcheck.ranges import format_ranks

RANK_OVERLAP = register(
    "rank-overlap", "two nodes start processes with the same global rank",
    "the job computes rank = node_rank * ranks_per_node + local_rank, but the nodes start "
    "different numbers of ranks (uneven GPUs per node), or --rank-offsets overlap",
    "give each node its first rank as the sum of the ranks on the nodes before it "
    "(--rank-offsets, in your job: an offset per node instead of node_rank * gpus)")
RANK_MISSING = register(
    "rank-missing", "no node starts some ranks of the world",
    "the world size is larger than the ranks the nodes start (uneven GPUs per node, a "
    "world size of nodes * gpus), or the offsets leave a gap",
    "make the world size the total of ranks started, and each node's first rank the sum "
    "of the ranks before it (--world-size, --rank-offsets)")
RANK_OUT_OF_RANGE = register(
    "rank-out-of-range", "a node starts ranks at or beyond the world size",
    "the offsets or the world size are wrong for this layout; init_process_group fails "
    "with rank >= world_size",
    "make the world size the total of ranks started on all nodes (--world-size)")
WORLD_SIZE_DIFFERS = register(
    "world-size-differs", "nodes start their ranks with different world sizes",
    "each node computes WORLD_SIZE on its own (nodes * its own GPU count)",
    "pass one world size to every node (--world-size, the total of ranks on all nodes)")

SHOWN = 4  # at most this many nodes named per problem; the rest are counted


@dataclass(frozen=True)
class NodeRanks:
    """The ranks one node starts: first .. first + nproc - 1 of a world of world_size."""

    host: str
    node_rank: int | None
    first: int
    nproc: int
    world_size: int

    @property
    def last(self) -> int:
        return self.first + self.nproc - 1

    def text(self) -> str:
        return f"{self.host} ({_span(self.first, self.last)})"


def judge(nodes: Sequence[NodeRanks]) -> list[Problem]:
    """Every layout problem of these nodes; the same answer whichever node judges."""
    if not nodes:
        return []
    nodes = sorted(nodes, key=lambda n: (n.first, n.host))
    world = max(n.world_size for n in nodes)
    fix = _fix(nodes)
    problems = _sizes(nodes, fix)
    problems += _overlaps(nodes, fix)
    beyond = [n for n in nodes if n.last >= n.world_size]
    if beyond:
        problems.append(RANK_OUT_OF_RANGE.problem(
            "; ".join(f"{n.text()} with a world size of {n.world_size}"
                      for n in beyond[:SHOWN]) + _more(beyond), fix=fix,
            hosts=[n.host for n in beyond]))
    missing = gaps(nodes, world)
    if missing:
        problems.append(RANK_MISSING.problem(
            f"{'rank' if len(missing) == 1 else 'ranks'} {format_ranks(missing)} of a world "
            f"of {world} {'is' if len(missing) == 1 else 'are'} started by no node "
            f"(started: {', '.join(n.text() for n in nodes[:SHOWN])}{_more(nodes)}); rank 0's "
            "store would wait for them until its timeout", fix=fix,
            hosts=sorted({n.host for n in nodes}), ranks=missing[:64]))
    return problems


def _sizes(nodes: Sequence[NodeRanks], fix: str) -> list[Problem]:
    sizes = sorted({n.world_size for n in nodes})
    if len(sizes) < 2:
        return []
    by = {s: [n.host for n in nodes if n.world_size == s] for s in sizes}
    common = max(sizes, key=lambda s: len(by[s]))
    tie = sum(len(by[s]) == len(by[common]) for s in sizes) > 1
    return [WORLD_SIZE_DIFFERS.problem(
        "; ".join(f"a world of {s} on {', '.join(by[s][:SHOWN])}{_more(by[s])}"
                  for s in sizes), fix=fix,
        hosts=sorted(h for s in sizes if s != common or tie for h in by[s]))]


def _overlaps(nodes: Sequence[NodeRanks], fix: str) -> list[Problem]:
    """Sweep in order of first rank: each node against the furthest-reaching one before it."""
    clashes: list[str] = []
    hosts: set[str] = set()
    ranks: set[int] = set()
    reach: NodeRanks | None = None
    for n in nodes:
        if reach is not None and n.first <= reach.last:
            lo, hi = n.first, min(n.last, reach.last)
            clashes.append(f"{_span(lo, hi)} {'is' if lo == hi else 'are'} started by both "
                           f"{reach.text()} and {n.text()}")
            hosts.update((reach.host, n.host))
            ranks.update(range(lo, min(hi, lo + 63) + 1))
        if reach is None or n.last > reach.last:
            reach = n
    if not clashes:
        return []
    return [RANK_OVERLAP.problem("; ".join(clashes[:SHOWN]) + _more(clashes), fix=fix,
                                 hosts=sorted(hosts), ranks=sorted(ranks))]


def gaps(nodes: Sequence[NodeRanks], world: int) -> list[int]:
    """Ranks of [0, world) that none of these nodes starts (nodes sorted by first rank)."""
    missing: list[int] = []
    covered = 0
    for n in nodes:  # sorted by first rank
        missing += range(covered, min(n.first, world))
        covered = max(covered, n.last + 1)
    missing += range(covered, world)
    return missing


def _fix(nodes: Sequence[NodeRanks]) -> str:
    """The offsets that make this layout whole: each node's first rank = ranks before it."""
    ordered = sorted(nodes, key=lambda n: (n.node_rank if n.node_rank is not None else n.first,
                                           n.host))
    offsets, total = [], 0
    for n in ordered:
        offsets.append(total)
        total += n.nproc
    shown = ",".join(map(str, offsets[:16])) + (",..." if len(offsets) > 16 else "")
    return (f"start ranks at the sum of the ranks on the nodes before each: --rank-offsets "
            f"{shown} --world-size {total} (in your job: rank = offset[node_rank] + "
            f"local_rank, world_size = {total})")


def _span(lo: int, hi: int) -> str:
    return f"rank {lo}" if lo == hi else f"ranks {lo}-{hi}"


def _more(items: Sequence[object]) -> str:
    return f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
