"""Compare every rank's Flight Recorder trace: who never joined, who ran something else.

Runs wherever ``ddpcheck explain`` runs. The same checks as torch's ``fr_trace`` analyser
(torch/distributed/flight_recorder/components/types.py ``Op.match`` and builder.py
``build_collectives``), on the records of ``flightrec``: within one process group, the
collective with sequence number S must be the same op with the same input and output sizes
and dtypes on every member. The first S where they differ is a desync (op type or order) or
a size mismatch, and pairing stops there (what follows is off by one). A member whose last
recorded collective comes before the group's furthest one never joined it; a member with no
dump at all is named too (it crashed, was killed, or never wrote one). Each rank's stuck
collective is its last entry that had not retired.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ddpcheck.diagnoses import Problem
from ddpcheck.explain.codes import (
    COLLECTIVE_DESYNC,
    COLLECTIVE_SIZE_MISMATCH,
    RANK_NEVER_JOINED,
)
from ddpcheck.explain.flightrec import Entry, RankTrace
from ddpcheck.ranges import format_ranks

FR_NEXT = ("rerun with TORCH_FR_BUFFER_SIZE=2000 and the dump written on timeout "
           "(docs/explain.md) to confirm the fix")


@dataclass(frozen=True)
class Finding:
    """One problem found in the dumps, with the collective it is about and the dump file."""

    problem: Problem
    seq: int
    source: str


def analyse(traces: Sequence[RankTrace]) -> list[Finding]:
    """Findings over every process group, ordered by the collective they concern."""
    found: list[Finding] = []
    by_rank = {t.rank: t for t in traces}
    for pg in sorted({e.pg for t in traces for e in t.entries if not e.is_p2p}):
        members = _members(pg, traces)
        seqs = {r: {e.seq: e for e in t.entries if e.pg == pg and not e.is_p2p}
                for r, t in by_rank.items() if r in members}
        mismatch = _first_mismatch(pg, seqs, by_rank)
        if mismatch:
            found.append(mismatch)
        absent = _never_joined(pg, members, seqs, by_rank)
        if absent and (not mismatch or absent.seq <= mismatch.seq):
            found.append(absent)
    return sorted(found, key=lambda f: f.seq)


def _members(pg: str, traces: Sequence[RankTrace]) -> set[int]:
    """The group's ranks from pg_config; gloo leaves it empty: 0..highest dumped rank."""
    for t in traces:
        for name, ranks in t.pg_ranks:
            if name == pg and ranks:
                return set(ranks)
    return set(range(max(t.rank for t in traces) + 1))


def _describe(e: Entry) -> str:
    return f"{e.op} in={e.input_sizes} out={e.output_sizes}"


def _first_mismatch(pg: str, seqs: dict[int, dict[int, Entry]],
                    by_rank: dict[int, RankTrace]) -> Finding | None:
    common = sorted(set.intersection(*(set(s) for s in seqs.values()))) if seqs else []
    for seq in common:
        calls = {r: s[seq] for r, s in seqs.items()}
        kinds = {(e.op, e.input_sizes, e.output_sizes, e.dtypes) for e in calls.values()}
        if len(kinds) == 1:
            continue
        groups: dict[str, list[int]] = {}
        for r, e in sorted(calls.items()):
            groups.setdefault(_describe(e) + (f" at {e.user_frame}" if e.user_frame else ""),
                              []).append(r)
        observed = f"process group {pg!r}, collective #{seq}: " + "; ".join(
            f"rank {format_ranks(rs)} ran {what}" for what, rs in groups.items())
        ops = {e.op for e in calls.values()}
        ranks = tuple(sorted(calls))
        if len(ops) > 1:
            problem = COLLECTIVE_DESYNC.problem(
                observed, ranks=ranks, cause=f"ranks called different collectives as #{seq} "
                f"({', '.join(sorted(ops))}): one skipped, added or reordered a collective "
                "(a rank-dependent branch, uneven data, rank-0-only work)")
        else:
            problem = COLLECTIVE_SIZE_MISMATCH.problem(observed, ranks=ranks)
        return Finding(problem, seq, by_rank[min(calls)].source)
    return None


def _never_joined(pg: str, members: set[int], seqs: dict[int, dict[int, Entry]],
                  by_rank: dict[int, RankTrace]) -> Finding | None:
    last = {r: max(s) for r, s in seqs.items() if s}
    if not last:
        return None
    furthest = max(last.values())
    waiting = sorted(r for r, s in last.items() if s == furthest)
    behind = sorted(r for r, s in last.items() if s < furthest)
    no_dump = sorted(members - set(by_rank))
    if not behind and not no_dump:
        return None
    head = seqs[waiting[0]][furthest]
    parts = [f"process group {pg!r}: rank {format_ranks(waiting)} waited in collective "
             f"#{furthest} ({_describe(head)}{', at ' + head.user_frame if head.user_frame else ''}"
             f"{', not completed' if not head.retired else ''})"]
    parts += [f"rank {r} never joined it: its last collective was #{last[r]} "
              f"({seqs[r][last[r]].op})" for r in behind]
    if no_dump:
        parts.append(f"rank {format_ranks(no_dump)} left no dump (crashed, killed, or "
                     "never wrote one: its own log says why)")
    culprits = tuple(sorted(behind + no_dump))
    problem = RANK_NEVER_JOINED.problem(
        "; ".join(parts), ranks=culprits,
        cause=f"rank {format_ranks(list(culprits))} did not reach collective #{furthest} "
              f"({head.op}) that rank {format_ranks(waiting)} waited in: "
              + RANK_NEVER_JOINED.cause)
    return Finding(problem, furthest, by_rank[waiting[0]].source)


def stuck_in(traces: Sequence[RankTrace]) -> dict[int, str]:
    """Each rank's collective that had not retired when it dumped (or its last one)."""
    out = {}
    for t in sorted(traces, key=lambda t: t.rank):
        open_ = [e for e in t.entries if not e.retired] or list(t.entries[-1:])
        if open_:
            e = open_[-1]
            out[t.rank] = f"#{e.seq} {e.op}{'' if not e.retired else ' (completed)'}"
    return out
