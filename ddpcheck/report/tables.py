"""The measurement tables of the report: the all-reduce sweep, the link matrix, the
intra/inter-node busbw and the DDP scaling, rendered with tabulate.

Runs in the launcher (and in ``ddpcheck compare``). Pure: measurements in, text out; the
verdicts that judge the same figures live in ``ddpcheck.judgements``. Every table is right
aligned (numbers), its first columns left aligned where they name a node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tabulate import tabulate

from ddpcheck.judgements.links import Matrix, hosts_of, scaling_table


def columns(rows: Sequence[Sequence[str]], left: int = 0) -> str:
    """Rows (the first is the header) as columns two spaces apart, numbers right aligned and
    the first ``left`` columns left aligned; cells are printed as given."""
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    align = ["left"] * left + ["right"] * (width - left)
    text = tabulate([list(r) for r in rows], tablefmt="plain", colalign=align,
                    disable_numparse=True)
    return "\n".join(line.rstrip() for line in text.splitlines())


def format_sweep(rows: Sequence[Mapping[str, Any]], world_size: int, backend: str) -> str:
    """Render a sweep like nccl-tests: header, units row, one right-aligned line per size."""
    head = ("#", "size", "count", "type", "redop", "time", "min", "max", "algbw", "busbw")
    units = ("#", "(B)", "(elements)", "", "", "(us)", "(us)", "(us)", "(GB/s)", "(GB/s)")
    body = [("*" if r.get("judged") else "", str(r["size"]), str(r["count"]), r["dtype"],
             "sum", f"{r['time_us']:.1f}", f"{r['time_min_us']:.1f}", f"{r['time_max_us']:.1f}",
             f"{r['algbw']:.2f}",
             f"{r['busbw']:.2f}") for r in rows]
    lines = [f"# all_reduce, {world_size} ranks, backend {backend}",
             columns([head, units, *body])]
    judged = [r["busbw"] for r in rows if r.get("judged")]
    if judged:  # the rows where the reference applies (judgements.bandwidth.JudgeRule)
        lines.append(f"# Judged bus bandwidth : {max(judged):.2f} GB/s (rows marked *; "
                     "smaller sizes are shown, not judged)")
    if rows:
        peak = max(r["busbw"] for r in rows)
        lines.append(f"# Peak bus bandwidth : {peak:.2f} GB/s")
    return "\n".join(lines)


def format_scaling(rows: Sequence[Mapping[str, Any]]) -> str:
    """Table: world size, step time (ms), samples/s, efficiency (%)."""
    if any("efficiency" not in r for r in rows):
        rows = scaling_table(rows)
    body = []
    for r in rows:
        eff = r.get("efficiency")
        body.append([str(r["world_size"]), f"{float(r['step_time_s']) * 1000:.1f}",
                     f"{float(r['samples_per_s']):.1f}",
                     "-" if eff is None else f"{float(eff) * 100:.0f}%"])
    return columns([("world size", "step time (ms)", "samples/s", "efficiency"), *body])


def format_matrix(hosts: Sequence[str], matrix: Matrix) -> str:
    """Node x node GB/s: rows are the sender, columns the receiver, "-" on the diagonal."""
    body = []
    for src in hosts:
        cells = [src]
        for dst in hosts:
            value = matrix.get((src, dst))
            cells.append("-" if src == dst else "?" if value is None else f"{value:.2f}")
        body.append(cells)
    return columns([("GB/s from \\ to", *hosts), *body], left=1)


MATRIX_MAX_HOSTS = 32  # above this, the worst links, slow nodes and a histogram instead
WORST_SHOWN = 8


def format_link_summary(matrix: Matrix) -> str:
    """Many nodes: the slowest links, the nodes slowest with every partner, a histogram."""
    worst = sorted(matrix.items(), key=lambda kv: kv[1])[:WORST_SHOWN]
    parts = ["slowest links:\n" + columns(
        [("from", "to", "GB/s"), *[[a, b, f"{v:.2f}"] for (a, b), v in worst]], left=2)]
    by_node: dict[str, list[float]] = {}
    for (a, b), v in matrix.items():
        by_node.setdefault(a, []).append(v)
        by_node.setdefault(b, []).append(v)
    best = {h: max(vs) for h, vs in by_node.items()}  # a slow node is slow with everyone
    slow = sorted(best.items(), key=lambda kv: kv[1])[:WORST_SHOWN]
    parts.append("slowest nodes (their best link):\n" + columns(
        [("node", "links", "best GB/s"), *[[h, str(len(by_node[h])), f"{v:.2f}"]
                                           for h, v in slow]], left=1))
    parts.append("links by GB/s:\n" + histogram(list(matrix.values())))
    return "\n".join(parts)


def histogram(values: Sequence[float], bins: int = 8, width: int = 40) -> str:
    """A text histogram: one line per bin, its range, count and a bar."""
    low, high = min(values), max(values)
    step = (high - low) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(int((v - low) / step), bins - 1)] += 1
    most = max(counts)
    rows = [[f"{low + i * step:.2f}-{low + (i + 1) * step:.2f}", str(c),
             "#" * max(int(c / most * width), 1 if c else 0)] for i, c in enumerate(counts)]
    return columns([("GB/s", "count", ""), *rows], left=1)


def format_busbw_summary(intra: Mapping[str, float], inter: float) -> str:
    """Many nodes: the spread of intra-node busbw, its slowest nodes, the cross-node figure."""
    values = sorted(intra.values())
    median = values[len(values) // 2]
    slow = sorted(((h, v) for h, v in intra.items() if v < median),
                  key=lambda kv: kv[1])[:WORST_SHOWN]
    return "\n".join([
        f"intra-node busbw over {len(values)} nodes: min {values[0]:.2f}, median "
        f"{median:.2f}, max {values[-1]:.2f} GB/s",
        ("slowest nodes (below the median):\n" + columns(
            [("node", "intra-node busbw (GB/s)"), *[[h, f"{v:.2f}"] for h, v in slow]], left=1)
         if slow else "no node below the median"),
        f"cross-node busbw (one rank per node): {inter:.2f} GB/s"])


def format_intra_inter(intra: Mapping[str, float], inter: float | None) -> str:
    """Per-node intra-node all-reduce busbw and the cross-node busbw (one rank per node)."""
    lines = []
    if intra:
        lines.append(columns([("node", "intra-node busbw (GB/s)"),
                              *[[h, f"{v:.2f}"] for h, v in intra.items()]], left=1))
    else:
        lines.append("intra-node busbw: not measured")
    if inter is None:
        lines.append("cross-node busbw (one rank per node): not measured")
    else:
        lines.append(f"cross-node busbw (one rank per node): {inter:.2f} GB/s")
        slowest = min(intra.values(), default=0.0)
        if slowest > 0 and inter > 0:
            lines.append(f"the slowest node's intra-node busbw is {slowest / inter:.1f}x the "
                         "cross-node busbw")
    return "\n".join(lines)


def render_measurements(m: Mapping[str, Any], world_size: int, backend: str) -> list[str]:
    """The figures a user reads at a glance: sweep, link matrix, intra/inter, scaling."""
    parts = []
    if m.get("allreduce_sweep"):
        parts.append(format_sweep(m["allreduce_sweep"], world_size, backend))
    if m.get("link_matrix"):
        matrix = {tuple(k.split("->")): v for k, v in m["link_matrix"].items()}
        hosts = m.get("link_hosts") or hosts_of(matrix)
        if len(hosts) > MATRIX_MAX_HOSTS:
            parts.append(f"# point-to-point links: {len(matrix)} measured between "
                         f"{len(hosts)} nodes (every figure in the JSON report)\n"
                         + format_link_summary(matrix))
        else:
            parts.append("# point-to-point links, one direction (best of trials)\n"
                         + format_matrix(hosts, matrix))
    if (len(m.get("intra_node_busbw") or {}) > MATRIX_MAX_HOSTS
            and m.get("cross_node_busbw") is not None):
        parts.append("# all-reduce busbw within nodes and across nodes\n"
                     + format_busbw_summary(m["intra_node_busbw"], m["cross_node_busbw"]))
    elif m.get("intra_node_busbw") or m.get("cross_node_busbw") is not None:
        parts.append("# all-reduce busbw within nodes and across nodes\n"
                     + format_intra_inter(m.get("intra_node_busbw") or {},
                                          m.get("cross_node_busbw")))
    if m.get("ddp_scaling"):
        parts.append("# DDP scaling (subgroups of the first k ranks)\n"
                     + format_scaling(m["ddp_scaling"]))
    return parts
