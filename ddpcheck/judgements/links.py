"""Node-to-node links and scaling: the slow-link/slow-node judgements, the scaling table.

Pure (no torch), used by the worker's link probe and the launcher's report. Which pairs
are measured, round by round, is ``ddpcheck.cluster.pairing``'s choice (every pair up to
its FULL_MATRIX_MAX nodes, O(log N) planned rounds above, no node in two measurements at a
time). The probe measures GB/s in each direction and hands the matrix to
:func:`judge_links`. Absolute expectations are ``ddpcheck.judgements.expectations``,
stragglers ``ddpcheck.judgements.straggler``; DDP runs at several world sizes go to
:func:`scaling_table`. The report renders these figures (:mod:`ddpcheck.report.tables`).

GB/s means 10^9 bytes per second, as in nccl-tests and :mod:`ddpcheck.judgements.bandwidth`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ddpcheck.diagnoses import Problem, register
from ddpcheck.judgements.expectations import gbps

SLOW_LINK = register(
    "slow-link", "the link between two nodes is much slower than the other links",
    "the path between these two nodes is degraded: a bad cable or transceiver, a port that "
    "negotiated a lower speed, a congested or misrouted switch path, or this pair's traffic "
    "takes a slower interface",
    "measure the pair directly (ib_write_bw or iperf3 between the two hosts), check both ports' "
    "speed and error counters (ibstat, ethtool IFACE, ethtool -S IFACE); exclude one of the "
    "nodes (Slurm: --exclude) until the path is fixed")
SLOW_NODE = register(
    "slow-node", "every link of one node is much slower than the other links",
    "the node's network is degraded: its NIC runs at a lower speed or width, the NIC sits in a "
    "PCIe slot of reduced width, NCCL/gloo use a slower interface on this node "
    "(NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME), or the node is busy with other work",
    "exclude the node (Slurm: --exclude=NODE) and report it; check its link speed and errors "
    "(ethtool IFACE, ibstat, ethtool -S IFACE), its *_SOCKET_IFNAME and its load (top)")


# --- link verdicts -----------------------------------------------------------------------
Matrix = Mapping[tuple[str, str], float]


def hosts_of(matrix: Matrix) -> list[str]:
    """The hosts of a matrix, in order of first appearance."""
    seen: dict[str, None] = {}
    for src, dst in matrix:
        seen.setdefault(src, None)
        seen.setdefault(dst, None)
    return list(seen)


def link_figures(matrix: Matrix) -> dict[tuple[str, str], float]:
    """Each unordered link (in host order) with its figure: the faster measured direction.

    A degraded link or port is slow both ways; one slow direction alone is almost always a
    busy host at that moment (gloo is CPU-bound), so judging the faster direction keeps a
    healthy cluster free of false alarms. Both directions are shown in the problem text.
    """
    hosts = hosts_of(matrix)
    out: dict[tuple[str, str], float] = {}
    for i, a in enumerate(hosts):
        for b in hosts[i + 1:]:
            measured = [matrix[k] for k in ((a, b), (b, a)) if k in matrix]
            if measured:
                out[(a, b)] = max(0.0, max(measured))
    return out


def _direction(matrix: Matrix, src: str, dst: str) -> str:
    value = matrix.get((src, dst))
    return f"{src}->{dst} " + ("?" if value is None else gbps(value))


def judge_links(matrix: Matrix, slow_ratio: float = 0.5) -> list[Problem]:
    """Slow nodes and slow links, judged against the other links of the same matrix.

    matrix[(src, dst)] is GB/s from src to dst. A link's figure is its faster direction
    (see link_figures).

    1. A node's capacity is its best link. Nodes whose capacity is below slow_ratio x the
       (upper) median capacity are left out of the reference: all their links are slow,
       whoever the peer. The best link, not the median, so one bad pair does not condemn a
       node; the upper median, so a minority of slow nodes cannot drag it down.
    2. The reference is the median link among the remaining nodes. Every node whose best
       link is below slow_ratio x reference (every link of it is slow) is one
       ``slow-node`` problem, not n-1 link problems.
    3. Among the other nodes, each link below slow_ratio x reference is a ``slow-link``.

    With ±30% noise every healthy figure lies within 0.7/1.3 = 0.54 of any other, above the
    default ratio 0.5, so noise alone never gives a verdict. With 2 nodes there is one
    link and nothing to compare it with: no verdict (use judge_expectation). When most nodes
    are slow, the slow figures are the norm and nothing is relative-slow either.
    """
    figures = link_figures(matrix)
    hosts = [h for h in hosts_of(matrix) if any(h in link for link in figures)]
    if len(hosts) < 3 or len(figures) < 2:
        return []
    links_of = {h: [(k, v) for k, v in figures.items() if h in k] for h in hosts}
    capacity = {h: max(v for _, v in links_of[h]) for h in hosts}
    cap_ref = statistics.median_high(sorted(capacity.values()))
    candidates = [h for h in hosts if capacity[h] < slow_ratio * cap_ref]
    healthy = [v for (a, b), v in figures.items() if a not in candidates and b not in candidates]
    if not healthy:
        return []
    reference = statistics.median(healthy)
    if reference <= 0:
        return []
    limit = slow_ratio * reference
    slow_nodes = [h for h in hosts if capacity[h] < limit]

    problems: list[Problem] = []
    for h in slow_nodes:
        values = [v for _, v in links_of[h]]
        low, high = min(values), max(values)
        span = gbps(low) if gbps(low) == gbps(high) else f"{gbps(low)}-{gbps(high)}"
        problems.append(SLOW_NODE.problem(
            f"every link of {h} is slow: {span} GB/s, the median link is "
            f"{gbps(reference)} GB/s", hosts=[h]))
    slow_links = sorted(((v, k) for k, v in figures.items()
                         if v < limit and not set(k) & set(slow_nodes)),
                        key=lambda t: t[0])
    for value, (a, b) in slow_links:
        problems.append(SLOW_LINK.problem(
            f"link {a} <-> {b}: {gbps(value)} GB/s ({_direction(matrix, a, b)}, "
            f"{_direction(matrix, b, a)}), the median link is {gbps(reference)} GB/s",
            hosts=[a, b]))
    return problems


# --- scaling -----------------------------------------------------------------------------
def scaling_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows sorted by world size, each with ``efficiency`` added (a new dict per row).

    efficiency = (samples_per_s / world_size) / (the same at the smallest world size):
    1.0 is perfect scaling. None when the baseline throughput is not positive.
    """
    ordered = sorted((dict(r) for r in rows), key=lambda r: int(r["world_size"]))
    if not ordered:
        return []
    base = ordered[0]
    base_per_rank = float(base["samples_per_s"]) / int(base["world_size"])
    for r in ordered:
        per_rank = float(r["samples_per_s"]) / int(r["world_size"])
        r["efficiency"] = per_rank / base_per_rank if base_per_rank > 0 else None
    return ordered
