"""Tests for scheduler.jobidentity: the rank numbers a job reads, judged against the world."""

from __future__ import annotations

from ddpcheck.scheduler.jobidentity import job_identity, judge


def torchrun_env(rank: int, world: int, local: int, node: int, per_node: int) -> dict:
    return {"TORCHELASTIC_RUN_ID": "x", "RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(local), "GROUP_RANK": str(node), "LOCAL_WORLD_SIZE": str(per_node)}



def test_a_torchrun_world_reads_torchruns_variables_and_fits() -> None:
    ids = {r: job_identity(torchrun_env(r, 4, r % 2, r // 2, 2)) for r in range(4)}
    assert ids[3]["vars"][0] == "RANK" and ids[3]["rank"] == 3
    assert judge(ids, {r: f"h{r // 2}" for r in range(4)}, 4) == []


def test_ranks_started_by_srun_read_slurms_variables() -> None:
    env = [{"SLURM_PROCID": str(r), "SLURM_NTASKS": "3", "SLURM_LOCALID": str(loc)}
           for r, loc in ((0, 0), (1, 1), (2, 0))]
    ids = {r: job_identity(e) for r, e in enumerate(env)}
    assert ids[0]["vars"][0] == "SLURM_PROCID"
    assert judge(ids, {0: "a", 1: "a", 2: "b"}, 3) == []
    env[2]["SLURM_PROCID"] = "1"  # two tasks believe they are rank 1
    ids = {r: job_identity(e) for r, e in enumerate(env)}
    assert judge(ids, {0: "a", 1: "a", 2: "b"}, 3) == [
        "SLURM_PROCID differs from the process-group rank on ranks 2 (SLURM_PROCID=1)"]


def test_a_rank_variable_that_disagrees_with_the_group_is_named() -> None:
    ids = {r: job_identity(torchrun_env(r, 4, r % 2, r // 2, 2)) for r in range(4)}
    ids[3]["rank"] = 1
    ids[2]["world"] = 8
    lines = judge(ids, {r: f"h{r // 2}" for r in range(4)}, 4)
    assert any("3 (RANK=1)" in ln for ln in lines)
    assert any("WORLD_SIZE is [4, 8]" in ln for ln in lines)


def test_duplicate_local_ranks_on_a_host_are_named() -> None:
    ids = {r: job_identity(torchrun_env(r, 2, 0, r, 1)) for r in range(2)}
    lines = judge(ids, {0: "h", 1: "h"}, 2)
    assert any("LOCAL_RANK on h is [0, 0]" in ln for ln in lines)
