"""Rank 0 alone timing out after its framework said training had ended: the recorded lines of
dev case gh5-autocast-381, variants of other versions and frameworks, and near misses."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

# torch 2.2-2.3 WorkNCCL::checkTimeout and >= 2.4 (timestamped, "[rankN]:" prefix)
WD = ("[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: "
      "WorkNCCL(SeqNum={s}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran "
      "for 1800093 milliseconds before timing out.")
WD_24 = ("[rank{r}]:[E521 03:12:44.184459813 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog "
         "caught collective operation timeout: WorkNCCL(SeqNum={s}, OpType=ALLREDUCE, NumelIn=1,"
         " NumelOut=1, Timeout(ms)=600000) ran for 600044 milliseconds before timing out.")
LIGHTNING = "`Trainer.fit` stopped: `max_{what}={n}` reached."
HF = "Training completed. Do not forget to share your model on huggingface.co/models =)"


def test_the_recorded_post_fit_timeout_of_rank_zero_is_a_desync():
    recorded = ["`Trainer.fit` stopped: `max_epochs=N` reached.",
                "[Rank 0] Watchdog caught collective operation timeout:",
                "  WorkNCCL(..., OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000)",
                "  ran for 1800090 milliseconds before timing out.", "...",
                "srun: error: ... Aborted (core dumped)"]
    e = explain_texts([("job.log", "\n".join(recorded) + "\n")])
    assert e.problems[0].code == "collective-desync" and not e.undetermined
    assert "is_global_zero" in e.problems[0].cause


def test_other_versions_and_frameworks_after_training_are_a_desync():
    assert first_cause(LIGHTNING.format(what="steps", n=40000), "wandb: Waiting for W&B "
                       "process to finish", WD.format(r=0, s=96117)) == "collective-desync"
    assert first_cause("[INFO | pytorch_lightning.utilities.rank_zero]: "
                       + LIGHTNING.format(what="epochs", n=50),
                       WD_24.format(r=0, s=20611)) == "collective-desync"
    assert first_cause("[INFO|trainer.py:2638] 2025-05-21 03:02:40,112 >> " + HF,
                       WD_24.format(r=0, s=3211),
                       "[rank0]:[E521 03:12:44.1 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID "
                       "0(default_pg) Rank 0]  failure detected by watchdog at work sequence id: "
                       "3211 PG status: last enqueued work: 3211, last completed work: 3210") \
        == "collective-desync"


def test_other_ranks_timing_out_after_training_decide_nothing_here():
    # ranks 1-3 waited after rank 0's line: rank 0 was elsewhere, which this does not say
    assert first_cause(LIGHTNING.format(what="epochs", n=3),
                       *(WD_24.format(r=r, s=812) for r in (1, 2, 3))) != "collective-desync"
    # rank 0 and rank 1 both waiting: the collective had more than rank 0 in it
    assert first_cause(LIGHTNING.format(what="epochs", n=3),
                       *(WD_24.format(r=r, s=812) for r in (0, 1))) == "collective-timeout"


def test_a_timeout_naming_no_rank_or_long_after_training_decides_nothing():
    bare = ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE,"
            " NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800093 milliseconds")
    assert first_cause(LIGHTNING.format(what="epochs", n=3), bare) == "collective-timeout"
    later = [LIGHTNING.format(what="epochs", n=3),
             *(f"test step {i}" for i in range(30)), WD.format(r=0, s=812)]
    assert first_cause(*later) == "collective-timeout"
    # a user's own "Training completed at <date>" is no framework's end-of-training line
    assert first_cause("Training completed at Sat Nov 29 22:08:07 UTC 2025",
                       WD.format(r=0, s=812)) == "collective-timeout"


def test_another_ranks_crash_stays_the_root_cause():
    assert first_cause("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to "
                       "allocate 2.00 GiB", LIGHTNING.format(what="epochs", n=3),
                       WD.format(r=0, s=812)) == "cuda-out-of-memory"


def test_a_post_fit_timeout_gives_way_to_a_root_cause_block_naming_another_rank():
    # audit (stop 27): rank 0's lines alone cannot tell the others exited after training from
    # another rank that failed after it (its error not in the log): a hint, so torchrun's
    # Root Cause block naming rank 2 leaves it undetermined
    root = ("Root Cause (first observed failure):\n[0]:\n  time      : 2024-05-01_10:00:00\n"
            "  host      : node1\n  rank      : 2 (local_rank: 2)\n  exitcode  : 1 (pid: 7)\n"
            "  error_file: <N/A>\n  traceback : To enable traceback see: https://pytorch.org/"
            "docs/stable/elastic/errors.html")
    lines = [LIGHTNING.format(what="epochs", n=50), WD_24.format(r=0, s=20611)]
    assert first_cause(*lines) == "collective-desync"
    e = explain_texts([("job.log", "\n".join([*lines, root]) + "\n")])
    assert e.undetermined and e.problems[0].code == "root-cause-ambiguous"
