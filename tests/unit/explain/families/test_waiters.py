"""Which ranks waited in a timed-out collective and which did not: multi-rank logs built from
torch's own wordings (ProcessGroupNCCL.cpp), each with a near miss that must not decide."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

# ProcessGroupNCCL.cpp WorkNCCL::checkTimeout, torch 2.2-2.3 (NumelIn/NumelOut, no PG prefix)
WD = ("[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation "
      "timeout: WorkNCCL(SeqNum={s}, OpType={op}, NumelIn={n}, NumelOut={n}, "
      "Timeout(ms)=1800000) ran for 1800093 milliseconds before timing out.")
# the watchdog's summary (torch >= 2.2), which names the process group
SUMMARY = ("[rank{r}]:[E ProcessGroupNCCL.cpp:1537] [PG {pg} Rank {r}] Timeout at NCCL work: "
           "{s}, last enqueued NCCL work: {s}, last completed NCCL work: {done}.")
# TORCH_NCCL_DUMP_ON_TIMEOUT: torch >= 2.4 HeartbeatMonitor::getNCCLWatchdogTimeoutErrorMsg
SIGNAL = ("[rank{r}]:[E703 15:37:17.178360488 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID "
          "0(default_pg) Rank {r}] Received a dump signal due to a collective timeout from {src}"
          " and we will try our best to dump the debug info. Last enqueued NCCL work: {enq}, "
          "last completed NCCL work: {done}.This is most likely caused by incorrect usages of "
          "collectives, e.g., wrong sizes used across ranks, the order of collectives is not "
          "same for all ranks or the scheduled collective, for some reason, didn't run. "
          "Additionally, this can be caused by GIL deadlock or other reasons such as network "
          "errors or bugs in the communications library (e.g. NCCL), etc. ")
# torch 2.2-2.3 ProcessGroupNCCL::heartbeatMonitor
GLOBAL = ("[rank{r}]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank {r}] Received a global timeout "
          "from another rank and will start to dump the debug info. Last enqueued NCCL work: "
          "{enq}, last completed NCCL work: {done}.")


def _undetermined(*lines: str) -> bool:
    return explain_texts([("job.log", "\n".join(lines) + "\n")]).undetermined


def test_summaries_of_one_group_at_different_sequence_numbers_are_a_desync():
    assert first_cause(SUMMARY.format(r=1, pg=0, s=19, done=18),
                       SUMMARY.format(r=2, pg=0, s=20, done=19)) == "collective-desync"


def test_summaries_at_one_sequence_number_or_of_two_groups_are_no_desync():
    assert _undetermined(SUMMARY.format(r=1, pg=0, s=19, done=18),
                         SUMMARY.format(r=2, pg=0, s=19, done=18))
    # sequence numbers count per process group
    assert _undetermined(SUMMARY.format(r=1, pg=0, s=19, done=18),
                         SUMMARY.format(r=2, pg=3, s=4, done=3))


def test_ranks_with_nothing_pending_never_joined_the_collective_others_waited_in():
    e = explain_texts([("job.log", "\n".join([
        WD.format(r=7, s=56119, op="ALLREDUCE", n=4096),
        SIGNAL.format(r=4, src=" rank 7", enq=56118, done=56118),
        SIGNAL.format(r=3, src=" rank 7", enq=56118, done=56118)]) + "\n")])
    cause = e.problems[0]
    assert cause.code == "rank-never-joined" and not e.undetermined
    assert cause.ranks == (3, 4) and "#56119" in cause.cause


def test_the_torch_2_2_global_timeout_wording_is_read_too():
    assert first_cause(WD.format(r=0, s=6, op="BROADCAST", n=4096),
                       GLOBAL.format(r=1, enq=5, done=5)) == "rank-never-joined"


def test_the_signal_alone_still_names_the_idle_ranks():
    # only the signalled ranks' lines are in the log (the real paste starts there)
    assert first_cause(SIGNAL.format(r=4, src=" rank 7", enq=56118, done=56118),
                       SIGNAL.format(r=5, src=" rank 7", enq=56118, done=56118)) == \
        "rank-never-joined"


def test_a_signalled_rank_with_work_pending_was_waiting_too():
    # near miss: enqueued above completed: that rank was in a collective of its own
    assert _undetermined(WD.format(r=7, s=56119, op="ALLREDUCE", n=4096),
                         SIGNAL.format(r=4, src=" rank 7", enq=56119, done=56118))
    # near miss: its own timeout ("from this local rank", torch >= 2.6) is no other's
    assert _undetermined(WD.format(r=7, s=56119, op="ALLREDUCE", n=4096),
                         SIGNAL.format(r=7, src="this local rank", enq=56119, done=56118))


def test_one_op_with_different_element_counts_is_a_size_mismatch():
    assert first_cause(WD.format(r=0, s=80, op="ALLGATHER", n=41),
                       WD.format(r=1, s=80, op="ALLGATHER", n=40)) == "collective-size-mismatch"


def test_an_alltoall_with_different_element_counts_is_no_size_mismatch():
    # near miss: all_to_all_single with uneven splits has per-rank sizes by design
    assert _undetermined(WD.format(r=0, s=80, op="ALLTOALL_BASE", n=41),
                         WD.format(r=1, s=80, op="ALLTOALL_BASE", n=40))


# torch 1.9 WorkNCCL (no SeqNum), after a validation bar that only rank 0 prints (yolov5)
OLD = ("[E ProcessGroupNCCL.cpp:566] [Rank {r}] Watchdog caught collective operation timeout: "
       "WorkNCCL(OpType=BROADCAST, Timeout(ms)=60000) ran for 66853 milliseconds before timing "
       "out.")
BAR = "               Class     Images     Labels:  {p}% {n}/32 [01:{s}<00:25,  2.80s/it]"


def test_a_progress_bar_still_moving_after_the_others_timed_out_is_rank_zero_busy():
    assert first_cause(BAR.format(p=72, n=23, s="07"),
                       *(OLD.format(r=r) for r in (1, 2, 3)),
                       BAR.format(p=78, n=25, s="12")) == "rank-zero-only-step-timeout"


def test_a_progress_bar_is_no_evidence_when_rank_zero_timed_out_too_or_it_stopped():
    # near miss: rank 0 waited as well, so the bar may be anyone's
    assert _undetermined(BAR.format(p=72, n=23, s="07"),
                         *(OLD.format(r=r) for r in (0, 1, 2, 3)),
                         BAR.format(p=78, n=25, s="12"))
    # near miss: the bar stopped before the timeouts (a rank that finished, or any rank)
    assert _undetermined(BAR.format(p=72, n=23, s="07"), *(OLD.format(r=r) for r in (1, 2, 3)))


# torchrun --log-dir per-rank files with Python logging timestamps
R1 = ("[rank1]:[E501 10:30:00.100000 ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught "
      "collective operation timeout: WorkNCCL(SeqNum=5001, OpType=ALLREDUCE, NumelIn=2048, "
      "NumelOut=2048, Timeout(ms)=1800000) ran for 1800093 milliseconds before timing out.")


def test_a_rank_printing_inside_the_wait_by_its_timestamp_is_busy_alone():
    rank0 = "[rank0]:2024-05-01 10:15:00,000 - INFO - writing predictions 3000/9000\n"
    e = explain_texts([("rank0.log", rank0), ("rank1.log", R1 + "\n")])
    assert e.problems[0].code == "rank-zero-only-step-timeout" and not e.undetermined


def test_a_rank_whose_last_line_predates_the_wait_is_undecided():
    # near miss: rank 0 printed before the others began to wait, then nothing: busy or gone
    rank0 = "[rank0]:2024-05-01 09:59:00,000 - INFO - epoch 3 step 5000\n"
    assert explain_texts([("rank0.log", rank0), ("rank1.log", R1 + "\n")]).undetermined


ZERO_FIRST = ('[rank1]:   File "/env/lib/python3.10/site-packages/transformers/'
              'training_args.py", line 2112, in main_process_first')


def test_a_rank_zero_first_block_in_the_traceback_is_rank_zero_busy():
    assert first_cause(WD.format(r=1, s=37, op="ALLREDUCE", n=1), "[rank1]: Traceback (most "
                       "recent call last):", ZERO_FIRST, "[rank1]:     dist.barrier()") == \
        "rank-zero-only-step-timeout"


def test_another_frame_is_no_rank_zero_first_block():
    # near miss: a frame whose name only contains the words
    assert _undetermined(WD.format(r=1, s=37, op="ALLREDUCE", n=1),
                         ZERO_FIRST.replace("in main_process_first", "in main_process_firsts"))


def test_a_rank_zero_traceback_after_the_others_timeouts_is_no_busy_work():
    # near miss: rank 0's own traceback source lines are no work of its own
    assert first_cause(*(WD.format(r=r, s=808, op="ALLREDUCE", n=9801523) for r in (1, 2, 3)),
                       "[rank0]:     loss.backward()", "[rank0]:     ^^^^^^^^^^^^^^^") != \
        "rank-zero-only-step-timeout"


def test_a_quiet_rank_whose_last_line_is_a_step_under_way_is_busy_alone():
    # torchrun --log-dir: one file per rank; rank 0's ends inside its evaluation
    rank0 = ("[rank0]:epoch 3 step 800 loss 0.21\n"
             "[rank0]:Evaluating:  41%|####  | 412/1000 [29:51<42:33]\n")
    rank1 = WD.format(r=1, s=808, op="ALLREDUCE", n=9801523) + "\n"
    e = explain_texts([("rank0.log", rank0), ("rank1.log", rank1)])
    assert e.problems[0].code == "rank-zero-only-step-timeout" and not e.undetermined


def test_a_quiet_rank_whose_last_step_had_finished_is_undecided():
    # near miss: its evaluation had ended (100%, "Saved"): it may have gone on anywhere
    rank1 = WD.format(r=1, s=808, op="ALLREDUCE", n=9801523) + "\n"
    for last in ("[rank0]:Evaluating: 100%|######| 1000/1000 [29:51<00:00]",
                 "[rank0]:Saving model checkpoint to out/ckpt-800 ... saved"):
        rank0 = "[rank0]:epoch 3 step 800 loss 0.21\n" + last + "\n"
        assert explain_texts([("rank0.log", rank0), ("rank1.log", rank1)]).undetermined, last


def test_two_ops_started_as_one_collective_in_torchs_desync_report_are_a_desync():
    # TORCH_NCCL_DESYNC_DEBUG=1, TraceUtils.h retrieveDesyncReport / dumpSnapshot
    assert first_cause(WD.format(r=0, s=6, op="ALLREDUCE", n=4096),
                       "\t - [0] Timeout at collective: ALLREDUCE, #6",
                       "\t - To our best knowledge, the lagging/dead/mismatched ranks that "
                       "caused the desync are:",
                       "\t   - [0, 1] joined but didn't finish collective #6 (count from 1)",
                       "\t - Snapshot of ranks' latest states:",
                       "\t   #6 started ranks:",
                       "\t     [0, 1] started ALLREDUCE",
                       "\t     [2, 3] started BROADCAST") == "collective-desync"


def test_one_op_started_in_the_snapshot_is_no_desync():
    # near miss: every rank that started #6 started the same op
    assert _undetermined(WD.format(r=0, s=6, op="ALLREDUCE", n=4096),
                         "\t   #6 started ranks:", "\t     [0, 1] started ALLREDUCE",
                         "\t   #5 finished ranks:", "\t     [2, 3] finished BROADCAST")


def test_one_ranks_two_counts_are_two_groups_not_a_size_mismatch():
    # near miss: lines without a PG prefix (torch < 2.4): one rank, two groups' collectives
    assert _undetermined(WD.format(r=0, s=80, op="ALLREDUCE", n=41),
                         WD.format(r=0, s=80, op="ALLREDUCE", n=40))


# --- the watchdog's summaries of torch 2.3-2.4 and >= 2.5, which name the process group; the
# recorded lines are from dev cases gh5-finetrainers-114 and gh-Automodel-1038
EXCEPTION = ("[rank{r}]:[E1205 04:35:53.584921826 ProcessGroupNCCL.cpp:1664] [PG {pg} "
             "(default_pg) Rank {r}] Exception (either an error or timeout) detected by watchdog "
             "at work: {s}, last enqueued NCCL work: {s}, last completed NCCL work: {done}.")
FAILURE = ("[rank{r}]:[E109 22:46:25.933593122 ProcessGroupNCCL.cpp:2268] [PG ID {pg} PG GUID "
           "{pg}(default_pg) Rank {r}]  failure detected by watchdog at work sequence id: {s} PG "
           "status: last enqueued work: {s}, last completed work: {done}")
# torch >= 2.4 WorkNCCL::checkTimeout: "[Rank R]" only, no process group
BARE_WD = ("[rank{r}]:[E109 22:46:25.933527530 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog "
           "caught collective operation timeout: WorkNCCL(SeqNum={s}, OpType={op}, NumelIn={n}, "
           "NumelOut={n}, Timeout(ms)=600000) ran for 600044 milliseconds before timing out.")


def test_the_recorded_newer_summaries_are_read_with_their_group():
    from ddpcheck.explain.families.waiters import waits
    from ddpcheck.explain.reader import read_text

    recorded = [
        "[rank3]:[E1205 04:35:53.584921826 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 3]"
        " Exception (either an error or timeout) detected by watchdog at work: 3348, last "
        "enqueued NCCL work: 3348, last completed NCCL work: 3347.",
        "[rank2]:[E109 22:46:25.933593122 ProcessGroupNCCL.cpp:2268] [PG ID 0 PG GUID "
        "0(default_pg) Rank 2]  failure detected by watchdog at work sequence id: 493 PG status: "
        "last enqueued work: 493, last completed work: 492"]
    found = waits(read_text("job.log", "\n".join(recorded) + "\n"))
    assert [(w.record.rank, w.pg, w.seq) for w in found] == [(3, "0", 3348), (2, "0", 493)]


def test_newer_summaries_of_one_group_at_different_sequence_numbers_are_a_desync():
    # one rank's watchdog line kept, the other rank's summary only (both wordings also
    # follow an NCCL error: alone, without a timeout, they are no timeout)
    wd = BARE_WD.format(r=5, s=31, op="ALLREDUCE", n=4096)
    for line in (EXCEPTION, FAILURE):
        assert first_cause(wd, line.format(r=5, pg=2, s=31, done=30),
                           line.format(r=6, pg=2, s=33, done=32)) == "collective-desync"
        assert _undetermined(wd, line.format(r=5, pg=2, s=31, done=30),
                             line.format(r=6, pg=2, s=31, done=30))
        assert _undetermined(wd, line.format(r=5, pg=2, s=31, done=30),
                             line.format(r=6, pg=0, s=900, done=899))
        assert first_cause(line.format(r=5, pg=2, s=31, done=30),
                           line.format(r=6, pg=2, s=33, done=32)) != "collective-desync"


def test_bare_watchdog_lines_of_two_groups_by_their_summaries_are_no_desync():
    # FSDP/TP: rank 0 times out in the default group, rank 1 in group 2; the watchdog lines
    # name no group, the summary after each does
    lines = [BARE_WD.format(r=0, s=20585, op="ALLREDUCE", n=1259621),
             FAILURE.format(r=0, pg=0, s=20585, done=20584),
             BARE_WD.format(r=1, s=78, op="BROADCAST", n=80),
             FAILURE.format(r=1, pg=2, s=78, done=77)]
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined
    assert "different process groups" in e.problems[0].cause
    # the same with torch 2.3's summary wording
    assert _undetermined(lines[0], EXCEPTION.format(r=0, pg=0, s=20585, done=20584),
                         lines[2], EXCEPTION.format(r=1, pg=2, s=78, done=77))


def test_bare_watchdog_lines_of_one_group_or_without_summaries_stay_a_desync():
    a, b = (BARE_WD.format(r=0, s=812, op="ALLREDUCE", n=4096),
            BARE_WD.format(r=1, s=813, op="ALLREDUCE", n=4096))
    assert first_cause(a, FAILURE.format(r=0, pg=0, s=812, done=811),
                       b, FAILURE.format(r=1, pg=0, s=813, done=812)) == "collective-desync"
    assert first_cause(a, b) == "collective-desync"  # no summary: one group, as before 2.4
    # one line's group unknown: no grounds to withdraw the desync
    assert first_cause(a, FAILURE.format(r=0, pg=0, s=812, done=811), b) == "collective-desync"


# torch >= 2.4: the watchdog thread's exception repeats the work under the group's prefix
TERMINATED = ("[rank{r}]:[E109 22:46:26.1 ProcessGroupNCCL.cpp:1595] [PG ID {pg} PG GUID "
              "{pg}(default_pg) Rank {r}] Process group watchdog thread terminated with "
              "exception: [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL("
              "SeqNum={s}, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for "
              "600044 milliseconds before timing out.")


def test_one_op_and_number_with_other_counts_in_two_groups_is_no_size_mismatch():
    # tensor parallel and data parallel groups both at #812: two collectives, not one
    lines = [BARE_WD.format(r=0, s=812, op="ALLREDUCE", n=4096),
             FAILURE.format(r=0, pg=0, s=812, done=811),
             BARE_WD.format(r=1, s=812, op="ALLREDUCE", n=1048576),
             FAILURE.format(r=1, pg=5, s=812, done=811)]
    assert _undetermined(*lines)
    # the same counts in one group are a mismatch
    one = [*lines[:3], FAILURE.format(r=1, pg=0, s=812, done=811)]
    assert first_cause(*one) == "collective-size-mismatch"


def test_the_watchdog_threads_exception_line_names_the_group_of_a_bare_line():
    lines = [BARE_WD.format(r=2, s=493, op="ALLGATHER", n=1),
             TERMINATED.format(r=2, pg=0, s=493, op="ALLGATHER", n=1),
             BARE_WD.format(r=3, s=31, op="BROADCAST", n=80),
             TERMINATED.format(r=3, pg=2, s=31, op="BROADCAST", n=80)]
    assert _undetermined(*lines)
    same = [*lines[:3], TERMINATED.format(r=3, pg=0, s=31, op="BROADCAST", n=80)]
    assert first_cause(*same) == "collective-desync"


def test_summaries_of_a_send_and_a_collective_are_no_desync():
    # audit (stop 27): a summary names no op; the rank's own watchdog line at that number says
    # it was a SEND, which torch >= 2.4 numbers apart from collectives (seqP2P_)
    assert _undetermined(WD.format(r=1, s=4, op="SEND", n=4096),
                         SUMMARY.format(r=1, pg=0, s=4, done=3),
                         SUMMARY.format(r=2, pg=0, s=19, done=18))
    # near miss: the same summaries after an ALLREDUCE line are a desync
    assert first_cause(WD.format(r=1, s=4, op="ALLREDUCE", n=4096),
                       SUMMARY.format(r=1, pg=0, s=4, done=3),
                       SUMMARY.format(r=2, pg=0, s=19, done=18)) == "collective-desync"


def test_a_rank_that_never_joined_while_its_own_step_was_under_way_was_busy_alone():
    # audit (stop 27): the counters say who never joined (rank 0, nothing pending), its own
    # last line says why: an evaluation still under way
    lines = ["[rank0]:Evaluating:  37%|###7      | 370/1000 [29:58<16:59]",
             WD.format(r=1, s=41, op="ALLREDUCE", n=1),
             SIGNAL.format(r=0, src=" rank 1", enq=40, done=40)]
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    assert e.problems[0].code == "rank-zero-only-step-timeout" and e.problems[0].ranks == (0,)
    # near misses: a step that had finished, or no line of that rank, says nothing of why
    lines[0] = "[rank0]:Evaluating: 100%|##########| 1000/1000 [29:58<00:00]"
    assert first_cause(*lines) == "rank-never-joined"
    assert first_cause(*lines[1:]) == "rank-never-joined"


def test_a_send_and_a_recv_started_as_one_number_in_the_snapshot_are_no_desync():
    # audit (stop 27): in torch <= 2.3 P2P ops share the group's counter, and a SEND on one
    # pipeline stage and the RECV on the next are one transfer (dumpSnapshot lists both)
    lines = [WD.format(r=0, s=6, op="SEND", n=4096), "\t - Snapshot of ranks' latest states:",
             "\t   #6 started ranks:", "\t     [0] started SEND", "\t     [1] started RECV"]
    assert _undetermined(*lines)
    # near miss: a RECV against an ALLREDUCE at one number still differs
    lines[-2] = "\t     [0] started ALLREDUCE"
    lines[0] = WD.format(r=0, s=6, op="ALLREDUCE", n=4096)
    lines.append("\t     [2] started BROADCAST")
    assert first_cause(*lines) == "collective-desync"


def test_a_one_rank_entry_of_the_snapshot_is_read():
    # dumpSnapshot prints "[2] started BROADCAST" for one rank; the reader takes "[2] " for the
    # line's rank prefix, so the entry is read with that rank
    assert first_cause(WD.format(r=0, s=6, op="ALLREDUCE", n=4096),
                       "\t - Snapshot of ranks' latest states:", "\t   #6 started ranks:",
                       "\t     [0, 1] started ALLREDUCE", "\t     [2] started BROADCAST") == \
        "collective-desync"


def test_ranks_idle_beside_a_timed_out_send_are_no_missing_ranks():
    # audit (stop 27): pipeline stages not in a transfer are idle by design, and a SEND's
    # number counts P2P work (seqP2P_, torch >= 2.4), not the idle ranks' collectives
    lines = [WD.format(r=0, s=300, op="SEND", n=4096),
             SIGNAL.format(r=2, src=" rank 0", enq=118, done=118),
             SIGNAL.format(r=3, src=" rank 0", enq=118, done=118)]
    assert _undetermined(*lines)
    # near miss: the same idle ranks beside a timed-out collective never joined it
    lines[0] = WD.format(r=0, s=119, op="ALLREDUCE", n=4096)
    assert first_cause(*lines) == "rank-never-joined"
