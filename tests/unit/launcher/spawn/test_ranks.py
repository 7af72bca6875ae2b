"""The environment of a spawned rank: what an mp.spawn job sets, nothing of torchrun's."""

from __future__ import annotations

from ddpcheck.launcher.spawn.launchspec import ENV, InitMethod, LaunchSpec
from ddpcheck.launcher.spawn.ranks import rank_env


def test_a_spawned_rank_gets_its_global_rank_the_master_and_the_init_method() -> None:
    spec = LaunchSpec("spawn", ENV, ("gpu-a", 12355), "MASTER_ADDR", 1, 8, 2, 10)
    base = {"PATH": "/bin", "TORCHELASTIC_RUN_ID": "x", "TORCHELASTIC_USE_AGENT_STORE": "True",
            "GROUP_WORLD_SIZE": "2"}
    env = rank_env(base, spec, 1, "env://")
    assert {k: env[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                "MASTER_ADDR", "MASTER_PORT", "DDPCHECK_INIT_METHOD")} == {
        "RANK": "9", "WORLD_SIZE": "10", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "gpu-a", "MASTER_PORT": "12355", "DDPCHECK_INIT_METHOD": "env://"}
    assert not any(k.startswith("TORCHELASTIC_") for k in env) and "GROUP_WORLD_SIZE" not in env
    assert env["PATH"] == "/bin" and base["TORCHELASTIC_RUN_ID"] == "x"


def test_a_file_init_method_sets_no_master() -> None:
    spec = LaunchSpec("spawn", InitMethod("file", path="/s/init"), None, "", 0, 0, 1, 1)
    env = rank_env({"MASTER_ADDR": "stale"}, spec, 0, "file:///s/.ddpcheck-init-1")
    assert env["DDPCHECK_INIT_METHOD"] == "file:///s/.ddpcheck-init-1"
    assert env["MASTER_ADDR"] == "stale"  # the job's own value, unused by file://


def test_launch_srun_gives_each_task_its_own_gpu_as_srun_gpus_per_task_would() -> None:
    from ddpcheck.launcher.spawn.launchspec import LaunchSpec  # noqa: F401  (the spec's type)
    from ddpcheck.launcher.spawn.ranks import srun_task

    class Spec:
        first_rank, world_size, node_rank, nproc = 8, 16, 1, 8

    env = srun_task({"SLURM_GPUS_PER_TASK": "1", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"},
                    Spec(), 5)  # type: ignore[arg-type]
    assert env["CUDA_VISIBLE_DEVICES"] == "5" and env["SLURM_LOCALID"] == "5"
    plain = srun_task({"CUDA_VISIBLE_DEVICES": "0,1"}, Spec(), 1)  # type: ignore[arg-type]
    assert plain["CUDA_VISIBLE_DEVICES"] == "0,1"  # no per-task binding: the node's GPUs
