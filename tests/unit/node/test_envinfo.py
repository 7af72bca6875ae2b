"""Tests for ddpcheck.node.envinfo: the distributed subset of the environment, secrets redacted."""

from __future__ import annotations

import pytest

from ddpcheck.node.envinfo import REDACTED, distributed_env, is_secret, redact


@pytest.mark.parametrize("name", [
    "DDPCHECK_API_TOKEN", "HF_TOKEN", "NCCL_SOME_PASSWORD", "SLURM_JOB_KEY", "KEY", "MY_KEY_FILE",
    "TORCH_SECRET", "aws_secret_access_key", "MASTER_ACCESS_KEY", "DDPCHECK_APIKEY",
    "PMI_PRIVATE_THING", "FI_CREDENTIALS", "UCX_AUTH", "MASTER_PASSWD", "SLURM_COOKIE",
    "TORCH_SESSION_ID", "DB_PWD",
])
def test_token_secret_password_and_key_names_are_secret(name):
    assert is_secret(name)


@pytest.mark.parametrize("name", [
    "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_PKEY", "NCCL_DEBUG",
    "MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID", "SLURM_STEP_NODELIST", "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS", "LD_LIBRARY_PATH", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "MONKEY",
    "NCCL_IB_GID_INDEX", "WORLD_SIZE",
])
def test_ordinary_distributed_settings_are_not_secret(name):
    assert not is_secret(name)


@pytest.mark.parametrize("name", ["DDPCHECK_DB_PASS", "NCCL_GPG_PASSPHRASE"])
def test_pass_and_passphrase_names_are_secret(name):
    assert is_secret(name)


def test_redact_replaces_only_secret_values():
    env = {"NCCL_SOCKET_IFNAME": "ib0", "DDPCHECK_API_TOKEN": "t0k", "PATH": "/bin"}
    assert redact(env) == {"NCCL_SOCKET_IFNAME": "ib0", "DDPCHECK_API_TOKEN": REDACTED,
                           "PATH": "/bin"}
    assert env["DDPCHECK_API_TOKEN"] == "t0k"  # the input is not changed


def test_distributed_env_keeps_distributed_variables_sorted_and_redacted():
    env = {"SLURM_JOB_ID": "7", "NCCL_SOCKET_IFNAME": "ib0", "RANK": "0", "HOSTNAME": "gpu-a",
           "OMP_NUM_THREADS": "1", "DDPCHECK_API_TOKEN": "t0k", "NCCL_SOME_PASSWORD": "pw",
           "SLURM_JOB_KEY": "k3y", "MASTER_ADDR": "gpu-a", "PET_NNODES": "2",
           "HOME": "/root", "PATH": "/bin", "AWS_SECRET_ACCESS_KEY": "aws", "RANKING": "x"}
    out = distributed_env(env)
    assert list(out) == sorted(out)
    assert out == {"DDPCHECK_API_TOKEN": REDACTED, "HOSTNAME": "gpu-a", "MASTER_ADDR": "gpu-a",
                   "NCCL_SOCKET_IFNAME": "ib0", "NCCL_SOME_PASSWORD": REDACTED,
                   "OMP_NUM_THREADS": "1", "PET_NNODES": "2", "RANK": "0",
                   "SLURM_JOB_ID": "7", "SLURM_JOB_KEY": REDACTED}
    for secret in ("t0k", "pw", "k3y", "aws"):
        assert secret not in out.values()


def test_distributed_env_of_an_empty_environment_is_empty():
    assert distributed_env({}) == {}
