"""ddpcheck under a real Slurm on namespace hosts: jobs/slurm/ddpcheck.sbatch submitted with
sbatch, Slurm-specific faults named by Slurm node, and ranks launched by srun directly.

Test side only; needs the Slurm fixture (tests/cluster/slurm.py).
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
SBATCH = REPO / "jobs" / "slurm" / "ddpcheck.sbatch"
SPAWN_SBATCH = REPO / "jobs" / "slurm" / "ddpcheck-spawn.sbatch"
QUICK = {"DDPCHECK_STAGES": "node,rendezvous,collectives", "DDPCHECK_NPROC_PER_NODE": "1",
         "DDPCHECK_RDZV_TIMEOUT": "15", "DDPCHECK_PROBE_TIMEOUT": "15"}


def submit(slurm, tmp_path, nodes: int, job_script: Path = SBATCH) -> tuple[str, int, str]:
    """sbatch the job script as a user would; return (state, exit code, output file text)."""
    script = shutil.copy(job_script, tmp_path / job_script.name)
    env = {**slurm.env(), **QUICK}
    res = slurm.run(["sbatch", "--parsable", f"--nodes={nodes}", f"--chdir={tmp_path}",
                     str(script)], env=env, timeout=30)
    assert res.returncode == 0, res.stderr
    job = res.stdout.strip().split(";")[0]
    state, code = slurm.wait_job(job, timeout=180)
    out = (tmp_path / f"{job_script.stem}-{job}.out").read_text()
    return state, code, out


def test_sbatch_from_the_repository_root_with_a_non_editable_install(make_slurm,
                                                                   readme_fresh_install):
    """As README says: pip install . in the checkout, then sbatch from its root. The source
    folder ddpcheck/ in the job's working directory must not shadow the installation. The
    clone and its install are the session's README first-command one (tests/conftest.py).
    On three nodes: the job script's multi-node READY report, printed whole on rank 0's node."""
    from tests.helpers.installed import ensure_installed

    clone, venv_env = readme_fresh_install.clone, readme_fresh_install.env
    ensure_installed(clone, venv_env)
    slurm = make_slurm(3)
    env = {**slurm.env(), **QUICK, "PATH": venv_env["PATH"],
           "VIRTUAL_ENV": venv_env["VIRTUAL_ENV"]}
    res = slurm.run(["sbatch", "--parsable", "--nodes=3", f"--chdir={clone}",
                     "jobs/slurm/ddpcheck.sbatch"], env=env, timeout=30, cwd=str(clone))
    assert res.returncode == 0, res.stderr
    job = res.stdout.strip().split(";")[0]
    state, code = slurm.wait_job(job, timeout=180)
    out = (clone / f"ddpcheck-{job}.out").read_text()
    assert (state, code) == ("COMPLETED", 0), out
    assert re.search(r"READY: 4 stages passed, 0 skipped, 3 ranks on 3 hosts", out), out
    assert "whole report is printed on the node hosting rank 0" in out


def ddpcheck_step(slurm, tmp_path, srun_args, run_args=(), shell_prefix="", timeout=150):
    """srun one step of `ddpcheck run` from host 0; returns the CompletedProcess."""
    cmd = f"{shell_prefix}exec {sys.executable} -m ddpcheck run {' '.join(run_args)}"
    return slurm.run(["srun", *srun_args, "bash", "-c", cmd], env={**slurm.env(), **QUICK},
                     timeout=timeout, cwd=str(tmp_path))


def test_two_ddpcheck_tasks_per_node_are_named(make_slurm, tmp_path):
    slurm = make_slurm(2)
    res = ddpcheck_step(slurm, tmp_path, ["-N2", "--ntasks-per-node=2"])
    assert res.returncode != 0
    assert "too-many-tasks-per-node" in res.stdout, res.stdout + res.stderr
    assert "node0" in res.stdout and "node1" in res.stdout


def test_nodes_flag_not_matching_the_allocation_is_named(make_slurm, tmp_path):
    slurm = make_slurm(2)
    res = ddpcheck_step(slurm, tmp_path, ["-N2", "--ntasks-per-node=1"], ["--nodes", "3"])
    assert res.returncode != 0
    assert "job-shape-mismatch" in res.stdout, res.stdout + res.stderr
    assert "--nodes 3" in res.stdout and "node[0-1]" in res.stdout


def test_one_node_with_a_wrong_interface_setting_is_named_by_slurm_node(make_slurm, tmp_path):
    slurm = make_slurm(2)
    prefix = 'if [ "$SLURMD_NODENAME" = node1 ]; then export GLOO_SOCKET_IFNAME=eth9; fi; '
    res = ddpcheck_step(slurm, tmp_path, ["-N2", "--ntasks-per-node=1"], shell_prefix=prefix)
    assert res.returncode != 0
    blocks = res.stdout.split("FAIL  socket-ifname-invalid")
    assert len(blocks) == 3, res.stdout  # reported by both nodes
    assert all("node node1" in b.splitlines()[0] for b in blocks[1:])
    assert "GLOO_SOCKET_IFNAME=eth0" in res.stdout


def test_ranks_launched_by_srun_without_torchrun_pass_the_probes(make_slurm, tmp_path):
    slurm = make_slurm(2)
    env = {**slurm.env(), "DDPCHECK_STAGES": "node,rendezvous,collectives,ddp",
           "DDPCHECK_PROBE_TIMEOUT": "20", "DDPCHECK_RESULTS_DIR": str(tmp_path / "res")}
    res = slurm.run(["srun", "-N2", "--ntasks-per-node=2", sys.executable, "-m", "pytest",
                     "-p", "ddpcheck.plugin", "--pyargs", "ddpcheck.checks", "-q",
                     "-p", "no:cacheprovider"], env=env, timeout=200, cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert res.stdout.count(" passed") == 4  # one pytest summary per task
    world = (tmp_path / "res" / "world.json").read_text()
    assert '"node1"' in world and '"missing": []' in world


def test_spawn_job_script_and_launch_srun_form_their_worlds_under_slurm(make_slurm, tmp_path):
    """jobs/slurm/ddpcheck-spawn.sbatch: one launcher per node spawns its ranks, env:// with
    MASTER_ADDR = the first node; the node of rank 0 prints the whole READY report. Then
    ``--launch srun``: each rank gets the task variables srun would give it."""
    slurm = make_slurm(2)
    state, code, out = submit(slurm, tmp_path, 2, SPAWN_SBATCH)
    assert (state, code) == ("COMPLETED", 0), out
    assert re.search(r"READY: 4 stages passed, 0 skipped, 2 ranks on 2 hosts", out), out

    res = ddpcheck_step(slurm, tmp_path, ["-N2", "--ntasks-per-node=1"], ["--launch", "srun"])
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert re.search(r"READY: .* 2 ranks on 2 hosts", res.stdout), res.stdout
