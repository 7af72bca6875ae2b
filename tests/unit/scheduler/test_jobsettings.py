"""Tests for ddpcheck.scheduler.jobsettings: config settings from the recorded job environments."""

from __future__ import annotations

from typing import Any

import pytest

from ddpcheck.scheduler.detect import detect
from ddpcheck.scheduler.jobsettings import scheduler_settings
from tests.helpers.recorded_jobs import job_of, recorded


def settings_of(name: str, **changes: str | None) -> dict[str, tuple[Any, str]]:
    return scheduler_settings(job_of(name, **changes))


def test_slurm_step_gives_nodes_rank_endpoint_and_run_id() -> None:
    assert settings_of("slurm_2node_srun_step") == {
        "nodes": (2, "SLURM_STEP_NUM_NODES=2"),
        "node_rank": (1, "SLURM_NODEID=1"),
        "rdzv_endpoint": (("gpu-07", 29500), "SLURM_STEP_NODELIST (first node, gpu-07)"),
        "rdzv_id": ("ddpcheck-48213", "SLURM_JOB_ID=48213"),
    }


def test_slurm_endpoint_port_is_master_port() -> None:
    got = settings_of("slurm_2node_srun_step", MASTER_PORT="31337")
    assert got["rdzv_endpoint"][0] == ("gpu-07", 31337)


def test_slurm_endpoint_port_defaults_to_29500() -> None:
    got = settings_of("slurm_4node_gres8_batch")
    assert "MASTER_PORT" not in recorded("slurm_4node_gres8_batch")["env"]
    assert got["rdzv_endpoint"] == (("gpu-01", 29500), "SLURM_JOB_NODELIST (first node, gpu-01)")
    assert (got["nodes"][0], got["node_rank"][0], got["rdzv_id"][0]) == (
        4, 0, "ddpcheck-1203377")


def test_slurm_without_a_node_list_gives_no_endpoint() -> None:
    got = settings_of("slurm_4node_gres8_batch", SLURM_JOB_NODELIST=None, SLURM_NODELIST=None)
    assert "rdzv_endpoint" not in got
    assert got["nodes"] == (4, "SLURM_JOB_NUM_NODES=4")


def test_pbs_job_gives_nodes_rank_endpoint_and_run_id() -> None:
    got = settings_of("pbs_2node")
    assert {k: v[0] for k, v in got.items()} == {
        "nodes": 2, "node_rank": 0, "rdzv_endpoint": ("gn017", 29500),
        "rdzv_id": "ddpcheck-4211.pbs01"}
    assert got["rdzv_id"][1] == "PBS_JOBID=4211.pbs01"


@pytest.mark.parametrize("name", ["torchrun_worker_kubeflow", "byhand_master_env",
                                  "byhand_plain"])
def test_torchrun_and_plain_environments_give_nothing(name: str) -> None:
    assert settings_of(name) == {}


def test_detects_the_job_itself_when_not_given_one() -> None:
    env = recorded("slurm_2node_srun_step")["env"]
    assert scheduler_settings(detect(env))["rdzv_id"] == ("ddpcheck-48213", "SLURM_JOB_ID=48213")
    assert scheduler_settings(detect(recorded("torchrun_worker_kubeflow")["env"])) == {}
