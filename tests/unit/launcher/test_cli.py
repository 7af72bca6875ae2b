"""Tests for ddpcheck.launcher.cli: exit codes, one-line usage errors, `list` and `env`.

Never launches torchrun: ddpcheck.launcher.runner is replaced by a stub that records the RunConfig.
"""

from __future__ import annotations

import json
import os
import sys
import types

import pytest

from ddpcheck.launcher import cli
from ddpcheck.launcher.config import RunConfig
from ddpcheck.node.envinfo import REDACTED
from ddpcheck.report.catalog import list_probes
from ddpcheck.scheduler.detect import JobEnv
from ddpcheck.stages import STAGES

SCHEDULER_PREFIXES = ("DDPCHECK_", "SLURM_", "PBS_", "PET_", "TORCHELASTIC_", "MASTER_")
SCHEDULER_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                   "NODE_RANK", "GROUP_WORLD_SIZE")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No job or ddpcheck variables from the machine running the tests."""
    for name in list(os.environ):
        if name.startswith(SCHEDULER_PREFIXES) or name in SCHEDULER_NAMES:
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def runs(monkeypatch):
    """Replace the runner: a config that gets this far is recorded, nothing is launched."""
    seen: list[RunConfig] = []
    fake = types.ModuleType("ddpcheck.launcher.runner")

    def run(cfg: RunConfig, job: JobEnv) -> int:
        assert isinstance(job, JobEnv)
        seen.append(cfg)
        return 0

    fake.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ddpcheck.launcher.runner", fake)
    return seen


def usage_error(capsys, argv) -> str:
    """Run main(argv), check it is a usage error, return the one stderr line."""
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and code == cli.Exit.USAGE
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ddpcheck: error: ")
    return lines[0]


# --- usage errors: exit 2, one line, no traceback ----------------------------------------------
@pytest.mark.parametrize("argv, expected", [
    (["run", "--bogus"], "unrecognized arguments: --bogus"),
    (["bogus"], "invalid choice"),
    ([], "required"),
    (["run", "--nodes", "0"], "--nodes: expected a positive integer, got '0'"),
    (["run", "--nodes", "x"], "--nodes: expected a positive integer, got 'x'"),
    (["run", "--backend", "mpi"], "--backend: expected one of auto, nccl, gloo, got 'mpi'"),
    (["run", "--stages", "nope"], "--stages: unknown stage 'nope'"),
    (["run", "--timeout", "-1"], "--timeout: expected a number of seconds > 0, got '-1'"),
    (["run", "--timeout", "nan"], "--timeout: expected a number of seconds > 0, got 'nan'"),
    (["run", "--rdzv-endpoint", "host"], "--rdzv-endpoint: expected HOST:PORT, got 'host'"),
    (["run", "--rdzv-endpoint", "h:70000"], "--rdzv-endpoint: expected HOST:PORT with a port"),
    (["run", "--nodes"], "expected one argument"),
    (["run", "--nodes", "2"], "a multi-node run needs --rdzv-endpoint"),
    (["run", "--timeout", "10"], "must be longer than the rendezvous deadline"),
])
def test_bad_command_line_exits_2_with_one_error_line(capsys, runs, argv, expected):
    line = usage_error(capsys, argv)
    assert expected in line
    assert runs == []


def test_bad_environment_variable_is_named_in_the_error(capsys, monkeypatch, runs):
    monkeypatch.setenv("DDPCHECK_NODES", "abc")
    line = usage_error(capsys, ["run"])
    assert line.startswith("ddpcheck: error: DDPCHECK_NODES=")
    assert "abc" in line and "expected a positive integer" in line
    assert runs == []


def test_unwritable_json_path_is_a_usage_error(capsys, runs):
    line = usage_error(capsys, ["run", "--json", "/proc/ddpcheck-report.json"])
    assert line.startswith("ddpcheck: error: --json /proc/ddpcheck-report.json: cannot write")
    assert runs == []


def test_json_path_in_a_missing_directory_is_a_usage_error(capsys, tmp_path, runs):
    line = usage_error(capsys, ["run", "--json", str(tmp_path / "missing" / "r.json")])
    assert "does not exist" in line
    assert runs == []


# --- valid runs reach the runner ----------------------------------------------------------------
def test_valid_flags_reach_the_runner_as_a_config(capsys, runs, tmp_path):
    code = cli.main(["run", "--nodes", "2", "--rdzv-endpoint", "[::1]:29500", "--node-rank", "1",
                     "--stages", "ddp,node", "--json", str(tmp_path / "r.json"), "-v"])
    assert code == 0
    (cfg,) = runs
    assert cfg.nodes == 2 and cfg.rdzv_endpoint == ("::1", 29500) and cfg.node_rank == 1
    assert cfg.stages == ("node", "ddp") and cfg.verbose and not cfg.traceback
    assert cfg.sources["nodes"] == "--nodes"
    assert capsys.readouterr().err == ""


def test_environment_settings_reach_the_runner(runs, monkeypatch):
    monkeypatch.setenv("DDPCHECK_BACKEND", "gloo")
    assert cli.main(["run"]) == 0
    assert runs[0].backend == "gloo" and runs[0].sources["backend"] == "DDPCHECK_BACKEND"


def test_the_runners_exit_code_is_returned(monkeypatch):
    fake = types.ModuleType("ddpcheck.launcher.runner")
    fake.run = lambda cfg, job: 1  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ddpcheck.launcher.runner", fake)
    assert cli.main(["run"]) == 1


def test_an_internal_error_is_unknown_exit_3_never_not_ready(monkeypatch, capsys):
    """ddpcheck's own exception is the monitoring plugins' UNKNOWN, not a cluster verdict."""
    fake_runner(monkeypatch, KeyError("stage"))
    assert cli.main(["run"]) == cli.Exit.UNKNOWN == 3
    err = capsys.readouterr().err
    assert err.startswith("UNKNOWN: the check could not be completed: ddpcheck's own error")
    assert "KeyError" in err and "NOT READY" not in err


def fake_runner(monkeypatch, exc: BaseException) -> None:
    fake = types.ModuleType("ddpcheck.launcher.runner")

    def run(cfg: RunConfig, job: JobEnv) -> int:
        raise exc

    fake.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ddpcheck.launcher.runner", fake)


def test_an_unexpected_runner_error_is_one_line_without_traceback(capsys, monkeypatch):
    fake_runner(monkeypatch, RuntimeError("store exploded"))
    assert cli.main(["run"]) == 3
    out, err = capsys.readouterr()
    assert err.splitlines() == ["UNKNOWN: the check could not be completed: ddpcheck's own "
                                "error, not the cluster's: RuntimeError: store exploded (rerun "
                                "with --traceback and report it)"]
    assert "Traceback" not in out + err


def test_traceback_flag_lets_an_unexpected_runner_error_through(monkeypatch):
    fake_runner(monkeypatch, RuntimeError("store exploded"))
    with pytest.raises(RuntimeError, match="store exploded"):
        cli.main(["run", "--traceback"])


def test_ctrl_c_during_the_run_exits_130_with_one_line(capsys, monkeypatch):
    fake_runner(monkeypatch, KeyboardInterrupt())
    assert cli.main(["run"]) == 130
    assert capsys.readouterr().err == "ddpcheck: interrupted\n"


def test_every_setting_is_a_run_flag_with_help_naming_its_variable(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["run", "--help"])
    assert done.value.code == 0
    help_text = capsys.readouterr().out
    for _name, flag, var, _ in cli.SETTINGS:
        assert flag in help_text and var in help_text


# --- list ---------------------------------------------------------------------------------------
def test_list_prints_every_stages_probes_in_order(capsys):
    assert cli.main(["list"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    probes = list_probes()
    assert len(lines) == len(probes)
    for line, (stage, name, doc) in zip(lines, probes):
        assert line.split()[:2] == [stage, name]
        assert line.rstrip().endswith(doc.rstrip())
    assert [ln.split()[0] for ln in lines] == sorted((ln.split()[0] for ln in lines),
                                                     key=list(STAGES).index)
    assert {ln.split()[0] for ln in lines} == set(STAGES)


# --- env ----------------------------------------------------------------------------------------
SECRETS = {
    "DDPCHECK_API_TOKEN": "tok-5f1c9e0a",
    "NCCL_SOME_PASSWORD": "pw-hunter2-77",
    "SLURM_JOB_KEY": "key-aa91b3",
    "TORCH_SECRET": "sec-0d5e21",
    "MASTER_ACCESS_KEY": "ak-c0ffee11",
}


def test_env_prints_json_with_secrets_redacted(capsys, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "ib0")
    monkeypatch.setenv("MASTER_ADDR", "node0")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-9b7c3d")  # not a distributed variable
    assert cli.main(["env"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    facts = json.loads(out)
    assert {"host", "python", "ddpcheck", "env"} <= set(facts)
    env = facts["env"]
    for name in SECRETS:
        assert env[name] == REDACTED
    assert env["NCCL_SOCKET_IFNAME"] == "ib0" and env["MASTER_ADDR"] == "node0"
    assert "AWS_SECRET_ACCESS_KEY" not in env
    for value in [*SECRETS.values(), "aws-9b7c3d"]:
        assert value not in out


def test_the_scheduler_environment_is_read_once_per_run(runs, monkeypatch):
    from ddpcheck.scheduler import detect as detect_module

    calls: list[int] = []
    real = detect_module.detect

    def counted(env, *args, **kwargs):
        calls.append(1)
        return real(env, *args, **kwargs)

    monkeypatch.setattr(detect_module, "detect", counted)
    monkeypatch.setenv("SLURM_JOB_ID", "48213")
    monkeypatch.setenv("SLURM_NNODES", "1")
    assert cli.main(["run"]) == 0
    assert len(calls) == 1 and runs[0].rdzv_id == "ddpcheck-48213"
