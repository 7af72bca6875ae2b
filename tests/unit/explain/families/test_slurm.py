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
    assert e.problems[0].code == "slurm-job-cancelled" and e.undetermined
    assert "slurm-1.out:2" in e.verdict()


def test_launcher_variables_missing_from_the_traceback_alone():
    # torch/distributed/rendezvous.py _env_rendezvous_handler, message cut off
    assert first_cause('  File "/x/torch/distributed/rendezvous.py", line 166, in '
                       "_env_rendezvous_handler", '    raise _env_error("MASTER_ADDR")') == \
        "launcher-env-missing"
    # a chained traceback prints the KeyError's message on a line of its own
    assert first_cause("Traceback (most recent call last):", "'LOCAL_RANK'",
                       "During handling of the above exception, another exception occurred:"
                       ) == "launcher-env-missing"
