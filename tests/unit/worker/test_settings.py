"""Tests for ddpcheck.worker.settings: the worker's DDPCHECK_* variables, defaults and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpcheck.parsing import UsageError
from ddpcheck.stages import STAGES
from ddpcheck.worker.settings import DEFAULT_PROBE_TIMEOUT, WorkerSettings


def test_defaults_without_any_variable() -> None:
    s = WorkerSettings.from_env({})
    assert s == WorkerSettings(stages=tuple(STAGES), probe_timeout=DEFAULT_PROBE_TIMEOUT,
                               gpus_per_replica=1, checkpoint_dir=None, results_dir=None,
                               expected_world_size=None, expected_nproc_per_node=None,
                               expected_busbw=None, slow_link_ratio=0.5, backend="auto")
    assert s.probe_timeout == 20.0


def test_blank_variables_are_defaults() -> None:
    names = ("DDPCHECK_STAGES", "DDPCHECK_PROBE_TIMEOUT", "DDPCHECK_GPUS_PER_REPLICA",
             "DDPCHECK_CHECKPOINT_DIR", "DDPCHECK_RESULTS_DIR", "DDPCHECK_EXPECT_WORLD_SIZE",
             "DDPCHECK_EXPECT_NPROC_PER_NODE", "DDPCHECK_EXPECT_BUSBW",
             "DDPCHECK_SLOW_LINK_RATIO")
    assert WorkerSettings.from_env(dict.fromkeys(names, "  ")) == WorkerSettings.from_env({})


def test_every_variable_is_read() -> None:
    env = {
        "DDPCHECK_STAGES": "ddp, node",
        "DDPCHECK_PROBE_TIMEOUT": "2.5",
        "DDPCHECK_GPUS_PER_REPLICA": "2",
        "DDPCHECK_CHECKPOINT_DIR": " /shared/ckpt ",
        "DDPCHECK_RESULTS_DIR": "/tmp/ddpcheck-results",
        "DDPCHECK_EXPECT_WORLD_SIZE": "16",
        "DDPCHECK_EXPECT_NPROC_PER_NODE": "8",
        "DDPCHECK_EXPECT_BUSBW": "180.5",
        "DDPCHECK_SLOW_LINK_RATIO": "0.25",
    }
    assert WorkerSettings.from_env(env) == WorkerSettings(
        stages=("node", "ddp"),  # run order, not the order written
        probe_timeout=2.5, gpus_per_replica=2, checkpoint_dir=Path("/shared/ckpt"),
        results_dir=Path("/tmp/ddpcheck-results"), expected_world_size=16,
        expected_nproc_per_node=8, expected_busbw=180.5, slow_link_ratio=0.25)


@pytest.mark.parametrize("name,value,expected", [
    ("DDPCHECK_STAGES", "nodes", "unknown stage 'nodes'"),
    ("DDPCHECK_PROBE_TIMEOUT", "0", "expected a number of seconds > 0"),
    ("DDPCHECK_PROBE_TIMEOUT", "inf", "expected a number of seconds > 0"),
    ("DDPCHECK_PROBE_TIMEOUT", "20s", "expected a number of seconds > 0"),
    ("DDPCHECK_GPUS_PER_REPLICA", "0", "expected a positive integer"),
    ("DDPCHECK_GPUS_PER_REPLICA", "1.5", "expected a positive integer"),
    ("DDPCHECK_EXPECT_WORLD_SIZE", "-4", "expected a positive integer"),
    ("DDPCHECK_EXPECT_NPROC_PER_NODE", "auto", "expected a positive integer"),
    ("DDPCHECK_EXPECT_BUSBW", "fast", "expected a number > 0"),
    ("DDPCHECK_SLOW_LINK_RATIO", "1", "expected a ratio between 0 and 1"),
])
def test_a_bad_value_is_one_line_naming_the_variable(name: str, value: str,
                                                      expected: str) -> None:
    with pytest.raises(UsageError) as info:
        WorkerSettings.from_env({name: value})
    message = str(info.value)
    assert message.startswith(f"{name}={value!r} (environment): ")
    assert expected in message
    assert "\n" not in message


@pytest.mark.parametrize("settings", [
    WorkerSettings(),
    WorkerSettings(stages=("node", "ddp"), probe_timeout=0.1 + 0.2, gpus_per_replica=4,
                   checkpoint_dir=Path("/shared/ck"), results_dir=Path("/tmp/r"),
                   expected_world_size=4096, expected_nproc_per_node=8, expected_busbw=180.5,
                   slow_link_ratio=0.25, backend="gloo", init_method="file:///s/.ddpcheck-init-1"),
])
def test_the_variables_read_back_as_the_same_settings(settings: WorkerSettings) -> None:
    assert WorkerSettings.from_env(settings.to_env()) == settings


def test_to_env_writes_numbers_as_users_do_and_leaves_unset_fields_out() -> None:
    env = WorkerSettings(probe_timeout=20.0).to_env()
    assert env["DDPCHECK_PROBE_TIMEOUT"] == "20" and env["DDPCHECK_BACKEND"] == "auto"
    assert "DDPCHECK_CHECKPOINT_DIR" not in env and "DDPCHECK_EXPECT_BUSBW" not in env


def test_a_bad_backend_names_its_variable() -> None:
    with pytest.raises(UsageError, match="^DDPCHECK_BACKEND='mpi' .*auto, nccl, gloo"):
        WorkerSettings.from_env({"DDPCHECK_BACKEND": "mpi"})
