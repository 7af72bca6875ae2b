"""The rules rank 0 applies in the plugin's agreements, and the layout it publishes.

Runs inside every worker (rank 0 decides, every rank decodes). Pure and small, so the
agreement's cost at 1,024 nodes is visible here: the layout is O(nodes) bytes (one
run of ranks per host), a probe's decision is one pass over the ranks' outcomes.
"""

from __future__ import annotations

from typing import Any

from ddpcheck import results
from ddpcheck.worker.world import Exchange


def encode_hosts(hosts: dict[int, str]) -> list[list]:
    """{rank: host} as [host, first rank, count] runs (torchrun numbers a node's ranks
    contiguously, so this is one entry per node)."""
    runs: list[list] = []
    for rank in sorted(hosts):
        if runs and runs[-1][0] == hosts[rank] and runs[-1][1] + runs[-1][2] == rank:
            runs[-1][2] += 1
        else:
            runs.append([hosts[rank], rank, 1])
    return runs


def decode_hosts(runs: list[list]) -> dict[int, str]:
    return {first + i: host for host, first, count in runs for i in range(count)}


def probe_decision(ex: Exchange) -> dict[str, bool]:
    """Rank 0's rule for one probe: failed anywhere, whether the world is broken, and whether
    every failure was ddpcheck's own (then the world is intact and later stages still run)."""
    failed = [v for v in ex.values.values() if v["status"] == results.FAIL]
    return {"fail": bool(failed),
            "breaks": any(v["breaks_world"] for v in ex.values.values()),
            "own_only": bool(failed) and all(v.get("own", False) for v in failed)}


def odd_collections(ex: Exchange) -> dict[str, Any]:
    """Rank 0's rule for the collection check: the ranks whose probes differ from rank 0's."""
    ref = ex.values[0]
    return {"odd": [r for r, v in ex.values.items() if v["digest"] != ref["digest"]],
            "reference": ref}
