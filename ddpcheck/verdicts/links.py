"""Node-to-node links, bandwidth expectations and scaling: the verdicts.

Pure (no torch), used by the worker's bandwidth probes and the launcher's report. The
worker pairs nodes with :func:`round_robin` so every pair is measured once and no node is
in two measurements at a time; it measures GB/s in each direction and hands the matrix to
:func:`link_verdicts`. Absolute expectations (``--expect-busbw`` or a known reference for
the GPU model, :func:`reference_busbw`) go through :func:`expect_verdict`; DDP runs at
several world sizes to :func:`scaling_table`. The report renders these figures
(:mod:`ddpcheck.report.tables`).

GB/s means 10^9 bytes per second, as in nccl-tests and :mod:`ddpcheck.verdicts.bandwidth`.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ddpcheck.diagnoses import Problem, register

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
BELOW_EXPECTED_BANDWIDTH = register(
    "below-expected-bandwidth", "measured bandwidth is below what this hardware should reach",
    "traffic takes a slower path than the hardware offers: NCCL over TCP sockets instead of "
    "InfiniBand/RoCE or NVLink, peer-to-peer disabled (NCCL_P2P_DISABLE, a VM or ACS), a link "
    "trained at reduced speed or width, or a degraded NVLink",
    "rerun with NCCL_DEBUG=INFO and check the transports NCCL picks (NET/IB vs NET/Socket, "
    "P2P vs SHM); check nvidia-smi topo -m and nvidia-smi nvlink -s, ibstat; lower the "
    "expectation if it does not fit this hardware")



def _gbps(value: float) -> str:
    """A bandwidth figure: one decimal from 1 GB/s up, two below ("0.11", "1.9", "40.0")."""
    return f"{value:.1f}" if abs(value) >= 1 else f"{value:.2f}"


# --- pairing -----------------------------------------------------------------------------
def round_robin(n: int) -> list[list[tuple[int, int]]]:
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
    rounds: list[list[tuple[int, int]]] = []
    for _ in range(m - 1):
        pairs = []
        for i in range(m // 2):
            a, b = players[i], players[m - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


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
    return f"{src}->{dst} " + ("?" if value is None else _gbps(value))


def link_verdicts(matrix: Matrix, slow_ratio: float = 0.5) -> list[Problem]:
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
    link and nothing to compare it with: no verdict (use expect_verdict). When most nodes
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
        span = _gbps(low) if _gbps(low) == _gbps(high) else f"{_gbps(low)}-{_gbps(high)}"
        problems.append(SLOW_NODE.problem(
            f"every link of {h} is slow: {span} GB/s, the median link is "
            f"{_gbps(reference)} GB/s", hosts=[h]))
    slow_links = sorted(((v, k) for k, v in figures.items()
                         if v < limit and not set(k) & set(slow_nodes)),
                        key=lambda t: t[0])
    for value, (a, b) in slow_links:
        problems.append(SLOW_LINK.problem(
            f"link {a} <-> {b}: {_gbps(value)} GB/s ({_direction(matrix, a, b)}, "
            f"{_direction(matrix, b, a)}), the median link is {_gbps(reference)} GB/s",
            hosts=[a, b]))
    return problems


# --- absolute expectations ---------------------------------------------------------------
def expect_verdict(measured_gbps: float, expected_gbps: float, what: str) -> list[Problem]:
    """``below-expected-bandwidth`` when measured < expected (nothing if expected <= 0).

    what names the figure and where the expectation comes from, e.g.
    "busbw (--expect-busbw)" or "busbw (8x A100-SXM4 reference)".
    """
    if expected_gbps <= 0 or measured_gbps >= expected_gbps:
        return []
    return [BELOW_EXPECTED_BANDWIDTH.problem(
        f"expected >= {_gbps(expected_gbps)} GB/s {what}, measured {_gbps(measured_gbps)} GB/s")]


_MARGIN = ("the minimum expected here is ~70% of that, to allow for ddpcheck's smaller "
           "messages (up to 256 MiB) and for busy nodes")
_NVLINK_SRC = "NVIDIA/nccl-tests#212 (NCCL maintainer)"
_NVSWITCH_8 = {
    # model: (typical busbw GB/s, minimum expected GB/s, what the typical figure is)
    "A100": (230.0, 160.0, "8x A100-SXM4 on NVSwitch (HGX/DGX A100, NVLink3, 300 GB/s per "
             "direction): NCCL all-reduce busbw is ~230 GB/s in nccl-tests at large messages, "
             "line rate less ~20% protocol overhead (" + _NVLINK_SRC + ")"),
    "H100": (360.0, 250.0, "8x H100-SXM on NVSwitch (HGX/DGX H100, NVLink4, 450 GB/s per "
             "direction): ~370 GB/s busbw with rings; all-reduce uses NVLink SHARP (NVLS) by "
             "default and peaks at ~480 GB/s busbw only at sizes above 256 MiB ("
             + _NVLINK_SRC + ")"),
    "H200": (360.0, 250.0, "8x H200-SXM on NVSwitch (HGX H200, NVLink4, 450 GB/s per "
             "direction): ~370 GB/s busbw with rings; NVLink SHARP (NVLS) peaks at ~480 GB/s "
             "busbw above 256 MiB (as H100, " + _NVLINK_SRC + ")"),
}
_PCIE = {
    # PCIe generation: (minimum expected GB/s, what the typical figure is)
    3: (4.0, "PCIe Gen3 x16 GPUs (~12 GB/s per direction): NCCL all-reduce busbw without "
             "NVLink bridges is typically 6-11 GB/s, lower across CPU sockets; the minimum "
             "expected here is ~70% of the low end"),
    4: (8.0, "PCIe Gen4 x16 GPUs (~25 GB/s per direction): NCCL all-reduce busbw without "
             "NVLink bridges is typically 12-22 GB/s, lower across CPU sockets; the minimum "
             "expected here is ~70% of the low end"),
    5: (14.0, "PCIe Gen5 x16 GPUs (~50 GB/s per direction): NCCL all-reduce busbw without "
              "NVLink bridges is typically 20-40 GB/s, bounded by the CPUs' PCIe and memory "
              "bandwidth; the minimum expected here is ~70% of the low end"),
}
# Models sold only as PCIe cards, and models sold as SXM and PCIe (PCIe only when the name
# says PCIe or NVL, the bridged PCIe variant), with their PCIe generation.
_PCIE_ONLY = {"P40": 3, "P4": 3, "T4": 3, "A40": 4, "A30": 4, "A10": 4, "A16": 4, "A2": 4,
              "L40": 4, "L40S": 4, "L4": 4, "A6000": 4, "A5000": 4, "A4000": 4}
_DUAL = {"P100": 3, "V100": 3, "V100S": 3, "A100": 4, "H100": 5, "H200": 5}
# Export variants with cut-down NVLink (A800, H800: 400 GB/s) and GPUs whose nodes are not
# the usual 8-GPU NVSwitch board: no reference rather than a wrong one.
_NO_REFERENCE = {"A800", "H800", "H20", "GH200", "GB200"}


def reference_busbw(gpu_name: str, n_gpus_per_node: int,
                    backend: str) -> tuple[float, str] | None:
    """Minimum intra-node all-reduce busbw (GB/s) to expect for a GPU model, and why.

    gpu_name as nvidia-smi or torch report it ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB
    HBM3", "Tesla T4"). Conservative: ~70% of the typical nccl-tests figure, so a healthy
    node never falls below it. None when unknown: backend other than NCCL, fewer than 2
    GPUs, an unlisted model (V100-SXM2, A800, H800, ...), or an SXM part at a GPU count
    other than 8, where the board is ambiguous (4 of 8 NVSwitch GPUs vs a 4-GPU board).
    """
    if backend.lower() != "nccl" or n_gpus_per_node < 2:
        return None
    tokens = re.findall(r"[A-Z0-9]+", gpu_name.upper())
    known = {**_PCIE_ONLY, **_DUAL, **dict.fromkeys(_NO_REFERENCE, 0)}
    model = next((t for t in tokens if t in known), None)
    if model is None or model in _NO_REFERENCE:
        return None
    pcie = model in _PCIE_ONLY or "PCIE" in tokens or "NVL" in tokens
    if pcie:
        minimum, text = _PCIE[known[model]]
        return minimum, f"{text}: {minimum:.0f} GB/s"
    sxm = any(t.startswith("SXM") for t in tokens) or model in ("H100", "H200")
    if not sxm or model not in _NVSWITCH_8 or n_gpus_per_node != 8:
        return None
    _, minimum, text = _NVSWITCH_8[model]
    return minimum, f"{text}; {_MARGIN}: {minimum:.0f} GB/s"


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
