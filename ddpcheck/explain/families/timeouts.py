"""A collective timeout's cause, from the structure ``waiters`` reads across ranks.

Runs wherever ``ddpcheck explain`` runs. ``refine`` (called by the engine as
``watchdog.refine``) turns the watchdog family's ``collective-timeout`` into a cause only on
evidence that tells the causes apart, in this order: torch's own per-rank counters (the
watchdog's summaries at different sequence numbers, or the desync report's snapshot: a desync;
ranks with nothing pending when the timeout was signalled: never joined), then rank 0 alone
timing out just after its framework said training had ended (``phases``: a collective only rank
0 calls, a desync), then a rank busy alone (its work just before the first timeout, its last
line a step of its own under way, a rank-0-first block in a traceback, a rank still printing
while the others waited). Anything else stays a symptom and explain abstains. A desync or size
mismatch that ``watchdog.combine`` read from watchdog lines naming no process group is first
withdrawn when the ranks' other lines put those lines in different groups.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.diagnoses import Problem
from ddpcheck.explain.causality import HINT, Explained
from ddpcheck.explain.codes import (
    COLLECTIVE_DESYNC,
    COLLECTIVE_SIZE_MISMATCH,
    COLLECTIVE_TIMEOUT,
    RANK_NEVER_JOINED,
    RANK_ZERO_ONLY_STEP_TIMEOUT,
)
from ddpcheck.explain.families import phases, waiters
from ddpcheck.explain.reader import Record
from ddpcheck.ranges import format_ranks

MISMATCHES = {COLLECTIVE_DESYNC.code, COLLECTIVE_SIZE_MISMATCH.code}
ALONE = ("one rank was busy with a step of its own (dataset preprocessing or tokenisation, "
         "evaluation, saving) while the others waited in {what}")

# Work one rank does alone while the others wait (HF datasets / transformers progress and
# log lines: tokenising, map/filter, downloading, evaluation, saving a checkpoint).
# transformers Trainer ("***** Running Evaluation *****", "***** Running Prediction *****",
# "Saving model checkpoint to"), Lightning's progress bars ("Validation DataLoader 0:",
# "Testing DataLoader 0:", "Sanity Checking"), datasets ("Map (num_proc=8):", "Loading
# cached processed dataset", "Generating train split", "Running tokenizer on dataset"),
# faiss k-means (faiss/Clustering.cpp, verbose: "Clustering %ld points in %zdD to %zd
# clusters, redo %d times, %d iterations"), the one-rank step of an index build (ColBERT's
# and other retrievers' IVF centroids).
SOLO_STEP = re.compile(
    r"(?i)Running tokenizer|\bTokeniz(?:ing|e) |^\s*(?:Map|Filter)(?: \(num_proc=\d+\))?:\s+\d+%|"
    r"Generating \w+ split|Grouping texts|\bDownloading\b|\bEvaluat(?:ing|ion)\b|"
    r"\bSaving (?:model )?checkpoint|save_pretrained|Running (?:Evaluation|Prediction)|"
    r"(?:Validation|Testing|Predicting) DataLoader \d+:|Sanity Checking|"
    r"\bValidat(?:ing|ion)\b.*\d+%|Loading cached processed dataset|"
    r"\bClustering \d+ points in \d+D to \d+ clusters\b")


# A line about creating a process group (dist.new_group, a subgroup) is no step a rank runs
# alone but a collective of the whole default group (torch/distributed/distributed_c10d.py
# new_group: "requires that all processes in the main group ... enter this function, even if
# they are not going to be members of the group"; its _store_based_barrier waits for every
# rank): a rank last seen there while the others wait in a collective ran a different one
# (runs/s30b-subgroup-some-ranks: "creating the evaluation subgroup").
GROUP_SETUP = re.compile(r"(?i)\bnew_group\b|\bsub-?groups?\b|\bprocess groups?\b")


def solo_step(text: str) -> bool:
    """A step a rank runs alone (SOLO_STEP), unless the line is a process group's creation."""
    return bool(SOLO_STEP.search(text)) and not GROUP_SETUP.search(text)


HINT_WINDOW = 20  # records before the first timeout line that may show the solo work
DONE = re.compile(r"\b100%|\b(?:[Dd]one|[Ff]inished|[Cc]omplete[d]?|[Ss]aved|[Rr]esults?)\b")


def refine(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """A plain timeout gets its cause when the structure of the ranks' lines shows it
    (``waiters``): ranks of one group timing out at different sequence numbers (a desync),
    ranks that had nothing pending while the others waited (never joined), or a rank busy
    alone: its work shortly before the first timeout, a rank-0-first block in a traceback,
    or a rank that went on printing while the others waited."""
    seen = waiters.waits(records)
    found = _regroup(_lagging_report(_early_is_a_hint(found), records), seen)
    timeouts = [e for e in found if e.problem.code == COLLECTIVE_TIMEOUT.code]
    if not timeouts:
        return found
    decided = _joined_busy(_structure(seen, records), records)
    # Rank 0 alone waiting after its training loop ended reads from one rank's lines: another
    # rank that failed after training (its error not in the log) prints the same on rank 0,
    # so it is a hint, which a Root Cause block naming another rank outranks (audit, stop 27).
    after = None if decided else _after_training(timeouts, records)
    decided = decided or after or _busy(timeouts, seen, records)
    if decided is None:
        return found
    problem, rec = decided
    graded = {"root": True, "grade": HINT} if after else {}
    out = []
    for e in found:
        if e in timeouts:
            p = e.problem
            e = replace(e, problem=replace(problem, observed=f"{p.observed} | {problem.observed}",
                                           ranks=problem.ranks or p.ranks, hosts=p.hosts),
                        evidence=(*e.evidence, f"{rec.source}:{rec.lineno}"), **graded)
        out.append(e)
    return out


# TraceUtils.h analyzeLaggingRanks (TORCH_NCCL_DESYNC_DEBUG, 2.0 onwards): under "the
# lagging/dead/mismatched ranks that caused the desync are:", the ranks whose last event is
# the start of collective #N ("[47] joined but didn't finish collective #N (count from 1)") and
# those whose last is its end ("[0, 1] finished collective #N, but didn't join collective
# #N+1"). With no rank inside #N the finished ones are behind the rest, who wait in #N+1: they
# never joined it. With ranks still inside #N that the others finished, it shows a collective
# that hung on those ranks (a GPU or link of theirs) or ranks that called it differently: not
# a rank that never came.
JOINED_UNFINISHED = re.compile(r"joined but didn't finish collective #(?P<seq>\d+)")
FINISHED_NOT_JOINED = re.compile(r"finished collective #(?P<seq>\d+), but didn't join collective #")


def _lagging_report(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """``rank-never-joined`` read from the report's "finished #N, but didn't join" line goes
    back to a timeout when the same report shows ranks inside #N (see JOINED_UNFINISHED)."""
    inside = {m["seq"] for r in records if (m := JOINED_UNFINISHED.search(r.text))}
    if not inside:
        return found
    out = []
    for e in found:
        m = FINISHED_NOT_JOINED.search(e.first.text)
        if e.problem.code == RANK_NEVER_JOINED.code and m and m["seq"] in inside:
            p = e.problem
            e = replace(e, root=False, problem=COLLECTIVE_TIMEOUT.problem(
                p.observed, cause=f"torch's desync report shows ranks still inside collective "
                f"#{m['seq']} that other ranks had finished: the collective hung on those ranks "
                "(their GPU or link) or the ranks called it differently; no rank is shown "
                "missing", ranks=p.ranks, hosts=p.hosts))
        out.append(e)
    return out


def _early_is_a_hint(found: list[Explained]) -> list[Explained]:
    """The watchdog's own reading of a timeout at ``SeqNum=2`` (``watchdog.EARLY_SEQ``: all
    met in #1, one did not reach #2) is a hint, not a cause: torch prints the same line when
    the missing rank crashed, exited or called another collective after #1 (checkTimeout
    says only which work timed out), so a cause-grade line, an earlier failure line or a Root
    Cause block naming another rank comes first (audit, stop 27; it was root=False, which only
    an unexplained exception could outrank)."""
    return [replace(e, root=True, grade=HINT)
            if e.problem.code == RANK_ZERO_ONLY_STEP_TIMEOUT.code and not e.root
            and waiters.WAIT.search(e.first.text) else e for e in found]


def _regroup(found: list[Explained], seen: Sequence[waiters.Wait]) -> list[Explained]:
    """A desync or size mismatch read from watchdog lines that name no process group
    (``watchdog.combine`` has only the lines) goes back to a plain timeout when their ranks'
    other lines put the differing lines in different groups, whose sequence numbers count
    apart (an FSDP or tensor-parallel job times out in one group on one rank and another on
    the next)."""
    split = waiters.across_groups(seen)
    if split is None:
        return found
    said = "; ".join(f"process group {pg} at #{', #'.join(map(str, sorted(seqs)))}"
                     for pg, seqs in split.items())
    out = []
    for e in found:
        if e.problem.code in MISMATCHES and (
                waiters.WAIT.search(e.first.text) or waiters.SUMMARY.search(e.first.text)):
            p = e.problem
            e = replace(e, problem=COLLECTIVE_TIMEOUT.problem(
                f"{p.observed} | {said}", cause=f"the ranks timed out in different process "
                f"groups ({said}), each at one collective: sequence numbers count per group, "
                "so this is no sign of a desync; a rank that did not reach them (look for its "
                "error above) or a stalled link", ranks=p.ranks, hosts=p.hosts))
        out.append(e)
    return out


def _structure(seen: Sequence[waiters.Wait],
               records: Sequence[Record]) -> tuple[Problem, Record] | None:
    """Desync or never-joined, from torch's own per-rank counters."""
    if split := waiters.summary_desync(seen):
        said = ", ".join(f"rank {r} at #{s}" for r, s in sorted(split.items()))
        rec = next(w.record for w in seen if w.record.rank == max(split, key=split.get))
        return COLLECTIVE_DESYNC.problem(
            f"the watchdog's summaries: {said}", cause=f"ranks of one process group timed out "
            f"at different collectives ({said}): a rank skipped, added or reordered one",
            ranks=tuple(sorted(split))), rec
    if snap := waiters.snapshot_desync(records):
        seq, ops = snap
        said = "; ".join(f"rank {ranks} ran {op}" for op, ranks in ops.items())
        rec = next(r for r in records if waiters.SNAPSHOT_RANKS.match(r.text))
        return COLLECTIVE_DESYNC.problem(
            f"torch's desync report, collective #{seq}: {said}", cause=f"as collective #{seq}, "
            f"{said}: a rank skipped, added or reordered one"), rec
    idles = waiters.idle(records)
    ranks, seq = waiters.never_joined(seen, idles)
    if not ranks:
        return None
    rec = next(i.record for i in idles if i.record.rank == ranks[0])
    what = f"collective #{seq}" if seq is not None else "the collective another rank timed out in"
    return RANK_NEVER_JOINED.problem(
        f"rank {format_ranks(ranks)} had no collective pending (last enqueued NCCL work = last "
        f"completed) when the timeout was signalled: {rec.text.strip()[:200]}",
        cause=f"rank {format_ranks(ranks)} never joined {what}: busy elsewhere (a step of its "
              "own), gone from the loop (uneven data), or the waiting rank called a collective "
              "the others never call", ranks=tuple(ranks)), rec


def _joined_busy(decided: tuple[Problem, Record] | None,
                 records: Sequence[Record]) -> tuple[Problem, Record] | None:
    """A single rank that never joined (its counters idle when the dump signal came) whose
    own last line is a step of its own under way: it never joined *because* it was busy with
    that step, the more specific cause (audit, stop 27: the counters say who, its last line
    says why; without that line it stays ``rank-never-joined``, busy, stuck or gone)."""
    if decided is None or decided[0].code != RANK_NEVER_JOINED.code or len(
            decided[0].ranks) != 1:
        return decided
    (rank,) = decided[0].ranks
    own = [r for r in records if r.rank == rank and r.text.strip()
           and not waiters.NOT_WORK.search(r.text)]
    last = max(own, key=lambda r: r.order, default=None)
    if last is None or not solo_step(last.text) or DONE.search(last.text):
        return decided
    step = f"{last.source}:{last.lineno}: {last.text.strip()[:160]}"
    return RANK_ZERO_ONLY_STEP_TIMEOUT.problem(
        f"{decided[0].observed} | rank {rank}'s last line: {step}",
        cause=ALONE.format(what="the collective that timed out") + f" (rank {rank} had no "
        f"collective pending when the timeout was signalled, and its last line is a step of "
        f"its own under way: {step})", ranks=(rank,)), last


def _after_training(timeouts: Sequence[Explained],
                    records: Sequence[Record]) -> tuple[Problem, Record] | None:
    """Rank 0 alone timed out just after its framework said training had ended (``phases``):
    the others had ended it too and did not call that collective."""
    first = min((e.first for e in timeouts), key=lambda r: r.order)
    ended = phases.ended_alone(first, records)
    if ended is None:
        return None
    line = f"{ended.source}:{ended.lineno}: {ended.text.strip()[:160]}"
    return COLLECTIVE_DESYNC.problem(
        f"rank 0 alone timed out after training had ended ({line})",
        cause="rank 0 alone waited in a collective after its training loop had ended: every "
              "rank runs the same epochs or steps, so the others had ended training too and "
              "never called it, a collective only rank 0 calls (save_checkpoint, test or a "
              "barrier inside `if trainer.is_global_zero` / `if rank == 0`)", ranks=(0,)), ended


def _busy(timeouts: Sequence[Explained], seen: Sequence[waiters.Wait],
          records: Sequence[Record]) -> tuple[Problem, Record] | None:
    """A rank busy alone: its work just before the wait, a rank-0-first block, or a rank
    still printing while the others waited."""
    # The work must be what the job was doing when the wait began: a line shortly before the
    # first timeout, not an evaluation that ran (and ended) epochs earlier.
    # (Lines of one file compare by line number: progress bars carry no timestamp.)
    firsts = [e.first for e in timeouts]
    # A rank that timed out in the collective had reached it (the watchdog checks only the
    # work its own rank enqueued: ProcessGroupNCCL checkTimeout; gloo's timeout is the caller's
    # own wait), so the step it printed before had ended there: its step is not what held the
    # others (audit, stop 27). An unprefixed line is rank 0's (a progress bar, a trainer's log).
    waited = {r for e in timeouts for r in e.problem.ranks}
    hint = next((r for r in reversed(records) if any(
        r.source == f.source and 0 < f.lineno - r.lineno <= HINT_WINDOW for f in firsts)
        and solo_step(r.text)
        and (0 if r.rank is None else r.rank) not in waited), None)
    if hint is not None and DONE.search(hint.text):
        hint = None  # the step had ended (100%, saved, done): not what the others waited for
    if hint is not None:  # rank: the busy rank, where the line names it
        why, rank = "meanwhile", hint.rank
    elif (hint := waiters.zero_first(records)) is not None:
        why, rank = "a block rank 0 runs first while the others wait in a barrier", 0
    elif (hint := next((r for r in waiters.last_lines(seen, records, HINT_WINDOW)
                        if solo_step(r.text) and not DONE.search(r.text)),
                       None)) is not None:
        why, rank = f"rank {hint.rank}'s last line, a step of its own under way", hint.rank
    elif (hint := waiters.busy_line(seen, records)) is not None:
        who = f"rank {hint.rank}" if hint.rank is not None else "a rank that did not time out"
        why, rank = f"{who} still printing while the others waited", hint.rank
    else:
        return None
    busy = f"{hint.source}:{hint.lineno}: {hint.text.strip()[:160]}"
    # where the cause is: the busy rank, when it was not waiting (otherwise the waiters stay
    # named, as refine() gives them)
    waiting = {w.record.rank for w in seen}
    return RANK_ZERO_ONLY_STEP_TIMEOUT.problem(
        f"{why}: {busy}", cause=ALONE.format(what="the collective that timed out") +
        f" ({why}: {busy})",
        ranks=(rank,) if rank is not None and rank not in waiting else ()), hint
