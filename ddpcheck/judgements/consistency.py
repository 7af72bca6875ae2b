"""Find the odd ranks out: which ranks disagree with the majority on a value.

Pure; used by the rendezvous probes (versions, architecture, settings across ranks).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from typing import Any

from ddpcheck.ranges import ranks_with_hosts


def odd_ranks(values: Mapping[int, Hashable]) -> tuple[Any, dict[Any, list[int]]]:
    """Return (majority value, {other value: ranks}); ties go to the value rank 0 holds."""
    if not values:
        return None, {}
    counts = Counter(values.values())
    top = max(counts.values())
    lowest = min(values)
    majority = values[lowest] if counts[values[lowest]] == top else counts.most_common(1)[0][0]
    others: dict[Any, list[int]] = {}
    for rank, value in sorted(values.items()):
        if value != majority:
            others.setdefault(value, []).append(rank)
    return majority, others


def describe_disagreement(what: str, values: Mapping[int, Hashable],
                          hosts: Mapping[int, str]) -> str | None:
    """One line naming the ranks (and hosts) that differ, or None when all agree."""
    majority, others = odd_ranks(values)
    if not others:
        return None
    odd = "; ".join(f"{value!s} on rank {ranks_with_hosts(ranks, hosts)}"
                    for value, ranks in others.items())
    return f"{what}: {majority!s} on most ranks, but {odd}"
