"""Slurm: cancellations explain the kills after them; a batch script without srun."""

from __future__ import annotations

from tests.unit.explain.families.helpers import first_cause


def test_kills_after_a_slurm_time_limit_are_the_schedulers_not_an_oom():
    assert first_cause(
        "failed (exitcode: -9) local_rank: 0 (pid: 5343) of binary: /usr/bin/python",
        "slurmstepd: error: *** JOB 4242 ON node07 CANCELLED AT 2024-05-01T10:00:00 DUE TO "
        "TIME LIMIT ***") == "slurm-job-cancelled"

def test_a_multi_node_batch_script_without_srun_is_named_before_the_wait():
    assert first_cause(
        "#!/bin/bash", "#SBATCH --nodes=2", "#SBATCH --gres=gpu:8",
        "torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint n1 t.py",
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError") == \
        "slurm-without-srun"
    assert first_cause(
        "#SBATCH --nodes=2", "srun torchrun --nnodes 2 --nproc-per-node 8 t.py",
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError") == \
        "rendezvous-timeout"


def test_a_cancellation_alone_leaves_the_root_cause_undetermined():
    from ddpcheck.explain import explain_texts

    e = explain_texts([("slurm-1.out", "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/96\n"
                        "slurmstepd: error: *** JOB 168885 ON n1 CANCELLED AT "
                        "2023-08-31T18:04:42 DUE TO TIME LIMIT ***\n")])
    # the ranks waited in init until the cancellation: the unformed world is what it shows
    # (families/formation), still undetermined
    assert [p.code for p in e.problems] == ["world-not-formed", "slurm-job-cancelled"]
    assert e.undetermined and "slurm-1.out:2" in e.verdict()
    alone = explain_texts([("slurm-1.out", "epoch 3 loss 0.2\nslurmstepd: error: *** JOB 168885 "
                            "ON n1 CANCELLED AT 2023-08-31T18:04:42 DUE TO TIME LIMIT ***\n")])
    assert alone.problems[0].code == "slurm-job-cancelled" and alone.undetermined


def test_launcher_variables_missing_from_the_traceback_alone():
    # torch/distributed/rendezvous.py _env_rendezvous_handler, message cut off
    assert first_cause('  File "/x/torch/distributed/rendezvous.py", line 166, in '
                       "_env_rendezvous_handler", '    raise _env_error("MASTER_ADDR")') == \
        "launcher-env-missing"
    # a chained traceback prints the KeyError's message on a line of its own
    assert first_cause("Traceback (most recent call last):", "'LOCAL_RANK'",
                       "During handling of the above exception, another exception occurred:"
                       ) == "launcher-env-missing"


# --- Lightning's SLURMEnvironment checks (lightning/fabric/plugins/environments/slurm.py)

def test_lightning_devices_against_ntasks_per_node_is_tasks_gpus_mismatch():
    assert first_cause("ValueError: You set `devices=4` in Lightning, but the number of tasks "
                       "per node configured in SLURM `--ntasks-per-node=1` does not match. "
                       "HINT: Set `devices=1`.") == "tasks-gpus-mismatch"


def test_lightning_num_nodes_against_nodes_is_job_shape_mismatch():
    assert first_cause("ValueError: You set `num_nodes=1` in Lightning, but the number of nodes "
                       "configured in SLURM `--nodes=2` does not match. HINT: Set "
                       "`num_nodes=2`.") == "job-shape-mismatch"


def test_a_global_rank_handed_out_twice_is_a_job_shape_mismatch():
    # pytorch_lightning ddp: each process logs its own GLOBAL_RANK once
    lines = [f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8"
             for r in (0, 1, 2, 3, 0, 1, 2, 3)]
    assert first_cause(*lines) == "job-shape-mismatch"


def test_distinct_global_ranks_or_a_restart_are_not_a_shape_mismatch():
    lines = [f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/4" for r in range(4)]
    # (a log that ends at these lines stopped inside init: world-not-formed, families/formation)
    assert first_cause(*lines) != "job-shape-mismatch"
    assert first_cause(*lines, "All distributed processes registered. Starting with 4 "
                       "processes") == "none"
    assert first_cause(lines[0], "[INFO] Restarting workers (attempt 1)", lines[0]) != \
        "job-shape-mismatch"


def test_old_slurm_cancellation_without_the_node_is_read():
    from ddpcheck.explain import explain_texts

    e = explain_texts([("slurm-1.out", "slurmstepd: *** JOB 1234 CANCELLED AT "
                        "2014-03-01T10:00:00 DUE TO TIME LIMIT on n12 ***\n")])
    assert e.problems[0].code == "slurm-job-cancelled" and e.undetermined


def test_a_batch_script_running_a_python_script_on_two_nodes_without_srun():
    assert first_cause("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=4",
                       "python train.py --epochs 10",
                       "RuntimeError: Timed out initializing process group in store based "
                       "barrier on rank: 0, for key: store_based_barrier_key:1 (world_size=8, "
                       "worker_count=4, timeout=0:30:00)") == "slurm-without-srun"


def test_a_batch_script_with_mpirun_is_not_without_srun():
    assert first_cause("#SBATCH --nodes=2", "mpirun -np 8 python train.py",
                       "RuntimeError: Timed out initializing process group in store based "
                       "barrier on rank: 0, for key: store_based_barrier_key:1 (world_size=8, "
                       "worker_count=4, timeout=0:30:00)") != "slurm-without-srun"


def test_lightnings_srun_warning_yields_to_a_failure_of_another_kind():
    # a PossibleUserWarning printed by every Lightning job under Slurm without srun
    warn = ("PossibleUserWarning: The `srun` command is available on your system but is not "
            "used. HINT: If your intention is to run Lightning on SLURM, prepend your python "
            "command with `srun` like so: srun python train.py ...")
    assert first_cause(warn, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                       "2.00 GiB") == "cuda-out-of-memory"
    assert first_cause(warn) == "slurm-without-srun"


def test_a_sites_submit_plugin_refusing_the_job_is_a_rejected_job():
    recorded = ("sbatch: error: *** Error partition 'h200_courant' is not valid for this job",
                "sbatch: error: *** Error: CPU job setup is not valid")  # dev outerloop-176
    assert first_cause(*recorded) == "slurm-job-rejected"
    assert first_cause("salloc: error: ***Error: jobs on gpu-a100 must request --gpus-per-node"
                       ) == "slurm-job-rejected"
    # sbatch's warnings are no rejection
    assert first_cause("sbatch: warning: can't honor --ntasks-per-node set to 8") != \
        "slurm-job-rejected"


# --- stop 27 audit: srun and slurmstepd in other Slurm versions' words (SchedMD/slurm)

def test_old_srun_step_rejection_wording():
    # Slurm <= 17.11 src/srun/libsrun/launch.c: "Unable to create job step: %m"
    assert first_cause("srun: error: Unable to create job step: Requested node configuration "
                       "is not available") == "slurm-step-rejected"
    # 18.08+ "Unable to create step for job %u: %m"
    assert first_cause("srun: error: Unable to create step for job 4242: More processors "
                       "requested than permitted") == "slurm-step-rejected"
    assert first_cause("srun: error: Unable to create option table") != "slurm-step-rejected"


def test_a_step_that_waited_and_never_started_is_a_step_hint():
    from ddpcheck.explain import explain_texts

    waited = ("srun: Job 4242 step creation temporarily disabled, retrying (Requested nodes are "
              "busy)")
    e = explain_texts([("slurm-4242.out", waited + "\nslurmstepd: error: *** JOB 4242 ON n1 "
                        "CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***\n")])
    assert e.problems[0].code == "slurm-step-rejected" and not e.undetermined
    assert "--overlap" in e.problems[0].fix
    # 17.x / 19.05 wordings
    assert first_cause("srun: Job step creation temporarily disabled, retrying") == \
        "slurm-step-rejected"
    # a wait that ended: srun 20.11+ says the step was created
    assert first_cause(waited, "srun: Step created for StepId=4242.1", "epoch 1 loss 0.3") == \
        "none"


def test_srun_memory_variables_in_conflict():
    # src/common/slurm_opt.c (21.08+)
    assert first_cause("srun: fatal: SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and "
                       "SLURM_MEM_PER_NODE are mutually exclusive.") == "scheduler-env-invalid"
    assert first_cause("srun: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually "
                       "exclusive.") != "scheduler-env-invalid"


def test_a_missing_mpi_plugin_stops_the_step():
    # src/interfaces/mpi.c (22.05+), src/common/mpi.c (17.02-21.08), src/common/plugin.c
    for line in ("srun: error: MPI: Cannot create context for mpi/pmix_v4",
                 "srun: error: cannot create mpi context for mpi/pmix",
                 "srun: error: Couldn't find the specified plugin name for mpi/pmix looking at "
                 "all files"):
        assert first_cause(line) == "slurm-step-rejected", line
    assert first_cause("srun: error: Couldn't find the specified plugin name for gres/gpu "
                       "looking at all files") != "slurm-step-rejected"


def test_newer_slurmstepd_cancellation_reasons():
    from ddpcheck.explain import explain_texts

    # slurmstepd req.c (17.02-26.05): lower-case "DUE to SIGNAL", TASK FAILURE, NODE FAILURE
    for line, why in (("slurmstepd: error: *** STEP 4242.0 ON n1 CANCELLED AT "
                       "2024-05-01T10:00:00 DUE to SIGNAL Terminated ***", "SIGNAL Terminated"),
                      ("slurmstepd: error: *** STEP 4242.0 ON n1 CANCELLED AT "
                       "2024-05-01T10:00:00 DUE TO TASK FAILURE ***", "TASK FAILURE"),
                      ("slurmstepd: error: *** JOB 4242 ON n1 CANCELLED AT 2024-05-01T10:00:00 "
                       "DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***", "NODE FAILURE")):
        e = explain_texts([("slurm.out", line + "\n")])
        assert e.problems[0].code == "slurm-job-cancelled" and why in e.problems[0].cause, line
    # a step ended by a failed task is teardown: the task's own error is the cause
    assert first_cause("RuntimeError: CUDA error: invalid device ordinal",
                       "slurmstepd: error: *** STEP 4242.0 ON n1 FAILED (non-zero exit code or "
                       "other failure mode) ***") == "invalid-device-ordinal"


def test_srun_with_the_id_of_an_ended_job_is_a_stale_scheduler_variable():
    # src/srun/allocate.c (17.02-26.05)
    for lines in (("srun: error: Unable to confirm allocation for job 4242: Invalid job id "
                   "specified", "srun: Check SLURM_JOB_ID environment variable. Expired or "
                   "invalid job 4242"),
                  ("srun: error: Slurm job 4242 has expired",)):
        assert first_cause(*lines) == "scheduler-env-invalid", lines
    assert first_cause("srun: error: Unable to allocate resources: Invalid job id specified") \
        == "slurm-job-rejected"


def test_a_step_rejection_that_is_not_the_layout():
    from ddpcheck.explain import explain_texts

    # slurm_errno.c strings srun's %m can carry
    e = explain_texts([("o.log", "srun: error: Unable to create step for job 4242: Socket timed "
                        "out on send/recv operation\n")])
    assert e.problems[0].code == "slurm-step-rejected" and "slurmctld" in e.problems[0].cause
    # a step after the job ended: what ended it comes first
    late = explain_texts([("o.log", "srun: error: Unable to create step for job 4242: Job/step "
                           "already completing or completed\n")])
    assert late.undetermined and "ended" in late.problems[0].cause
    # the layout stays a layout
    layout = explain_texts([("o.log", "srun: error: Unable to create step for job 4242: Memory "
                             "required by task is not available\n")])
    assert "layout" in layout.problems[0].cause and not layout.undetermined


def test_any_error_sbatch_prints_is_the_job_refused_at_submission():
    # sbatch.c: option checks and the job_submit plugin's user message (at error level only
    # when the submission failed) go through error(); wrappers such as submitit quote it
    assert first_cause("submitit.core.utils.FailedJobError: sbatch: error: Parameter "
                       "--gres=gpu:1 no longer acceptable, please switch to --gpus=1") == \
        "slurm-job-rejected"
    assert first_cause("salloc: error: invalid partition specified: gpu-big") == \
        "slurm-job-rejected"
    # near misses: an optional SPANK plugin's complaint, and srun's step-level errors
    assert first_cause("sbatch: error: spank: x11.so: Plugin file not found") != \
        "slurm-job-rejected"
    assert first_cause("srun: error: Unable to create step for job 42: Invalid generic "
                       "resource (gres) specification") != "slurm-job-rejected"
