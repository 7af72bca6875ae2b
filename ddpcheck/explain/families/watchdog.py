"""The ProcessGroupNCCL watchdog: collective timeouts, compared across ranks for desync.

Message from torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (``WorkNCCL::checkTimeout``):
"[Rank R] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=S, OpType=OP, ...)
ran for T milliseconds before timing out." Every rank that waits prints it; ranks stuck at
different sequence numbers or op types were not running the same collective (desync).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.diagnoses import Problem
from ddpcheck.explain.causality import Explained
from ddpcheck.explain.codes import (
    COLLECTIVE_DESYNC,
    COLLECTIVE_SIZE_MISMATCH,
    COLLECTIVE_TIMEOUT,
    RANK_NEVER_JOINED,
    RANK_ZERO_ONLY_STEP_TIMEOUT,
    UNEXPLAINED,
)
from ddpcheck.explain.matching import Hit, observed_lines, pattern, where
from ddpcheck.explain.reader import Record
from ddpcheck.ranges import format_ranks

NEXT = "ddpcheck run --nodes N --stages collectives,bandwidth (the links between the nodes)"


# NCCL has no barrier kernel: ProcessGroupNCCL::barrier all-reduces one element, so a
# watchdog line "OpType=ALLREDUCE, NumelIn=1, NumelOut=1" is a barrier (or a scalar flag);
# all_gather_object / broadcast_object_list first exchange one-element sizes (NumelIn=1):
# every one-element collective is a sync point, not training traffic.
BARRIER_LIKE = {"BARRIER"}
EARLY_SEQ = 2  # the first collectives after init (DDP's parameter broadcast, a barrier)
ALONE = ("one rank was busy with a step of its own (dataset preprocessing or tokenisation, "
         "evaluation, saving) while the others waited in {what}")


def _rank_zero_step(ops: dict[tuple[str, str, str], set[int]]) -> str:
    """Why this timeout is a rank busy alone, or "" when the lines do not show it."""
    ((seq, op, numel), ranks), = ops.items()
    # When rank 0 itself waits there with the others, the log shows no rank busy alone: the
    # one missing is not in the log, or none is and the ranks could not connect (a P2P or
    # network hang stops the first barrier or broadcast the same way).
    if 0 in ranks and len(ranks) > 1:
        return ""
    if op in BARRIER_LIKE or numel == "1":
        return ALONE.format(what=f"a barrier (#{seq} {op} of {numel or '?'} element)")
    # The first collectives (DDP's broadcast from rank 0) wait for rank 0 when it is busy.
    if seq.isdigit() and int(seq) <= EARLY_SEQ:
        return ALONE.format(what=f"the job's first collectives (#{seq} {op})")
    return ""


def combine(hits: Sequence[Hit]) -> Problem:
    """One problem over every rank's timeout; desync when ranks wait on different work."""
    ops: dict[tuple[str, str, str], set[int]] = {}
    groups: dict[str, set[tuple[str, str]]] = {}  # per process group: (seq, op) seen
    for h in hits:
        g = h.match.groupdict()
        key = (g.get("seq") or "?", g.get("op") or "?", g.get("numel") or "")
        ops.setdefault(key, set()).add(h.record.rank if h.record.rank is not None else -1)
        if key[1] != "?":  # a line that names no op (a bare watchdog line) compares to none
            groups.setdefault(_pg(h.record.text), set()).add(key[:2])
    if len(ops) > 1 and any(op != "?" for _, op, _ in ops):
        ops = {k: v for k, v in ops.items() if k[1] != "?"}
    summary = "; ".join(
        f"SeqNum={s} {op}{f' NumelIn={n}' if n else ''} on rank "
        f"{format_ranks(sorted(r for r in rs if r >= 0)) or '?'}"
        for (s, op, n), rs in sorted(ops.items(), key=lambda kv: (len(kv[0][0]), kv[0][0])))
    observed = f"{summary} | {observed_lines(hits)}"
    # Sequence numbers count per process group: ranks differ only within one group.
    if any(len(seen) > 1 for seen in groups.values()):
        return COLLECTIVE_DESYNC.problem(observed, **where(hits))
    if len(ops) == 1 and (alone := _rank_zero_step(ops)):
        return RANK_ZERO_ONLY_STEP_TIMEOUT.problem(observed, cause=alone, **where(hits))
    (seq, op, _), *_ = ops
    return COLLECTIVE_TIMEOUT.problem(
        observed, cause=f"every rank that reported was still waiting in {op} #{seq}: a rank "
        "that did not reach it (stopped, crashed or slow: look for its error above) or a "
        "stalled link between nodes", **where(hits))


# ProcessGroupNCCL's log prefix names the process group (torch >= 2.4 "[PG 0 (default_pg)
# Rank 1]", >= 2.5 "[PG ID 0 PG GUID 0(default_pg) Rank 1]"); older lines name none.
PG_PREFIX = re.compile(r"\[PG (?:ID )?(?P<pg>\d+)[^\]]*Rank \d+\]")


def _pg(text: str) -> str:
    m = PG_PREFIX.search(text)
    return m["pg"] if m else ""


# Work one rank does alone while the others wait (HF datasets / transformers progress and
# log lines: tokenising, map/filter, downloading, evaluation, saving a checkpoint).
# transformers Trainer ("***** Running Evaluation *****", "***** Running Prediction *****",
# "Saving model checkpoint to"), Lightning's progress bars ("Validation DataLoader 0:",
# "Testing DataLoader 0:", "Sanity Checking"), datasets ("Map (num_proc=8):", "Loading
# cached processed dataset", "Generating train split", "Running tokenizer on dataset").
SOLO_STEP = re.compile(
    r"(?i)Running tokenizer|\bTokeniz(?:ing|e) |^\s*(?:Map|Filter)(?: \(num_proc=\d+\))?:\s+\d+%|"
    r"Generating \w+ split|Grouping texts|\bDownloading\b|\bEvaluat(?:ing|ion)\b|"
    r"\bSaving (?:model )?checkpoint|save_pretrained|Running (?:Evaluation|Prediction)|"
    r"(?:Validation|Testing|Predicting) DataLoader \d+:|Sanity Checking|"
    r"\bValidat(?:ing|ion)\b.*\d+%|Loading cached processed dataset")


HINT_WINDOW = 20  # records before the first timeout line that may show the solo work


# What a rank that failed prints (its own error would be the cause, not a busy step).
RANK_FAILED = re.compile(r"Error\b|Exception|Traceback|Killed|fault|[Aa]bort|exitcode|"
                         r"Watchdog|timed? ?out", re.IGNORECASE)


def _rank_zero_elsewhere(e: Explained, records: Sequence[Record]) -> Explained:
    """Every rank that timed out was waiting on rank 0, whose own lines are in the log and
    show neither a timeout nor an error: rank 0 was not in the collective, it was busy.
    (The watchdog runs on every rank: a rank 0 that waited would print the line too.)"""
    p = e.problem
    if not p.ranks or 0 in p.ranks:
        return e
    zero = [r for r in records if r.rank == 0]
    if not zero or any(RANK_FAILED.search(r.text) for r in zero):
        return e
    return replace(e, problem=RANK_ZERO_ONLY_STEP_TIMEOUT.problem(
        f"{p.observed} | rank 0 printed {len(zero)} line(s) and no timeout or error",
        cause=ALONE.format(what="the collective that timed out") + ": rank 0's own lines "
              "show it was not waiting in the collective", ranks=p.ranks, hosts=p.hosts))


def refine(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """A plain timeout becomes a rank busy alone when the log shows that work under way."""
    timeouts = [e for e in found if e.problem.code == COLLECTIVE_TIMEOUT.code]
    if not timeouts:
        return found
    # The work must be what the job was doing when the wait began: a line shortly before the
    # first timeout, not an evaluation that ran (and ended) epochs earlier.
    # (Lines of one file compare by line number: progress bars carry no timestamp.)
    firsts = [e.first for e in timeouts]
    hint = next((r for r in reversed(records) if SOLO_STEP.search(r.text) and any(
        r.source == f.source and 0 < f.lineno - r.lineno <= HINT_WINDOW for f in firsts)), None)
    if hint is None:
        return [_rank_zero_elsewhere(e, records) if e in timeouts else e for e in found]
    out = []
    for e in found:
        if e in timeouts:
            p = e.problem
            busy = f"{hint.source}:{hint.lineno}: {hint.text.strip()[:160]}"
            e = replace(e, problem=RANK_ZERO_ONLY_STEP_TIMEOUT.problem(
                f"{p.observed} | meanwhile: {busy}",
                cause=ALONE.format(what="the collective that timed out") + f" ({busy})",
                ranks=p.ranks, hosts=p.hosts),
                evidence=(*e.evidence, f"{hint.source}:{hint.lineno}"))
        out.append(e)
    return out


def combine_fingerprints(hits: Sequence[Hit]) -> Problem:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL's check (ProcessGroupWrapper.cpp): op type or shapes.

    torch >= 1.11 names both ranks on one line; torch 1.10 prints each rank's own fingerprint
    only, so its lines are compared across ranks: one op on two or more ranks is a shape or
    dtype mismatch, different ops a desync, and one rank's line alone cannot tell which."""
    paired = [h for h in hits if h.match["op_b"]]
    if not paired:
        return _own_fingerprints(hits)
    g = paired[0].match.groupdict()
    observed = observed_lines(hits)
    # Each rank's own fingerprint is exact; the peer's, decoded from the buffer the check
    # exchanged, is not when the shapes differ (torch 2.13 gloo, bench/explain_real_runs.py
    # mismatch-size-detail: "but Rank 1 is running collective: CollectiveFingerPrint(
    # SequenceNumber=0OpType=GATHER)" on both ranks of an ALLREDUCE #8 of two sizes). Two or
    # more ranks whose own fingerprints agree on the op and sequence number ran one collective.
    own = {h.match["a"]: (h.match["seq_a"] or "", h.match["op_a"]) for h in paired}
    if len(own) > 1 and len(set(own.values())) == 1:
        return _own_fingerprints(hits)
    if g["op_a"] != g["op_b"] or (g["seq_a"] or "") != (g["seq_b"] or ""):
        return COLLECTIVE_DESYNC.problem(
            observed, cause=f"rank {g['a']} ran {g['op_a']} #{g['seq_a'] or '?'} while rank "
            f"{g['b']} ran {g['op_b']} #{g['seq_b'] or '?'} as the same collective: a rank "
            "skipped, added or reordered one", **where(hits))
    return COLLECTIVE_SIZE_MISMATCH.problem(observed, **where(hits))


def _own_fingerprints(hits: Sequence[Hit]) -> Problem:
    ops = {h.match["a"]: h.match["op_a"] for h in hits}
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
    # ProcessGroupWrapper.cpp (TORCH_DISTRIBUTED_DEBUG=DETAIL): torch 1.10's "Rank 0 is running
    # inconsistent collective: CollectiveFingerPrint(OpType=ALLREDUCE, TensorShape=[8], ...)"
    # names one rank only (combine_fingerprints compares the ranks' lines); torch >= 1.11
    # "Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=3, OpType=..., ...),
    # but Rank 1 is
    # running collective: CollectiveFingerPrint(...).Collectives differ in the following
    # aspects: \t Sequence number: 3vs 4  Op type: ALLREDUCEvs BROADCAST"; some builds print
    # the fields unseparated ("CollectiveFingerPrint(SequenceNumber=1649OpType=BARRIER)").
    pattern(COLLECTIVE_DESYNC,
            r"Detected mismatch between collectives on ranks\. Rank (?P<a>\d+) is running "
            r"(?:inconsistent )?collective: CollectiveFingerPrint\("
            r"(?:SequenceNumber=(?P<seq_a>\d+),? ?)?OpType=(?P<op_a>\w+)"
            r"(?:.*?but Rank (?P<b>\d+) is running collective: CollectiveFingerPrint\("
            r"(?:SequenceNumber=(?P<seq_b>\d+),? ?)?OpType=(?P<op_b>\w+))?"
            r"(?P<differ>.*Collectives differ in the following aspects:.*)?", NEXT,
            combine=combine_fingerprints),
    # ProcessGroupGloo::monitoredBarrier names the ranks that did not arrive.
    pattern(RANK_NEVER_JOINED,
            r"Ranks? (?P<ranks>[\d, ]+) failed to pass monitoredBarrier in (?P<ms>\d+) ms",
            NEXT, cause="rank {ranks} did not reach the monitored barrier within {ms} ms: "
            "they were busy elsewhere (a long step of their own), stuck, or dead"),
    # TORCH_NCCL_DESYNC_DEBUG's report (torch/csrc/distributed/c10d/TraceUtils.h
    # analyzeMissingRanks / analyzeLaggingRanks, torch 2.0-2.3): "To our best knowledge,
    # ranks [1, 3] are the lagging ranks that caused this timeout. They never joined any
    # collectives", and "[0, 2] finished collective #5, but didn't join collective #6".
    # (a one-rank "[2] " at the start of a line is read as that line's rank prefix)
    *(pattern(RANK_NEVER_JOINED, rx, NEXT,
              cause="torch's desync report names the rank(s) that did not join the collective "
                    "the others waited in: busy elsewhere (a long step of their own), stuck, "
                    "or dead")
      for rx in (r"ranks \[[\d, ]+\] are the lagging ranks that caused this timeout",
                 r"(?:\[[\d, ]+\] )?finished collective #\d+, but didn't join collective #")),
    # NCCL's socket transport: a peer sent more bytes than this rank posted for the same
    # step, the mark of ranks running different collectives or sizes (NCCL troubleshooting).
    # gloo/transport/tcp/pair.cc GLOO_ENFORCE_LE(op.preamble.length, op.nbytes): a peer
    # sent more bytes than this rank's buffer for the same collective.
    pattern(COLLECTIVE_SIZE_MISMATCH, r"op\.preamble\.length <= op\.nbytes", NEXT,
            cause="a gloo peer sent a larger message than this rank posted for the same "
                  "collective: the ranks called it with different sizes (or different "
                  "collectives)"),
    pattern(COLLECTIVE_SIZE_MISMATCH,
            r"[Mm]essage truncated ?: receiv(?:ing|ed) \d+ bytes instead of \d+", NEXT,
            cause="a peer sent a message of another size than this rank expected: the ranks "
                  "ran different collectives, or the same one with different sizes"),
    # WorkNCCL's operator<< (ProcessGroupNCCL.cpp) across versions: torch 1.8-1.9
    # "WorkNCCL(OpType=ALLREDUCE, TensorShape=[...], Timeout(ms)=1800000)" (no SeqNum);
    # 1.10-2.1 "WorkNCCL(SeqNum=5, OpType=BROADCAST, Timeout(ms)=1800000)"; >= 2.2 adds
    # "NumelIn=1, NumelOut=1"; >= 2.4 prefixes "[PG 0 (default_pg) Rank 1]".
    pattern(COLLECTIVE_TIMEOUT,
            r"Watchdog caught collective operation timeout: WorkNCCL\("
            r"(?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)(?:, NumelIn=(?P<numel>\d+))?", NEXT,
            root=False, combine=combine),
    pattern(COLLECTIVE_TIMEOUT,
            r"Watchdog caught collective operation timeout|"
            # ProcessGroupNCCL >= 2.1: the watchdog's summary and its heartbeat monitor
            r"Timeout at NCCL work: \d+, last enqueued NCCL work|"
            r"Heartbeat monitor timed out! Process will be terminated", NEXT,
            root=False, combine=combine),
    # gloo's collectives (gloo/transport/tcp/unbound_buffer.cc): "Timed out waiting 1800000ms
    # for recv operation to complete", the gloo counterpart of the watchdog's line.
    pattern(COLLECTIVE_TIMEOUT,
            r"Timed out waiting (?P<ms>\d+)ms for (?:recv|send) operation to complete", NEXT,
            root=False, combine=combine),
    # The store's wait (torch/csrc/distributed/c10d/socket.cpp waitForInput): a rank waited
    # for a key its peers had not set, as in a store-based barrier; like a collective timeout
    # it names no cause (refine finds the rank busy alone when the log shows its work).
    pattern(COLLECTIVE_TIMEOUT,
            r"waitForInput: socket SocketImpl\(.*\) timed out after (?P<ms>\d+)ms", NEXT,
            root=False, combine=combine),
    # The store's own timeouts: TCPStore.cpp wait (torch 1.x "RuntimeError: Wait timeout",
    # >= 2.2 "DistStoreError: wait timeout after 600000ms, keys: /default_pg/0//cuda//0")
    # and a get that outlasted the store timeout ("DistStoreError: Socket Timeout"). Like
    # the watchdog's line, a rank waited for a key that another rank had not set.
    pattern(COLLECTIVE_TIMEOUT,
            r"(?:Error|Exception): (?:[Ww]ait timeout(?: after (?P<ms>\d+)ms)?|Socket Timeout)\b",
            NEXT, root=False, combine=combine),
    # ProcessGroupNCCL's first collective fetches rank 0's ncclUniqueId from the store: a
    # timeout there means rank 0 had not reached its first collective (busy alone).
    pattern(RANK_ZERO_ONLY_STEP_TIMEOUT,
            r"retrieving ncclUniqueId from \[0\] via c10d key-value store.*"
            # (torch >= 2.4: "... got error: wait timeout after 600000ms, keys: ...")
            r"(?:Socket Timeout|timed out|[Tt]imeout)", NEXT, root=False,
            cause="rank 0 had not reached its first NCCL collective when the others asked "
                  "for its ncclUniqueId: it was busy with a step of its own (dataset "
                  "preprocessing, loading) longer than the timeout"),
    # stop24 dev: the same message (ProcessGroupNCCL.cpp broadcastUniqueNCCLID: "... but
    # store->get('0') got error: " + e.what()) with the store's reason on a line of its own
    # or lost: the rank waited for rank 0's key, a symptom like a timeout; refine() names the
    # work rank 0 was doing when the log shows it.
    pattern(COLLECTIVE_TIMEOUT,
            r"retrieving ncclUniqueId from \[0\] via c10d key-value store by key '\d+', but "
            r"store->get\('\d+'\) got error:?\s*$", NEXT, root=False,
            cause="this rank waited for rank 0's ncclUniqueId in the store and the wait failed "
                  "(the reason is not on the line): rank 0 had not reached its first NCCL "
                  "collective (busy alone, or dead: look for its error)"),
]
