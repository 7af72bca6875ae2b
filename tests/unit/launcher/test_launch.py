"""Tests for the pure parts of launcher.launch: torchrun's command line and the workers' env."""

from __future__ import annotations

import sys
from pathlib import Path

from ddpcheck.launcher.config import RunConfig
from ddpcheck.launcher.launch import LaunchOutcome, default_results_dir, torchrun_argv, worker_env

RESULTS = Path("/tmp/ddpcheck-results")


def value_after(argv: list[str], flag: str) -> str:
    assert argv.count(flag) == 1, argv
    return argv[argv.index(flag) + 1]


def conf(argv: list[str]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in value_after(argv, "--rdzv-conf").split(","))


# --- torchrun_argv -----------------------------------------------------------------------------
def test_single_node_uses_standalone_rendezvous():
    argv = torchrun_argv(RunConfig(), 2, "run1")
    assert argv[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--standalone" in argv
    for flag in ("--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--node-rank"):
        assert flag not in argv
    assert value_after(argv, "--nnodes") == "1"
    assert value_after(argv, "--nproc-per-node") == "2"


def test_torchrun_never_restarts_and_runs_the_ddpcheck_worker():
    argv = torchrun_argv(RunConfig(), 4, "run1")
    assert value_after(argv, "--max-restarts") == "0"
    assert argv[-2:] == ["-m", "ddpcheck.worker"]
    assert argv.index("--rdzv-conf") < argv.index("ddpcheck.worker")


def test_rdzv_conf_uses_the_rendezvous_timeout_and_a_short_last_call():
    assert conf(torchrun_argv(RunConfig(rdzv_timeout=45.7), 2, "r")) == {
        "join_timeout": "45", "read_timeout": "45", "last_call_timeout": "1",
        "close_timeout": "10"}


def test_rdzv_conf_timeouts_are_at_least_one_second():
    c = conf(torchrun_argv(RunConfig(rdzv_timeout=0.2, timeout=5), 2, "r"))
    assert c["join_timeout"] == "1" and c["read_timeout"] == "1"


def test_multi_node_uses_c10d_with_endpoint_and_run_id():
    cfg = RunConfig(nodes=3, node_rank=2, rdzv_endpoint=("node0", 29400))
    argv = torchrun_argv(cfg, 8, "job-77")
    assert "--standalone" not in argv
    assert value_after(argv, "--rdzv-backend") == "c10d"
    assert value_after(argv, "--rdzv-endpoint") == "node0:29400"
    assert value_after(argv, "--rdzv-id") == "job-77"
    assert value_after(argv, "--nnodes") == "3"
    assert value_after(argv, "--nproc-per-node") == "8"


def test_multi_node_agents_join_the_launchers_store_as_clients():
    argv = torchrun_argv(RunConfig(nodes=2, rdzv_endpoint=("node0", 29500)), 2, "r")
    c = conf(argv)
    assert c["is_host"] == "false"
    assert c["join_timeout"] == "30" and c["last_call_timeout"] == "1"
    assert "--local-addr" not in argv


def test_single_node_hosts_its_own_store():
    argv = torchrun_argv(RunConfig(), 2, "r")
    assert "--local-addr" not in argv and "is_host" not in conf(argv)


def test_single_node_with_an_endpoint_from_the_scheduler_still_runs_standalone():
    # A 1-node Slurm job has an endpoint, but nobody hosts a store there: no c10d.
    argv = torchrun_argv(RunConfig(rdzv_endpoint=("127.0.0.1", 29511)), 2, "r")
    assert "--standalone" in argv and "--rdzv-endpoint" not in argv


def test_argv_is_all_strings():
    cfg = RunConfig(nodes=2, node_rank=0, rdzv_endpoint=("h", 1))
    assert all(isinstance(a, str) for a in torchrun_argv(cfg, 2, "r"))


# --- worker_env --------------------------------------------------------------------------------
def test_worker_env_exports_the_ddpcheck_settings():
    cfg = RunConfig(nodes=2, rdzv_endpoint=("h", 1), stages=("node", "ddp"), probe_timeout=7.5,
                 backend="gloo", gpus_per_replica=2)
    env = worker_env(cfg, {"PATH": "/bin"}, RESULTS, 4)
    assert env["DDPCHECK_RESULTS_DIR"] == str(RESULTS)
    assert env["DDPCHECK_STAGES"] == "node,ddp"
    assert env["DDPCHECK_PROBE_TIMEOUT"] == "7.5"
    assert env["DDPCHECK_BACKEND"] == "gloo"
    assert env["DDPCHECK_GPUS_PER_REPLICA"] == "2"
    assert env["DDPCHECK_EXPECT_WORLD_SIZE"] == "8"
    assert env["DDPCHECK_EXPECT_NPROC_PER_NODE"] == "4"
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["PATH"] == "/bin"
    assert all(isinstance(v, str) for v in env.values())


def test_worker_env_probe_timeout_is_written_without_trailing_zeros():
    env = worker_env(RunConfig(probe_timeout=20.0), {}, RESULTS, 2)
    assert env["DDPCHECK_PROBE_TIMEOUT"] == "20"


def test_worker_env_overrides_stale_ddpcheck_values_from_the_parent():
    stale = {"DDPCHECK_STAGES": "checkpoint", "DDPCHECK_RESULTS_DIR": "/old",
             "DDPCHECK_EXPECT_WORLD_SIZE": "99"}
    env = worker_env(RunConfig(stages=("node",)), stale, RESULTS, 2)
    assert env["DDPCHECK_STAGES"] == "node" and env["DDPCHECK_RESULTS_DIR"] == str(RESULTS)
    assert env["DDPCHECK_EXPECT_WORLD_SIZE"] == "2"


def test_worker_env_defaults_omp_num_threads_to_one_but_keeps_a_users_value():
    assert worker_env(RunConfig(), {}, RESULTS, 2)["OMP_NUM_THREADS"] == "1"
    assert worker_env(RunConfig(), {"OMP_NUM_THREADS": "8"}, RESULTS, 2)["OMP_NUM_THREADS"] == "8"


def test_worker_env_drops_a_stale_checkpoint_dir():
    env = worker_env(RunConfig(), {"DDPCHECK_CHECKPOINT_DIR": "/stale"}, RESULTS, 2)
    assert "DDPCHECK_CHECKPOINT_DIR" not in env


def test_worker_env_sets_the_configured_checkpoint_dir():
    cfg = RunConfig(checkpoint_dir=Path("/shared/ck"))
    env = worker_env(cfg, {"DDPCHECK_CHECKPOINT_DIR": "/stale"}, RESULTS, 2)
    assert env["DDPCHECK_CHECKPOINT_DIR"] == "/shared/ck"


def test_worker_env_does_not_modify_the_given_environment():
    parent = {"DDPCHECK_CHECKPOINT_DIR": "/stale", "PATH": "/bin"}
    worker_env(RunConfig(), parent, RESULTS, 2)
    assert parent == {"DDPCHECK_CHECKPOINT_DIR": "/stale", "PATH": "/bin"}


def test_worker_env_is_read_back_by_the_worker_settings():
    from ddpcheck.worker.settings import WorkerSettings

    cfg = RunConfig(stages=("rendezvous", "ddp"), probe_timeout=3.0, gpus_per_replica=2,
                 checkpoint_dir=Path("/shared/ck"))
    s = WorkerSettings.from_env(worker_env(cfg, {}, RESULTS, 4))
    assert s.stages == ("rendezvous", "ddp") and s.probe_timeout == 3.0
    assert s.gpus_per_replica == 2 and s.checkpoint_dir == Path("/shared/ck")
    assert s.results_dir == RESULTS
    assert (s.expected_world_size, s.expected_nproc_per_node) == (4, 4)


# --- small pieces ------------------------------------------------------------------------------
def test_launch_outcome_defaults():
    o = LaunchOutcome(0, 1.5)
    assert not o.deadline_hit and not o.killed_after_end
    assert o.stopped_pids == [] and o.alive_pids == []
    assert LaunchOutcome(0, 1.0).stopped_pids is not o.stopped_pids


def test_default_results_dir_is_under_tmpdir(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    path = default_results_dir()
    assert path.parent == tmp_path and path.name.startswith("ddpcheck-")
