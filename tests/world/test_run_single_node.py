"""``ddpcheck run`` on this host, end to end: real torchrun, real pytest workers, gloo.

Each test starts a real run; fault tests break a rank on purpose (SIGKILL, SIGSTOP) while
it is inside a known probe, found from its rank file, and check the diagnosis.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from ddpcheck.report.plots import matplotlib_available
from ddpcheck.stages import STAGES

pytestmark = pytest.mark.world
FAST = ["--probe-timeout", "5"]


def codes(report: dict) -> list[str]:
    return [p["code"] for p in report["problems"]]


def test_healthy_run_is_ready_with_every_stage_pass_or_reasoned_skip(ddpcheck_run, tmp_path):
    plots = ["--plot", str(tmp_path / "plots")] if matplotlib_available() else []
    # -q: the report only (no progress lines, nothing of torchrun's on stderr), which the
    # whole report of this run below also proves unchanged
    run = ddpcheck_run("--checkpoint-dir", str(tmp_path / "ckpt"), "-q", *plots)
    assert run.finish() == 0, run.stdout + run.stderr
    assert run.stderr == "" and run.stdout.rstrip().splitlines()[-1].startswith("READY")
    report = run.report()
    assert report["ready"] is True and report["problems"] == []
    statuses = {s["name"]: s["status"] for s in report["stages"]}
    assert list(statuses) == ["preflight", *STAGES]
    assert set(statuses.values()) <= {"PASS", "SKIP"}
    assert statuses["collectives"] == statuses["ddp"] == statuses["checkpoint"] == "PASS"
    sweep = report["measurements"]["allreduce_sweep"]
    assert len(sweep) >= 5 and all(r["busbw"] > 0 for r in sweep[-3:])
    assert "READY:" in run.stdout and "Peak bus bandwidth" in run.stdout
    scaling = report["measurements"]["ddp_scaling"]
    assert [r["world_size"] for r in scaling] == [1, 2] and scaling[0]["efficiency"] == 1.0
    assert "# DDP scaling" in run.stdout
    if plots:
        pngs = sorted(p.name for p in (tmp_path / "plots").glob("*.png"))
        assert pngs == ["allreduce-busbw.png", "ddp-scaling.png"]


def test_rank_killed_mid_stage_is_named_with_signal_and_stage(ddpcheck_run):
    run = ddpcheck_run(*FAST)
    pid = run.wait_for_probe_start(1, "test_ddp_steps_match_a_single_process_reference")
    os.kill(pid, signal.SIGKILL)
    # Under load the rank may have moved on before the signal lands: the stage to name is the
    # one its own file says it was in when it died (ddp, or a later one).
    in_stage = [e["stage"] for e in run.events(1) if e["event"] == "probe-start"][-1]
    assert in_stage in ("ddp", "placement", "checkpoint")
    assert run.finish() == 1
    # Under load rank 1 may also be found a straggler before it died: a true finding too.
    problems = [p for p in run.report()["problems"] if p["code"] != "straggler"]
    problem = problems[0]
    assert problem["code"] == "rank-killed" and problem["ranks"] == [1]
    assert "SIGKILL" in problem["observed"] and problem["stage"] == in_stage
    assert "FAIL  rank-killed" in run.stdout


def test_rank_stopped_in_a_collective_is_named_and_the_run_still_ends(ddpcheck_run):
    run = ddpcheck_run(*FAST)
    pid = run.wait_for_probe_start(1, "test_all_reduce_bandwidth_sweep")
    os.kill(pid, signal.SIGSTOP)
    try:
        assert run.finish(timeout=120) == 1
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    report = run.report()
    first = report["problems"][0]
    assert first["code"] == "rank-unresponsive" and first["ranks"] == [1]
    assert "stopped" in first["observed"] and str(pid) in first["observed"]
    stages = {s["name"]: s for s in report["stages"]}
    assert stages["bandwidth"]["status"] == "FAIL"
    assert stages["ddp"]["status"] == "BLOCKED" and stages["ddp"]["blocked_by"] == "bandwidth"


def test_missing_gloo_interface_is_diagnosed_before_torchrun(ddpcheck_run):
    run = ddpcheck_run(*FAST, env={"GLOO_SOCKET_IFNAME": "eth9"})
    assert run.finish(timeout=60) == 1
    report = run.report()
    problem = report["problems"][0]
    assert problem["code"] == "socket-ifname-invalid"
    assert "eth9" in problem["observed"] and "GLOO_SOCKET_IFNAME" in problem["fix"]
    assert {s["status"] for s in report["stages"][1:]} == {"BLOCKED"}
    assert not list(run.results_dir.glob("rank-*.jsonl")), "torchrun must not have started"


def test_plain_pytest_under_torchrun_runs_the_same_probes(tmp_path):
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
            "2", "-m", "pytest", "-p", "ddpcheck.plugin", "--pyargs", "ddpcheck.checks", "-q",
            "-p", "no:cacheprovider"]
    env = {**os.environ, "DDPCHECK_STAGES": "node,rendezvous,collectives,ddp",
           "DDPCHECK_RESULTS_DIR": str(tmp_path)}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("passed") == 2  # one pytest summary per rank
    assert (tmp_path / "world.json").exists() and (tmp_path / "rank-1.jsonl").exists()
