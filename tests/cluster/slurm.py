"""A real Slurm cluster (Slurm 22.05, Debian packages) on namespace hosts.

Role: test-side library for ``tests/cluster``, next to :mod:`.netns`. It
starts real ``munged``, ``slurmctld`` and ``slurmd`` daemons on the hosts of a
:class:`netns.Cluster`, so tests can submit real ``srun``/``sbatch`` jobs
whose tasks run inside the hosts' namespaces (``socket.gethostname()`` is the
node name, addresses are the hosts' eth0). Never imported by ``ddpcheck``;
runs only inside the pytest process on the test machine, as root.

Layout (``node0`` is host 0 of the cluster)::

    host 0 : munged (one for every host: its socket is a file path, shared
             by all namespaces), slurmctld, slurmd -N node0
    host i : slurmd -N node<i>

Files: ``slurm.conf``/``cgroup.conf``, daemon logs (``log/``) and job output
files go to the caller's ``tmpdir`` (kept for debugging). Everything with
state or sockets (munge key/socket, StateSaveLocation, SlurmdSpoolDir) lives
in a short private run directory ``/tmp/ddpc-slurm-<pid>-XXXX`` (Unix socket
paths must stay under 108 bytes, pytest's tmp paths do not), removed on exit.

What makes Slurm 22.05 run in namespaces (also under gVisor):

* ``ip netns exec`` remounts ``/sys``, so ``/sys/fs/cgroup`` is empty in a
  host. Slurm 22.05 has no ``CgroupPlugin=disabled``, and its default
  ``autodetect`` then refuses to start slurmd ("No filesystem mounted on
  /sys/fs/cgroup", "Unable to initialize cgroup plugin"). ``cgroup.conf``
  therefore names ``CgroupPlugin=cgroup/v1``: loading that plugin checks
  nothing (verified under gVisor: slurmd runs with nothing mounted there).
  Nothing uses cgroups, so no cgroup is ever created:
  ``ProctrackType=proctrack/linuxproc`` (finds a step's processes by parent
  links, so torchrun workers that ``setsid`` are still tracked),
  ``TaskPlugin=task/none``, ``JobAcctGatherType=jobacct_gather/none``.
  Each slurmd still starts through a wrapper that mounts (best effort) a
  private tmpfs on ``/sys/fs/cgroup`` in its own mount namespace (so no
  plugin could reach the machine's hierarchy through it);
  ``cgroup_controllers=("cpu", ...)`` additionally mounts those v1
  controllers there (the machine's shared hierarchies), for a kernel whose
  slurmd wants them. Not needed under gVisor.
* ``SlurmdSpoolDir``/``SlurmdPidFile``/``SlurmdLogFile`` contain ``%n``: all
  slurmds share one filesystem.
* ``SlurmdParameters=config_overrides``: the configured CPUs win over what
  hwloc sees.

Cleanup (``close``, the context manager's exit, an atexit hook, and
:func:`sweep_stale` for run directories of crashed runs): SIGKILL every
process inside the cluster's host namespaces (daemons, slurmstepd, job tasks
and whatever else runs there), wait for the daemons, remove the run
directory. The namespaces themselves belong to the :class:`netns.Cluster`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Union

from . import netns

__all__ = [
    "CLIENTS",
    "DAEMONS",
    "SlurmCluster",
    "SlurmError",
    "SlurmStartError",
    "TERMINAL_STATES",
    "available",
    "sweep_stale",
]

#: Programs the cluster needs: daemons (packages slurmctld, slurmd, munge) ...
DAEMONS = ("munged", "slurmctld", "slurmd", "slurmstepd")
#: ... and clients (package slurm-client; munge/unmunge come with munge).
CLIENTS = ("srun", "sbatch", "squeue", "scontrol", "sinfo", "scancel")
#: The Debian packages that provide them.
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")

#: Job states after which a job never runs again.
TERMINAL_STATES = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
    "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT", "REVOKED", "SPECIAL_EXIT",
})

RUNDIR_PARENT = Path("/tmp")
RUNDIR_PREFIX = "ddpc-slurm-"

Argv = Union[str, Sequence[str]]

# The wrapper every slurmd runs in (inside its host, own mount namespace):
# $1 = space-separated cgroup v1 controllers to mount (may be empty), then argv.
_SLURMD_WRAPPER = r"""
ctrls=$1; shift
mount -t tmpfs -o mode=755,size=1m ddpc_cgroup /sys/fs/cgroup 2>/dev/null
for c in $ctrls; do
    mkdir -p "/sys/fs/cgroup/$c" && mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c" || exit 97
done
exec "$@"
"""


class SlurmError(RuntimeError):
    """A Slurm command failed or a job did not reach the expected state."""


class SlurmStartError(SlurmError):
    """The daemons could not be started here (the message has the log tails)."""


def _which(name: str) -> str | None:
    return netns._which(name)


def available() -> tuple[bool, str]:
    """``(True, "")`` if the Slurm and munge programs are installed, else
    ``(False, reason)``. (Whether namespaces work is :func:`netns.available`.)"""
    missing = [p for p in DAEMONS + CLIENTS if _which(p) is None]
    if missing:
        return False, (
            f"{', '.join(missing)} not found "
            f"(apt-get install -y --no-install-recommends {' '.join(PACKAGES)})"
        )
    return True, ""


def _pid_alive(pid: int) -> bool:
    return netns._pid_alive(pid)


def sweep_stale() -> list[str]:
    """Remove run directories of earlier runs whose creating process died.

    Their daemons died with their namespaces (:func:`netns.sweep_stale`);
    only files are left. Returns the removed paths."""
    removed = []
    pat = re.compile(rf"^{re.escape(RUNDIR_PREFIX)}(\d+)-")
    with contextlib.suppress(OSError):
        for entry in RUNDIR_PARENT.iterdir():
            m = pat.match(entry.name)
            if m and entry.is_dir() and not _pid_alive(int(m.group(1))):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(str(entry))
    return removed


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"  ({path.name}: missing)"
    return "\n".join(f"  {line}" for line in text[-lines:]) or f"  ({path.name}: empty)"


def _conf_value(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else str(value)


_LIVE: list[SlurmCluster] = []
_LIVE_LOCK = threading.Lock()


class SlurmCluster:
    """Slurm on every host of a running :class:`netns.Cluster`; a context manager.

    >>> with netns.Cluster(2) as c, SlurmCluster(c, tmp_path) as slurm:
    ...     slurm.run(["srun", "-N2", "hostname"]).stdout   # 'node0\\nnode1\\n'

    ``tmpdir`` receives slurm.conf, cgroup.conf, ``log/`` and is the default
    working directory of :meth:`run` (so sbatch output files land there).
    ``cpus``: CPUs per node (default: the CPUs this process may use).
    ``conf``: extra or overriding slurm.conf settings, e.g.
    ``{"SlurmdTimeout": 5}`` (a ``None`` value drops a default).
    ``cgroup_controllers``: v1 controllers to mount for each slurmd (none
    needed here; see the module docstring). ``start_timeout``: seconds until
    every node must be idle.
    """

    def __init__(
        self,
        cluster: netns.Cluster,
        tmpdir: str | os.PathLike[str],
        *,
        cpus: int | None = None,
        conf: Mapping[str, Any] | None = None,
        partition: str = "debug",
        cluster_name: str = "ddpc",
        cgroup_controllers: Sequence[str] = (),
        start_timeout: float = 30.0,
    ) -> None:
        self.cluster = cluster
        self.tmpdir = Path(tmpdir).resolve()
        self.cpus = cpus or len(os.sched_getaffinity(0)) or os.cpu_count() or 1
        self.extra_conf = dict(conf or {})
        self.partition = partition
        self.cluster_name = cluster_name
        for ctrl in cgroup_controllers:
            if not re.match(r"^[a-z_=]+$", ctrl):
                raise ValueError(f"bad cgroup controller {ctrl!r}")
        self.cgroup_controllers = tuple(cgroup_controllers)
        self.start_timeout = start_timeout
        self.conf_path = self.tmpdir / "slurm.conf"
        self.log_dir = self.tmpdir / "log"
        self.rundir: Path | None = None
        self.munge_socket: Path | None = None
        self.munged: subprocess.Popen | None = None
        self.slurmctld: subprocess.Popen | None = None
        self.slurmds: list[subprocess.Popen] = []
        #: seconds the last start took (daemons up until all nodes idle)
        self.startup_seconds: float | None = None
        self._lock = threading.RLock()
        self._state = "new"  # new -> running -> closed

    def __repr__(self) -> str:
        return f"SlurmCluster({self.cluster.id!r}, nodes={self.nodes}, state={self._state})"

    # ---- properties

    @property
    def nodes(self) -> list[str]:
        return [h.name for h in self.cluster.hosts]

    @property
    def nodelist(self) -> str:
        """The nodes as Slurm writes them (``node[0-1]``, or a comma list)."""
        names = self.nodes
        m = [re.match(r"^(.*?)(\d+)$", n) for n in names]
        if all(m) and len({x.group(1) for x in m}) == 1:
            nums = [int(x.group(2)) for x in m]
            if nums == list(range(nums[0], nums[0] + len(nums))) and all(
                x.group(2) == str(int(x.group(2))) for x in m
            ):
                if len(nums) == 1:
                    return names[0]
                return f"{m[0].group(1)}[{nums[0]}-{nums[-1]}]"
        return ",".join(names)

    # ---- lifecycle

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close()

    def start(self) -> SlurmCluster:
        """Write the configuration, start munged, slurmctld and every slurmd,
        and wait until ``sinfo`` shows every node idle. Raises
        :class:`SlurmStartError` (with the daemons' log tails) and cleans up
        if that does not happen within ``start_timeout``."""
        with self._lock:
            if self._state == "running":
                return self
            if self._state == "closed":
                raise SlurmError("slurm cluster already closed")
            ok, why = available()
            if not ok:
                raise SlurmStartError(why)
            self.cluster._require_running()
            sweep_stale()
            with _LIVE_LOCK:
                _LIVE.append(self)
            self._state = "running"
            began = time.monotonic()
            try:
                self._write_files()
                self._start_daemons()
                self._wait_idle(began + self.start_timeout)
            except BaseException:
                self.close()
                raise
            self.startup_seconds = time.monotonic() - began
        return self

    def _write_files(self) -> None:
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        # Short, private, world-traversable (munged insists on 'x' for all on the
        # socket's directory), removed on close.
        self.rundir = Path(tempfile.mkdtemp(
            prefix=f"{RUNDIR_PREFIX}{os.getpid()}-", dir=RUNDIR_PARENT))
        self.rundir.chmod(0o755)
        for sub in ("munge", "state", "spool"):
            (self.rundir / sub).mkdir(mode=0o755)
        for h in self.cluster.hosts:
            (self.rundir / "spool" / h.name).mkdir(mode=0o755)
        key = self.rundir / "munge" / "munge.key"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(1024))
        self.munge_socket = self.rundir / "munge" / "munge.socket"
        self.conf_path.write_text(self.slurm_conf())
        (self.tmpdir / "cgroup.conf").write_text(
            "# ddpcheck test cluster: nothing uses cgroups. Naming the v1 plugin\n"
            "# skips 'autodetect', which fails on the empty /sys/fs/cgroup of a netns.\n"
            "CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n"
        )

    def slurm_conf(self) -> str:
        """The slurm.conf text (``conf`` entries override or extend the defaults)."""
        assert self.rundir is not None and self.munge_socket is not None
        run, log = self.rundir, self.log_dir
        head = self.cluster.hosts[0]
        settings: dict[str, Any] = {
            "ClusterName": self.cluster_name,
            "SlurmctldHost": f"{head.name}({head.addr})",
            "SlurmctldPort": 6817,
            "SlurmdPort": 6818,
            "AuthType": "auth/munge",
            "CredType": "cred/munge",
            "AuthInfo": f"socket={self.munge_socket}",
            "SlurmUser": "root",
            "SlurmdUser": "root",
            "StateSaveLocation": run / "state",
            "SlurmdSpoolDir": run / "spool" / "%n",
            "SlurmctldPidFile": run / "slurmctld.pid",
            "SlurmdPidFile": run / "slurmd-%n.pid",
            "SlurmctldLogFile": log / "slurmctld.log",
            "SlurmdLogFile": log / "slurmd-%n.log",
            "SlurmctldDebug": "info",
            "SlurmdDebug": "info",
            "ProctrackType": "proctrack/linuxproc",
            "TaskPlugin": "task/none",
            "JobAcctGatherType": "jobacct_gather/none",
            "AccountingStorageType": "accounting_storage/none",
            "JobCompType": "jobcomp/none",
            "MpiDefault": "none",
            "MailProg": "/bin/true",
            "SwitchType": "switch/none",
            "SelectType": "select/cons_tres",
            "SelectTypeParameters": "CR_Core",
            "SlurmdParameters": "config_overrides",
            "PropagateResourceLimits": "NONE",
            "ReturnToService": 2,
            # Reject a job that can never run (e.g. more nodes than exist) at
            # submission instead of leaving it pending forever.
            "EnforcePartLimits": "ALL",
            "SlurmctldTimeout": 10,
            "SlurmdTimeout": 30,
            "MessageTimeout": 10,
            "TCPTimeout": 2,
            "InactiveLimit": 0,
            "KillWait": 2,
            "WaitTime": 0,
            "MinJobAge": 86400,
            "SchedulerType": "sched/backfill",
            "SchedulerParameters": "batch_sched_delay=0,sched_min_interval=0",
        }
        settings.update(self.extra_conf)
        lines = ["# ddpcheck test cluster (tests/cluster/slurm.py)"]
        lines += [f"{k}={_conf_value(v)}" for k, v in settings.items() if v is not None]
        for h in self.cluster.hosts:
            lines.append(
                f"NodeName={h.name} NodeAddr={h.addr} CPUs={self.cpus} Boards=1 "
                f"SocketsPerBoard=1 CoresPerSocket={self.cpus} ThreadsPerCore=1 "
                "State=UNKNOWN"
            )
        # OverSubscribe=FORCE: several jobs (and their steps) may share the cores.
        lines.append(
            f"PartitionName={self.partition} Nodes=ALL Default=YES MaxTime=INFINITE "
            "State=UP OverSubscribe=FORCE:8"
        )
        return "\n".join(lines) + "\n"

    def _daemon_env(self) -> dict[str, str | None]:
        env = self.env()
        env["PATH"] = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
        return env

    def _log(self, name: str) -> Any:
        return open(self.log_dir / name, "ab")

    def _start_daemons(self) -> None:
        head = self.cluster.hosts[0]
        env = self._daemon_env()
        run = self.rundir
        assert run is not None
        with self._log("munged.out") as out:
            self.munged = head.popen(
                [_which("munged"), "--foreground", "--force",
                 f"--key-file={run / 'munge' / 'munge.key'}",
                 f"--socket={self.munge_socket}",
                 f"--pid-file={run / 'munge' / 'munged.pid'}",
                 f"--seed-file={run / 'munge' / 'munged.seed'}",
                 "--num-threads=4"],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            )
        self._wait_munge(time.monotonic() + 10)
        with self._log("slurmctld.out") as out:
            self.slurmctld = head.popen(
                [_which("slurmctld"), "-D", "-c", "-f", str(self.conf_path)],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            )
        for h in self.cluster.hosts:
            with self._log(f"slurmd-{h.name}.out") as out:
                self.slurmds.append(h.popen(
                    ["/bin/sh", "-c", _SLURMD_WRAPPER, "slurmd-wrapper",
                     " ".join(self.cgroup_controllers),
                     _which("slurmd"), "-D", "-N", h.name, "-f", str(self.conf_path)],
                    env=env, stdout=out, stderr=subprocess.STDOUT,
                ))

    def _wait_munge(self, deadline: float) -> None:
        assert self.munge_socket is not None and self.munged is not None
        while not self.munge_socket.exists():
            if self.munged.poll() is not None:
                raise SlurmStartError("munged exited:\n" + self.logs("munged.out"))
            if time.monotonic() > deadline:
                raise SlurmStartError(
                    "munged did not create its socket:\n" + self.logs("munged.out"))
            time.sleep(0.02)

    def _dead_daemons(self) -> list[str]:
        dead = []
        for name, proc in [("munged", self.munged), ("slurmctld", self.slurmctld)] + [
            (f"slurmd {h.name}", p) for h, p in zip(self.cluster.hosts, self.slurmds)
        ]:
            if proc is not None and proc.poll() is not None:
                dead.append(f"{name} (exit {proc.returncode})")
        return dead

    def _wait_idle(self, deadline: float) -> None:
        last = ""
        while True:
            dead = self._dead_daemons()
            if dead:
                raise SlurmStartError(f"daemon(s) exited: {', '.join(dead)}\n{self.logs()}")
            try:
                res = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=10)
                last = (res.stdout + res.stderr).strip()
                states = dict(line.split(None, 1) for line in res.stdout.splitlines()
                              if len(line.split()) == 2)
                if res.returncode == 0 and all(states.get(n) == "idle" for n in self.nodes):
                    return
            except subprocess.TimeoutExpired:
                last = "sinfo timed out"
            if time.monotonic() > deadline:
                raise SlurmStartError(
                    f"nodes not idle after {self.start_timeout:.0f}s (sinfo: {last!r})\n"
                    + self.logs()
                )
            time.sleep(0.2)

    def logs(self, *names: str, lines: int = 15) -> str:
        """Tails of the daemons' logs (all of them by default), for error messages."""
        if not names:
            names = ("munged.out", "slurmctld.log", "slurmctld.out") + tuple(
                f"slurmd-{n}.{ext}" for n in self.nodes for ext in ("log", "out"))
        return "\n".join(f"--- {n}\n{_tail(self.log_dir / n, lines)}" for n in names)

    def close(self) -> None:
        """Kill every daemon, step and job task (everything inside the
        cluster's host namespaces), and remove the run directory (state,
        spool, munge key). Idempotent; safe after a partial start."""
        with self._lock:
            if self._state == "closed":
                return
            was = self._state
            self._state = "closed"
            try:
                if was == "running":
                    daemons = [p for p in (self.munged, self.slurmctld, *self.slurmds) if p]
                    for p in daemons:
                        netns._kill_tree(p)
                    for h in self.cluster.hosts:
                        if netns._ns_exists(h.ns):
                            netns._kill_ns_pids(h.ns)
                    for p in daemons:
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            p.wait(timeout=5)
            finally:
                if self.rundir is not None:
                    shutil.rmtree(self.rundir, ignore_errors=True)
                with _LIVE_LOCK:
                    if self in _LIVE:
                        _LIVE.remove(self)

    # ---- clients

    def env(self) -> dict[str, str | None]:
        """Environment for Slurm clients, in :meth:`netns.Host.popen`'s
        convention (merged over ``os.environ``; ``None`` unsets): sets
        ``SLURM_CONF`` and unsets every other ``SLURM_*``/``SBATCH_*``/
        ``SALLOC_*``/``SRUN_*`` variable the pytest process may have
        inherited (from an outer Slurm job, say), which would otherwise
        redirect or reshape the commands."""
        env: dict[str, str | None] = {
            k: None for k in os.environ
            if k.startswith(("SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_"))
        }
        env["SLURM_CONF"] = str(self.conf_path)
        return env

    def run(
        self, argv: Argv, host: int | str = 0, timeout: float | None = 60.0,
        env: Mapping[str, str | None] | None = None, *, check: bool = False, **kw: Any,
    ) -> subprocess.CompletedProcess:
        """Run a client command (``srun``, ``sbatch``, ``squeue``, ``scontrol``,
        ...) on ``host`` (index or name) and wait; output captured as text,
        working directory ``tmpdir`` unless ``cwd`` is given. ``env`` is
        merged over :meth:`env`. ``check=True`` raises
        :class:`subprocess.CalledProcessError` on a non-zero exit. On timeout
        the command's process tree is killed and ``TimeoutExpired`` raised
        (a job it started may still be running in Slurm)."""
        self._require_running()
        full = {**self.env(), **(env or {})}
        kw.setdefault("cwd", str(self.tmpdir))
        return self.cluster.host(host).run(argv, timeout=timeout, env=full, check=check, **kw)

    def popen(
        self, argv: Argv, host: int | str = 0, env: Mapping[str, str | None] | None = None,
        **kw: Any,
    ) -> subprocess.Popen:
        """Start a client command on ``host`` without waiting (e.g. an ``srun``
        to kill later); same environment and working directory as :meth:`run`."""
        self._require_running()
        full = {**self.env(), **(env or {})}
        kw.setdefault("cwd", str(self.tmpdir))
        return self.cluster.host(host).popen(argv, env=full, **kw)

    def sbatch(self, script: str | os.PathLike[str], *args: str, host: int | str = 0,
               options: Sequence[str] = (), timeout: float = 30.0) -> int:
        """Submit ``script`` (with script arguments ``args``; ``options`` go to
        sbatch before the script) from ``host``; returns the job id."""
        res = self.run(["sbatch", "--parsable", *options, os.fspath(script), *args],
                       host=host, timeout=timeout)
        m = re.match(r"^(\d+)", res.stdout.strip())
        if res.returncode != 0 or not m:
            raise SlurmError(f"sbatch failed ({res.returncode}): {res.stdout}{res.stderr}")
        return int(m.group(1))

    def job_info(self, job_id: int | str) -> dict[str, str]:
        """``scontrol show job -o`` as a dict (``JobState``, ``ExitCode``,
        ``NodeList``, ``StdOut``, ...). Finished jobs stay visible for
        ``MinJobAge`` (a day)."""
        res = self.run(["scontrol", "show", "job", "-o", str(job_id)], timeout=20)
        if res.returncode != 0:
            raise SlurmError(f"scontrol show job {job_id} failed: {res.stdout}{res.stderr}")
        info: dict[str, str] = {}
        # 'Key=value Key=value with spaces? ...': values never contain ' Key='.
        for m in re.finditer(r"(?:^|\s)([A-Za-z_:/]+)=(.*?)(?=\s+[A-Za-z_:/]+=|\s*$)",
                             res.stdout.strip()):
            info.setdefault(m.group(1), m.group(2))
        return info

    def wait_job(self, job_id: int | str, timeout: float = 60.0,
                 poll: float = 0.25) -> tuple[str, int]:
        """Wait until the job ends; returns ``(state, exit_code)``, e.g.
        ``("COMPLETED", 0)`` or ``("FAILED", 3)``. ``exit_code`` is the
        script's exit status, or 128+N if a signal N ended it. Raises
        :class:`SlurmError` if it is still not finished after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.job_info(job_id)
            state = info.get("JobState", "")
            if state in TERMINAL_STATES:
                code, _, sig = info.get("ExitCode", "0:0").partition(":")
                status, signo = int(code or 0), int(sig or 0)
                return state, (128 + signo if signo and not status else status)
            if time.monotonic() > deadline:
                raise SlurmError(
                    f"job {job_id} still {state or '?'} after {timeout:.0f}s "
                    f"(reason {info.get('Reason')})"
                )
            time.sleep(poll)

    def squeue(self) -> list[dict[str, str]]:
        """Jobs Slurm still lists as pending/running: id, name, state, nodes."""
        res = self.run(["squeue", "-h", "-o", "%i|%j|%T|%N"], timeout=20, check=True)
        keys = ("id", "name", "state", "nodes")
        return [dict(zip(keys, line.split("|"))) for line in res.stdout.splitlines() if line]

    def scancel_all(self) -> None:
        """Cancel every job (``scancel --full -u root``: all jobs, every step)."""
        self.run(["scancel", "--full", "-u", "root"], timeout=20)

    def _require_running(self) -> None:
        if self._state != "running":
            raise SlurmError(f"slurm cluster is {self._state}, not running")


def _close_all() -> None:
    """atexit hook: last-resort teardown (runs before netns' own hook, which
    was registered first)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for s in live:
        with contextlib.suppress(Exception):
            s.close()


atexit.register(_close_all)
