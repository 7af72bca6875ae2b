"""The text of a comparison against a baseline: what differs, each regression, the verdict.

Runs in the launcher (``ddpcheck compare`` and ``ddpcheck run --baseline``). Pure: a
``judgements.compare.Comparison`` in, text out.
"""

from __future__ import annotations

from tabulate import tabulate

from ddpcheck.judgements.compare import Change, Comparison
from ddpcheck.report.text import render_problem


def render_comparison(result: Comparison, threshold: float, base_name: str,
                      new_name: str) -> str:
    """What differs, one block per regression, and a verdict line."""
    differ = [r for r in result.rows if r.verdict is not Change.SAME]
    parts = [f"# baseline {base_name} vs now {new_name}"]
    if differ:
        parts.append(tabulate([[r.what, r.base, r.now, r.verdict] for r in differ],
                              headers=["figure", "baseline", "now", "verdict"],
                              tablefmt="simple"))
    parts.extend(render_problem(p, {}) for p in result.problems(threshold))
    parts.extend(result.notes)
    parts.append(verdict_line(result, threshold))
    return "\n\n".join(parts) + "\n"


def verdict_line(result: Comparison, threshold: float) -> str:
    same = sum(r.verdict is Change.SAME for r in result.rows)
    n = len(result.regressions)
    if n:
        first = sorted(result.regressions, key=lambda r: not r.hosts)[0]
        return (f"REGRESSION: {n} of {len(result.rows)} figures worse than the baseline "
                f"(below {threshold:g}x, beyond noise); first: {first.what}")
    return (f"NO REGRESSION: {len(result.rows)} figures compared, {same} the same, "
            f"threshold {threshold:g}x")
