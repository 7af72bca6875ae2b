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
       "checkpoint_dir": " ", "checkpoint_size": "lots", "results_dir": "/proc/ddpcheck-results",
       "expect_busbw": "fast",
       "slow_link_ratio": "2", "plot_dir": " ", "junit_path": "/nonexistent/dir/r.xml",
       "baseline": "/nonexistent/base.json", "regression_ratio": "1.5",
       "launch": "foo", "init_method": "tcp://host", "master_addr": " ", "master_port": "99999",
       "rank_offsets": "0,two", "world_size": "0"}

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


# Launch settings that parse alone but cannot work together, or malformed init methods.
COMBINATIONS = [
    ["--launch", "spawn", "--nodes", "2", "--master-addr", "node0"],  # no --node-rank
    ["--launch", "spawn", "--nodes", "2", "--node-rank", "0"],  # no MASTER_ADDR
    ["--launch", "spawn", "--nodes", "2", "--node-rank", "0", "--master-addr", "node0",
     "--rank-offsets", "0"],  # one offset for two nodes
    ["--launch", "spawn", "--nodes", "2", "--node-rank", "0",
     "--init-method", "file:///shared/init"],  # file:// has no master: needs --rdzv-endpoint
    ["--launch", "spawn", "--nodes", "2", "--node-rank", "0", "--master-addr", "node0",
     "--master-port", "29500", "--rdzv-endpoint", "node0:29500"],  # check-in on rank 0's port
    ["--init-method", "tcp://node0:29500"],  # torchrun forms its world through env://
    ["--rank-offsets", "0,2"],  # a spawn setting under torchrun
    ["--launch", "srun"],  # not inside a Slurm job
    *[["--launch", "spawn", "--init-method", bad] for bad in (
        "udp://node0:1", "tcp://node0", "tcp://node0:0", "tcp://node0:1?rank=0", "env://x",
        "file://relative/init", "file:///shared/", "node0:29500")],
]


@pytest.mark.parametrize("args", COMBINATIONS, ids=lambda a: " ".join(a))
def test_launch_settings_that_cannot_work_are_one_line_and_exit_2(args, monkeypatch,
                                                                   capsys) -> None:
    clean_env(monkeypatch)
    code, err = run_main(["run", *args], capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("ddpcheck: error: ")
    assert "Traceback" not in err
