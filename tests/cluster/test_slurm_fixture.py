"""The Slurm test cluster itself (:mod:`.slurm`, :mod:`.slurm_fixtures`): real
slurmctld/slurmd/munged on namespace hosts run srun steps and sbatch jobs
inside the hosts, report job states, share cores, carry a 2-node torchrun,
and leave nothing behind.

Skipped, with the reason, where namespaces or the Slurm packages are missing
(``DDPCHECK_REQUIRE_SLURM=1`` turns that into a failure).
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

from . import slurm_fixtures
from .netns import Cluster
from .slurm import SlurmCluster

# The fixtures, for when conftest.py does not import them itself.
slurm_available = slurm_fixtures.slurm_available
make_slurm = slurm_fixtures.make_slurm
slurm2 = slurm_fixtures.slurm2

PY = sys.executable


def _write(path: Path, text: str, mode: int = 0o755) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    path.chmod(mode)
    return path


def test_srun_runs_one_task_inside_each_host(slurm2: SlurmCluster) -> None:
    assert slurm2.startup_seconds is not None and slurm2.startup_seconds < 20
    res = slurm2.run(["srun", "-N2", "hostname"], timeout=30)
    assert res.returncode == 0, res.stderr
    assert sorted(res.stdout.split()) == ["node0", "node1"]
    # Clients work from any host, not only the controller's.
    res = slurm2.run(["srun", "-N2", "hostname"], host=1, timeout=30)
    assert res.returncode == 0 and sorted(res.stdout.split()) == ["node0", "node1"], res.stderr


def test_srun_tasks_get_the_slurm_environment(slurm2: SlurmCluster) -> None:
    code = (
        "import os, socket; e = os.environ; print(e['SLURM_NODEID'], e['SLURM_JOB_NODELIST'],"
        " socket.gethostname(), e['SLURM_NNODES'], e['SLURM_NTASKS'], e['SLURM_PROCID'],"
        " socket.gethostbyname(socket.gethostname()))"
    )
    res = slurm2.run(["srun", "-N2", "--ntasks-per-node=1", PY, "-c", code], timeout=60)
    assert res.returncode == 0, res.stderr
    lines = sorted(res.stdout.splitlines())
    addrs = slurm2.cluster.addrs
    assert lines == [
        f"0 node[0-1] node0 2 2 0 {addrs['node0']}",
        f"1 node[0-1] node1 2 2 1 {addrs['node1']}",
    ]
    assert slurm2.nodelist == "node[0-1]"


def test_sbatch_output_and_exit_state(slurm2: SlurmCluster, tmp_path: Path) -> None:
    script = _write(tmp_path / "job.sh", """
        #!/bin/bash
        #SBATCH -N2
        #SBATCH --ntasks-per-node=1
        #SBATCH -o job-%j.out
        srun bash -c 'echo "task $SLURM_PROCID on $(hostname)"'
        exit "${1:-0}"
        """)
    ok = slurm2.sbatch(script)
    bad = slurm2.sbatch(script, "3")
    assert slurm2.wait_job(ok, timeout=60) == ("COMPLETED", 0)
    assert slurm2.wait_job(bad, timeout=60) == ("FAILED", 3)
    for job in (ok, bad):
        out = (slurm2.tmpdir / f"job-{job}.out").read_text()
        assert sorted(out.splitlines()) == ["task 0 on node0", "task 1 on node1"], out
        info = slurm2.job_info(job)
        assert info["NodeList"] == "node[0-1]" and info["BatchHost"] == "node0"
    assert slurm2.squeue() == []


def test_jobs_share_the_cores_and_scancel_ends_them(slurm2: SlurmCluster, tmp_path: Path) -> None:
    cpus = slurm2.cpus
    hog = _write(tmp_path / "hog.sh", f"""
        #!/bin/bash
        #SBATCH -N2
        #SBATCH --ntasks-per-node={cpus}
        #SBATCH -o hog-%j.out
        srun sleep 300
        """)
    job = slurm2.sbatch(hog)
    deadline = time.monotonic() + 30
    while slurm2.job_info(job)["JobState"] != "RUNNING":
        assert time.monotonic() < deadline, slurm2.job_info(job)
        time.sleep(0.2)
    # Every core is allocated, yet another job starts at once (OverSubscribe=FORCE).
    res = slurm2.run(["srun", "-N2", "--immediate=10", "hostname"], timeout=30)
    assert res.returncode == 0 and sorted(res.stdout.split()) == ["node0", "node1"], res.stderr
    assert [j["id"] for j in slurm2.squeue() if j["state"] == "RUNNING"] == [str(job)]
    slurm2.run(["scancel", str(job)], check=True, timeout=20)
    state, _ = slurm2.wait_job(job, timeout=30)
    assert state == "CANCELLED"
    deadline = time.monotonic() + 15  # the steps' sleeps are gone from both hosts
    while any("sleep" in _cmdlines(h.pids()) for h in slurm2.cluster):
        assert time.monotonic() < deadline, [_cmdlines(h.pids()) for h in slurm2.cluster]
        time.sleep(0.2)


def test_torchrun_across_two_nodes_under_srun(slurm2: SlurmCluster, tmp_path: Path) -> None:
    script = _write(tmp_path / "allreduce.py", """
        import socket

        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo")
        t = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(t)
        print(f"rank={dist.get_rank()} world={dist.get_world_size()} sum={t.item():g}"
              f" host={socket.gethostname()}", flush=True)
        dist.destroy_process_group()
        """, mode=0o644)
    torchrun = (
        f"{PY} -m torch.distributed.run --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d"
        f" --rdzv-endpoint node0:29611 --rdzv-id t1 {script}"
    )
    res = slurm2.run(["srun", "-N2", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
                      "bash", "-c", torchrun], timeout=120, env={"OMP_NUM_THREADS": "1"})
    assert res.returncode == 0, res.stdout + res.stderr
    lines = sorted(line for line in res.stdout.splitlines() if line.startswith("rank="))
    assert len(lines) == 2, res.stdout + res.stderr
    assert {line.split()[1] for line in lines} == {"world=2"}
    assert {line.split()[2] for line in lines} == {"sum=3"}
    assert sorted(line.split()[3] for line in lines) == ["host=node0", "host=node1"]


def test_close_kills_every_daemon_and_job_and_removes_state(
    slurm_available: None, make_cluster, tmp_path: Path
) -> None:
    cluster: Cluster = make_cluster(2)
    slurm = SlurmCluster(cluster, tmp_path / "s")
    try:
        slurm.start()
    except Exception as exc:  # same skip/fail rule as the fixtures
        slurm_fixtures._unavailable(f"Slurm daemons do not start here: {exc}")
    rundir = slurm.rundir
    assert rundir is not None and rundir.is_dir()
    job = slurm.sbatch(_write(tmp_path / "sleep.sh", """
        #!/bin/bash
        #SBATCH -N2
        srun sleep 300
        """))
    deadline = time.monotonic() + 30
    while slurm.job_info(job)["JobState"] != "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    daemons = [slurm.munged, slurm.slurmctld, *slurm.slurmds]
    assert all(p is not None and p.poll() is None for p in daemons)
    slurm.close()
    assert all(p is not None and p.poll() is not None for p in daemons)
    assert [h.pids() for h in cluster] == [[], []]
    assert not rundir.exists()
    assert str(slurm.conf_path) not in _cmdlines(_all_pids())
    slurm.close()  # idempotent
    assert (slurm.log_dir / "slurmctld.log").exists()  # logs are kept for debugging


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _cmdlines(pids: list[int]) -> str:
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                out.append(fh.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return "\n".join(out)


def test_impossible_request_fails_fast_and_controller_answers(slurm2: SlurmCluster) -> None:
    began = time.monotonic()
    res = slurm2.run(["srun", "-N3", "hostname"], timeout=30)
    assert res.returncode != 0 and "Node count specification invalid" in res.stderr, res.stderr
    assert time.monotonic() - began < 10
    res = slurm2.run(["scontrol", "ping"], host=1, timeout=20)
    assert res.returncode == 0 and "at node0 is UP" in res.stdout, res.stdout + res.stderr
