"""The order in which a timeout's structure decides: torch's own counters before word hints,
and no decision without evidence (the lines: tests/unit/explain/families/test_waiters.py)."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause
from tests.unit.explain.families.test_waiters import SIGNAL, SUMMARY, WD


def test_torchs_counters_outrank_a_word_hint():
    # a tokeniser bar just before the timeout, but rank 3 had nothing pending: it never
    # joined; the counters say which rank, the bar only that someone was tokenising
    assert first_cause("Running tokenizer on dataset:  9%|#  | 280000/2969526 [29:55<4:48:08]",
                       WD.format(r=7, s=56119, op="ALLREDUCE", n=4096),
                       SIGNAL.format(r=3, src=" rank 7", enq=56118, done=56118)) == \
        "rank-never-joined"


def test_summaries_at_different_sequence_numbers_outrank_a_progress_bar():
    assert first_cause(SUMMARY.format(r=1, pg=0, s=19, done=18),
                       SUMMARY.format(r=2, pg=0, s=20, done=19),
                       "Validation DataLoader 0:  41%|####  | 412/1000 [29:51<42:33]") == \
        "collective-desync"


def test_a_crash_beside_the_structure_stays_the_root_cause():
    # rank 0 printed a bar after the others' timeouts, but rank 2 ran out of memory first
    lines = ["[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
             *(WD.format(r=r, s=808, op="ALLREDUCE", n=9801523) for r in (1, 3)),
             "[rank0]:Predicting:  61%|######  | 610/1000 [30:02<19:13]"]
    assert first_cause(*lines) == "cuda-out-of-memory"


def test_a_timeout_without_structure_keeps_abstaining():
    e = explain_texts([("r1.log", WD.format(r=1, s=808, op="ALLREDUCE", n=9801523) + "\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined


# faiss k-means (faiss/Clustering.cpp verbose header) on one rank while another waits: the
# recorded lines of dev case qa3-colbert-318, then variants
KMEANS = "Clustering {n} points in {d}D to {k} clusters, redo 1 times, {it} iterations"
WD_24 = ("[rank{r}]:[E808 04:21:41.160918398 ProcessGroupNCCL.cpp:655] [Rank {r}] Watchdog "
         "caught collective operation timeout: WorkNCCL(SeqNum={s}, OpType=ALLREDUCE, NumelIn=1,"
         " NumelOut=1, Timeout(ms)=600000) ran for 600001 milliseconds before timing out.")


def test_a_timeout_while_faiss_clusters_is_a_rank_busy_alone():
    recorded = ["Clustering 111099511 points in 128D to 524288 clusters, redo 1 times, 4 "
                "iterations", "  Preprocessing in 8.98 s",
                "[rank1]:[E ProcessGroupNCCL.cpp:523] [Rank 1] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                "Timeout(ms)=600000) ran for 600659 milliseconds before timing out."]
    assert first_cause(*recorded) == "rank-zero-only-step-timeout"
    # other sizes, other ranks waiting, torch >= 2.4's timestamped wording
    assert first_cause(KMEANS.format(n=2500000, d=96, k=65536, it=20),
                       *(WD_24.format(r=r, s=41) for r in (1, 2, 3))) == \
        "rank-zero-only-step-timeout"


def test_a_clustering_long_before_the_timeout_decides_nothing():
    lines = [KMEANS.format(n=2500000, d=96, k=65536, it=20),
             *(f"[rank0]: step {i} loss 0.{i}" for i in range(40)), WD_24.format(r=1, s=9001)]
    assert first_cause(*lines) == "collective-timeout"
    # "clustering" in other words is no faiss run
    assert first_cause("Clustering the embeddings ...", WD_24.format(r=1, s=9001)) == \
        "collective-timeout"


def test_the_busy_rank_is_named_when_its_line_names_it_and_it_did_not_wait():
    lines = ["[rank0]:Evaluating:  37%|###7      | 370/1000 [09:58<16:59]",
             *(WD_24.format(r=r, s=41) for r in (1, 2, 3))]
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    assert e.problems[0].code == "rank-zero-only-step-timeout" and e.problems[0].ranks == (0,)
    # near miss (audit, stop 27): a waiter's own step line is no busy rank at all: rank 1 timed
    # out in the collective, so it had reached it (the watchdog checks only the work its own
    # rank enqueued); who held the others is not in the log
    lines[0] = lines[0].replace("[rank0]", "[rank1]")
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined
    # nor is an unprefixed bar (rank 0's, in the usual trainers) when rank 0 waited too
    lines = ["Evaluating:  37%|###7      | 370/1000 [09:58<16:59]",
             *(WD_24.format(r=r, s=41) for r in (0, 1, 2, 3))]
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined


def test_the_desync_reports_finished_ranks_never_joined_only_when_none_is_inside():
    # TraceUtils.h analyzeLaggingRanks (TORCH_NCCL_DESYNC_DEBUG=1), audit (stop 27)
    head = ("[E ProcessGroupNCCL.cpp:737] [Rank 47] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=41207, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for "
            "1800041 milliseconds before timing out.\n\t - To our best knowledge, the "
            "lagging/dead/mismatched ranks that caused the desync are:")
    finished = ("\t     [0, 1, 2] finished collective #41207, but didn't join collective #41208 "
                "(count from 1)")
    inside = "\t   - [47] joined but didn't finish collective #41207 (count from 1)"
    assert first_cause(head, finished) == "rank-never-joined"
    # near miss: rank 47 still inside #41207, which ranks 0-2 finished: no rank is missing
    e = explain_texts([("job.log", "\n".join([head, inside, finished]) + "\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined


def test_a_step_that_had_ended_just_before_the_timeout_decides_nothing():
    # audit (stop 27): "Map: 100%" or "Saved" before the wait says the step had ended, not
    # that a rank was still in it when the others waited (the last-line reading already
    # asked this; the line-just-before reading did not)
    lines = ["Map (num_proc=8): 100%|##########| 1000/1000 [00:05<00:00, 190.1 examples/s]",
             *(WD_24.format(r=r, s=41) for r in (1, 2, 3))]
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined
    # near miss: the same step under way is a rank busy alone
    lines[0] = "Map (num_proc=8):  37%|###7      | 370/1000 [09:58<16:59, 1.1 examples/s]"
    assert first_cause(*lines) == "rank-zero-only-step-timeout"
