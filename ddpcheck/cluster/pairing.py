"""Which nodes meet which, for every check between nodes: the three pairing plans.

Pure (no I/O, no torch, no store): integers in, node indices out, the same on every node
(a plan depends on its arguments only, randomness included: it is seeded by the run id).

- Peer probes (:func:`peer_targets`; the launchers' check-in step, ``cluster.nodeflow``):
  the nodes each node connects to, all at once. Up to FULL_MESH_MAX nodes every other node;
  above, ring neighbours, shifts i+2^k, RANDOM_PEERS seeded random peers and the endpoint
  node: O(N log N) connections, and each node probed by ~log2 N + 4 others, enough to blame
  it by majority (``cluster.peerprobe.judge_peers``).
- Round robin (:func:`round_robin`): the circle-method tournament, every pair exactly once
  in N-1 rounds (N rounds for odd N), no node in two pairs of a round.
- Link rounds (:func:`initial_rounds`, :func:`followup_rounds`; the worker's link probe,
  checks/test_links.py, one leader rank per node, every pair of a round at the same time,
  no node in two pairs of a round). Up to FULL_MATRIX_MAX nodes every pair is measured
  (the round robin). Above it, N-1 rounds cost too much (1,023 at 1,024 nodes, ~10
  minutes), so:

  1. the ring (i, i+1): 2 rounds (3 when N is odd);
  2. shifted rounds (i, i+2^k) for k = 1 .. log2 N - 1, pairing i with i+2^k when bit k of
     i is 0 (a hypercube dimension: disjoint pairs covering every node), and a bisection
     round (i, i+N/2) when N/2 is not a power of two: each node is measured against
     ~log2 N + 1 partners at every distance;
  3. targeted pair tests for the suspects those rounds point at: each end of a link
     measured slow is measured against SUSPECT_PARTNERS healthy partners, so a slow node
     (slow with everyone) and a slow link (its ends fine elsewhere) are told apart exactly.

  In all at most ~log2 N + 3 + a few rounds (target: <= 2 log2 N + 8) and O(N log N) pair
  tests. A slow link between two nodes that no round pairs is not measured: at scale, the
  plan covers every node's path to the fabric and every distance, not every pair.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping, Sequence

from ddpcheck.judgements.links import link_figures

FULL_MESH_MAX = 32  # peer probes: up to this many nodes every node probes every other
RANDOM_PEERS = 2
FULL_MATRIX_MAX = 32  # link rounds: up to this many nodes, the whole matrix (N-1 rounds)
SUSPECT_PARTNERS = 2
MIN_PARTNERS = 4  # every node meets at least this many partners in the first rounds
MAX_SUSPECT_SHARE = 0.25  # more suspects than this: the fabric itself is slow, no targeting

Round = list[tuple[int, int]]


# --- peer probes -------------------------------------------------------------------------
def peer_targets(index: int, n: int, endpoint: int = 0, seed: str = "") -> list[int]:
    """Indices node ``index`` of ``n`` connects to: all others up to FULL_MESH_MAX nodes.

    Above it: ring neighbours (i-1, i+1), shifts i+2^k (k = 1..log2 n - 1, so each node is
    probed by ~log2 n peers at every distance), RANDOM_PEERS random peers (seeded by the run
    id, the same on every node) and the endpoint node: O(n log n) connections in all, and
    each node is the target of ~log2 n + 4 others, enough to blame it by majority.
    """
    if n <= FULL_MESH_MAX:
        return [j for j in range(n) if j != index]
    picks = [index - 1, index + 1]
    shift = 2
    while shift < n:
        picks.append(index + shift)
        shift *= 2
    rng = random.Random(f"{seed}/{index}")
    picks += [rng.randrange(n) for _ in range(RANDOM_PEERS)] + [endpoint]
    return sorted({p % n for p in picks} - {index})


# --- round robin -------------------------------------------------------------------------
def round_robin(n: int) -> list[Round]:
    """Circle-method tournament of n nodes: rounds of disjoint pairs (low, high).

    Every unordered pair appears exactly once; no node is in two pairs of a round. Even n
    gives n-1 rounds of n/2 pairs, odd n gives n rounds in which one node sits out (bye).
    Node 0 stays put and the others rotate one place per round. Deterministic.
    """
    if n < 0:
        raise ValueError(f"round_robin needs n >= 0, got {n}")
    if n < 2:
        return []
    players: list[int | None] = list(range(n))
    if n % 2:
        players.append(None)  # the bye
    m = len(players)
    rounds: list[Round] = []
    for _ in range(m - 1):
        pairs = []
        for i in range(m // 2):
            a, b = players[i], players[m - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


# --- link rounds -------------------------------------------------------------------------
def initial_rounds(n: int) -> list[Round]:
    """The rounds played before any figure is known (the ring, shifts, bisection)."""
    if n <= FULL_MATRIX_MAX:
        return round_robin(n)
    ring = [(i, (i + 1) % n) for i in range(n)]
    rounds = [[(a, b) for a, b in ring if a % 2 == 0 and a != n - 1],
              [(a, b) for a, b in ring if a % 2 == 1 and a != n - 1]]
    if n % 2:
        rounds.append([(0, n - 1)])
    else:
        rounds[1].append((0, n - 1))
    met = {frozenset(p) for r in rounds for p in r}
    shift = 2
    while shift < n:
        rounds.append(_shift_round(n, shift, met))
        shift *= 2
    half = n // 2
    if half & (half - 1):  # not a power of two: no shift round crossed the middle exactly
        rounds.append([(i, i + half) for i in range(half) if frozenset((i, i + half)) not in met])
    rounds += schedule(_top_up(n, rounds, met))
    return [sorted((min(a, b), max(a, b)) for a, b in r) for r in rounds if r]


def _shift_round(n: int, shift: int, met: set[frozenset[int]]) -> Round:
    """Pairs (i, i+shift), disjoint and new; past the end (N not a power of 2) wrapping."""
    used: set[int] = set()
    pairs: Round = []
    for i in range(n):
        if i in used:
            continue
        for j in (i + shift, (i + shift) % n, (i - shift) % n):
            if j < n and j != i and j not in used and frozenset((i, j)) not in met:
                pairs.append((i, j))
                used.update((i, j))
                met.add(frozenset((i, j)))
                break
    return pairs


def _top_up(n: int, rounds: list[Round], met: set[frozenset[int]]) -> list[tuple[int, int]]:
    """Extra partners for the few nodes the shifts left short (N not a power of two)."""
    degree = {i: 0 for i in range(n)}
    for r in rounds:
        for a, b in r:
            degree[a] += 1
            degree[b] += 1
    want = MIN_PARTNERS
    extra = []
    for i in (i for i in range(n) if degree[i] < want):
        for k in range(n // 2, n // 2 + n):
            j = (i + k) % n
            if degree[i] >= want:
                break
            if j != i and frozenset((i, j)) not in met:
                extra.append((min(i, j), max(i, j)))
                met.add(frozenset((i, j)))
                degree[i] += 1
                degree[j] += 1
    return extra


def suspects(n: int, matrix: Mapping[tuple[int, int], float], slow_ratio: float) -> list[int]:
    """Nodes at an end of a link measured below slow_ratio x the median link."""
    figures = link_figures(matrix)
    if not figures:
        return []
    limit = slow_ratio * statistics.median(figures.values())
    found = sorted({x for (a, b), v in figures.items() if v < limit for x in (a, b)})
    return [] if len(found) > MAX_SUSPECT_SHARE * n else found


def followup_rounds(n: int, matrix: Mapping[tuple[int, int], float],
                    slow_ratio: float = 0.5) -> list[Round]:
    """Targeted pair tests: each suspect against healthy partners it has not met yet."""
    if n <= FULL_MATRIX_MAX:
        return []
    bad = suspects(n, matrix, slow_ratio)
    if not bad:
        return []
    met = {frozenset(k) for k in matrix}
    healthy = [i for i in range(n) if i not in set(bad)]
    tests: list[tuple[int, int]] = []
    for j, x in enumerate(bad):
        start = (x + n // 3 + j * 7) % len(healthy)  # spread partners over the fabric
        picks = [healthy[(start + k) % len(healthy)] for k in range(len(healthy))]
        fresh = [p for p in picks if frozenset((x, p)) not in met][:SUSPECT_PARTNERS]
        tests += [(min(x, p), max(x, p)) for p in fresh]
    return schedule(tests)


def schedule(tests: Sequence[tuple[int, int]]) -> list[Round]:
    """Greedy: each pair in the first round where neither of its nodes is busy."""
    rounds: list[Round] = []
    busy: list[set[int]] = []
    for a, b in tests:
        for r, nodes in enumerate(busy):
            if a not in nodes and b not in nodes:
                rounds[r].append((a, b))
                nodes.update((a, b))
                break
        else:
            rounds.append([(a, b)])
            busy.append({a, b})
    return rounds

