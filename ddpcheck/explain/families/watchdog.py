"""The ProcessGroupNCCL watchdog: collective timeouts, compared across ranks for desync.

Message from torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (``WorkNCCL::checkTimeout``):
"[Rank R] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=S, OpType=OP, ...)
ran for T milliseconds before timing out." Every rank that waits prints it; ranks stuck at
different sequence numbers or op types were not running the same collective (desync).
"""

from __future__ import annotations

from collections.abc import Sequence

from ddpcheck.diagnoses import Problem
from ddpcheck.explain.codes import COLLECTIVE_DESYNC, COLLECTIVE_TIMEOUT
from ddpcheck.explain.matching import Hit, observed_lines, pattern, where
from ddpcheck.ranges import format_ranks

NEXT = "ddpcheck run --nodes N --stages collectives,bandwidth (the links between the nodes)"


def combine(hits: Sequence[Hit]) -> Problem:
    """One problem over every rank's timeout; desync when ranks wait on different work."""
    ops: dict[tuple[str, str], set[int]] = {}
    for h in hits:
        ops.setdefault((h.match["seq"], h.match["op"]), set()).add(
            h.record.rank if h.record.rank is not None else -1)
    summary = "; ".join(
        f"SeqNum={s} {op} on rank {format_ranks(sorted(r for r in rs if r >= 0)) or '?'}"
        for (s, op), rs in sorted(ops.items(), key=lambda kv: int(kv[0][0])))
    observed = f"{summary} | {observed_lines(hits)}"
    if len(ops) > 1:
        return COLLECTIVE_DESYNC.problem(observed, **where(hits))
    (seq, op), = ops
    return COLLECTIVE_TIMEOUT.problem(
        observed, cause=f"every rank that reported was still waiting in {op} #{seq}: a rank "
        "that did not reach it (stopped, crashed or slow: look for its error above) or a "
        "stalled link between nodes", **where(hits))


PATTERNS = [
    pattern(COLLECTIVE_TIMEOUT,
            r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), "
            r"OpType=(?P<op>\w+)", NEXT, root=False, combine=combine),
]
