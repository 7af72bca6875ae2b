"""Every flag, every DDPCHECK_* variable and the scheduler variables ddpcheck reads, fed a
malformed value: one line on stderr naming the value and where it came from, exit 2, never
a traceback and never a run."""

from __future__ import annotations

import pytest

from ddpcheck.launcher import cli
from ddpcheck.launcher.config import SETTINGS

# A malformed value for each setting (the parser of each is in config.SETTINGS).
BAD = {"nodes": "two", "node_rank": "-1", "nproc_per_node": "0", "rdzv_endpoint": "node0:port",
       "rdzv_id": " ", "backend": "mpi", "gpus_per_replica": "1.5", "stages": "warp",
       "timeout": "-3", "probe_timeout": "soon", "rdzv_timeout": "0", "json_path": " ",
       "checkpoint_dir": " ", "results_dir": "/proc/ddpcheck-results", "expect_busbw": "fast",
       "slow_link_ratio": "2", "plot_dir": " ", "junit_path": "/nonexistent/dir/r.xml",
       "baseline": "/nonexistent/base.json", "regression_ratio": "1.5"}

SCHEDULER = {  # Slurm/PBS variables ddpcheck reads for the job's shape
    "SLURM_JOB_NODELIST": "node[01-", "SLURM_JOB_NUM_NODES": "many", "SLURM_NODEID": "x",
    "MASTER_PORT": "99999", "SLURM_GPUS_ON_NODE": "lots", "SLURM_NTASKS_PER_NODE": "2(x",
}


def test_every_setting_has_a_bad_value_here() -> None:
    assert set(BAD) == {name for name, *_ in SETTINGS}


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(argv)
    err = capsys.readouterr().err
    return code, err


def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith(("DDPCHECK_", "SLURM_", "PBS_", "MASTER_", "TORCHELASTIC_")):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("name,flag,var", [(n, f, v) for n, f, v, _ in SETTINGS])
def test_a_malformed_flag_is_one_line_and_exit_2(name, flag, var, monkeypatch, capsys) -> None:
    clean_env(monkeypatch)
    code, err = run_main(["run", flag, BAD[name]], capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("ddpcheck: error: ") and flag in err
    assert "Traceback" not in err


@pytest.mark.parametrize("name,flag,var", [(n, f, v) for n, f, v, _ in SETTINGS])
def test_a_malformed_variable_is_one_line_and_exit_2(name, flag, var, monkeypatch,
                                                      capsys) -> None:
    clean_env(monkeypatch)
    monkeypatch.setenv(var, BAD[name] if BAD[name].strip() else "")
    if not BAD[name].strip():  # an empty variable means unset, as for every variable
        pytest.skip("empty values of variables are read as unset")
    code, err = run_main(["run"], capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and var in err and "Traceback" not in err


@pytest.mark.parametrize("var", sorted(SCHEDULER))
def test_a_malformed_scheduler_variable_is_one_line_and_exit_2(var, monkeypatch,
                                                               capsys) -> None:
    clean_env(monkeypatch)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[0-1]")
    monkeypatch.setenv(var, SCHEDULER[var])
    code, err = run_main(["run"], capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and var in err and repr(SCHEDULER[var])[:8] in err
    assert "Traceback" not in err
