"""Who waited in a timed-out collective, who did not, and what the others were doing.

Runs wherever ``ddpcheck explain`` runs (text only). ``watchdog.refine`` asks it for the
structure of a collective timeout, read from torch's own lines across ranks:

- each rank's wait (ProcessGroupNCCL ``WorkNCCL::checkTimeout``: rank, process group,
  SeqNum, OpType, NumelIn, ``ran for N milliseconds``, ``Timeout(ms)``), and the watchdog's
  per-rank summary, torch >= 2.2 "Timeout at NCCL work: N, last enqueued NCCL work: M, last
  completed NCCL work: K" (2.3-2.4 also "Exception (either an error or timeout) detected by
  watchdog at work: N, ...", >= 2.5 "failure detected by watchdog at work sequence id: N PG
  status: ..."), which names the process group (same group at two sequence numbers: the
  ranks ran different collectives; a bare watchdog line takes its group from them);
- the ranks that had *nothing pending* when another rank timed out: with
  ``TORCH_NCCL_DUMP_ON_TIMEOUT`` a timed-out rank signals every rank through the store, and
  each prints its counters (torch 2.2-2.3 "Received a global timeout from another rank and
  will start to dump the debug info. Last enqueued NCCL work: K, last completed NCCL work:
  K."; >= 2.4 "Received a dump signal due to a collective timeout from rank R and we will
  try our best to dump the debug info. Last enqueued NCCL work: K, ..."). Enqueued equal to
  completed, below the sequence number the others wait in: that rank never joined it;
- a rank that went on printing while the others waited: a line of a rank that did not time
  out, printed after the first timeout in one stream or inside the wait by its timestamp
  (the watchdog runs on every rank, so a rank that had waited as long would have timed out
  too; one that exited prints nothing more), or a progress bar (tqdm, printed by rank 0 only
  in the usual trainers) still moving after the others' timeouts when rank 0 is not among
  them;
- what a rank that did not time out printed last: a step of its own under way (evaluating,
  saving, tokenising; not finished) is that rank busy alone (a training bar is not: a rank
  that entered the same collective a little later is killed by torchrun before its own
  watchdog fires);
- torch's desync report (``TORCH_NCCL_DESYNC_DEBUG=1``, TraceUtils.h ``dumpSnapshot``):
  "#N started ranks:" then "[0, 1] started ALLREDUCE", "[2] started BROADCAST": two ops
  started as one sequence number are ranks running different collectives;
- the context managers that exist to let rank 0 work alone while the others wait in a
  barrier (transformers/accelerate ``main_process_first``, ultralytics
  ``torch_distributed_zero_first``) in a rank's traceback.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ddpcheck.explain.reader import Record

# ProcessGroupNCCL.cpp WorkNCCL operator<< (1.10+: SeqNum; 2.2+: NumelIn/NumelOut) inside
# checkTimeout's "Watchdog caught collective operation timeout: ... ran for T milliseconds".
# The same WorkNCCL under NCCL_BLOCKING_WAIT, where the calling thread times out instead of
# the watchdog (WorkNCCL::synchronizeInternal): "[Rank 1] Work WorkNCCL(SeqNum=7, ...) timed
# out in blocking wait (NCCL_BLOCKING_WAIT=1)." (1.x-2.1), "(TORCH_NCCL_BLOCKING_WAIT=1)."
# (2.2+), "timed out in blocking wait." (newest): no "ran for" there.
TIMED_OUT_WORK = (r"(?:Watchdog caught collective operation timeout: |\bWork (?=WorkNCCL\(.*\) "
                  r"timed out in blocking wait))")
WAIT = re.compile(TIMED_OUT_WORK + r"WorkNCCL\("
                  r"(?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)"
                  r"(?:, NumelIn=(?P<numel>\d+))?(?:.*?Timeout\(ms\)=(?P<limit>\d+))?"
                  r"(?:\) ran for (?P<ran>\d+) milliseconds)?")
# ProcessGroupNCCL.cpp watchdog summaries, one per failed rank and group, each naming the
# group in its prefix: torch 2.2-2.4 "Timeout at NCCL work: S, last enqueued NCCL work: E,
# last completed NCCL work: C." (after a timeout), 2.3-2.4 also "Exception (either an error or
# timeout) detected by watchdog at work: S, last enqueued NCCL work: E, ..." and >= 2.5
# "failure detected by watchdog at work sequence id: S PG status: last enqueued work: E, last
# completed work: C" (both on an error as on a timeout: S is the work that failed).
SUMMARY = re.compile(r"(?:Timeout at NCCL work: |Exception \(either an error or timeout\) "
                     r"detected by watchdog at work: |failure detected by watchdog at work "
                     r"sequence id: )(?P<seq>\d+),? (?:PG status: )?last enqueued (?:NCCL )?"
                     r"work: -?\d+")
# The dump signal a rank receives when another rank timed out (TORCH_NCCL_DUMP_ON_TIMEOUT):
# torch 2.2-2.3 ProcessGroupNCCL::heartbeatMonitor / watchdog, >= 2.4 getNCCLWatchdog
# TimeoutErrorMsg. "from this local rank" is the rank's own timeout, not another's.
IDLE = re.compile(r"Received a (?:global timeout from another rank|dump signal due to a "
                  r"collective timeout from\s+(?!this local rank)[^.]*?)(?: and will start| and "
                  r"we will try our best) to dump the debug info\. Last enqueued NCCL work: "
                  r"(?P<enq>-?\d+), last completed NCCL work: (?P<done>-?\d+)")
# The process group of a line: torch >= 2.4 "[PG 0 (default_pg) Rank 1]", >= 2.5 "[PG ID 0
# PG GUID 0(default_pg) Rank 1]"; older lines name none.
PG_PREFIX = re.compile(r"\[PG (?:ID )?(?P<pg>\d+)[^\]]*Rank \d+\]")
# tqdm's bar ("92%|#####| 328986/359152 [29:58<12:05"), with or without the bar itself.
PROGRESS = re.compile(r"\d{1,3}%(?:\|[^|\n]{0,120}\|)?\s*\d+(?:\.\d+)?[kM]?/\d+(?:\.\d+)?[kM]? "
                      r"\[\d+:\d\d(?::\d\d)?<")
# Context managers that run a block on rank 0 first while the others wait in a barrier:
# transformers TrainingArguments.main_process_first, accelerate (local_)main_process_first,
# ultralytics/yolov5 torch_distributed_zero_first.
ZERO_FIRST = re.compile(r"\bin (?:local_)?main_process_first\b|\bin torch_distributed_zero_first"
                        r"\b|with \S*(?:main_process_first|torch_distributed_zero_first)\(")
# What a rank that failed or is being torn down prints, or torch's own c10d/NCCL lines and
# warnings: none of them shows the rank busy with work of its own.
# (an indented line is a traceback's source line: "    dist.barrier()").
NOT_WORK = re.compile(r"Error\b|Exception|Traceback|Killed|fault|[Aa]bort|exitcode|[Ss]ignal|"
                      r"Watchdog|timed? ?out|[Tt]imeout|NCCL|ProcessGroup|c10d|socket|"
                      r"[Ww]arning|^\s*\[?[IWEF]\d{4} |^\s*File \"|^\s*$|^\s{3,}\S|^\s*[~^]+\s*$|"
                      r"dump|destroy")
# TraceUtils.h dumpSnapshot: "\n\t   #6 started ranks:\n\t     [0, 1] started ALLREDUCE".
SNAPSHOT_SEQ = re.compile(r"^\s*#(?P<seq>\d+) (?:started|finished) ranks:\s*$")
# (a one-rank "[2] started BROADCAST" reaches us as "started BROADCAST" of rank 2: the reader
# takes "[2] " for the line's rank prefix)
SNAPSHOT_RANKS = re.compile(r"^\s*(?:\[(?P<ranks>[\d, ]+)\] )?(?:started|finished) (?P<op>\w+)"
                            r"\s*$")
SLACK_S = 1.0
# Point-to-point ops (ProcessGroupNCCL opTypeToString): the two ends of a transfer print
# different ops, and torch >= 2.4 numbers them apart from collectives (seqP2P_).
P2P_OPS = frozenset({"SEND", "RECV", "RECVANYSOURCE", "COALESCED"})


@dataclass(frozen=True)
class Wait:
    """One rank's report that it timed out waiting in a collective."""

    record: Record
    pg: str  # "" when the line names no process group
    seq: int | None
    op: str  # "" when the line names none (the watchdog summary)
    numel: str
    ran_ms: int | None


@dataclass(frozen=True)
class Idle:
    """A rank's counters when it heard that another rank timed out."""

    record: Record
    pg: str
    enqueued: int
    pending: bool  # enqueued work not yet completed: it was in a collective itself


def process_group(text: str) -> str:
    m = PG_PREFIX.search(text)
    return m["pg"] if m else ""


def waits(records: Sequence[Record]) -> list[Wait]:
    out = []
    for r in records:
        if m := WAIT.search(r.text):
            out.append(Wait(r, process_group(r.text), int(m["seq"]) if m["seq"] else None, m["op"],
                            m["numel"] or "", int(m["ran"]) if m["ran"] else None))
        elif m := SUMMARY.search(r.text):
            out.append(Wait(r, process_group(r.text), int(m["seq"]), "", "", None))
    return out


def idle(records: Sequence[Record]) -> list[Idle]:
    return [Idle(r, process_group(r.text), int(m["enq"]), m["enq"] != m["done"]) for r in records
            if (m := IDLE.search(r.text)) and r.rank is not None]


def summary_desync(found: Sequence[Wait]) -> dict[int, int] | None:
    """rank -> sequence number when ranks of one named process group time out at different
    sequence numbers (the summary lines, which name their group): they ran different
    collectives. None when they agree."""
    # A summary names no op: the rank's own watchdog line at that number says whether it was
    # point-to-point work, which torch >= 2.4 numbers apart from collectives (see watchdog.py)
    p2p = {(w.record.rank, w.seq) for w in found if w.op in P2P_OPS}
    by_pg: dict[str, dict[int, int]] = {}
    for w in found:
        if (w.pg and w.seq is not None and w.record.rank is not None
                and w.op not in P2P_OPS and (w.record.rank, w.seq) not in p2p):
            seqs = by_pg.setdefault(w.pg, {})  # a rank's first: it may log several (< 1.13)
            seqs[w.record.rank] = min(seqs.get(w.record.rank, w.seq), w.seq)
    return next((seqs for seqs in by_pg.values() if len(set(seqs.values())) > 1), None)


def grouped(found: Sequence[Wait]) -> list[Wait]:
    """The waits, each watchdog line that names no process group given the group of its
    rank's other lines at the same sequence number: torch >= 2.4 prints "[Rank R] Watchdog
    caught ..." bare, then its summary as "[PG 0 (default_pg) Rank R] ..." and the watchdog
    thread's exception as "[PG ID 0 ... Rank R] Process group watchdog thread terminated with
    exception: [Rank R] Watchdog caught ...". A line whose rank left no such line, or lines of
    two groups at that number, keeps "" (unknown)."""
    named: dict[tuple[int, int], set[str]] = {}
    for w in found:
        if w.pg and w.seq is not None and w.record.rank is not None:
            named.setdefault((w.record.rank, w.seq), set()).add(w.pg)
    out = []
    for w in found:
        if w.op and not w.pg and w.seq is not None and w.record.rank is not None and len(
                pgs := named.get((w.record.rank, w.seq), set())) == 1:
            w = replace(w, pg=next(iter(pgs)))
        out.append(w)
    return out


def across_groups(found: Sequence[Wait]) -> dict[str, set[int]] | None:
    """process group -> sequence numbers, when the watchdog lines differ in sequence number,
    op or element count only between lines that (by their own prefix or their rank's other
    lines) belong to different process groups: sequence numbers count per group, so that is
    no desync or size mismatch. None when lines of one group differ, a line's group is
    unknown, or all agree."""
    lines = [w for w in grouped(found) if w.op and w.seq is not None]
    by_pg: dict[str, set[tuple[int, str, str]]] = {}
    for w in lines:
        by_pg.setdefault(w.pg, set()).add((w.seq or 0, w.op, w.numel))
    if "" in by_pg or len(set().union(*by_pg.values())) < 2 or any(
            len(keys) > 1 for keys in by_pg.values()):
        return None
    return {pg: {seq for seq, _, _ in keys} for pg, keys in sorted(by_pg.items())}


def snapshot_desync(records: Sequence[Record]) -> tuple[int, dict[str, str]] | None:
    """(sequence number, op -> ranks) when torch's desync snapshot shows two ops at one
    sequence number; None otherwise."""
    seq: dict[str, int] = {}  # per source: the snapshot header in force
    ops: dict[int, dict[str, str]] = {}
    for r in records:
        if m := SNAPSHOT_SEQ.match(r.text):
            seq[r.source] = int(m["seq"])
        # (a SEND and its peer's RECV are one transfer, not two ops)
        elif ((m := SNAPSHOT_RANKS.match(r.text)) and r.source in seq
              and m["op"] not in P2P_OPS and (m["ranks"] or r.rank is not None)):
            ops.setdefault(seq[r.source], {})[m["op"]] = m["ranks"] or str(r.rank)
    return next(((n, o) for n, o in sorted(ops.items()) if len(o) > 1), None)


def never_joined(found: Sequence[Wait], idles: Sequence[Idle]) -> tuple[list[int], int | None]:
    """The ranks that had nothing pending below the sequence number the others waited in
    (or, when no wait line is in the log, while another rank timed out), and that number."""
    waiting = {w.record.rank for w in found}
    # A P2P wait is a transfer between two ranks: the others are idle by design (pipeline
    # stages), and its number counts P2P work (seqP2P_, torch >= 2.4), not the collectives
    # the idle ranks' counters report (audit, stop 27).
    p2p = {(w.record.rank, w.seq) for w in found if w.op in P2P_OPS}
    colls = [w for w in found if w.op not in P2P_OPS and (w.record.rank, w.seq) not in p2p]
    if found and not colls:
        return [], None
    seqs = [w.seq for w in colls if w.seq is not None]
    target = min(seqs) if seqs else None
    pending = {i.record.rank for i in idles if i.pending}  # in a collective of its own
    pgs = {w.pg for w in found if w.pg}
    ranks = sorted({i.record.rank for i in idles if i.record.rank not in waiting | pending
                    and (target is None or (i.enqueued < target
                                            and (not pgs or i.pg in pgs)))})
    return [r for r in ranks if r is not None], target


def busy_line(found: Sequence[Wait], records: Sequence[Record]) -> Record | None:
    """A line of a rank that did not time out, printed while the others waited: stamped
    inside the wait, or a progress bar after the first timeout in one stream. (An unstamped
    print() placed after the timeouts proves nothing: stdout to a file or pipe is
    block-buffered and flushed at exit; tqdm writes stderr, flushed at every update.)"""
    waiting = {w.record.rank for w in found}
    if not found or None in waiting:
        return None
    first: dict[str, int] = {}  # per stream: the line of its first timeout
    for w in found:
        first[w.record.source] = min(first.get(w.record.source, w.record.lineno),
                                     w.record.lineno)
    starts = [w.record.time - w.ran_ms / 1000 for w in found
              if w.record.time is not None and w.ran_ms is not None]
    start = min(starts) if starts else None
    for r in records:
        if r.rank in waiting or WAIT.search(r.text):
            continue
        bar = PROGRESS.search(r.text)
        if r.rank is None and (0 in waiting or not bar):
            continue  # a progress bar names no rank: rank 0's, in the usual trainers
        if r.time is not None and start is not None:
            if r.time > start + SLACK_S and not NOT_WORK.search(r.text):
                return r
        elif bar and r.lineno > first.get(r.source, r.lineno):
            return r
    return None


def last_lines(found: Sequence[Wait], records: Sequence[Record],
               window: int) -> list[Record]:
    """The last line of each rank that did not time out (by its prefix), when every rank
    that did is known: what that rank was doing when it fell silent. In the timeouts' own
    stream it must be near them (``window`` lines), not a line of the job's start."""
    waiting = {w.record.rank for w in found}
    if not found or None in waiting:
        return []
    near: dict[str, int] = {}  # per stream: the line of its first timeout
    for w in found:
        near[w.record.source] = min(near.get(w.record.source, w.record.lineno),
                                    w.record.lineno)
    last: dict[int, Record] = {}
    for r in records:
        if r.rank is not None and r.rank not in waiting and r.text.strip():
            last[r.rank] = r
    return [r for _, r in sorted(last.items())
            if r.source not in near or r.lineno >= near[r.source] - window]


def zero_first(records: Sequence[Record]) -> Record | None:
    """A traceback frame of a block that rank 0 runs first while the others wait."""
    return next((r for r in records if ZERO_FIRST.search(r.text)), None)
