"""The machines a real-run scenario needs, for ``bench/explain_real_runs.py`` (bench side, root).

A scenario of ``explain_real_runs`` either runs on this host as it is ("local"), or in a world
made here for its fault, each torn down on success, failure, timeout and Ctrl-C:

- "netns": two (or one) namespace hosts of ``tests.cluster.netns.Cluster`` (veth on a bridge,
  each with its own hostname and ``/etc/netns/NS/hosts``, which ``ip netns exec`` bind-mounts
  over /etc/hosts); a ``prepare`` step edits a hosts file, adds an interface or a firewall
  rule inside a namespace (they go with the namespace). One torchrun per host, all started
  together, each writing its own console (``console.log`` for node0, ``console-node1.log``)
  and ``--log-dir`` tree (``logs``, ``logs-node1``).
- "shm": a private mount namespace (``unshare -m``) with a 1 MiB tmpfs over /dev/shm; the
  mount dies with the namespace.
- "readonly": a private mount namespace in which the job's checkpoint directory
  (``CKPT_DIR``, made by the bench) is bind-mounted read-only; the mount dies with the namespace.
- "cgroup": a cgroup (v1 ``memory`` controller or v2 ``memory.max``) with a small memory
  limit; the launcher and its workers run in it, the kernel's OOM killer ends the rank that
  grows; the cgroup is removed after its processes are gone.

``unavailable(kind)`` says why a kind cannot be made here ("" when it can): the bench skips
those scenarios with that reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

CGROUP_V1 = Path("/sys/fs/cgroup/memory")
CGROUP_V2 = Path("/sys/fs/cgroup")
SHM_SIZE = "1m"
#: the cluster network for scenarios that need an address above 127.0.1.1 (gloo lets the
#: side with the larger address connect, so a loopback advertisement breaks on 192.168.x)
HIGH_NET = "192.168"


def unavailable(kind: str) -> str:
    """Why the world ``kind`` cannot be made on this machine, or ""."""
    if kind == "local":
        return ""
    if os.geteuid() != 0:
        return f"the {kind} scenarios need root"
    if kind == "netns":
        from tests.cluster.netns import available

        ok, why = available()
        return "" if ok else why
    if kind == "shm":
        if shutil.which("unshare") is None:
            return "unshare not found (util-linux)"
        probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                f"mount -t tmpfs -o size={SHM_SIZE} tmpfs /dev/shm"],
                               capture_output=True, text=True, timeout=20)
        return "" if probe.returncode == 0 else f"a private /dev/shm mount fails: {probe.stderr}"
    if kind == "readonly":
        if shutil.which("unshare") is None:
            return "unshare not found (util-linux)"
        probe = subprocess.run(readonly_wrapped("/tmp", ["true"]), capture_output=True,
                               text=True, timeout=20)
        return "" if probe.returncode == 0 else f"a read-only bind mount fails: {probe.stderr}"
    if kind == "cgroup":
        return "" if _cgroup_root() else "no writable cgroup memory controller (v1 or v2)"
    if kind == "slurm":
        from tests.cluster.netns import available as netns_ok
        from tests.cluster.slurm import available as slurm_ok

        for ok, why in (netns_ok(), slurm_ok()):
            if not ok:
                return why
        return ""
    return f"unknown world {kind!r}"


def _cgroup_root() -> tuple[Path, str, str] | None:
    """(parent dir, limit file, procs file) of a usable memory controller, or None."""
    if (CGROUP_V1 / "memory.limit_in_bytes").exists() and os.access(CGROUP_V1, os.W_OK):
        return CGROUP_V1, "memory.limit_in_bytes", "cgroup.procs"
    controllers = CGROUP_V2 / "cgroup.subtree_control"
    if controllers.exists() and "memory" in controllers.read_text():
        return CGROUP_V2, "memory.max", "cgroup.procs"
    return None


def shm_wrapped(argv: Sequence[str]) -> list[str]:
    """``argv`` in a private mount namespace whose /dev/shm is a 1 MiB tmpfs."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            f'mount -t tmpfs -o size={SHM_SIZE} tmpfs /dev/shm && exec "$@"', "sh", *argv]


def readonly_wrapped(directory: str, argv: Sequence[str]) -> list[str]:
    """``argv`` in a private mount namespace where ``directory`` is mounted read-only."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"',
            directory, *argv]


def cgroup_wrapped(procs: Path, argv: Sequence[str]) -> list[str]:
    """``argv`` started inside the cgroup whose procs file is ``procs`` (workers inherit it)."""
    return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *argv]


@contextlib.contextmanager
def memory_cgroup(limit_bytes: int) -> Iterator[Path]:
    """A cgroup limited to ``limit_bytes``; yields its procs file. Removed on exit."""
    found = _cgroup_root()
    if found is None:
        raise RuntimeError(unavailable("cgroup"))
    parent, limit_file, procs_file = found
    group = parent / f"ddpc-realruns-{os.getpid()}"
    group.mkdir()
    try:
        (group / limit_file).write_text(str(limit_bytes))
        swap = group / "memory.memsw.limit_in_bytes"  # v1 with swap accounting: no swap escape
        if swap.exists():
            with contextlib.suppress(OSError):
                swap.write_text(str(limit_bytes))
        yield group / procs_file
    finally:
        for _ in range(100):  # the group can only go once its processes have
            pids = [int(p) for p in (group / procs_file).read_text().split()]
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                group.rmdir()
                break
            time.sleep(0.1)


def wait_all(procs: Sequence[subprocess.Popen], deadline_s: float) -> bool:
    """Wait for every process until the deadline; False when one was still running."""
    end = time.monotonic() + deadline_s
    for p in procs:
        try:
            p.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            return False
    return True


def node_files(out: Path, index: int) -> tuple[Path, Path]:
    """(console file, --log-dir) of node ``index`` of a multi-node run."""
    if index == 0:
        return out / "console.log", out / "logs"
    return out / f"console-node{index}.log", out / f"logs-node{index}"


def run_on_hosts(nodes: int, argv_for: Callable[[object, int], list[str]], env: dict[str, str],
                 out: Path, cwd: Path, deadline_s: float, *, prepare: Callable | None = None,
                 high_net: bool = False, extra_net: bool = False) -> None:
    """One launcher per namespace host, all at once; every namespace and process goes after."""
    from tests.cluster.netns import Cluster

    cluster = Cluster(nodes, prefix="ddpcrr", extra_net=extra_net)
    if high_net:  # before start(): the veths and hosts files are built from h.addr
        octet = cluster.net_prefix.rsplit(".", 1)[1]
        for h in cluster.hosts:
            h.addr = f"{HIGH_NET}.{octet}.{h.index + 1}"
    consoles = []
    with cluster:
        if prepare is not None:
            prepare(cluster)
        procs = []
        for i, host in enumerate(cluster.hosts):
            console, _ = node_files(out, i)
            consoles.append(open(console, "wb"))  # noqa: SIM115 (closed below)
            procs.append(host.popen(argv_for(cluster, i), env=env, inherit_env=False,
                                    stdout=consoles[-1], stderr=subprocess.STDOUT, cwd=cwd))
        try:
            if not wait_all(procs, deadline_s):  # said by the bench, not in the user's log
                late = [i for i, p in enumerate(procs) if p.poll() is None]
                print(f"  (node {late} killed at the {deadline_s:.0f} s deadline)", flush=True)
        finally:
            for fh in consoles:
                fh.close()
    # leaving the with block killed every process of every host and removed the namespaces


def hosts_without(cluster: object, host: int, name: str) -> None:
    """Remove ``name`` from host ``host``'s /etc/hosts (the bind-mounted /etc/netns file)."""
    from tests.cluster.netns import ETC_NETNS

    h = cluster.hosts[host]  # type: ignore[attr-defined]
    path = ETC_NETNS / h.ns / "hosts"
    kept = [line for line in path.read_text().splitlines() if name not in line.split()[1:]]
    path.write_text("\n".join(kept) + "\n")


def hosts_remap(cluster: object, host: int, name: str, addr: str) -> None:
    """Point ``name`` at ``addr`` in host ``host``'s /etc/hosts (a stale entry)."""
    from tests.cluster.netns import ETC_NETNS

    h = cluster.hosts[host]  # type: ignore[attr-defined]
    path = ETC_NETNS / h.ns / "hosts"
    kept = [line for line in path.read_text().splitlines() if name not in line.split()[1:]]
    path.write_text("\n".join([*kept, f"{addr} {name}"]) + "\n")


def run_sbatch(nodes: int, script: str, env: dict[str, str], out: Path, cwd: Path,
               deadline_s: float, *, scancel_after_s: float = 0) -> None:
    """A job script submitted with sbatch to a real Slurm (slurmctld, slurmd per namespace
    host; tests/cluster/slurm.py) and waited for, its output (what users read as
    slurm-JOBID.out) in ``out/console.log``; scancel'ed after ``scancel_after_s`` when set.
    Every daemon, job, namespace and process goes after."""
    from tests.cluster.netns import Cluster
    from tests.cluster.slurm import SlurmCluster

    (out / "slurm-state").mkdir(parents=True, exist_ok=True)
    job_file = out / "slurm-state" / "job.sbatch"  # the script is no part of the job's log
    job_file.write_text(script)
    with Cluster(nodes, prefix="ddpcrs") as cluster, \
            SlurmCluster(cluster, out / "slurm-state") as slurm:
        job_env = {**env, "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}"}
        # sbatch's own --nodes would override the script's #SBATCH --nodes (which a scenario
        # sets to ask for more nodes than the cluster has)
        shape = [] if "#SBATCH --nodes" in script else [f"--nodes={nodes}"]
        res = slurm.run(["sbatch", "--parsable", *shape, f"--chdir={cwd}",
                         f"--output={out / 'console.log'}", str(job_file)], env=job_env,
                        timeout=30)
        if res.returncode != 0:  # refused at submission: what the user's terminal shows
            (out / "console.log").write_text(res.stdout + res.stderr)
            shutil.rmtree(out / "slurm-state", ignore_errors=True)
            return
        job = res.stdout.strip().split(";")[0]
        if scancel_after_s:
            time.sleep(scancel_after_s)
            slurm.run(["scancel", job], timeout=20)
        try:
            slurm.wait_job(job, timeout=deadline_s)
        except Exception as exc:  # SlurmError: still running at the deadline
            print(f"  (job {job}: {exc}; cancelled)", flush=True)
            slurm.run(["scancel", job], timeout=20)
            time.sleep(2)
    shutil.rmtree(out / "slurm-state", ignore_errors=True)  # daemons' files: not the user's log
