"""Tests for launcher.config: precedence, sources, consistency checks and the --json path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpcheck.launcher import config
from ddpcheck.launcher.config import (
    RunConfig,
    build_config,
    check_writable_file,
    endpoint_text,
    run_timeout,
)
from ddpcheck.parsing import UsageError
from ddpcheck.stages import STAGES


def build(flags=None, env=None, scheduler=None) -> RunConfig:
    return build_config(flags or {}, env or {}, scheduler)


# --- defaults ----------------------------------------------------------------------------------
def test_defaults_without_flags_env_or_scheduler():
    cfg = build()
    assert (cfg.nodes, cfg.node_rank) == (1, None)
    assert cfg.nproc_per_node is None and cfg.rdzv_endpoint is None
    assert cfg.backend == "auto" and cfg.gpus_per_replica == 1
    assert cfg.stages == tuple(STAGES)
    assert (cfg.timeout, cfg.probe_timeout, cfg.rdzv_timeout) == (
        config.DEFAULT_TIMEOUT, config.DEFAULT_PROBE_TIMEOUT, config.DEFAULT_RDZV_TIMEOUT)
    assert cfg.json_path is None and cfg.checkpoint_dir is None and cfg.results_dir is None
    assert cfg.rdzv_id == "ddpcheck" and not cfg.verbose and not cfg.traceback
    assert dict(cfg.sources) == {}


def test_every_setting_has_a_flag_and_a_ddpcheck_variable():
    for name, flag, var, _ in config.SETTINGS:
        assert name in RunConfig.__dataclass_fields__
        assert flag == "--" + name.replace("_", "-") or (name, flag) in (
            ("json_path", "--json"), ("plot_dir", "--plot"), ("junit_path", "--junitxml"))
        assert var.startswith("DDPCHECK_")


# --- precedence and sources --------------------------------------------------------------------
def test_flag_beats_environment_beats_scheduler():
    sched = {"nproc_per_node": (3, "SLURM_NTASKS_PER_NODE")}
    cfg = build({"nproc_per_node": "8"}, {"DDPCHECK_NPROC_PER_NODE": "4"}, sched)
    assert cfg.nproc_per_node == 8 and cfg.sources["nproc_per_node"] == "--nproc-per-node"
    cfg = build({}, {"DDPCHECK_NPROC_PER_NODE": "4"}, sched)
    assert cfg.nproc_per_node == 4 and cfg.sources["nproc_per_node"] == "DDPCHECK_NPROC_PER_NODE"
    cfg = build({}, {}, sched)
    assert cfg.nproc_per_node == 3 and cfg.sources["nproc_per_node"] == "SLURM_NTASKS_PER_NODE"


def test_flags_given_as_none_fall_through_to_the_environment():
    cfg = build({"backend": None}, {"DDPCHECK_BACKEND": "gloo"})
    assert cfg.backend == "gloo" and cfg.sources == {"backend": "DDPCHECK_BACKEND"}


def test_blank_environment_variable_counts_as_unset():
    cfg = build({}, {"DDPCHECK_NODES": "  ", "DDPCHECK_BACKEND": ""},
                {"backend": ("gloo", "scheduler")})
    assert cfg.nodes == 1 and "nodes" not in cfg.sources
    assert cfg.backend == "gloo" and cfg.sources["backend"] == "scheduler"


def test_sources_record_only_settings_that_were_given():
    cfg = build({"timeout": "600", "stages": "node,ddp"}, {"DDPCHECK_PROBE_TIMEOUT": "5"})
    assert dict(cfg.sources) == {"timeout": "--timeout", "stages": "--stages",
                                 "probe_timeout": "DDPCHECK_PROBE_TIMEOUT"}
    assert cfg.timeout == 600.0 and cfg.probe_timeout == 5.0 and cfg.stages == ("node", "ddp")


def test_every_setting_parses_from_its_environment_variable(tmp_path):
    env = {"DDPCHECK_NODES": "2", "DDPCHECK_NODE_RANK": "1", "DDPCHECK_NPROC_PER_NODE": "auto",
           "DDPCHECK_RDZV_ENDPOINT": "[::1]:29400", "DDPCHECK_RDZV_ID": " job7 ",
           "DDPCHECK_BACKEND": "NCCL", "DDPCHECK_GPUS_PER_REPLICA": "2",
           "DDPCHECK_STAGES": "ddp,node", "DDPCHECK_TIMEOUT": "120",
           "DDPCHECK_PROBE_TIMEOUT": "7.5", "DDPCHECK_RDZV_TIMEOUT": "60",
           "DDPCHECK_JSON": str(tmp_path / "r.json"), "DDPCHECK_CHECKPOINT_DIR": "/shared/ck",
           "DDPCHECK_RESULTS_DIR": str(tmp_path / "res"), "DDPCHECK_EXPECT_BUSBW": "40",
           "DDPCHECK_SLOW_LINK_RATIO": "0.3", "DDPCHECK_PLOT": str(tmp_path / "plots"),
           "DDPCHECK_JUNITXML": str(tmp_path / "r.xml"),
           "DDPCHECK_BASELINE": str(tmp_path / "base.json"),
           "DDPCHECK_REGRESSION_RATIO": "0.7", "DDPCHECK_QUIET": "1",
           "DDPCHECK_LAUNCH": "spawn", "DDPCHECK_INIT_METHOD": "tcp://gpu-a:23456",
           "DDPCHECK_MASTER_ADDR": "gpu-a", "DDPCHECK_MASTER_PORT": "23456",
           "DDPCHECK_RANK_OFFSETS": "0,8", "DDPCHECK_WORLD_SIZE": "10",
           "DDPCHECK_CHECKPOINT_SIZE": "40G"}
    (tmp_path / "base.json").write_text('{"stages": [], "measurements": {}}')
    cfg = build({}, env)
    assert cfg.junit_path == tmp_path / "r.xml" and cfg.baseline == tmp_path / "base.json"
    assert cfg.regression_ratio == 0.7 and cfg.quiet
    assert cfg.expect_busbw == 40.0 and cfg.slow_link_ratio == 0.3
    assert cfg.plot_dir == tmp_path / "plots"
    assert cfg.nodes == 2 and cfg.node_rank == 1 and cfg.nproc_per_node is None
    assert cfg.rdzv_endpoint == ("::1", 29400) and cfg.rdzv_id == "job7"
    assert cfg.backend == "nccl" and cfg.gpus_per_replica == 2 and cfg.stages == ("node", "ddp")
    assert (cfg.timeout, cfg.probe_timeout, cfg.rdzv_timeout) == (120.0, 7.5, 60.0)
    assert cfg.json_path == tmp_path / "r.json" and cfg.checkpoint_dir == Path("/shared/ck")
    assert cfg.results_dir == tmp_path / "res" and cfg.checkpoint_size == 40 << 30
    assert (cfg.launch, cfg.init_method.url, cfg.master_addr, cfg.master_port) == (
        "spawn", "tcp://gpu-a:23456", "gpu-a", 23456)
    assert (cfg.rank_offsets, cfg.world_size) == ((0, 8), 10)
    assert set(cfg.sources) == {name for name, *_ in config.SETTINGS}
    assert all(src.startswith("DDPCHECK_") for src in cfg.sources.values())


def test_verbose_and_traceback_come_from_the_flags():
    cfg = build({"verbose": True, "traceback": True})
    assert cfg.verbose and cfg.traceback


def test_scheduler_values_are_taken_as_given_with_their_source():
    sched = {"nodes": (2, "SLURM_NNODES"), "rdzv_endpoint": (("gpu-07", 29500),
                                                            "SLURM_JOB_NODELIST"),
             "node_rank": (1, "SLURM_NODEID")}
    cfg = build({}, {}, sched)
    assert (cfg.nodes, cfg.rdzv_endpoint, cfg.node_rank) == (2, ("gpu-07", 29500), 1)
    assert cfg.sources == {"nodes": "SLURM_NNODES", "rdzv_endpoint": "SLURM_JOB_NODELIST",
                           "node_rank": "SLURM_NODEID"}


# --- bad values name their source --------------------------------------------------------------
def test_bad_flag_value_names_the_flag():
    with pytest.raises(UsageError, match=r"^--gpus-per-replica: expected a positive integer, "
                                         r"got '0'$"):
        build({"gpus_per_replica": "0"})


def test_bad_environment_value_names_the_variable_even_when_a_valid_flag_is_absent():
    with pytest.raises(UsageError) as err:
        build({}, {"DDPCHECK_BACKEND": "mpi"})
    assert str(err.value).startswith("DDPCHECK_BACKEND=")
    assert "(environment)" in str(err.value)
    assert "expected one of auto, nccl, gloo" in str(err.value)


def test_a_flag_shadows_a_bad_environment_value():
    assert build({"backend": "gloo"}, {"DDPCHECK_BACKEND": "mpi"}).backend == "gloo"


@pytest.mark.parametrize("name, raw", [("rdzv_id", " "), ("json_path", ""),
                                       ("checkpoint_dir", " "), ("results_dir", "")])
def test_empty_string_flags_are_rejected(name, raw):
    with pytest.raises(UsageError, match="expected a"):
        build({name: raw})


# --- consistency ------------------------------------------------------------------------------
def test_multi_node_without_an_endpoint_is_rejected_naming_the_nodes_source():
    with pytest.raises(UsageError) as err:
        build({"nodes": "2"})
    assert str(err.value).startswith("--nodes 2: a multi-node run needs --rdzv-endpoint")
    with pytest.raises(UsageError, match=r"^DDPCHECK_NODES=3: a multi-node run"):
        build({}, {"DDPCHECK_NODES": "3"})
    with pytest.raises(UsageError, match=r"^SLURM_NNODES=4: a multi-node run"):
        build({}, {}, {"nodes": (4, "SLURM_NNODES")})
    with pytest.raises(UsageError, match=r"^SLURM_JOB_NUM_NODES=4: a multi-node run"):
        build({}, {}, {"nodes": (4, "SLURM_JOB_NUM_NODES=4")})


def test_multi_node_with_an_endpoint_is_accepted():
    cfg = build({"nodes": "2", "rdzv_endpoint": "node0:29500"})
    assert cfg.nodes == 2 and cfg.rdzv_endpoint == ("node0", 29500)


@pytest.mark.parametrize("nodes, rank", [("1", "1"), ("2", "2"), ("2", "5")])
def test_node_rank_must_be_below_nodes(nodes, rank):
    expected = rf"^--node-rank {rank}: must be below --nodes \({nodes}\)"
    with pytest.raises(UsageError, match=expected):
        build({"nodes": nodes, "node_rank": rank, "rdzv_endpoint": "h:1"})


def test_node_rank_from_the_environment_is_named_in_the_error():
    with pytest.raises(UsageError, match=r"^DDPCHECK_NODE_RANK=3: must be below"):
        build({"nodes": "2", "rdzv_endpoint": "h:1"}, {"DDPCHECK_NODE_RANK": "3"})


@pytest.mark.parametrize("timeout, rdzv", [("30", "30"), ("10", "30"), ("100", "200")])
def test_run_deadline_must_exceed_the_rendezvous_deadline(timeout, rdzv):
    with pytest.raises(UsageError, match=r"^--timeout \S+: the whole-run deadline must be "
                                         r"longer than the rendezvous deadline"):
        build({"timeout": timeout, "rdzv_timeout": rdzv})


def test_run_deadline_just_above_rendezvous_deadline_is_accepted():
    cfg = build({"timeout": "30.5", "rdzv_timeout": "30"})
    assert cfg.timeout == 30.5


def test_deadline_conflict_from_rdzv_timeout_names_the_flags():
    with pytest.raises(UsageError) as err:
        build({"rdzv_timeout": "400"})
    assert "--rdzv-timeout" in str(err.value) and "--timeout" in str(err.value)


# --- --json path ------------------------------------------------------------------------------
def test_json_path_that_is_a_directory_is_rejected(tmp_path):
    with pytest.raises(UsageError, match=r"^--json .*: is a directory, expected a file path$"):
        build({"json_path": str(tmp_path)})


def test_json_path_in_a_missing_directory_is_rejected(tmp_path):
    path = tmp_path / "nope" / "report.json"
    with pytest.raises(UsageError) as err:
        build({"json_path": str(path)})
    assert str(err.value) == f"--json {path}: directory {path.parent} does not exist"


def test_json_path_whose_parent_is_a_file_is_rejected(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="does not exist"):
        build({"json_path": str(tmp_path / "file" / "report.json")})


def test_unwritable_json_path_is_rejected_with_the_os_reason():
    with pytest.raises(UsageError, match=r"^--json /proc/ddpcheck-report\.json: cannot write "
                                         r"there \(.+\)$"):
        build({"json_path": "/proc/ddpcheck-report.json"})


def test_json_path_error_from_the_environment_names_the_variable(tmp_path):
    with pytest.raises(UsageError, match=r"^DDPCHECK_JSON .*: is a directory"):
        build({}, {"DDPCHECK_JSON": str(tmp_path)})


def test_json_path_probe_leaves_no_file_behind(tmp_path):
    path = tmp_path / "report.json"
    cfg = build({"json_path": str(path)})
    assert cfg.json_path == path
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_json_path_probe_keeps_an_existing_file_untouched(tmp_path):
    path = tmp_path / "report.json"
    path.write_text('{"old": true}')
    build({"json_path": str(path)})
    assert path.read_text() == '{"old": true}'


def test_relative_json_path_is_checked_against_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check_writable_file(Path("report.json"), "--json")
    assert list(tmp_path.iterdir()) == []


# --- rdzv_id ----------------------------------------------------------------------------------
def test_rdzv_id_defaults_to_one_fixed_id_so_nodes_started_by_hand_agree():
    assert build().rdzv_id == "ddpcheck"


def test_rdzv_id_from_the_scheduler_mapping_is_recorded_with_its_source():
    cfg = build({}, {}, {"rdzv_id": ("ddpcheck-4242", "SLURM_JOB_ID=4242")})
    assert cfg.rdzv_id == "ddpcheck-4242"
    assert cfg.sources["rdzv_id"] == "SLURM_JOB_ID=4242"


@pytest.mark.parametrize("env, run_id, var", [
    ({"SLURM_JOB_ID": "4242"}, "ddpcheck-4242", "SLURM_JOB_ID"),
    ({"PBS_JOBID": "77.pbs"}, "ddpcheck-77.pbs", "PBS_JOBID"),
])
def test_rdzv_id_comes_from_the_slurm_or_pbs_job_id(env, run_id, var):
    from ddpcheck.scheduler.detect import detect
    from ddpcheck.scheduler.jobsettings import scheduler_settings

    cfg = build({}, env, scheduler_settings(detect(env)))
    assert cfg.rdzv_id == run_id
    assert cfg.sources["rdzv_id"].startswith(var)


def test_rdzv_id_flag_and_variable_beat_the_job_id():
    sched = {"rdzv_id": ("ddpcheck-4242", "SLURM_JOB_ID=4242")}
    env = {"DDPCHECK_RDZV_ID": "from-env"}
    assert build({}, env, sched).rdzv_id == "from-env"
    assert build({"rdzv_id": "from-flag"}, env, sched).rdzv_id == "from-flag"


def test_new_run_id_is_a_fresh_short_hex_string():
    a, b = config.new_run_id(), config.new_run_id()
    assert a != b and len(a) == 12 and int(a, 16) >= 0


# --- to_dict ----------------------------------------------------------------------------------
def test_to_dict_is_json_serialisable_with_text_paths_and_endpoint(tmp_path):
    cfg = build({"nodes": "2", "rdzv_endpoint": "node0:29500",
                 "json_path": str(tmp_path / "r.json"), "checkpoint_dir": "/shared/ck",
                 "stages": "node"})
    data = json.loads(json.dumps(cfg.to_dict()))
    assert data["rdzv_endpoint"] == "node0:29500"
    assert data["json_path"] == str(tmp_path / "r.json")
    assert data["checkpoint_dir"] == "/shared/ck" and data["results_dir"] is None
    assert data["stages"] == ["node"] and data["nodes"] == 2
    assert data["sources"]["rdzv_endpoint"] == "--rdzv-endpoint"


def test_to_dict_of_the_defaults_is_json_serialisable():
    data = json.loads(json.dumps(build().to_dict()))
    assert data["rdzv_endpoint"] is None and data["json_path"] is None


def test_endpoint_text_round_trips_through_the_parser():
    from ddpcheck.parsing import endpoint

    assert endpoint_text(None) is None
    for ep in [("node0", 29500), ("10.0.0.1", 1), ("::1", 29500)]:
        assert endpoint(endpoint_text(ep)) == ep


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        build().nodes = 3  # type: ignore[misc]


@pytest.mark.parametrize("env, message", [
    ({"DDPCHECK_QUIET": "maybe"}, "DDPCHECK_QUIET='maybe' (environment): expected 1/0"),
    ({"DDPCHECK_REGRESSION_RATIO": "1.5"}, "DDPCHECK_REGRESSION_RATIO='1.5' (environment): "
                                           "expected a ratio between 0 and 1"),
    ({"DDPCHECK_BASELINE": "/nonexistent/base.json"}, "DDPCHECK_BASELINE /nonexistent/base.json"
                                                      ": cannot read it"),
    ({"DDPCHECK_JUNITXML": "/nonexistent/dir/r.xml"}, "directory /nonexistent/dir does not"),
])
def test_bad_progress_junit_and_baseline_values_are_one_line_usage_errors(env, message):
    with pytest.raises(UsageError) as exc:
        build({}, env)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_a_baseline_that_is_not_a_report_is_a_usage_error(tmp_path):
    bad = tmp_path / "base.json"
    bad.write_text("[1, 2]")
    with pytest.raises(UsageError, match="not a ddpcheck report"):
        build({"baseline": str(bad)})


def test_quiet_comes_from_the_flag_or_the_environment():
    assert build({"quiet": True}).quiet and not build({}).quiet
    assert not build({}, {"DDPCHECK_QUIET": "0"}).quiet


def test_preflight_alone_is_the_network_only_mode() -> None:
    from ddpcheck.launcher.config import NETWORK_ONLY, parse_run_stages
    from ddpcheck.stages import STAGES

    assert parse_run_stages("preflight") == NETWORK_ONLY == ("preflight",)
    assert parse_run_stages("preflight,collectives") == ("collectives",)  # preflight always runs
    assert parse_run_stages("all") == tuple(STAGES)


def test_the_run_deadline_is_the_users_when_given_and_grows_with_the_world_otherwise() -> None:
    assert run_timeout(config.RunConfig(nodes=1), 2) == pytest.approx(300.0, abs=1.0)
    assert run_timeout(config.RunConfig(nodes=1024), 8) > 1200.0
    given = config.RunConfig(nodes=1024, timeout=90.0, sources={"timeout": "--timeout"})
    assert run_timeout(given, 8) == 90.0
