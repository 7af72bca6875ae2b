"""Tests for scheduler.contradictions: cases test_detect.py does not cover.

See test_detect.py for the recorded environments' main contradictions."""

from __future__ import annotations

from ddpcheck.diagnoses import CATALOGUE, Problem
from ddpcheck.scheduler import contradictions
from ddpcheck.scheduler.contradictions import shape_problems
from tests.helpers.recorded_jobs import job_of


def codes(problems: list[Problem]) -> list[str]:
    return [p.code for p in problems]


def test_shape_codes_are_in_the_catalogue() -> None:
    c = contradictions
    for diag in (c.SHAPE_MISMATCH, c.TOO_MANY_TASKS, c.TASKS_GPUS_MISMATCH, c.NOT_PER_NODE,
                 c.NODE_RANK_INVALID, c.NOT_IN_ALLOCATION):
        assert CATALOGUE[diag.code] is diag


def test_no_flags_no_problems() -> None:
    assert shape_problems(job_of("slurm_2node_srun_step"), None, None) == []


def test_an_fqdn_node_name_is_in_a_short_name_node_list() -> None:
    job = job_of("slurm_2node_srun_step", SLURMD_NODENAME="gpu-08.hpc.example.org")
    assert shape_problems(job, 2, 4) == []


def test_one_node_in_a_two_node_srun_step_is_a_mismatch() -> None:
    # unlike the batch script, where --nodes 1 checks the first node on purpose
    [problem] = shape_problems(job_of("slurm_2node_srun_step"), 1)
    assert problem.code == "job-shape-mismatch"
    assert problem.observed == "--nodes 1 but the srun step runs on 2 nodes (gpu-[07-08])"
    assert problem.hosts == ("gpu-08",)


def test_two_tasks_per_node_are_too_many_even_when_they_match_the_gpus() -> None:
    job = job_of("slurm_ntasks8_step", SLURM_STEP_TASKS_PER_NODE="2(x2)", SLURM_GPUS_ON_NODE="2")
    [problem] = shape_problems(job, 2, 2)
    assert problem.code == "too-many-tasks-per-node"
    assert problem.observed == ("srun started 2 ddpcheck tasks on hgx-h100-017 "
                                "(SLURM_STEP_TASKS_PER_NODE=2(x2)); each would start its own "
                                "torchrun")
    assert problem.fix == "start one ddpcheck per node: srun --ntasks-per-node=1 ddpcheck run ..."


def test_too_many_tasks_names_the_machine_when_slurmd_nodename_is_unset() -> None:
    [problem] = shape_problems(job_of("slurm_ntasks8_step", SLURMD_NODENAME=None), 2, 8)
    assert problem.code == "too-many-tasks-per-node"
    assert "tasks on hgx-h100-017 " in problem.observed
    assert problem.hosts == ("hgx-h100-017",)


def test_not_launched_per_node_without_a_nodes_flag_proposes_the_allocations_count() -> None:
    [problem] = shape_problems(job_of("slurm_4node_gres8_batch"), None, 8)
    assert problem.code == "not-launched-per-node"
    assert problem.observed == ("ddpcheck runs in the batch script on gpu-01 only (no srun "
                                "step), but the Slurm allocation has 4 nodes (gpu-[01-04])")
    assert problem.fix == "srun --ntasks-per-node=1 ddpcheck run --nodes 4 ..."
    assert problem.hosts == ("gpu-01",)


def test_not_launched_per_node_is_not_said_on_a_host_outside_the_allocation() -> None:
    job = job_of("slurm_4node_gres8_batch", SLURMD_NODENAME="login01", SLURM_NODEID=None)
    [problem] = shape_problems(job, None, 8)
    assert problem.code == "node-not-in-allocation"
    assert problem.observed == "this host (login01) is not in the Slurm node list gpu-[01-04]"


def test_slurm_node_rank_outside_the_step_names_its_nodes() -> None:
    [problem] = shape_problems(job_of("slurm_2node_srun_step", SLURM_NODEID="3"), None, 4)
    assert problem.code == "node-rank-invalid"
    assert problem.observed == ("node rank 3 (SLURM_NODEID=3) but the srun step runs on 2 "
                                "nodes (gpu-[07-08]): valid ranks are 0-1")
    assert problem.hosts == ("gpu-08",)


def test_a_replica_larger_than_the_node_cannot_fit_by_lowering_nproc() -> None:
    [problem] = shape_problems(job_of("slurm_2node_srun_step"), 2, 1, 8)
    assert problem.code == "too-few-gpus"
    assert problem.fix == "request 8 GPUs per node (e.g. --gres=gpu:8)"


def test_nproc_flag_against_local_world_size_set_by_hand() -> None:
    [problem] = shape_problems(job_of("byhand_master_env", LOCAL_WORLD_SIZE="4"), 2, 8)
    assert problem.code == "job-shape-mismatch"
    assert problem.observed == "--nproc-per-node 8 but LOCAL_WORLD_SIZE=4"
    assert problem.fix == "pass --nproc-per-node 4, or set LOCAL_WORLD_SIZE to 8"
    assert problem.hosts == ("train-vm-2",)

