"""Rank layout of tasks started by srun without torchrun, from recorded Slurm steps."""

from __future__ import annotations

from ddpcheck.scheduler.srunworld import is_srun_rank, torch_env

STEP = {  # task 5 of `srun -N2 --ntasks-per-node=4` in job 48213 on gpu-[07-08]
    "SLURM_JOB_ID": "48213", "SLURM_JOB_NODELIST": "gpu-[07-08]", "SLURM_STEP_ID": "0",
    "SLURM_STEP_NODELIST": "gpu-[07-08]", "SLURM_STEP_NUM_TASKS": "8", "SLURM_NTASKS": "8",
    "SLURM_STEP_TASKS_PER_NODE": "4(x2)", "SLURM_PROCID": "5", "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1", "SLURMD_NODENAME": "gpu-08"}


def test_srun_task_gets_rank_world_and_local_layout_from_slurm():
    env = torch_env(STEP)
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"]) == ("5", "8", "1")
    assert (env["LOCAL_WORLD_SIZE"], env["GROUP_RANK"]) == ("4", "1")


def test_the_first_node_of_the_step_hosts_the_store_on_a_job_derived_port():
    env = torch_env(STEP)
    assert env["MASTER_ADDR"] == "gpu-07" and env["MASTER_PORT"] == str(20000 + 48213 % 10000)
    assert torch_env({**STEP, "MASTER_PORT": "29400"})["MASTER_PORT"] == "29400"


def test_uneven_tasks_per_node_give_each_node_its_own_local_world_size():
    env = torch_env({**STEP, "SLURM_STEP_TASKS_PER_NODE": "3,2", "SLURM_NODEID": "1"})
    assert env["LOCAL_WORLD_SIZE"] == "2"


def test_torchrun_workers_are_not_mistaken_for_srun_tasks():
    assert is_srun_rank(STEP)
    assert not is_srun_rank({**STEP, "RANK": "5"})
    assert not is_srun_rank({})
