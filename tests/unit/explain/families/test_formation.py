"""A log that ends inside process-group initialisation (families/formation.py)."""

from __future__ import annotations

from ddpcheck.explain import explain_texts

# qa3-online-rlhf-11 (dev): DeepSpeed's init_distributed, then nothing (the job hung: its
# main_process_port was 0, so no rank reached rank 0's store).
RLHF = ["[2024-06-11 00:23:36,254] [INFO] [comm.py:637:init_distributed] cdb=None",
        "[2024-06-11 00:23:36,254] [INFO] [comm.py:668:init_distributed] Initializing "
        "TorchBackend in DeepSpeed with backend nccl",
        "[2024-06-11 00:23:36,296] [INFO] [comm.py:637:init_distributed] cdb=None"]


def _explain(*files: list[str]):
    return explain_texts([(f"f{i}.log", "\n".join(lines) + "\n")
                          for i, lines in enumerate(files)])


def _shown(e) -> str:
    return e.problems[0].code if e.problems else "none"


def test_a_log_that_ends_in_deepspeeds_init_is_world_not_formed_undecided():
    e = _explain(RLHF)
    assert _shown(e) == "world-not-formed" and e.undetermined and e.exit_code == 1
    assert "a log cut there from a healthy job looks the same" in e.problems[0].cause
    # variant: DeepSpeed <= 0.6's wording, other times and backend
    e = _explain(["[2021-10-27 22:30:32,069] [INFO] [distributed.py:47:init_distributed] "
                  "Initializing torch distributed with backend: gloo"])
    assert _shown(e) == "world-not-formed" and e.undetermined


def test_lightning_and_fairseq_entries_without_their_formed_line():
    lightning = ["GPU available: True (cuda), used: True",
                 "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/16",
                 "Initializing distributed: GLOBAL_RANK: 3, MEMBER: 4/16"]
    assert _shown(_explain(lightning)) == "world-not-formed"
    assert _shown(_explain(["initializing ddp: GLOBAL_RANK: 1, MEMBER: 2/4"])) == \
        "world-not-formed"
    # rank 0's line after init_process_group returned: the world formed
    formed = [*lightning, "-" * 100, "distributed_backend=nccl",
              "All distributed processes registered. Starting with 16 processes", "-" * 100]
    assert _shown(_explain(formed)) == "none"
    fairseq = ["| distributed init (rank 4): tcp://10.1.2.3:9000",
               "| distributed init (rank 0): tcp://10.1.2.3:9000"]
    assert _shown(_explain(fairseq)) == "world-not-formed"
    assert _shown(_explain([*fairseq, "| initialized host gpu-2 as rank 0"])) == "none"
    # DeiT / MAE's copy: "| distributed init (rank 0): env://, gpu 0"
    assert _shown(_explain(["| distributed init (rank 0): env://, gpu 0"])) == \
        "world-not-formed"


def test_the_store_barrier_says_how_many_ranks_had_come():
    waiting = ["INFO:torch.distributed.distributed_c10d:Added key: store_based_barrier_key:1 "
               "to store for rank: 0",
               "INFO:torch.distributed.distributed_c10d:Waiting in store based barrier to "
               "initialize process group for rank: 0, key: store_based_barrier_key:1 "
               "(world_size=8, worker_count=5, timeout=0:30:00)"]
    e = _explain(waiting)
    assert _shown(e) == "world-not-formed" and "5 of 8 ranks had joined" in e.problems[0].observed
    done = [waiting[0], "INFO:torch.distributed.distributed_c10d:Rank 0: Completed "
                        "store-based barrier for key:store_based_barrier_key:1 with 8 nodes."]
    assert _shown(_explain(done)) == "none"


def test_a_log_that_goes_on_after_the_entry_shows_no_failure():
    # the other ranks' own lines after DeepSpeed's entry: the world formed
    e = _explain([*RLHF, "10/22/2024 20:04:55 - INFO - llamafactory.hparams.parser - Process "
                         "rank: 0, device: cuda:0, n_gpu: 1, distributed training: True"])
    assert _shown(e) == "none" and e.exit_code == 0
    # one file goes on: that rank got through, the other file was cut
    assert _shown(_explain(RLHF, ["Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2",
                                  "Epoch 0:  12%|#2        | 12/100"])) == "none"
    # a launcher's own start-up lines are no entry into init_process_group
    assert _shown(_explain(["I0129 19:30:00.934000 8689 torch/distributed/elastic/agent/server"
                            "/api.py:685] [default] Starting worker group"])) == "none"


def test_a_failure_line_is_read_as_before():
    e = _explain([*RLHF, "RuntimeError: CUDA error: invalid device ordinal"])
    assert _shown(e) == "invalid-device-ordinal"


def test_a_multi_node_batch_script_without_srun_explains_the_stalled_init():
    from tests.unit.explain.families.helpers import first_cause

    # families/slurm: the launcher ran once, so the other node's ranks never came
    assert first_cause("#SBATCH --nodes=2", "python train.py --epochs 10",
                       "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8") == \
        "slurm-without-srun"
    # and a global rank handed out twice stays the job's shape
    assert first_cause(*[f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/4"
                         for r in (0, 1, 0, 1)]) == "job-shape-mismatch"


# gh-torchmetrics-2300 (dev): 96 srun tasks, Trainer(devices=6); rank 0 waited in init until
# Slurm cancelled the job.
TORCHMETRICS = ["[rank: 0] Global seed set to 42",
                "GPU available: True (cuda), used: True",
                "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/96",
                "slurmstepd: error: *** JOB 168885 ON scn67-10g CANCELLED AT "
                "2023-08-31T18:04:42 ***",
                "Running on hosts: scn67-10g"]


def test_a_job_cancelled_while_its_world_formed_shows_the_unformed_world():
    e = _explain(TORCHMETRICS)
    assert _shown(e) == "world-not-formed" and e.undetermined
    assert "world of 96 ranks" in e.problems[0].observed
    assert "--ntasks-per-node must equal Trainer(devices)" in e.problems[0].cause
    assert e.problems[1].code == "slurm-job-cancelled" and e.problems[1].consequence_of
    # variant: DeepSpeed's entry, a step cancelled for its time limit, other ids and hosts
    e = _explain(RLHF[:2] + ["slurmstepd: error: *** STEP 99123.0 ON gpu-a-17 CANCELLED AT "
                             "2024-06-11T04:23:36 DUE TO TIME LIMIT ***"])
    assert _shown(e) == "world-not-formed" and "Lightning" not in e.problems[0].cause


def test_a_cancellation_after_the_world_formed_or_after_training_stays_a_cancellation():
    formed = [*TORCHMETRICS[:3], "All distributed processes registered. Starting with 96 "
                                 "processes", *TORCHMETRICS[3:]]
    assert _shown(_explain(formed)) == "slurm-job-cancelled"
    trained = [*TORCHMETRICS[:3], "Epoch 3: 100%|##########| 50/50 [00:10<00:00]",
               *TORCHMETRICS[3:]]
    assert _shown(_explain(trained)) == "slurm-job-cancelled"
    # a failure that names its cause is read as before
    oom = [*TORCHMETRICS[:3], "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                              "2.00 GiB", *TORCHMETRICS[3:]]
    assert _shown(_explain(oom)) == "cuda-out-of-memory"
