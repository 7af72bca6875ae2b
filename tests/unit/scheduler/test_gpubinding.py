"""Tests for ddpcheck.scheduler.gpubinding: srun's per-task GPU binding from Slurm's
variables, the CUDA_VISIBLE_DEVICES each task gets, and the ordinal error it implies."""

from __future__ import annotations

from ddpcheck.scheduler import gpubinding


def test_no_binding_without_per_task_variables_or_with_gpu_bind_none():
    assert gpubinding.detect({}) is None
    assert gpubinding.detect({"SLURM_GPUS_PER_NODE": "8"}) is None
    assert gpubinding.detect({"SLURM_GPU_BIND": "none", "SLURM_GPUS_PER_TASK": "1"}) is None
    assert gpubinding.task_visible_devices({}, 3, 8) is None


def test_gpus_per_task_gives_each_task_its_slice_of_the_nodes_gpus():
    env = {"SLURM_GPUS_PER_TASK": "1", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    assert [gpubinding.task_visible_devices(env, r, 8) for r in (0, 3, 7)] == ["0", "3", "7"]
    two = {"SLURM_GPUS_PER_TASK": "h100:2", "SLURM_STEP_GPUS": "4,5,6,7"}
    assert gpubinding.task_visible_devices(two, 1, 4) == "6,7"
    assert gpubinding.detect(two).source == "SLURM_GPUS_PER_TASK=h100:2"


def test_gpu_bind_single_map_gpu_and_per_task():
    assert gpubinding.task_visible_devices({"SLURM_GPU_BIND": "single:2"}, 3, 8) == "1"
    env = {"SLURM_GPU_BIND": "verbose,map_gpu:3,2,1,0"}
    assert gpubinding.task_visible_devices(env, 0, 4) == "3"
    assert gpubinding.task_visible_devices({"SLURM_GPU_BIND": "per_task:4"}, 1, 8) == "4,5,6,7"


def test_a_task_seeing_one_gpu_names_the_invalid_device_ordinal_of_set_device_local_rank():
    env = {"SLURM_GPUS_PER_TASK": "1", "CUDA_VISIBLE_DEVICES": "3"}
    [p] = gpubinding.ordinal_problem(3, 1, 1, env)
    assert p.code == "srun-device-ordinal"
    assert "SLURM_LOCALID=3 sees 1 GPU(s) (CUDA_VISIBLE_DEVICES=3" in p.observed
    assert "SLURM_GPUS_PER_TASK=1" in p.observed and "invalid device ordinal" in p.observed
    assert "set_device(0)" in p.fix and "--gpu-bind=none" in p.fix
    assert gpubinding.ordinal_problem(0, 1, 1, env) == []  # the first task is fine
    assert gpubinding.ordinal_problem(3, 8, 1, {}) == []  # every task sees the node
