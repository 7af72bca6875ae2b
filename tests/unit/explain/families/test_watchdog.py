"""Watchdog lines compared across ranks: a barrier wait, a desync, DETAIL fingerprints."""

from __future__ import annotations

from tests.unit.explain.families.helpers import first_cause

# torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, WorkNCCL::checkTimeout
WD = ("[E ProcessGroupNCCL.cpp:475] [Rank {r}] Watchdog caught collective operation timeout: "
      "WorkNCCL(SeqNum={s}, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=1800000) ran "
      "for 1800572 milliseconds before timing out.")


def test_a_barrier_timeout_alone_names_no_cause():
    # ProcessGroupNCCL::barrier all-reduces one element; so does a loss or a stop flag, and
    # ranks wait there as long for a rank that left the loop early (pytorch#141069) as for
    # one busy alone: the one element does not tell which
    from ddpcheck.explain import explain_texts

    lines = [WD.format(r=r, s=12, op="ALLREDUCE", n=1) for r in (1, 2, 3)]
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined
    assert "sync point" in e.problems[0].cause and "left the loop" in e.problems[0].cause


def test_a_timeout_in_the_second_collective_is_a_rank_busy_alone():
    # all ranks met in #1 (it created the communicator); one did not reach #2
    assert first_cause(WD.format(r=1, s=2, op="BROADCAST", n=9801523)) == \
        "rank-zero-only-step-timeout"


def test_a_timeout_in_the_first_collective_is_no_rank_busy_alone():
    # near miss: SeqNum=1 exists only once NCCL's communicator was created, which every rank
    # of the group joins (ncclCommInitRank blocks until all have called it)
    from ddpcheck.explain import explain_texts

    e = explain_texts([("r1.log", WD.format(r=1, s=1, op="BROADCAST", n=9801523) + "\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined
    assert "first collective of its group" in e.problems[0].cause


def test_a_large_allreduce_late_in_training_stays_a_collective_timeout():
    lines = [WD.format(r=r, s=808, op="ALLREDUCE", n=9801523) for r in (0, 1)]
    assert first_cause(*lines) == "collective-timeout"


def test_ranks_in_different_ops_are_a_desync():
    assert first_cause(WD.format(r=0, s=80078, op="ALLREDUCE", n=5),
                       WD.format(r=1, s=80078, op="BROADCAST", n=5)) == "collective-desync"


def test_a_rank_zero_timeout_after_another_ranks_crash_is_its_consequence():
    assert first_cause(
        "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        WD.format(r=0, s=3, op="ALLREDUCE", n=1)) == "cuda-out-of-memory"


def test_detail_fingerprints_tell_a_desync_from_a_size_mismatch():
    # torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp
    fp = ("Detected mismatch between collectives on ranks. Rank 0 is running collective: "
          "CollectiveFingerPrint(SequenceNumber=3, OpType={a}, TensorShape=[{sa}], "
          "TensorDtypes=Float), but Rank 1 is running collective: CollectiveFingerPrint("
          "SequenceNumber=3, OpType={b}, TensorShape=[{sb}], TensorDtypes=Float).")
    assert first_cause(fp.format(a="ALLREDUCE", sa=8, b="BROADCAST", sb=3)) == \
        "collective-desync"
    assert first_cause(fp.format(a="ALLREDUCE", sa=8, b="ALLREDUCE", sb=3)) == \
        "collective-size-mismatch"


def test_monitored_barrier_names_the_ranks_that_never_arrived():
    # ProcessGroupGloo::monitoredBarrier
    assert first_cause("RuntimeError: [Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier "
                       "in 5000 ms") == "rank-never-joined"


def test_the_monitored_barriers_problem_is_the_absent_ranks_not_the_reporters():
    from ddpcheck.explain import explain_texts

    e = explain_texts([("job.log", "[rank0]: RuntimeError: [Rank 0]: Ranks 1, 3 failed to "
                                   "pass monitoredBarrier in 5000 ms\n")])
    assert e.problems[0].code == "rank-never-joined" and e.problems[0].ranks == (1, 3)


def test_an_absent_rank_that_raised_or_was_sigkilled_is_the_root():
    """DETAIL's barrier names rank 1 absent; rank 1's own end is why it never came, whichever
    file printed first (recorded: runs/verbose-user-exception, runs/verbose-sigkill)."""
    from ddpcheck.explain import explain_texts

    barrier = ("[rank0]: RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier "
               "in 5000 ms\n")
    raised = ('[rank1]: Traceback (most recent call last):\n'
              '[rank1]:   File "train.py", line 9, in step\n'
              "[rank1]: KeyError: 'labels'\n")
    e = explain_texts([("rank0.log", barrier), ("rank1.log", raised)])
    assert e.problems[0].code == "unexplained" and e.problems[0].ranks == (1,)
    assert "train.py" in e.problems[0].observed
    assert e.problems[1].code == "rank-never-joined" and e.problems[1].consequence_of
    # the absent rank's teardown by SIGTERM is no end of its own: the barrier stays the root
    term = "exitcode  : -15 (pid: 42)\nSignal 15 (SIGTERM) received by PID 42\n"
    e = explain_texts([("rank0.log", barrier), ("rank1.log", "[rank1]: " + term)])
    assert e.problems[0].code == "rank-never-joined"
    # another rank's exception does not explain rank 1's absence
    e = explain_texts([("rank0.log", barrier), ("rank2.log", raised.replace("rank1", "rank2"))])
    assert [p.code for p in e.problems] == ["root-cause-ambiguous", "unexplained",
                                            "rank-never-joined"]


def test_rank_zero_missing_from_the_nccl_unique_id_exchange():
    assert first_cause(
        "RuntimeError: [6] is setting up NCCL communicator and retrieving ncclUniqueId from "
        "[0] via c10d key-value store by key '0', but store->get('0') got error: Socket "
        "Timeout") == "rank-zero-only-step-timeout"


def test_a_timeout_while_one_rank_tokenises_is_that_rank_busy_alone():
    assert first_cause(
        "Running tokenizer on dataset:   9%|###  | 280000/2969526 [29:55<4:48:08]",
        WD.format(r=1, s=808, op="ALLREDUCE", n=9801523)) == "rank-zero-only-step-timeout"


def test_a_store_wait_that_times_out_while_one_rank_tokenises_is_that_rank_busy_alone():
    # torch/csrc/distributed/c10d/socket.cpp waitForInput, and an HF datasets progress bar
    assert first_cause(
        "Tokenizing Prompts (num_proc=64):  92%|#####| 328986/359152 [29:58<12:05]",
        "[rank1]:[W516 14:34:56.854597329 socket.cpp:489] [c10d] waitForInput: socket "
        "SocketImpl(fd=79, addr=[localhost]:41170, remote=[localhost]:29500) timed out after "
        "1800000ms") == "rank-zero-only-step-timeout"


def test_a_store_wait_alone_is_a_symptom():
    from ddpcheck.explain import explain_texts

    e = explain_texts([("r1.log", "[rank1]:[W516 14:34:56.8 socket.cpp:489] [c10d] waitForInput: "
                        "socket SocketImpl(fd=79, addr=[localhost]:41170, remote=[localhost]:"
                        "29500) timed out after 1800000ms\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined


def test_a_one_element_allgather_is_a_sync_point_that_names_no_cause():
    # all_gather_object exchanges one-element sizes first
    assert first_cause("[rank2]:[E109 22:46:25.9 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog "
                       "caught collective operation timeout: WorkNCCL(SeqNum=493, "
                       "OpType=ALLGATHER, NumelIn=1, NumelOut=4, Timeout(ms)=60000) ran for "
                       "60044 milliseconds before timing out.") == "collective-timeout"


def test_an_evaluation_long_before_the_timeout_is_not_the_work_that_held_a_rank():
    timeout = ("[rank0]:[E109 22:46:25.9 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught "
               "collective operation timeout: WorkNCCL(SeqNum=9001, OpType=ALLREDUCE, "
               "NumelIn=25557032, NumelOut=25557032, Timeout(ms)=600000) ran for 600044 "
               "milliseconds before timing out.")
    lines = ["Evaluating: 100%|#####| 50/50", *(f"step {i} loss 0.1" for i in range(40)), timeout]
    assert first_cause(*lines) == "collective-timeout"


def test_a_gloo_recv_timeout_is_a_collective_timeout():
    from ddpcheck.explain import explain_texts

    e = explain_texts([("r0.log", "RuntimeError: [../third_party/gloo/gloo/transport/tcp/"
                        "unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation "
                        "to complete\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined


# --- wordings of other torch versions (ProcessGroupNCCL.cpp WorkNCCL operator<<,
# ProcessGroupWrapper.cpp CollectiveFingerPrint, distributed_c10d.py _store_based_barrier)

def test_a_watchdog_line_without_seqnum_torch_1_9_is_read():
    # torch 1.8/1.9 WorkNCCL(OpType=..., TensorShape=..., Timeout(ms)=...): no SeqNum
    line = ("[E ProcessGroupNCCL.cpp:566] [Rank 1] Watchdog caught collective operation "
            "timeout: WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800792 "
            "milliseconds before timing out.")
    from ddpcheck.explain import explain_texts

    e = explain_texts([("r1.log", line + "\n")])
    assert e.problems[0].code == "collective-timeout" and "BROADCAST" in e.problems[0].observed


def test_timeouts_of_two_process_groups_are_not_a_desync():
    # torch >= 2.4 prefixes the PG; sequence numbers count per group
    a = ("[rank0]:[E1024 10:00:00.1 ProcessGroupNCCL.cpp:616] [PG 0 (default_pg) Rank 0] "
         "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, "
         "OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600012 "
         "milliseconds before timing out.")
    b = a.replace("PG 0 (default_pg)", "PG 3").replace("SeqNum=812", "SeqNum=17")
    assert first_cause(a, b) == "collective-timeout"
    # the same group at different sequence numbers is one
    c = a.replace("Rank 0]", "Rank 1]").replace("[rank0]", "[rank1]").replace("812", "813")
    assert first_cause(a, c) == "collective-desync"


def test_a_bare_watchdog_line_next_to_a_full_one_is_no_desync():
    full = WD.format(r=0, s=808, op="ALLREDUCE", n=9801523)
    assert first_cause(full, "RuntimeError: Watchdog caught collective operation timeout") == \
        "collective-timeout"


def test_fingerprints_printed_without_separators_are_read():
    # as printed by a torch 2.x build (quoted in a public training script's comment)
    assert first_cause(
        "Detected mismatch between collectives on ranks. Rank 0 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=1649OpType=BARRIER), but Rank 1 is running "
        "collective: CollectiveFingerPrint(SequenceNumber=0OpType=GATHER).Collectives differ "
        "in the following aspects: \t Sequence number: 1649vs 0  Op type: BARRIERvs GATHER") \
        == "collective-desync"


def test_same_op_at_another_sequence_number_is_a_desync_not_a_size_mismatch():
    assert first_cause(
        "Detected mismatch between collectives on ranks. Rank 0 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE, TensorShape=[8]), but "
        "Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=13, "
        "OpType=ALLREDUCE, TensorShape=[8]).Collectives differ in the following aspects: "
        "\t Sequence number: 12vs 13") == "collective-desync"


def test_a_fingerprint_free_mismatch_word_is_not_a_desync():
    # near miss: a DDP message that mentions a mismatch but no collective fingerprint
    assert first_cause("RuntimeError: Detected mismatch between collectives on ranks.") != \
        "collective-desync"


def test_watchdog_summary_and_heartbeat_lines_are_symptoms():
    from ddpcheck.explain import explain_texts

    for line in ("[rank1]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 1] Timeout at NCCL work: "
                 "5, last enqueued NCCL work: 5, last completed NCCL work: 4.",
                 "[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Heartbeat monitor timed "
                 "out! Process will be terminated after dumping debug info. "
                 "workMetaList_.size()=1"):
        e = explain_texts([("r.log", line + "\n")])
        assert e.problems[0].code == "collective-timeout" and e.undetermined


def test_a_timeout_during_lightning_validation_is_a_rank_busy_alone():
    # Lightning's progress bar ("Validation DataLoader 0:"), then the watchdog
    assert first_cause(
        "Validation DataLoader 0:  41%|####      | 412/1000 [29:51<42:33,  0.23it/s]",
        WD.format(r=1, s=808, op="ALLREDUCE", n=9801523)) == "rank-zero-only-step-timeout"


def test_every_rank_including_rank_zero_stuck_in_the_first_collective_is_no_busy_rank():
    # rank 0 waits too: nobody was busy alone (a transport or network hang stops seq 1)
    from ddpcheck.explain import explain_texts

    lines = [WD.format(r=r, s=1, op="BROADCAST", n=9801523) for r in (0, 1, 2, 3)]
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined


def test_gloo_preamble_enforce_is_a_size_mismatch():
    # gloo/transport/tcp/pair.cc GLOO_ENFORCE_LE(op.preamble.length, op.nbytes)
    assert first_cause("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/"
                       "pair.cc:446] op.preamble.length <= op.nbytes. 8773632 vs 8386560") == \
        "collective-size-mismatch"


LATE = ("[rank{r}]:[E ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, "
        "NumelOut=9801523, Timeout(ms)=1800000) ran for 1800572 milliseconds before timing out.")


def test_rank_zero_still_printing_after_the_others_timed_out_is_rank_zero_busy():
    # the watchdog runs on every rank: rank 0's bar moved after the others' timeouts, so it
    # was alive and not waiting in that collective (a rank that had left would print nothing)
    assert first_cause(*(LATE.format(r=r) for r in (1, 2, 3)),
                       "[rank0]:Predicting:  61%|######  | 610/1000 [30:02<19:13]") == \
        "rank-zero-only-step-timeout"
    # rank 0 fell silent while saving: its last line is the step under way
    assert first_cause("[rank0]:Saving model checkpoint to out/checkpoint-800",
                       *(LATE.format(r=r) for r in (1, 2, 3))) == "rank-zero-only-step-timeout"


def test_an_unstamped_print_after_the_timeouts_proves_nothing():
    # near miss: print() to a pipe is flushed at exit, after lines printed later on stderr
    from ddpcheck.explain import explain_texts

    text = "\n".join([*(LATE.format(r=r) for r in (1, 2, 3)),
                      "[rank0]:epoch 3 step 800 loss 0.21"]) + "\n"
    assert explain_texts([("job.log", text)]).undetermined


def test_a_quiet_rank_zero_whose_last_line_came_before_the_wait_is_undecided():
    # near miss: rank 0's last line before the others' timeouts: busy, or gone (it left the
    # loop on uneven data and exited): the log does not say which
    from ddpcheck.explain import explain_texts

    text = "\n".join(["[rank0]:epoch 3 step 800 loss 0.21",
                      *(LATE.format(r=r) for r in (1, 2, 3))]) + "\n"
    assert explain_texts([("job.log", text)]).undetermined


def test_rank_zero_absent_from_the_log_or_failing_is_not_rank_zero_busy():
    from ddpcheck.explain import explain_texts

    e = explain_texts([("job.log", "\n".join(LATE.format(r=r) for r in (1, 2, 3)) + "\n")])
    assert e.undetermined  # rank 0's lines are not in the log: it may be anywhere
    assert first_cause("[rank0]:RuntimeError: something rank 0 alone hit",
                       *(LATE.format(r=r) for r in (1, 2, 3))) != "rank-zero-only-step-timeout"


def test_every_rank_including_zero_waiting_in_a_barrier_is_no_busy_rank():
    # the first dist.barrier() after init hangs the same way when the GPUs cannot talk (PCIe
    # ACS blocking P2P, an unreachable NIC): all ranks report SeqNum=1 ALLREDUCE NumelIn=1
    from ddpcheck.explain import explain_texts

    lines = [WD.format(r=r, s=1, op="ALLREDUCE", n=1) for r in (0, 1, 2, 3)]
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    assert e.undetermined


def test_store_wait_timeouts_of_every_version_are_symptoms():
    # TCPStore.cpp: torch 1.x "Wait timeout", >= 2.2 "wait timeout after ...ms, keys: ...",
    # a get past the store timeout "Socket Timeout"
    from ddpcheck.explain import explain_texts

    for line in ("RuntimeError: Wait timeout",
                 "[rank1]: torch.distributed.DistStoreError: wait timeout after 600000ms, keys: "
                 "/default_pg/0//cuda//0",
                 "torch.distributed.DistStoreError: Socket Timeout"):
        e = explain_texts([("r.log", line + "\n")])
        assert e.problems[0].code == "collective-timeout" and e.undetermined, line


def test_a_socket_timeout_phrase_in_prose_is_not_a_store_wait():
    assert first_cause("INFO: raising the socket timeout to 300 s") == "none"


def test_torchs_desync_report_names_the_ranks_that_never_joined():
    # TORCH_NCCL_DESYNC_DEBUG=1, torch/csrc/distributed/c10d/TraceUtils.h (torch 2.0-2.3)
    e = first_cause(WD.format(r=0, s=6, op="ALLREDUCE", n=4096),
                    "\t - [0] Timeout at collective: ALLREDUCE, #6",
                    "\t - To our best knowledge, ranks [1, 3] are the lagging ranks that caused "
                    "this timeout. They never joined any collectives")
    assert e == "rank-never-joined"
    assert first_cause(WD.format(r=0, s=6, op="ALLREDUCE", n=4096),
                       "\t - To our best knowledge, the lagging/dead/mismatched ranks that "
                       "caused the desync are:",
                       "\t     [2] finished collective #5, but didn't join collective #6 (count "
                       "from 1)") == "rank-never-joined"


def test_the_desync_reports_snapshot_lines_alone_name_no_missing_rank():
    assert first_cause("\t   #6 started ranks:", "\t     [0, 1] started ALLREDUCE") == "none"


def test_rank_zero_missing_from_the_unique_id_exchange_in_torch_2_4_wording():
    assert first_cause(
        "torch.distributed.DistBackendError: [2] is setting up NCCL communicator and retrieving "
        "ncclUniqueId from [0] via c10d key-value store by key '0:1', but store->get('0:1') got "
        "error: wait timeout after 600000ms, keys: /default_pg//cuda//0:1") == \
        "rank-zero-only-step-timeout"


# torch 1.10's fingerprint check: each rank prints only its own collective
FP_1_10 = ("RuntimeError: Detected mismatch between collectives on ranks. Rank {r} is running "
           "inconsistent collective: CollectiveFingerPrint(OpType={op}, TensorShape")


def test_one_op_on_two_ranks_is_a_size_mismatch():
    assert first_cause(FP_1_10.format(r=0, op="ALLGATHER"), "=[41, 256, 8], TensorDtypes=Float",
                       FP_1_10.format(r=1, op="ALLGATHER"), "=[40, 256, 8], TensorDtypes=Float"
                       ) == "collective-size-mismatch"


def test_two_ops_are_a_desync():
    assert first_cause(FP_1_10.format(r=0, op="ALLREDUCE"),
                       FP_1_10.format(r=1, op="BROADCAST")) == "collective-desync"


def test_one_ranks_line_cannot_tell_which():
    got = first_cause(FP_1_10.format(r=0, op="ALLREDUCE"))
    assert got not in ("collective-size-mismatch", "collective-desync", "none")


def test_a_matching_fingerprint_line_is_not_a_mismatch():
    assert first_cause("CollectiveFingerPrint(OpType=ALLGATHER, TensorShape=[41, 256])") == "none"


# --- audit of the watchdog families (stop 27) ---

def test_a_send_and_its_peers_recv_are_no_desync():
    # ProcessGroupNCCL opTypeToString: SEND on one pipeline stage, RECV on the next, are the two
    # ends of one transfer; torch >= 2.4 numbers P2P work apart (initWork: "isP2P ? seqP2P_ :
    # seqCollective_"), so their numbers do not compare either
    assert first_cause(WD.format(r=0, s=12, op="SEND", n=4096),
                       WD.format(r=1, s=9, op="RECV", n=4096)) == "collective-timeout"
    # near miss: two collectives of one group at different numbers are
    assert first_cause(WD.format(r=0, s=12, op="ALLREDUCE", n=4096),
                       WD.format(r=1, s=9, op="ALLREDUCE", n=4096)) == "collective-desync"


def test_a_p2p_timeout_against_a_collective_is_no_desync():
    # torch >= 2.4: a SEND #3 (P2P counter) and an ALLREDUCE #500 (collective counter)
    assert first_cause(WD.format(r=0, s=500, op="ALLREDUCE", n=1024),
                       WD.format(r=1, s=3, op="SEND", n=1024)) == "collective-timeout"


def test_one_rank_logging_two_pending_works_is_no_desync():
    # torch < 1.13 (NCCL_ASYNC_ERROR_HANDLING off): the watchdog logs every pending work that
    # timed out, so rank 1 prints #5 and #6; every rank's first is #5
    lines = [WD.format(r=0, s=5, op="ALLREDUCE", n=1024), WD.format(r=1, s=5, op="ALLREDUCE",
             n=1024), WD.format(r=1, s=6, op="ALLREDUCE", n=1024)]
    assert first_cause(*lines) == "collective-timeout"
    # near miss: rank 0's first is #5, rank 1's first #6
    assert first_cause(lines[0], lines[2]) == "collective-desync"


def test_a_p2p_at_sequence_number_two_is_no_rank_busy_alone():
    # the second-collective reading counts the group's collectives, not one pair's transfers
    from ddpcheck.explain import explain_texts

    e = explain_texts([("r1.log", WD.format(r=1, s=2, op="RECV", n=4096) + "\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined


def test_the_monitored_barrier_seen_from_a_waiting_rank_is_a_symptom():
    # ProcessGroupGloo.cpp monitoredBarrier: a non-zero rank waits for rank 0's answer, which
    # comes only once every rank arrived; rank 0 failing (here a torch.save) prints it too
    from ddpcheck.explain import explain_texts

    waiting = ("[rank1]:[E325 17:13:23.163175227 ProcessGroupGloo.cpp:145] Rank 1 successfully "
               "reached monitoredBarrier, but received errors while waiting for send/recv from "
               "rank 0. Please check rank 0 logs for faulty rank.")
    e = explain_texts([("job.log", waiting + "\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined
    assert first_cause("[rank0]: RuntimeError: [enforce fail at inline_container.cc:626] . "
                       "unexpected pos 2221367680 vs 2221367568", waiting) == "disk-full"
    # rank 0 out of time names no one: a symptom too
    e = explain_texts([("job.log", "RuntimeError: Rank 0 timed out in monitoredBarrier after "
                                   "30000 ms.\nSuccessfully processed ranks: 1, 2\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined
    # near miss: rank 0 naming the ranks that did not come stays rank-never-joined
    assert first_cause("RuntimeError: [Rank 0]: Rank 2 failed to pass monitoredBarrier in "
                       "30000 ms") == "rank-never-joined"


# torchrun's summary (torch/distributed/elastic/multiprocessing/errors/__init__.py) naming rank 3
ROOT_RANK_3 = """Root Cause (first observed failure):
[0]:
  time      : 2024-05-01_10:00:00
  host      : node1
  rank      : 3 (local_rank: 3)
  exitcode  : 1 (pid: 1234)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"""
UNIQUE_ID = ("[rank6]: RuntimeError: [6] is setting up NCCL communicator and retrieving "
             "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') "
             "got error: Socket Timeout")


def test_a_second_collective_timeout_is_a_hint_that_gives_way():
    # checkTimeout prints the same line whether the missing rank was busy alone or crashed
    # after #1: torchrun saw rank 3 fail first, and its lines are not in the log
    from ddpcheck.explain import explain_texts

    wd = "[rank1]:" + WD.format(r=1, s=2, op="ALLREDUCE", n=1)
    for line in (wd, UNIQUE_ID):
        assert first_cause(line) == "rank-zero-only-step-timeout"  # alone: the likely cause
        e = explain_texts([("job.log", f"{line}\n{ROOT_RANK_3}\n")])
        assert e.undetermined and e.problems[0].code == "root-cause-ambiguous"
    # an earlier failure line no rule names (a CUDA error on another rank) may be the first
    e = explain_texts([("job.log", "[rank3]: NCCL WARN Cuda failure 'an illegal memory access "
                                   f"was encountered'\n{wd}\n")])
    assert e.undetermined


def test_the_blocking_wait_wordings_are_the_same_timeout():
    # ProcessGroupNCCL.cpp WorkNCCL::synchronizeInternal under NCCL_BLOCKING_WAIT: the calling
    # thread times out, not the watchdog, and prints the same WorkNCCL
    from ddpcheck.explain import explain_texts

    work = "WorkNCCL(SeqNum={s}, OpType={op}, NumelIn=1, NumelOut=1, Timeout(ms)=60000)"
    for line in ("[E ProcessGroupNCCL.cpp:566] [Rank {r}] Work WorkNCCL(SeqNum={s}, OpType={op}, "
                 "Timeout(ms)=60000) timed out in blocking wait (NCCL_BLOCKING_WAIT=1).",
                 "[rank{r}]:[E ProcessGroupNCCL.cpp:900] [PG 0 Rank {r}] Work " + work +
                 " timed out in blocking wait (TORCH_NCCL_BLOCKING_WAIT=1).",
                 "[rank{r}]:[E ProcessGroupNCCL.cpp:900] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
                 "Work " + work + " timed out in blocking wait."):
        e = explain_texts([("job.log", line.format(r=1, s=7, op="ALLREDUCE") + "\n")])
        assert e.problems[0].code == "collective-timeout" and e.undetermined
        # compared across ranks like the watchdog's lines
        assert first_cause(line.format(r=1, s=7, op="ALLREDUCE"),
                           line.format(r=0, s=8, op="BROADCAST")) == "collective-desync"
    # near miss: a WorkNCCL that did not time out is no failure
    assert first_cause("[rank1]: Work " + work.format(s=7, op="ALLREDUCE") + " completed") == \
        "none"


def test_nccl_message_truncated_is_a_size_mismatch_hint():
    # transport/net_socket.cc "message truncated : receiving N bytes instead of M", quoted by
    # torch after "Last error:": mismatched calls, or one call run with other NCCL_PROTO /
    # buffer settings per node (NVIDIA/nccl#626, #605): a hint
    from ddpcheck.explain import explain_texts

    e = explain_texts([("job.log", "RuntimeError: NCCL error: invalid usage, NCCL version 2.10.3"
                                   "\nLast error:\nmessage truncated : receiving 1048576 bytes "
                                   "instead of 65536\n")])
    assert e.problems[0].code == "collective-size-mismatch" and e.found[0].grade == "hint"
    # near miss: the bootstrap's "received" (bootstrap.cc) is no collective's size
    assert first_cause("node:1:2 [4] bootstrap.cc:77 NCCL WARN Message truncated : received 256 "
                       "bytes instead of 4") != "collective-size-mismatch"


def test_the_heartbeat_monitor_is_a_stuck_watchdog_in_both_wordings():
    # ProcessGroupNCCL.cpp heartbeat monitor: 2.2-2.3 and >= 2.4 wordings
    from ddpcheck.explain import explain_texts

    for line in ("[rank0]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 0] Heartbeat monitor timed "
                 "out! Process will be terminated after dumping debug info. workMetaList_.size()=1",
                 "[rank3]:[E1022 10:49:35.421838795 ProcessGroupNCCL.cpp:1511] [PG ID 0 PG GUID "
                 "0(default_pg) Rank 3] ProcessGroupNCCL's watchdog got stuck for 480 seconds "
                 "without making progress in monitoring enqueued collectives. This typically "
                 "indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog"):
        e = explain_texts([("job.log", line + "\n")])
        assert e.problems[0].code == "collective-timeout" and e.undetermined
        assert "watchdog thread itself" in e.problems[0].cause
    # near miss: with a watchdog timeout beside it, the timeout's own reading stands
    e = explain_texts([("job.log", WD.format(r=0, s=808, op="ALLREDUCE", n=9801523) + "\n"
                        + line + "\n")])
    assert e.problems[0].code == "collective-timeout"
    assert "watchdog thread itself" not in e.problems[0].cause


def test_gloos_pair_closure_after_a_timeout_is_the_same_timeout():
    # gloo/transport/tcp/unbound_buffer.cc: a recv past its timeout signals "Application
    # timeout caused pair closure" to the context's other operations, then raises its own
    from ddpcheck.explain import explain_texts

    e = explain_texts([("job.log", "RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport"
                                   "/tcp/pair.cc:534] Read error [10.1.1.2]:21019: Application "
                                   "timeout caused pair closure\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined
    # near miss: a peer's crash beside it stays the root cause
    assert first_cause("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                       "2.00 GiB", "[rank0]: RuntimeError: Application timeout caused pair "
                       "closure") == "cuda-out-of-memory"


def test_the_old_spelling_of_the_nccl_unique_id_exchange_is_read():
    # torch <= 1.13 ProcessGroupNCCL::broadcastUniqueNCCLID: "retreiving ncclUniqueId"
    old = UNIQUE_ID.replace("retrieving", "retreiving")
    assert first_cause(old) == "rank-zero-only-step-timeout"
    # near miss: the same exchange failing on a refused connection is no timeout
    assert first_cause(old.replace("Socket Timeout", "Connection refused")) != \
        "rank-zero-only-step-timeout"


def test_a_timeout_whose_line_names_no_rank_or_number_is_said_in_words_not_question_marks():
    from ddpcheck.explain import explain_texts

    e = explain_texts([("r.log", "Watchdog caught collective operation timeout: WorkNCCL(... "
                                 "OpType=BROADCAST ...) ran for 3600001 ms before timing out\n")])
    (p,) = [p for p in e.problems if p.code == "collective-timeout"]
    assert "?" not in p.observed.split(" | ")[0] and "#?" not in p.cause
    assert "waiting in a collective" in p.cause


def test_the_one_rank_a_monitored_barrier_names_busy_with_a_step_of_its_own_is_the_cause():
    """DETAIL: rank 1 alone saves a checkpoint past the timeout (recorded:
    runs/verbose-rank1-slow-save); its last line is the save, it printed no error."""
    from ddpcheck.explain import explain_texts

    text = ("[default0]:step 2 loss 0.3\n[default1]:step 2 loss 0.3\n"
            "[default1]:Saving model checkpoint to /ckpt/3\n"
            "[default0]:[rank0]: RuntimeError: [Rank 0]: Rank 1 failed to pass "
            "monitoredBarrier in 5000 ms\n")
    e = explain_texts([("console.log", text)])
    assert e.problems[0].code == "rank-zero-only-step-timeout" and e.problems[0].ranks == (1,)
    # the same rank ending in an error is no busy step
    e = explain_texts([("console.log", text.replace("/ckpt/3\n", "/ckpt/3\n[default1]:"
                                                    "OSError: [Errno 5] Input/output error\n"))])
    assert e.problems[0].code != "rank-zero-only-step-timeout"


def test_gloos_own_size_and_type_checks_are_a_size_mismatch_not_the_peers_reset():
    # runs/s32b-all-gather-uneven: rank 1's check fails, rank 0 then sees the reset
    size = ("[rank1]: RuntimeError: ProcessGroupGloo::allgather: invalid tensor size at index 0 "
            "(expected (2), got (1))")
    reset = ("[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] "
             "Connection closed by peer [127.0.0.1]:47288")
    assert first_cause(size, reset) == "collective-size-mismatch"
    assert first_cause("RuntimeError: ProcessGroupGloo::gather: invalid tensor type at index 1 "
                       "(expected CPUFloatType, got CPUDoubleType)") == "collective-size-mismatch"
