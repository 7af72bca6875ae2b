"""Launch torchrun for this node and watch it under deadlines.

Runs in the launcher. ``torchrun_argv`` and ``worker_env`` are pure; ``run_torchrun`` starts
torchrun in its own session, forwards Ctrl-C, and ends it (with every descendant, including
stopped workers, which torchrun never notices) when the run deadline passes or when the
ranks have all reported and torchrun does not exit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable

import psutil

from ddpcheck import results
from ddpcheck.launcher.config import RunConfig, endpoint_text
from ddpcheck.worker.settings import ENV_NAMES, WorkerSettings

END_GRACE_S = 8.0  # ranks reported their end; torchrun gets this long to exit by itself
KILL_GRACE_S = 3.0  # SIGTERM, then SIGKILL after this long


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: end torchrun, then report what is known."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def raise_interrupted(signum: int, _frame: object) -> None:
    raise Interrupted(signal.Signals(signum).name)


def torchrun_argv(cfg: RunConfig, nproc: int, run_id: str) -> list[str]:
    """The torchrun command line for this node (pure).

    Multi-node: the rendezvous store is hosted by ddpcheck's launcher on the endpoint node
    (see checkin), so every agent joins it as a client (is_host=false). Nothing else is
    chosen for the user: the agents advertise their FQDN as a user's torchrun does (no
    --local-addr), so a name the other nodes cannot resolve fails here too, and is named
    beforehand by the check-in, on every node (cluster.namecheck). docs/user-job.md lists every
    difference from the user's torchrun and how each is covered.
    """
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(cfg.nodes),
            "--nproc-per-node", str(nproc), "--max-restarts", "0", "--monitor-interval", "0.5"]
    conf = (f"join_timeout={int(max(cfg.rdzv_timeout, 1))},read_timeout="
            f"{int(max(cfg.rdzv_timeout, 1))},last_call_timeout=1,close_timeout=10")
    if cfg.nodes == 1:  # one node never needs the endpoint, whatever the scheduler says
        argv += ["--standalone"]
    else:
        argv += ["--rdzv-backend", "c10d", "--rdzv-endpoint", str(endpoint_text(cfg.rdzv_endpoint)),
                 "--rdzv-id", run_id]
        conf += ",is_host=false"
    argv += ["--rdzv-conf", conf, "-m", "ddpcheck.worker"]
    return argv


def worker_env(cfg: RunConfig, env: dict[str, str], results_dir: Path,
               nproc: int) -> dict[str, str]:
    """The environment the workers see: ours plus the DDPCHECK_* settings (pure).

    Every DDPCHECK_* variable of the worker settings is replaced, so a stale value in our
    environment never reaches the workers.
    """
    settings = WorkerSettings(
        stages=cfg.stages, probe_timeout=cfg.probe_timeout, backend=cfg.backend,
        gpus_per_replica=cfg.gpus_per_replica, results_dir=results_dir,
        checkpoint_dir=cfg.checkpoint_dir.absolute() if cfg.checkpoint_dir else None,  # cwd
        checkpoint_size=cfg.checkpoint_size,
        expected_world_size=cfg.nodes * nproc, expected_nproc_per_node=nproc,
        expected_busbw=cfg.expect_busbw or None, slow_link_ratio=cfg.slow_link_ratio)
    out = {k: v for k, v in env.items() if k not in ENV_NAMES}
    out.update(settings.to_env())
    out.update({
        "PYTHONUNBUFFERED": "1",
        # Python >= 3.11: never put the current directory on the workers' sys.path, so they
        # import ddpcheck from the installation, not from a checkout they happen to run in.
        "PYTHONSAFEPATH": "1",
    })
    out.setdefault("OMP_NUM_THREADS", "1")
    return out


@dataclass
class LaunchOutcome:
    """What the launcher saw of torchrun."""

    returncode: int | None
    elapsed: float
    deadline_hit: bool = False
    killed_after_end: bool = False
    interrupted: str = ""  # the signal that ended the run early (SIGINT, SIGTERM), if any
    stopped_pids: list[int] = field(default_factory=list)  # in state T when we ended the run
    alive_pids: list[int] = field(default_factory=list)
    launcher: str = "torchrun"  # what started the ranks, as the messages name it


def run_torchrun(argv: list[str], env: dict[str, str], results_dir: Path, deadline: float,
                 log: IO[str], on_tick: Callable[[], None] | None = None,
                 nproc: int = 0) -> LaunchOutcome:
    """Run torchrun to its end, or end it at the deadline; never hangs.

    Once a rank has logged its end, torchrun gets END_GRACE_S to exit by itself, or none
    at all when each of this node's ``nproc`` ranks has either recorded its exit or is
    stopped (a stopped process never resumes by itself: waiting for it only delays the
    report).
    """
    start = time.monotonic()
    # The workers run in the results directory: ``python -m`` puts the current directory
    # first on sys.path, and a source checkout there (the repository root, say) would
    # shadow the installed ddpcheck and its probes (see also PYTHONSAFEPATH in worker_env).
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=results_dir)
    outcome = LaunchOutcome(None, 0.0)
    watch([proc], results_dir, nproc, deadline, outcome, on_tick)
    outcome.returncode = proc.wait()
    outcome.elapsed = time.monotonic() - start
    return outcome


def watch(procs: Sequence[subprocess.Popen], results_dir: Path, nproc: int, deadline: float,
          outcome: LaunchOutcome, on_tick: Callable[[], None] | None = None,
          failed_grace: float | None = None) -> None:
    """Poll the processes that run this node's ranks until they end; never hangs.

    They are ended (process tree, SIGTERM then SIGKILL) at the deadline, once a rank has
    logged its end and END_GRACE_S passed or every local rank settled, and, with
    ``failed_grace`` (mp.spawn's rule), that long after one of them failed.
    """
    ended_at: float | None = None
    failed_at: float | None = None
    try:
        while any(p.poll() is None for p in procs):
            time.sleep(0.2)
            if on_tick:
                on_tick()
            now = time.monotonic()
            if ended_at is None and _any_rank_ended(results_dir):
                ended_at = now
            if (failed_grace is not None and failed_at is None
                    and any(p.poll() not in (None, 0) for p in procs)):
                failed_at = now
            if now >= deadline:
                outcome.deadline_hit = True
                break
            if failed_at is not None and failed_grace is not None \
                    and now - failed_at > failed_grace:
                break
            if ended_at is not None and (now - ended_at > END_GRACE_S
                                         or _all_settled(results_dir, nproc)):
                outcome.killed_after_end = True
                break
    except Interrupted as exc:  # Ctrl-C, or the scheduler ending the job: still report
        outcome.interrupted = exc.signal_name
    for p in procs:
        if p.poll() is None:
            _end_tree(p, outcome)


def _any_rank_ended(results_dir: Path) -> bool:
    return any(isinstance(e, results.End) for path in results_dir.glob("rank-*.jsonl")
               for e in results.read_events(path)[-1:])


def _all_settled(results_dir: Path, nproc: int) -> bool:
    """Every local rank's wrapper recorded its exit, or the rank is stopped (state T):
    nothing more will come from this node."""
    if nproc <= 0:
        return False
    paths = sorted(results_dir.glob("rank-*.jsonl"))
    if len(paths) < nproc:
        return False
    for path in paths:
        if results.exit_file(results_dir, results.rank_of(path)).exists():
            continue
        pid = next((e.pid for e in results.read_events(path) if isinstance(e, results.Start)),
                   None)
        if not pid or not _stopped(int(pid)):
            return False
    return True


def _stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return False


def _end_tree(proc: subprocess.Popen, outcome: LaunchOutcome) -> None:
    """Stop torchrun and every descendant (workers run in sessions of their own)."""
    try:
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in tree:
        try:
            if p.status() == psutil.STATUS_STOPPED:
                outcome.stopped_pids.append(p.pid)
            else:
                outcome.alive_pids.append(p.pid)
        except psutil.NoSuchProcess:
            continue
    for p in tree:
        _signal(p, signal.SIGTERM)
        if p.pid in outcome.stopped_pids:
            _signal(p, signal.SIGCONT)
    _, alive = psutil.wait_procs(tree, timeout=KILL_GRACE_S)
    for p in alive:
        _signal(p, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=KILL_GRACE_S)


def _signal(p: psutil.Process, sig: int) -> None:
    try:
        p.send_signal(sig)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        pass


def default_results_dir() -> Path:
    base = Path(os.environ.get("TMPDIR", "/tmp"))
    return base / f"ddpcheck-{os.getpid()}-{int(time.time())}"
