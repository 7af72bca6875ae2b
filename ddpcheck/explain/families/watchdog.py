"""The ProcessGroupNCCL watchdog: collective timeouts, compared across ranks for desync.

Message from torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (``WorkNCCL::checkTimeout``):
"[Rank R] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=S, OpType=OP, ...)
ran for T milliseconds before timing out." Every rank that waits prints it; ranks stuck at
different sequence numbers or op types were not running the same collective (desync). The
lines of one timeout are combined here; ``timeouts.refine`` (re-exported as ``refine``) then
names its cause from the structure across ranks that ``waiters`` reads, or leaves it a
symptom.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ddpcheck.diagnoses import Problem
from ddpcheck.explain.codes import (
    COLLECTIVE_DESYNC,
    COLLECTIVE_SIZE_MISMATCH,
    COLLECTIVE_TIMEOUT,
    RANK_NEVER_JOINED,
    RANK_ZERO_ONLY_STEP_TIMEOUT,
    UNEXPLAINED,
)
from ddpcheck.explain.families.timeouts import ALONE, refine  # noqa: F401 (engine)
from ddpcheck.explain.families.waiters import P2P_OPS, TIMED_OUT_WORK, process_group
from ddpcheck.explain.matching import Hit, observed_lines, pattern, where
from ddpcheck.ranges import format_ranks

NEXT = "ddpcheck run --nodes N --stages collectives,bandwidth (the links between the nodes)"


# NCCL has no barrier kernel: ProcessGroupNCCL::barrier all-reduces one element, so a
# watchdog line "OpType=ALLREDUCE, NumelIn=1, NumelOut=1" is a barrier or a scalar (a loss,
# an early-stopping flag); all_gather_object first exchanges one-element sizes. Ranks wait at
# such a sync point for a rank busy alone (evaluation, saving) just as they do for a rank
# that left the loop early (uneven data: pytorch#141069) or skipped it: one element alone
# does not tell which, so it names no cause (dev: 4 right, 1 confidently wrong).
BARRIER_LIKE = {"BARRIER"}
# The first collective of a group creates its NCCL communicator (ProcessGroupNCCL::collective
# bumps the sequence number, then getNCCLComm, then initWork: 1.10 to 2.5), and
# ncclCommInitRank returns only when every rank of the group has called it (NCCL docs,
# "Creating a communicator"). A WorkNCCL with SeqNum=1 therefore exists only once every rank
# had arrived: its timeout is a hang with all present (a link or transport, or different
# calls), not a rank busy alone. At SeqNum=2 all had met in the first collective and one did
# not reach the second: a set-up step of its own (dataset preprocessing under
# main_process_first, loading) between the two.
EARLY_SEQ = 2
FIRST = ("every rank that reported was waiting in #1 {op}, the first collective of its group: "
         "NCCL creates the communicator there and returns only when every rank has joined, so "
         "all had arrived and the collective itself hung (a link between GPUs or nodes: P2P, "
         "InfiniBand, sockets) or the ranks called it with different ops or sizes (unless the "
         "communicator was created eagerly, init_process_group(device_id=...))")
SYNC_POINT = ("every rank that reported was waiting in #{seq} {op} of {numel} element, a sync "
              "point (a barrier, a scalar all_reduce): a rank had not reached it, busy alone "
              "(evaluation, saving, preprocessing), gone (it left the loop early on uneven "
              "data, or crashed) or in another collective; the log does not show which (that "
              "rank's own lines, TORCH_NCCL_DESYNC_DEBUG=1 or the Flight Recorder dumps do)")
# Point-to-point work (waiters.P2P_OPS) is no collective to compare across ranks (audit, stop 27):
# SEND on one rank and RECV on its peer are the two ends of one transfer, and each pipeline stage
# issues its own number of them. torch >= 2.4 numbers them apart (ProcessGroupNCCL::initWork: "isP2P
# ? seqP2P_ : seqCollective_"), so a SEND #12 and an ALLREDUCE #500 share no counter; before 2.4 a
# P2P op bumped the group's one counter, so stages drift apart by design. COALESCED is the op of a
# batch_isend_irecv group as of a coalesced collective (endCoalescing's default): unknown.
# Ops whose input size is the same on every rank (ALLTOALL, SCATTER and P2P may differ).
SIZE_FIXED = {"ALLREDUCE", "BROADCAST", "ALLGATHER", "_ALLGATHER_BASE", "ALLGATHER_COALESCED",
              "ALLREDUCE_COALESCED", "REDUCE_SCATTER", "_REDUCE_SCATTER_BASE", "REDUCE", "GATHER"}


def _rank_zero_step(ops: dict[tuple[str, str, str], set[int]]) -> str:
    """Why this timeout is a rank busy alone, or "" when the lines do not show it."""
    ((seq, op, _), ranks), = ops.items()
    if op in P2P_OPS:  # a P2P number counts that pair's transfers, not the job's collectives
        return ""
    # When rank 0 itself waits there with the others, the log shows no rank busy alone: the
    # one missing is not in the log, or none is and the ranks could not connect.
    if 0 in ranks and len(ranks) > 1:
        return ""
    if seq.isdigit() and 2 <= int(seq) <= EARLY_SEQ:
        return ALONE.format(what=f"the job's second collective (#{seq} {op}) after all had "
                                 "met in the first")
    return ""


def _waited_in(seq: str, op: str, numel: str) -> str:
    if seq == "1":
        return FIRST.format(op=op)
    if op in BARRIER_LIKE or numel == "1":
        return SYNC_POINT.format(seq=seq, op=op, numel=numel or "1")
    return (f"every rank that reported was still waiting in {_which(seq, op)}: a rank that did not "
            "reach it (stopped, crashed or slow: look for its error above) or a stalled link "
            "between nodes")


# ProcessGroupNCCL's heartbeat monitor (2.2-2.3 "Heartbeat monitor timed out! Process will be
# terminated after dumping debug info.", >= 2.4 "ProcessGroupNCCL's watchdog got stuck for 480
# seconds without making progress in monitoring enqueued collectives. This typically indicates
# a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog ..."): the watchdog thread
# itself stopped beating, not a collective's timeout; it also follows one (the watchdog stuck
# dumping or aborting after a timeout). A symptom with its own cause text.
HEARTBEAT = re.compile(r"Heartbeat monitor timed out|watchdog got stuck for \d+ seconds")
STUCK = ("the watchdog thread itself stopped making progress (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC): "
         "a CUDA or NCCL call hung in it (a GPU fault, an NCCL abort that does not return after "
         "a collective timed out) or another thread held the GIL inside a CUDA call; look for a "
         "collective timeout or a GPU/NCCL error before it")


def combine(hits: Sequence[Hit]) -> Problem:
    """One problem over every rank's timeout; desync when ranks wait on different work, a
    size mismatch when they wait in the same op with different element counts."""
    if all(HEARTBEAT.search(h.record.text) for h in hits):
        return COLLECTIVE_TIMEOUT.problem(observed_lines(hits), cause=STUCK, **where(hits))
    ops: dict[tuple[str, str, str], set[int]] = {}
    # per process group and rank: the rank's earliest timed-out collective (seq, op). Before
    # torch 1.13 the watchdog did not abort on a timeout (NCCL_ASYNC_ERROR_HANDLING defaulted
    # to 0) and logged every pending work that timed out, so one rank prints #5 and #6: only
    # ranks that disagree on their first are a desync.
    earliest: dict[str, dict[int, tuple[int, str, str]]] = {}
    sizes: dict[tuple[str, str, str], dict[str, set[int]]] = {}  # (pg, seq, op): numel ranks
    for h in hits:
        g = h.match.groupdict()
        key = (g.get("seq") or "?", g.get("op") or "?", g.get("numel") or "")
        rank = h.record.rank if h.record.rank is not None else -1
        ops.setdefault(key, set()).add(rank)
        # a line that names no op (a bare watchdog line) compares to none; torch 1.8-1.9 name
        # the op without a number
        if key[1] != "?" and key[1] not in P2P_OPS:
            firsts = earliest.setdefault(process_group(h.record.text), {})
            seen = (int(key[0]) if key[0].isdigit() else -1, key[0], key[1])
            firsts[rank] = min(firsts.get(rank, seen), seen)
        if key[2] and key[1] in SIZE_FIXED and key[0] != "?":
            sizes.setdefault((process_group(h.record.text), *key[:2]), {}).setdefault(
                key[2], set()).add(rank)
    if len(ops) > 1 and any(op != "?" for _, op, _ in ops):
        ops = {k: v for k, v in ops.items() if k[1] != "?"}
    summary = "; ".join(
        f"{_named(s, op)}{f' NumelIn={n}' if n else ''}{_on_ranks(rs)}"
        for (s, op, n), rs in sorted(ops.items(), key=lambda kv: (len(kv[0][0]), kv[0][0])))
    observed = f"{summary} | {observed_lines(hits)}"
    # Sequence numbers count per process group: ranks differ only within one group.
    if any(len({f[1:] for f in firsts.values()}) > 1 for firsts in earliest.values()):
        return COLLECTIVE_DESYNC.problem(observed, **where(hits))
    for (_, seq, op), numels in sizes.items():
        # different ranks, each with one count (one rank's two counts are two groups' lines)
        known = [rs - {-1} for rs in numels.values()]
        if len(numels) > 1 and all(known) and len(set().union(*known)) == sum(map(len, known)):
            said = ", ".join(f"{n} on rank {format_ranks(sorted(r for r in rs if r >= 0)) or '?'}"
                             for n, rs in sorted(numels.items()))
            return COLLECTIVE_SIZE_MISMATCH.problem(
                observed, cause=f"the ranks waited in the same collective #{seq} {op} with "
                f"different element counts ({said}): the tensors differ per rank (an uneven "
                "last batch, a rank-dependent shape)", **where(hits))
    if len(ops) == 1 and (alone := _rank_zero_step(ops)):
        return RANK_ZERO_ONLY_STEP_TIMEOUT.problem(observed, cause=alone, **where(hits))
    (seq, op, numel), *_ = ops
    return COLLECTIVE_TIMEOUT.problem(observed, cause=_waited_in(seq, op, numel), **where(hits))


def _named(seq: str, op: str) -> str:
    """How the summary names a collective; gloo's timeouts name neither number nor op."""
    return "a collective the line does not name" if seq == op == "?" else f"SeqNum={seq} {op}"


def _which(seq: str, op: str) -> str:
    """The collective in words: its op and number where the line named them."""
    if op == "?":
        return "a collective" + (f" (#{seq})" if seq != "?" else "")
    return op + (f" #{seq}" if seq != "?" else "")


def _on_ranks(ranks: set[int]) -> str:
    known = format_ranks(sorted(r for r in ranks if r >= 0))
    return f" on rank {known}" if known else ""


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


def named_absent(hits: Sequence[Hit]) -> Problem:
    """The ranks the lines name as absent (group ``ranks``), with the lines seen."""
    ranks = sorted({int(r) for h in hits for r in re.findall(r"\d+", h.match["ranks"])})
    p = hits[0].pattern
    return p.diagnosis.problem(observed_lines(hits),
                               cause=p.cause.format(**hits[0].match.groupdict()),
                               ranks=tuple(ranks))


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
    # ProcessGroupGloo::monitoredBarrier names the ranks that did not arrive: the problem is
    # theirs (its ranks), not the reporting rank's, as for every rank-never-joined.
    pattern(RANK_NEVER_JOINED,
            r"Ranks? (?P<ranks>\d+(?:, ?\d+)*) failed to pass monitoredBarrier in (?P<ms>\d+) ms",
            NEXT, cause="rank {ranks} did not reach the monitored barrier within {ms} ms: "
            "they were busy elsewhere (a long step of their own), stuck, or dead",
            combine=named_absent),
    # The same barrier seen from the other side (ProcessGroupGloo.cpp monitoredBarrier, torch
    # 1.10 to 2.13): a non-zero rank "Rank 1 successfully reached monitoredBarrier, but received
    # errors while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank."
    # (rank 0 answers only once every rank came: printed alike when rank 0 itself failed, as in
    # a torch.save that failed on rank 0, and when a third rank never came), and rank 0 running
    # out of time without naming anyone ("Rank 0 timed out in monitoredBarrier after 30000 ms.
    # Successfully processed ranks: 1, 2", checkRemainingTime): symptoms, like a timeout.
    pattern(COLLECTIVE_TIMEOUT,
            r"Rank \d+ successfully reached monitoredBarrier, but received errors while waiting|"
            r"Rank \d+ timed out in monitoredBarrier after \d+ ms", NEXT, root=False,
            combine=combine),
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
    # c10d/Utils.hpp assertSizesMatch / assertTypeMatch, raised by ProcessGroupGloo's own
    # argument checks (allgather, gather, scatter, ...): "ProcessGroupGloo::allgather: invalid
    # tensor size at index 0 (expected (2), got (1))": this rank's tensor and the list it
    # gathers into differ, the mark of ranks that gather different sizes or dtypes (a real run:
    # runs/s32b-all-gather-uneven, read as the peer's reset until stop 32).
    pattern(COLLECTIVE_SIZE_MISMATCH,
            r"ProcessGroup\w*::(?P<op>\w+): invalid tensor (?P<what>size|type) at index \d+ "
            r"\(expected (?P<expected>.+?), got (?P<got>.+)\)",
            "rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL (it checks every collective's shapes and "
            "dtypes across ranks and names the rank that differs)",
            cause="{op} got tensors of another {what} than it gathers into (expected "
                  "{expected}, got {got}): its ranks gather tensors of different sizes or "
                  "dtypes, which all_gather, gather and scatter do not allow",
            fix="give every rank's tensor the same shape and dtype (pad to the largest and "
                "gather the true lengths first), or use all_gather_object for data of varying "
                "size"),
    pattern(COLLECTIVE_SIZE_MISMATCH, r"op\.preamble\.length <= op\.nbytes", NEXT,
            cause="a gloo peer sent a larger message than this rank posted for the same "
                  "collective: the ranks called it with different sizes (or different "
                  "collectives)"),
    # Who else prints NCCL's line (audit, stop 27): net_socket.cc's data-path "message
    # truncated : receiving N bytes instead of M" follows ranks that call NCCL differently
    # (sizes, ops) and ranks that run one call with different protocols or buffer sizes
    # because their environment differs (NVIDIA/nccl#626, sjeaugey: "mostly two things ...
    # not calling NCCL consistently ... NCCL is not using the same protocol on all ranks due to
    # some environment not being consistent"; NVIDIA/nccl#605: "a mismatch in collective size
    # or env settings between ranks"): a hint, which a line beside it (nodes printing other
    # NCCL versions) outranks. The bootstrap's "Message truncated : received" (bootstrap.cc)
    # is no collective at all (versions, NCCL 2.19-2.20 bugs: NVIDIA/nccl#1176, #1273): the
    # NCCL family reads it.
    pattern(COLLECTIVE_SIZE_MISMATCH,
            r"[Mm]essage truncated ?: receiving \d+ bytes instead of \d+", NEXT, grade="hint",
            cause="a peer sent a message of another size than this rank expected: the ranks "
                  "ran different collectives, or the same one with different sizes, or one "
                  "call with different NCCL_PROTO / NCCL_ALGO / NCCL_BUFFSIZE settings or NCCL "
                  "versions per node (compare every node's environment)"),
    # WorkNCCL's operator<< (ProcessGroupNCCL.cpp) across versions: torch 1.8-1.9
    # "WorkNCCL(OpType=ALLREDUCE, TensorShape=[...], Timeout(ms)=1800000)" (no SeqNum);
    # 1.10-2.1 "WorkNCCL(SeqNum=5, OpType=BROADCAST, Timeout(ms)=1800000)"; >= 2.2 adds
    # "NumelIn=1, NumelOut=1"; >= 2.4 prefixes "[PG 0 (default_pg) Rank 1]".
    # (waiters.TIMED_OUT_WORK: also the blocking-wait wording of the same work)
    pattern(COLLECTIVE_TIMEOUT,
            TIMED_OUT_WORK + r"WorkNCCL\("
            r"(?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)(?:, NumelIn=(?P<numel>\d+))?", NEXT,
            root=False, combine=combine),
    pattern(COLLECTIVE_TIMEOUT,
            r"Watchdog caught collective operation timeout|"
            # ProcessGroupNCCL >= 2.1: the watchdog's summary and its heartbeat monitor
            r"Timeout at NCCL work: \d+, last enqueued NCCL work|"
            r"Heartbeat monitor timed out! Process will be terminated|"
            # the same monitor in torch >= 2.4 (HeartbeatMonitor, its exitMsg already in 2.3)
            r"ProcessGroup\w*'s watchdog got stuck for \d+ seconds|"
            # TORCH_NCCL_DUMP_ON_TIMEOUT: another rank timed out and signalled this one
            # (torch 2.2-2.3 "Received a global timeout from another rank", >= 2.4
            # "Received a dump signal due to a collective timeout from rank R")
            r"Received a (?:global timeout from another rank|dump signal due to a collective "
            r"timeout from)", NEXT, root=False, combine=combine),
    # gloo's collectives (gloo/transport/tcp/unbound_buffer.cc): "Timed out waiting 1800000ms
    # for recv operation to complete", the gloo counterpart of the watchdog's line.
    # On that timeout gloo first closes every pair of the context (unbound_buffer.cc:
    # context_->signalException("Application timeout caused pair closure")), which the rank's
    # other pending operations raise instead (audit, stop 27: was unexplained).
    pattern(COLLECTIVE_TIMEOUT,
            r"Timed out waiting (?P<ms>\d+)ms for (?:recv|send) operation to complete|"
            r"Application timeout caused pair closure", NEXT,
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
    # (torch <= 1.13 spells it "retreiving ncclUniqueId", broadcastUniqueNCCLID's old message.)
    # Who else prints it (audit, stop 27; ProcessGroupNCCL.cpp broadcastUniqueNCCLID, 1.10 to
    # 2.13): a rank 0 that crashed takes the store down with it (env:// hosts it in rank 0's
    # process; torchrun's agent exits once its worker failed), so the others' get fails with a
    # reset or refused connection, not a timeout: rank 0 was alive and did not arrive. But
    # alive is also stuck (a hang of its own, a collective of another group first): a hint,
    # which gives way to any cause-grade line, an earlier failure line, or a Root Cause block
    # naming another rank (was root=False, which only exceptions could outrank).
    pattern(RANK_ZERO_ONLY_STEP_TIMEOUT,
            r"ret(?:rie|rei)ving ncclUniqueId from \[0\] via c10d key-value store.*"
            # (torch >= 2.4: "... got error: wait timeout after 600000ms, keys: ...")
            r"(?:Socket Timeout|timed out|[Tt]imeout)", NEXT, grade="hint",
            cause="rank 0 had not reached its first NCCL collective when the others asked "
                  "for its ncclUniqueId: it was busy with a step of its own (dataset "
                  "preprocessing, loading) longer than the timeout"),
    # stop24 dev: the same message (ProcessGroupNCCL.cpp broadcastUniqueNCCLID: "... but
    # store->get('0') got error: " + e.what()) with the store's reason on a line of its own
    # or lost: the rank waited for rank 0's key, a symptom like a timeout; refine() names the
    # work rank 0 was doing when the log shows it.
    pattern(COLLECTIVE_TIMEOUT,
            r"ret(?:rie|rei)ving ncclUniqueId from \[0\] via c10d key-value store by key "
            r"'\d+', but store->get\('\d+'\) got error:?\s*$", NEXT, root=False,
            cause="this rank waited for rank 0's ncclUniqueId in the store and the wait failed "
                  "(the reason is not on the line): rank 0 had not reached its first NCCL "
                  "collective (busy alone, or dead: look for its error)"),
]
