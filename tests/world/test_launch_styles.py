"""Launch styles on one host: ranks started by ddpcheck's own launcher as mp.spawn or srun
start them, and the legacy ``torch.distributed.launch`` line with ``--local-rank``.

Real processes: the launcher, per-rank wrappers, pytest workers, gloo.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.world
FAST = ["--probe-timeout", "8", "-q"]


def test_srun_style_ranks_find_rank_0_on_the_first_node_of_the_step(ddpcheck_run):
    slurm = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": socket.gethostname()}
    run = ddpcheck_run("--launch", "srun", "--nproc-per-node", "2", "--stages", "rendezvous",
                       *FAST, env=slurm)
    assert run.finish() == 0, run.stdout + run.stderr
    report = run.report()
    assert report["ready"] and report["world_size"] == 2
    # the master port srun-started ranks use without MASTER_PORT: derived from the job id
    assert report["config"]["master_addr"] == socket.gethostname()
    assert report["config"]["master_port"] == 20000 + 4242


def test_a_spawned_rank_killed_mid_stage_is_named_and_the_run_ends(ddpcheck_run, tmp_path):
    with socket.socket() as s:  # a free port for rank 0's store
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = ddpcheck_run("--launch", "spawn", "--init-method", f"tcp://127.0.0.1:{port}",
                       "--nproc-per-node", "2", "--stages", "rendezvous,collectives,ddp",
                       *FAST)
    pid = run.wait_for_probe_start(1, "test_ddp_steps_match_a_single_process_reference")
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    assert run.finish() == 1
    assert time.monotonic() - killed_at < 8 + 25
    problem = next(p for p in run.report()["problems"] if p["code"] == "rank-killed")
    assert problem["ranks"] == [1] and "SIGKILL" in problem["observed"]


def test_torch_distributed_launch_passes_local_rank_and_the_probes_read_it(tmp_path):
    results = tmp_path / "results"
    env = {**os.environ, "DDPCHECK_RESULTS_DIR": str(results),
           "DDPCHECK_STAGES": "rendezvous", "DDPCHECK_PROBE_TIMEOUT": "8"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.launch", "--nproc-per-node",
                           "2", "-m", "ddpcheck.worker"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert sorted(p.name for p in results.glob("exit-*.json")) == ["exit-0.json", "exit-1.json"]
    assert "unrecognized arguments" not in done.stdout + done.stderr
