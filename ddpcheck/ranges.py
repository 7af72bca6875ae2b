"""Render rank lists as ranges ("0-3,6") and ranks with their hosts ("4-7 (gpu-b)").

Pure helpers shared by the worker plugin and the launcher's report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def format_ranks(ranks: Iterable[int]) -> str:
    """Compress sorted ranks into ranges: [0,1,2,3,6] -> "0-3,6"."""
    nums = sorted(set(int(r) for r in ranks))
    parts: list[str] = []
    start = prev = None
    for n in nums + [None]:  # type: ignore[list-item]
        if start is not None and (n is None or n != prev + 1):
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if n is not None and start is None:
            start = n
        prev = n
    return ",".join(parts)


def ranks_with_hosts(ranks: Iterable[int], hosts_by_rank: Mapping[int, str]) -> str:
    """Group ranks by host: "0-3 (gpu-a), 4-7 (gpu-b)"; unknown hosts are left out."""
    by_host: dict[str, list[int]] = {}
    for r in sorted(set(ranks)):
        by_host.setdefault(hosts_by_rank.get(r, ""), []).append(r)
    parts = [f"{format_ranks(rs)} ({h})" if h else format_ranks(rs) for h, rs in by_host.items()]
    return ", ".join(parts)
