"""The collective fingerprint check of TORCH_DISTRIBUTED_DEBUG=DETAIL in its first wording
(torch 1.10), where each rank prints only its own fingerprint.

Runs inside ``ddpcheck explain`` (a pure reader of log lines). torch 1.10's
ProcessGroupWrapper.cpp (``CollectiveFingerPrint::verify_tensors``) all-gathers every rank's
fingerprint (op type, tensor shapes, dtypes, devices) and, where one differs from this rank's,
raises ``Detected mismatch between collectives on ranks. Rank 0 is running inconsistent
collective: CollectiveFingerPrint(OpType=ALLGATHER, TensorShape=[41, 256], ...)``. Later torch
prints both ranks on one line (``... but Rank 1 is running collective: ...``), which the
watchdog family reads. One rank's line cannot say whether the op or the shapes differ; the
lines of two ranks can: the same op on both means their shapes or dtypes differ.
"""

from __future__ import annotations

from collections.abc import Sequence

from ddpcheck.diagnoses import Problem
from ddpcheck.explain.codes import COLLECTIVE_DESYNC, COLLECTIVE_SIZE_MISMATCH, UNEXPLAINED
from ddpcheck.explain.matching import Hit, observed_lines, pattern, where

NEXT = ("rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL (every rank's log): it names each rank's "
        "collective, shapes and dtypes")


def combine_own_fingerprints(hits: Sequence[Hit]) -> Problem:
    """Compare the op types the ranks print: one op on two or more ranks is a size or dtype
    mismatch, different ops a desync; a single rank's line stays undetermined."""
    ops = {h.match["rank"]: h.match["op"] for h in hits}
    observed = observed_lines(hits)
    if len(set(ops.values())) > 1:
        said = ", ".join(f"rank {r} ran {op}" for r, op in sorted(ops.items()))
        return COLLECTIVE_DESYNC.problem(
            observed, cause=f"{said} as the same collective: a rank skipped, added or "
            "reordered one", **where(hits))
    if len(ops) > 1:
        op = next(iter(ops.values()))
        return COLLECTIVE_SIZE_MISMATCH.problem(
            observed, cause=f"ranks {', '.join(sorted(ops))} all ran {op} but their "
            "fingerprints differ: the tensors' shapes or dtypes differ per rank (an uneven "
            "last batch, a rank-dependent shape)", **where(hits))
    return UNEXPLAINED.problem(observed, **where(hits))


PATTERNS = [
    pattern(COLLECTIVE_SIZE_MISMATCH,
            r"Detected mismatch between collectives on ranks\. Rank (?P<rank>\d+) is running "
            r"inconsistent collective: CollectiveFingerPrint\((?:SequenceNumber=\d+, )?"
            r"OpType=(?P<op>\w+)", NEXT, combine=combine_own_fingerprints),
]
